package cli

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestPrepareCanary: the canary is made when missing, left alone when
// intact (the same inode, no write), and made anew when anything else
// stands in its place: a mode-000 copy, other content, a FIFO (never
// waited on: prepareCanary returns), a symlink (removed, its target left
// alone).
func TestPrepareCanary(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	path := filepath.Join(state, "canary")
	prepare := func(what string) {
		t.Helper()
		done := make(chan error, 1)
		go func() {
			_, err := prepareCanary(state)
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: prepareCanary did not return", what)
		}
		if !canaryIntact(path) {
			t.Fatalf("%s: the canary is not intact afterwards", what)
		}
		if st, err := os.Stat(state); err != nil || st.Mode().Perm() != 0o700 {
			t.Fatalf("%s: the state directory: %v %v", what, st, err)
		}
	}
	ino := func() uint64 {
		var st unix.Stat_t
		if err := unix.Lstat(path, &st); err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	prepare("missing")
	before := ino()
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	prepare("intact")
	if st, err := os.Stat(path); err != nil || ino() != before || !st.ModTime().Equal(old) {
		t.Errorf("an intact canary was written again: %v %v", st, err)
	}

	if err := os.Chmod(path, 0); err != nil {
		t.Fatal(err)
	}
	prepare("mode 000")
	if err := os.WriteFile(path, []byte("other\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	prepare("other content")

	os.Remove(path)
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	prepare("a FIFO in its place")

	target := filepath.Join(filepath.Dir(state), "target")
	if err := os.WriteFile(target, []byte("keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(path)
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	prepare("a symlink in its place")
	if b, err := os.ReadFile(target); err != nil || string(b) != "keep\n" {
		t.Errorf("the symlink's target was written: %q %v", b, err)
	}
	if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the canary is not a regular file: %v %v", fi, err)
	}
}
