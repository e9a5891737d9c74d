// A minimal io_uring: what the FUSE-over-io_uring transport (ring.go) needs, straight on
// the system calls (include/uapi/linux/io_uring.h): a ring of 128-byte entries, submitted
// and waited on by one thread, with the wait bounded by a timeout.
package main

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// io_uring's ABI
const (
	setupCQSize       = 1 << 3
	setupSubmitAll    = 1 << 7
	setupCoopTaskrun  = 1 << 8
	setupSQE128       = 1 << 10
	setupSingleIssuer = 1 << 12
	setupDeferTaskrun = 1 << 13
	featSingleMmap    = 1 << 0
	featExtArg        = 1 << 8
	enterGetEvents    = 1 << 0
	enterExtArg       = 1 << 3
	offSQRing         = 0
	offSQEs           = 0x10000000
	opPollAdd         = 6
	opURingCmd        = 46
	pollAddMulti      = 1 << 0
	cqeFMore          = 1 << 1
	sqeBytes          = 128 // SQE128: the command's 80 bytes follow the usual 48
	cqeBytes          = 16
	sqeCmdOffset      = 48
	getEventsArgBytes = 24
	uringParamsBytes  = 120
)

type sqringOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type cqringOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

type uringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqringOffsets
	cqOff                                                                  cqringOffsets
}

type getEventsArg struct {
	sigmask   uint64
	sigmaskSz uint32
	minWaitUs uint32
	ts        uint64
}

// uring: one ring, used by the thread that made it (IORING_SETUP_SINGLE_ISSUER).
type uring struct {
	fd                     int
	ringMem, cqMem, sqeMem []byte
	sqHead, sqTail         *uint32
	sqMask                 uint32
	sqEntries              uint32
	cqHead, cqTail         *uint32
	cqMask                 uint32
	cqes                   unsafe.Pointer
	unsubmitted            uint32 // SQEs filled and not yet handed to the kernel
	deferred               bool   // its completions' work runs only when it waits (DEFER_TASKRUN)
}

func ptrAt[T any](mem []byte, off uint32) *T { return (*T)(unsafe.Pointer(&mem[off])) }

// newURing: a ring of `entries` SQEs (128 bytes each) and twice as many completions.
// Completions' work deferred to the waits where the kernel has it (6.1 and later), so
// that a wake-up comes only when what the wait asked for is there.
func newURing(entries uint32) (*uring, error) {
	if unsafe.Sizeof(uringParams{}) != uringParamsBytes || unsafe.Sizeof(getEventsArg{}) != getEventsArgBytes {
		return nil, fmt.Errorf("io_uring structures of unexpected sizes")
	}
	base := uint32(setupSQE128 | setupCQSize | setupSubmitAll)
	var fd int
	var p uringParams
	deferred := true
	for _, extra := range []uint32{setupSingleIssuer | setupDeferTaskrun, setupCoopTaskrun, 0} {
		p = uringParams{flags: base | extra, cqEntries: 2 * entries}
		r, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
		if errno == 0 {
			fd = int(r)
			deferred = extra&setupDeferTaskrun != 0
			break
		}
		if errno != unix.EINVAL || extra == 0 {
			return nil, fmt.Errorf("io_uring_setup: %w", errno)
		}
	}
	if p.features&featSingleMmap == 0 || p.features&featExtArg == 0 {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("io_uring without single mmap or timed waits (a kernel older than 5.11)")
	}
	u := &uring{fd: fd, deferred: deferred}
	ringBytes := max(p.sqOff.array+p.sqEntries*4, p.cqOff.cqes+p.cqEntries*cqeBytes)
	var err error
	if u.ringMem, err = unix.Mmap(fd, offSQRing, int(ringBytes), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		u.close()
		return nil, fmt.Errorf("io_uring rings: %w", err)
	}
	if u.sqeMem, err = unix.Mmap(fd, offSQEs, int(p.sqEntries*sqeBytes), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		u.close()
		return nil, fmt.Errorf("io_uring entries: %w", err)
	}
	u.sqHead, u.sqTail = ptrAt[uint32](u.ringMem, p.sqOff.head), ptrAt[uint32](u.ringMem, p.sqOff.tail)
	u.sqMask, u.sqEntries = *ptrAt[uint32](u.ringMem, p.sqOff.ringMask), p.sqEntries
	// the index array maps slot i to entry i, once for all
	for i := uint32(0); i < p.sqEntries; i++ {
		*ptrAt[uint32](u.ringMem, p.sqOff.array+4*i) = i
	}
	u.cqHead, u.cqTail = ptrAt[uint32](u.ringMem, p.cqOff.head), ptrAt[uint32](u.ringMem, p.cqOff.tail)
	u.cqMask = *ptrAt[uint32](u.ringMem, p.cqOff.ringMask)
	u.cqes = unsafe.Pointer(&u.ringMem[p.cqOff.cqes])
	return u, nil
}

func (u *uring) close() {
	if u.sqeMem != nil {
		_ = unix.Munmap(u.sqeMem)
	}
	if u.ringMem != nil {
		_ = unix.Munmap(u.ringMem)
	}
	_ = unix.Close(u.fd)
}

// sqe: the next free entry, zeroed, for the caller to fill; handed over at the next
// submit or wait. When the ring is full, what is in it is submitted first.
func (u *uring) sqe() ([]byte, error) {
	tail := *u.sqTail + u.unsubmitted
	if tail-atomic.LoadUint32(u.sqHead) >= u.sqEntries {
		if err := u.submit(); err != nil {
			return nil, err
		}
		tail = *u.sqTail
	}
	i := tail & u.sqMask
	e := u.sqeMem[i*sqeBytes : (i+1)*sqeBytes]
	clear(e)
	u.unsubmitted++
	return e, nil
}

// publish: the filled entries become visible to the kernel; how many.
func (u *uring) publish() uint32 {
	n := u.unsubmitted
	if n > 0 {
		atomic.StoreUint32(u.sqTail, *u.sqTail+n)
		u.unsubmitted = 0
	}
	return n
}

// submit what was filled, without waiting.
func (u *uring) submit() error {
	n := u.publish()
	if n == 0 {
		return nil
	}
	_, err := u.enter(n, 0, 0, nil)
	return err
}

// wait submits what was filled and waits until `min` completions are there or, when
// `timeoutNs` >= 0, that much time has passed; with min 0, it only runs the completions'
// deferred work (their copies into our buffers) and returns.
func (u *uring) wait(min uint32, timeoutNs int64) error {
	n := u.publish()
	flags := uint32(enterGetEvents)
	var arg *getEventsArg
	var ts unix.Timespec
	if timeoutNs >= 0 {
		ts = unix.NsecToTimespec(timeoutNs)
		arg = &getEventsArg{ts: uint64(uintptr(unsafe.Pointer(&ts)))}
		flags |= enterExtArg
	}
	_, err := u.enter(n, min, flags, arg)
	if err == unix.ETIME || err == unix.EINTR {
		return nil
	}
	return err
}

func (u *uring) enter(submit, min, flags uint32, arg *getEventsArg) (int, error) {
	argSize := uintptr(0)
	if arg != nil {
		argSize = getEventsArgBytes
	}
	for {
		r, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(u.fd), uintptr(submit), uintptr(min),
			uintptr(flags), uintptr(unsafe.Pointer(arg)), argSize)
		switch {
		case errno == unix.EINTR && submit > 0:
			continue
		case errno != 0:
			return 0, errno
		}
		return int(r), nil
	}
}

// reap hands every completion there now to `f` (its user data, result and flags); how many.
func (u *uring) reap(f func(data uint64, res int32, flags uint32)) int {
	head := *u.cqHead
	tail := atomic.LoadUint32(u.cqTail)
	n := 0
	for ; head != tail; head++ {
		c := unsafe.Add(u.cqes, uintptr(head&u.cqMask)*cqeBytes)
		data, res, fl := *(*uint64)(c), *(*int32)(unsafe.Add(c, 8)), *(*uint32)(unsafe.Add(c, 12))
		// the slot is the kernel's again once the head moves past it
		atomic.StoreUint32(u.cqHead, head+1)
		f(data, res, fl)
		n++
		tail = atomic.LoadUint32(u.cqTail)
	}
	return n
}

// little-endian stores into an SQE
func put16(b []byte, off int, v uint16) { *(*uint16)(unsafe.Pointer(&b[off])) = v }
func put32(b []byte, off int, v uint32) { *(*uint32)(unsafe.Pointer(&b[off])) = v }
func put64(b []byte, off int, v uint64) { *(*uint64)(unsafe.Pointer(&b[off])) = v }

// poll: a multishot poll of `fd` for input (POLLIN; errors and hang-ups always count).
func (u *uring) poll(fd int, data uint64) error {
	e, err := u.sqe()
	if err != nil {
		return err
	}
	e[0] = opPollAdd
	put32(e, 4, uint32(fd))
	put32(e, 24, pollAddMulti)
	put32(e, 28, unix.POLLIN)
	put64(e, 32, data)
	return nil
}
