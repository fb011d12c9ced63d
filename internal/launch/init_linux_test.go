package launch

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCloexecFallback: the /proc/self/fd path of cloexecFrom (Linux 5.10
// has no CLOSE_RANGE_CLOEXEC) marks every fd from min on.
func TestCloexecFallback(t *testing.T) {
	f, err := os.Open("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd := int(f.Fd())
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0); err != nil {
		t.Fatal(err)
	}
	if err := cloexecByList(fd); err != nil {
		t.Fatal(err)
	}
	if flags, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); flags&unix.FD_CLOEXEC == 0 {
		t.Errorf("fd %d is not close-on-exec", fd)
	}
}
