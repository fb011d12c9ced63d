package rules

import (
	"errors"
	"io/fs"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

const (
	home = "/home/u"
	ws   = "/home/u/proj"
)

// memFS serves policy files from a map.
type memFS map[string]string

func (m memFS) readFile(name string) ([]byte, error) {
	if d, ok := m[name]; ok {
		return []byte(d), nil
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

func (m memFS) readDir(dir string) ([]fs.DirEntry, error) {
	var out []fs.DirEntry
	for name := range m {
		if rest, ok := strings.CutPrefix(name, dir+"/"); ok && !strings.Contains(rest, "/") {
			out = append(out, fakeEntry(rest))
		}
	}
	if out == nil {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: fs.ErrNotExist}
	}
	return out, nil
}

type fakeEntry string

func (e fakeEntry) Name() string               { return string(e) }
func (e fakeEntry) IsDir() bool                { return false }
func (e fakeEntry) Type() fs.FileMode          { return 0 }
func (e fakeEntry) Info() (fs.FileInfo, error) { return nil, errors.ErrUnsupported }

var testEnv = map[string]string{"DATA": "/srv/data", "SLASHED": "/srv/x/", "WEIRD": "/srv/a*b{c}", "EMPTY": ""}

func options(files memFS, agent string) Options {
	return Options{Config: "/cfg/config.toml", Agent: agent, Home: home, Workspace: ws,
		LookupEnv: func(k string) (string, bool) { v, ok := testEnv[k]; return v, ok },
		ReadFile:  files.readFile, ReadDir: files.readDir}
}

func load(t *testing.T, files memFS, agent string) *Policy {
	t.Helper()
	p, err := Load(options(files, agent))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return p
}

// userRules returns "kind tier pattern@key" for the rules from the files.
func userRules(p *Policy) []string {
	var out []string
	for _, r := range p.Rules {
		if r.Source.Origin == OriginGlobal || r.Source.Origin == OriginAgent {
			out = append(out, r.Kind.String()+" "+r.Tier.String()+" "+r.Pattern+"@"+r.Source.Key)
		}
	}
	return out
}

func TestValidationErrors(t *testing.T) {
	cases := []struct {
		name    string
		files   memFS
		agent   string
		opts    func(*Options)
		wantErr string // the whole error text
	}{
		{"unknown key suggests", memFS{"/cfg/config.toml": "[file_policy]\ndeny_path = []\n"}, "", nil,
			`/cfg/config.toml:2: file_policy.deny_path: unknown key; did you mean "deny_paths"?`},
		{"key case", memFS{"/cfg/config.toml": "[file_poliCY]\nreAd_pAths = [\"/0\"]\n"}, "", nil,
			`/cfg/config.toml:1: file_poliCY: keys are case-sensitive; write "file_policy"` + "\n" +
				`/cfg/config.toml:2: file_poliCY.reAd_pAths: keys are case-sensitive; write "read_paths"`},
		{"a second table in other case", memFS{"/cfg/config.toml": "[file_policy]\ndeny_paths = [\"/x/**\"]\n[FILE_POLICY]\ndefault = \"write\"\n[agents.a.File_Policy]\n"}, "", nil,
			`/cfg/config.toml:3: FILE_POLICY: keys are case-sensitive; write "file_policy"` + "\n" +
				`/cfg/config.toml:5: agents.a.File_Policy: keys are case-sensitive; write "file_policy"`},
		{"unknown table", memFS{"/cfg/config.toml": "[file_polcy]\ndefault = \"deny\"\n"}, "", nil,
			`/cfg/config.toml:1: file_polcy: unknown key; did you mean "file_policy"?`},
		{"unknown key far from any", memFS{"/cfg/config.toml": "[env]\nzzzzzzzz = 1\n"}, "", nil,
			`/cfg/config.toml:2: env.zzzzzzzz: unknown key; the keys here are pass, drop`},
		{"bad tier", memFS{"/cfg/config.toml": "[file_policy]\ndefault = \"raed\"\n"}, "", nil,
			`/cfg/config.toml:2: file_policy.default: "raed" is not a tier; use one of deny, prompt, prompt-write, read, write (did you mean "read"?)`},
		{"bad precedence", memFS{"/cfg/config.toml": "[file_policy]\nprecedence = \"specfic\"\n"}, "", nil,
			`/cfg/config.toml:2: file_policy.precedence: "specfic" is not a precedence mode; use "specific" or "restrictive" (did you mean "specific"?)`},
		{"wrong type", memFS{"/cfg/config.toml": "[file_policy]\ndefault = 3\n"}, "", nil,
			`/cfg/config.toml:2: file_policy.default: expected a string, found an integer`},
		{"string for a list", memFS{"/cfg/config.toml": "[file_policy]\nread_paths = \"/usr/**\"\n"}, "", nil,
			`/cfg/config.toml:2: file_policy.read_paths: expected a list of strings, found a string`},
		{"date for a string", memFS{"/cfg/config.toml": "[file_policy]\ndeny_paths = [1979-05-27]\n"}, "", nil,
			`/cfg/config.toml:2: file_policy.deny_paths: expected a string, found a local date`},
		{"table for a list", memFS{"/cfg/config.toml": "[file_policy]\ndeny_paths = {a = \"b\"}\n"}, "", nil,
			`/cfg/config.toml:2: file_policy.deny_paths: expected a list of strings, found an inline table`},
		{"array of tables", memFS{"/cfg/config.toml": "[[file_policy]]\n"}, "", nil,
			`/cfg/config.toml:1: file_policy: expected a table, found an array of tables ([[...]]); write [file_policy]`},
		{"duplicate key", memFS{"/cfg/config.toml": "[file_policy]\ndefault = \"deny\"\ndefault = \"read\"\n"}, "", nil,
			`/cfg/config.toml:3: file_policy.default: is set twice; keep one`},
		{"duplicate key in an overlay", memFS{"/cfg/config.toml": "[agents.c.file_policy]\nread_paths = []\nread_paths = []\n"}, "c", nil,
			`/cfg/config.toml:3: agents.c.file_policy.read_paths: is set twice; keep one`},
		{"not TOML", memFS{"/cfg/config.toml": "[file_policy\n"}, "", nil,
			`/cfg/config.toml:1: not valid TOML: expected ']' to close table name`},
		{"relative pattern", memFS{"/cfg/config.toml": "[file_policy]\nread_paths = [\n  \"/usr/**\",\n  \"src/**\",\n]\n"}, "", nil,
			`/cfg/config.toml:4: file_policy.read_paths[1]: "src/**" is relative; start it with "/", "~/", "<workspace>/" or "**/"`},
		{"malformed glob", memFS{"/cfg/config.toml": "[file_policy]\nwrite_paths = [\"/a/[b\"]\n"}, "", nil,
			`/cfg/config.toml:2: file_policy.write_paths[0]: "/a/[b" has a character class "[" that is never closed with "]"`},
		{"double star in a segment", memFS{"/cfg/config.toml": "[file_policy]\nwrite_paths = [\"/a/b**\"]\n"}, "", nil,
			`/cfg/config.toml:2: file_policy.write_paths[0]: "/a/b**" has "**" inside a segment; "**" must be a whole segment ("/**/"), use "*" within a segment`},
		{"negated class", memFS{"/cfg/config.toml": "[file_policy]\ndeny_paths = [\"/a/[!x]\"]\n"}, "", nil,
			`/cfg/config.toml:2: file_policy.deny_paths[0]: "/a/[!x]" has a negated class "[!", which is not supported (doublestar lets it match "/"); list the characters, or use {a,b}`},
		{"dotdot", memFS{"/cfg/config.toml": "[file_policy]\nread_paths = [\"~/../x\"]\n"}, "", nil,
			`/cfg/config.toml:2: file_policy.read_paths[0]: "~/../x" has a ".." segment; write the path without it (expanded to "/home/u/../x")`},
		{"workspace without workspace", memFS{"/cfg/config.toml": "[file_policy]\nwrite_paths = [\"<workspace>/**\"]\n"}, "",
			func(o *Options) { o.Workspace = "" },
			`/cfg/config.toml:2: file_policy.write_paths[0]: "<workspace>/**" uses <workspace>, but there is no workspace; pass --workspace DIR`},
		{"workspace in the middle", memFS{"/cfg/config.toml": "[file_policy]\nwrite_paths = [\"/x/<workspace>\"]\n"}, "", nil,
			`/cfg/config.toml:2: file_policy.write_paths[0]: "/x/<workspace>": <workspace> may only begin a pattern ("<workspace>/...")`},
		{"tilde user", memFS{"/cfg/config.toml": "[file_policy]\nread_paths = [\"~bob/x\"]\n"}, "", nil,
			`/cfg/config.toml:2: file_policy.read_paths[0]: "~bob/x": "~user" is not supported; write the absolute path`},
		{"unset variable", memFS{"/cfg/config.toml": "[file_policy]\nread_paths = [\"${NOPE}/x\"]\n"}, "", nil,
			`/cfg/config.toml:2: file_policy.read_paths[0]: "${NOPE}/x" uses ${NOPE}, which is not set; set it or remove the rule`},
		{"empty variable", memFS{"/cfg/config.toml": "[file_policy]\nread_paths = [\"${EMPTY}/x\"]\n"}, "", nil,
			`/cfg/config.toml:2: file_policy.read_paths[0]: "${EMPTY}/x" uses ${EMPTY}, which is empty; set it or remove the rule`},
		{"bare dollar", memFS{"/cfg/config.toml": "[file_policy]\nread_paths = [\"/a/$HOME\"]\n"}, "", nil,
			`/cfg/config.toml:2: file_policy.read_paths[0]: "/a/$HOME": a "$" must start ${VAR}; write "$$" for a literal "$"`},
		{"per-process path", memFS{"/cfg/config.toml": "[file_policy]\nread_paths = [\"/proc/self/**\"]\n"}, "", nil,
			`/cfg/config.toml:2: file_policy.read_paths[0]: "/proc/self/**" is under /proc/self, which every process resolves to itself; a rule there would bind to the launcher, not the agent. Name the real path instead`},
		{"unknown preset", memFS{"/cfg/config.toml": "[file_policy]\npresets = [\"sytem\"]\n"}, "", nil,
			`/cfg/config.toml:2: file_policy.presets[0]: "sytem" is not a preset; the presets are system (did you mean "system"?)`},
		{"bad env name", memFS{"/cfg/config.toml": "[env]\npass = [\"A-B\"]\n"}, "", nil,
			`/cfg/config.toml:2: env.pass[0]: "A-B" is not a variable name; use letters, digits and '_', with '*' or '?' as wildcards`},
		{"pass pattern", memFS{"/cfg/config.toml": "[agents.a.env]\npass = [\"*\"]\n"}, "a", nil,
			`/cfg/config.toml:2: agents.a.env.pass[0]: "*" is a pattern; pass names each variable exactly, so that it cannot undo the drops`},
		{"overlay loosens precedence", memFS{"/cfg/config.toml": "[file_policy]\nprecedence = \"restrictive\"\n[agents.a.file_policy]\nprecedence = \"specific\"\n"}, "a", nil,
			`/cfg/config.toml:4: agents.a.file_policy.precedence: an overlay cannot loosen precedence from "restrictive" (/cfg/config.toml:2: file_policy.precedence) to "specific"; remove it, or set precedence in the global file`},
		{"overlay passes a global drop", memFS{"/cfg/config.toml": "[env]\ndrop = [\"CORP_*\"]\n[agents.a.env]\npass = [\"CORP_VAULT\"]\n"}, "a", nil,
			`/cfg/config.toml:4: agents.a.env.pass[0]: the global file drops CORP_VAULT (/cfg/config.toml:2: env.drop[0]); an overlay cannot pass it back`},
		{"overlay loosens a prompt default", memFS{"/cfg/config.toml": "[file_policy]\ndefault = \"prompt\"\n[agents.a.file_policy]\ndefault = \"write\"\n"}, "a", nil,
			`/cfg/config.toml:4: agents.a.file_policy.default: an overlay cannot loosen the default from "prompt" (/cfg/config.toml:2: file_policy.default) to "write"; the global file asks before those accesses`},
		{"workspace not UTF-8", memFS{"/cfg/config.toml": ""}, "", func(o *Options) { o.Workspace = "/srv/w\xff[" },
			`workspace: the home directory or workspace path is not valid UTF-8; policy patterns cannot name it exactly, so choose a directory with a UTF-8 name`},
		{"bad timeout", memFS{"/cfg/config.toml": "[prompt]\ntimeout = \"5 minutes\"\n"}, "", nil,
			`/cfg/config.toml:2: prompt.timeout: "5 minutes" is not a duration; write it like "90s" or "5m"`},
		{"timeout out of range", memFS{"/cfg/config.toml": "[prompt]\ntimeout = \"48h\"\n"}, "", nil,
			`/cfg/config.toml:2: prompt.timeout: 48h0m0s is out of range; use between 1s and 24h`},
		{"connect glob", memFS{"/cfg/config.toml": "[file_policy]\nconnect_paths = [\"/run/*.sock\"]\n"}, "", nil,
			`/cfg/config.toml:2: file_policy.connect_paths[0]: "/run/*.sock" is not an exact absolute socket path or an "@abstract" name`},
		{"exception is a pattern", memFS{"/cfg/config.toml": "[file_policy]\nbuiltin_exceptions = [\"~/.aws/*\"]\n"}, "", nil,
			`/cfg/config.toml:2: file_policy.builtin_exceptions[0]: "~/.aws/*" is a pattern; an exception names one exact path`},
		{"exception of a launcher file", memFS{"/cfg/config.toml": "[file_policy]\nbuiltin_exceptions = [\"/cfg/config.toml\"]\n"}, "",
			func(o *Options) { o.Launcher.ConfigFiles = []string{"/cfg/config.toml"} },
			`/cfg/config.toml:2: file_policy.builtin_exceptions[0]: "/cfg/config.toml" is one of the launcher's own files; they cannot be excepted`},
		{"exception in an overlay", memFS{"/cfg/config.toml": "[agents.a.file_policy]\nbuiltin_exceptions = [\"~/.aws/config\"]\n"}, "a", nil,
			`/cfg/config.toml:2: agents.a.file_policy.builtin_exceptions: only the global policy file may list exceptions to the built-in lists; move it there`},
		{"unknown agent suggests", memFS{"/cfg/config.toml": "[agents.coder.file_policy]\n"}, "codr", nil,
			`agent "codr" is not defined in /cfg/config.toml or /cfg/agents/codr.toml; did you mean "coder"?`},
		{"agent defined twice", memFS{"/cfg/config.toml": "[agents.a.file_policy]\n", "/cfg/agents/a.toml": "[file_policy]\n"}, "a", nil,
			`/cfg/agents/a.toml: agents.a: agent "a" is also defined in /cfg/config.toml (line 1); keep one definition`},
		{"agent file defines agents", memFS{"/cfg/config.toml": "", "/cfg/agents/a.toml": "[agents.b.file_policy]\n"}, "a", nil,
			`/cfg/agents/a.toml:1: agents: an agent file holds one agent's overlay at its top level ([file_policy], [env], [prompt]); define other agents in their own files`},
		{"invalid agent name", memFS{"/cfg/config.toml": "[agents.\"a/b\".file_policy]\n"}, "", nil,
			`/cfg/config.toml:1: agents.a/b: not a valid agent name; use letters, digits, '.', '_' and '-'`},
		{"huge file", memFS{"/cfg/config.toml": "#" + strings.Repeat("x", 16<<20)}, "", nil,
			`/cfg/config.toml: is 16777217 bytes; a policy file may hold at most 16777216`},
		{"missing file", memFS{}, "", nil,
			`/cfg/config.toml: cannot read the policy file: file does not exist`},
		{"relative home", memFS{"/cfg/config.toml": ""}, "", func(o *Options) { o.Home = "home" },
			`home: the home directory "home" is not an absolute path; set HOME`},
		{"several problems, in line order", memFS{"/cfg/config.toml": "[file_policy]\nread_paths = [\"a\"]\ndefault = \"x\"\nbogus = 1\n"}, "", nil,
			`/cfg/config.toml:2: file_policy.read_paths[0]: "a" is relative; start it with "/", "~/", "<workspace>/" or "**/"` + "\n" +
				`/cfg/config.toml:3: file_policy.default: "x" is not a tier; use one of deny, prompt, prompt-write, read, write` + "\n" +
				`/cfg/config.toml:4: file_policy.bogus: unknown key; the keys here are default, precedence, presets, deny_paths, prompt_paths, prompt_write_paths, read_paths, write_paths, exec_paths, connect_paths, builtin_exceptions`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := options(c.files, c.agent)
			if c.opts != nil {
				c.opts(&o)
			}
			p, err := Load(o)
			if err == nil {
				t.Fatalf("Load succeeded: %+v", p)
			}
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("error is %T, want ErrorList: %v", err, err)
			}
			if got := err.Error(); got != c.wantErr {
				t.Errorf("error:\n got %s\nwant %s", got, c.wantErr)
			}
		})
	}
}

func TestExpansion(t *testing.T) {
	cases := []struct {
		pattern, want string
	}{
		{"~", home},
		{"~/", home + "/**"},
		{"~/.ssh/**", home + "/.ssh/**"},
		{"<workspace>", ws},
		{"<workspace>/", ws + "/**"},
		{"<workspace>/src/**", ws + "/src/**"},
		{"${DATA}/**", "/srv/data/**"},
		{"${SLASHED}/y", "/srv/x/y"}, // the separator is not doubled
		{"${WEIRD}/y", `/srv/a\*b\{c\}/y`},
		{"/a/$$b", "/a/$b"},
		{"/usr/", "/usr/**"},
		{"/", "/**"},
		{"**/.env", "**/.env"},
	}
	b := &builder{opts: options(nil, "")}
	for _, c := range cases {
		got, err := b.expand(c.pattern)
		if err != nil || got != c.want {
			t.Errorf("expand(%q) = %q, %v; want %q", c.pattern, got, err, c.want)
		}
	}
	// A value with glob characters matches literally.
	p := load(t, memFS{"/cfg/config.toml": "[file_policy]\nread_paths = [\"${WEIRD}/**\"]\n"}, "")
	r := p.Rules[len(p.Rules)-1]
	if r.Expanded != `/srv/a\*b\{c\}/**` || len(r.Globs) != 1 {
		t.Errorf("rule = %+v", r)
	}
}

func TestLayering(t *testing.T) {
	files := memFS{"/cfg/config.toml": `
[file_policy]
default = "read"
precedence = "specific"
presets = ["system"]
deny_paths = ["/g/deny/**"]
prompt_paths = ["/g/prompt/**"]
prompt_write_paths = ["/g/pw/**"]
read_paths = ["/g/read/**"]
write_paths = ["/g/write/**"]
exec_paths = ["/g/exec/**"]
connect_paths = ["@g"]
builtin_exceptions = ["~/.aws/config"]
[env]
pass = ["G_PASS"]
drop = ["G_DROP"]
[prompt]
timeout = "1m"

[agents.full.file_policy]
default = "deny"
precedence = "restrictive"
presets = []
deny_paths = []
prompt_paths = ["/a/prompt/**"]
read_paths = ["/a/read/**"]
write_paths = []
exec_paths = ["/a/exec/**"]
connect_paths = []
[agents.full.env]
pass = []
drop = ["A_DROP"]
[agents.full.prompt]
timeout = "30s"

[agents.empty]
`, "/cfg/agents/file.toml": `
[file_policy]
write_paths = ["<workspace>/**"]
deny_paths = ["/f/deny/**"]
`}
	global := load(t, files, "")
	if got, want := userRules(global), []string{
		"tier deny /g/deny/**@file_policy.deny_paths[0]",
		"tier prompt /g/prompt/**@file_policy.prompt_paths[0]",
		"tier prompt-write /g/pw/**@file_policy.prompt_write_paths[0]",
		"tier read /g/read/**@file_policy.read_paths[0]",
		"tier write /g/write/**@file_policy.write_paths[0]",
		"exec read /g/exec/**@file_policy.exec_paths[0]",
		"exception deny ~/.aws/config@file_policy.builtin_exceptions[0]",
	}; !slices.Equal(got, want) {
		t.Errorf("global rules:\n got %q\nwant %q", got, want)
	}

	full := load(t, files, "full")
	if got, want := userRules(full), []string{
		// Protections accumulate: the overlay's empty deny_paths keeps the global deny.
		"tier deny /g/deny/**@file_policy.deny_paths[0]",
		"tier prompt /g/prompt/**@file_policy.prompt_paths[0]",
		"tier prompt /a/prompt/**@agents.full.file_policy.prompt_paths[0]",
		"tier prompt-write /g/pw/**@file_policy.prompt_write_paths[0]",
		// Grants are replaced.
		"tier read /a/read/**@agents.full.file_policy.read_paths[0]",
		// exec_paths restrict: both lists apply.
		"exec read /g/exec/**@file_policy.exec_paths[0]",
		"exec read /a/exec/**@agents.full.file_policy.exec_paths[0]",
		"exception deny ~/.aws/config@file_policy.builtin_exceptions[0]",
	}; !slices.Equal(got, want) {
		t.Errorf("overlay rules:\n got %q\nwant %q", got, want)
	}
	if full.Default != Deny || full.DefaultSource.Key != "agents.full.file_policy.default" || full.Precedence != Restrictive ||
		len(full.Presets) != 0 || len(full.Connect) != 0 || full.PromptTimeout != 30*time.Second {
		t.Errorf("overlay scalars: default %s (%s), precedence %s, presets %v, connect %v, timeout %s",
			full.Default, full.DefaultSource, full.Precedence, full.Presets, full.Connect, full.PromptTimeout)
	}
	if len(full.Env.Pass) != 0 {
		t.Errorf("env pass not replaced: %v", full.Env.Pass)
	}
	var drops []string
	for _, d := range full.Env.Drop {
		if d.Source.Origin != OriginBuiltin {
			drops = append(drops, d.Pattern)
		}
	}
	if !slices.Equal(drops, []string{"G_DROP", "A_DROP"}) {
		t.Errorf("env drop = %v, want the global and the overlay's", drops)
	}

	empty := load(t, files, "empty")
	if !slices.Equal(userRules(empty), userRules(global)) || empty.Default != Read || empty.PromptTimeout != time.Minute {
		t.Errorf("an empty overlay must inherit everything: %q", userRules(empty))
	}

	file := load(t, files, "file")
	if got := userRules(file); !slices.Contains(got, "tier deny /f/deny/**@file_policy.deny_paths[0]") ||
		!slices.Contains(got, "tier deny /g/deny/**@file_policy.deny_paths[0]") ||
		!slices.Contains(got, "tier write <workspace>/**@file_policy.write_paths[0]") ||
		slices.Contains(got, "tier write /g/write/**@file_policy.write_paths[0]") {
		t.Errorf("agents/file.toml rules: %q", got)
	}
	if !slices.Equal(file.Files, []string{"/cfg/config.toml", "/cfg/agents/file.toml"}) {
		t.Errorf("files = %v", file.Files)
	}
	for _, r := range file.Rules {
		if r.Pattern == "/f/deny/**" && (r.Source.File != "/cfg/agents/file.toml" || r.Source.Line != 4 || r.Source.Origin != OriginAgent) {
			t.Errorf("source of an agent-file rule = %+v", r.Source)
		}
	}

	names, err := AgentNames(options(files, ""))
	if err != nil || !slices.Equal(names, []string{"empty", "file", "full"}) {
		t.Errorf("AgentNames = %v, %v", names, err)
	}
}

func TestBuiltinsAlwaysPresent(t *testing.T) {
	// An overlay that tries to drop everything still has every built-in.
	files := memFS{"/cfg/config.toml": `
[file_policy]
write_paths = ["~/**"]
[agents.a.file_policy]
deny_paths = []
presets = []
`}
	want := map[string]Kind{"~/.ssh/**": KindTier, "~/**/.env": KindTier, "/etc/shadow": KindTier,
		"~/.bashrc": KindWriteProtect, "~/**/.git/hooks/**": KindWriteProtect}
	for _, agent := range []string{"", "a"} {
		p := load(t, files, agent)
		found := map[string]bool{}
		for _, r := range p.Rules {
			if k, ok := want[r.Pattern]; ok && r.Kind == k && r.Source.Origin == OriginBuiltin {
				found[r.Pattern] = true
			}
		}
		if len(found) != len(want) {
			t.Errorf("agent %q: built-ins found %v, want all of %v", agent, found, want)
		}
	}
	// Name patterns cover the workspace through ~ when it is inside home,
	// and on their own when it is not.
	p := load(t, memFS{"/cfg/config.toml": ""}, "")
	if slices.ContainsFunc(p.Rules, func(r *Rule) bool { return strings.HasPrefix(r.Pattern, "<workspace>/") }) {
		t.Errorf("workspace under home: <workspace> name rules duplicated")
	}
	o := options(memFS{"/cfg/config.toml": ""}, "")
	o.Workspace = "/srv/ws"
	p, err := Load(o)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(p.Rules, func(r *Rule) bool { return r.Pattern == "<workspace>/**/.env" && r.Expanded == "/srv/ws/**/.env" }) {
		t.Errorf("workspace outside home: no <workspace>/**/.env rule")
	}
}

// TestSystemSecret: exactly the built-in system secrets, not a user's
// deny of the same path, another built-in deny, or a write protection.
func TestSystemSecret(t *testing.T) {
	p := load(t, memFS{"/cfg/config.toml": `
[file_policy]
deny_paths = ["/etc/shadow", "/etc/app/secret"]
`}, "")
	var got []string
	for _, r := range p.Rules {
		if r.SystemSecret() {
			got = append(got, r.Pattern)
		}
	}
	var want []string
	for _, e := range systemSecrets {
		want = append(want, e.pattern)
	}
	if !slices.Equal(got, want) {
		t.Errorf("system secrets %q, want %q", got, want)
	}
	if !slices.ContainsFunc(p.Rules, func(r *Rule) bool { return r.Pattern == "/etc/shadow" && r.Source.Origin != OriginBuiltin }) {
		t.Errorf("control: the user's own deny of /etc/shadow is missing")
	}
}

func TestWarnings(t *testing.T) {
	p := load(t, memFS{"/cfg/config.toml": `
[file_policy]
write_paths = ["/**"]
builtin_exceptions = ["~/.aws/config", "/nothing/here"]
deny_paths = ["/srv/vault*/**", "/srv/*/**", "/srv/a/*b*/**"]
`}, "")
	var got []string
	for _, w := range p.Warnings {
		got = append(got, w.String())
	}
	want := []string{
		`/cfg/config.toml:3: file_policy.write_paths[0]: "/**" grants write access to the whole filesystem`,
		`/cfg/config.toml:4: file_policy.builtin_exceptions[0]: lifts the built-in ~/.aws/** at /home/u/.aws/config`,
		`/cfg/config.toml:4: file_policy.builtin_exceptions[1]: "/nothing/here" matches no built-in rule, so the exception does nothing`,
		`/cfg/config.toml:5: file_policy.deny_paths[0]: "/srv/vault*/**" does not match /srv/vault itself, only what is under it (that is how doublestar reads "x*/**"); add "/srv/vault" to cover the directory`,
		`/cfg/config.toml:5: file_policy.deny_paths[2]: "/srv/a/*b*/**" does not match the directories "/srv/a/*b*" names, only what is under them (that is how doublestar reads "x*/**"); add "/srv/a/*b*" to cover the directories`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("warnings:\n got %q\nwant %q", got, want)
	}
}

func TestEnvPolicy(t *testing.T) {
	p := load(t, memFS{"/cfg/config.toml": `
[env]
pass = ["ANTHROPIC_API_KEY", "MY_TOKEN"]
drop = ["CORP_*"]
`}, "")
	if len(p.Warnings) != 2 || p.Warnings[0].Msg != "passes ANTHROPIC_API_KEY, which the built-in list drops (looks like a secret)" {
		t.Errorf("warnings = %v, want one per pass of a built-in drop", p.Warnings)
	}
	for _, c := range []struct {
		name string
		keep bool
	}{
		{"PATH", true}, {"HOME", true}, {"SSH_AUTH_SOCK", false}, {"DBUS_SESSION_BUS_ADDRESS", false},
		{"DISPLAY", false}, {"WAYLAND_DISPLAY", false}, {"TMUX", false}, {"DOCKER_HOST", false},
		{"XDG_RUNTIME_DIR", false}, {"GITHUB_TOKEN", false}, {"AWS_SECRET_ACCESS_KEY", false},
		{"DB_PASSWORD", false}, {"OPENAI_API_KEY", false}, {"ANTHROPIC_API_KEY", true}, {"MY_TOKEN", true},
		{"CORP_PROXY", false},
	} {
		if got, _ := p.Env.Keep(c.name); got != c.keep {
			t.Errorf("Keep(%s) = %v, want %v", c.name, got, c.keep)
		}
	}
}

func TestEmbeddedDefault(t *testing.T) {
	o := options(nil, "")
	o.Config = ""
	p, err := Load(o)
	if err != nil {
		t.Fatal(err)
	}
	if p.Default != Deny || p.Files[0] != EmbeddedName || !slices.Equal(p.Presets, []string{"system"}) ||
		p.DefaultSource.File != EmbeddedName || p.DefaultSource.Line == 0 {
		t.Errorf("default policy: %+v", p)
	}
	var writes []string
	for _, r := range p.Rules {
		if r.Kind == KindTier && r.Tier == Write && r.Source.Origin == OriginGlobal {
			writes = append(writes, r.Pattern)
		}
	}
	if !slices.Equal(writes, []string{"<workspace>/**", "/tmp/**", "/var/tmp/**", "/dev/shm/**"}) {
		t.Errorf("default writes = %v", writes)
	}
	if string(DefaultPolicy()) != string(defaultPolicy) {
		t.Error("DefaultPolicy differs from the embedded text")
	}
}

// TestPure asserts that the importable packages stay pure: no cgo and no
// golang.org/x/sys/unix (DESIGN.md section 4).
func TestPure(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/agent-launcher/agent-launcher/rules", "github.com/agent-launcher/agent-launcher/tiers").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/agent-launcher/agent-launcher/rules") {
		t.Fatalf("go list output does not list rules itself: %q", deps)
	}
	for _, d := range deps {
		if d == "C" || d == "runtime/cgo" || strings.HasPrefix(d, "golang.org/x/sys/unix") {
			t.Errorf("rules/tiers depend on %s", d)
		}
	}
}

func TestRootHome(t *testing.T) {
	// A home or workspace of "/" (containers) still gets every built-in,
	// without doubled separators.
	o := options(memFS{"/cfg/config.toml": "[file_policy]\nread_paths = [\"~/x\", \"<workspace>/y\"]\n"}, "")
	o.Home, o.Workspace = "/", "/"
	p, err := Load(o)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"/.ssh/**": false, "/**/.env": false, "/x": false, "/y": false}
	for _, r := range p.Rules {
		if _, ok := want[r.Expanded]; ok {
			want[r.Expanded] = true
		}
	}
	for k, found := range want {
		if !found {
			t.Errorf("no rule expanded to %s", k)
		}
	}
}

func TestEnvLayering(t *testing.T) {
	files := memFS{"/cfg/config.toml": `
[env]
pass = ["ANTHROPIC_API_KEY", "GH_TOKEN"]
drop = ["*_TOKEN"]
[agents.a.env]
drop = ["ANTHROPIC_API_KEY"]
[agents.b.env]
pass = ["GH_TOKEN"]
`}
	a := load(t, files, "a") // inherits the global pass list
	b := load(t, files, "b")
	for _, c := range []struct {
		p    *Policy
		name string
		keep bool
	}{
		{a, "ANTHROPIC_API_KEY", false}, // the overlay's drop beats the global pass
		{a, "GH_TOKEN", true},
		{b, "GH_TOKEN", true}, // the overlay may repeat what the global file passes
		{b, "OTHER_TOKEN", false},
		{b, "PATH", true},
	} {
		if got, _ := c.p.Env.Keep(c.name); got != c.keep {
			t.Errorf("agent %s: Keep(%s) = %v, want %v", c.p.Agent, c.name, got, c.keep)
		}
	}
}

// TestNameChecks checks ValidAgentName and validVarName, loops that
// replaced regexps on the start-up path, against those regexps.
func TestNameChecks(t *testing.T) {
	agentRe := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	varRe := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	names := []string{"", "a", "A9", "9a", "_x", "x_", ".x", "-x", "x.y-z_1", "coder", "x y", "x/y", "é", "xé",
		"_", "__", "a\x00", strings.Repeat("a", 64), strings.Repeat("a", 65), "Z" + strings.Repeat("_", 63), "PATH", "1PATH"}
	for c := 0; c < 256; c++ {
		names = append(names, string(rune(c)), "a"+string([]byte{byte(c)}), string([]byte{byte(c)})+"a")
	}
	for _, n := range names {
		if got, want := ValidAgentName(n), agentRe.MatchString(n); got != want {
			t.Errorf("ValidAgentName(%q) = %v, the regexp says %v", n, got, want)
		}
		if got, want := validVarName(n), varRe.MatchString(n); got != want {
			t.Errorf("validVarName(%q) = %v, the regexp says %v", n, got, want)
		}
	}
}

// TestBuiltinsFollowXDG: a built-in rule under ~/.config or ~/.local/share
// gets a twin where XDG_CONFIG_HOME or XDG_DATA_HOME moves the directory,
// escaped as a literal; none when the variable is unset, relative or the
// usual place.
func TestBuiltinsFollowXDG(t *testing.T) {
	expanded := func(env map[string]string) map[string]bool {
		opts := options(memFS{"/cfg/config.toml": "[file_policy]\n"}, "")
		opts.LookupEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
		p, err := Load(opts)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, r := range p.Rules {
			if r.Source.Origin == OriginBuiltin {
				out[r.Kind.String()+" "+r.Expanded] = true
			}
		}
		return out
	}
	base := expanded(nil)
	moved := expanded(map[string]string{"XDG_CONFIG_HOME": "/dot/c*nf/", "XDG_DATA_HOME": "/dot/share"})
	for _, want := range []string{
		`write-protect /dot/c\*nf/systemd/user/**`,
		`write-protect /dot/c\*nf/git/**`,
		`tier /dot/c\*nf/gh/**`,
		`write-protect /dot/share/applications/**`,
		`write-protect /dot/share/systemd/user/**`,
		`tier /dot/share/keyrings/**`,
		`write-protect ` + home + `/.config/git/**`,
	} {
		if !moved[want] {
			t.Errorf("with the XDG variables set, no built-in rule %q", want)
		}
	}
	under := 0
	for _, e := range slices.Concat(credentialDirs, writeProtectHome) {
		if strings.HasPrefix(e.pattern, "~/.config/") || strings.HasPrefix(e.pattern, "~/.local/share/") {
			under++
		}
	}
	if under < 15 || len(moved)-len(base) != under {
		t.Errorf("the XDG variables added %d rules, want %d (every built-in under ~/.config or ~/.local/share once)", len(moved)-len(base), under)
	}
	for _, env := range []map[string]string{
		{"XDG_CONFIG_HOME": "dot/config", "XDG_DATA_HOME": "relative"},
		{"XDG_CONFIG_HOME": home + "/.config/", "XDG_DATA_HOME": home + "/.local/share"},
	} {
		if got := expanded(env); len(got) != len(base) {
			t.Errorf("%v: %d built-in rules, want %d", env, len(got), len(base))
		}
	}
}

// TestOverlayReadPathsDropWarning: an overlay's read_paths replaces the
// global file's; a global entry that kept part of a write tree read-only
// and is gone from the overlay's list is named in a warning (a review
// found the overlay silently made <workspace>/vendor writable). One the
// overlay lists again, or that narrowed no write tree, is not.
func TestOverlayReadPathsDropWarning(t *testing.T) {
	p := load(t, memFS{"/cfg/config.toml": `
[file_policy]
write_paths = ["<workspace>/**"]
read_paths = ["<workspace>/vendor/**", "<workspace>/third_party/**", "/opt/**"]
[agents.coder.file_policy]
read_paths = ["~/notes/**", "<workspace>/third_party/**"]
`}, "coder")
	var got []string
	for _, w := range p.Warnings {
		got = append(got, w.String())
	}
	want := []string{`/cfg/config.toml:6: agents.coder.file_policy.read_paths: replaces the global file's read_paths, which kept "<workspace>/vendor/**" read-only inside "<workspace>/**" (/cfg/config.toml:3: file_policy.write_paths[0]); list it here too to keep it`}
	if !slices.Equal(got, want) {
		t.Errorf("warnings:\n got %q\nwant %q", got, want)
	}
}

// TestByteOrderMark: a policy file that starts with a UTF-8 byte order
// mark loads as without it, and an error in it keeps its line.
func TestByteOrderMark(t *testing.T) {
	p := load(t, memFS{"/cfg/config.toml": "\xef\xbb\xbf[file_policy]\ndeny_paths = [\"/srv/x\"]\n"}, "")
	if got := userRules(p); !slices.Equal(got, []string{"tier deny /srv/x@file_policy.deny_paths[0]"}) {
		t.Errorf("rules %q", got)
	}
	_, err := Load(options(memFS{"/cfg/config.toml": "\xef\xbb\xbf[file_policy]\ndeny_path = []\n"}, ""))
	if err == nil || !strings.Contains(err.Error(), "/cfg/config.toml:2: file_policy.deny_path: unknown key") {
		t.Errorf("error %v", err)
	}
}

// TestEnvDropsMoreSecrets: the built-in drops catch the secrets a review
// passed through (database passwords, npm's auth token, a Kerberos cache,
// a private key, a lower-case token), whatever their case; ordinary
// variables still pass.
func TestEnvDropsMoreSecrets(t *testing.T) {
	p := load(t, memFS{"/cfg/config.toml": "[file_policy]\n"}, "")
	for _, c := range []struct {
		name string
		keep bool
	}{
		{"PGPASSWORD", false}, {"MYSQL_PWD", false}, {"DB_PASS", false}, {"JWT_PRIVATE_KEY", false},
		{"npm_config__authToken", false}, {"KRB5CCNAME", false}, {"github_token", false},
		{"GOOGLE_APPLICATION_CREDENTIALS", false}, {"Openai_Api_Key", false},
		{"PWD", true}, {"OLDPWD", true}, {"PATH", true}, {"PASSWORD_STORE_DIR", false}, {"COMPASS_MODE", true},
		{"HOME", true}, {"LANG", true}, {"GOPATH", true},
	} {
		if got, _ := p.Env.Keep(c.name); got != c.keep {
			t.Errorf("Keep(%s) = %v, want %v", c.name, got, c.keep)
		}
	}
}

// TestLiteralPath: a glob is a literal path, a literal tree ("/x/**"), or
// neither; the path comes back unescaped.
func TestLiteralPath(t *testing.T) {
	for _, c := range []struct {
		glob, path string
		tree, ok   bool
	}{
		{"/a/b", "/a/b", false, true},
		{"/a/b/**", "/a/b", true, true},
		{`/a/w\[1\]`, "/a/w[1]", false, true},
		{"/a/*.pem", "", false, false},
		{"/a/**/x", "", false, false},
		{"**/.env", "", false, false},
	} {
		gs, err := ParsePattern(c.glob)
		if err != nil || len(gs) != 1 {
			t.Fatalf("%s: %v", c.glob, err)
		}
		path, tree, ok := gs[0].LiteralPath()
		if ok != c.ok || ok && (path != c.path || tree != c.tree) {
			t.Errorf("%s: (%q, %v, %v), want (%q, %v, %v)", c.glob, path, tree, ok, c.path, c.tree, c.ok)
		}
	}
}
