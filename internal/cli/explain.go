package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agent-launcher/agent-launcher/landlock"
	"github.com/agent-launcher/agent-launcher/rules"
	"github.com/agent-launcher/agent-launcher/tiers"
)

func (c *command) explain(args []string) int {
	c.oneLine = true
	fs := c.flagSet("explain")
	var pf policyFlags
	pf.register(fs)
	jsonOut := fs.Bool("json", false, "")
	opName := fs.String("op", "read", "")
	tool := fs.String("tool", "agent-launcher", "")
	paths, status, ok := c.parse(fs, args)
	if !ok {
		return status
	}
	op, ok := tiers.ParseOp(*opName)
	if !ok {
		c.errorf("explain: --op %q is not an operation; use one of %s", *opName, strings.Join(tiers.OpNames(), ", "))
		return ExitFailure
	}
	if len(paths) == 0 {
		c.errorf("explain: name at least one PATH")
		return ExitFailure
	}
	e, err := resolveEnv(&pf)
	if err != nil {
		c.errorf("%s", err)
		return ExitFailure
	}
	p, err := e.load(pf.agent)
	if err != nil {
		return c.checkFailed(*jsonOut, e, err)
	}
	// Decide as run does: with the protection of symlinked protected names
	// extended to their targets, which only planning the floor finds.
	abi := landlock.MinABI
	if k, err := landlock.Detect(); err == nil && k.ABI > 0 {
		abi = k.ABI
	}
	// Planned as run plans it, where the built-in write protection is kept
	// by mounts.
	e.viewAsRun(p, pf.agent)
	if _, planned, _, err := e.planFloor(p, abi, e.launcher.StateDir); err == nil {
		p = planned
	} else {
		c.errorf("explain: warning: %s; symlinks to protected names are not followed in these answers", strings.TrimPrefix(err.Error(), "landlock: "))
	}
	status = ExitOK
	for _, arg := range paths {
		path, err := canonical(arg)
		if op == tiers.OpDelete {
			// unlink and rename act on the last component itself, not on
			// what a symlink there points to.
			path, err = canonicalParent(arg)
		}
		if err != nil {
			c.errorf("explain: %s", err)
			return ExitFailure
		}
		ex := p.m.Explain(path, op)
		switch ex.Decision.Verdict {
		case tiers.Denied:
			status = ExitDenied
		case tiers.NeedsApproval:
			if status == ExitOK {
				status = ExitApproval
			}
		}
		if *jsonOut {
			writeExplainJSON(c, p.m, arg, ex, *tool)
			continue
		}
		writeExplain(c, arg, ex)
	}
	return status
}

func writeExplain(c *command, arg string, ex tiers.Explanation) {
	d := ex.Decision
	fmt.Fprintf(c.stdout, "%s: %s %s\n", display(ex.Path), d.Op, verdictText(d.Verdict))
	if ex.Path != arg {
		fmt.Fprintf(c.stdout, "  resolved from: %s\n", display(arg))
	}
	fmt.Fprintf(c.stdout, "  tier: %s\n", d.Tier)
	if d.Rule.Pattern == "(default)" {
		fmt.Fprintf(c.stdout, "  rule: none matches; the default tier applies (%s)\n", d.Rule.Source)
	} else {
		fmt.Fprintf(c.stdout, "  rule: %s  (%s)\n", d.Rule.Pattern, ruleOrigin(d.Rule))
	}
	fmt.Fprintf(c.stdout, "  why: %s\n", d.Why)
	if f := floorCaveat(ex.Path, d); f != "" {
		fmt.Fprintf(c.stdout, "  floor: %s\n", f)
	}
	var others []tiers.Match
	for _, m := range ex.Matches {
		if !m.Won {
			others = append(others, m)
		}
	}
	if len(others) > 0 {
		fmt.Fprintf(c.stdout, "  also matches:\n")
		for _, m := range others {
			note := ""
			if m.Lifted {
				note = ", lifted here by builtin_exceptions"
			}
			fmt.Fprintf(c.stdout, "    %s %s  (%s%s)\n", ruleLabel(m.Rule), m.Rule.Pattern, ruleOrigin(m.Rule), note)
		}
	}
}

func ruleLabel(r *rules.Rule) string {
	switch r.Kind {
	case rules.KindTier:
		return r.Tier.String()
	}
	return r.Kind.String()
}

func verdictText(v tiers.Verdict) string {
	switch v {
	case tiers.Allowed:
		return "allowed"
	case tiers.NeedsApproval:
		return "needs approval"
	}
	return "denied"
}

// explainJSON is the --json shape. For a denied path it is the envelope agent
// frameworks asked for ({"error", "tool_name", "path", "allowed_paths",
// "hint"}) plus tier and rule; otherwise error and hint are absent.
type explainJSON struct {
	Schema       int           `json:"schema"`
	Error        string        `json:"error,omitempty"`
	ToolName     string        `json:"tool_name"`
	Path         string        `json:"path"`
	AllowedPaths *[]string     `json:"allowed_paths,omitempty"` // present (maybe empty) on denials
	Hint         string        `json:"hint,omitempty"`
	Op           tiers.Op      `json:"op"`
	Verdict      tiers.Verdict `json:"verdict"`
	Tier         rules.Tier    `json:"tier"`
	Rule         *rules.Rule   `json:"rule"`
	Why          string        `json:"why"`
	// Floor says where a session's kernel floor answers differently
	// (floorCaveat); absent where it does not.
	Floor   string        `json:"floor,omitempty"`
	Matches []tiers.Match `json:"matches"`
}

func writeExplainJSON(c *command, m *tiers.Matcher, arg string, ex tiers.Explanation, tool string) {
	d := ex.Decision
	out := explainJSON{Schema: jsonSchema, ToolName: tool, Path: ex.Path, Op: d.Op, Verdict: d.Verdict,
		Tier: d.Tier, Rule: d.Rule, Why: d.Why, Floor: floorCaveat(ex.Path, d), Matches: ex.Matches}
	if out.Matches == nil {
		out.Matches = []tiers.Match{}
	}
	if d.Verdict == tiers.Denied {
		out.Error = fmt.Sprintf("agent-launcher policy denies %s of %s", d.Op, ex.Path)
		out.Hint = hint(d)
		allowed := m.AllowedPatterns(d.Op)
		out.AllowedPaths = &allowed
	}
	enc := json.NewEncoder(c.stdout)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(out)
}

// floorCaveat says how a session's kernel floor answers for path where it
// does not answer as the policy does: a name pattern (~/**/.env,
// **/.git/hooks/**) protects the files it matches that exist when the
// session starts; a file of that name that appears during the session is
// not refused by it (DESIGN.md section 7). "" where the floor agrees: the
// path exists, the answer allows, or a literal path or tree decided.
func floorCaveat(path string, d tiers.Decision) string {
	r := d.Rule
	if d.Verdict == tiers.Allowed || r == nil || r.Pattern == "(default)" {
		return ""
	}
	protects := r.Kind == rules.KindWriteProtect || r.Kind == rules.KindTier && r.Tier <= rules.PromptWrite
	if !protects {
		return ""
	}
	for _, g := range r.Globs {
		if _, _, ok := g.LiteralPath(); ok {
			return "" // a literal path or tree: the floor keeps it, existing or not
		}
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		return ""
	}
	if r.Kind == rules.KindWriteProtect {
		return "the kernel floor applies this name pattern to the files that exist when a session starts; a file of this name created during a session is not refused by it, and the session-end review reports it (agent-launcher review --remove removes it)"
	}
	return "the kernel floor applies this name pattern to the files that exist when a session starts; a file of this name that appears during a session (the operator's, or one the agent makes) is not denied by it"
}

// hint says what would change the answer, for the agent and its operator.
func hint(d tiers.Decision) string {
	r := d.Rule
	switch {
	case r.Pattern == "(default)":
		return "no rule grants this path; the operator can add it to read_paths or write_paths in the policy"
	case r.Source.Key == "built-in launcher protection":
		return "this is one of agent-launcher's own files; no policy can open it to the agent"
	case r.Kind == rules.KindWriteProtect:
		return fmt.Sprintf("this file is write-protected because programs outside the session run or obey it (%s); read it, or ask the operator", r.Note)
	case r.Exceptable():
		return fmt.Sprintf("this path is on the built-in denylist (%s); only the operator can lift it, with builtin_exceptions in the global policy file", r.Note)
	case d.Op == tiers.OpExec && d.Tier != rules.Deny:
		return "exec_paths does not list this program (where the global file and the agent overlay both set exec_paths, both must list it)"
	case d.Tier == rules.Read:
		return fmt.Sprintf("the path is read-only (%s); write under one of allowed_paths instead", r.Source)
	}
	return fmt.Sprintf("denied by %s; ask the operator to change the policy", r.Source)
}

// display returns s as it is when it prints as plain text, and quoted, with
// control, escape and bidirectional characters made visible, when it does
// not: a path can hold a newline that forges an output line, or a terminal
// escape sequence (DESIGN.md section 10).
func display(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) {
		return s
	}
	return strconv.Quote(s)
}
