//go:build !linux || !cgo

package launch

import (
	"os"
	"os/signal"
	"syscall"
)

// hasInitStage says whether this build has the init stage (initstage.c,
// which needs cgo): a build with CGO_ENABLED=0 has none, and run refuses.
const hasInitStage = false

// ignoredAtStart lists what the Go runtime keeps ignored from the start
// when nothing asks for it (SIGHUP, SIGINT): without initstage.c, nothing
// recorded the rest.
func ignoredAtStart() []os.Signal {
	var out []os.Signal
	for _, s := range []os.Signal{syscall.SIGHUP, syscall.SIGINT} {
		if signal.Ignored(s) {
			out = append(out, s)
		}
	}
	return out
}

// childSlack does nothing: without initstage.c, the supervisor's timer
// slack is the one it was started with.
func childSlack() (restore func(), err error) { return func() {}, nil }

// catchSignals delivers sigs to c until stop, through os/signal: without
// sigcatch.c, the runtime's signal thread catches them.
func catchSignals(c chan<- os.Signal, sigs ...os.Signal) (stop func(), err error) {
	if len(sigs) == 0 {
		return func() {}, nil // signal.Notify with none would catch every signal
	}
	signal.Notify(c, sigs...)
	return func() { signal.Stop(c) }, nil
}
