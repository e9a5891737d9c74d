package main

import (
	"context"
	"io"
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// The replayer's connections read and write by raw system calls on their sockets.
//
// Go's own net.Conn enters the scheduler's "in a system call" state for every read and
// write. A write to the server's socket wakes its backend, which on a busy host preempts
// the writer in the kernel; the runtime's monitor then takes the P away from the blocked
// thread, hands it to another (futex wakes), and keeps polling every 20 µs. On a 2-CPU
// host replaying 4 sessions, that left a fifth of the CPU idle and the server waiting
// for a replayer that spent half its time in the runtime. A raw system call never
// leaves that state, so the P stays where it is.
//
// Two ways to wait for the server:
//
//   - rawConn, non-blocking (timed and think modes, where sessions mostly sleep): a read
//     that finds nothing waits in Go's poller (read, EAGAIN, epoll_wait, read);
//   - fast mode on a unix socket: the loop (loop.go) waits on every session's socket at
//     once, on sockets Go's poller never sees. Each is connected as a blockingConn,
//     whose reads and writes wait in the kernel (pgconn's start-up and authentication),
//     then made non-blocking and handed to the loop. A blocking read or write waits at
//     most blockingSlice (SO_RCVTIMEO, SO_SNDTIMEO), then comes back to Go code, where
//     the runtime can stop the goroutine and the connection's deadline is looked at.

// rawConn is a net.Conn whose non-blocking reads and writes are raw system calls.
type rawConn struct {
	net.Conn
	rc syscall.RawConn
}

type syscallConn interface {
	SyscallConn() (syscall.RawConn, error)
}

// blockingSlice is how long a blocking read or write waits in the kernel before it
// comes back to Go code (and is repeated): the longest a collection waits for it, and
// how late a deadline can be seen.
const blockingSlice = 10 * time.Millisecond

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

// rawIO is one read or write. Not inlined: each call is a point where the runtime can
// stop the goroutine (its preemption check), between two waits in the kernel.
//
//go:noinline
func rawIO(trap uintptr, fd uintptr, b []byte) (int, syscall.Errno) {
	n, _, e := syscall.RawSyscall(trap, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	return int(n), e
}

func (c *rawConn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := c.rc.Read(func(fd uintptr) bool {
		for {
			n, errno = rawIO(syscall.SYS_READ, fd, b)
			if errno != syscall.EINTR {
				return errno != syscall.EAGAIN
			}
		}
	})
	if err != nil {
		return 0, err
	}
	if errno != 0 {
		return 0, &net.OpError{Op: "read", Net: "unix", Err: errno}
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (c *rawConn) Write(b []byte) (int, error) {
	written := 0
	for written < len(b) {
		var n int
		var errno syscall.Errno
		err := c.rc.Write(func(fd uintptr) bool {
			for {
				n, errno = rawIO(syscall.SYS_WRITE, fd, b[written:])
				if errno != syscall.EINTR {
					return errno != syscall.EAGAIN
				}
			}
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

// blockingConn is a unix socket whose reads and writes wait in the kernel, a slice at a
// time. Its deadline (one for reads and writes) is seen within a slice.
type blockingConn struct {
	fd       int
	path     string
	deadline atomic.Int64 // Unix nanoseconds; 0: none
	closed   atomic.Bool
}

func dialBlocking(path string) (net.Conn, error) {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "unix", Err: err}
	}
	tv := syscall.NsecToTimeval(int64(blockingSlice))
	for _, opt := range []int{syscall.SO_RCVTIMEO, syscall.SO_SNDTIMEO} {
		if err := syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, opt, &tv); err != nil {
			syscall.Close(fd)
			return nil, &net.OpError{Op: "dial", Net: "unix", Err: err}
		}
	}
	for {
		err = syscall.Connect(fd, &syscall.SockaddrUnix{Name: path})
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		syscall.Close(fd)
		return nil, &net.OpError{Op: "dial", Net: "unix", Addr: &net.UnixAddr{Name: path, Net: "unix"}, Err: err}
	}
	return &blockingConn{fd: fd, path: path}, nil
}

// io repeats one read or write until it is done, past its slices and signals, or the
// deadline has passed.
func (c *blockingConn) io(trap uintptr, b []byte) (int, error) {
	for {
		if d := c.deadline.Load(); d != 0 && time.Now().UnixNano() >= d {
			return 0, os.ErrDeadlineExceeded
		}
		n, e := rawIO(trap, uintptr(c.fd), b)
		switch e {
		case 0:
			return n, nil
		case syscall.EINTR:
		case syscall.EAGAIN: // its slice of waiting over
			runtime.Gosched()
		default:
			op := "read"
			if trap == syscall.SYS_WRITE {
				op = "write"
			}
			return 0, &net.OpError{Op: op, Net: "unix", Err: e}
		}
	}
}

func (c *blockingConn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n, err := c.io(syscall.SYS_READ, b)
	if err == nil && n == 0 {
		return 0, io.EOF
	}
	return n, err
}

func (c *blockingConn) Write(b []byte) (int, error) {
	written := 0
	for written < len(b) {
		n, err := c.io(syscall.SYS_WRITE, b[written:])
		if err != nil {
			return written, err
		}
		written += n
	}
	return written, nil
}

// Close shuts the socket (a read another goroutine waits in ends) and closes it, once.
func (c *blockingConn) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	_ = syscall.Shutdown(c.fd, syscall.SHUT_RDWR)
	return syscall.Close(c.fd)
}

func (c *blockingConn) LocalAddr() net.Addr  { return &net.UnixAddr{Net: "unix"} }
func (c *blockingConn) RemoteAddr() net.Addr { return &net.UnixAddr{Name: c.path, Net: "unix"} }

func (c *blockingConn) SetDeadline(t time.Time) error {
	if t.IsZero() {
		c.deadline.Store(0)
	} else {
		c.deadline.Store(t.UnixNano())
	}
	return nil
}

func (c *blockingConn) SetReadDeadline(t time.Time) error  { return c.SetDeadline(t) }
func (c *blockingConn) SetWriteDeadline(t time.Time) error { return c.SetDeadline(t) }
