package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// An emulated disk answers what its image holds, or EIO: never invented data.
func diskOver(t *testing.T, image *os.File, size int64) *disk {
	t.Helper()
	return &disk{image: image, size: size, model: model(t, `{"kind":"zero"}`), start: time.Now()}
}

func TestAReadTheImageCannotAnswerIsEIONeverZeros(t *testing.T) {
	path := filepath.Join(t.TempDir(), "img")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("data")); err != nil {
		t.Fatal(err)
	}
	// the disk says 1 MiB; its image (shrunk under it) holds 4 bytes
	d := diskOver(t, f, 1<<20)
	buf := make([]byte, 4096)
	if _, errno, _ := d.readAt(buf, 0, false); errno != syscall.EIO {
		t.Fatalf("a short read: errno %v, want EIO", errno)
	}
	if _, errno, _ := d.readAt(buf, 8192, false); errno != syscall.EIO {
		t.Fatalf("a read past the image's end: errno %v, want EIO", errno)
	}
	if got := d.c.errors.Load(); got != 2 {
		t.Fatalf("errors counted: %d, want 2", got)
	}
	// within the image, the data itself
	if err := f.Truncate(1 << 20); err != nil {
		t.Fatal(err)
	}
	out, errno, _ := d.readAt(buf, 0, false)
	if errno != 0 {
		t.Fatalf("a whole read: errno %v", errno)
	}
	if string(out[:4]) != "data" {
		t.Fatalf("read %q", out[:4])
	}
}

func TestAFailedReadOrWriteOfTheImageIsEIO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "img")
	if err := os.WriteFile(path, make([]byte, 1<<16), 0o600); err != nil {
		t.Fatal(err)
	}
	ro, err := os.Open(path) // read-only: every write fails
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	d := diskOver(t, ro, 1<<16)
	if errno, _ := d.writeAt([]byte("x"), 0, false); errno != syscall.EIO {
		t.Fatalf("a failed write: errno %v, want EIO", errno)
	}
	ro.Close() // closed: every read fails
	if _, errno, _ := d.readAt(make([]byte, 512), 0, false); errno != syscall.EIO {
		t.Fatalf("a failed read: errno %v, want EIO", errno)
	}
}

// A read the host would make wait (its page not in the host's page cache) is not made on
// the loop: it is "blocked", for a worker; made waiting, it reads the data.
func TestAReadThatWouldWaitIsLeftToAWorker(t *testing.T) {
	path := filepath.Join(t.TempDir(), "img")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("data"), 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(2 << 20); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil || st.Type == unix.TMPFS_MAGIC {
		t.Skip("the image is in memory here: no read waits")
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	d := diskOver(t, f, 2<<20)
	buf := make([]byte, 4)
	_, errno, blocked := d.readAt(buf, 1<<20, true)
	if d.noNowait.Load() {
		t.Skip("this filesystem refuses RWF_NOWAIT")
	}
	if errno != 0 || !blocked {
		t.Fatalf("a read of a page not in the page cache: errno %v, blocked %v", errno, blocked)
	}
	got, errno, blocked := d.readAt(buf, 1<<20, false)
	if errno != 0 || blocked || string(got) != "data" {
		t.Fatalf("made waiting: %q %v %v", got, errno, blocked)
	}
}
