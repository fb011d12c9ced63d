//go:build linux && cgo

package launch

/*
extern int al_defer_teardown(void);
*/
import "C"

import "sync/atomic"

// teardownPID is the pid of the helper DeferTeardown started, 0 without
// one: killDescendants spares it.
var teardownPID atomic.Int64

// DeferTeardown starts, once per process, a helper that shares the
// process's memory and outlives it by a moment (teardown.c): the kernel
// tears the address space down when the helper exits, after the
// launcher's parent has had its exit status, not before. Tearing it down
// took most of the millisecond a supervisor's exit cost on the machine the
// start-up target is measured on (run's start-up 19.95 -> 18.88 ms and
// 20.31 -> 19.13 as an ordinary user, 19.25 -> 18.40 and 19.39 -> 18.44
// as root, 100 interleaved rounds: docs/design-amendments.md, the
// fifteenth pass). The helper holds no descriptor but a pidfd of this
// process, blocks every signal, and only waits; where the kernel lacks
// pidfd_open or close_range (before Linux 5.9), or the architecture is
// neither amd64 nor arm64, there is none and nothing changes.
func DeferTeardown() {
	if pid := C.al_defer_teardown(); pid > 0 {
		teardownPID.Store(int64(pid))
	}
}
