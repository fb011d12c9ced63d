package launch

// ViewError is a failure to build the private view that another start
// without it can avoid: the kernel or a security module refused the
// namespaces or their mounts. The supervisor then plans again without the
// view and says so.
type ViewError struct{ Msg string }

func (e *ViewError) Error() string { return e.Msg }

// StaleError: the init stage found a path of the plan replaced since it
// was planned (a Landlock rule's or a protected path's inode is another),
// and ran nothing. Planning again avoids it.
type StaleError struct{ Msg string }

func (e *StaleError) Error() string { return e.Msg }
