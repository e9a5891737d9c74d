package main

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// An emulated disk answers what its image holds, or EIO: never invented data.
func diskOver(t *testing.T, image *os.File, size int64) *diskNode {
	t.Helper()
	return &diskNode{d: &disk{image: image, size: size, model: model(t, `{"kind":"zero"}`), start: time.Now()}}
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
	node := diskOver(t, f, 1<<20)
	buf := make([]byte, 4096)
	if _, errno := node.Read(context.Background(), nil, buf, 0); errno != syscall.EIO {
		t.Fatalf("a short read: errno %v, want EIO", errno)
	}
	if _, errno := node.Read(context.Background(), nil, buf, 8192); errno != syscall.EIO {
		t.Fatalf("a read past the image's end: errno %v, want EIO", errno)
	}
	if got := node.d.c.errors.Load(); got != 2 {
		t.Fatalf("errors counted: %d, want 2", got)
	}
	// within the image, the data itself
	if err := f.Truncate(1 << 20); err != nil {
		t.Fatal(err)
	}
	res, errno := node.Read(context.Background(), nil, buf, 0)
	if errno != 0 {
		t.Fatalf("a whole read: errno %v", errno)
	}
	out, _ := res.Bytes(make([]byte, 4096))
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
	node := diskOver(t, ro, 1<<16)
	if _, errno := node.Write(context.Background(), nil, []byte("x"), 0); errno != syscall.EIO {
		t.Fatalf("a failed write: errno %v, want EIO", errno)
	}
	ro.Close() // closed: every read fails
	if _, errno := node.Read(context.Background(), nil, make([]byte, 512), 0); errno != syscall.EIO {
		t.Fatalf("a failed read: errno %v, want EIO", errno)
	}
}
