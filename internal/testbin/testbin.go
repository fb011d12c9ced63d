// Package testbin helps tests that run their own test binary again as
// another user.
package testbin

import (
	"os"
	"path/filepath"
	"testing"
)

// CopySelf copies the running test binary to dir/name, mode 0755, and
// opens dir and every directory above it up to the temporary directory to
// others (0755), so that an ordinary user may execute the copy: the go
// command's own copy lies in a directory only its builder may enter.
func CopySelf(t testing.TB, dir, name string) string {
	t.Helper()
	exe, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, name)
	if err := os.WriteFile(bin, exe, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(bin, 0o755); err != nil { // whatever the umask
		t.Fatal(err)
	}
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}
