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

// watchCarved tells the operator, one line per path, when an entry of a
// carved directory is created or replaced from outside the session: the
// new file has no Landlock rule, so the agent cannot reach it until its
// next session (DESIGN.md section 7). Directories whose kept rights let the
// agent create entries itself are not watched: a change there may be the
// agent's own. It returns a function that stops watching: it looks once
// more, so that whatever changed before the session ended has its notice,
// and once it has returned, no notice is given.
//
// It looks every carvedWatchEvery instead of asking inotify: an inotify
// descriptor with its watches cost every run with a carved directory about
// 1 ms, most of it as the process let go of it at exit, where the kernel
// waits for an SRCU grace period to free the marks
// (docs/design-amendments.md, the seventeenth pass).
//
// A look costs one statx per directory. A directory is listed again only
// when its stamp (device, inode, change time) moved or is too recent to
// stand for its listing (landlock.Stamp.Settled). An entry listed again is
// new or replaced when its name or its inode number (d_ino) is not the
// last listing's, or when it was born after the watch began (statx's birth
// time): a file removed and another made at its name may get the freed
// inode number back (ext4 gives it at once), and only the birth time tells
// them apart. The watched directory itself is replaced when its device and
// inode are not the plan's, or its birth time not the first listing's.
//
// A notice comes within carvedWatchEvery of the change, and at the latest
// at stop; on a network file system, whose change times may come late from
// a cache, later. Where the file system keeps no birth time, a replacement
// that gets the old inode number back goes unnoticed. Either way what
// changed is denied: the notice only says so.
func watchCarved(pl *landlock.Plan, notice func(string)) (stop func()) {
	w := newCarvedWatch(pl, notice)
	if w == nil {
		return func() {}
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
		done: make(chan struct{}), ended: make(chan struct{})}
	// Inodes with their own rule keep it wherever they are moved.
	for _, r := range pl.Rules {
		if !r.View {
			w.granted[[2]uint64{r.Dev, r.Ino}] = r.Path
		}
	}
	return w
}

// carvedWatch is watchCarved's state, run's alone but for done and ended:
// notices are given on run's goroutine only.
type carvedWatch struct {
	dirs    []*carvedDir
	granted map[[2]uint64]string // rule paths by device and inode
	seen    map[string]bool      // the paths noticed
	notice  func(string)
	since   int64 // the watch's start, ns since the epoch
	stopped sync.Once
	done    chan struct{} // closed by stop: look once more and end
	ended   chan struct{} // closed by run as it ends
}

// carvedDir is a watched directory: its identity from the plan, and its
// last listing with the stamp taken before it.
type carvedDir struct {
	path     string
	dev, ino uint64
	listed   bool
	born     int64 // its birth time at the first listing
	gone     bool
	stamp    landlock.Stamp
	inodes   map[string]uint64
	listings atomic.Int64 // for tests
}

func (w *carvedWatch) stop() {
	w.stopped.Do(func() {
		close(w.done)
		<-w.ended
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
		case <-w.done:
			w.lookAll()
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
	if d.listed {
		now := landlock.StampNow()
		var stx unix.Statx_t
		if unix.Statx(unix.AT_FDCWD, d.path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, &stx) == nil &&
			stx.Mask&unix.STATX_CTIME != 0 && landlock.ChangeStamp(&stx) == d.stamp && d.stamp.Settled(now) {
			return
		}
	}
	d.listings.Add(1)
	l, err := landlock.DirInodes(d.path)
	if err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTDIR) && !errors.Is(err, unix.ELOOP) {
		return // not a change of the directory (out of descriptors, say): the next look
	}
	if err != nil || l.Stamp.Dev != d.dev || l.Stamp.Ino != d.ino || d.listed && l.Born != d.born {
		d.gone = true
		w.say(d.path, d.path+" was moved or deleted from outside the session; what replaces it is unreachable to the agent until its next session (Landlock rules bind to the files that existed at launch)")
		return
	}
	if d.listed {
		var changed []string
		for name, ino := range l.Inodes {
			if old, ok := d.inodes[name]; !ok || old != ino || !w.seen[d.path+"/"+name] && w.bornSince(landlock.Born(d.path+"/"+name)) {
				changed = append(changed, name)
			}
		}
		slices.Sort(changed)
		for _, name := range changed {
			w.entry(d.path + "/" + name)
		}
	}
	d.listed, d.born, d.stamp, d.inodes = true, l.Born, l.Stamp, l.Inodes
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

// say gives msg, the notice for key, unless key had one.
func (w *carvedWatch) say(key, msg string) {
	if !w.seen[key] {
		w.seen[key] = true
		w.notice(msg)
	}
}
