// The event loop: one thread reads the requests and writes each reply when it is due.
//
// A request the model makes wait is a job in a heap ordered by due time. The loop's
// thread (locked, timer slack 1 us) sleeps in ppoll(2) on /dev/fuse until a request
// arrives or the earliest job is due; each time it wakes it reads every request the
// kernel has queued (non-blocking reads until EAGAIN) and answers every job that is due,
// from the same thread.
//
// A wake-up is what costs here (a context switch on this kind of VM is 10-15 us of CPU,
// more than the reads and writes of a request), so when they come close together (the
// previous wake-up less than `window` ago) the loop lets several requests share the next
// one: it waits up to `hold` before looking again, with hold = min(window, share x the
// backlog the model has queued) and never more than share x the modelled wait of any job
// that would be answered late by it. So a reply is late, and an arrival read late, by at
// most `share` (5%) of what the device itself makes them wait; an idle or slow device
// (an HDD, a request at queue depth 1) is answered at once. What the holding cost is
// counted: replies late by it, arrivals held and for how long (at most), in the stats.
//
// Before it (go-fuse's server, a goroutine a request parked until its reply, each
// sleeping on a locked thread of its own), a request cost 45-60 us of CPU here at queue
// depth 32 (bench/disk_cpu.py).
package main

import (
	"container/heap"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// spinNs: below this much time left, the loop polls the clock rather than sleeping (a
// sleep that short costs more than it saves, and wakes late).
const spinNs = 3000

// job: one request waiting for its modelled completion, with what its reply needs.
type job struct {
	due   int64 // ns since the daemon started
	index int

	unique                  uint64
	ent                     *ringEnt // the ring entry it came in and is answered from (nil: /dev/fuse)
	op                      Op
	off, n                  int64
	arrived, done, modelled float64 // s since start: arrival, image I/O done, model done
	dueS                    float64
	data                    []byte  // a read's data
	buf                     *[]byte // its buffer, back to the pool after the reply
	written                 uint32  // a write's count
	// a request whose image I/O would wait, made by a worker (fuse.go)
	errno   syscall.Errno
	req     *[]byte // a write's request buffer, back to its pool once written
	payload []byte  // a write's data, in that buffer
}

func (j *job) waitNs() int64 { return int64((j.dueS - j.arrived) * 1e9) }

type jobHeap []*job

func (h jobHeap) Len() int           { return len(h) }
func (h jobHeap) Less(i, j int) bool { return h[i].due < h[j].due }
func (h jobHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *jobHeap) Push(x any) {
	j := x.(*job)
	j.index = len(*h)
	*h = append(*h, j)
}
func (h *jobHeap) Pop() any {
	old := *h
	j := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return j
}

type loopCounters struct {
	wakeups  atomic.Int64 // the loop's looks (each after a sleep, a spin or an arrival)
	batches  atomic.Int64 // looks that answered at least one job
	released atomic.Int64 // jobs answered by the loop (not at once)
	spins    atomic.Int64 // waits polled instead of slept
	holds    atomic.Int64 // looks deferred to share a wake-up
	heldNs   atomic.Int64 // the longest each such deferral could have held an arrival, summed
}

// pacing: how wake-ups are shared (see the file's comment).
type pacing struct {
	window int64   // ns: wake-ups closer than this are shared
	share  float64 // the most a reply or an arrival may be held, as a share of the waits
}

type completer struct {
	start   time.Time
	h       jobHeap
	pace    pacing
	release func(*job) // answers a job
	c       loopCounters
	last    int64 // the previous wake-up
}

const never = int64(^uint64(0) >> 1)

func newCompleter(start time.Time, release func(*job), pace pacing) *completer {
	return &completer{start: start, release: release, pace: pace, last: -never}
}

func (c *completer) nowNs() int64 { return int64(time.Since(c.start)) }

// add a job, answered at j.due (ns since start). The loop's thread only.
func (c *completer) add(j *job) { heap.Push(&c.h, j) }

// answerDue answers every job due by now; how many.
func (c *completer) answerDue(now int64) int {
	n := 0
	for len(c.h) > 0 && c.h[0].due <= now {
		c.release(heap.Pop(&c.h).(*job))
		n++
	}
	if n > 0 {
		c.c.batches.Add(1)
		c.c.released.Add(int64(n))
	}
	return n
}

// next: when the loop next looks, and whether an arrival may wake it before then. With
// nothing waiting: never, woken by arrivals. When its wake-ups come close together (the
// previous one less than a window ago), it looks again no earlier than `hold` from now,
// arrivals included, unless a job's own share of its wait ends sooner (a job due in the
// meantime is answered then, with the arrivals); otherwise at the earliest due time,
// woken by any arrival before it.
func (c *completer) next(now int64) (at int64, arrivals bool) {
	recent := now-c.last < c.pace.window
	c.last = now
	if len(c.h) == 0 {
		return never, true
	}
	at = c.h[0].due
	if !recent || c.pace.share <= 0 {
		return at, true
	}
	backlog := int64(0)
	for _, j := range c.h {
		backlog = max(backlog, j.due-now)
	}
	limit := now + min(c.pace.window, int64(c.pace.share*float64(backlog)))
	for _, j := range c.h { // no job later than its own share
		if j.due < limit {
			limit = min(limit, j.due+int64(c.pace.share*float64(j.waitNs())))
		}
	}
	if limit-now < spinNs {
		return at, true
	}
	c.c.holds.Add(1)
	c.c.heldNs.Add(limit - now)
	return limit, false
}

// loopIO: how the loop waits for and reads arrivals: ppoll(2) and reads of /dev/fuse
// (pollIO), or the ring's waits (ring.go).
type loopIO interface {
	serveAll() bool                  // read and handle every request queued now; false when the mount is gone
	sleep(left int64, arrivals bool) // wait `left` ns (-1: no limit), or for an arrival when `arrivals`
	flush()                          // hand over the replies written, before a spin
}

// run: the loop, until the mount is gone.
func (c *completer) run(io loopIO) {
	runtime.LockOSThread()
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1000, 0, 0, 0)
	for {
		c.c.wakeups.Add(1)
		if !io.serveAll() {
			return
		}
		now := c.nowNs()
		c.answerDue(now)
		at, arrivals := c.next(now)
		if at == never {
			io.sleep(-1, true)
			continue
		}
		left := at - c.nowNs()
		if left <= 0 {
			continue
		}
		if left <= spinNs {
			c.c.spins.Add(1)
			io.flush()
			for c.nowNs() < at {
			}
			continue
		}
		io.sleep(left, arrivals)
	}
}

// pollIO: arrivals on file descriptors (/dev/fuse, the workers' eventfd), waited for with
// ppoll(2) and read by `read` (false when the mount is gone).
type pollIO struct {
	fds  []int
	read func() bool
	// pending: requests may be queued (the last sleep did not watch for them, or said
	// so); a look after a timed sleep that saw none reads nothing (a read that says
	// EAGAIN is a system call for nothing)
	pending bool
	polled  []unix.PollFd
}

func (p *pollIO) serveAll() bool {
	ok := !p.pending || p.read()
	p.pending = true
	return ok
}

func (p *pollIO) flush() {}

func (p *pollIO) sleep(left int64, arrivals bool) {
	if p.polled == nil {
		for _, fd := range p.fds {
			p.polled = append(p.polled, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
		}
	}
	fds := p.polled
	if !arrivals {
		fds = nil
	}
	if left < 0 {
		_, _ = unix.Ppoll(fds, nil, nil)
		return
	}
	ts := unix.NsecToTimespec(left)
	if k, err := unix.Ppoll(fds, &ts, nil); k == 0 && err == nil && fds != nil {
		p.pending = false // the time came, and no request
	}
}
