//go:build !linux

package kernel

import (
	"context"
	"fmt"
)

// Release returns the kernel release, as printed by uname -r.
func Release() (string, error) {
	return "", fmt.Errorf("kernel: release: %w", ErrNotSupported)
}

// ProbeSeccomp reports seccomp support. Outside Linux it returns an error
// that wraps ErrNotSupported.
func ProbeSeccomp(ctx context.Context) (Seccomp, error) {
	return Seccomp{}, fmt.Errorf("kernel: seccomp probe: %w", ErrNotSupported)
}

// ProbeUserNS reports whether user namespaces can be created. Outside Linux
// it returns an error that wraps ErrNotSupported.
func ProbeUserNS(ctx context.Context) (UserNS, error) {
	return UserNS{}, fmt.Errorf("kernel: user namespace probe: %w", ErrNotSupported)
}

// CurrentPrivileges reports the credentials of the current process. Outside
// Linux it returns an error that wraps ErrNotSupported.
func CurrentPrivileges() (Privileges, error) {
	return Privileges{}, fmt.Errorf("kernel: privileges: %w", ErrNotSupported)
}

// RunProbeChild reports false: outside Linux there are no probe children.
func RunProbeChild() bool { return false }
