package rules

import (
	"cmp"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
)

//go:embed default.toml
var defaultPolicy []byte

// DefaultPolicy returns the text of the embedded default policy, the policy
// used when no configuration file exists.
func DefaultPolicy() []byte { return append([]byte(nil), defaultPolicy...) }

// LauncherPaths are the launcher's own files. The built-in denylist covers
// them (an agent that read the approval token or rewrote its policy would
// own the session) and no exception can lift that. Empty fields are skipped.
type LauncherPaths struct {
	Executable  string   // write-protected
	ConfigFiles []string // denied; one that ends in "/" is a directory, denied with everything under it
	ConfigDir   string   // denied, with everything under it
	AgentsDir   string   // agents/ beside the policy file; denied, with everything under it
	StateDir    string   // denied, with everything under it
	// OtherStateDirs are state directories of other configurations (the
	// default place when XDG_STATE_HOME moves this one): their kept plans
	// and automata decide what those sessions may do. Denied, with
	// everything under them.
	OtherStateDirs []string
	RuntimeDir     string // approval sockets; denied, with everything under it
	AuditLog       string // denied
}

// Options says what to load and how to expand it.
type Options struct {
	// Config is the global policy file; "" loads the embedded default.
	Config string
	// Agent selects the overlay [agents.NAME] of the global file or
	// agents/NAME.toml beside it; "" loads the global policy alone. An
	// agent that is defined nowhere is an error.
	Agent string
	// Home expands "~"; it must be absolute.
	Home string
	// Workspace expands "<workspace>"; "" refuses patterns that use it.
	Workspace string
	// LookupEnv expands ${VAR}; nil means no variable is set.
	LookupEnv func(string) (string, bool)
	// ReadFile and ReadDir default to os.ReadFile and os.ReadDir.
	ReadFile func(string) ([]byte, error)
	ReadDir  func(string) ([]fs.DirEntry, error)
	// Launcher lists the launcher's own files for the built-in denylist.
	Launcher LauncherPaths
}

// maxPolicyBytes bounds a policy file, so that a runaway generator cannot
// make the launcher read without end.
const maxPolicyBytes = 16 << 20

// ValidAgentName reports whether name may name an agent: 1 to 64 ASCII
// letters, digits, '_', '.' or '-', the first a letter or digit. (A loop,
// not a regexp: compiling one cost every run's start-up tens of page
// faults.)
func ValidAgentName(name string) bool {
	if len(name) == 0 || len(name) > 64 || !isAlnum(name[0]) {
		return false
	}
	for i := 1; i < len(name); i++ {
		if c := name[i]; !isAlnum(c) && c != '_' && c != '.' && c != '-' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// validVarName reports whether name is an environment variable's name as
// ${NAME} may write it: a letter or '_', then letters, digits or '_'.
func validVarName(name string) bool {
	if len(name) == 0 || '0' <= name[0] && name[0] <= '9' {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !isAlnum(c) && c != '_' {
			return false
		}
	}
	return true
}

// Load reads, validates, layers and expands a policy. A policy with any
// problem is refused: the error is an ErrorList whose entries name file,
// line and key.
func Load(opts Options) (*Policy, error) {
	global, err := readGlobal(&opts)
	if err != nil {
		return nil, err
	}
	b := &builder{opts: opts, pol: &Policy{Agent: opts.Agent, Home: opts.Home, Workspace: opts.Workspace}}
	b.pol.Files = append(b.pol.Files, global.name)
	var overlay *document
	var overlayAgent *agentDoc
	overlayPrefix := ""
	if opts.Agent != "" {
		if !ValidAgentName(opts.Agent) {
			return nil, ErrorList{{Key: "agent", Msg: fmt.Sprintf("%q is not a valid agent name; use letters, digits, '.', '_' and '-'", opts.Agent)}}
		}
		inFile := global.tree.Agents[opts.Agent]
		file, err := readAgentFile(&opts, global)
		if err != nil {
			return nil, err
		}
		switch {
		case inFile != nil && file != nil:
			return nil, ErrorList{{File: file.name, Key: "agents." + opts.Agent,
				Msg: fmt.Sprintf("agent %q is also defined in %s (line %d); keep one definition", opts.Agent, global.name, global.line("agents."+opts.Agent))}}
		case inFile != nil:
			overlay, overlayAgent, overlayPrefix = global, inFile, "agents."+opts.Agent+"."
		case file != nil:
			overlay = file
			overlayAgent = &agentDoc{FilePolicy: file.tree.FilePolicy, Env: file.tree.Env, Prompt: file.tree.Prompt}
			b.pol.Files = append(b.pol.Files, file.name)
		default:
			known, _ := AgentNames(opts)
			msg := fmt.Sprintf("agent %q is not defined in %s", opts.Agent, global.name)
			if global.dir != "" {
				msg += " or " + filepath.Join(global.dir, "agents", opts.Agent+".toml")
			}
			if s := Suggest(opts.Agent, known); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			} else if len(known) > 0 {
				msg += "; defined agents: " + strings.Join(known, ", ")
			}
			return nil, ErrorList{{Msg: msg}}
		}
	}
	b.errs = append(b.errs, global.errs...)
	if overlay != nil && overlay != global {
		b.errs = append(b.errs, overlay.errs...)
	}
	b.build(global, overlay, overlayAgent, overlayPrefix)
	if len(b.errs) > 0 {
		return nil, b.errs.sorted()
	}
	// Empty lists, not nil: they read as [] in JSON.
	p := b.pol
	if p.Presets == nil {
		p.Presets = []string{}
	}
	if p.Connect == nil {
		p.Connect = []Connect{}
	}
	if p.Warnings == nil {
		p.Warnings = []Warning{}
	}
	// In file order, then line order.
	fileRank := map[string]int{}
	for i, f := range p.Files {
		fileRank[f] = i + 1
	}
	slices.SortStableFunc(p.Warnings, func(x, y Warning) int {
		return cmp.Or(cmp.Compare(fileRank[x.Source.File], fileRank[y.Source.File]), cmp.Compare(x.Source.Line, y.Source.Line))
	})
	if p.Env.Pass == nil {
		p.Env.Pass = []EnvRule{}
	}
	return p, nil
}

// AgentNames returns the agents the global file defines, in [agents.NAME]
// tables and in agents/NAME.toml files beside it, sorted.
func AgentNames(opts Options) ([]string, error) {
	global, err := readGlobal(&opts)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for name := range global.tree.Agents {
		seen[name] = true
	}
	if global.dir != "" {
		entries, err := opts.ReadDir(filepath.Join(global.dir, "agents"))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("rules: list agents: %w", err)
		}
		for _, e := range entries {
			if name, ok := strings.CutSuffix(e.Name(), ".toml"); ok && !e.IsDir() && ValidAgentName(name) {
				seen[name] = true
			}
		}
	}
	return sortedKeys(seen), nil
}

func readGlobal(opts *Options) (*document, error) {
	if opts.ReadFile == nil {
		opts.ReadFile = os.ReadFile
	}
	if opts.ReadDir == nil {
		opts.ReadDir = os.ReadDir
	}
	if opts.Config == "" {
		d, errs := parseDocument(EmbeddedName, "", defaultPolicy)
		if errs != nil {
			return nil, errs
		}
		return d, nil
	}
	data, err := opts.ReadFile(opts.Config)
	if err != nil {
		return nil, ErrorList{{File: opts.Config, Msg: "cannot read the policy file: " + describeIOError(err)}}
	}
	if len(data) > maxPolicyBytes {
		return nil, ErrorList{{File: opts.Config, Msg: fmt.Sprintf("is %d bytes; a policy file may hold at most %d", len(data), maxPolicyBytes)}}
	}
	d, errs := parseDocument(opts.Config, filepath.Dir(opts.Config), data)
	if d == nil {
		return nil, errs
	}
	d.errs = errs
	for _, name := range sortedKeys(d.tree.Agents) {
		if !ValidAgentName(name) {
			d.errs = append(d.errs, &Error{File: d.name, Line: d.line("agents." + name), Key: "agents." + name,
				Msg: "not a valid agent name; use letters, digits, '.', '_' and '-'"})
		}
	}
	return d, nil
}

// readAgentFile reads agents/NAME.toml beside the global file; a missing file
// is (nil, nil).
func readAgentFile(opts *Options, global *document) (*document, error) {
	if global.dir == "" {
		return nil, nil
	}
	name := filepath.Join(global.dir, "agents", opts.Agent+".toml")
	data, err := opts.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, ErrorList{{File: name, Msg: "cannot read the agent file: " + describeIOError(err)}}
	}
	if len(data) > maxPolicyBytes {
		return nil, ErrorList{{File: name, Msg: fmt.Sprintf("is %d bytes; a policy file may hold at most %d", len(data), maxPolicyBytes)}}
	}
	d, errs := parseDocument(name, "", data)
	if d == nil {
		return nil, errs
	}
	d.errs = errs
	if d.tree.Agents != nil {
		d.errs = append(d.errs, &Error{File: name, Line: d.line("agents"), Key: "agents",
			Msg: "an agent file holds one agent's overlay at its top level ([file_policy], [env], [prompt]); define other agents in their own files"})
	}
	return d, nil
}

func describeIOError(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return err.Error()
}

// builder layers the documents into a Policy, collecting every problem.
type builder struct {
	opts Options
	pol  *Policy
	errs ErrorList
	// launcher holds the expanded launcher-protection globs, which no
	// exception may touch.
	launcher []Glob
	builtins []*Rule
}

func (b *builder) fail(file string, line int, key, format string, args ...any) {
	b.errs = append(b.errs, &Error{File: file, Line: line, Key: key, Msg: fmt.Sprintf(format, args...)})
}

func (b *builder) warn(src Source, format string, args ...any) {
	b.pol.Warnings = append(b.pol.Warnings, Warning{Source: src, Msg: fmt.Sprintf(format, args...)})
}

// field is one policy field as set in a layer.
type field struct {
	doc    *document
	origin Origin
	key    string // full TOML key, e.g. "agents.coder.file_policy.write_paths"
}

func (f field) source(suffix string) Source {
	k := f.key + suffix
	return Source{Origin: f.origin, File: f.doc.name, Line: f.doc.line(k), Key: k}
}

func (b *builder) build(global, overlay *document, ov *agentDoc, ovPrefix string) {
	opts := b.opts
	if opts.Home == "" || !path.IsAbs(opts.Home) {
		b.fail("", 0, "home", "the home directory %q is not an absolute path; set HOME", opts.Home)
		return
	}
	if !utf8.ValidString(opts.Home) || !utf8.ValidString(opts.Workspace) {
		b.fail("", 0, "workspace", "the home directory or workspace path is not valid UTF-8; policy patterns cannot name it exactly, so choose a directory with a UTF-8 name")
		return
	}
	b.opts.Home = path.Clean(opts.Home)
	b.pol.Home = b.opts.Home
	if opts.Workspace != "" {
		if !path.IsAbs(opts.Workspace) {
			b.fail("", 0, "workspace", "%q is not an absolute path", opts.Workspace)
			return
		}
		b.opts.Workspace = path.Clean(opts.Workspace)
		b.pol.Workspace = b.opts.Workspace
	}

	gfp := global.tree.FilePolicy
	if gfp == nil {
		gfp = &filePolicyDoc{}
	}
	var ofp *filePolicyDoc
	if ov != nil {
		ofp = ov.FilePolicy
	}
	if ofp == nil {
		ofp = &filePolicyDoc{}
	}
	gf := func(name string) field { return field{global, OriginGlobal, "file_policy." + name} }
	of := func(name string) field { return field{overlay, OriginAgent, ovPrefix + "file_policy." + name} }

	// Scalars: the overlay replaces, the global file is the fallback, then
	// the built-in default.
	b.pol.Default, b.pol.DefaultSource = Deny, Source{Origin: OriginBuiltin, Key: layerDefault}
	b.pol.GlobalDefault, b.pol.GlobalDefaultSource = b.pol.Default, b.pol.DefaultSource
	for _, c := range []struct {
		v *string
		f field
	}{{gfp.Default, gf("default")}, {ofp.Default, of("default")}} {
		if c.v == nil {
			continue
		}
		src := c.f.source("")
		t, ok := ParseTier(*c.v)
		if !ok {
			b.fail(src.File, src.Line, src.Key, "%q is not a tier; use one of deny, prompt, prompt-write, read, write%s", *c.v, didYouMean(*c.v, tierNames[:]))
			continue
		}
		if g := b.pol.Default; c.f.origin == OriginAgent && t > g {
			if g == Prompt || g == PromptWrite {
				b.fail(src.File, src.Line, src.Key, "an overlay cannot loosen the default from %q (%s) to %q; the global file asks before those accesses", g, b.pol.DefaultSource, t)
				continue
			}
			if b.pol.DefaultSource.File != "" {
				b.warn(src, "loosens the global default %q (%s) to %q for this agent", g, b.pol.DefaultSource, t)
			}
		}
		b.pol.Default, b.pol.DefaultSource = t, src
		if c.f.origin != OriginAgent {
			b.pol.GlobalDefault, b.pol.GlobalDefaultSource = t, src
		}
	}
	b.pol.Precedence, b.pol.PrecedenceSource = Specific, Source{Origin: OriginBuiltin, Key: layerDefault}
	for _, c := range []struct {
		v *string
		f field
	}{{gfp.Precedence, gf("precedence")}, {ofp.Precedence, of("precedence")}} {
		if c.v == nil {
			continue
		}
		src := c.f.source("")
		p, ok := parsePrecedence(*c.v)
		if !ok {
			b.fail(src.File, src.Line, src.Key, "%q is not a precedence mode; use \"specific\" or \"restrictive\"%s", *c.v, didYouMean(*c.v, []string{"specific", "restrictive"}))
			continue
		}
		if c.f.origin == OriginAgent && p == Specific && b.pol.Precedence == Restrictive {
			// Protections only accumulate: under "specific" a grant of the
			// overlay or the global file could win over a global prompt.
			b.fail(src.File, src.Line, src.Key, "an overlay cannot loosen precedence from \"restrictive\" (%s) to \"specific\"; remove it, or set precedence in the global file", b.pol.PrecedenceSource)
			continue
		}
		b.pol.Precedence, b.pol.PrecedenceSource = p, src
	}
	b.promptTimeout(global, overlay, ov, ovPrefix)

	// Built-ins first: they are on whatever the files say.
	b.addBuiltins()

	// Presets: replaced by the overlay.
	presetList, presetField := pick(gfp.Presets, gf("presets"), ofp.Presets, of("presets"))
	for i, name := range presetList {
		src := presetField.source(fmt.Sprintf("[%d]", i))
		entries, ok := presets[name]
		if !ok {
			b.fail(src.File, src.Line, src.Key, "%q is not a preset; the presets are %s%s", name, strings.Join(sortedKeys(presets), ", "), didYouMean(name, sortedKeys(presets)))
			continue
		}
		b.pol.Presets = append(b.pol.Presets, name)
		for _, e := range entries {
			b.addRule(e.pattern, KindTier, e.tier, e.note, Source{Origin: OriginPreset, Key: presetPrefix + name})
		}
	}

	// Tier lists. deny and prompt lists accumulate; the others are replaced.
	type list struct {
		name string
		tier Tier
		g, o *[]string
		acc  bool
	}
	lists := []list{
		{"deny_paths", Deny, gfp.DenyPaths, ofp.DenyPaths, true},
		{"prompt_paths", Prompt, gfp.PromptPaths, ofp.PromptPaths, true},
		{"prompt_write_paths", PromptWrite, gfp.PromptWritePaths, ofp.PromptWritePaths, true},
		{"read_paths", Read, gfp.ReadPaths, ofp.ReadPaths, false},
		{"write_paths", Write, gfp.WritePaths, ofp.WritePaths, false},
	}
	for _, l := range lists {
		if l.acc {
			b.addList(deref(l.g), gf(l.name), KindTier, l.tier)
			b.addList(deref(l.o), of(l.name), KindTier, l.tier)
			continue
		}
		vals, f := pick(l.g, gf(l.name), l.o, of(l.name))
		b.addList(vals, f, KindTier, l.tier)
	}
	if gfp.ReadPaths != nil && ofp.ReadPaths != nil {
		b.warnDroppedReadOnly(*gfp.ReadPaths, *ofp.ReadPaths, of("read_paths").source(""))
	}
	// exec_paths restrict: the global file's and the overlay's both apply
	// (a program runs only where both lists, when set, match).
	b.addList(deref(gfp.ExecPaths), gf("exec_paths"), KindExec, Read)
	b.addList(deref(ofp.ExecPaths), of("exec_paths"), KindExec, Read)

	// Exceptions: the global file only.
	if ofp.BuiltinExceptions != nil {
		src := of("builtin_exceptions").source("")
		b.fail(src.File, src.Line, src.Key, "only the global policy file may list exceptions to the built-in lists; move it there")
	}
	b.addExceptions(deref(gfp.BuiltinExceptions), gf("builtin_exceptions"))

	conns, connField := pick(gfp.ConnectPaths, gf("connect_paths"), ofp.ConnectPaths, of("connect_paths"))
	b.addConnects(conns, connField)

	b.env(global, overlay, ov, ovPrefix)
}

// warnDroppedReadOnly warns, at src (the overlay's read_paths), for each
// entry of global (the global file's read_paths) that the overlay's list
// does not repeat and that lies inside a write tree of the policy: the
// overlay's list replaces the global one, and with it goes the read-only
// part of that tree, which an operator reading "protections accumulate"
// may not expect.
func (b *builder) warnDroppedReadOnly(global, overlay []string, src Source) {
	for _, g := range global {
		if slices.Contains(overlay, g) {
			continue
		}
		expanded, err := b.expand(g)
		if err != nil {
			continue
		}
		globs, err := ParsePattern(expanded)
		if err != nil || len(globs) == 0 {
			continue
		}
		prefix, _ := globs[0].LiteralPrefix()
		if prefix == "" {
			continue
		}
		for _, r := range b.pol.Rules {
			if r.Kind != KindTier || r.Tier != Write {
				continue
			}
			if slices.ContainsFunc(r.Globs, func(w Glob) bool { ok, _ := doublestar.Match(w.Text, unescape(prefix)); return ok }) {
				b.warn(src, "replaces the global file's read_paths, which kept %q read-only inside %q (%s); list it here too to keep it", g, r.Pattern, r.Source)
				break
			}
		}
	}
}

// pick returns the overlay's list when it sets one, else the global one.
func pick(g *[]string, gf field, o *[]string, of field) ([]string, field) {
	if o != nil {
		return *o, of
	}
	return deref(g), gf
}

func deref(p *[]string) []string {
	if p == nil {
		return nil
	}
	return *p
}

func didYouMean(s string, candidates []string) string {
	if c := Suggest(s, candidates); c != "" {
		return fmt.Sprintf(" (did you mean %q?)", c)
	}
	return ""
}

func (b *builder) promptTimeout(global, overlay *document, ov *agentDoc, ovPrefix string) {
	b.pol.PromptTimeout = 5 * time.Minute
	b.pol.PromptTimeoutSource = Source{Origin: OriginBuiltin, Key: layerDefault}
	type layer struct {
		p      *promptDoc
		f      field
		origin Origin
	}
	layers := []layer{{global.tree.Prompt, field{global, OriginGlobal, "prompt.timeout"}, OriginGlobal}}
	if ov != nil {
		layers = append(layers, layer{ov.Prompt, field{overlay, OriginAgent, ovPrefix + "prompt.timeout"}, OriginAgent})
	}
	for _, l := range layers {
		if l.p == nil || l.p.Timeout == nil {
			continue
		}
		src := l.f.source("")
		d, err := time.ParseDuration(*l.p.Timeout)
		switch {
		case err != nil:
			b.fail(src.File, src.Line, src.Key, "%q is not a duration; write it like \"90s\" or \"5m\"", *l.p.Timeout)
		case d < time.Second || d > 24*time.Hour:
			b.fail(src.File, src.Line, src.Key, "%s is out of range; use between 1s and 24h", d)
		default:
			b.pol.PromptTimeout, b.pol.PromptTimeoutSource = d, src
		}
	}
}

func (b *builder) env(global, overlay *document, ov *agentDoc, ovPrefix string) {
	for _, d := range builtinEnvDrops {
		b.pol.Env.Drop = append(b.pol.Env.Drop, EnvRule{Pattern: d.pattern, Note: d.note, Source: Source{Origin: OriginBuiltin, Key: layerEnvDrop}})
	}
	ge := global.tree.Env
	if ge == nil {
		ge = &envDoc{}
	}
	var oe *envDoc
	if ov != nil {
		oe = ov.Env
	}
	if oe == nil {
		oe = &envDoc{}
	}
	add := func(vals []string, f field, exact bool) []EnvRule {
		var out []EnvRule
		for i, v := range vals {
			src := f.source(fmt.Sprintf("[%d]", i))
			switch {
			case !validEnvPattern(v):
				b.fail(src.File, src.Line, src.Key, "%q is not a variable name; use letters, digits and '_', with '*' or '?' as wildcards", v)
				continue
			case exact && strings.ContainsAny(v, "*?"):
				// A pattern in pass would undo the drops wholesale
				// (pass = ["*"]); secrets are passed one by one.
				b.fail(src.File, src.Line, src.Key, "%q is a pattern; pass names each variable exactly, so that it cannot undo the drops", v)
				continue
			}
			out = append(out, EnvRule{Pattern: v, Source: src})
		}
		return out
	}
	pass, passField := pick(ge.Pass, field{global, OriginGlobal, "env.pass"}, oe.Pass, field{overlay, OriginAgent, ovPrefix + "env.pass"})
	b.pol.Env.Pass = add(pass, passField, true)
	globalDrops := add(deref(ge.Drop), field{global, OriginGlobal, "env.drop"}, false)
	kept := b.pol.Env.Pass[:0]
	for _, p := range b.pol.Env.Pass {
		globallyPassed := slices.ContainsFunc(deref(ge.Pass), func(g string) bool { return g == p.Pattern })
		if p.Source.Origin == OriginAgent && !globallyPassed {
			if i := slices.IndexFunc(globalDrops, func(d EnvRule) bool { return envMatch(d.Pattern, p.Pattern) }); i >= 0 {
				b.fail(p.Source.File, p.Source.Line, p.Source.Key, "the global file drops %s (%s); an overlay cannot pass it back", p.Pattern, globalDrops[i].Source)
				continue
			}
		}
		for _, d := range builtinEnvDrops {
			if envMatch(d.pattern, p.Pattern) {
				b.warn(p.Source, "passes %s, which the built-in list drops (%s)", p.Pattern, d.note)
				break
			}
		}
		kept = append(kept, p)
	}
	b.pol.Env.Pass = kept
	b.pol.Env.Drop = append(b.pol.Env.Drop, globalDrops...)
	if oe.Drop != nil {
		b.pol.Env.Drop = append(b.pol.Env.Drop, add(*oe.Drop, field{overlay, OriginAgent, ovPrefix + "env.drop"}, false)...)
	}
}

func (b *builder) addList(vals []string, f field, kind Kind, tier Tier) {
	for i, v := range vals {
		b.addRule(v, kind, tier, "", f.source(fmt.Sprintf("[%d]", i)))
	}
}

// addRule expands and parses one pattern and appends the rule. For built-in
// rules whose expansion needs something absent (no workspace), it is
// skipped.
func (b *builder) addRule(pattern string, kind Kind, tier Tier, note string, src Source) *Rule {
	expanded, err := b.expand(pattern)
	if err != nil {
		if src.Origin == OriginBuiltin || src.Origin == OriginPreset {
			var nw noWorkspaceError
			if errors.As(err, &nw) {
				return nil
			}
			// A home or workspace the built-ins cannot be written for:
			// refuse rather than run without the protection.
			b.fail("", 0, src.Key, "cannot apply %q: %v", pattern, err)
			return nil
		}
		b.fail(src.File, src.Line, src.Key, "%v", err)
		return nil
	}
	globs, err := ParsePattern(expanded)
	if err != nil {
		var ge *GlobError
		if errors.As(err, &ge) {
			msg := ge.Msg
			if expanded != pattern {
				msg = fmt.Sprintf("%s (expanded to %q)", msg, expanded)
			}
			b.fail(src.File, src.Line, src.Key, "%q %s", pattern, msg)
		} else {
			b.fail(src.File, src.Line, src.Key, "%q: %v", pattern, err)
		}
		return nil
	}
	if src.Origin != OriginBuiltin && src.Origin != OriginPreset && kind == KindTier && tier <= PromptWrite {
		// A deny or prompt path that names a directory keeps what is
		// below it too ("~/private" as "~/private" and "~/private/**"):
		// what an operator who writes it means. A review read
		// <workspace>/vault/k.txt under deny_paths = ["<workspace>/vault"].
		for _, g := range globs {
			if _, tree, ok := g.LiteralPath(); ok && !tree {
				below, err := ParsePattern(strings.TrimSuffix(g.Text, "/") + "/**")
				if err == nil {
					globs = append(globs, below...)
				}
			}
		}
	}
	if src.Origin != OriginBuiltin && src.Origin != OriginPreset {
		for _, g := range globs {
			if pp := perProcessPrefix(g.Text); pp != "" {
				b.fail(src.File, src.Line, src.Key, "%q is under %s, which every process resolves to itself; a rule there would bind to the launcher, not the agent. Name the real path instead", pattern, pp)
				return nil
			}
		}
		if kind == KindTier && tier == Write {
			for _, g := range globs {
				if g.Text == "/**" || g.Text == "**/*" {
					b.warn(src, "%q grants write access to the whole filesystem", pattern)
				}
			}
		}
		if kind == KindTier && tier < Read {
			for _, g := range globs {
				// doublestar matches "/a/x*/**" against "/a/xy" and
				// "/a/x/f" but not against the directory "/a/x".
				dir, ok := strings.CutSuffix(g.Text, "*/**")
				if !ok || strings.HasSuffix(dir, "/") || strings.HasSuffix(dir, `\`) {
					continue
				}
				if HasMeta(dir) {
					b.warn(src, "%q does not match the directories %q names, only what is under them (that is how doublestar reads \"x*/**\"); add %q to cover the directories", pattern, strings.TrimSuffix(g.Text, "/**"), strings.TrimSuffix(g.Text, "/**"))
				} else {
					b.warn(src, "%q does not match %s itself, only what is under it (that is how doublestar reads \"x*/**\"); add %q to cover the directory", pattern, unescape(dir), unescape(dir))
				}
			}
		}
	}
	r := &Rule{Pattern: pattern, Expanded: expanded, Globs: globs, Kind: kind, Tier: tier, Note: note, Source: src}
	b.pol.Rules = append(b.pol.Rules, r)
	return r
}

func perProcessPrefix(glob string) string {
	for _, p := range perProcessPaths {
		if glob == p || strings.HasPrefix(glob, p+"/") {
			return p
		}
	}
	return ""
}

// xdgHomes are the directories of the built-in lists that an XDG base
// directory variable moves: git reads $XDG_CONFIG_HOME/git/config, systemd
// $XDG_CONFIG_HOME/systemd/user, when the variable is set.
var xdgHomes = []struct{ dir, variable string }{
	{"~/.config/", "XDG_CONFIG_HOME"},
	{"~/.local/share/", "XDG_DATA_HOME"},
}

// relocated returns pattern, a built-in pattern, at the place the XDG
// variable that moves its directory names ("${XDG_CONFIG_HOME}/git/**"),
// or "" when it names none: unset, relative (which the specification
// says to ignore) or the usual place.
func (b *builder) relocated(pattern string) string {
	if b.opts.LookupEnv == nil {
		return ""
	}
	for _, x := range xdgHomes {
		rest, ok := strings.CutPrefix(pattern, x.dir)
		if !ok {
			continue
		}
		v, ok := b.opts.LookupEnv(x.variable)
		if !ok || !path.IsAbs(v) || path.Clean(v) == path.Join(b.opts.Home, x.dir[2:]) {
			return ""
		}
		return "${" + x.variable + "}/" + rest
	}
	return ""
}

func (b *builder) addBuiltins() {
	// builtin adds a built-in rule, and its twin where an XDG variable
	// moves the rule's directory: the operator's programs, started with
	// the same environment, read there.
	builtin := func(pattern string, kind Kind, tier Tier, note, layer string) {
		for _, p := range []string{pattern, b.relocated(pattern)} {
			if p == "" {
				continue
			}
			if r := b.addRule(p, kind, tier, note, Source{Origin: OriginBuiltin, Key: layer}); r != nil {
				b.builtins = append(b.builtins, r)
			}
		}
	}
	deny := func(pattern, note, layer string) { builtin(pattern, KindTier, Deny, note, layer) }
	for _, e := range credentialDirs {
		deny(e.pattern, e.note, layerDenylist)
	}
	// Name patterns apply under the home directory and the workspace; a
	// workspace inside the home directory is already covered.
	roots := []string{"~/**/"}
	if ws := b.opts.Workspace; ws != "" && ws != b.opts.Home && !strings.HasPrefix(ws, strings.TrimSuffix(b.opts.Home, "/")+"/") {
		roots = append(roots, "<workspace>/**/")
	}
	for _, e := range credentialNames {
		for _, root := range roots {
			deny(root+e.pattern, e.note, layerDenylist)
		}
	}
	for _, e := range systemSecrets {
		deny(e.pattern, e.note, layerDenylist)
	}
	// The launcher's own files: literal paths, escaped.
	lp := b.opts.Launcher
	launcher := func(p string, tree bool, kind Kind, note string) {
		if p == "" {
			return
		}
		if !path.IsAbs(p) {
			b.fail("", 0, "launcher", "launcher path %q is not absolute", p)
			return
		}
		pat := EscapeLiteral(path.Clean(p))
		if tree {
			pat = strings.TrimSuffix(pat, "/") + "/**"
		}
		tier := Deny
		if kind == KindWriteProtect {
			tier = Read
		}
		r := &Rule{Pattern: pat, Expanded: pat, Kind: kind, Tier: tier, Note: note, Source: Source{Origin: OriginBuiltin, Key: layerLauncher}}
		globs, err := ParsePattern(pat)
		if err != nil {
			b.fail("", 0, "launcher", "launcher path %q cannot be protected: %v", p, err)
			return
		}
		r.Globs = globs
		b.pol.Rules = append(b.pol.Rules, r)
		b.launcher = append(b.launcher, globs...)
	}
	for _, f := range lp.ConfigFiles {
		launcher(f, strings.HasSuffix(f, "/"), KindTier, "the launcher's policy")
	}
	launcher(lp.ConfigDir, true, KindTier, "the launcher's configuration")
	launcher(lp.AgentsDir, true, KindTier, "the launcher's agent policies")
	launcher(lp.StateDir, true, KindTier, "the launcher's state")
	for _, d := range lp.OtherStateDirs {
		launcher(d, true, KindTier, "the launcher's state (another configuration's)")
	}
	launcher(lp.RuntimeDir, true, KindTier, "the launcher's approval sockets")
	launcher(lp.AuditLog, false, KindTier, "the launcher's audit log")
	launcher(lp.Executable, false, KindWriteProtect, "the launcher's own executable")

	wp := func(pattern, note string) { builtin(pattern, KindWriteProtect, Read, note, layerWriteProtect) }
	for _, e := range writeProtectHome {
		wp(e.pattern, e.note)
	}
	for _, e := range writeProtectNames {
		for _, root := range roots {
			wp(root+e.pattern, e.note)
		}
	}
}

func (b *builder) addExceptions(vals []string, f field) {
	for i, v := range vals {
		src := f.source(fmt.Sprintf("[%d]", i))
		expanded, err := b.expand(v)
		if err != nil {
			b.fail(src.File, src.Line, src.Key, "%v", err)
			continue
		}
		if HasMeta(expanded) || strings.HasPrefix(expanded, "**/") {
			b.fail(src.File, src.Line, src.Key, "%q is a pattern; an exception names one exact path", v)
			continue
		}
		if !path.IsAbs(expanded) || path.Clean(expanded) != expanded {
			b.fail(src.File, src.Line, src.Key, "%q is not a clean absolute path", v)
			continue
		}
		literal := unescape(expanded)
		for _, g := range b.launcher {
			if ok, _ := doublestar.Match(g.Text, literal); ok {
				b.fail(src.File, src.Line, src.Key, "%q is one of the launcher's own files; they cannot be excepted", v)
				literal = ""
				break
			}
		}
		if literal == "" {
			continue
		}
		var lifted []string
		for _, r := range b.builtins {
			for _, g := range r.Globs {
				if ok, _ := doublestar.Match(g.Text, literal); ok {
					lifted = append(lifted, r.Pattern)
					break
				}
			}
		}
		if len(lifted) == 0 {
			b.warn(src, "%q matches no built-in rule, so the exception does nothing", v)
		} else {
			b.warn(src, "lifts the built-in %s at %s", strings.Join(lifted, ", "), literal)
		}
		globs, err := ParsePattern(expanded)
		if err != nil {
			b.fail(src.File, src.Line, src.Key, "%q: %v", v, err)
			continue
		}
		b.pol.Rules = append(b.pol.Rules, &Rule{Pattern: v, Expanded: expanded, Globs: globs, Kind: KindException, Tier: Deny, Source: src})
	}
}

func (b *builder) addConnects(vals []string, f field) {
	for i, v := range vals {
		src := f.source(fmt.Sprintf("[%d]", i))
		if name, ok := strings.CutPrefix(v, "@"); ok {
			if name == "" || strings.ContainsRune(name, 0) || len(name) > 107 {
				b.fail(src.File, src.Line, src.Key, "%q is not an abstract socket name; write \"@name\" with 1 to 107 bytes", v)
				continue
			}
			b.pol.Connect = append(b.pol.Connect, Connect{Value: v, Abstract: true, Source: src})
			continue
		}
		expanded, err := b.expand(v)
		if err != nil {
			b.fail(src.File, src.Line, src.Key, "%v", err)
			continue
		}
		if HasMeta(expanded) || !path.IsAbs(expanded) || path.Clean(expanded) != expanded {
			b.fail(src.File, src.Line, src.Key, "%q is not an exact absolute socket path or an \"@abstract\" name", v)
			continue
		}
		b.pol.Connect = append(b.pol.Connect, Connect{Value: unescape(expanded), Source: src})
	}
}

// unescape removes the backslash escapes EscapeLiteral adds.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		out.WriteByte(s[i])
	}
	return out.String()
}

// joinable drops the trailing "/" of dir ("/" itself) when rest supplies one.
func joinable(dir, rest string) string {
	if strings.HasPrefix(rest, "/") {
		return strings.TrimSuffix(dir, "/")
	}
	return dir
}

// noWorkspaceError is the error of a pattern that needs a workspace when
// there is none; built-in patterns that need one are skipped instead.
type noWorkspaceError string

func (e noWorkspaceError) Error() string { return string(e) }

// expand replaces "~" and "<workspace>" at the start of a pattern and
// ${VAR} anywhere, escaping what they expand to, and rewrites a trailing
// "/" as "/**".
func (b *builder) expand(pattern string) (string, error) {
	var out strings.Builder
	rest := pattern
	switch {
	case rest == "~" || strings.HasPrefix(rest, "~/"):
		rest = rest[1:]
		out.WriteString(joinable(EscapeLiteral(b.opts.Home), rest))
	case strings.HasPrefix(rest, "~"):
		return "", fmt.Errorf("%q: \"~user\" is not supported; write the absolute path", pattern)
	case rest == "<workspace>" || strings.HasPrefix(rest, "<workspace>/"):
		if b.opts.Workspace == "" {
			return "", noWorkspaceError(fmt.Sprintf("%q uses <workspace>, but there is no workspace; pass --workspace DIR", pattern))
		}
		rest = rest[len("<workspace>"):]
		out.WriteString(joinable(EscapeLiteral(b.opts.Workspace), rest))
	}
	if strings.Contains(rest, "<workspace>") {
		return "", fmt.Errorf("%q: <workspace> may only begin a pattern (\"<workspace>/...\")", pattern)
	}
	for rest != "" {
		i := strings.IndexByte(rest, '$')
		if i < 0 {
			out.WriteString(rest)
			break
		}
		out.WriteString(rest[:i])
		rest = rest[i:]
		switch {
		case strings.HasPrefix(rest, "$$"):
			out.WriteString("$")
			rest = rest[2:]
		case strings.HasPrefix(rest, "${"):
			end := strings.IndexByte(rest, '}')
			if end < 0 {
				return "", fmt.Errorf("%q: \"${\" is never closed with \"}\"", pattern)
			}
			name := rest[2:end]
			if !validVarName(name) {
				return "", fmt.Errorf("%q: ${%s} is not a variable name", pattern, name)
			}
			val, ok := "", false
			if b.opts.LookupEnv != nil {
				val, ok = b.opts.LookupEnv(name)
			}
			if !ok {
				return "", fmt.Errorf("%q uses ${%s}, which is not set; set it or remove the rule", pattern, name)
			}
			if val == "" {
				return "", fmt.Errorf("%q uses ${%s}, which is empty; set it or remove the rule", pattern, name)
			}
			rest = rest[end+1:]
			if strings.HasPrefix(rest, "/") {
				val = strings.TrimRight(val, "/")
			}
			out.WriteString(EscapeLiteral(val))
		default:
			return "", fmt.Errorf("%q: a \"$\" must start ${VAR}; write \"$$\" for a literal \"$\"", pattern)
		}
	}
	s := out.String()
	if strings.HasSuffix(s, "/") && !strings.HasSuffix(s, `\/`) {
		s += "**"
	}
	return s, nil
}
