package launch

import (
	"fmt"
	"os"
)

// InitMain is reached when the binary runs as the init stage (InitArg)
// and the init stage did not take the process before the Go runtime
// started: a build without cgo, which has none (initstage.c). It says so
// and returns the exit status.
func InitMain() int {
	fmt.Fprintln(os.Stderr, "agent-launcher: "+InitArg+" is the launcher's internal init stage, which this build lacks (built with CGO_ENABLED=0); use `agent-launcher run` of a build made by `make build`")
	return 125
}
