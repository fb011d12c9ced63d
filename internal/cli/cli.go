// Package cli implements the agent-launcher command line: subcommands, flags
// and the order of operations. It is the only package that wires the others
// together; cmd/agent-launcher only turns Main's result into an exit code.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/agent-launcher/agent-launcher/rules"
)

// Exit statuses of the launcher itself (DESIGN.md section 11). A confined
// agent's own status passes through unchanged.
const (
	ExitOK       = 0
	ExitFailure  = 125 // the launcher failed: bad policy, bad usage, setup error
	ExitDenied   = 1   // explain: some path is denied
	ExitApproval = 2   // explain: some path needs approval, none is denied
)

// Main runs the command line args (without the program name) and returns the
// exit status. stdout carries only the command's intended output; messages go
// to stderr, prefixed "agent-launcher:".
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := &command{ctx: ctx, stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		c.usage(stderr)
		return ExitFailure
	}
	name, rest := args[0], args[1:]
	switch name {
	case "version", "--version":
		return c.version(rest)
	case "check":
		return c.check(rest)
	case "explain":
		return c.explain(rest)
	case "help", "-h", "-help", "--help":
		c.usage(stdout)
		return ExitOK
	}
	msg := fmt.Sprintf("unknown command %q", name)
	if s := rules.Suggest(name, commands); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	c.errorf("%s (run \"agent-launcher help\" for the list)", msg)
	return ExitFailure
}

var commands = []string{"check", "explain", "version", "help"}

type command struct {
	ctx    context.Context
	stdout io.Writer
	stderr io.Writer
}

func (c *command) errorf(format string, args ...any) {
	fmt.Fprintf(c.stderr, "agent-launcher: "+format+"\n", args...)
}

func (c *command) usage(w io.Writer) {
	fmt.Fprint(w, `agent-launcher confines an AI agent and everything it starts to a file policy.

Usage:
  agent-launcher check   [--config FILE] [--agent NAME] [--workspace DIR] [--json] [--show-default]
  agent-launcher explain [--config FILE] [--agent NAME] [--workspace DIR] [--op OP] [--tool NAME] [--json] PATH...
  agent-launcher version

check     validates the policy and prints the effective policy of each agent,
          where every rule came from, and rules that can never take effect.
explain   says what the policy does with an operation on each path: the tier,
          the rule that decided and why. Exit status 0 when every path is
          allowed, 1 when one is denied, 2 when one needs approval.

The policy is --config, else $AGENT_LAUNCHER_CONFIG, else
$XDG_CONFIG_HOME/agent-launcher/config.toml, else the embedded default
(print it with "check --show-default"). Exit status 125: the launcher failed.
`)
}

// flagSet returns a FlagSet that reports errors as one sentence on stderr.
func (c *command) flagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parse parses flags and positional arguments in any order ("explain PATH
// --json" works); "--" ends the flags.
func (c *command) parse(fs *flag.FlagSet, args []string) ([]string, bool) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			msg := err.Error()
			if errors.Is(err, flag.ErrHelp) {
				msg = "see \"agent-launcher help\""
			}
			c.errorf("%s: %s", fs.Name(), strings.TrimPrefix(msg, "flag provided but not defined: "))
			return nil, false
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, true
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), true
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}
