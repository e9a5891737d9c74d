package main

import (
	"context"
	"io"
	"net"
	"syscall"
	"unsafe"
)

// rawConn is a connection whose reads and writes are raw system calls on its
// non-blocking socket, waiting in Go's poller only when the socket is not ready.
//
// Go's own net.Conn enters the scheduler's "in a system call" state for every read and
// write. A write to the server's socket wakes its backend, which on a busy host preempts
// the writer in the kernel; the runtime's monitor then takes the P away from the blocked
// thread, hands it to another (futex wakes), and keeps polling every 20 µs. On a 2-CPU
// host replaying 4 sessions, that left a fifth of the CPU idle and the server waiting
// for a replayer that spent half its time in the runtime. A non-blocking socket's read or
// write never blocks, so the P can stay where it is.
type rawConn struct {
	net.Conn
	rc syscall.RawConn
}

type syscallConn interface {
	SyscallConn() (syscall.RawConn, error)
}

// dialRaw dials as pgconn would and wraps the connection when it has a socket of its own.
func dialRaw(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	sc, ok := c.(syscallConn)
	if !ok {
		return c, nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return c, nil
	}
	return &rawConn{Conn: c, rc: rc}, nil
}

func rawIO(trap uintptr, fd uintptr, b []byte) (int, syscall.Errno) {
	for {
		n, _, e := syscall.RawSyscall(trap, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		if e != syscall.EINTR {
			return int(n), e
		}
	}
}

func (c *rawConn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := c.rc.Read(func(fd uintptr) bool {
		n, errno = rawIO(syscall.SYS_READ, fd, b)
		return errno != syscall.EAGAIN
	})
	if err != nil {
		return 0, err
	}
	if errno != 0 {
		return 0, &net.OpError{Op: "read", Net: "unix", Err: errno}
	}
	if n == 0 {
		return 0, errEOF
	}
	return n, nil
}

func (c *rawConn) Write(b []byte) (int, error) {
	written := 0
	for written < len(b) {
		var n int
		var errno syscall.Errno
		err := c.rc.Write(func(fd uintptr) bool {
			n, errno = rawIO(syscall.SYS_WRITE, fd, b[written:])
			return errno != syscall.EAGAIN
		})
		if err != nil {
			return written, err
		}
		if errno != 0 {
			return written, &net.OpError{Op: "write", Net: "unix", Err: errno}
		}
		written += n
	}
	return written, nil
}

var errEOF = io.EOF
