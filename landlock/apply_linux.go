package landlock

import (
	"errors"
	"fmt"
	"runtime"
	"slices"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Detect returns the Landlock ABI version of the running kernel and its
// errata bitmask (landlock_create_ruleset(2) with
// LANDLOCK_CREATE_RULESET_VERSION and _ERRATA). ABI 0 means no Landlock:
// Reason then says why (not built in, or disabled at boot).
func Detect() (Kernel, error) {
	abi, err := ll.LandlockGetABIVersion()
	switch {
	case errors.Is(err, unix.ENOSYS):
		return Kernel{Reason: "the kernel has no Landlock (landlock_create_ruleset: ENOSYS; Linux 5.13 or later built with CONFIG_SECURITY_LANDLOCK is needed)"}, nil
	case errors.Is(err, unix.EOPNOTSUPP):
		return Kernel{Reason: "Landlock is built in but disabled (landlock_create_ruleset: EOPNOTSUPP; add landlock to the lsm= boot parameter)"}, nil
	case err != nil:
		return Kernel{}, fmt.Errorf("landlock_create_ruleset(VERSION): %w", err)
	}
	k := Kernel{ABI: abi}
	if abi >= 1 {
		// The errata query exists since the errata mechanism (6.15 and
		// backports); an older kernel answers EINVAL: no errata.
		if e, err := ll.LandlockGetErrata(); err == nil {
			k.Errata = e
		}
	}
	return k, nil
}

// Apply restricts the calling thread with pl's rules and scopes, after
// setting no_new_privs on it. It must run on a locked OS thread of a
// process that only execs afterwards (the launcher's init stage): Landlock
// and no_new_privs are per thread, and execve(2) from this thread carries
// them into the new program, while Go's other threads die with the exec.
//
// It opens every rule path itself with O_PATH|O_NOFOLLOW and refuses one
// that is missing or now names another inode than the planner saw, so a
// path swapped (for a symlink, say) between planning and enforcement
// cannot widen a grant. The ruleset handles exactly pl.Handled and
// pl.Scoped, which must be those of an ABI the kernel has: no best-effort
// downgrade.
func Apply(pl *Plan, viewDevs ...uint64) error {
	runtime.LockOSThread() // the caller should hold it already; make sure
	attr := ll.RulesetAttr{HandledAccessFS: uint64(pl.Handled), Scoped: uint64(pl.Scoped)}
	fd, err := ll.LandlockCreateRuleset(&attr, 0)
	if err != nil {
		return fmt.Errorf("landlock_create_ruleset(handled %s, scoped %s): %w", pl.Handled, pl.Scoped, err)
	}
	defer unix.Close(fd)
	for _, r := range pl.Rules {
		if err := addRule(fd, r, viewDevs); err != nil {
			return err
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	if err := ll.LandlockRestrictSelf(fd, 0); err != nil {
		return fmt.Errorf("landlock_restrict_self: %w", err)
	}
	return nil
}

// RuleError is a rule the apply step could not add.
type RuleError struct {
	Path string
	Err  error
}

func (e *RuleError) Error() string { return "landlock rule for " + e.Path + ": " + e.Err.Error() }
func (e *RuleError) Unwrap() error { return e.Err }

// ErrChanged: a rule path names another inode than at planning.
var ErrChanged = errors.New("changed since planning (replaced or renamed); start again")

func addRule(rulesetFD int, r Rule, viewDevs []uint64) error {
	flags := unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC
	if r.Dir {
		flags |= unix.O_DIRECTORY
	}
	fd, err := unix.Open(r.Path, flags, 0)
	if errors.Is(err, unix.ENOENT) {
		// Removed since planning: nothing there to grant, and whatever is
		// made there later has no rule (fail closed).
		return nil
	}
	if err != nil {
		return &RuleError{r.Path, fmt.Errorf("open: %w", err)}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &RuleError{r.Path, fmt.Errorf("fstat: %w", err)}
	}
	same := st.Dev == r.Dev && st.Ino == r.Ino
	if r.View {
		// Made by the init stage for the private view: it must lie on a
		// filesystem the view mounted, which nothing outside can reach.
		same = slices.Contains(viewDevs, st.Dev)
	}
	if !same || (st.Mode&unix.S_IFMT == unix.S_IFDIR) != r.Dir || st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return &RuleError{r.Path, ErrChanged}
	}
	attr := ll.PathBeneathAttr{AllowedAccess: uint64(r.Access), ParentFd: fd}
	if err := ll.LandlockAddPathBeneathRule(rulesetFD, &attr, 0); err != nil {
		return &RuleError{r.Path, fmt.Errorf("landlock_add_rule(%s): %w", r.Access, err)}
	}
	return nil
}
