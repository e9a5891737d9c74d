// pgfsbench-disk: an emulated disk for pgfsbench.
//
// It serves one file, `disk`, on a FUSE mount. pgfsbench attaches a loop device to that
// file, so every block request of the filesystem under test (read, write, flush) reaches
// this process as a FUSE request. The data goes to a sparse image file on the host; the
// reply is written when the device model says the request would have completed on the
// emulated device (model.go, completer.go). The file is opened with FOPEN_DIRECT_IO: no
// page cache between the loop device and the model (fuse.go). The requests come by
// /dev/fuse, or with --transport io_uring by FUSE over io_uring (ring.go).
//
// It writes one JSON line a second to --stats (what it served, how long the model made
// it wait, the most requests in flight, its own CPU, what carries its requests) and a
// last line when it ends. SIGTERM
// or SIGINT unmounts and ends it; pgfsbench journals its pid, the mount and the image, so
// a killed run is undone by `pgfsbench cleanup`.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
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
	// RWF_NOWAIT is refused by the image's filesystem: the loop's reads and writes wait
	noNowait  atomic.Bool
	size      int64
	model     Model
	start     time.Time
	c         counters
	done      *completer // answers each request when the model says it completes
	answer    func(*job) // writes a request's reply (the FUSE server's)
	transport func() string
	trace     *traceLog // every request, when PGFSBENCH_DISK_TRACE names a file (diagnosis)
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

// schedule: the model says when the request completes; its reply is written then (at
// once when that time has passed), by the completer.
func (d *disk) schedule(j *job) {
	j.dueS = d.model.Complete(j.op, j.off, j.n, j.arrived)
	j.modelled = d.now()
	d.trace.add(j.op, j.off, j.n, j.arrived, j.dueS)
	if j.dueS > j.arrived {
		d.c.waitNs.Add(int64((j.dueS - j.arrived) * 1e9))
	}
	if j.dueS <= j.modelled {
		d.finish(j)
		return
	}
	j.due = int64(j.dueS * 1e9)
	d.done.add(j)
}

// finish: the reply goes now. When it is late (by more than a millisecond), what made it
// late is counted. The lateness, [due, now], is split among the phases it overlaps: the
// image's I/O [arrived, done], the model [done, modelled] and the wait for the reply to
// be written [modelled, now] (the completer's wake-up and the batch before it); the three
// parts add up to the lateness counted, and time a phase spent before the reply was due
// (hidden in the modelled wait) is no part of it.
func (d *disk) finish(j *job) {
	d.answer(j)
	d.leave()
	now := d.now()
	if late := now - j.dueS; late > 0.001 {
		io, model, over := lateParts(j.arrived, j.done, j.modelled, j.dueS, now)
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

func (d *disk) enter() {
	v := d.c.inflight.Add(1)
	for {
		m := d.c.inflightMax.Load()
		if v <= m || d.c.inflightMax.CompareAndSwap(m, v) {
			break
		}
	}
}

func (d *disk) leave() { d.c.inflight.Add(-1) }

// readAt: the image's bytes at `off` (cut at the disk's end). The image is as long as
// the disk (truncated to it at start), so a read within the disk is whole or an error: a
// failed or short read is EIO, never invented zeros. With `nowait`, a read that would
// wait for the host's disk (not all in its page cache) is not made: `blocked`, for a
// worker to make (fuse.go).
func (d *disk) readAt(dest []byte, off int64, nowait bool) (got []byte, errno syscall.Errno, blocked bool) {
	if off >= d.size {
		return dest[:0], 0, false
	}
	if off+int64(len(dest)) > d.size {
		dest = dest[:d.size-off]
	}
	n, err := d.imageIO(unix.Preadv2, dest, off, nowait)
	if err == unix.EAGAIN || (nowait && err == nil && n < len(dest)) {
		return nil, 0, true
	}
	if err != nil || n < len(dest) {
		d.c.errors.Add(1)
		return nil, syscall.EIO, false
	}
	d.c.reads.Add(1)
	d.c.readBytes.Add(int64(len(dest)))
	return dest, 0, false
}

// writeAt: into the image; past the disk's end is ENOSPC, a failed or short write EIO.
// With `nowait`, a write that would wait (the host throttling its dirty pages, a block
// to allocate) is not made, or not wholly: `blocked`, for a worker to make again.
func (d *disk) writeAt(data []byte, off int64, nowait bool) (errno syscall.Errno, blocked bool) {
	if off+int64(len(data)) > d.size {
		return syscall.ENOSPC, false
	}
	n, err := d.imageIO(unix.Pwritev2, data, off, nowait)
	if err == unix.EAGAIN || (nowait && err == nil && n < len(data)) {
		return 0, true
	}
	if err != nil || n < len(data) {
		d.c.errors.Add(1)
		return syscall.EIO, false
	}
	d.c.writes.Add(1)
	d.c.writeBytes.Add(int64(len(data)))
	return 0, false
}

// imageIO: one pread or pwrite of the image, RWF_NOWAIT when asked for and the host's
// filesystem takes it (where it does not, the loop makes the call itself, waiting).
func (d *disk) imageIO(io func(int, [][]byte, int64, int) (int, error), b []byte, off int64, nowait bool) (int, error) {
	flags := 0
	if nowait && !d.noNowait.Load() {
		flags = unix.RWF_NOWAIT
	}
	for {
		n, err := io(int(d.image.Fd()), [][]byte{b}, off, flags)
		switch {
		case err == unix.EINTR:
			continue
		case flags != 0 && err == unix.EOPNOTSUPP:
			d.noNowait.Store(true)
			flags = 0
			continue
		}
		return n, err
	}
}

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
	// the daemon's own CPU (user + system, all its threads) since it started, and what
	// its loop did (completer.go): its looks, the looks that answered jobs, the jobs it
	// answered (the rest were answered on arrival), the waits it polled the clock for,
	// the looks it deferred to share a wake-up and the most they could have held an
	// arrival, summed
	CPUS     float64 `json:"cpu_s"`
	Wakeups  int64   `json:"loop_wakeups"`
	Batches  int64   `json:"loop_batches"`
	Released int64   `json:"loop_released"`
	Spins    int64   `json:"loop_spins"`
	Holds    int64   `json:"loop_holds"`
	HeldS    float64 `json:"loop_held_s"`
	Final    bool    `json:"final,omitempty"`
	// what carries the requests: "io_uring" (FUSE over io_uring) or "/dev/fuse"
	Transport string `json:"transport,omitempty"`
}

// cpuSeconds: the process's CPU time so far (every thread, user and system).
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func (d *disk) snapshot(final bool) stats {
	return stats{
		T: d.now(), Reads: d.c.reads.Load(), Writes: d.c.writes.Load(),
		Flushes: d.c.flushes.Load(), ReadBytes: d.c.readBytes.Load(),
		WriteBytes: d.c.writeBytes.Load(), ModelWaitS: float64(d.c.waitNs.Load()) / 1e9,
		LateS: float64(d.c.lateNs.Load()) / 1e9, IOS: float64(d.c.ioNs.Load()) / 1e9,
		ModelS: float64(d.c.modelNs.Load()) / 1e9, OversleepS: float64(d.c.oversleepNs.Load()) / 1e9,
		InflightMax: d.c.inflightMax.Swap(d.c.inflight.Load()),
		Errors:      d.c.errors.Load(), CPUS: cpuSeconds(),
		Wakeups: d.done.c.wakeups.Load(), Batches: d.done.c.batches.Load(),
		Released: d.done.c.released.Load(), Spins: d.done.c.spins.Load(),
		Holds: d.done.c.holds.Load(), HeldS: float64(d.done.c.heldNs.Load()) / 1e9,
		Final: final, Transport: d.transport(),
	}
}

func main() {
	image := flag.String("image", "", "the sparse image file that holds the data (created if missing)")
	size := flag.Int64("size", 0, "the device's size in bytes")
	mountpoint := flag.String("mountpoint", "", "an empty directory to mount on")
	modelJSON := flag.String("model", `{"kind":"zero"}`, "the device model's parameters (JSON)")
	statsPath := flag.String("stats", "", "a file to append one JSON line a second to")
	ready := flag.String("ready", "", "a file written once the mount is served")
	window := flag.Float64("window-us", 100, "wake-ups closer than this (us) are shared by the requests of both")
	share := flag.Float64("share", 0.05, "the most a reply or an arrival may be held to share a wake-up, as a share of the device's own wait (0: never)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile (pprof) here until the daemon ends")
	initial := flag.String("initial", "", "an image whose blocks the new image starts with (an aged filesystem; the same size)")
	transport := flag.String("transport", "dev_fuse", "what carries the requests: dev_fuse (/dev/fuse), io_uring (FUSE over io_uring, or fail) or auto (io_uring where the kernel offers it, else /dev/fuse)")
	flag.Parse()
	// One processor more than the cores: the loop's thread (locked) spends its time in
	// ppoll(2), holding its processor until the runtime's monitor takes it back; the
	// spare one runs the rest (the stats line, signals) meanwhile.
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(runtime.NumCPU() + 1)
	}
	if *transport != "auto" && *transport != "io_uring" && *transport != "dev_fuse" {
		fmt.Fprintln(os.Stderr, "pgfsbench-disk: --transport is auto, io_uring or dev")
		os.Exit(2)
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
	if err == nil && *initial != "" {
		err = copyInitial(f, *initial, *size)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgfsbench-disk:", err)
		os.Exit(1)
	}
	d := &disk{image: f, size: *size, model: model, start: time.Now()}
	d.done = newCompleter(d.start, d.finish, pacing{window: int64(*window * 1e3), share: *share})
	if *cpuProfile != "" {
		pf, err := os.OpenFile(*cpuProfile, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
		if err == nil {
			err = pprof.StartCPUProfile(pf)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "pgfsbench-disk: cpuprofile:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if path := os.Getenv("PGFSBENCH_DISK_TRACE"); path != "" {
		tf, err := openTrace(fmt.Sprintf("%s.%d", path, os.Getpid()))
		if err != nil {
			fmt.Fprintln(os.Stderr, "pgfsbench-disk: trace:", err)
			os.Exit(1)
		}
		d.trace = &traceLog{w: bufio.NewWriterSize(tf, 1<<20), f: tf}
	}
	fd, err := mount(*mountpoint)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgfsbench-disk:", err)
		os.Exit(1)
	}
	server, err := newServer(d, fd)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgfsbench-disk:", err)
		os.Exit(1)
	}
	d.answer = server.answer
	d.transport = server.transport
	server.ringWanted = *transport != "dev_fuse"
	server.serve()
	// the kernel sends FUSE_INIT as it mounts; the transport is known once it is answered
	select {
	case <-server.inited:
	case <-time.After(10 * time.Second):
	}
	if *transport == "io_uring" && server.ring == nil {
		fmt.Fprintln(os.Stderr, "pgfsbench-disk: --transport io_uring:", server.ringErr)
		_ = syscall.Unmount(*mountpoint, unix.MNT_DETACH)
		os.Exit(1)
	}
	unmount := func() error { return syscall.Unmount(*mountpoint, 0) }
	var out *os.File
	if *statsPath != "" {
		out, err = os.OpenFile(*statsPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND|syscall.O_NOFOLLOW, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "pgfsbench-disk:", err)
			_ = unmount()
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
	write(false) // the transport, from the start
	if *ready != "" {
		_ = os.WriteFile(*ready, []byte(fmt.Sprintf("%d\n", os.Getpid())), 0o644)
	}
	stop := make(chan os.Signal, 2)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	ticker := time.NewTicker(time.Second)
	done := server.done
	for {
		select {
		case <-ticker.C:
			write(false)
		case <-stop:
			// unmount: refused while the loop device holds the file; then retry until
			// pgfsbench has detached it
			for unmount() != nil {
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

// openTrace makes the trace file anew: never one that is there, never through a link (a
// link another user planted where the trace goes would make root write through it).
func openTrace(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
}

// copyInitial writes the allocated blocks of the image at path into f at their offsets
// (SEEK_DATA and SEEK_HOLE: a hole stays a hole), before anything is served: an aged
// filesystem's layout, block for block. The image must be a regular file of f's size,
// reached without a symlink.
func copyInitial(f *os.File, path string, size int64) error {
	src, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() || st.Size() != size {
		return fmt.Errorf("--initial %s: not a regular file of %d bytes", path, size)
	}
	const seekData, seekHole = 3, 4
	buf := make([]byte, 4<<20)
	for pos := int64(0); pos < size; {
		start, err := src.Seek(pos, seekData)
		if err != nil {
			if errors.Is(err, syscall.ENXIO) {
				return nil // a hole to the end
			}
			return err
		}
		end, err := src.Seek(start, seekHole)
		if err != nil {
			return err
		}
		if end > size {
			end = size
		}
		for at := start; at < end; {
			n := int64(len(buf))
			if end-at < n {
				n = end - at
			}
			got, err := src.ReadAt(buf[:n], at)
			if got > 0 {
				if _, werr := f.WriteAt(buf[:got], at); werr != nil {
					return werr
				}
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return err
			}
			if got == 0 {
				break
			}
			at += int64(got)
		}
		pos = end
	}
	return nil
}
