package launch

import (
	"os"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agent-launcher/agent-launcher/landlock"
)

// watchCarved tells the operator, one line per path, when an entry of a
// carved directory is created or replaced from outside the session: the
// new file has no Landlock rule, so the agent cannot reach it until its
// next session (DESIGN.md section 7). Directories whose kept rights let the
// agent create entries itself are not watched: an event there may be the
// agent's own. It returns a function that stops watching: once it has
// returned, no notice is given.
func watchCarved(pl *landlock.Plan, notice func(string)) (stop func()) {
	if pl == nil || notice == nil || len(pl.Carved) == 0 {
		return func() {}
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		notice("cannot watch the carved directories (inotify_init1: " + err.Error() + "); entries replaced from outside stay unreachable to the agent without notice")
		return func() {}
	}
	// Inodes with their own rule keep it wherever they are moved.
	granted := map[[2]uint64]string{}
	for _, r := range pl.Rules {
		if !r.View {
			granted[[2]uint64{r.Dev, r.Ino}] = r.Path
		}
	}
	dirs := map[int32]string{}
	for _, c := range pl.Carved {
		if strings.Contains(c.Kept, "make_") || c.View {
			continue // new entries work there, or nothing outside can add one
		}
		wd, err := unix.InotifyAddWatch(fd, c.Path, unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_MOVE_SELF|unix.IN_DELETE_SELF|unix.IN_ONLYDIR|unix.IN_DONT_FOLLOW)
		if err == nil {
			dirs[int32(wd)] = c.Path
		}
	}
	f := os.NewFile(uintptr(fd), "inotify") // pollable: reads block in the poller, Close wakes them
	// mu is held while a notice is given; stop takes it to set stopped,
	// after which none is.
	var mu sync.Mutex
	stopped := false
	go func() {
		seen := map[string]bool{}
		buf := make([]byte, 64<<10)
		for {
			n, err := f.Read(buf)
			if err != nil {
				return
			}
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				nameBytes := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
				off += unix.SizeofInotifyEvent + int(ev.Len)
				dir, ok := dirs[ev.Wd]
				if !ok {
					continue
				}
				name := strings.TrimRight(string(nameBytes), "\x00")
				var msg, key string
				switch {
				case ev.Mask&(unix.IN_MOVE_SELF|unix.IN_DELETE_SELF) != 0:
					key = dir
					msg = dir + " was moved or deleted from outside the session; what replaces it is unreachable to the agent until its next session (Landlock rules bind to the files that existed at launch)"
				case ev.Mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
					key = dir + "/" + name
					var st unix.Stat_t
					if unix.Lstat(key, &st) == nil {
						if from, ok := granted[[2]uint64{st.Dev, st.Ino}]; ok && from != key {
							msg = "WARNING: " + key + " is now " + from + ", moved there from outside the session; the agent was granted that file at launch and can still reach it under the new name, whatever the policy says of it (Landlock rules follow the file). End the session if it holds anything the agent must not see"
							break
						}
					}
					msg = key + " was created or replaced from outside the session; the agent cannot reach it until its next session (Landlock rules bind to the files that existed at launch)"
				default:
					continue
				}
				if !seen[key] {
					seen[key] = true
					mu.Lock()
					if !stopped {
						notice(msg)
					}
					mu.Unlock()
				}
			}
		}
	}()
	return func() {
		mu.Lock()
		stopped = true
		mu.Unlock()
		// The descriptor is closed on another goroutine: Close waits for
		// the reading goroutine to wake and let go of it, and waited for
		// here, that was about 0.2 ms of every run's end on the machine
		// the start-up is measured on (docs/design-amendments.md, the
		// sixteenth pass). The reading goroutine ends with it.
		go f.Close()
	}
}
