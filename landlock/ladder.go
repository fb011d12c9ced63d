package landlock

import (
	"errors"
	"fmt"
	"strings"
)

// Kernel is what the running kernel offers of Landlock.
type Kernel struct {
	// ABI is the Landlock ABI version; 0 means no Landlock.
	ABI int `json:"abi"`
	// Errata is the bitmask of fixed Landlock errata (6.15+, backported).
	Errata int `json:"errata"`
	// Reason says why there is no Landlock, when ABI is 0.
	Reason string `json:"reason,omitempty"`
}

// MinABI is the oldest Landlock ABI `run` accepts until the supervisor
// brings the compensations the ladder lists for older ones.
const MinABI = 6

// ErrNoLandlock: the kernel has no usable Landlock.
var ErrNoLandlock = errors.New("no Landlock")

// ABIError reports a Landlock ABI too old to run on.
type ABIError struct {
	ABI     int
	Missing []string
}

func (e *ABIError) Error() string {
	return fmt.Sprintf("Landlock ABI %d (%s) lacks %s; their compensations need the supervisor of a later release, so run refuses here (Linux 6.12 or later has ABI 6)",
		e.ABI, abiKernel[e.ABI], strings.Join(e.Missing, ", "))
}

var abiKernel = map[int]string{1: "Linux 5.13", 2: "Linux 5.19", 3: "Linux 6.2", 4: "Linux 6.7", 5: "Linux 6.10", 6: "Linux 6.12", 7: "Linux 6.15"}

// Missing returns what ABI abi lacks of what the launcher relies on.
func Missing(abi int) []string {
	var out []string
	if abi < 2 {
		out = append(out, "REFER (ABI 2: renames and links across directories always fail)")
	}
	if abi < 3 {
		out = append(out, "TRUNCATE (ABI 3: truncation is not checked)")
	}
	if abi < 5 {
		out = append(out, "IOCTL_DEV (ABI 5: device ioctls are not checked)")
	}
	if abi < 6 {
		out = append(out, "scopes (ABI 6: abstract unix sockets and signals to the launcher are open)")
	}
	return out
}

// RunSupported says whether `run` can confine an agent on k: nil from ABI
// MinABI on; an error wrapping ErrNoLandlock without Landlock; an
// *ABIError naming the missing rights below MinABI.
func RunSupported(k Kernel) error {
	switch {
	case k.ABI < 1:
		return fmt.Errorf("%w: %s", ErrNoLandlock, k.Reason)
	case k.ABI < MinABI:
		return &ABIError{ABI: k.ABI, Missing: Missing(k.ABI)}
	}
	return nil
}

// Row is one row of the kernel ladder (DESIGN.md section 7).
type Row struct {
	ABIs         string `json:"abis"`
	Change       string `json:"change"`
	Compensation string `json:"compensation"`
	// Applies is set for the rows that describe the running kernel.
	Applies bool `json:"applies"`
	// Status: "refused" (run refuses to start), "in force" (the launcher
	// does what Compensation says), or "planned" (a later release adds it;
	// until then the row's protection comes from what Status of the other
	// rows says).
	Status string `json:"status,omitempty"`
}

// Ladder returns the kernel ladder with the rows that apply to k marked.
func Ladder(k Kernel) []Row {
	a := k.ABI
	rows := []Row{
		{"0 (none)", "no floor", "refuse to run; --allow-unconfined runs the agent without any confinement and says so", a < 1, "refused"},
		{"1 (5.13)", "no REFER: cross-directory rename/link always EXDEV", "supervisor emulates renames inside write trees", a == 1, "refused"},
		{"2 (5.19)", "no TRUNCATE right", "trap truncate and O_TRUNC opens; deny on non-write paths", a >= 1 && a <= 2, "refused"},
		{"3-4 (6.2, 6.7)", "no IOCTL_DEV", "block TIOCSTI/TIOCLINUX in the filter (always)", a >= 1 && a <= 4, "refused"},
		{"1-5 (5.13-6.10)", "no scopes: abstract unix sockets and signals to the supervisor are open", "the PID namespace hides the supervisor; abstract connect is emulated; without a PID namespace, refuse", a >= 1 && a <= 5, "refused"},
		{"6-7 (6.12, 6.15)", "full floor; pathname unix connect still unrestricted", "connect emulated and decided by connect_paths (a later release); until then the session view hides the operator's sockets", a >= 6, "in force: floor and scopes"},
		{"8+ (7.x kernels report 10 and 11)", "thread sync, unix socket rules, ...", "use a new right where it replaces a supervisor workaround", a >= 8, "in force: the ABI 6-7 floor (newer rights unused)"},
	}
	return rows
}
