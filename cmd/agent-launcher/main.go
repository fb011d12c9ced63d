// Command agent-launcher confines an AI agent, and every process it starts,
// to a declarative file policy enforced by the kernel.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/agent-launcher/agent-launcher/internal/cli"
)

func main() {
	hugeHeap()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
