package launch

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agent-launcher/agent-launcher/landlock"
)

// inPrivateMountNS runs fn on a thread of its own in a private mount
// namespace where it can make one (as root), so that a mount a regression
// lets through never reaches the host; the thread ends with fn. Without
// privilege no mount can happen anyway.
func inPrivateMountNS(t *testing.T, fn func() error) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		if os.Geteuid() == 0 {
			if err := unix.Unshare(unix.CLONE_NEWNS | unix.CLONE_FS); err != nil {
				errc <- err
				return
			}
			if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
				errc <- err
				return
			}
		}
		errc <- fn()
	}()
	return <-errc
}

// TestMountProtectedRefusesReplaced: a protected path that names another
// inode than the one the floor was planned for (replaced from outside in
// between), or that is now a symlink, is refused before anything is
// mounted: a mount over whatever is there now would protect the wrong
// file, and the floor gave its parent the full grant. No privilege is
// needed, as the check comes first.
func TestMountProtectedRefusesReplaced(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "config")
	if err := os.WriteFile(config, []byte("[core]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(config, &st); err != nil {
		t.Fatal(err)
	}
	planned := landlock.Bind{Path: config, ReadOnly: true, Dev: st.Dev, Ino: st.Ino}

	// The operator's editor saves atomically: a new inode at the name.
	if err := os.WriteFile(config+".new", []byte("[core]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(config+".new", config); err != nil {
		t.Fatal(err)
	}
	err := inPrivateMountNS(t, func() error { return mountProtected([]landlock.Bind{planned}) })
	if err == nil || !strings.Contains(err.Error(), "replaced after the floor was planned") {
		t.Errorf("a replaced path: %v; want a refusal", err)
	}
	if _, ok := err.(*ViewError); ok {
		t.Errorf("a replaced path is a view error, which would start again without the view: %v", err)
	}

	// A symlink now stands at the name, even one with the planned inode
	// number (numbers of freed inodes are reused): not followed, not
	// mounted over.
	if err := os.Remove(config); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", config); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Lstat(config, &st); err != nil {
		t.Fatal(err)
	}
	planned.Dev, planned.Ino = st.Dev, st.Ino
	if err := inPrivateMountNS(t, func() error { return mountProtected([]landlock.Bind{planned}) }); err == nil {
		t.Errorf("a symlink at the protected name was accepted")
	}
}
