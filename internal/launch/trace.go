package launch

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// TraceVar, set to 1, makes run print the phases of its start-up and end
// to stderr, each with the milliseconds since the launcher started: where
// start-up goes on this machine (the policy, the plan, the init stage's
// own start, the view, Landlock). The init stage gets the supervisor's
// start time in the same variable, so that both count from one origin.
const TraceVar = "AGENT_LAUNCHER_TRACE"

// traceStart is the origin, CLOCK_MONOTONIC in nanoseconds (one clock for
// every process: run makes no time namespace); 0 when tracing is off.
var traceStart int64

func monotonic() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
		return 0
	}
	return ts.Nano()
}

// StartTrace turns tracing on when TraceVar asks for it (the supervisor:
// 1; the init stage: the supervisor's origin).
func StartTrace() {
	v := os.Getenv(TraceVar)
	if v == "" || v == "0" {
		return
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 1 {
		traceStart = n
		return
	}
	traceStart = monotonic()
}

// Tracing reports whether tracing is on.
func Tracing() bool { return traceStart != 0 }

// Trace prints one phase, when tracing is on.
func Trace(format string, args ...any) {
	if traceStart == 0 {
		return
	}
	ms := float64(monotonic()-traceStart) / 1e6
	fmt.Fprintf(os.Stderr, "agent-launcher: trace %8.2f ms  %s\n", ms, fmt.Sprintf(format, args...))
}

// initEnv is the init stage's environment: nothing, or the trace origin.
func initEnv() []string {
	if traceStart == 0 {
		return []string{}
	}
	return []string{TraceVar + "=" + strconv.FormatInt(traceStart, 10)}
}
