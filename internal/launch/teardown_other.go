//go:build !linux || !cgo

package launch

import "sync/atomic"

// teardownPID: no helper without teardown.c.
var teardownPID atomic.Int64

// DeferTeardown does nothing without cgo (teardown.c).
func DeferTeardown() {}
