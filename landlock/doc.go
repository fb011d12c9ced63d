// Package landlock turns a compiled policy into the Landlock ruleset that is
// the launcher's floor, and enforces it.
//
// # Planning
//
// NewPlan is pure: the matcher (tiers.Matcher), the kernel's Landlock ABI
// and a snapshot of the filesystem (FS; OS returns the real one) go in, a
// Plan comes out: the rules, the directories carved, the protected entries
// and a canary. It never probes the kernel, and it builds with
// CGO_ENABLED=0. `agent-launcher check --landlock` prints a plan with
// Format, the rendering the golden files pin.
//
// The ruleset handles every filesystem right of the ABI (HandledFS) and its
// scopes (Scopes: abstract unix sockets and signals, ABI 6), never the
// network rights. A Landlock rule grants its rights to the whole hierarchy
// below a directory and there is no deny rule, so the planner walks down
// from "/" and, for each directory D, asks the matcher what the policy
// decides strictly below it (tiers.Matcher.Subtree): a rule on D carries
// only the rights that every name below D may have, and the planner goes
// into D's entries only where some of them may have more. Rights map from
// the policy's verdicts, op by op: read gives read_file and read_dir, exec
// execute, write write_file, truncate and ioctl_dev, create make_*, delete
// remove_*, and both refer.
//
// # Carve-outs
//
// A deny, prompt or read-only entry inside a granted tree is a carve-out.
// Its parent is carved: it gets a rule with only the rights that cannot
// reach the carve-out, and each sibling gets its own rule (sibling rules,
// DESIGN.md section 7). The floor thereby fails closed: whatever replaces
// a carved path later, from outside the session, is a new inode with no
// rule, under a parent whose rule cannot reach it. What may stay on a
// carved parent is a table, each row checked by the kernel tests
// (internal/kerneltest, TestCarvedParentRights and TestCarveOutTable):
//
//	right on the carved parent   stays when the carve-outs below are       cannot reach the carve-out because
//	---------------------------  ----------------------------------------  ------------------------------------------
//	read_dir                     files (any tier), or directories the      it lists directories only; a file's
//	                             policy lets the agent list                contents need read_file
//	read_file, execute           read-only or prompt-write entries         the policy lets the agent read them
//	write_file, truncate,        never (a carve-out is what restricts      -
//	ioctl_dev                    writing)
//	make_*                       never                                     it would recreate a carved name removed
//	                                                                       from outside, and alone it leaves an
//	                                                                       empty file behind a failed open
//	remove_*, refer              never                                     they would unlink the carve-out or move
//	                                                                       it into a granted tree (kernel.md 1.2
//	                                                                       #18); a link out needs refer too (EXDEV)
//
// The rights the policy allows in a carved directory but the floor does not
// give (Carved.Deferred: new entries, renames and deletes of its entries,
// and listing it when a carved subdirectory forbids read_dir) fail with
// EACCES until the supervisor of a later release serves them; they are
// listed, and the kernel tests check that they fail closed.
//
// # Anywhere-patterns
//
// Patterns with a "**/" that match names anywhere ("~/**/.env", the
// built-in credential names) cannot be planned from names alone: the
// planner lists the granted trees they reach, bounded by
// Options.MaxEntries, and carves out every existing match. A name such a
// pattern matches that appears after launch under a directory the planner
// granted is not covered (DESIGN.md section 13). Below a directory such a
// pattern matches whole (".../.git/hooks/**" once hooks exists), new
// names are covered like any other. Pseudo filesystems (proc, sysfs, ...)
// are not listed: their names are the kernel's.
//
// # Start-up checks
//
// NewPlan refuses a protected file with more than one hard link (another
// name may lie in a granted tree; HardLinkError), and CheckMounts refuses
// a protected path that another mount of its filesystem exposes inside a
// granted tree (AliasError). Neither scans a tree: the hard-link check
// looks at the carve-outs the plan found, the paths deny and prompt rules
// name literally and the entries directly inside them; the mount check
// reads the mount table.
//
// # Enforcing
//
// Apply restricts the calling thread with a plan, on go-landlock's syscall
// layer and with the exact ABI the plan was made for (never best effort).
// It opens every rule path itself with O_PATH|O_NOFOLLOW and refuses one
// that no longer names the inode the planner saw. Detect reports the
// kernel's ABI and errata; RunSupported and Ladder say what the launcher
// does with them (DESIGN.md section 7).
package landlock
