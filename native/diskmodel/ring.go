// FUSE over io_uring (--transport io_uring): the kernel hands each request to us in a
// buffer we registered with it, and takes the reply from the same buffer when we commit
// it, with one io_uring for both (Documentation/filesystems/fuse-io-uring.rst). A request
// then costs no read(2) of /dev/fuse and no writev(2) of its reply: the kernel copies it
// in during our wait (the ring's deferred work), and the commits of a batch go in the
// system call that waits for the next. Measured on a 2-vCPU VM it is no cheaper than
// /dev/fuse at queue depth 32 (20.2 us of CPU a request against 19.6) and a little at
// depth 1 (38.2 against 40.5): the copies and the wake-ups are the cost, not the system
// calls (bench/disk_cpu.py --transports; docs/guide/emulated-disks.md). /dev/fuse is the
// default.
//
// Linux 6.14 and later have it, off unless fuse's `enable_uring` parameter is on; the
// kernel offers it in FUSE_INIT only then. The ring is made before the INIT reply asks
// for it (the kernel holds every request after that reply until each queue has an entry),
// and where anything fails the daemon stays on /dev/fuse, which also carries, with the
// ring, what the ring does not: INIT, interrupts and forgets.
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

const (
	fuseURingRegister       = 1
	fuseURingCommitAndFetch = 2
	capInitExt              = 1 << 30 // FUSE_INIT_EXT: the INIT reply's Flags2 counts
	// fuse_uring_req_header: the in or out header (128 bytes), the operation's own
	// header (128), then fuse_uring_ent_in_out (flags, commit_id, payload_sz, ...)
	ringOpIn        = 128
	ringCommitID    = 264
	ringPayloadSize = 272
	ringHeaderBytes = 288
	ringSlotBytes   = 1024 // a slot: the header, then the entry's two iovecs at ringIovecs
	ringIovecs      = 512
	// ringDepth: entries per queue, as many as the kernel lets a mount have in flight in
	// the background (the INIT reply's MaxBackground) and a loop device queues (128): a
	// request the kernel had no entry for would reach us late, and the model with it
	ringDepth  = 128
	tagPollDev = 1 << 62 // the completions of the polls of /dev/fuse and of the workers' kick
	tagPollEfd = 1<<62 + 1
	// a batch of completions submits the replies already due once it has run this long
	ringFlushNs = 50_000
)

// ringEnt: one registered entry: the buffers a request comes in and its reply goes out.
type ringEnt struct {
	index    int
	qid      uint16
	slot     []byte // the header (ringHeaderBytes), then the iovecs
	payload  []byte // maxWrite bytes: a write's data, a read's reply, the rest
	commitID uint64 // the request it holds, to name in its commit
}

type fuseRing struct {
	u          *uring
	slots      []byte // mapped: every entry's slot
	payloads   []byte // mapped: every entry's payload
	ents       []ringEnt
	scratch    [40 + ringOpIn]byte // a request's headers, laid out as on /dev/fuse
	fresh      bool                // the last wait ran the deferred work: reap without a system call
	lastSubmit int64
	pollDev    bool // the polls are armed
	pollEfd    bool
	// completions reaped while registering, to handle first: the last entry registered
	// makes the ring ready, and the requests the kernel held until then come at once
	early []cqe
}

type cqe struct {
	data  uint64
	res   int32
	flags uint32
}

// possibleCPUs: how many queues the kernel's ring has (one per possible CPU).
func possibleCPUs() (int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/possible")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, part := range strings.Split(strings.TrimSpace(string(b)), ",") {
		lo, hi, found := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return 0, fmt.Errorf("cpu list %q", b)
		}
		z := a
		if found {
			if z, err = strconv.Atoi(hi); err != nil || z < a {
				return 0, fmt.Errorf("cpu list %q", b)
			}
		}
		n = max(n, z+1)
	}
	if n == 0 {
		return 0, fmt.Errorf("cpu list %q", b)
	}
	return n, nil
}

// newFuseRing: the io_uring and the buffers of every entry of every queue, not yet
// registered. The payloads are mapped, not touched: a page costs memory once a request
// has used it (a 1 MiB write, the whole payload).
func newFuseRing() (*fuseRing, error) {
	queues, err := possibleCPUs()
	if err != nil {
		return nil, err
	}
	n := queues * ringDepth
	u, err := newURing(uint32(2 * n))
	if err != nil {
		return nil, err
	}
	r := &fuseRing{u: u, ents: make([]ringEnt, n)}
	flags := unix.MAP_PRIVATE | unix.MAP_ANONYMOUS | unix.MAP_NORESERVE
	if r.slots, err = unix.Mmap(-1, 0, n*ringSlotBytes, unix.PROT_READ|unix.PROT_WRITE, flags); err == nil {
		r.payloads, err = unix.Mmap(-1, 0, n*maxWrite, unix.PROT_READ|unix.PROT_WRITE, flags)
	}
	if err != nil {
		r.close()
		return nil, fmt.Errorf("ring buffers: %w", err)
	}
	for i := range r.ents {
		e := &r.ents[i]
		e.index, e.qid = i, uint16(i/ringDepth)
		e.slot = r.slots[i*ringSlotBytes : (i+1)*ringSlotBytes]
		e.payload = r.payloads[i*maxWrite : (i+1)*maxWrite]
		iov := (*[2]unix.Iovec)(unsafe.Pointer(&e.slot[ringIovecs]))
		iov[0] = unix.Iovec{Base: &e.slot[0], Len: ringHeaderBytes}
		iov[1] = unix.Iovec{Base: &e.payload[0], Len: maxWrite}
	}
	return r, nil
}

func (r *fuseRing) close() {
	if r.u != nil {
		r.u.close() // cancels what the kernel still holds of ours
	}
	if r.slots != nil {
		_ = unix.Munmap(r.slots)
	}
	if r.payloads != nil {
		_ = unix.Munmap(r.payloads)
	}
}

func (r *fuseRing) cmd(fd int, op uint32, i int) ([]byte, error) {
	e, err := r.u.sqe()
	if err != nil {
		return nil, err
	}
	e[0] = opURingCmd
	put32(e, 4, uint32(fd))
	put32(e, 8, op)
	put64(e, 32, uint64(i+1))
	put16(e, sqeCmdOffset+16, r.ents[i].qid) // fuse_uring_cmd_req: flags, commit_id, qid
	return e, nil
}

// register hands every entry to the kernel, and polls /dev/fuse and the workers' kick.
// An entry the kernel refuses at once (a kernel that knows no ring, or another mind about
// its sizes) fails it all: the kernel then goes back to /dev/fuse by itself.
func (r *fuseRing) register(fd, efd int) error {
	for i := range r.ents {
		e, err := r.cmd(fd, fuseURingRegister, i)
		if err != nil {
			return err
		}
		put64(e, 16, uint64(uintptr(unsafe.Pointer(&r.ents[i].slot[ringIovecs]))))
		put32(e, 24, 2)
	}
	if err := r.armPolls(fd, efd); err != nil {
		return err
	}
	if err := r.u.wait(0, -1); err != nil {
		return fmt.Errorf("io_uring_enter: %w", err)
	}
	var refused error
	r.u.reap(func(data uint64, res int32, flags uint32) {
		if data != tagPollDev && data != tagPollEfd && res < 0 && refused == nil {
			refused = fmt.Errorf("the kernel refused a ring entry: %w", syscall.Errno(-res))
		}
		r.early = append(r.early, cqe{data, res, flags})
	})
	r.fresh = true // what is there, is in r.early
	return refused
}

func (r *fuseRing) armPolls(fd, efd int) error {
	if !r.pollDev {
		if err := r.u.poll(fd, tagPollDev); err != nil {
			return err
		}
		r.pollDev = true
	}
	if !r.pollEfd {
		if err := r.u.poll(efd, tagPollEfd); err != nil {
			return err
		}
		r.pollEfd = true
	}
	return nil
}

// serveRing: every completion there (requests, /dev/fuse readable, workers done),
// handled; false once the mount is gone.
func (s *server) serveRing() bool {
	r := s.ring
	if !r.fresh {
		if err := r.u.wait(0, -1); err != nil {
			return false
		}
	}
	r.fresh = false
	ok := true
	one := func(data uint64, res int32, flags uint32) {
		if !ok {
			return
		}
		switch data {
		case tagPollDev:
			r.pollDev = flags&cqeFMore != 0
			ok = s.drain()
		case tagPollEfd:
			r.pollEfd = flags&cqeFMore != 0
			s.adopt()
		default:
			if res < 0 { // ENOTCONN: unmounted, the entries handed back
				ok = false
				return
			}
			ok = s.handleRing(&r.ents[data-1])
		}
		now := s.d.done.nowNs()
		s.d.done.answerDue(now)
		if r.u.unsubmitted > 0 && now-r.lastSubmit > ringFlushNs {
			_ = r.u.submit()
			r.lastSubmit = now
		}
	}
	for _, c := range r.early {
		one(c.data, c.res, c.flags)
	}
	r.early = nil
	r.u.reap(one)
	if ok && (!r.pollDev || !r.pollEfd) {
		ok = r.armPolls(s.fd, s.efd) == nil
	}
	return ok
}

// handleRing: the request in an entry, handled as one read from /dev/fuse (its headers
// put together as they are laid out there; its data, or a name, from the payload).
func (s *server) handleRing(e *ringEnt) bool {
	r := s.ring
	copy(r.scratch[:inHeaderSize], e.slot[:inHeaderSize])
	copy(r.scratch[inHeaderSize:], e.slot[ringOpIn:2*ringOpIn])
	e.commitID = *(*uint64)(unsafe.Pointer(&e.slot[ringCommitID]))
	n := *(*uint32)(unsafe.Pointer(&e.slot[ringPayloadSize]))
	return s.handle(r.scratch[:], e.payload[:min(int(n), len(e.payload))], e)
}

// sleepRing: submit the replies, then wait for a completion (when `arrivals`) or until
// `left` ns have passed (-1: no limit).
func (s *server) sleepRing(left int64, arrivals bool) {
	r := s.ring
	if len(r.early) > 0 { // reaped while registering, not handled yet: nothing to wait for
		return
	}
	want := uint32(1)
	if !arrivals {
		want = uint32(len(r.ents) + 2) // more than can come: the time decides
	}
	_ = r.u.wait(want, left)
	r.fresh = true
	r.lastSubmit = s.d.done.nowNs()
}

// replyRing: the reply into the entry's buffers, and its commit queued (submitted with
// the batch, or by the next wait). A payload already in the entry (a read's data) is
// not copied.
func (s *server) replyRing(e *ringEnt, unique uint64, errno syscall.Errno, payload ...[]byte) {
	n := 0
	if errno == 0 {
		for _, p := range payload {
			if len(p) == 0 {
				continue
			}
			if &p[0] != &e.payload[n] {
				copy(e.payload[n:], p)
			}
			n += len(p)
		}
	}
	h := at[fuse.OutHeader](e.slot)
	*h = fuse.OutHeader{Length: uint32(outHeader + n), Status: -int32(errno), Unique: unique}
	*(*uint32)(unsafe.Pointer(&e.slot[ringPayloadSize])) = uint32(n)
	sqe, err := s.ring.cmd(s.fd, fuseURingCommitAndFetch, e.index)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgfsbench-disk: a reply could not be queued:", err)
		return
	}
	put64(sqe, sqeCmdOffset+8, e.commitID)
}
