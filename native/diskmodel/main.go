// pgfsbench-disk: an emulated disk for pgfsbench.
//
// It serves one file, `disk`, on a FUSE mount. pgfsbench attaches a loop device to that
// file, so every block request of the filesystem under test (read, write, flush) reaches
// this process as a FUSE request. The data goes to a sparse image file on the host; the
// reply waits until the device model says the request would have completed on the
// emulated device (model.go). The file is opened with FOPEN_DIRECT_IO: no page cache
// between the loop device and the model.
//
// It writes one JSON line a second to --stats (what it served, how long the model made
// it wait, the most requests in flight) and a last line when it ends. SIGTERM or SIGINT
// unmounts and ends it; pgfsbench journals its pid, the mount and the image, so a killed
// run is undone by `pgfsbench cleanup`.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

type counters struct {
	reads, writes, flushes atomic.Int64
	readBytes, writeBytes  atomic.Int64
	waitNs                 atomic.Int64 // what the model added, summed over requests
	inflight, inflightMax  atomic.Int64
	lateNs                 atomic.Int64 // replies later than the model said (the host)
	// the lateness split by where it was spent (they add up to lateNs): the image's read
	// or write on the host, the wait for the model (its lock and its work), and the
	// wake-up after the model's time (the host's scheduler)
	ioNs, modelNs, oversleepNs atomic.Int64
	errors                     atomic.Int64
}

type disk struct {
	image *os.File
	size  int64
	model Model
	start time.Time
	c     counters
	trace *traceLog // every request, when PGFSBENCH_DISK_TRACE names a file (diagnosis)
}

// traceLog: one line a request (arrival s, op, offset, bytes, the model's completion s),
// for studying what a filesystem asks of the device; off unless asked for.
type traceLog struct {
	mu sync.Mutex
	w  *bufio.Writer
	f  *os.File
}

func (t *traceLog) add(op Op, off, n int64, arrived, due float64) {
	if t == nil {
		return
	}
	t.mu.Lock()
	fmt.Fprintf(t.w, "%.6f %d %d %d %.6f\n", arrived, op, off, n, due)
	t.mu.Unlock()
}

func (t *traceLog) close() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	_ = t.w.Flush()
	_ = t.f.Close()
}

func (d *disk) now() float64 { return time.Since(d.start).Seconds() }

// serve: sleep until the model's completion time; count what it added, and when the
// reply is late (by more than a millisecond), what made it late. `done` is when the image's
// read or write ended. The lateness, [due, now], is split among the phases it overlaps:
// the image's I/O [arrived, done], the model [done, modelled] and the wake-up [modelled,
// now]; the three parts add up to the lateness counted, and time a phase spent before the
// reply was due (hidden in the modelled wait) is no part of it.
func (d *disk) serve(op Op, off, n int64, arrived, done float64) {
	due := d.model.Complete(op, off, n, arrived)
	modelled := d.now()
	d.trace.add(op, off, n, arrived, due)
	if due > arrived {
		d.c.waitNs.Add(int64((due - arrived) * 1e9))
		sleepUntil(d, due)
	}
	now := d.now()
	if late := now - due; late > 0.001 {
		io, model, over := lateParts(arrived, done, modelled, due, now)
		d.c.lateNs.Add(int64(late * 1e9))
		d.c.ioNs.Add(int64(io * 1e9))
		d.c.modelNs.Add(int64(model * 1e9))
		d.c.oversleepNs.Add(int64(over * 1e9))
	}
}

// lateParts: how much of [due, now] fell in the image's I/O, in the model and in the
// wake-up (each phase's time after max(due, its start)).
func lateParts(arrived, done, modelled, due, now float64) (io, model, over float64) {
	from := math.Max(due, arrived)
	io = math.Max(0, done-from)
	model = math.Max(0, modelled-math.Max(from, done))
	over = math.Max(0, now-math.Max(from, modelled))
	return io, model, over
}

const prSetTimerslack = 29 // PR_SET_TIMERSLACK, <linux/prctl.h>

// sleepUntil: Go's timers wake up to a millisecond late (the runtime's poller waits in
// milliseconds), which would add a millisecond to every sub-millisecond wait of an SSD
// or a cloud volume; the last few milliseconds are slept with nanosleep(2) instead, on
// the goroutine's own thread, its timer slack made 1 us.
func sleepUntil(d *disk, due float64) {
	left := due - d.now()
	if left > 0.005 {
		time.Sleep(time.Duration((left - 0.003) * 1e9))
		left = due - d.now()
	}
	if left <= 0 {
		return
	}
	// a thread's default timer slack lets the kernel wake it 50 us late: 1 us here
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerslack, 1000, 0)
	for left > 0 {
		ts := syscall.NsecToTimespec(int64(left * 1e9))
		_ = syscall.Nanosleep(&ts, nil)
		left = due - d.now()
	}
}

func (d *disk) enter() func() {
	v := d.c.inflight.Add(1)
	for {
		m := d.c.inflightMax.Load()
		if v <= m || d.c.inflightMax.CompareAndSwap(m, v) {
			break
		}
	}
	return func() { d.c.inflight.Add(-1) }
}

type diskNode struct {
	fs.Inode
	d *disk
}

var (
	_ = (fs.NodeOpener)((*diskNode)(nil))
	_ = (fs.NodeReader)((*diskNode)(nil))
	_ = (fs.NodeWriter)((*diskNode)(nil))
	_ = (fs.NodeFsyncer)((*diskNode)(nil))
	_ = (fs.NodeFlusher)((*diskNode)(nil))
	_ = (fs.NodeGetattrer)((*diskNode)(nil))
	_ = (fs.NodeSetattrer)((*diskNode)(nil))
)

func (n *diskNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return nil, fuse.FOPEN_DIRECT_IO, 0
}

func (n *diskNode) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFREG | 0o600
	out.Size = uint64(n.d.size)
	out.Blocks = uint64(n.d.size / 512)
	out.Blksize = 4096
	return 0
}

// Setattr: the size is the device's; a truncate to it (or a mode change) is accepted.
func (n *diskNode) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if sz, ok := in.GetSize(); ok && int64(sz) != n.d.size {
		return syscall.EPERM
	}
	return n.Getattr(ctx, f, out)
}

func (n *diskNode) Read(ctx context.Context, f fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	arrived := n.d.now()
	defer n.d.enter()()
	if off >= n.d.size {
		return fuse.ReadResultData(nil), 0
	}
	if off+int64(len(dest)) > n.d.size {
		dest = dest[:n.d.size-off]
	}
	// The image is as long as the disk (truncated to it at start), so a read within the
	// disk is whole or an error: a failed or short read is EIO, never invented zeros.
	if got, err := n.d.image.ReadAt(dest, off); err != nil || got < len(dest) {
		n.d.c.errors.Add(1)
		return nil, syscall.EIO
	}
	n.d.c.reads.Add(1)
	n.d.c.readBytes.Add(int64(len(dest)))
	n.d.serve(OpRead, off, int64(len(dest)), arrived, n.d.now())
	return fuse.ReadResultData(dest), 0
}

func (n *diskNode) Write(ctx context.Context, f fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	arrived := n.d.now()
	defer n.d.enter()()
	if off+int64(len(data)) > n.d.size {
		return 0, syscall.ENOSPC
	}
	if got, err := n.d.image.WriteAt(data, off); err != nil || got < len(data) {
		n.d.c.errors.Add(1)
		return 0, syscall.EIO
	}
	n.d.c.writes.Add(1)
	n.d.c.writeBytes.Add(int64(len(data)))
	n.d.serve(OpWrite, off, int64(len(data)), arrived, n.d.now())
	return uint32(len(data)), 0
}

// Fsync is the block layer's flush (a loop device turns REQ_OP_FLUSH into fsync).
// The image is not synced: the emulated device's durability is the model's answer.
func (n *diskNode) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	arrived := n.d.now()
	defer n.d.enter()()
	n.d.c.flushes.Add(1)
	n.d.serve(OpFlush, 0, 0, arrived, arrived)
	return 0
}

func (n *diskNode) Flush(ctx context.Context, f fs.FileHandle) syscall.Errno { return 0 }

type stats struct {
	T           float64 `json:"t"`
	Reads       int64   `json:"reads"`
	Writes      int64   `json:"writes"`
	Flushes     int64   `json:"flushes"`
	ReadBytes   int64   `json:"read_bytes"`
	WriteBytes  int64   `json:"write_bytes"`
	ModelWaitS  float64 `json:"model_wait_s"`
	LateS       float64 `json:"late_s"`
	IOS         float64 `json:"io_s"`
	ModelS      float64 `json:"model_s"`
	OversleepS  float64 `json:"oversleep_s"`
	InflightMax int64   `json:"inflight_max"`
	Errors      int64   `json:"errors"`
	Final       bool    `json:"final,omitempty"`
}

func (d *disk) snapshot(final bool) stats {
	return stats{
		T: d.now(), Reads: d.c.reads.Load(), Writes: d.c.writes.Load(),
		Flushes: d.c.flushes.Load(), ReadBytes: d.c.readBytes.Load(),
		WriteBytes: d.c.writeBytes.Load(), ModelWaitS: float64(d.c.waitNs.Load()) / 1e9,
		LateS: float64(d.c.lateNs.Load()) / 1e9, IOS: float64(d.c.ioNs.Load()) / 1e9,
		ModelS: float64(d.c.modelNs.Load()) / 1e9, OversleepS: float64(d.c.oversleepNs.Load()) / 1e9,
		InflightMax: d.c.inflightMax.Swap(d.c.inflight.Load()),
		Errors:      d.c.errors.Load(), Final: final,
	}
}

func main() {
	image := flag.String("image", "", "the sparse image file that holds the data (created if missing)")
	size := flag.Int64("size", 0, "the device's size in bytes")
	mountpoint := flag.String("mountpoint", "", "an empty directory to mount on")
	modelJSON := flag.String("model", `{"kind":"zero"}`, "the device model's parameters (JSON)")
	statsPath := flag.String("stats", "", "a file to append one JSON line a second to")
	ready := flag.String("ready", "", "a file written once the mount is served")
	flag.Parse()
	// A request sleeps its last milliseconds in nanosleep(2) on a locked thread
	// (sleepUntil), and that thread keeps its P while in the call until the runtime's
	// monitor takes it back, which can be milliseconds: with only as many Ps as cores, a
	// request that is due waits for one. Idle Ps cost nothing. Measured on 2 cores, 1 ms a
	// write at queue depth 32 beside 2 CPU-bound loops, at nice -10: 14,400 IOPS with 2 Ps,
	// 22,400 with 64.
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(max(64, 2*runtime.NumCPU()))
	}
	if *image == "" || *mountpoint == "" || *size <= 0 || *size%4096 != 0 {
		fmt.Fprintln(os.Stderr, "pgfsbench-disk: --image, --mountpoint and --size (a multiple of 4096) are required")
		os.Exit(2)
	}
	model, _, err := NewModel([]byte(*modelJSON))
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgfsbench-disk:", err)
		os.Exit(2)
	}
	// a new file of its own, never one planted there or reached through a symlink
	f, err := os.OpenFile(*image, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err == nil {
		err = f.Truncate(*size)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgfsbench-disk:", err)
		os.Exit(1)
	}
	d := &disk{image: f, size: *size, model: model, start: time.Now()}
	if path := os.Getenv("PGFSBENCH_DISK_TRACE"); path != "" {
		tf, err := os.OpenFile(fmt.Sprintf("%s.%d", path, os.Getpid()), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			fmt.Fprintln(os.Stderr, "pgfsbench-disk: trace:", err)
			os.Exit(1)
		}
		d.trace = &traceLog{w: bufio.NewWriterSize(tf, 1<<20), f: tf}
	}
	root := &fs.Inode{}
	node := &diskNode{d: d}
	long := time.Hour
	server, err := fs.Mount(*mountpoint, root, &fs.Options{
		MountOptions: fuse.MountOptions{
			DirectMount:       true,
			AllowOther:        true,
			FsName:            "pgfsbench-disk",
			Name:              "pgfsbench-disk",
			MaxWrite:          fuse.MAX_KERNEL_WRITE,
			MaxBackground:     128,
			ExtraCapabilities: fuse.CAP_ASYNC_DIO | fuse.CAP_PARALLEL_DIROPS,
		},
		EntryTimeout: &long,
		AttrTimeout:  &long,
		OnAdd: func(ctx context.Context) {
			root.AddChild("disk", root.NewPersistentInode(ctx, node, fs.StableAttr{Mode: syscall.S_IFREG, Ino: 2}), true)
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgfsbench-disk: mount:", err)
		os.Exit(1)
	}
	var out *os.File
	if *statsPath != "" {
		out, err = os.OpenFile(*statsPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND|syscall.O_NOFOLLOW, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "pgfsbench-disk:", err)
			_ = server.Unmount()
			os.Exit(1)
		}
	}
	var mu sync.Mutex
	write := func(final bool) {
		if out == nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		line, _ := json.Marshal(d.snapshot(final))
		_, _ = out.Write(append(line, '\n'))
	}
	if *ready != "" {
		_ = os.WriteFile(*ready, []byte(fmt.Sprintf("%d\n", os.Getpid())), 0o644)
	}
	stop := make(chan os.Signal, 2)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	ticker := time.NewTicker(time.Second)
	done := make(chan struct{})
	go func() { server.Wait(); close(done) }()
	for {
		select {
		case <-ticker.C:
			write(false)
		case <-stop:
			// unmount: refused while the loop device holds the file; then retry until
			// pgfsbench has detached it
			for server.Unmount() != nil {
				select {
				case <-time.After(200 * time.Millisecond):
				case <-done:
				}
				if isClosed(done) {
					break
				}
			}
			<-done
			write(true)
			d.trace.close()
			_ = f.Close()
			return
		case <-done: // unmounted from outside (umount, fusermount -u)
			write(true)
			d.trace.close()
			_ = f.Close()
			return
		}
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
