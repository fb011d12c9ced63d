package launch

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-launcher/agent-launcher/landlock"
)

// carvedWatchEvery is how often watchCarved looks at the carved
// directories (tests shorten it).
var carvedWatchEvery = time.Second

// carvedStopWait bounds how long stop waits for the watch's last look: a
// directory on a file system that stopped answering (an NFS server gone)
// must not keep run from ending.
const carvedStopWait = 200 * time.Millisecond

// dirInodes lists a watched directory (tests wrap it).
var dirInodes = landlock.DirInodes

// watchCarved tells the operator, one line per path, when an entry of a
// carved directory is created or replaced from outside the session: the
// new file has no Landlock rule, so the agent cannot reach it until its
// next session (DESIGN.md section 7). Directories whose kept rights let the
// agent create entries itself are not watched: a change there may be the
// agent's own. It returns a function that stops watching: with look set
// (the agent ran) it looks once more first, so that whatever changed
// before the session ended has its notice; without, it does not (nothing
// ran, and run may plan again because of that very change). Once it has
// returned, no notice is given; it waits at most carvedStopWait for the
// last look.
//
// It looks every carvedWatchEvery instead of asking inotify: an inotify
// descriptor with its watches cost every run with a carved directory about
// 1 ms, most of it as the process let go of it at exit, where the kernel
// waits for an SRCU grace period to free the marks
// (docs/design-amendments.md, the seventeenth pass).
//
// A look costs one statx per directory. A directory is listed again only
// when its stamp (device, inode, change time) moved or is too recent to
// stand for its listing (landlock.Stamp.Settled), or its file system is
// not one whose change times are trusted (landlock.DirListing.Trusted),
// where it is listed at every look. An entry listed again is new or
// replaced when its name or its inode number (d_ino) is not the last
// listing's, or, on a trusted file system, when it was born after the
// watch began (statx's birth time): a file removed and another made at its
// name may get the freed inode number back (ext4 gives it at once), and
// only the birth time tells them apart. The watched directory itself is
// replaced when its device and inode are not the plan's, or, on a trusted
// file system, its birth time is not the first listing's. Birth times
// elsewhere are not compared: overlayfs gives a file a new one when it
// copies it up to be written, the same file the rule holds.
//
// A notice comes within carvedWatchEvery of the change, and at the latest
// at stop; on a network file system, whose listings may come from a cache,
// later. On an untrusted file system a replacement that gets the old inode
// number back goes unnoticed. Either way what changed is denied: the
// notice only says so.
func watchCarved(pl *landlock.Plan, notice func(string)) (stop func(look bool)) {
	w := newCarvedWatch(pl, notice)
	if w == nil {
		return func(bool) {}
	}
	go w.run()
	return w.stop
}

// newCarvedWatch returns the watch of pl's carved directories, nil when
// none is to be watched.
func newCarvedWatch(pl *landlock.Plan, notice func(string)) *carvedWatch {
	if pl == nil || notice == nil {
		return nil
	}
	var dirs []*carvedDir
	for _, c := range pl.Carved {
		if strings.Contains(c.Kept, "make_") || c.View {
			continue // new entries work there, or nothing outside can add one
		}
		dirs = append(dirs, &carvedDir{path: c.Path, dev: c.Dev, ino: c.Ino})
	}
	if len(dirs) == 0 {
		return nil
	}
	w := &carvedWatch{dirs: dirs, granted: map[[2]uint64]string{}, seen: map[string]bool{}, notice: notice, since: time.Now().UnixNano(),
		done: make(chan bool, 1), ended: make(chan struct{})}
	// Inodes with their own rule keep it wherever they are moved.
	for _, r := range pl.Rules {
		if !r.View {
			w.granted[[2]uint64{r.Dev, r.Ino}] = r.Path
		}
	}
	return w
}

// carvedWatch is watchCarved's state, run's alone but for the channels and
// stopped: notices are given on run's goroutine only.
type carvedWatch struct {
	dirs    []*carvedDir
	granted map[[2]uint64]string // rule paths by device and inode
	seen    map[string]bool      // the paths noticed
	notice  func(string)
	since   int64 // the watch's start, ns since the epoch
	once    sync.Once
	done    chan bool     // stop: end, looking once more first if true
	ended   chan struct{} // closed by run as it ends
	// mu is held while a notice is given; stop sets stopped under it,
	// after which none is.
	mu      sync.Mutex
	stopped bool
}

// carvedDir is a watched directory: its identity from the plan, and its
// last listing with the stamp taken before it.
type carvedDir struct {
	path     string
	dev, ino uint64
	listed   bool
	trusted  bool  // its file system's (landlock.DirListing.Trusted)
	born     int64 // its birth time at the first listing
	gone     bool
	stamp    landlock.Stamp
	inodes   map[string]uint64
	listings atomic.Int64 // for tests
}

func (w *carvedWatch) stop(look bool) {
	w.once.Do(func() {
		w.done <- look
		t := time.NewTimer(carvedStopWait)
		defer t.Stop()
		select {
		case <-w.ended:
		case <-t.C:
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.stopped = true
	})
}

func (w *carvedWatch) run() {
	defer close(w.ended)
	// The first listing is the one later listings are compared with.
	w.lookAll()
	t := time.NewTicker(carvedWatchEvery)
	defer t.Stop()
	for {
		select {
		case look := <-w.done:
			if look {
				w.lookAll()
			}
			return
		case <-t.C:
			w.lookAll()
		}
	}
}

func (w *carvedWatch) lookAll() {
	for _, d := range w.dirs {
		w.look(d)
	}
}

// look lists d again unless its stamp shows that nothing changed since its
// last listing, and gives a notice for each entry new or replaced since.
func (w *carvedWatch) look(d *carvedDir) {
	if d.gone {
		return
	}
	if lookHook != nil {
		lookHook(d.path)
	}
	if d.listed && d.trusted {
		now := landlock.StampNow()
		var stx unix.Statx_t
		if unix.Statx(unix.AT_FDCWD, d.path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, &stx) == nil &&
			stx.Mask&unix.STATX_CTIME != 0 && landlock.ChangeStamp(&stx) == d.stamp && d.stamp.Settled(now) {
			return
		}
	}
	l, err := dirInodes(d.path)
	d.listings.Add(1) // once the listing is taken
	if err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTDIR) && !errors.Is(err, unix.ELOOP) {
		return // not a change of the directory (out of descriptors, say): the next look
	}
	if err != nil || l.Stamp.Dev != d.dev || l.Stamp.Ino != d.ino || d.listed && l.Trusted && d.trusted && l.Born != d.born {
		d.gone = true
		w.say(d.path, d.path+" was moved or deleted from outside the session; what replaces it is unreachable to the agent until its next session (Landlock rules bind to the files that existed at launch)")
		return
	}
	if d.listed {
		var changed []string
		for name, ino := range l.Inodes {
			if old, ok := d.inodes[name]; !ok || old != ino || l.Trusted && !w.seen[d.path+"/"+name] && w.bornSince(landlock.Born(d.path+"/"+name)) {
				changed = append(changed, name)
			}
		}
		slices.Sort(changed)
		for _, name := range changed {
			w.entry(d.path + "/" + name)
		}
	}
	d.listed, d.trusted, d.born, d.stamp, d.inodes = true, l.Trusted, l.Born, l.Stamp, l.Inodes
}

// bornSince reports whether born, a birth time (0: none known), lies after
// the watch's start: then it was born after the plan was checked. A file
// system may take birth times from a clock that lags by a tick (4 ms
// here), so one born just after the start may not show it; none born
// before does.
func (w *carvedWatch) bornSince(born int64) bool { return born != 0 && born > w.since }

// entry gives the notice for path, an entry new or replaced in a carved
// directory.
func (w *carvedWatch) entry(path string) {
	var st unix.Stat_t
	if unix.Lstat(path, &st) == nil {
		if from, ok := w.granted[[2]uint64{st.Dev, st.Ino}]; ok && from != path {
			w.say(path, "WARNING: "+path+" is now "+from+", moved there from outside the session; the agent was granted that file at launch and can still reach it under the new name, whatever the policy says of it (Landlock rules follow the file). End the session if it holds anything the agent must not see")
			return
		}
	}
	w.say(path, path+" was created or replaced from outside the session; the agent cannot reach it until its next session (Landlock rules bind to the files that existed at launch)")
}

// say gives msg, the notice for key, unless key had one or the watch
// has stopped.
func (w *carvedWatch) say(key, msg string) {
	if w.seen[key] {
		return
	}
	w.seen[key] = true
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.notice(msg)
	}
}

// lookHook, when set (tests), is called as each look begins.
var lookHook func(path string)
