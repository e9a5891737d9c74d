package main

import (
	"context"
	"math"
	"sync"
	"time"
)

// inStep keeps the sessions of a fast replay within a drift of each other in the
// capture's time. Without it, as fast as possible lets one session race ahead of the
// others: on a 2-CPU host one of four pgbench sessions ended at 1.6 s and another at
// 2.5 s, so for a third of the replay it ran with three sessions of the captured four
// (less concurrency than the capture had, and another mix of statements). With it, a
// session begins a transaction only when its captured time is within the drift of every
// other session's position: the captured interleaving, compressed in time.
//
// A session's position: the captured end of the statement it runs (it is expected to end
// as it did in the capture; one that runs longer holds the others when they are a drift
// past that end), the captured start of its next transaction between them (the think
// time skipped), and none once it has ended. A session waits only before a transaction,
// holding no lock of its own, so the wait cannot deadlock with the rows others need.
type inStep struct {
	mu      sync.Mutex
	cond    *sync.Cond
	drift   int64   // microseconds of captured time
	pos     []int64 // this process's sessions, by their place in the part
	others  int64   // the lowest position of the other processes' sessions
	low     int64   // min(pos, others), kept up to date
	waits   int64   // transactions that waited
	waitedN int64   // nanoseconds they waited
}

const ended = math.MaxInt64

// newInStep places each session at its first statement's captured start (ended when it
// has none): one that waits for others to end, or to connect, holds no one behind it.
func newInStep(sessions []*Session, drift time.Duration, others int64) *inStep {
	s := &inStep{drift: drift.Microseconds(), pos: make([]int64, len(sessions)), others: others}
	s.cond = sync.NewCond(&s.mu)
	for k, session := range sessions {
		s.pos[k] = firstAt(session)
	}
	s.low = math.MinInt64
	s.lowest()
	return s
}

// firstAt is when a session's first statement began in the capture (ended: none).
func firstAt(session *Session) int64 {
	first, _, any := span(session)
	if !any {
		return ended
	}
	return first
}

// lowest recomputes low; every waiter is woken when it rose. Called with mu held.
func (s *inStep) lowest() {
	low := min(s.others, s.minPos())
	if low > s.low && s.cond != nil {
		s.cond.Broadcast()
	}
	s.low = low
}

// minPos is the lowest position of this process's sessions. Called with mu held.
func (s *inStep) minPos() int64 {
	low := int64(ended)
	for _, p := range s.pos {
		low = min(low, p)
	}
	return low
}

// advance moves session k's position to p, never back. Called with mu held.
func (s *inStep) advance(k int, p int64) {
	if p > s.pos[k] {
		s.pos[k] = p
		s.lowest()
	}
}

// place moves session k's position to p (never back).
func (s *inStep) place(k int, p int64) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advance(k, p)
}

// setOthers is the lowest position of the other processes' sessions.
func (s *inStep) setOthers(p int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.others = p
	s.lowest()
}

// local is the lowest position of this process's sessions.
func (s *inStep) local() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.minPos()
}

// begin places session k at a transaction that began at t in the capture, and returns
// when t is within the drift of every session's position (or ctx ends).
func (s *inStep) begin(ctx context.Context, k int, t int64) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advance(k, t)
	if s.near(t) || ctx.Err() != nil {
		return
	}
	began := time.Now()
	stop := context.AfterFunc(ctx, func() { s.mu.Lock(); s.cond.Broadcast(); s.mu.Unlock() })
	defer stop()
	for !s.near(t) && ctx.Err() == nil {
		s.cond.Wait()
	}
	s.waits++
	s.waitedN += int64(time.Since(began))
}

// near says t is within the drift of every position. Called with mu held.
func (s *inStep) near(t int64) bool {
	return s.low == ended || t-s.drift <= s.low
}

// end takes session k out: it no longer holds anyone.
func (s *inStep) end(k int) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pos[k] = ended
	s.lowest()
}

func (s *inStep) figures() (int64, float64) {
	if s == nil {
		return 0, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waits, float64(s.waitedN) / 1e9
}

// ready places session k at a transaction that began at t in the capture and says
// whether t is within the drift of every session's position: the loop's begin, which
// never waits (a session held is looked at again when positions change).
func (s *inStep) ready(k int, t int64) bool {
	if s == nil {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advance(k, t)
	return s.near(t)
}

// waited counts a transaction the loop held in step for d.
func (s *inStep) waited(d time.Duration) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waits++
	s.waitedN += int64(d)
}
