// The FUSE side: one file, `disk`, served straight off /dev/fuse.
//
// No goroutine holds a request: the loop's thread (completer.go) reads it, does the
// image's read or write (or hands it to a worker when it would wait), asks the model
// when it completes, and writes the reply then. So a request costs a read(2) of
// /dev/fuse, the image's pread or pwrite and a writev(2) of the reply, and shares its
// wake-ups with others. go-fuse's server (a goroutine per
// request, parked until its reply, on threads the runtime hands around) cost 45-60 us of
// CPU a request here (bench/disk_cpu.py); go-fuse gives the protocol's structures, read
// in place.
package main

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"syscall"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// opcodes of the FUSE protocol (include/uapi/linux/fuse.h)
const (
	opLookup      = 1
	opForget      = 2
	opGetattr     = 3
	opSetattr     = 4
	opOpen        = 14
	opRead        = 15
	opWrite       = 16
	opStatfs      = 17
	opRelease     = 18
	opFsync       = 20
	opFlush       = 25
	opInit        = 26
	opOpendir     = 27
	opReaddir     = 28
	opReleasedir  = 29
	opFsyncdir    = 30
	opAccess      = 34
	opInterrupt   = 36
	opDestroy     = 38
	opBatchForget = 42
)

const (
	rootID   = 1
	diskID   = 2
	maxWrite = 1 << 20 // the kernel's largest request (256 pages)
	// a read of /dev/fuse must hold the largest request: a write's header and its data
	readBufBytes = maxWrite + 64<<10
	ttlSeconds   = 3600
)

var (
	inHeaderSize = int(unsafe.Sizeof(fuse.InHeader{}))
	writeInSize  = int(unsafe.Sizeof(fuse.WriteIn{}))
	outHeader    = int(unsafe.Sizeof(fuse.OutHeader{}))
)

// at: the structure T at the start of b (the kernel's layout, read in place).
func at[T any](b []byte) *T {
	if len(b) < int(unsafe.Sizeof(*new(T))) {
		return nil
	}
	return (*T)(unsafe.Pointer(&b[0]))
}

func bytesOf[T any](v *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v))
}

// The image's reads and writes are made on the loop with RWF_NOWAIT: one that would wait
// for the host (a read not in its page cache, a write the host throttles while it writes
// back its dirty pages) is handed to a worker, so that it holds up no other reply.
// Measured on btrfs on hdd-7200 at the seed's scale (image on the host's disk), the
// loop making every call itself, waiting: its replies 24.0 s late for 51.8 s of modelled
// wait, 22.0 s of it other replies waiting behind a throttled write.
type server struct {
	d        *disk
	fd       int
	buf      *[]byte   // the buffer the next request is read into (reqBufs)
	reqBufs  sync.Pool // buffers of a whole request (a handed-over write's stays with it)
	bufs     sync.Pool // read payloads waiting for their reply
	work     chan *job // reads and writes that would wait, for the workers
	efd      int       // a worker's kick: it has finished some
	mu       sync.Mutex
	finished []*job // made by the workers, for the loop to model
	done     chan struct{}
	once     sync.Once
}

// mount opens /dev/fuse and mounts it on `mountpoint`, as fusermount would (root only).
func mount(mountpoint string) (int, error) {
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return -1, err
	}
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0,max_read=%d,allow_other", fd, maxWrite)
	if err := unix.Mount("pgfsbench-disk", mountpoint, "fuse.pgfsbench-disk", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		_ = unix.Close(fd)
		return -1, fmt.Errorf("mount %s: %w", mountpoint, err)
	}
	return fd, nil
}

func newServer(d *disk, fd int) (*server, error) {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, err
	}
	s := &server{d: d, fd: fd, efd: efd, work: make(chan *job, 1024), done: make(chan struct{})}
	s.bufs.New = func() any { b := make([]byte, 0, maxWrite); return &b }
	s.reqBufs.New = func() any { b := make([]byte, readBufBytes); return &b }
	s.buf = s.reqBufs.Get().(*[]byte)
	return s, nil
}

// imageWorkers: how many of the image's waiting reads and writes go on at once.
const imageWorkers = 4

// serve runs the loop on a thread of its own, and the image's workers; `done` is closed
// when the mount is gone.
func (s *server) serve() {
	for i := 0; i < imageWorkers; i++ {
		go s.worker()
	}
	go func() {
		s.d.done.run([]int{s.fd, s.efd}, s.drain)
		s.once.Do(func() { close(s.done) })
	}()
}

// worker: the image's reads and writes that wait; each, made, goes back to the loop. Its
// thread is a step below the loop's real-time priority (when the daemon runs real-time):
// a call that waits must never keep the loop from a reply that is due.
func (s *server) worker() {
	runtime.LockOSThread()
	if attr, err := unix.SchedGetAttr(0, 0); err == nil && attr.Policy == unix.SCHED_FIFO && attr.Priority > 1 {
		attr.Priority--
		_ = unix.SchedSetAttr(0, attr, 0)
	}
	for j := range s.work {
		if j.op == OpRead {
			j.data, j.errno, _ = s.d.readAt((*j.buf)[:j.n], j.off, false)
			j.n = int64(len(j.data))
		} else {
			j.errno, _ = s.d.writeAt(j.payload, j.off, false)
			s.reqBufs.Put(j.req)
			j.req, j.payload = nil, nil
		}
		j.done = s.d.now()
		s.mu.Lock()
		s.finished = append(s.finished, j)
		s.mu.Unlock()
		_, _ = unix.Write(s.efd, one)
	}
}

var one = []byte{1, 0, 0, 0, 0, 0, 0, 0}

// adopt: the requests whose image I/O the workers made, to the model (or their error).
func (s *server) adopt() {
	s.mu.Lock()
	got := s.finished
	s.finished = nil
	s.mu.Unlock()
	if got == nil {
		return
	}
	var b [8]byte
	_, _ = unix.Read(s.efd, b[:])
	for _, j := range got {
		if j.errno != 0 {
			if j.buf != nil {
				s.bufs.Put(j.buf)
				j.buf = nil
			}
			s.d.leave()
			s.reply(j.unique, j.errno)
			continue
		}
		s.d.schedule(j)
	}
}

// drain takes back what the workers made, and reads and handles every request queued
// now; false once the mount is gone.
func (s *server) drain() bool {
	s.adopt()
	for {
		n, err := unix.Read(s.fd, *s.buf)
		switch err {
		case nil:
		case unix.EAGAIN:
			return true
		case unix.EINTR, unix.ENOENT: // ENOENT: a request interrupted meanwhile
			continue
		default: // ENODEV: unmounted
			return false
		}
		if !s.handle((*s.buf)[:n]) {
			return false
		}
		// replies due meanwhile go now, not after the whole queue: a burst of large
		// writes (btrfs on hdd-7200 sends a hundred of 1 MiB at once) is milliseconds of
		// copying, and the replies waiting behind it were 16 s late for 53 s of modelled
		// wait in a 60 s run
		s.d.done.answerDue(s.d.done.nowNs())
	}
}

// reply writes a reply now (from the reader or the completer thread).
func (s *server) reply(unique uint64, errno syscall.Errno, payload ...[]byte) {
	h := fuse.OutHeader{Length: uint32(outHeader), Status: -int32(errno), Unique: unique}
	var iov [3][]byte
	iov[0] = bytesOf(&h)
	k := 1
	if errno == 0 {
		for _, p := range payload[:min(len(payload), 2)] {
			h.Length += uint32(len(p))
			iov[k] = p
			k++
		}
	}
	// ENOENT: the request was interrupted and is gone; nothing to do
	_, _ = unix.Writev(s.fd, iov[:k])
}

func (s *server) attr(id uint64) fuse.Attr {
	if id == rootID {
		return fuse.Attr{Ino: rootID, Mode: syscall.S_IFDIR | 0o755, Nlink: 2, Blksize: 4096}
	}
	return fuse.Attr{
		Ino: diskID, Size: uint64(s.d.size), Blocks: uint64(s.d.size / 512),
		Mode: syscall.S_IFREG | 0o600, Nlink: 1, Blksize: 4096,
	}
}

// handle one request; false when the mount is to end (DESTROY).
func (s *server) handle(req []byte) bool {
	h := at[fuse.InHeader](req)
	if h == nil {
		return true
	}
	body := req[inHeaderSize:]
	switch h.Opcode {
	case opInit:
		in := at[fuse.InitIn](req)
		if in == nil || in.Major != 7 {
			s.reply(h.Unique, syscall.EPROTO)
			return false
		}
		want := uint32(fuse.CAP_ASYNC_READ | fuse.CAP_BIG_WRITES | fuse.CAP_ASYNC_DIO |
			fuse.CAP_PARALLEL_DIROPS | fuse.CAP_MAX_PAGES)
		out := fuse.InitOut{
			Major: 7, Minor: min(in.Minor, 28), MaxReadAhead: in.MaxReadAhead,
			Flags: in.Flags & want, MaxBackground: 128, CongestionThreshold: 96,
			MaxWrite: maxWrite, TimeGran: 1, MaxPages: maxWrite / 4096,
		}
		s.reply(h.Unique, 0, bytesOf(&out))
	case opLookup:
		name := body
		if i := indexZero(name); i >= 0 {
			name = name[:i]
		}
		if h.NodeId != rootID || string(name) != "disk" {
			s.reply(h.Unique, syscall.ENOENT)
			break
		}
		out := fuse.EntryOut{NodeId: diskID, Generation: 1, EntryValid: ttlSeconds, AttrValid: ttlSeconds, Attr: s.attr(diskID)}
		s.reply(h.Unique, 0, bytesOf(&out))
	case opGetattr:
		out := fuse.AttrOut{AttrValid: ttlSeconds, Attr: s.attr(h.NodeId)}
		s.reply(h.Unique, 0, bytesOf(&out))
	case opSetattr:
		// the size is the device's; a truncate to it (or a mode change) is accepted
		in := at[fuse.SetAttrIn](req)
		if in != nil && in.Valid&fuse.FATTR_SIZE != 0 && int64(in.Size) != s.d.size {
			s.reply(h.Unique, syscall.EPERM)
			break
		}
		out := fuse.AttrOut{AttrValid: ttlSeconds, Attr: s.attr(h.NodeId)}
		s.reply(h.Unique, 0, bytesOf(&out))
	case opOpen:
		if h.NodeId != diskID {
			s.reply(h.Unique, syscall.EISDIR)
			break
		}
		// no page cache between the loop device and the model; writes of the loop
		// device's queue go in parallel
		out := fuse.OpenOut{OpenFlags: fuse.FOPEN_DIRECT_IO | fuse.FOPEN_PARALLEL_DIRECT_WRITES}
		s.reply(h.Unique, 0, bytesOf(&out))
	case opOpendir:
		s.reply(h.Unique, 0, bytesOf(&fuse.OpenOut{}))
	case opReaddir:
		in := at[fuse.ReadIn](req)
		if in == nil {
			s.reply(h.Unique, syscall.EINVAL)
			break
		}
		list := fuse.NewDirEntryList(make([]byte, min(in.Size, 4096)), in.Offset)
		entries := []fuse.DirEntry{
			{Name: ".", Ino: rootID, Mode: syscall.S_IFDIR, Off: 1},
			{Name: "..", Ino: rootID, Mode: syscall.S_IFDIR, Off: 2},
			{Name: "disk", Ino: diskID, Mode: syscall.S_IFREG, Off: 3},
		}
		for _, e := range entries[min(int(in.Offset), len(entries)):] {
			if !list.AddDirEntry(e) {
				break
			}
		}
		s.reply(h.Unique, 0, list.Bytes())
	case opStatfs:
		out := fuse.StatfsOut{Bsize: 4096, Frsize: 4096, NameLen: 255}
		s.reply(h.Unique, 0, bytesOf(&out))
	case opRead:
		in := at[fuse.ReadIn](req)
		if in == nil {
			s.reply(h.Unique, syscall.EINVAL)
			break
		}
		s.read(h.Unique, int64(in.Offset), int(in.Size))
	case opWrite:
		in := at[fuse.WriteIn](req)
		if in == nil || len(req) < writeInSize+int(in.Size) {
			s.reply(h.Unique, syscall.EINVAL)
			break
		}
		s.write(h.Unique, int64(in.Offset), req[writeInSize:writeInSize+int(in.Size)])
	case opFsync:
		// the block layer's flush (a loop device turns REQ_OP_FLUSH into fsync)
		s.flush(h.Unique)
	case opRelease, opReleasedir, opFlush, opFsyncdir, opAccess:
		s.reply(h.Unique, 0)
	case opForget, opBatchForget, opInterrupt:
		// no reply: a forgotten inode is ours forever, and an interrupted request is
		// answered when its time comes (the kernel drops a reply it no longer waits for)
	case opDestroy:
		s.reply(h.Unique, 0)
		return false
	default:
		s.reply(h.Unique, syscall.ENOSYS)
	}
	return true
}

func indexZero(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return -1
}

func (s *server) read(unique uint64, off int64, size int) {
	arrived := s.d.now()
	s.d.enter()
	bp := s.bufs.Get().(*[]byte)
	dest, errno, blocked := s.d.readAt((*bp)[:min(size, maxWrite)], off, true)
	if blocked {
		s.work <- &job{unique: unique, op: OpRead, off: off, n: int64(min(size, maxWrite)), arrived: arrived, buf: bp}
		return
	}
	if errno != 0 {
		s.bufs.Put(bp)
		s.d.leave()
		s.reply(unique, errno)
		return
	}
	s.d.schedule(&job{unique: unique, op: OpRead, off: off, n: int64(len(dest)), arrived: arrived, done: s.d.now(), data: dest, buf: bp})
}

func (s *server) write(unique uint64, off int64, data []byte) {
	arrived := s.d.now()
	s.d.enter()
	errno, blocked := s.d.writeAt(data, off, true)
	if blocked {
		// the request's buffer goes with it; the next request is read into another
		j := &job{unique: unique, op: OpWrite, off: off, n: int64(len(data)), arrived: arrived, written: uint32(len(data)), req: s.buf, payload: data}
		s.buf = s.reqBufs.Get().(*[]byte)
		s.work <- j
		return
	}
	if errno != 0 {
		s.d.leave()
		s.reply(unique, errno)
		return
	}
	s.d.schedule(&job{unique: unique, op: OpWrite, off: off, n: int64(len(data)), arrived: arrived, done: s.d.now(), written: uint32(len(data))})
}

func (s *server) flush(unique uint64) {
	arrived := s.d.now()
	s.d.enter()
	s.d.c.flushes.Add(1)
	s.d.schedule(&job{unique: unique, op: OpFlush, arrived: arrived, done: arrived})
}

// answer a job's request: its data, its count of bytes written, or nothing (a flush).
func (s *server) answer(j *job) {
	switch {
	case j.op == OpRead:
		s.reply(j.unique, 0, j.data)
		s.bufs.Put(j.buf)
		j.data, j.buf = nil, nil
	case j.op == OpWrite:
		out := fuse.WriteOut{Size: j.written}
		s.reply(j.unique, 0, bytesOf(&out))
	default:
		s.reply(j.unique, 0)
	}
}

func init() {
	// the layouts read in place must be the kernel's
	if outHeader != 16 || inHeaderSize != 40 || writeInSize != 80 {
		fmt.Fprintln(os.Stderr, "pgfsbench-disk: unexpected FUSE structure sizes")
		os.Exit(2)
	}
}
