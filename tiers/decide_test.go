package tiers

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agent-launcher/agent-launcher/rules"
)

const (
	testHome = "/home/u"
	testWS   = "/home/u/proj"
)

// compileTOML loads doc as the global policy file /cfg/config.toml (plus any
// extra files) and compiles it.
func compileTOML(t testing.TB, doc string, opts ...func(*rules.Options)) *Matcher {
	t.Helper()
	files := map[string]string{"/cfg/config.toml": doc}
	o := rules.Options{Config: "/cfg/config.toml", Home: testHome, Workspace: testWS,
		ReadFile: func(name string) ([]byte, error) {
			if d, ok := files[name]; ok {
				return []byte(d), nil
			}
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}}
	for _, f := range opts {
		f(&o)
	}
	p, err := rules.Load(o)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	m, err := Compile(p)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return m
}

type decideCase struct {
	name        string
	path        string
	op          Op
	wantVerdict Verdict
	wantTier    Tier
	wantRule    string // pattern of the deciding rule; "" = do not check
}

func runDecideCases(t *testing.T, m *Matcher, cases []decideCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := m.Decide(c.path, c.op)
			if d.Verdict != c.wantVerdict || d.Tier != c.wantTier || (c.wantRule != "" && d.Rule.Pattern != c.wantRule) {
				t.Errorf("Decide(%q, %s) = %s/%s by %q, want %s/%s by %q\n  why: %s",
					c.path, c.op, d.Verdict, d.Tier, d.Rule.Pattern, c.wantVerdict, c.wantTier, c.wantRule, d.Why)
			}
			if ref := referenceDecide(m.Policy(), c.path, c.op); ref.verdict != d.Verdict || ref.tier != d.Tier {
				t.Errorf("reference disagrees: %s/%s", ref.verdict, ref.tier)
			}
		})
	}
}

func TestVerdictTable(t *testing.T) {
	m := compileTOML(t, `
[file_policy]
deny_paths = ["/t/deny/**"]
prompt_paths = ["/t/prompt/**"]
prompt_write_paths = ["/t/pw/**"]
read_paths = ["/t/read/**"]
write_paths = ["/t/write/**"]
`)
	want := map[string][numOps]Verdict{
		"deny":   {Denied, Denied, Denied, Denied, Denied, Denied},
		"prompt": {NeedsApproval, NeedsApproval, NeedsApproval, NeedsApproval, NeedsApproval, NeedsApproval},
		"pw":     {Allowed, NeedsApproval, NeedsApproval, NeedsApproval, Allowed, NeedsApproval},
		"read":   {Allowed, Denied, Denied, Denied, Allowed, Denied},
		"write":  {Allowed, Allowed, Allowed, Allowed, Allowed, Allowed},
		"none":   {Denied, Denied, Denied, Denied, Denied, Denied}, // the default tier is deny
	}
	for dir, verdicts := range want {
		for op := range numOps {
			path := "/t/" + dir + "/f"
			if got := m.Decide(path, op).Verdict; got != verdicts[op] {
				t.Errorf("Decide(%q, %s) = %s, want %s", path, op, got, verdicts[op])
			}
		}
	}
}

func TestPrecedenceSpecific(t *testing.T) {
	m := compileTOML(t, `
[file_policy]
default = "read"
deny_paths = ["/srv/**/private/**"]
read_paths = ["/srv/**", "/data/a/**", "/lit/x"]
write_paths = ["/srv/app/**", "/data/*/**", "/srv/app/logs/*", "/lit/*", "<workspace>/app/**"]
prompt_paths = ["/srv/app/logs/**"]
prompt_write_paths = ["/same/**"]
`, func(o *rules.Options) {})
	runDecideCases(t, m, []decideCase{
		{"more literal segments win", "/srv/app/main.go", OpWrite, Allowed, Write, "/srv/app/**"},
		{"shallower rule where the deeper does not match", "/srv/other", OpWrite, Denied, Read, "/srv/**"},
		{"literal segments beat a wildcard segment", "/data/a/f", OpWrite, Denied, Read, "/data/a/**"},
		{"wildcard segment applies elsewhere", "/data/b/f", OpWrite, Allowed, Write, "/data/*/**"},
		{"no ** beats ** at equal literal segments", "/srv/app/logs/x.log", OpWrite, Allowed, Write, "/srv/app/logs/*"},
		{"deeper ** rule below the single-segment one", "/srv/app/logs/d/x.log", OpRead, NeedsApproval, Prompt, "/srv/app/logs/**"},
		{"exact literal beats single star at the same length", "/lit/x", OpWrite, Denied, Read, "/lit/x"},
		{"deny wins although less specific", "/srv/app/private/key", OpRead, Denied, Deny, "/srv/**/private/**"},
		{"built-in deny wins over a specific write", testWS + "/app/.env", OpRead, Denied, Deny, "~/**/.env"},
		{"default tier where nothing matches", "/elsewhere", OpRead, Allowed, Read, "(default)"},
		{"prompt-write reads freely", "/same/f", OpRead, Allowed, PromptWrite, "/same/**"},
		{"prompt-write asks to write", "/same/f", OpWrite, NeedsApproval, PromptWrite, "/same/**"},
	})
}

func TestPrecedenceTie(t *testing.T) {
	// The same pattern in two tiers: a tie goes to the more restrictive.
	m := compileTOML(t, `
[file_policy]
read_paths = ["/x/**"]
write_paths = ["/x/**"]
prompt_write_paths = ["/y/**"]
prompt_paths = ["/y/**"]
`)
	runDecideCases(t, m, []decideCase{
		{"read beats write", "/x/f", OpWrite, Denied, Read, "/x/**"},
		{"prompt beats prompt-write", "/y/f", OpRead, NeedsApproval, Prompt, "/y/**"},
	})
	// Longer pattern wins at equal literal segments and no **.
	m = compileTOML(t, `
[file_policy]
read_paths = ["/x/*"]
write_paths = ["/x/*.go"]
`)
	runDecideCases(t, m, []decideCase{
		{"longer pattern wins", "/x/a.go", OpWrite, Allowed, Write, "/x/*.go"},
		{"shorter applies where the longer does not match", "/x/a.c", OpWrite, Denied, Read, "/x/*"},
	})
}

func TestPrecedenceRestrictive(t *testing.T) {
	m := compileTOML(t, `
[file_policy]
precedence = "restrictive"
read_paths = ["/srv/**"]
write_paths = ["/srv/app/**", "/tmp/**"]
prompt_write_paths = ["/srv/app/cfg/**"]
prompt_paths = ["/tmp/ask/**"]
`)
	runDecideCases(t, m, []decideCase{
		{"read beats a more specific write", "/srv/app/main.go", OpWrite, Denied, Read, "/srv/**"},
		{"prompt-write beats a less specific read", "/srv/app/cfg/x", OpWrite, NeedsApproval, PromptWrite, "/srv/app/cfg/**"},
		{"prompt beats write", "/tmp/ask/x", OpWrite, NeedsApproval, Prompt, "/tmp/ask/**"},
		{"write where alone", "/tmp/x", OpWrite, Allowed, Write, "/tmp/**"},
	})
	var unused []string
	for _, u := range m.Unused() {
		unused = append(unused, u.Rule.Pattern)
	}
	if got, want := strings.Join(unused, ","), "/srv/app/**"; got != want {
		t.Errorf("Unused() = %s, want %s", got, want)
	}
}

func TestUnusedSpecific(t *testing.T) {
	m := compileTOML(t, `
[file_policy]
read_paths = ["/srv/**", "/dup/**", "~/.ssh/config"]
write_paths = ["/srv/app/**", "/dup/**"]
deny_paths = ["/gone/**"]
prompt_paths = ["/gone/x/**"]
`)
	got := map[string]string{}
	for _, u := range m.Unused() {
		by := ""
		if u.By != nil {
			by = u.By.Pattern
		}
		got[u.Rule.Pattern] = by
	}
	want := map[string]string{
		"/dup/**":       "/dup/**",   // the write twin loses the tie
		"~/.ssh/config": "~/.ssh/**", // the built-in denylist always wins
		"/gone/x/**":    "/gone/**",  // deny always wins
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Unused() = %v, want %v", got, want)
	}
}

// TestUnusedConcurrent: Unused is found at its first call, not by
// Compile; callers that share a Matcher (Decide's are concurrent) get the
// one answer, and Overrides leaves out the same rules. A plain nil check
// in place of the sync.Once is reported by the race detector (go test
// -race); without it, it fails only when the appends interleave.
func TestUnusedConcurrent(t *testing.T) {
	doc := `
[file_policy]
read_paths = ["/srv/**", "/dup/**"]
write_paths = ["/dup/**"]
deny_paths = ["/gone/**"]
prompt_paths = ["/gone/x/**", "/srv/ask/**"]
`
	text := func(us []Unused) string {
		var b strings.Builder
		for _, u := range us {
			fmt.Fprintf(&b, "%s (by %s); ", u.Rule.Pattern, u.By.Pattern)
		}
		return b.String()
	}
	want := text(compileTOML(t, doc).Unused())
	m := compileTOML(t, doc)
	var wg sync.WaitGroup
	got := make([]string, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				m.Overrides()
			}
			got[i] = text(m.Unused())
		}()
	}
	wg.Wait()
	for i, g := range got {
		if g != want {
			t.Errorf("caller %d: Unused() = %s, want %s", i, g, want)
		}
	}
	if want != "/gone/x/** (by /gone/**); /dup/** (by /dup/**); " {
		t.Errorf("Unused() = %s, want /dup/** and /gone/x/**", want)
	}
}

func TestBuiltinDenylist(t *testing.T) {
	m := compileTOML(t, `
[file_policy]
presets = ["system"]
write_paths = ["~/**", "<workspace>/**", "/srv/**"]
`)
	runDecideCases(t, m, []decideCase{
		{"ssh dir", testHome + "/.ssh/id_ed25519", OpRead, Denied, Deny, "~/.ssh/**"},
		{"ssh dir itself", testHome + "/.ssh", OpRead, Denied, Deny, "~/.ssh/**"},
		{"aws", testHome + "/.aws/credentials", OpRead, Denied, Deny, "~/.aws/**"},
		{"key name anywhere under home", testHome + "/backup/old/id_rsa", OpRead, Denied, Deny, "~/**/id_rsa"},
		{"public key is fine", testHome + "/backup/old/id_rsa.pub", OpRead, Allowed, Write, "~/**"},
		{".env in the workspace", testWS + "/.env", OpRead, Denied, Deny, "~/**/.env"},
		{".env.local deep in the workspace", testWS + "/a/b/.env.local", OpWrite, Denied, Deny, "~/**/.env.*"},
		{".envrc is not .env", testWS + "/.envrc", OpRead, Allowed, Read, ""},
		{"pem under home", testHome + "/certs/server.pem", OpRead, Denied, Deny, "~/**/*.pem"},
		{"secrets.yml", testWS + "/deploy/secrets.yml", OpRead, Denied, Deny, "~/**/secrets.{yaml,yml,json}"},
		{"pem under /usr is a CA bundle", "/usr/share/ca-certificates/mozilla/x.pem", OpRead, Allowed, Read, "/usr/**"},
		{"pem under /srv is outside home and workspace", "/srv/tls/cert.pem", OpRead, Allowed, Write, "/srv/**"},
		{"shadow", "/etc/shadow", OpRead, Denied, Deny, "/etc/shadow"},
		{"passwd", "/etc/passwd", OpRead, Allowed, Read, "/etc/**"},
	})
}

func TestWorkspaceOutsideHome(t *testing.T) {
	m := compileTOML(t, `
[file_policy]
write_paths = ["<workspace>/**"]
`, func(o *rules.Options) { o.Workspace = "/srv/ws" })
	runDecideCases(t, m, []decideCase{
		{".env in a workspace outside home", "/srv/ws/.env", OpRead, Denied, Deny, "<workspace>/**/.env"},
		{"git hook in a workspace outside home", "/srv/ws/.git/hooks/pre-push", OpCreate, Denied, Read, "<workspace>/**/.git/hooks/**"},
		{"ordinary file", "/srv/ws/main.go", OpWrite, Allowed, Write, "<workspace>/**"},
	})
}

func TestWriteProtection(t *testing.T) {
	m := compileTOML(t, `
[file_policy]
write_paths = ["<workspace>/**", "~/**"]
prompt_write_paths = ["<workspace>/.git/config"]
`)
	runDecideCases(t, m, []decideCase{
		{"hook write", testWS + "/.git/hooks/pre-commit", OpWrite, Denied, Read, "~/**/.git/hooks/**"},
		{"hook create", testWS + "/.git/hooks/post-checkout", OpCreate, Denied, Read, "~/**/.git/hooks/**"},
		{"hook delete", testWS + "/.git/hooks/pre-commit", OpDelete, Denied, Read, "~/**/.git/hooks/**"},
		{"hook chmod", testWS + "/.git/hooks/pre-commit", OpMetadata, Denied, Read, "~/**/.git/hooks/**"},
		{"hook read", testWS + "/.git/hooks/pre-commit", OpRead, Allowed, Read, "~/**/.git/hooks/**"},
		{"prompt-write where the policy says so", testWS + "/.git/config", OpWrite, NeedsApproval, PromptWrite, "<workspace>/.git/config"},
		{"submodule config", testWS + "/.git/modules/lib/config", OpWrite, Denied, Read, "~/**/.git/modules/**/config"},
		{"git objects stay writable", testWS + "/.git/objects/ab/cdef", OpCreate, Allowed, Write, ""},
		{".envrc", testWS + "/sub/.envrc", OpWrite, Denied, Read, "~/**/.envrc"},
		{"bashrc", testHome + "/.bashrc", OpWrite, Denied, Read, "~/.bashrc"},
		{"systemd unit", testHome + "/.config/systemd/user/evil.service", OpCreate, Denied, Read, "~/.config/systemd/user/**"},
		{"vscode tasks", testWS + "/.vscode/tasks.json", OpWrite, Denied, Read, "~/**/.vscode/tasks.json"},
		{"vscode settings stay writable", testWS + "/.vscode/settings.json", OpWrite, Allowed, Write, ""},
	})
}

func TestLauncherProtection(t *testing.T) {
	m := compileTOML(t, `
[file_policy]
write_paths = ["/**"]
builtin_exceptions = ["~/.aws/config"]
`, func(o *rules.Options) {
		o.Launcher = rules.LauncherPaths{Executable: "/opt/al/bin/agent-launcher", ConfigFiles: []string{"/cfg/config.toml"},
			StateDir: testHome + "/.local/state/agent-launcher", RuntimeDir: "/run/user/1000/agent-launcher"}
	})
	runDecideCases(t, m, []decideCase{
		{"policy file", "/cfg/config.toml", OpRead, Denied, Deny, "/cfg/config.toml"},
		{"state", testHome + "/.local/state/agent-launcher/audit.log", OpWrite, Denied, Deny, ""},
		{"approval socket", "/run/user/1000/agent-launcher/s1/socket", OpRead, Denied, Deny, ""},
		{"executable read", "/opt/al/bin/agent-launcher", OpRead, Allowed, Read, "/opt/al/bin/agent-launcher"},
		{"executable replaced", "/opt/al/bin/agent-launcher", OpWrite, Denied, Read, "/opt/al/bin/agent-launcher"},
		{"sibling of the executable", "/opt/al/bin/other", OpWrite, Allowed, Write, "/**"},
	})
}

func TestExceptions(t *testing.T) {
	m := compileTOML(t, `
[file_policy]
read_paths = ["~/.aws/**", "<workspace>/**"]
write_paths = ["~/**"]
builtin_exceptions = ["~/.aws/config", "<workspace>/.env.example", "~/.bashrc"]
`)
	runDecideCases(t, m, []decideCase{
		{"excepted file follows the policy", testHome + "/.aws/config", OpRead, Allowed, Read, "~/.aws/**"},
		{"its sibling stays denied", testHome + "/.aws/credentials", OpRead, Denied, Deny, "~/.aws/**"},
		{"excepted name", testWS + "/.env.example", OpRead, Allowed, Read, "<workspace>/**"},
		{"same name elsewhere stays denied", testWS + "/sub/.env.example", OpRead, Denied, Deny, "~/**/.env.*"},
		{"exception lifts write protection", testHome + "/.bashrc", OpWrite, Allowed, Write, "~/**"},
		{"write protection elsewhere holds", testHome + "/.zshrc", OpWrite, Denied, Read, "~/.zshrc"},
	})
}

func TestExecPaths(t *testing.T) {
	m := compileTOML(t, `
[file_policy]
read_paths = ["/usr/**"]
write_paths = ["<workspace>/**"]
prompt_paths = ["/opt/ask/**"]
exec_paths = ["/usr/bin/*", "/opt/**"]
`)
	runDecideCases(t, m, []decideCase{
		{"listed", "/usr/bin/git", OpExec, Allowed, Read, "/usr/**"},
		{"readable but not listed", "/usr/lib/git-core/git-shell", OpExec, Denied, Read, "/usr/**"},
		{"copied into the workspace", testWS + "/mycat", OpExec, Denied, Write, "<workspace>/**"},
		{"still readable", testWS + "/mycat", OpRead, Allowed, Write, "<workspace>/**"},
		{"listed but prompt tier asks", "/opt/ask/tool", OpExec, NeedsApproval, Prompt, "/opt/ask/**"},
		{"listed but not readable", "/opt/other/tool", OpExec, Denied, Deny, "(default)"},
	})
}

func TestDecideRename(t *testing.T) {
	m := compileTOML(t, `
[file_policy]
write_paths = ["<workspace>/**"]
read_paths = ["/srv/**"]
prompt_write_paths = ["<workspace>/ask/**"]
`)
	for _, c := range []struct {
		src, dst string
		want     Verdict
	}{
		{testWS + "/a", testWS + "/b", Allowed},
		{testWS + "/a", "/srv/b", Denied},                 // create in a read tree
		{"/srv/a", testWS + "/b", Denied},                 // delete in a read tree
		{testWS + "/a", testWS + "/.git/hooks/x", Denied}, // into a write-protected place
		{testWS + "/a", testWS + "/ask/b", NeedsApproval},
		{testWS + "/ask/a", testWS + "/.env", Denied}, // deny beats prompt
		{testWS + "/.env", testWS + "/leak.txt", Denied},
	} {
		if got := m.DecideRename(c.src, c.dst).Verdict; got != c.want {
			t.Errorf("DecideRename(%q, %q) = %s, want %s", c.src, c.dst, got, c.want)
		}
	}
}

func TestNonCanonicalPathsDenied(t *testing.T) {
	m := compileTOML(t, `
[file_policy]
write_paths = ["/**"]
`)
	if d := m.Decide("/ok/path", OpWrite); d.Verdict != Allowed {
		t.Fatalf("positive control: %v", d)
	}
	for _, p := range []string{"", "relative", "./x", "/a//b", "/a/./b", "/a/../b", "/a/..", "/a/.", "/a/", "//", "/a\x00b"} {
		if d := m.Decide(p, OpRead); d.Verdict != Denied {
			t.Errorf("Decide(%q) = %v, want denied", p, d)
		}
		for op, d := range m.DecideAll(p) {
			if d.Verdict != Denied || d.Op != Op(op) {
				t.Errorf("DecideAll(%q)[%s] = %v, want denied", p, Op(op), d)
			}
		}
	}
	for _, p := range []string{"/", "/a/..b", "/a/.b", "/a/b.", "/.../x"} {
		if d := m.Decide(p, OpRead); d.Verdict != Allowed {
			t.Errorf("Decide(%q) = %v, want allowed (canonical)", p, d)
		}
	}
	if d := m.Decide("/x", Op(200)); d.Verdict != Denied {
		t.Errorf("an unknown op must be denied, got %v", d)
	}
}

func TestDecideDoesNotAllocate(t *testing.T) {
	m := compileTOML(t, `
[file_policy]
presets = ["system"]
write_paths = ["<workspace>/**"]
exec_paths = ["/usr/**"]
`)
	for _, c := range benchPaths {
		if n := testing.AllocsPerRun(100, func() { m.Decide(c.path, c.op) }); n != 0 {
			t.Errorf("Decide(%q, %s) allocates %v times", c.path, c.op, n)
		}
		if n := testing.AllocsPerRun(100, func() { m.DecideAll(c.path) }); n != 0 {
			t.Errorf("DecideAll(%q) allocates %v times", c.path, n)
		}
	}
}

// TestDecideConcurrentFirstUse: a rule's decisions are made by the first
// decision that needs them; decisions asked for the first time from many
// goroutines at once (go test -race watches the slots) are each what one
// goroutine asking alone gets, Why included.
func TestDecideConcurrentFirstUse(t *testing.T) {
	doc := `
[file_policy]
presets = ["system"]
write_paths = ["<workspace>/**"]
read_paths = ["<workspace>/vendor/**"]
prompt_paths = ["<workspace>/secrets/**"]
exec_paths = ["/usr/**"]
`
	alone := compileTOML(t, doc)
	var want [][NumOps]Decision
	for _, c := range benchPaths {
		want = append(want, alone.DecideAll(c.path))
	}
	for round := range 20 {
		m := compileTOML(t, doc)
		var wg sync.WaitGroup
		got := make([][][NumOps]Decision, 8)
		for g := range got {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, c := range benchPaths {
					got[g] = append(got[g], m.DecideAll(c.path))
				}
			}()
		}
		wg.Wait()
		for g := range got {
			for i, c := range benchPaths {
				if describe(got[g][i]) != describe(want[i]) {
					t.Fatalf("round %d, goroutine %d: DecideAll(%q) = %+v, want %+v", round, g, c.path, got[g][i], want[i])
				}
			}
		}
	}
}

// describe spells out decisions of two matchers of one policy, which do
// not share rule values, for comparison.
func describe(ds [NumOps]Decision) string {
	var b strings.Builder
	for _, d := range ds {
		fmt.Fprintf(&b, "%d %d %d %q", d.Op, d.Verdict, d.Tier, d.Why)
		if d.Rule != nil {
			fmt.Fprintf(&b, " %q %s", d.Rule.Pattern, d.Rule.Source)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func TestNaiveAgrees(t *testing.T) {
	for _, n := range []int{10, 1000} {
		m, err := Compile(benchPolicy(t, n))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range benchPaths {
			for op := range numOps {
				if got, want := m.Decide(c.path, op).Verdict, naiveDecide(m, c.path, op); got != want {
					t.Errorf("rules=%d Decide(%q, %s) = %s, naive %s", n, c.path, op, got, want)
				}
			}
		}
	}
}

func TestExplain(t *testing.T) {
	m := compileTOML(t, `
[file_policy]
write_paths = ["<workspace>/**"]
read_paths = ["~/**"]
`)
	e := m.Explain(testWS+"/.env", OpRead)
	if e.Decision.Verdict != Denied || len(e.Matches) != 3 {
		t.Fatalf("Explain = %+v", e)
	}
	var won []string
	for _, mt := range e.Matches {
		if mt.Won {
			won = append(won, mt.Rule.Pattern)
		}
	}
	if strings.Join(won, ",") != "~/**/.env" || e.Matches[0].Rule.Pattern != "~/**/.env" {
		t.Errorf("Explain winner = %v, first %q", won, e.Matches[0].Rule.Pattern)
	}
	if e := m.Explain("/a/../b", OpRead); e.Decision.Verdict != Denied || len(e.Matches) != 0 {
		t.Errorf("Explain of a non-canonical path = %+v", e)
	}
}

func TestAllowedPatterns(t *testing.T) {
	m := compileTOML(t, `
[file_policy]
write_paths = ["<workspace>/**"]
read_paths = ["/usr/**"]
prompt_paths = ["/ask/**"]
`)
	if got := strings.Join(m.AllowedPatterns(OpWrite), ","); got != testWS+"/**" {
		t.Errorf("AllowedPatterns(write) = %s", got)
	}
	if got := strings.Join(m.AllowedPatterns(OpRead), ","); got != "/usr/**,"+testWS+"/**" {
		t.Errorf("AllowedPatterns(read) = %s", got)
	}
}

func TestTooComplexNamesRule(t *testing.T) {
	p, err := rules.Load(rules.Options{Config: "/c.toml", Home: testHome, ReadFile: func(string) ([]byte, error) {
		return []byte(`[file_policy]
read_paths = ["/ok/**", "/a/*x??????????????????????"]`), nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Compile(p)
	if err == nil || !strings.Contains(err.Error(), `/c.toml:2: file_policy.read_paths[1]: "/a/*x??????????????????????"`) {
		t.Fatalf("Compile = %v, want ErrTooComplex naming the rule", err)
	}
}

func TestOverlayCannotOutrankGlobalPrompts(t *testing.T) {
	m := compileTOML(t, `
[file_policy]
write_paths = ["<workspace>/**"]
prompt_paths = ["<workspace>/secrets/**"]
prompt_write_paths = ["<workspace>/ci/**"]
[agents.a.file_policy]
write_paths = ["<workspace>/**", "<workspace>/secrets/*", "<workspace>/ci/x.yml", "<workspace>/open/**"]
prompt_paths = ["<workspace>/open/ask/**"]
read_paths = ["<workspace>/secrets/readme"]
`, func(o *rules.Options) { o.Agent = "a" })
	runDecideCases(t, m, []decideCase{
		{"overlay write under a global prompt", testWS + "/secrets/key", OpRead, NeedsApproval, Prompt, "<workspace>/secrets/**"},
		{"overlay read under a global prompt", testWS + "/secrets/readme", OpRead, NeedsApproval, Prompt, "<workspace>/secrets/**"},
		{"overlay write under a global prompt-write", testWS + "/ci/x.yml", OpWrite, NeedsApproval, PromptWrite, "<workspace>/ci/**"},
		{"overlay grants elsewhere", testWS + "/open/f", OpWrite, Allowed, Write, "<workspace>/open/**"},
		{"overlay prompts work", testWS + "/open/ask/f", OpRead, NeedsApproval, Prompt, "<workspace>/open/ask/**"},
	})
}

// TestCanonicalExhaustive compares canonical with the obvious reference on
// every string of up to seven characters over the alphabet that matters.
func TestCanonicalExhaustive(t *testing.T) {
	alphabet := []byte{'/', '.', 'a', 0}
	var buf []byte
	var walk func(depth int)
	n := 0
	walk = func(depth int) {
		s := string(buf)
		if canonical(s) != refCanonical(s) {
			t.Fatalf("canonical(%q) = %v, reference %v", s, canonical(s), refCanonical(s))
		}
		n++
		if depth == 7 {
			return
		}
		for _, c := range alphabet {
			buf = append(buf, c)
			walk(depth + 1)
			buf = buf[:len(buf)-1]
		}
	}
	walk(0)
	if n != 21845 {
		t.Fatalf("checked %d strings", n)
	}
}

const execAccumulatePolicy = `
[file_policy]
read_paths = ["/usr/**", "/opt/**"]
write_paths = ["<workspace>/**"]
exec_paths = ["/usr/**", "/opt/a/**"]
[agents.a.file_policy]
exec_paths = ["/**"]
[agents.b.file_policy]
exec_paths = ["/usr/bin/*"]
`

func TestExecPathsAccumulate(t *testing.T) {
	// The overlay's exec_paths cannot widen the global file's: both apply.
	m := compileTOML(t, execAccumulatePolicy, func(o *rules.Options) { o.Agent = "a" })
	runDecideCases(t, m, []decideCase{
		{"global list still applies", testWS + "/evil", OpExec, Denied, Write, "<workspace>/**"},
		{"in both lists", "/usr/bin/ls", OpExec, Allowed, Read, "/usr/**"},
	})
	m = compileTOML(t, execAccumulatePolicy, func(o *rules.Options) { o.Agent = "b" })
	runDecideCases(t, m, []decideCase{
		{"the overlay narrows", "/usr/lib/tool", OpExec, Denied, Read, "/usr/**"},
		{"in both lists", "/usr/bin/ls", OpExec, Allowed, Read, "/usr/**"},
		{"global list still applies", "/opt/a/tool", OpExec, Denied, Read, "/opt/**"},
	})
}

func TestClampKeepsStricterOverlayRules(t *testing.T) {
	m := compileTOML(t, `
[file_policy]
prompt_write_paths = ["<workspace>/ci/**"]
prompt_paths = ["<workspace>/secrets/**"]
write_paths = ["<workspace>/**"]
[agents.a.file_policy]
read_paths = ["<workspace>/ci/frozen/**", "<workspace>/secrets/public/**"]
write_paths = ["<workspace>/**"]
`, func(o *rules.Options) { o.Agent = "a" })
	runDecideCases(t, m, []decideCase{
		// read answers no op more permissively than prompt-write: it stands.
		{"overlay read under a global prompt-write", testWS + "/ci/frozen/x", OpWrite, Denied, Read, "<workspace>/ci/frozen/**"},
		// read lets reads through where prompt asks: the prompt stands.
		{"overlay read under a global prompt", testWS + "/secrets/public/x", OpRead, NeedsApproval, Prompt, "<workspace>/secrets/**"},
	})
}

func TestOverrides(t *testing.T) {
	const doc = `
[file_policy]
presets = ["system"]
prompt_paths = ["**/secrets/**"]
prompt_write_paths = ["<workspace>/deploy/**"]
read_paths = ["<workspace>/sr[c]/**"]
write_paths = ["<workspace>/**"]
[agents.b.file_policy]
write_paths = ["<workspace>/src/**"]
`
	overrides := func(m *Matcher) map[string]string {
		out := map[string]string{}
		for _, o := range m.Overrides() {
			out[o.Rule.Pattern] = o.By.Pattern
		}
		return out
	}
	global := overrides(compileTOML(t, doc))
	// Several grants outrank the prompt; the report names the policy
	// file's own (a review was pointed at /bin/** where <workspace>/** let
	// the agent read the secret), and the others besides. The more
	// specific prompt-write rule is not reported.
	if by, ok := global["**/secrets/**"]; !ok || len(global) != 1 || by != "<workspace>/**" {
		t.Errorf("global Overrides() = %v, want only **/secrets/** by <workspace>/**", global)
	}
	for _, o := range compileTOML(t, doc).Overrides() {
		if !slices.ContainsFunc(o.Also, func(r *rules.Rule) bool { return r.Pattern == "/etc/**" }) {
			t.Errorf("the other grants %v do not hold the preset's /etc/**", o.Also)
		}
	}
	// A preset grant outranks a policy prompt too (/etc/** at /etc/secrets/x).
	m := compileTOML(t, doc)
	if d := m.Decide("/etc/secrets/x", OpRead); d.Verdict != Allowed || d.Rule.Pattern != "/etc/**" {
		t.Fatalf("positive control: %v", d)
	}
	agent := overrides(compileTOML(t, doc, func(o *rules.Options) { o.Agent = "b" }))
	if _, ok := agent["**/secrets/**"]; !ok {
		t.Errorf("agent b Overrides() = %v, want **/secrets/**", agent)
	}
	if d := compileTOML(t, doc, func(o *rules.Options) { o.Agent = "b" }).Decide(testWS+"/src/secrets/k", OpWrite); d.Verdict != Allowed {
		t.Fatalf("positive control for agent b: %v", d)
	}
	// Nothing outranks a prompt that is the most specific rule.
	none := overrides(compileTOML(t, `
[file_policy]
prompt_paths = ["<workspace>/secrets/**"]
write_paths = ["<workspace>/**"]
`))
	if len(none) != 0 {
		t.Errorf("Overrides() = %v, want none", none)
	}
}

func TestTooManyAlternatives(t *testing.T) {
	// 200 patterns of 1024 alternatives each: over the limit, refused
	// before the automaton is built.
	var b strings.Builder
	b.WriteString("[file_policy]\nread_paths = [\n")
	for i := range 200 {
		fmt.Fprintf(&b, "  \"/r%d/{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}\",\n", i)
	}
	b.WriteString("]\n")
	p, err := rules.Load(rules.Options{Config: "/c.toml", Home: testHome, ReadFile: func(string) ([]byte, error) { return []byte(b.String()), nil }})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Compile(p)
	if !errors.Is(err, ErrTooComplex) || !strings.Contains(err.Error(), "glob alternatives after brace expansion") {
		t.Fatalf("Compile = %v, want ErrTooComplex about alternatives", err)
	}
}

func TestOverlayCannotOutrankGlobalPromptDefault(t *testing.T) {
	m := compileTOML(t, `
[file_policy]
default = "prompt"
read_paths = ["/usr/**"]
[agents.a.file_policy]
write_paths = ["/home/**", "/usr/local/**"]
`, func(o *rules.Options) { o.Agent = "a" })
	runDecideCases(t, m, []decideCase{
		{"overlay grant where the global default asks", "/home/x/y", OpWrite, NeedsApproval, Prompt, "(default)"},
		// A global rule that grants decides instead; the overlay may go further.
		{"overlay grant over a global grant", "/usr/local/bin/x", OpWrite, Allowed, Write, "/usr/local/**"},
	})
}

func TestManyAnywherePatterns(t *testing.T) {
	// Patterns that stay active side by side multiply automaton states; they
	// must split into more automata, not be refused.
	m := compileTOML(t, `
[file_policy]
write_paths = ["<workspace>/**", "/srv/**"]
deny_paths = ["**/.ssh/**", "**/.aws/**", "**/secrets/**", "**/.gnupg/**", "**/private/**", "**/.terraform/**", "**/.kube/**", "**/vault/**"]
prompt_paths = ["**/x/{a,b,c}/{a,b,c}/**"]
`, func(o *rules.Options) { o.Workspace = "/srv/ws" })
	if n := len(m.parts); n < 3 {
		t.Errorf("%d automata; expected the deep patterns to split", n)
	}
	runDecideCases(t, m, []decideCase{
		{"first", "/srv/ws/a/.ssh/k", OpRead, Denied, Deny, "**/.ssh/**"},
		{"last", "/srv/ws/b/vault/k", OpRead, Denied, Deny, "**/vault/**"},
		{"two of them", "/srv/ws/private/.aws/k", OpRead, Denied, Deny, ""},
		{"brace product", "/opt/x/b/c/k", OpRead, NeedsApproval, Prompt, "**/x/{a,b,c}/{a,b,c}/**"},
		{"none", "/srv/ws/src/main.go", OpWrite, Allowed, Write, "<workspace>/**"},
	})
	if n := testing.AllocsPerRun(50, func() { m.Decide("/srv/ws/a/.ssh/k", OpRead) }); n != 0 {
		t.Errorf("Decide allocates %v times with %d automata", n, len(m.parts))
	}
}

// TestDenyLiteralDirectory: a deny or prompt path without a pattern keeps
// what lies below it too; a grant of one names only itself.
func TestDenyLiteralDirectory(t *testing.T) {
	m := compileTOML(t, `[file_policy]
default = "deny"
write_paths = ["/srv/**", "/srv/data"]
deny_paths = ["/srv/vault", "/srv/w\\[1\\]/"]
prompt_paths = ["<workspace>/secrets"]
read_paths = ["/opt/tool"]
`)
	for _, c := range []struct {
		path string
		op   Op
		want Verdict
	}{
		{"/srv/vault", OpRead, Denied},
		{"/srv/vault/k.txt", OpRead, Denied},
		{"/srv/vault/deep/k.txt", OpWrite, Denied},
		{"/srv/w[1]/k", OpRead, Denied},
		{"/srv/vaultnotes", OpRead, Allowed},
		{testWS + "/secrets/db.txt", OpRead, NeedsApproval},
		{"/srv/data/x", OpWrite, Allowed}, // by /srv/**
		{"/opt/tool", OpRead, Allowed},
		{"/opt/tool/lib", OpRead, Denied}, // a grant names only itself
	} {
		if got := m.Decide(c.path, c.op).Verdict; got != c.want {
			t.Errorf("%s %s: %v, want %v", c.op, c.path, got, c.want)
		}
	}
}
