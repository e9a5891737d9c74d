package main

import (
	"os"
	"path/filepath"
	"testing"
)

// The trace file is made anew: a link or a file already at its name is refused, and
// what the link points at is left as it was.
func TestTraceIsNeverOpenedThroughALinkOrOverAFile(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("root's"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "trace.1")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	if f, err := openTrace(link); err == nil {
		f.Close()
		t.Fatal("a trace was opened through a link")
	}
	if f, err := openTrace(victim); err == nil {
		f.Close()
		t.Fatal("a trace was opened over an existing file")
	}
	if got, _ := os.ReadFile(victim); string(got) != "root's" {
		t.Fatalf("the victim was written: %q", got)
	}
	f, err := openTrace(filepath.Join(dir, "trace.2"))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}
