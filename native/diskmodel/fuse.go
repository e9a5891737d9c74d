// The FUSE side: one file, `disk`, served straight off /dev/fuse (or the ring, ring.go).
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
	// FUSE over io_uring (ring.go): wanted when the kernel offers it; nil while on
	// /dev/fuse alone
	ringWanted bool
	ring       *fuseRing
	dev        *pollIO // the /dev/fuse loop's waits
	ringErr    string  // why the ring was not used, when it was wanted
	inited     chan struct{}
}

// mount opens /dev/fuse and mounts it on `mountpoint`, as fusermount would (root only).
func mount(mountpoint string) (int, error) {
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return -1, err
	}
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0,max_read=%d,allow_other,default_permissions", fd, maxWrite)
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
	s := &server{d: d, fd: fd, efd: efd, work: make(chan *job, 1024), done: make(chan struct{}), inited: make(chan struct{})}
	s.dev = &pollIO{fds: []int{fd, efd}, read: s.drain, pending: true}
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
		s.d.done.run(s)
		if s.ring != nil {
			s.ring.close()
		}
		s.once.Do(func() { close(s.done) })
	}()
}

// the loop's waits (completer.run): on the ring once it is there, on /dev/fuse before
func (s *server) serveAll() bool {
	if s.ring != nil {
		return s.serveRing()
	}
	return s.dev.serveAll()
}

func (s *server) sleep(left int64, arrivals bool) {
	if s.ring != nil {
		s.sleepRing(left, arrivals)
		return
	}
	s.dev.sleep(left, arrivals)
}

func (s *server) flush() {
	if s.ring != nil {
		_ = s.ring.u.submit()
	}
}

// transport: what carries the requests, for the stats
func (s *server) transport() string {
	select {
	case <-s.inited:
	default:
		return ""
	}
	if s.ring != nil {
		return "io_uring"
	}
	return "/dev/fuse"
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
			j.data, j.errno, _ = s.d.readAt(j.readBuffer(), j.off, false)
			j.n = int64(len(j.data))
		} else {
			j.errno, _ = s.d.writeAt(j.payload, j.off, false)
			if j.req != nil {
				s.reqBufs.Put(j.req)
			}
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
			s.reply(j.unique, j.ent, j.errno)
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
		if !s.handle((*s.buf)[:n], nil, nil) {
			return false
		}
		// replies due meanwhile go now, not after the whole queue: a burst of large
		// writes (btrfs on hdd-7200 sends a hundred of 1 MiB at once) is milliseconds of
		// copying, and the replies waiting behind it were 16 s late for 53 s of modelled
		// wait in a 60 s run
		s.d.done.answerDue(s.d.done.nowNs())
	}
}

// reply: to a request from the ring (ent) or from /dev/fuse (written now). The loop's
// thread only.
func (s *server) reply(unique uint64, ent *ringEnt, errno syscall.Errno, payload ...[]byte) {
	if ent != nil {
		s.replyRing(ent, unique, errno, payload...)
		return
	}
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
		return fuse.Attr{Ino: rootID, Mode: syscall.S_IFDIR | 0o700, Nlink: 2, Blksize: 4096}
	}
	return fuse.Attr{
		Ino: diskID, Size: uint64(s.d.size), Blocks: uint64(s.d.size / 512),
		Mode: syscall.S_IFREG | 0o600, Nlink: 1, Blksize: 4096,
	}
}

// handle one request: `req` its headers (and, from /dev/fuse, its data), `data` a
// write's data or a name when it came by the ring (ent); false when the mount is to end
// (DESTROY).
func (s *server) handle(req, data []byte, ent *ringEnt) bool {
	h := at[fuse.InHeader](req)
	if h == nil {
		return true
	}
	if ent == nil {
		data = req[inHeaderSize:]
	}
	reply := func(errno syscall.Errno, payload ...[]byte) { s.reply(h.Unique, ent, errno, payload...) }
	switch h.Opcode {
	case opInit:
		s.init(h.Unique, at[fuse.InitIn](req))
		return true
	case opLookup:
		name := data
		if i := indexZero(name); i >= 0 {
			name = name[:i]
		}
		if h.NodeId != rootID || string(name) != "disk" {
			reply(syscall.ENOENT)
			break
		}
		out := fuse.EntryOut{NodeId: diskID, Generation: 1, EntryValid: ttlSeconds, AttrValid: ttlSeconds, Attr: s.attr(diskID)}
		reply(0, bytesOf(&out))
	case opGetattr:
		out := fuse.AttrOut{AttrValid: ttlSeconds, Attr: s.attr(h.NodeId)}
		reply(0, bytesOf(&out))
	case opSetattr:
		// the size is the device's; a truncate to it (or a mode change) is accepted
		in := at[fuse.SetAttrIn](req)
		if in != nil && in.Valid&fuse.FATTR_SIZE != 0 && int64(in.Size) != s.d.size {
			reply(syscall.EPERM)
			break
		}
		out := fuse.AttrOut{AttrValid: ttlSeconds, Attr: s.attr(h.NodeId)}
		reply(0, bytesOf(&out))
	case opOpen:
		if h.NodeId != diskID {
			reply(syscall.EISDIR)
			break
		}
		// the device under test is root's alone: the kernel checks the modes (the mount's
		// default_permissions, the disk 0600 and its directory 0700 of uid 0), and an open
		// by anyone else is refused here too, should a mode ever be changed
		if h.Uid != 0 {
			reply(syscall.EACCES)
			break
		}
		// no page cache between the loop device and the model; writes of the loop
		// device's queue go in parallel
		out := fuse.OpenOut{OpenFlags: fuse.FOPEN_DIRECT_IO | fuse.FOPEN_PARALLEL_DIRECT_WRITES}
		reply(0, bytesOf(&out))
	case opOpendir:
		reply(0, bytesOf(&fuse.OpenOut{}))
	case opReaddir:
		in := at[fuse.ReadIn](req)
		if in == nil {
			reply(syscall.EINVAL)
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
		reply(0, list.Bytes())
	case opStatfs:
		out := fuse.StatfsOut{Bsize: 4096, Frsize: 4096, NameLen: 255}
		reply(0, bytesOf(&out))
	case opRead:
		in := at[fuse.ReadIn](req)
		if in == nil {
			reply(syscall.EINVAL)
			break
		}
		s.read(h.Unique, ent, int64(in.Offset), int(in.Size))
	case opWrite:
		in := at[fuse.WriteIn](req)
		if ent == nil && in != nil {
			data = req[min(writeInSize, len(req)):]
		}
		if in == nil || len(data) < int(in.Size) {
			reply(syscall.EINVAL)
			break
		}
		s.write(h.Unique, ent, int64(in.Offset), data[:in.Size])
	case opFsync:
		// the block layer's flush (a loop device turns REQ_OP_FLUSH into fsync)
		s.flushDisk(h.Unique, ent)
	case opRelease, opReleasedir, opFlush, opFsyncdir, opAccess:
		reply(0)
	case opForget, opBatchForget, opInterrupt:
		// no reply: a forgotten inode is ours forever, and an interrupted request is
		// answered when its time comes (the kernel drops a reply it no longer waits for)
	case opDestroy:
		reply(0)
		return false
	default:
		reply(syscall.ENOSYS)
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

func (s *server) read(unique uint64, ent *ringEnt, off int64, size int) {
	arrived := s.d.now()
	s.d.enter()
	j := &job{unique: unique, ent: ent, op: OpRead, off: off, n: int64(min(size, maxWrite)), arrived: arrived}
	if ent == nil {
		j.buf = s.bufs.Get().(*[]byte)
	}
	dest, errno, blocked := s.d.readAt(j.readBuffer(), off, true)
	if blocked {
		s.work <- j
		return
	}
	if errno != 0 {
		s.putBuf(j)
		s.d.leave()
		s.reply(unique, ent, errno)
		return
	}
	j.n, j.done, j.data = int64(len(dest)), s.d.now(), dest
	s.d.schedule(j)
}

func (s *server) putBuf(j *job) {
	if j.buf != nil {
		s.bufs.Put(j.buf)
		j.buf = nil
	}
}

// readBuffer: where a read's data goes: the ring entry's payload, which its reply is
// sent from, or a buffer of the pool.
func (j *job) readBuffer() []byte {
	if j.ent != nil {
		return j.ent.payload[:j.n]
	}
	return (*j.buf)[:j.n]
}

func (s *server) write(unique uint64, ent *ringEnt, off int64, data []byte) {
	arrived := s.d.now()
	s.d.enter()
	errno, blocked := s.d.writeAt(data, off, true)
	if blocked {
		j := &job{unique: unique, ent: ent, op: OpWrite, off: off, n: int64(len(data)), arrived: arrived, written: uint32(len(data)), payload: data}
		if ent == nil {
			// the request's buffer goes with it; the next request is read into another
			j.req = s.buf
			s.buf = s.reqBufs.Get().(*[]byte)
		}
		s.work <- j
		return
	}
	if errno != 0 {
		s.d.leave()
		s.reply(unique, ent, errno)
		return
	}
	s.d.schedule(&job{unique: unique, ent: ent, op: OpWrite, off: off, n: int64(len(data)), arrived: arrived, done: s.d.now(), written: uint32(len(data))})
}

func (s *server) flushDisk(unique uint64, ent *ringEnt) {
	arrived := s.d.now()
	s.d.enter()
	s.d.c.flushes.Add(1)
	s.d.schedule(&job{unique: unique, ent: ent, op: OpFlush, arrived: arrived, done: arrived})
}

// answer a job's request: its data, its count of bytes written, or nothing (a flush).
func (s *server) answer(j *job) {
	switch {
	case j.op == OpRead:
		s.reply(j.unique, j.ent, 0, j.data)
		s.putBuf(j)
		j.data = nil
	case j.op == OpWrite:
		out := fuse.WriteOut{Size: j.written}
		s.reply(j.unique, j.ent, 0, bytesOf(&out))
	default:
		s.reply(j.unique, j.ent, 0)
	}
}

// init answers FUSE_INIT. When the kernel offers FUSE over io_uring and it is wanted, the
// ring is made first and asked for in the reply, then its entries registered: from the
// reply on, the kernel holds every request until each queue has one. Where the ring
// cannot be made or is refused, /dev/fuse serves alone (and says why in the log).
func (s *server) init(unique uint64, in *fuse.InitIn) {
	defer func() {
		select {
		case <-s.inited:
		default:
			close(s.inited)
		}
	}()
	if in == nil || in.Major != 7 {
		s.reply(unique, nil, syscall.EPROTO)
		return
	}
	want := uint32(fuse.CAP_ASYNC_READ | fuse.CAP_BIG_WRITES | fuse.CAP_ASYNC_DIO |
		fuse.CAP_PARALLEL_DIROPS | fuse.CAP_MAX_PAGES)
	out := fuse.InitOut{
		Major: 7, Minor: min(in.Minor, 28), MaxReadAhead: in.MaxReadAhead,
		Flags: in.Flags & want, MaxBackground: ringDepth, CongestionThreshold: ringDepth * 3 / 4,
		MaxWrite: maxWrite, TimeGran: 1, MaxPages: maxWrite / 4096,
	}
	var ring *fuseRing
	switch {
	case !s.ringWanted:
	case in.Flags&capInitExt == 0 || in.Flags64()&fuse.CAP_OVER_IO_URING == 0:
		s.ringErr = "the kernel does not offer FUSE over io_uring (Linux 6.14 and later, with fuse's enable_uring parameter on)"
	default:
		var err error
		if ring, err = newFuseRing(); err != nil {
			s.ringErr = err.Error()
			break
		}
		out.Flags |= capInitExt
		out.Flags2 = uint32(fuse.CAP_OVER_IO_URING >> 32)
	}
	s.reply(unique, nil, 0, bytesOf(&out))
	if ring == nil {
		if s.ringErr != "" {
			fmt.Fprintln(os.Stderr, "pgfsbench-disk: serving on /dev/fuse:", s.ringErr)
		}
		return
	}
	if err := ring.register(s.fd, s.efd); err != nil {
		s.ringErr = err.Error()
		fmt.Fprintln(os.Stderr, "pgfsbench-disk: serving on /dev/fuse:", err)
		ring.close()
		return
	}
	s.ring = ring
}

func init() {
	// the layouts read in place must be the kernel's
	if outHeader != 16 || inHeaderSize != 40 || writeInSize != 80 {
		fmt.Fprintln(os.Stderr, "pgfsbench-disk: unexpected FUSE structure sizes")
		os.Exit(2)
	}
}
