package launch

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-launcher/agent-launcher/landlock"
)

// Ending says how a session without a private view (no PID namespace) ends
// the processes the agent leaves running (DESIGN.md section 7). The
// supervisor is always a child subreaper that kills every descendant when
// the agent exits; where a cgroup v2 directory it may write exists, the
// session also runs in a cgroup of its own, ended with cgroup.kill.
// The zero value means a private view: the PID namespace ends everything.
type Ending struct {
	// Cgroup is the session's cgroup directory, "" when none is used.
	Cgroup string `json:"cgroup,omitempty"`
	// NoCgroup says why no cgroup is used; "" with a private view.
	NoCgroup string `json:"no_cgroup,omitempty"`
}

// String describes e for the start-up line and doctor.
func (e Ending) String() string {
	if e.Cgroup != "" {
		return "cgroup.kill on the session's cgroup " + e.Cgroup + ", then the supervisor, as subreaper, kills any descendant left"
	}
	return "the supervisor, as subreaper, kills its descendants (no cgroup: " + e.NoCgroup + ")"
}

// cgroupPrefix starts the name of every cgroup the launcher makes.
const cgroupPrefix = "agent-launcher-"

// cgroupKillTimeout bounds the wait for a killed cgroup to empty.
const cgroupKillTimeout = 5 * time.Second

// sessionCgroup is a cgroup v2 directory made for one session. It owns dir,
// an fd of the directory for clone3(CLONE_INTO_CGROUP); close releases it.
// It is not safe for concurrent use.
type sessionCgroup struct {
	path string
	dir  *os.File
}

// newSessionCgroup makes a child cgroup named name in the supervisor's own
// cgroup v2 directory. It fails when there is none, the supervisor may not
// create one there, or the kernel lacks cgroup.kill (Linux 5.14); a
// directory it made is removed again before it returns an error.
func newSessionCgroup(name string) (*sessionCgroup, error) {
	parent, err := ownCgroupDir()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(parent, name)
	err = unix.Mkdir(path, 0o755)
	if err == unix.EEXIST && unix.Rmdir(path) == nil {
		// Left by a launcher that had this PID and was killed before it
		// could remove it. The kernel removes only an empty cgroup: one
		// that holds what an earlier session left running stays, and
		// this session goes without.
		err = unix.Mkdir(path, 0o755)
	}
	if err != nil {
		return nil, &os.PathError{Op: "mkdir", Path: path, Err: err}
	}
	cg := &sessionCgroup{path: path}
	if _, err := os.Stat(filepath.Join(path, "cgroup.kill")); err != nil {
		cg.remove()
		return nil, fmt.Errorf("%s has no cgroup.kill (Linux 5.14 and later): %w", path, err)
	}
	if cg.dir, err = os.OpenFile(path, os.O_RDONLY|unix.O_DIRECTORY, 0); err != nil {
		cg.remove()
		return nil, err
	}
	return cg, nil
}

// ownCgroupDir returns the calling process's cgroup v2 directory: the "0::"
// line of /proc/self/cgroup under the cgroup2 mount of /proc/self/mountinfo
// that holds it, checked to be a cgroup2 file system.
func ownCgroupDir() (string, error) {
	pc, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	mnt, dir, err := cgroupDir(string(pc), string(mi))
	if err != nil {
		return "", err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(mnt, &st); err != nil {
		return "", &os.PathError{Op: "statfs", Path: mnt, Err: err}
	}
	if st.Type != unix.CGROUP2_SUPER_MAGIC {
		return "", fmt.Errorf("%s is not a cgroup2 file system (another mount covers it)", mnt)
	}
	return dir, nil
}

// cgroupDir finds the directory of the cgroup v2 path in procCgroup (the
// text of /proc/PID/cgroup) under a cgroup2 mount of mountinfo (the text
// of /proc/PID/mountinfo) whose root holds it, and that mount's mount
// point; the last such mount wins, as a later mount covers an earlier one
// at the same place.
func cgroupDir(procCgroup, mountinfo string) (mnt, dir string, err error) {
	cg := ""
	for _, line := range strings.Split(procCgroup, "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			cg = p
		}
	}
	if !strings.HasPrefix(cg, "/") {
		return "", "", errors.New("no cgroup v2 membership in /proc/self/cgroup")
	}
	mounts, err := landlock.ParseMountinfo(mountinfo)
	if err != nil {
		return "", "", err
	}
	for _, m := range mounts {
		if m.FSType != "cgroup2" {
			continue
		}
		root, point := m.Root, m.MountPoint
		rel, ok := strings.CutPrefix(cg, root)
		if root == "/" {
			rel, ok = cg, true
		} else if ok && rel != "" && !strings.HasPrefix(rel, "/") {
			ok = false
		}
		if ok {
			mnt, dir = point, filepath.Join(point, rel)
		}
	}
	if dir == "" {
		return "", "", fmt.Errorf("no cgroup2 mount holds this process's cgroup %s", cg)
	}
	return mnt, dir, nil
}

// fd returns the directory's fd for SysProcAttr.CgroupFD; cg keeps owning it.
func (cg *sessionCgroup) fd() int { return int(cg.dir.Fd()) }

// close releases the directory's fd (the started init stage no longer
// needs it).
func (cg *sessionCgroup) close() {
	if cg.dir != nil {
		cg.dir.Close()
		cg.dir = nil
	}
}

// kill ends every process in the cgroup and its descendants (cgroup.kill,
// which the kernel applies atomically against forks) and waits, at most
// cgroupKillTimeout, until cgroup.events says none is left.
func (cg *sessionCgroup) kill() error {
	if err := os.WriteFile(filepath.Join(cg.path, "cgroup.kill"), []byte("1"), 0); err != nil {
		return err
	}
	deadline := time.Now().Add(cgroupKillTimeout)
	for {
		ev, err := os.ReadFile(filepath.Join(cg.path, "cgroup.events"))
		if err != nil {
			return err
		}
		if bytes.Contains(ev, []byte("populated 0")) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s still holds processes %s after cgroup.kill", cg.path, cgroupKillTimeout)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// remove removes the cgroup and any cgroup made below it, deepest first;
// the processes in them must have ended. Its fd is closed.
func (cg *sessionCgroup) remove() error {
	cg.close()
	return removeCgroup(cg.path)
}

func removeCgroup(path string) error {
	entries, err := os.ReadDir(path)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			removeCgroup(filepath.Join(path, e.Name()))
		}
	}
	// An exiting process can hold the cgroup a moment after
	// "populated 0" (EBUSY): retry briefly.
	for i := 0; ; i++ {
		err = unix.Rmdir(path)
		if err == nil || !errors.Is(err, unix.EBUSY) || i == 100 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err != nil {
		return &os.PathError{Op: "rmdir", Path: path, Err: err}
	}
	return nil
}

// ProbeEnding reports how a session without a private view would end its
// processes here: it makes and removes a cgroup of its own, as run would.
func ProbeEnding() Ending {
	cg, err := newSessionCgroup(cgroupPrefix + "probe-" + strconv.Itoa(os.Getpid()))
	if err != nil {
		return Ending{NoCgroup: err.Error()}
	}
	path := cg.path
	if err := cg.remove(); err != nil {
		return Ending{NoCgroup: err.Error()}
	}
	return Ending{Cgroup: filepath.Join(filepath.Dir(path), cgroupPrefix+"PID")}
}
