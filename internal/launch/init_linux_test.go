package launch

import (
	"errors"
	"os"
	"testing"
	"time"

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

// The ready timeout holds on the supervisor's end of the sync socket: a
// read with no frame coming ends at the deadline, and a frame written on
// the init stage's end, which stays blocking, arrives.
func TestSyncPairDeadline(t *testing.T) {
	conn, child, err := syncPair()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	defer child.Close()
	if fl, err := unix.FcntlInt(child.Fd(), unix.F_GETFL, 0); err != nil || fl&unix.O_NONBLOCK != 0 {
		t.Fatalf("the init stage's end: flags %#x (%v), want blocking", fl, err)
	}
	if err := conn.SetDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatalf("SetDeadline: %v", err)
	}
	var rep report
	if err := readFrame(conn, &rep); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read with nothing sent: %v, want the deadline", err)
	}
	if err := conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := writeFrame(child, report{Type: msgReady}); err != nil {
		t.Fatal(err)
	}
	if err := readFrame(conn, &rep); err != nil || rep.Type != msgReady {
		t.Fatalf("read: %+v, %v; want %q", rep, err, msgReady)
	}
}
