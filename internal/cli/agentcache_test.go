package cli

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agent-launcher/agent-launcher/rules"
)

// TestGoldenCacheEnv: the precedence of the cache's variables, as the
// agent's environment and the start-up line show it: the policy's [env]
// first (a pass keeps the operator's value, a drop that names the variable
// leaves it unset), then the cache, which replaces the operator's value; a
// drop pattern does not touch the launcher's variables. Without a cache,
// the environment is the policy's.
//
//	go test ./internal/cli -run Golden -update
func TestGoldenCacheEnv(t *testing.T) {
	pass := func(names ...string) []rules.EnvRule {
		var out []rules.EnvRule
		for _, n := range names {
			out = append(out, rules.EnvRule{Pattern: n})
		}
		return out
	}
	cases := []struct {
		name    string
		why     string
		ep      rules.EnvPolicy
		environ []string
	}{
		{name: "nothing set", environ: []string{"PATH=/usr/bin"}},
		{name: "operator's values replaced", environ: []string{"GOCACHE=/home/op/.cache/go-build", "XDG_CACHE_HOME=/home/op/.cache"}},
		{name: "[env] pass keeps the operator's value", ep: rules.EnvPolicy{Pass: pass("GOCACHE", "PIP_CACHE_DIR")},
			environ: []string{"GOCACHE=/home/op/.cache/go-build"}},
		{name: "[env] drop by name leaves it unset", ep: rules.EnvPolicy{Drop: pass("GOMODCACHE", "npm_*")},
			environ: []string{"GOMODCACHE=/home/op/go/pkg/mod"}},
		{name: "[env] drop everything, pass some", ep: rules.EnvPolicy{Drop: pass("*"), Pass: pass("PATH")},
			environ: []string{"PATH=/usr/bin"}},
		{name: "no cache", why: "no private view", environ: []string{"GOCACHE=/home/op/.cache/go-build"}},
	}
	var b strings.Builder
	for _, tc := range cases {
		c := &agentCache{dir: "/home/op/.local/state/agent-launcher/caches/coder", target: "/var/tmp/agent-launcher-cache", why: tc.why}
		env := c.env(&tc.ep, tc.environ)
		fmt.Fprintf(&b, "== %s\nin:  %s\nout: %s\nline: %s\n", tc.name, strings.Join(tc.environ, " "), strings.Join(env, " "), strings.TrimPrefix(c.describe(), "; "))
		if tc.why != "" && !slices.Equal(env, tc.environ) {
			t.Errorf("%s: without a cache the environment changed: %q", tc.name, env)
		}
	}
	cacheGolden(t, "cache_env.golden", b.String())

	// The properties the golden file shows, asserted.
	c := &agentCache{target: "/var/tmp/agent-launcher-cache"}
	env := c.env(&rules.EnvPolicy{Pass: pass("GOCACHE")}, []string{"GOCACHE=/mine", "XDG_CACHE_HOME=/home/op/.cache"})
	for _, want := range []string{"GOCACHE=/mine", "XDG_CACHE_HOME=/var/tmp/agent-launcher-cache/xdg", "GOMODCACHE=/var/tmp/agent-launcher-cache/go-mod",
		"npm_config_cache=/var/tmp/agent-launcher-cache/npm", "PIP_CACHE_DIR=/var/tmp/agent-launcher-cache/pip"} {
		if !slices.Contains(env, want) {
			t.Errorf("want %s in %q", want, env)
		}
	}
	if len(env) != 5 {
		t.Errorf("a variable twice: %q", env)
	}
	if !slices.Equal(c.replaced, []string{"XDG_CACHE_HOME"}) || !slices.Equal(c.passed, []string{"GOCACHE"}) {
		t.Errorf("replaced %q, passed %q", c.replaced, c.passed)
	}
}

// TestAddAgentCache: with a private view and a policy that lets the agent
// write the cache's view path, the view binds caches/<agent> (made 0700,
// its mode restored) there and seals caches/; otherwise there is no cache,
// and the reason says why.
func TestAddAgentCache(t *testing.T) {
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sb := struct{ tmp, ws, state string }{tmp, filepath.Join(tmp, "home", "ws"), filepath.Join(tmp, "state")}
	if err := os.MkdirAll(sb.ws, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", filepath.Join(tmp, "home"))
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(tmp, "config"))
	t.Setenv("XDG_STATE_HOME", sb.state)
	t.Setenv("AGENT_LAUNCHER_CONFIG", "")
	t.Chdir(sb.ws)
	e, err := resolveEnv(&policyFlags{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.load("")
	if err != nil {
		t.Fatal(err)
	}
	varTmp, err := canonical("/var/tmp")
	if err != nil {
		t.Fatal(err)
	}
	caches := filepath.Join(sb.state, "agent-launcher", "caches")

	e.view = e.privateView(p.pol, sb.ws)
	if c := e.addAgentCache(p.m, "", false); c.why != "none made yet" || len(e.view.Caches) != 0 {
		t.Errorf("check, before any run: %+v, binds %+v", c, e.view.Caches)
	}
	c := e.addAgentCache(p.m, "", true)
	want := filepath.Join(caches, globalCacheName)
	if c.why != "" || c.dir != want || c.target != filepath.Join(varTmp, cacheViewName) {
		t.Fatalf("the default policy's cache: %+v", c)
	}
	if len(e.view.Caches) != 1 || e.view.Caches[0].Source != want || e.view.Caches[0].Seal != caches || e.view.Caches[0].Target != c.target {
		t.Errorf("binds: %+v", e.view.Caches)
	}
	for _, d := range []string{caches, want} {
		if st, err := os.Lstat(d); err != nil || st.Mode().Perm() != 0o700 || !st.IsDir() {
			t.Errorf("%s: %v, %v; want a directory, mode 0700", d, st.Mode(), err)
		}
	}
	// An agent that opened its cache up has it closed again.
	if err := os.Chmod(want, 0o777); err != nil {
		t.Fatal(err)
	}
	e.view = e.privateView(p.pol, sb.ws)
	if c := e.addAgentCache(p.m, "", true); c.why != "" {
		t.Fatal(c.why)
	}
	if st, _ := os.Lstat(want); st.Mode().Perm() != 0o700 {
		t.Errorf("mode %v not restored", st.Mode())
	}
	e.view = e.privateView(p.pol, sb.ws)
	if c := e.addAgentCache(p.m, "coder", true); c.dir != filepath.Join(caches, "coder") {
		t.Errorf("agent coder: %+v", c)
	}

	for _, tc := range []struct {
		name, agent, policy, wantWhy string
		noView                       bool
	}{
		{name: "no view", noView: true, wantWhy: "no private view"},
		{name: "not writable", policy: "[file_policy]\ndefault = \"deny\"\nwrite_paths = [\"<workspace>/**\"]\n", wantWhy: "the policy does not let the agent write"},
		{name: "denied", policy: "[file_policy]\ndefault = \"deny\"\nwrite_paths = [\"/var/tmp/**\"]\ndeny_paths = [\"/var/tmp/agent-launcher-cache/**\"]\n", wantWhy: "the policy does not let the agent write"},
		{name: "bad name", agent: "../x", wantWhy: "not a valid agent name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pp := p
			if tc.policy != "" {
				cfg := filepath.Join(sb.tmp, strings.ReplaceAll(tc.name, " ", "-")+".toml")
				if err := os.WriteFile(cfg, []byte(tc.policy), 0o644); err != nil {
					t.Fatal(err)
				}
				e2, err := resolveEnv(&policyFlags{config: cfg})
				if err != nil {
					t.Fatal(err)
				}
				if pp, err = e2.load(""); err != nil {
					t.Fatal(err)
				}
			}
			e.view = e.privateView(pp.pol, sb.ws)
			if tc.noView {
				e.view = nil
			}
			c := e.addAgentCache(pp.m, tc.agent, true)
			if !strings.Contains(c.why, tc.wantWhy) {
				t.Errorf("why %q, want %q", c.why, tc.wantWhy)
			}
			if e.view != nil && len(e.view.Caches) != 0 {
				t.Errorf("a bind without a cache: %+v", e.view.Caches)
			}
			if env := c.env(&pp.pol.Env, []string{"A=b"}); !slices.Equal(env, []string{"A=b"}) {
				t.Errorf("variables set without a cache: %q", env)
			}
			if !strings.HasPrefix(c.describe(), "; no private cache (") {
				t.Errorf("start-up line: %q", c.describe())
			}
		})
	}
	if _, err := os.Lstat(filepath.Join(caches, "..", "x")); err == nil {
		t.Errorf("a bad agent name made a directory")
	}
}

// cacheGolden compares got with testdata/golden/name; the external test
// package's -update flag rewrites it.
func cacheGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if f := flag.Lookup("update"); f != nil && f.Value.String() == "true" {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/cli -run Golden -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (run with -update to accept it):\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}
