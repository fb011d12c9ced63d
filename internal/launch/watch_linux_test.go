package launch

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-launcher/agent-launcher/landlock"
)

// TestWatchCarvedStop: an entry created from outside in a watched carved
// directory is noticed (the control); once stop has returned, none is,
// stop returns without waiting for the watching goroutine, and the
// inotify descriptor is closed soon after.
func TestWatchCarvedStop(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	var notices []string
	notice := func(msg string) {
		mu.Lock()
		defer mu.Unlock()
		notices = append(notices, msg)
	}
	got := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), notices...)
	}
	inotifyFDs := func() int {
		n := 0
		ents, _ := os.ReadDir("/proc/self/fd")
		for _, e := range ents {
			if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.Contains(l, "inotify") {
				n++
			}
		}
		return n
	}
	before := inotifyFDs()
	pl := &landlock.Plan{Carved: []landlock.Carved{{Path: dir, Kept: "read_file,read_dir"}}}
	stop := watchCarved(pl, notice)
	if inotifyFDs() != before+1 {
		t.Fatalf("watchCarved opened %d inotify descriptors, want 1", inotifyFDs()-before)
	}
	if err := os.WriteFile(filepath.Join(dir, "first"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); len(got()) == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if n := got(); len(n) != 1 || !strings.Contains(n[0], filepath.Join(dir, "first")+" was created or replaced from outside the session") {
		t.Fatalf("control: notices %q; want one for %s/first", n, dir)
	}
	stop()
	if err := os.WriteFile(filepath.Join(dir, "second"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	unix.Stat(dir, &st) // the event is queued by now; a reader still there would get it
	for deadline := time.Now().Add(10 * time.Second); inotifyFDs() != before && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if inotifyFDs() != before {
		t.Errorf("the inotify descriptor is still open 10 s after stop")
	}
	time.Sleep(50 * time.Millisecond)
	if n := got(); len(n) != 1 {
		t.Errorf("notices after stop: %q", n[1:])
	}
}
