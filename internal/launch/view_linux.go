package launch

// ViewError is a failure to build the private view that another start
// without it can avoid: the kernel or a security module refused the
// namespaces or their mounts. The supervisor then plans again without the
// view and says so.
type ViewError struct{ Msg string }

func (e *ViewError) Error() string { return e.Msg }
