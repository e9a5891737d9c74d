package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
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
	if _, errno := d.readAt(buf, 0); errno != syscall.EIO {
		t.Fatalf("a short read: errno %v, want EIO", errno)
	}
	if _, errno := d.readAt(buf, 8192); errno != syscall.EIO {
		t.Fatalf("a read past the image's end: errno %v, want EIO", errno)
	}
	if got := d.c.errors.Load(); got != 2 {
		t.Fatalf("errors counted: %d, want 2", got)
	}
	// within the image, the data itself
	if err := f.Truncate(1 << 20); err != nil {
		t.Fatal(err)
	}
	out, errno := d.readAt(buf, 0)
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
	if errno := d.writeAt([]byte("x"), 0); errno != syscall.EIO {
		t.Fatalf("a failed write: errno %v, want EIO", errno)
	}
	ro.Close() // closed: every read fails
	if _, errno := d.readAt(make([]byte, 512), 0); errno != syscall.EIO {
		t.Fatalf("a failed read: errno %v, want EIO", errno)
	}
}

// Through the mapping: a page past the end of an image shrunk under the disk faults, and
// that is the request's EIO (the daemon goes on); once the daemon has seen the image
// shrink (its check once a second), reads go through pread, and a short one is EIO too.
func TestTheMappedImageAnswersAFaultWithEIO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "img")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(1 << 20); err != nil {
		t.Fatal(err)
	}
	d := diskOver(t, f, 1<<20)
	d.mapImage()
	if d.mapped.Load() == nil {
		t.Fatal("the image was not mapped")
	}
	if errno := d.writeAt([]byte("data"), 65536); errno != 0 {
		t.Fatalf("a write through the mapping: %v", errno)
	}
	buf := make([]byte, 4)
	if got, errno := d.readAt(buf, 65536); errno != 0 || string(got) != "data" {
		t.Fatalf("read back %q, %v", got, errno)
	}
	if err := f.Truncate(4096); err != nil { // shrunk under the disk
		t.Fatal(err)
	}
	if _, errno := d.readAt(make([]byte, 4096), 65536); errno != syscall.EIO {
		t.Fatalf("a read past the shrunk image: %v, want EIO", errno)
	}
	if errno := d.writeAt([]byte("x"), 65536); errno != syscall.EIO {
		t.Fatalf("a write past the shrunk image: %v, want EIO", errno)
	}
	d.checkImage()
	if d.mapped.Load() != nil {
		t.Fatal("the mapping is still used")
	}
	if _, errno := d.readAt(make([]byte, 8192), 0); errno != syscall.EIO {
		t.Fatalf("a short read: %v, want EIO", errno)
	}
	if got := d.c.errors.Load(); got != 3 {
		t.Fatalf("errors counted: %d, want 3", got)
	}
}
