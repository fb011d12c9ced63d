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
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/agent-launcher/agent-launcher/internal/kernel"
	"github.com/agent-launcher/agent-launcher/internal/launch"
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
	kernel.RunProbeChild() // doctor's probes re-execute the binary; never returns when probing
	if len(args) > 0 && args[0] == launch.InitArg {
		return launch.InitMain()
	}
	launch.StartTrace()
	if launch.Tracing() {
		// The timer slack the supervisor runs with (initstage.c raises
		// it): /proc/PID/timerslack_ns is another process's to read only
		// with CAP_SYS_NICE.
		slack, _ := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
		launch.Trace("supervisor: main (timer slack %d ns)", slack)
	}
	c := &command{ctx: ctx, stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		c.usage(stderr)
		return ExitFailure
	}
	name, rest := args[0], args[1:]
	code := c.command(name, rest)
	// Here without a panic: the kept automata this process took as
	// vouched for are marked so again (cache.go).
	reaffirmVouches()
	return code
}

// command runs the command name with its arguments.
func (c *command) command(name string, rest []string) int {
	switch name {
	case "version", "--version":
		return c.version(rest)
	case "check":
		return c.check(rest)
	case "explain":
		return c.explain(rest)
	case "run":
		return c.run(rest)
	case "doctor":
		return c.doctor(rest)
	case "review":
		return c.review(rest)
	case "help", "-h", "-help", "--help":
		c.usage(c.stdout)
		return ExitOK
	}
	msg := fmt.Sprintf("unknown command %q", name)
	if s := rules.Suggest(name, commands); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	c.errorf("%s (run \"agent-launcher help\" for the list)", msg)
	return ExitFailure
}

var commands = []string{"run", "check", "explain", "doctor", "review", "version", "help"}

type command struct {
	ctx    context.Context
	stdout io.Writer
	stderr io.Writer
	// oneLine makes JSON output one object per line (explain).
	oneLine bool
	// planNotes: run printed a plan's notes and warnings; a plan made
	// again in the same run (launch.StaleError) does not print them again.
	planNotes bool
}

func (c *command) errorf(format string, args ...any) {
	// A carriage return at the end stays: a line for a terminal the pty
	// relay holds raw carries its own (launch.rawNotices).
	msg, cr := strings.CutSuffix(fmt.Sprintf(format, args...), "\r")
	if cr {
		msg = plainLine(msg) + "\r"
	} else {
		msg = plainLine(msg)
	}
	fmt.Fprintf(c.stderr, "agent-launcher: %s\n", msg)
}

// plainLine returns s with what a terminal would act on made visible:
// control characters (a newline that forges a line, an escape sequence
// that moves the cursor, hides text or sets the clipboard), C1 controls,
// the bidirectional overrides, and bytes that are not UTF-8, each as its
// Go escape. Every line the launcher prints on stderr goes through it: a
// name the agent chose (a carved directory, a path in the review) must
// not rewrite the operator's screen (DESIGN.md section 10). Tabs stay.
func plainLine(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\t' || c >= 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x20 && r != '\t', r == 0x7f, r >= 0x80 && r < 0xa0:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func (c *command) usage(w io.Writer) {
	fmt.Fprint(w, `agent-launcher confines an AI agent and everything it starts to a file policy.

Usage:
  agent-launcher run     [--config FILE] [--agent NAME] [--workspace DIR] [--allow-unconfined] -- COMMAND [ARG...]
  agent-launcher check   [--config FILE] [--agent NAME] [--workspace DIR] [--json] [--show-default] [--landlock]
  agent-launcher explain [--config FILE] [--agent NAME] [--workspace DIR] [--op OP] [--tool NAME] [--json] PATH...
  agent-launcher doctor  [--json]
  agent-launcher review  [--json] [--remove]
  agent-launcher version

run       confines COMMAND and everything it starts to the policy.
review    shows the last session's changes to files that programs outside the
          session run or obey; --remove removes the ones it created.
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
// --json" works); "--" ends the flags. When it returns ok == false the
// command is over and its exit status is status (0 after -h).
func (c *command) parse(fs *flag.FlagSet, args []string) (pos []string, status int, ok bool) {
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			c.usage(c.stdout)
			return nil, ExitOK, false
		}
		if err != nil {
			c.errorf("%s: %s", fs.Name(), flagError(fs, err))
			return nil, ExitFailure, false
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), ExitOK, true
		}
		if len(rest) == 0 {
			return pos, ExitOK, true
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// flagError rewrites the flag package's messages as sentences, with the
// flags spelled the way users type them.
func flagError(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		if s := rules.Suggest(name, names); s != "" {
			return fmt.Sprintf("unknown flag --%s; did you mean --%s?", name, s)
		}
		return fmt.Sprintf("unknown flag --%s; the flags are --%s", name, strings.Join(names, ", --"))
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return fmt.Sprintf("--%s needs a value", name)
	}
	return strings.ReplaceAll(msg, " -", " --")
}
