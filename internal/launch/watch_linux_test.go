package launch

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-launcher/agent-launcher/landlock"
)

// watchHarness runs watchCarved on a plan of carved directories made for
// the test, looking every few milliseconds, and collects its notices.
type watchHarness struct {
	t       *testing.T
	mu      sync.Mutex
	notices []string
	stop    func(look bool)
}

// carvedAt returns the plan's entry for dir, a carved directory that keeps
// kept.
func carvedAt(t *testing.T, dir, kept string) landlock.Carved {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		t.Fatal(err)
	}
	return landlock.Carved{Path: dir, Kept: kept, Dev: st.Dev, Ino: st.Ino}
}

// ruleFor returns a rule that grants path as it is now.
func ruleFor(t *testing.T, path string) landlock.Rule {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return landlock.Rule{Path: path, Dir: st.Mode&unix.S_IFMT == unix.S_IFDIR, Access: landlock.ReadFile, Dev: st.Dev, Ino: st.Ino}
}

func startWatch(t *testing.T, pl *landlock.Plan) *watchHarness {
	t.Helper()
	saved := carvedWatchEvery
	carvedWatchEvery = 5 * time.Millisecond
	h := &watchHarness{t: t}
	h.stop = watchCarved(pl, func(msg string) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.notices = append(h.notices, msg)
	})
	t.Cleanup(func() {
		h.stop(true)
		carvedWatchEvery = saved
	})
	// The watch's first listing is what it compares with: let it be taken
	// before the test changes anything (a few looks).
	time.Sleep(30 * time.Millisecond)
	return h
}

func (h *watchHarness) got() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.notices...)
}

// waitFor waits up to 10 s for n notices and returns them.
func (h *watchHarness) waitFor(n int) []string {
	for deadline := time.Now().Add(10 * time.Second); len(h.got()) < n && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	return h.got()
}

// quiet waits for many looks and returns the notices given.
func (h *watchHarness) quiet() []string {
	time.Sleep(100 * time.Millisecond)
	return h.got()
}

func mustWrite(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestWatchCarvedEntries: in a watched carved directory, an entry created
// from outside, one replaced by a rename over it (an editor's atomic save)
// and a granted file moved in from elsewhere each get one notice, naming
// them, the last a warning; a file written in place, whose rule still
// holds, gets none, and neither does anything in an unwatched directory
// (one whose kept rights let the agent create entries).
func TestWatchCarvedEntries(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "carved")
	open := filepath.Join(root, "open")
	other := filepath.Join(root, "other")
	for _, d := range []string{dir, open, other} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	saved, inPlace, granted := filepath.Join(dir, "saved"), filepath.Join(dir, "in-place"), filepath.Join(other, "granted")
	for _, p := range []string{saved, inPlace, granted} {
		mustWrite(t, p)
	}
	pl := &landlock.Plan{
		Carved: []landlock.Carved{carvedAt(t, dir, "read_file|read_dir"), carvedAt(t, open, "read_file|read_dir|make_reg")},
		Rules:  []landlock.Rule{ruleFor(t, saved), ruleFor(t, inPlace), ruleFor(t, granted)},
	}
	h := startWatch(t, pl)
	if n := h.quiet(); len(n) != 0 {
		t.Fatalf("notices with nothing changed: %q", n)
	}

	// Changes that need no notice.
	if err := os.WriteFile(inPlace, []byte("new content"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(open, "made"))
	if n := h.quiet(); len(n) != 0 {
		t.Fatalf("notices for a write in place and a file in an unwatched directory: %q", n)
	}

	mustWrite(t, filepath.Join(dir, "new"))
	tmp := filepath.Join(root, "saved.tmp")
	mustWrite(t, tmp)
	if err := os.Rename(tmp, saved); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(granted, filepath.Join(dir, "moved-in")); err != nil {
		t.Fatal(err)
	}
	n := h.waitFor(3)
	want := []string{
		filepath.Join(dir, "moved-in") + " is now " + granted + ", moved there from outside the session",
		filepath.Join(dir, "new") + " was created or replaced from outside the session",
		saved + " was created or replaced from outside the session",
	}
	if len(n) != len(want) {
		t.Fatalf("notices %q; want one each for %s", n, []string{"moved-in", "new", "saved"})
	}
	for _, w := range want {
		found := false
		for _, msg := range n {
			found = found || strings.Contains(msg, w)
		}
		if !found {
			t.Errorf("no notice says %q; notices: %q", w, n)
		}
	}
	for _, msg := range n {
		if strings.Contains(msg, "moved-in") && !strings.HasPrefix(msg, "WARNING: ") {
			t.Errorf("the moved-in notice is not a warning: %q", msg)
		}
	}

	// The same path again: no second notice.
	if err := os.Remove(filepath.Join(dir, "new")); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(dir, "new"))
	if n := h.quiet(); len(n) != 3 {
		t.Errorf("notices after a path that had one changed again: %q", n[3:])
	}
}

// TestWatchCarvedReusedInode: a file removed and made again at its name,
// and a watched directory removed and made again at its path, each get a
// notice even when the new one has the old inode number (ext4 gives a
// freed inode number back at once): the birth time tells them apart. The
// directory is watched twice, as an entry of a watched directory and
// itself; a third, alone, only itself. The watch looks only at its start
// and at stop here, so the changes in between are seen at stop, as at a
// session's end. Other processes take inode numbers too (a test run in
// parallel), so a round where not every number came back is made again.
func TestWatchCarvedReusedInode(t *testing.T) {
	saved := carvedWatchEvery
	carvedWatchEvery = time.Hour
	t.Cleanup(func() { carvedWatchEvery = saved })
	ino := func(p string) uint64 {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	for round := 0; round < 20; round++ {
		root := t.TempDir()
		dir, sub, alone := filepath.Join(root, "carved"), filepath.Join(root, "carved", "sub"), filepath.Join(root, "alone")
		for _, d := range []string{sub, alone} {
			if err := os.MkdirAll(d, 0o700); err != nil {
				t.Fatal(err)
			}
		}
		file := filepath.Join(dir, "file")
		mustWrite(t, file)
		fileIno, subIno, aloneIno := ino(file), ino(sub), ino(alone)
		pl := &landlock.Plan{
			Carved: []landlock.Carved{carvedAt(t, dir, "read_file|read_dir"), carvedAt(t, sub, "read_dir"), carvedAt(t, alone, "read_dir")},
			Rules:  []landlock.Rule{ruleFor(t, file)},
		}
		notice, got := collect()
		w := newCarvedWatch(pl, notice)
		go w.run()
		firstLook(t, w)
		// Past the clock tick the watch began in: a birth time taken from
		// a coarse clock then shows the change.
		time.Sleep(20 * time.Millisecond)
		if err := os.Remove(file); err != nil {
			t.Fatal(err)
		}
		mustWrite(t, file)
		for _, d := range []string{sub, alone} {
			if err := os.Remove(d); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(d, 0o700); err != nil {
				t.Fatal(err)
			}
		}
		reused := ino(file) == fileIno && ino(sub) == subIno && ino(alone) == aloneIno
		w.stop(true)
		n := got()
		if len(n) != 3 {
			t.Fatalf("notices %q; want one each for %s, %s and %s", n, file, sub, alone)
		}
		// The directory is also an entry of the one above it, whose look
		// comes first: either notice names it.
		for _, w := range []string{file + " was created or replaced", sub + " was ", alone + " was moved or deleted"} {
			found := false
			for _, msg := range n {
				found = found || strings.HasPrefix(msg, w)
			}
			if !found {
				t.Errorf("no notice starts %q; notices: %q", w, n)
			}
		}
		if reused {
			return
		}
		var sfs unix.Statfs_t
		if err := unix.Statfs(root, &sfs); err != nil {
			t.Fatal(err)
		}
		if sfs.Type != unix.EXT4_SUPER_MAGIC {
			t.Logf("this file system (magic %#x) did not give the freed inode numbers back: the replacements had new ones", sfs.Type)
			return
		}
	}
	t.Fatalf("ext4 did not give every freed inode number back in 20 rounds: the case this test is for did not happen")
}

// TestWatchCarvedDirMoved: a watched carved directory moved away (and
// another made at its path) gets one notice; its sibling, moved nowhere,
// none until an entry appears in it (the control: it is still watched).
func TestWatchCarvedDirMoved(t *testing.T) {
	root := t.TempDir()
	moved, kept := filepath.Join(root, "moved"), filepath.Join(root, "kept")
	for _, d := range []string{moved, kept} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	h := startWatch(t, &landlock.Plan{Carved: []landlock.Carved{carvedAt(t, moved, "read_dir"), carvedAt(t, kept, "read_dir")}})
	if err := os.Rename(moved, filepath.Join(root, "elsewhere")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(moved, 0o700); err != nil {
		t.Fatal(err)
	}
	if n := h.waitFor(1); len(n) != 1 || !strings.HasPrefix(n[0], moved+" was moved or deleted from outside the session") {
		t.Fatalf("notices %q; want one that %s was moved", n, moved)
	}
	mustWrite(t, filepath.Join(moved, "in-the-new-one"))
	mustWrite(t, filepath.Join(kept, "new"))
	n := h.waitFor(2)
	if len(n) != 2 || !strings.HasPrefix(n[1], filepath.Join(kept, "new")+" was created or replaced") {
		t.Fatalf("notices %q; want the move, then one for %s/new only", n, kept)
	}
	if n := h.quiet(); len(n) != 2 {
		t.Errorf("more notices: %q", n[2:])
	}
}

// TestWatchCarvedRelists: a look lists a directory again only when its
// stamp may have changed. One whose stamp is older than the stamps'
// settling time is listed once; one changed less than that ago is listed
// at every look (within a tick of the file system's clock, a change may
// leave the change time as it was).
func TestWatchCarvedRelists(t *testing.T) {
	root := t.TempDir()
	settled, recent := filepath.Join(root, "settled"), filepath.Join(root, "recent")
	if err := os.Mkdir(settled, 0o700); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2100 * time.Millisecond) // the stamps' settling time is 2 s
	if err := os.Mkdir(recent, 0o700); err != nil {
		t.Fatal(err)
	}
	saved := carvedWatchEvery
	carvedWatchEvery = 5 * time.Millisecond
	t.Cleanup(func() { carvedWatchEvery = saved })
	w := newCarvedWatch(&landlock.Plan{Carved: []landlock.Carved{carvedAt(t, settled, "read_dir"), carvedAt(t, recent, "read_dir")}}, func(msg string) { t.Errorf("notice: %s", msg) })
	go w.run()
	time.Sleep(200 * time.Millisecond)
	w.stop(true)
	s, r := w.dirs[0].listings.Load(), w.dirs[1].listings.Load()
	if s != 1 {
		t.Errorf("a directory with a settled stamp was listed %d times, want once", s)
	}
	if r < 5 {
		t.Errorf("a directory with a recent stamp was listed %d times in 200 ms of 5 ms looks", r)
	}
}

// TestWatchCarvedStop: with looks an hour apart, an entry created from
// outside just before stop is noticed all the same (stop looks once more:
// whatever changed before the session ended has its notice), stop does
// not wait for a look that is due, and once it has returned no notice is
// given.
func TestWatchCarvedStop(t *testing.T) {
	dir := t.TempDir()
	slowWatch(t)
	notice, got := collect()
	w := newCarvedWatch(&landlock.Plan{Carved: []landlock.Carved{carvedAt(t, dir, "read_file|read_dir")}}, notice)
	go w.run()
	firstLook(t, w)
	mustWrite(t, filepath.Join(dir, "last"))
	start := time.Now()
	w.stop(true)
	if d := time.Since(start); d > time.Second {
		t.Errorf("stop took %v", d)
	}
	mustWrite(t, filepath.Join(dir, "after"))
	time.Sleep(50 * time.Millisecond)
	w.stop(true) // again: nothing more
	if notices := got(); len(notices) != 1 || !strings.Contains(notices[0], filepath.Join(dir, "last")+" was created or replaced from outside the session") {
		t.Fatalf("notices %q; want one, for %s/last", notices, dir)
	}
}

// TestWatchCarvedNoDescriptor: the watch holds no descriptor between its
// looks (no inotify instance, whose release at exit cost every run with a
// carved directory), and nothing is watched without a carved directory.
func TestWatchCarvedNoDescriptor(t *testing.T) {
	fds := func() []string {
		var out []string
		ents, _ := os.ReadDir("/proc/self/fd")
		for _, e := range ents {
			l, _ := os.Readlink("/proc/self/fd/" + e.Name())
			out = append(out, l)
		}
		return out
	}
	dir := t.TempDir()
	before := len(fds())
	h := startWatch(t, &landlock.Plan{Carved: []landlock.Carved{carvedAt(t, dir, "read_dir")}})
	mustWrite(t, filepath.Join(dir, "new"))
	if n := h.waitFor(1); len(n) != 1 {
		t.Fatalf("control: notices %q; want one", n)
	}
	if after := fds(); len(after) != before {
		t.Errorf("descriptors open while watching: %d, before: %d (%q)", len(after), before, after)
	}
	stop := watchCarved(&landlock.Plan{}, func(string) { t.Error("a notice without a carved directory") })
	stop(true)
}

// collect returns a notice function that keeps the notices, and a function
// that returns them so far.
func collect() (func(string), func() []string) {
	var mu sync.Mutex
	var notices []string
	return func(msg string) {
			mu.Lock()
			defer mu.Unlock()
			notices = append(notices, msg)
		}, func() []string {
			mu.Lock()
			defer mu.Unlock()
			return append([]string(nil), notices...)
		}
}

// slowWatch sets the looks an hour apart for the test: only the first and
// the one at stop happen.
func slowWatch(t *testing.T) {
	saved := carvedWatchEvery
	carvedWatchEvery = time.Hour
	t.Cleanup(func() { carvedWatchEvery = saved })
}

// firstLook waits for w's first look at each of its directories.
func firstLook(t *testing.T, w *carvedWatch) {
	t.Helper()
	for _, d := range w.dirs {
		for deadline := time.Now().Add(10 * time.Second); d.listings.Load() == 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("no first look within 10 s")
			}
		}
	}
}

// TestWatchCarvedStopWithoutLook: stopped without a last look (the agent
// never started: run may plan again because of that very change), the
// watch reports nothing of what changed since its first look. The control:
// the same change, stopped with a last look, is reported.
func TestWatchCarvedStopWithoutLook(t *testing.T) {
	slowWatch(t)
	for _, look := range []bool{true, false} {
		dir := t.TempDir()
		notice, got := collect()
		w := newCarvedWatch(&landlock.Plan{Carved: []landlock.Carved{carvedAt(t, dir, "read_dir")}}, notice)
		go w.run()
		firstLook(t, w)
		mustWrite(t, filepath.Join(dir, "new"))
		w.stop(look)
		if n := got(); look && len(n) != 1 || !look && len(n) != 0 {
			t.Errorf("stopped with a last look %v: notices %q", look, n)
		}
	}
}

// TestWatchCarvedStopBounded: a last look that does not come back (a file
// system that stopped answering) keeps stop no longer than carvedStopWait,
// and what it finds once it comes back is not reported: stop has returned.
func TestWatchCarvedStopBounded(t *testing.T) {
	slowWatch(t)
	dir := t.TempDir()
	notice, got := collect()
	w := newCarvedWatch(&landlock.Plan{Carved: []landlock.Carved{carvedAt(t, dir, "read_dir")}}, notice)
	go w.run()
	firstLook(t, w)
	release := make(chan struct{})
	lookHook = func(string) { <-release }
	t.Cleanup(func() { lookHook = nil })
	mustWrite(t, filepath.Join(dir, "new"))
	start := time.Now()
	w.stop(true)
	if d := time.Since(start); d < carvedStopWait || d > carvedStopWait+time.Second {
		t.Errorf("stop returned after %v with the last look held; want about %v", d, carvedStopWait)
	}
	close(release)
	<-w.ended
	if n := got(); len(n) != 0 {
		t.Errorf("notices after stop returned: %q", n)
	}
}

// TestWatchCarvedUntrusted: on a file system whose change times and birth
// times are not trusted (overlayfs gives a file copied up to be written a
// new birth time; a network file system's change time may come from a
// cache), a directory is listed at every look, and a birth time that
// changes while the inode stays (the copy-up) is no replacement. The
// control: an entry made there is reported. The listing is the real one,
// marked untrusted and given a new birth time at every listing.
func TestWatchCarvedUntrusted(t *testing.T) {
	saved := carvedWatchEvery
	carvedWatchEvery = 5 * time.Millisecond
	t.Cleanup(func() { carvedWatchEvery = saved; dirInodes = landlock.DirInodes })
	var births atomic.Int64
	dirInodes = func(path string) (landlock.DirListing, error) {
		l, err := landlock.DirInodes(path)
		l.Trusted = false
		l.Born = births.Add(1)
		return l, err
	}
	root := t.TempDir()
	dir := filepath.Join(root, "dir")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// A settled stamp: on a trusted file system, listed once.
	time.Sleep(2100 * time.Millisecond)
	notice, got := collect()
	w := newCarvedWatch(&landlock.Plan{Carved: []landlock.Carved{carvedAt(t, dir, "read_dir")}}, notice)
	go w.run()
	time.Sleep(200 * time.Millisecond)
	if n := got(); len(n) != 0 {
		t.Fatalf("notices with nothing changed but the birth time: %q", n)
	}
	if l := w.dirs[0].listings.Load(); l < 5 {
		t.Errorf("an untrusted directory was listed %d times in 200 ms of 5 ms looks", l)
	}
	mustWrite(t, filepath.Join(dir, "new"))
	w.stop(true)
	if n := got(); len(n) != 1 || !strings.HasPrefix(n[0], filepath.Join(dir, "new")+" was created or replaced") {
		t.Errorf("control: notices %q; want one for %s/new", n, dir)
	}
}
