//go:build linux && cgo

package launch

/*
#cgo CFLAGS: -O2 -Wall -Wextra -Wno-unused-parameter
extern void al_init_stage(void);
extern unsigned long long al_ignored_signals;

// Before the Go runtime starts: the init stage (initstage.c) never
// returns; any other run of the binary returns at once.
__attribute__((constructor)) static void al_init_stage_ctor(void) {
	al_init_stage();
}
*/
import "C"

import (
	"os"
	"syscall"
)

// hasInitStage says whether this build has the init stage (initstage.c,
// which needs cgo).
const hasInitStage = true

// ignoredAtStart lists the forwarded signals this process was started
// with ignored, as initstage.c recorded them before the Go runtime ran.
func ignoredAtStart() []os.Signal {
	var out []os.Signal
	for _, s := range Forwarded {
		if n := s.(syscall.Signal); C.al_ignored_signals&(1<<(n-1)) != 0 {
			out = append(out, s)
		}
	}
	return out
}
