package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/agent-launcher/agent-launcher/landlock"
	"github.com/agent-launcher/agent-launcher/rules"
	"github.com/agent-launcher/agent-launcher/tiers"
)

// jsonSchema is the version of every --json output.
const jsonSchema = 1

func (c *command) check(args []string) int {
	fs := c.flagSet("check")
	var pf policyFlags
	pf.register(fs)
	jsonOut := fs.Bool("json", false, "")
	showDefault := fs.Bool("show-default", false, "")
	showLandlock := fs.Bool("landlock", false, "")
	pos, status, ok := c.parse(fs, args)
	if !ok {
		return status
	}
	if len(pos) > 0 {
		c.errorf("check: unexpected argument %q; check takes only flags", pos[0])
		return ExitFailure
	}
	if *showDefault {
		c.stdout.Write(rules.DefaultPolicy())
		return ExitOK
	}
	e, err := resolveEnv(&pf)
	if err != nil {
		c.errorf("%s", err)
		return ExitFailure
	}
	if *showLandlock {
		return c.checkLandlock(e, pf.agent, *jsonOut)
	}
	agents := []string{pf.agent}
	if pf.agent == "" {
		names, err := rules.AgentNames(e.options(""))
		if err != nil {
			return c.checkFailed(*jsonOut, e, err)
		}
		agents = append(agents, names...)
	}
	var out []*compiled
	var errs []error
	for _, a := range agents {
		p, err := e.load(a)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, p)
	}
	if len(errs) > 0 {
		return c.checkFailed(*jsonOut, e, errors.Join(errs...))
	}
	if *jsonOut {
		return c.checkJSON(e, out)
	}
	warnings := 0
	for i, p := range out {
		if i > 0 {
			fmt.Fprintln(c.stdout)
		}
		warnings += writePolicy(c.stdout, p)
	}
	if w := riskyWorkspace(e.workspace, e.home); w != "" {
		c.errorf("warning: %s", w)
	}
	switch warnings {
	case 0:
		c.errorf("policy OK")
	case 1:
		c.errorf("policy OK, with 1 warning")
	default:
		c.errorf("policy OK, with %d warnings", warnings)
	}
	return ExitOK
}

// checkFailed reports a refused policy; with --json also as one JSON object
// on stdout, indented for check, on one line for explain (whose --json
// output is one object per line).
func (c *command) checkFailed(jsonOut bool, e *env, err error) int {
	if !jsonOut {
		c.reportPolicyError(err)
		return ExitFailure
	}
	type jerr struct {
		File    string `json:"file,omitempty"`
		Line    int    `json:"line,omitempty"`
		Key     string `json:"key,omitempty"`
		Message string `json:"message"`
	}
	var list []jerr
	var el rules.ErrorList
	for _, one := range flatten(err) {
		if errors.As(one, &el) {
			for _, x := range el {
				list = append(list, jerr{x.File, x.Line, x.Key, x.Msg})
			}
			continue
		}
		list = append(list, jerr{Message: strings.TrimPrefix(one.Error(), "tiers: ")})
	}
	out := map[string]any{"schema": jsonSchema, "ok": false, "config": configName(e.config), "errors": list}
	if c.oneLine {
		enc := json.NewEncoder(c.stdout)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(out)
	} else {
		writeJSON(c.stdout, out)
	}
	c.reportPolicyError(err)
	return ExitFailure
}

// flatten undoes errors.Join.
func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		if _, isList := err.(rules.ErrorList); !isList {
			return j.Unwrap()
		}
	}
	return []error{err}
}

func configName(config string) string {
	if config == "" {
		return rules.EmbeddedName
	}
	return config
}

func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

type unusedJSON struct {
	Rule *rules.Rule `json:"rule"`
	By   *rules.Rule `json:"shadowed_by,omitempty"`
	Msg  string      `json:"message"`
}

func (c *command) checkJSON(e *env, ps []*compiled) int {
	type policyJSON struct {
		Agent     string        `json:"agent"`
		Policy    *rules.Policy `json:"policy"`
		Unused    []unusedJSON  `json:"never_takes_effect"`
		Overrides []unusedJSON  `json:"overridden_prompts"`
		Stats     tiers.Stats   `json:"automaton"`
	}
	out := struct {
		Schema    int          `json:"schema"`
		OK        bool         `json:"ok"`
		Config    string       `json:"config"`
		Home      string       `json:"home"`
		Workspace string       `json:"workspace"`
		Policies  []policyJSON `json:"policies"`
	}{Schema: jsonSchema, OK: true, Config: configName(e.config), Home: e.home, Workspace: e.workspace}
	for _, p := range ps {
		pj := policyJSON{Agent: p.name, Policy: p.pol, Stats: p.m.Stats(), Unused: []unusedJSON{}}
		for _, u := range p.m.Unused() {
			pj.Unused = append(pj.Unused, unusedJSON{Rule: u.Rule, By: u.By, Msg: unusedMessage(u)})
		}
		pj.Overrides = []unusedJSON{}
		for _, o := range p.m.Overrides() {
			pj.Overrides = append(pj.Overrides, unusedJSON{Rule: o.Rule, By: o.By, Msg: overrideMessage(o, p.pol.Precedence)})
		}
		out.Policies = append(out.Policies, pj)
	}
	writeJSON(c.stdout, out)
	return ExitOK
}

func unusedMessage(u tiers.Unused) string {
	if u.By != nil {
		return fmt.Sprintf("never takes effect: %q (%s) wins wherever it matches", u.By.Pattern, u.By.Source)
	}
	return "never takes effect: another rule wins wherever it matches"
}

// writePolicy prints one policy for people and returns its warning count.
func writePolicy(w io.Writer, p *compiled) int {
	pol := p.pol
	title := "global policy"
	if p.name != "" {
		title = "agent " + p.name
	}
	fmt.Fprintf(w, "== %s ==\n", title)
	fmt.Fprintf(w, "files:      %s\n", strings.Join(pol.Files, ", "))
	fmt.Fprintf(w, "home:       %s\n", pol.Home)
	fmt.Fprintf(w, "workspace:  %s\n", pol.Workspace)
	fmt.Fprintf(w, "default:    %s  (%s)\n", pol.Default, pol.DefaultSource)
	fmt.Fprintf(w, "precedence: %s  (%s)\n", pol.Precedence, pol.PrecedenceSource)
	if len(pol.Presets) == 0 {
		fmt.Fprintf(w, "presets:    none\n")
	} else {
		fmt.Fprintf(w, "presets:    %s\n", strings.Join(pol.Presets, ", "))
	}
	fmt.Fprintf(w, "prompt:     timeout %s  (%s)\n", pol.PromptTimeout, pol.PromptTimeoutSource)

	byKind := func(k rules.Kind) []*rules.Rule {
		var out []*rules.Rule
		for _, r := range pol.Rules {
			if r.Kind == k {
				out = append(out, r)
			}
		}
		return out
	}
	tierRules := byKind(rules.KindTier)
	slices.SortStableFunc(tierRules, func(a, b *rules.Rule) int { return int(a.Tier) - int(b.Tier) })
	if pol.Precedence == rules.Restrictive {
		fmt.Fprintf(w, "\ntier rules (deny wins, then the most restrictive tier: deny > prompt > prompt-write > read > write):\n")
	} else {
		fmt.Fprintf(w, "\ntier rules (deny wins; otherwise the most specific pattern, ties to the more restrictive tier):\n")
	}
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	for _, r := range tierRules {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", r.Tier, patternText(r), ruleOrigin(r))
	}
	tw.Flush()
	fmt.Fprintf(w, "\nwrite protection (read-only even inside write trees; created files are reported at session end):\n")
	tw = tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	for _, r := range byKind(rules.KindWriteProtect) {
		fmt.Fprintf(tw, "  %s\t%s\n", r.Pattern, ruleOrigin(r))
	}
	tw.Flush()
	if ex := byKind(rules.KindExec); len(ex) > 0 {
		layers := map[rules.Origin]bool{}
		for _, r := range ex {
			layers[r.Source.Origin] = true
		}
		if len(layers) > 1 {
			fmt.Fprintf(w, "\nexec: only paths that both the global file's and the agent overlay's exec_paths match (and the tier lets read):\n")
		} else {
			fmt.Fprintf(w, "\nexec: only paths these match (and the tier lets read):\n")
		}
		for _, r := range ex {
			fmt.Fprintf(w, "  %s  (%s)\n", patternText(r), r.Source)
		}
	} else {
		fmt.Fprintf(w, "\nexec: any path the tier lets read (exec_paths is not set or empty)\n")
	}
	if ex := byKind(rules.KindException); len(ex) > 0 {
		fmt.Fprintf(w, "exceptions to the built-in lists:\n")
		for _, r := range ex {
			fmt.Fprintf(w, "  %s  (%s)\n", r.Pattern, r.Source)
		}
	} else {
		fmt.Fprintf(w, "exceptions to the built-in lists: none\n")
	}
	if len(pol.Connect) == 0 {
		fmt.Fprintf(w, "connect_paths: none (no unix socket outside the session is reachable)\n")
	} else {
		fmt.Fprintf(w, "connect_paths:\n")
		for _, cp := range pol.Connect {
			fmt.Fprintf(w, "  %s  (%s)\n", cp.Value, cp.Source)
		}
	}
	fmt.Fprintf(w, "env pass (wins over drop):")
	if len(pol.Env.Pass) == 0 {
		fmt.Fprintf(w, " none")
	}
	fmt.Fprintln(w)
	for _, r := range pol.Env.Pass {
		fmt.Fprintf(w, "  %s  (%s)\n", r.Pattern, r.Source)
	}
	fmt.Fprintf(w, "env drop:\n")
	tw = tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	for _, r := range pol.Env.Drop {
		origin := r.Source.String()
		if r.Note != "" {
			origin += ": " + r.Note
		}
		fmt.Fprintf(tw, "  %s\t%s\n", r.Pattern, origin)
	}
	tw.Flush()

	var warnings []string
	for _, wn := range pol.Warnings {
		warnings = append(warnings, wn.String())
	}
	for _, u := range p.m.Unused() {
		warnings = append(warnings, fmt.Sprintf("%s: %q %s", u.Rule.Source, u.Rule.Pattern, unusedMessage(u)))
	}
	for _, o := range p.m.Overrides() {
		warnings = append(warnings, overrideMessage(o, pol.Precedence))
	}
	if len(warnings) > 0 {
		fmt.Fprintf(w, "\nwarnings:\n")
		for _, s := range warnings {
			fmt.Fprintf(w, "  %s\n", s)
		}
	}
	return len(warnings)
}

func overrideMessage(o tiers.Override, prec rules.Precedence) string {
	how := "it is more specific"
	if prec == rules.Restrictive {
		how = "it is as restrictive and more specific"
	}
	also := ""
	if n := len(o.Also); n > 0 {
		also = fmt.Sprintf(" (and where %d other grant(s) match, such as %q)", n, o.Also[0].Pattern)
	}
	return fmt.Sprintf("%s: %q is overridden where %q (%s) also matches%s, because %s: nobody is asked there. Write the %s rule more specifically, or set precedence = \"restrictive\"",
		o.Rule.Source, o.Rule.Pattern, o.By.Pattern, o.By.Source, also, how, o.Rule.Tier)
}

// patternText shows a pattern as written, and what it expanded to when a
// ${VAR} made it something the reader cannot see.
func patternText(r *rules.Rule) string {
	if strings.Contains(r.Pattern, "${") {
		return r.Pattern + " = " + r.Expanded
	}
	return r.Pattern
}

func ruleOrigin(r *rules.Rule) string {
	s := r.Source.String()
	if r.Note != "" {
		s += ": " + r.Note
	}
	return s
}

// checkLandlock prints the Landlock plan run would enforce here, on this
// kernel's ABI (or the newest the planner knows when there is none).
// viewText renders the private view the plan is for.
func viewText(v *landlock.View, pl *landlock.Plan) string {
	if v == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString("\nprivate view (run builds it where user namespaces work; where they do not, it plans again without it and says so):\n")
	for _, l := range []struct {
		name  string
		paths []string
	}{{"private tmpfs", v.Private}, {"hidden", v.Hidden}, {"masked", v.Masked}, {"fresh", v.Fresh}, {"kept", v.Keep}, {"cache", bindText(v.Caches)}} {
		if len(l.paths) > 0 {
			fmt.Fprintf(&b, "  %-14s %s\n", l.name+":", strings.Join(l.paths, " "))
		}
	}
	if len(pl.Binds) > 0 {
		b.WriteString("  mounted over themselves (the built-in write protection; the parent keeps its grant):\n")
		for _, m := range pl.Binds {
			kind := "pinned: cannot be renamed, removed or replaced; its contents follow their own rules"
			if m.ReadOnly {
				kind = "read-only"
				if m.NoExec {
					kind += ", no exec"
				}
			}
			fmt.Fprintf(&b, "    %s  (%s)\n", m.Path, kind)
		}
	}
	if len(pl.Unbound) > 0 {
		b.WriteString("  protected by sibling rules, as a mount cannot protect them:\n")
		for _, u := range pl.Unbound {
			fmt.Fprintf(&b, "    %s  (%s)\n", u.Path, u.Reason)
		}
	}
	return b.String()
}

func (c *command) checkLandlock(e *env, agent string, jsonOut bool) int {
	p, err := e.load(agent)
	if err != nil {
		return c.checkFailed(jsonOut, e, err)
	}
	k, err := c.detectLandlock()
	if err != nil {
		c.errorf("check: %v", err)
		return ExitFailure
	}
	abi := k.ABI
	if abi < 1 {
		abi = landlock.MinABI
		c.errorf("this kernel has no Landlock (%s); showing the plan for ABI %d", k.Reason, abi)
	}
	e.viewAsRun(p, agent)
	pl, _, notes, err := e.planFloor(p, abi, e.launcher.StateDir)
	for _, n := range notes {
		c.errorf("%s", n)
	}
	if err != nil {
		c.errorf("check: %s", strings.TrimPrefix(err.Error(), "landlock: "))
		return ExitFailure
	}
	for _, w := range pl.Warnings {
		c.errorf("warning: %s", w)
	}
	if jsonOut {
		writeJSON(c.stdout, struct {
			Schema int `json:"schema"`
			*landlock.Plan
			View *landlock.View `json:"view"`
		}{jsonSchema, pl, e.view})
		return ExitOK
	}
	fmt.Fprint(c.stdout, pl.Format())
	fmt.Fprint(c.stdout, viewText(e.view, pl))
	return ExitOK
}
