//go:build !linux

package kernel

import (
	"fmt"
	"os"
)

// runTestHelper exists so that TestMain builds everywhere; there are no
// helper processes outside Linux.
func runTestHelper(h string) int {
	fmt.Fprintf(os.Stderr, "unknown %s=%q\n", helperEnv, h)
	return 2
}
