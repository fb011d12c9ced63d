//go:build !linux

package landlock

import "errors"

// ErrNotSupported is returned on systems without Landlock.
var ErrNotSupported = errors.New("landlock: not supported on this system")

// Detect reports no Landlock.
func Detect() (Kernel, error) {
	return Kernel{Reason: "Landlock is a Linux feature"}, nil
}

// Apply fails: there is no Landlock here.
func Apply(*Plan) error { return ErrNotSupported }
