package main

import (
	"sort"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// runLoop runs a completer's loop with an eventfd standing for /dev/fuse: `submit` hands
// it jobs (each "arrives" when the loop reads it), and every answer is recorded.
type loopUnderTest struct {
	c        *completer
	efd      int
	mu       sync.Mutex
	queued   []*job
	answered map[uint64]int64 // unique -> when answered (ns since start)
}

func runLoop(t *testing.T, pace pacing) *loopUnderTest {
	t.Helper()
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	l := &loopUnderTest{efd: efd, answered: map[uint64]int64{}}
	l.c = newCompleter(time.Now(), func(j *job) {
		l.mu.Lock()
		l.answered[j.unique] = l.c.nowNs()
		l.mu.Unlock()
	}, pace)
	read := func() bool {
		var b [8]byte
		_, _ = unix.Read(efd, b[:])
		l.mu.Lock()
		q := l.queued
		l.queued = nil
		l.mu.Unlock()
		now := l.c.nowNs()
		for _, j := range q {
			// as disk.schedule does: the wait runs from the arrival, read now
			j.arrived = float64(now) / 1e9
			j.due = now + j.due
			j.dueS = float64(j.due) / 1e9
			if j.due <= now {
				l.c.release(j)
				continue
			}
			l.c.add(j)
		}
		return true
	}
	go l.c.run(&pollIO{fds: []int{efd}, read: read, pending: true})
	return l
}

// submit a job that waits `wait` from its arrival.
func (l *loopUnderTest) submit(unique uint64, wait time.Duration) {
	l.mu.Lock()
	l.queued = append(l.queued, &job{unique: unique, due: int64(wait)})
	l.mu.Unlock()
	_, _ = unix.Write(l.efd, []byte{1, 0, 0, 0, 0, 0, 0, 0})
}

func (l *loopUnderTest) waitAll(t *testing.T, n int) map[uint64]int64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l.mu.Lock()
		k := len(l.answered)
		l.mu.Unlock()
		if k >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d answered", k, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[uint64]int64{}
	for k, v := range l.answered {
		out[k] = v
	}
	return out
}

// Without sharing, every job is answered at its time, never before: a stream of jobs,
// some a few microseconds apart, arriving while the loop sleeps towards others.
func TestTheLoopAnswersEachJobAtItsTimeNeverBefore(t *testing.T) {
	l := runLoop(t, pacing{window: int64(100 * time.Microsecond), share: 0})
	const n = 2000
	submitted := make([]int64, n)
	waits := make([]int64, n)
	for i := 0; i < n; i++ {
		waits[i] = int64(time.Duration(50+(i*7919)%2000) * time.Microsecond)
		submitted[i] = l.c.nowNs()
		l.submit(uint64(i), time.Duration(waits[i]))
		if i%50 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	answered := l.waitAll(t, n)
	late := make([]int64, 0, n)
	for i := 0; i < n; i++ {
		got := answered[uint64(i)] - submitted[i]
		if got < waits[i] {
			t.Fatalf("job %d answered %v after it was submitted, its wait %v", i, time.Duration(got), time.Duration(waits[i]))
		}
		late = append(late, got-waits[i])
	}
	sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
	if med := time.Duration(late[n/2]); med > 500*time.Microsecond {
		t.Fatalf("median lateness %v", med)
	}
	if l.c.c.holds.Load() != 0 {
		t.Fatalf("%d holds with sharing off", l.c.c.holds.Load())
	}
}

// With sharing, dense jobs with long waits share wake-ups (fewer looks than jobs), each
// answered no earlier than its time and late by no more than its share of its wait
// (plus what this machine's wake-ups add); a lone job with a short wait is not held.
func TestSharedWakeUpsHoldEachJobByNoMoreThanItsShare(t *testing.T) {
	const share = 0.05
	l := runLoop(t, pacing{window: int64(200 * time.Microsecond), share: share})
	const n = 3000
	wait := 2 * time.Millisecond
	submitted := make([]int64, n)
	for i := 0; i < n; i++ {
		submitted[i] = l.c.nowNs()
		l.submit(uint64(i), wait)
		time.Sleep(10 * time.Microsecond)
	}
	answered := l.waitAll(t, n)
	over := 0
	for i := 0; i < n; i++ {
		got := answered[uint64(i)] - submitted[i]
		if got < int64(wait) {
			t.Fatalf("job %d answered early: %v", i, time.Duration(got))
		}
		if got-int64(wait) > int64(share*float64(wait))+int64(300*time.Microsecond) {
			over++
		}
	}
	if over > n/20 {
		t.Fatalf("%d of %d jobs later than their share allows", over, n)
	}
	if l.c.c.holds.Load() == 0 || l.c.c.batches.Load() >= int64(n) {
		t.Fatalf("no wake-up shared: %d holds, %d batches for %d jobs", l.c.c.holds.Load(), l.c.c.batches.Load(), n)
	}
	holds := l.c.c.holds.Load()
	time.Sleep(5 * time.Millisecond) // the loop is idle again: a lone short job is not held
	l.submit(n, 100*time.Microsecond)
	l.waitAll(t, n+1)
	if l.c.c.holds.Load() != holds {
		t.Fatal("a lone job was held")
	}
}
