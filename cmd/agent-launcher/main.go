// The Go runtime does not name its mappings (/proc/PID/maps): where the
// kernel names anonymous mappings, each name makes its own mapping region,
// and the runtime's small mappings, carved from one arena of huge pages
// (internal/launch/heapthp.c), would split it into regions no huge page
// fits in.
//
//go:debug decoratemappings=0

// Command agent-launcher confines an AI agent, and every process it starts,
// to a declarative file policy enforced by the kernel.
package main

import (
	"context"
	"os"

	"github.com/agent-launcher/agent-launcher/internal/cli"
	"github.com/agent-launcher/agent-launcher/internal/launch"
)

func main() {
	// Signals ignored where run was started stay ignored, for the
	// launcher and its agent (nohup, a shell's background job); first,
	// before the Go runtime's handlers for them can act. The others keep
	// the runtime's default until run's session catches those it forwards
	// (launch.Forwarded): an interrupt or a termination before then ends
	// the launcher, and its init stage with it, before any of the agent
	// runs; after, it is the agent's. (Caught here for a context that run
	// never read, such a signal was lost, and the agent ran on:
	// TestSignalDuringStartUp.)
	launch.IgnoreInherited()
	os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
