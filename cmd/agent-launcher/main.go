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
	"os/signal"
	"slices"
	"syscall"

	"github.com/agent-launcher/agent-launcher/internal/cli"
	"github.com/agent-launcher/agent-launcher/internal/launch"
)

func main() {
	// Signals ignored where run was started stay ignored, for the
	// launcher and its agent (nohup, a shell's background job); first,
	// before the Go runtime's handlers for them can act.
	ignored := launch.IgnoreInherited()
	var stops []os.Signal
	for _, s := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		if !slices.Contains(ignored, s) {
			stops = append(stops, s)
		}
	}
	ctx, stop := context.Background(), func() {}
	if len(stops) > 0 { // none would ask for every signal
		ctx, stop = signal.NotifyContext(ctx, stops...)
	}
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
