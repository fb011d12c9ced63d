package launch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agent-launcher/agent-launcher/landlock"
)

// ViewError is a failure to build the private view that another start
// without it can avoid: the kernel or a security module refused the
// namespaces or their mounts. The supervisor then plans again without the
// view and says so.
type ViewError struct{ Msg string }

func (e *ViewError) Error() string { return e.Msg }

// buildView builds the session's private view in the init stage's own
// user, mount and PID namespaces (DESIGN.md section 7) and returns the
// devices of the filesystems it mounted, whose inodes the plan's view
// rules name. Mounts are impossible after Landlock, so this comes first.
func buildView(v *landlock.View, binds []landlock.Bind, cwd string) (devs []uint64, err error) {
	if err := v.Check(); err != nil {
		return nil, err
	}
	// The host's later mounts must not propagate in (review finding 3).
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return nil, &ViewError{fmt.Sprintf("mount(/, MS_REC|MS_PRIVATE): %v", err)}
	}
	// Handles on the kept paths before their parents are covered. A kept
	// path inside another kept one comes with it.
	type handle struct {
		path string
		fd   int
		dir  bool
	}
	var keep []handle
	defer func() {
		for _, h := range keep {
			unix.Close(h.fd)
		}
	}()
	for _, k := range v.Keep {
		if slices.ContainsFunc(v.Keep, func(o string) bool { return o != k && strings.HasPrefix(k, o+"/") }) {
			continue
		}
		fd, err := unix.Open(k, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			continue // gone since planning: the plan's rules for it are skipped too
		}
		if err != nil {
			return nil, fmt.Errorf("view: opening %s to keep it: %w", k, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("view: %s: %w", k, err)
		}
		keep = append(keep, handle{k, fd, st.Mode&unix.S_IFMT == unix.S_IFDIR})
	}
	cover := func(dir, mode string) error {
		if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode="+mode); err != nil {
			return &ViewError{fmt.Sprintf("mounting a private tmpfs on %s: %v", dir, err)}
		}
		var st unix.Stat_t
		if err := unix.Lstat(dir, &st); err != nil {
			return fmt.Errorf("view: %s: %w", dir, err)
		}
		devs = append(devs, st.Dev)
		return nil
	}
	for _, d := range v.Private {
		if err := cover(d, "1777"); err != nil {
			return nil, err
		}
	}
	for _, d := range v.Hidden {
		if err := cover(d, "0755"); err != nil {
			return nil, err
		}
	}
	for _, h := range keep {
		if err := os.MkdirAll(filepath.Dir(h.path), 0o755); err != nil {
			return nil, fmt.Errorf("view: making the way to %s: %w", h.path, err)
		}
		if h.dir {
			err = unix.Mkdir(h.path, 0o755)
		} else {
			var fd int
			fd, err = unix.Open(h.path, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
			if err == nil {
				unix.Close(fd)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("view: a mount point for %s: %w", h.path, err)
		}
		src := "/proc/self/fd/" + strconv.Itoa(h.fd)
		if err := unix.Mount(src, h.path, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return nil, &ViewError{fmt.Sprintf("binding %s back into the view: %v", h.path, err)}
		}
	}
	if devs, err = bindCaches(v, devs); err != nil {
		return nil, err
	}
	for _, f := range v.Masked {
		if err := unix.Mount("/dev/null", f, "", unix.MS_BIND, ""); err != nil && !errors.Is(err, unix.ENOENT) {
			return nil, &ViewError{fmt.Sprintf("masking %s: %v", f, err)}
		}
	}
	if err := mountProtected(binds); err != nil {
		return nil, err
	}
	for _, d := range v.Fresh {
		if d != "/proc" {
			return nil, fmt.Errorf("view: no fresh instance of %s is known", d)
		}
		// The PID namespace's own /proc: no outside process is in it
		// (review finding 14).
		if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return nil, &ViewError{fmt.Sprintf("mounting a fresh /proc: %v", err)}
		}
		var st unix.Stat_t
		if err := unix.Lstat("/proc", &st); err != nil {
			return nil, fmt.Errorf("view: /proc: %w", err)
		}
		devs = append(devs, st.Dev)
	}
	// The working directory, re-resolved in the view: the old one may lie
	// under a covered directory (review finding 6).
	if cwd != "" {
		if err := unix.Chdir(cwd); err != nil {
			// Root in the session's user namespace has no rights over
			// owners it does not map (a root operator in another user's
			// directory): a start without the view avoids it.
			return nil, &ViewError{fmt.Sprintf("entering the working directory %s in the view: %v", cwd, err)}
		}
	}
	return devs, nil
}

// dropPrivileges leaves the calling thread (the one that forks the agent)
// without capabilities and unable to regain any: an emptied bounding set,
// securebits that make root ordinary and are locked, no ambient
// capabilities, nothing effective, permitted or inheritable. The process
// becomes undumpable, so that the agent, a child in the same namespaces,
// cannot ptrace it or read its memory (review finding 17).
func dropPrivileges() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", err)
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("prctl(PR_CAP_AMBIENT_CLEAR_ALL): %w", err)
	}
	for c := 0; c <= 63; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			if errors.Is(err, unix.EINVAL) {
				break // past the kernel's last capability
			}
			return fmt.Errorf("prctl(PR_CAPBSET_DROP, %d): %w", c, err)
		}
	}
	// SECBIT_NOROOT, NO_SETUID_FIXUP and NO_CAP_AMBIENT_RAISE set and
	// locked, KEEP_CAPS locked off (capability(7), "securebits").
	const bits = 1<<0 | 1<<1 | 1<<2 | 1<<3 | 1<<5 | 1<<6 | 1<<7
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, bits, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_SECUREBITS): %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset(0): %w", err)
	}
	return nil
}

// checkPrivileges asserts what the agent inherits from the calling thread:
// no_new_privs set and no capability effective or permitted.
func checkPrivileges() error {
	nnp, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	if err != nil || nnp != 1 {
		return fmt.Errorf("no_new_privs is not set (%d, %v); refusing to run", nnp, err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	for _, d := range data {
		if d.Effective != 0 || d.Permitted != 0 {
			return fmt.Errorf("the init stage still holds capabilities (effective %#x, permitted %#x); refusing to run", d.Effective, d.Permitted)
		}
	}
	return nil
}
