package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The FUSE server end to end (root and /dev/fuse needed): the mount shows one file of the
// disk's size; what is written with direct I/O is read back; each reply waits for the
// model (an SSD whose every operation takes 3 ms), a flush too; a truncate to another
// size is refused; unmounting ends the server. On /dev/fuse, then on FUSE over io_uring
// where the kernel has it.
func TestTheMountServesTheDiskAtTheModelsPace(t *testing.T) {
	t.Run("dev_fuse", func(t *testing.T) { serveTheDisk(t, false, "/dev/fuse") })
	for _, param := range []string{"Y", "N"} {
		// the kernel offers the ring to a mount that starts while enable_uring is on;
		// wanted and not offered, the disk is served on /dev/fuse
		want := map[string]string{"Y": "io_uring", "N": "/dev/fuse"}[param]
		t.Run("io_uring wanted, enable_uring "+param, func(t *testing.T) {
			old, err := os.ReadFile(uringParam)
			if err != nil {
				t.Skip("this kernel has no FUSE over io_uring (Linux 6.14 and later)")
			}
			if err := os.WriteFile(uringParam, []byte(param+"\n"), 0o644); err != nil {
				t.Skip("fuse's enable_uring cannot be set here:", err)
			}
			defer func() { _ = os.WriteFile(uringParam, old, 0o644) }()
			serveTheDisk(t, true, want)
		})
	}
}

const uringParam = "/sys/module/fuse/parameters/enable_uring"

const testDiskBytes = 64 << 20

func serveTheDisk(t *testing.T, ring bool, transport string) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (a FUSE mount)")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse")
	}
	dir := t.TempDir()
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	image, err := os.OpenFile(filepath.Join(dir, "img"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := image.Truncate(testDiskBytes); err != nil {
		t.Fatal(err)
	}
	d := &disk{image: image, size: testDiskBytes, start: time.Now()}
	d.model = model(t, `{"kind":"ssd","read_us":3000,"write_us":3000,"flush_us":3000,"channels":4,"read_mbps":1000,"write_mbps":1000}`)
	d.done = newCompleter(d.start, d.finish, pacing{window: 100_000, share: 0.05})
	fd, err := mount(mnt)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := newServer(d, fd)
	if err != nil {
		t.Fatal(err)
	}
	d.answer = srv.answer
	srv.ringWanted = ring
	srv.serve()
	mounted := true
	defer func() {
		if mounted {
			_ = syscall.Unmount(mnt, unix.MNT_DETACH)
		}
	}()

	select {
	case <-srv.inited:
	case <-time.After(5 * time.Second):
		t.Fatal("no FUSE_INIT")
	}
	if srv.transport() != transport {
		t.Fatalf("served on %s, not %s (%s)", srv.transport(), transport, srv.ringErr)
	}
	if ring && transport == "/dev/fuse" && !strings.Contains(srv.ringErr, "does not offer") {
		t.Fatalf("the ring was not used, and the reason is %q", srv.ringErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := exec.CommandContext(ctx, os.Args[0])
	client.Env = append(os.Environ(), clientEnv+"="+mnt+"\n"+image.Name())
	if out, err := client.CombinedOutput(); err != nil {
		t.Fatalf("on the mount: %v: %s", err, out)
	}
	if d.c.writes.Load() < 2 || d.c.reads.Load() < 2 || d.c.flushes.Load() != 1 {
		t.Fatalf("served %d writes, %d reads, %d flushes", d.c.writes.Load(), d.c.reads.Load(), d.c.flushes.Load())
	}
	if err := syscall.Unmount(mnt, 0); err != nil {
		t.Fatal(err)
	}
	mounted = false
	select {
	case <-srv.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the server did not end with its mount")
	}
}

func unsafePointer(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }

// useTheDisk: what the test does on the mount, from a process of its own (the server's
// process would be its own client: a Go runtime that serves FUSE and waits on it too can
// deadlock on itself, as this test did once in about 150 runs).
func useTheDisk(mnt, imagePath string) error {
	names, err := os.ReadDir(mnt)
	if err != nil || len(names) != 1 || names[0].Name() != "disk" {
		return fmt.Errorf("the mount lists %v (%v)", names, err)
	}
	path := filepath.Join(mnt, "disk")
	st, err := os.Stat(path)
	if err != nil || st.Size() != testDiskBytes {
		return fmt.Errorf("stat: %v %v", st, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|syscall.O_DIRECT, 0)
	if err != nil {
		return err
	}
	block := make([]byte, 8192+4096)
	aligned := block[4096-int(unsafePointer(block)%4096):][:8192]
	for i := range aligned {
		aligned[i] = byte(i * 7)
	}
	began := time.Now()
	if n, err := f.WriteAt(aligned, 1<<20); err != nil || n != len(aligned) {
		return fmt.Errorf("write: %d %v", n, err)
	}
	if took := time.Since(began); took < 3*time.Millisecond {
		return fmt.Errorf("a write the model makes take 3 ms took %v", took)
	}
	back := make([]byte, 8192+4096)
	got := back[4096-int(unsafePointer(back)%4096):][:8192]
	began = time.Now()
	if n, err := f.ReadAt(got, 1<<20); err != nil || n != len(got) {
		return fmt.Errorf("read: %d %v", n, err)
	}
	if took := time.Since(began); took < 3*time.Millisecond {
		return fmt.Errorf("a read the model makes take 3 ms took %v", took)
	}
	if !bytes.Equal(got, aligned) {
		return fmt.Errorf("what was read is not what was written")
	}
	began = time.Now()
	if err := f.Sync(); err != nil {
		return err
	}
	if took := time.Since(began); took < 3*time.Millisecond {
		return fmt.Errorf("a flush the model makes take 3 ms took %v", took)
	}
	// a large request, its reply still at the model's time
	large := make([]byte, 512<<10+4096)
	big := large[4096-int(unsafePointer(large)%4096):][:512<<10]
	for i := range big {
		big[i] = byte(i * 13)
	}
	began = time.Now()
	if n, err := f.WriteAt(big, 8<<20); err != nil || n != len(big) {
		return fmt.Errorf("a large write: %d %v", n, err)
	}
	if took := time.Since(began); took < 3*time.Millisecond {
		return fmt.Errorf("a large write took %v", took)
	}
	// out of the host's page cache: the read waits for the host's disk, on a worker
	if err := dropFromCache(imagePath); err != nil {
		return err
	}
	again := make([]byte, 512<<10+4096)
	bigBack := again[4096-int(unsafePointer(again)%4096):][:512<<10]
	if n, err := f.ReadAt(bigBack, 8<<20); err != nil || n != len(bigBack) || !bytes.Equal(bigBack, big) {
		return fmt.Errorf("a large read: %d %v, equal %v", n, err, bytes.Equal(bigBack, big))
	}
	if err := f.Truncate(testDiskBytes / 2); err == nil {
		return fmt.Errorf("the disk was truncated")
	}
	_ = f.Close()
	return nil
}

// dropFromCache: the image's pages out of the host's page cache (a read then waits for
// the host's disk, on a worker).
func dropFromCache(path string) error {
	image, err := os.Open(path)
	if err != nil {
		return err
	}
	defer image.Close()
	_ = image.Sync()
	return unix.Fadvise(int(image.Fd()), 0, 0, unix.FADV_DONTNEED)
}

const clientEnv = "PGFSBENCH_DISK_TEST_CLIENT" // "mountpoint\nimage": this process is the client

func TestMain(m *testing.M) {
	if spec := os.Getenv(clientEnv); spec != "" {
		mnt, image, _ := strings.Cut(spec, "\n")
		if err := useTheDisk(mnt, image); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
