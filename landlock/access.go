package landlock

import "strings"

// Access is a set of Landlock filesystem access rights
// (LANDLOCK_ACCESS_FS_*, include/uapi/linux/landlock.h).
type Access uint64

// The filesystem rights, with the ABI that introduced each.
const (
	Execute    Access = 1 << iota // ABI 1
	WriteFile                     // ABI 1
	ReadFile                      // ABI 1
	ReadDir                       // ABI 1
	RemoveDir                     // ABI 1
	RemoveFile                    // ABI 1
	MakeChar                      // ABI 1
	MakeDir                       // ABI 1
	MakeReg                       // ABI 1
	MakeSock                      // ABI 1
	MakeFifo                      // ABI 1
	MakeBlock                     // ABI 1
	MakeSym                       // ABI 1
	Refer                         // ABI 2
	Truncate                      // ABI 3
	IoctlDev                      // ABI 5
)

// Groups of rights by what they act on. File rights act on the files below
// a rule's directory (or on the rule's file); ReadDir on the directory and
// the directories below; the content rights on the entries of the directory
// and of the directories below (the kernel checks them on the parent of the
// entry made, removed or moved).
const (
	FileRights    = Execute | WriteFile | ReadFile | Truncate | IoctlDev
	MakeRights    = MakeChar | MakeDir | MakeReg | MakeSock | MakeFifo | MakeBlock | MakeSym
	RemoveRights  = RemoveDir | RemoveFile
	ContentRights = MakeRights | RemoveRights | Refer
	allRights     = FileRights | ReadDir | ContentRights
)

var accessNames = [...]string{
	"execute", "write_file", "read_file", "read_dir", "remove_dir", "remove_file",
	"make_char", "make_dir", "make_reg", "make_sock", "make_fifo", "make_block", "make_sym",
	"refer", "truncate", "ioctl_dev",
}

// String names the rights, "|"-separated, in bit order; groups that are
// whole print as "make_*" and "remove_*".
func (a Access) String() string {
	if a == 0 {
		return "none"
	}
	var out []string
	for i, n := range accessNames {
		bit := Access(1) << i
		if a&bit == 0 {
			continue
		}
		switch {
		case bit&MakeRights != 0 && a&MakeRights == MakeRights:
			if bit == MakeChar {
				out = append(out, "make_*")
			}
			continue
		case bit&RemoveRights != 0 && a&RemoveRights == RemoveRights:
			if bit == RemoveDir {
				out = append(out, "remove_*")
			}
			continue
		}
		out = append(out, n)
	}
	if rest := a &^ allRights; rest != 0 {
		out = append(out, "unknown")
	}
	return strings.Join(out, "|")
}

// HandledFS returns every filesystem right Landlock ABI abi has, which is
// what a ruleset for that ABI handles. Rights of later ABIs that the
// launcher does not grant yet (FS_RESOLVE_UNIX, ABI 9) are left out:
// handling them without a rule would cut the agent off from every unix
// socket, which connect_paths mediation (a later issue) decides.
func HandledFS(abi int) Access {
	var a Access
	if abi >= 1 {
		a |= Execute | WriteFile | ReadFile | ReadDir | RemoveRights | MakeRights
	}
	if abi >= 2 {
		a |= Refer
	}
	if abi >= 3 {
		a |= Truncate
	}
	if abi >= 5 {
		a |= IoctlDev
	}
	return a
}

// Scope is a set of Landlock scopes (LANDLOCK_SCOPE_*).
type Scope uint64

// The scopes, ABI 6.
const (
	ScopeAbstractUnixSocket Scope = 1 << iota
	ScopeSignal
)

// Scopes returns the scopes ABI abi has; the launcher sets all of them.
func Scopes(abi int) Scope {
	if abi >= 6 {
		return ScopeAbstractUnixSocket | ScopeSignal
	}
	return 0
}

func (s Scope) String() string {
	var out []string
	if s&ScopeAbstractUnixSocket != 0 {
		out = append(out, "abstract_unix_socket")
	}
	if s&ScopeSignal != 0 {
		out = append(out, "signal")
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "|")
}
