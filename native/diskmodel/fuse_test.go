package main

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The FUSE server end to end (root and /dev/fuse needed): the mount shows one file of the
// disk's size; what is written with direct I/O is read back; each reply waits for the
// model (an SSD whose every operation takes 3 ms), a flush too; a truncate to another
// size is refused; unmounting ends the server.
func TestTheMountServesTheDiskAtTheModelsPace(t *testing.T) {
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
	const size = 64 << 20
	if err := image.Truncate(size); err != nil {
		t.Fatal(err)
	}
	d := &disk{image: image, size: size, start: time.Now()}
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
	srv.serve()
	mounted := true
	defer func() {
		if mounted {
			_ = syscall.Unmount(mnt, unix.MNT_DETACH)
		}
	}()

	names, err := os.ReadDir(mnt)
	if err != nil || len(names) != 1 || names[0].Name() != "disk" {
		t.Fatalf("the mount lists %v (%v)", names, err)
	}
	path := filepath.Join(mnt, "disk")
	st, err := os.Stat(path)
	if err != nil || st.Size() != size {
		t.Fatalf("stat: %v %v", st, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|syscall.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	block := make([]byte, 8192+4096)
	aligned := block[4096-int(unsafePointer(block)%4096):][:8192]
	for i := range aligned {
		aligned[i] = byte(i * 7)
	}
	began := time.Now()
	if n, err := f.WriteAt(aligned, 1<<20); err != nil || n != len(aligned) {
		t.Fatalf("write: %d %v", n, err)
	}
	if took := time.Since(began); took < 3*time.Millisecond {
		t.Fatalf("a write the model makes take 3 ms took %v", took)
	}
	back := make([]byte, 8192+4096)
	got := back[4096-int(unsafePointer(back)%4096):][:8192]
	began = time.Now()
	if n, err := f.ReadAt(got, 1<<20); err != nil || n != len(got) {
		t.Fatalf("read: %d %v", n, err)
	}
	if took := time.Since(began); took < 3*time.Millisecond {
		t.Fatalf("a read the model makes take 3 ms took %v", took)
	}
	if !bytes.Equal(got, aligned) {
		t.Fatal("what was read is not what was written")
	}
	began = time.Now()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took < 3*time.Millisecond {
		t.Fatalf("a flush the model makes take 3 ms took %v", took)
	}
	// a large request, its reply still at the model's time
	large := make([]byte, 512<<10+4096)
	big := large[4096-int(unsafePointer(large)%4096):][:512<<10]
	for i := range big {
		big[i] = byte(i * 13)
	}
	began = time.Now()
	if n, err := f.WriteAt(big, 8<<20); err != nil || n != len(big) {
		t.Fatalf("a large write: %d %v", n, err)
	}
	if took := time.Since(began); took < 3*time.Millisecond {
		t.Fatalf("a large write took %v", took)
	}
	// out of the host's page cache: the read waits for the host's disk, on a worker
	_ = image.Sync()
	_ = unix.Fadvise(int(image.Fd()), 0, 0, unix.FADV_DONTNEED)
	again := make([]byte, 512<<10+4096)
	bigBack := again[4096-int(unsafePointer(again)%4096):][:512<<10]
	if n, err := f.ReadAt(bigBack, 8<<20); err != nil || n != len(bigBack) || !bytes.Equal(bigBack, big) {
		t.Fatalf("a large read: %d %v, equal %v", n, err, bytes.Equal(bigBack, big))
	}
	if err := f.Truncate(size / 2); err == nil {
		t.Fatal("the disk was truncated")
	}
	_ = f.Close()
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
