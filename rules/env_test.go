package rules

import (
	"path"
	"testing"
)

// envMatch is path.Match's answer for every pattern an [env] list may
// hold, and for any name: a variable's name is whatever the environment
// holds before its first '=', slashes and bytes that are no UTF-8
// included.
func TestEnvMatchIsPathMatch(t *testing.T) {
	patterns := []string{
		"", "*", "**", "?", "??", "A", "A*", "*A", "*A*", "A?C", "*_TOKEN", "*_SECRET*", "*PASSWORD*",
		"*_PASS", "A*B*C", "A**B", "*?", "?*", "*?*", "SSH_AUTH_SOCK", "a*b?c*", "*a*a*a*b",
		// Not valid in a policy, but envMatch is path.Match for them too.
		"[AB]*", "A\\*", "A/B", "*/*", "[", "\\",
	}
	names := []string{
		"", "A", "AB", "ABC", "AXC", "A/C", "/", "GITHUB_TOKEN", "github_token", "MY_SECRET_X", "X_PASS",
		"X_PASSWORD", "PASSWD", "A_B_C", "AAB", "aaab", "aaaab", "aab", "ab", "a/b", "x_TOKEN/y",
		"\xff", "A\xffC", "é", "AéC", "A\xc3C", "*", "?", "[", "SSH_AUTH_SOCK", "SSH_AUTH_SOCKS",
	}
	for _, p := range patterns {
		for _, n := range names {
			want, err := path.Match(p, n)
			want = want && err == nil
			if got := envMatch(p, n); got != want {
				t.Errorf("envMatch(%q, %q) = %v, path.Match says %v", p, n, got, want)
			}
		}
	}
}

func FuzzEnvMatch(f *testing.F) {
	f.Add("*_SECRET*", "MY_SECRET")
	f.Add("A?C", "A\xffC")
	f.Add("a*b?c*", "aXbYcZ")
	f.Fuzz(func(t *testing.T, p, n string) {
		want, err := path.Match(p, n)
		want = want && err == nil
		if got := envMatch(p, n); got != want {
			t.Fatalf("envMatch(%q, %q) = %v, path.Match says %v", p, n, got, want)
		}
	})
}

// BenchmarkEnvKeep decides a typical environment against the built-in
// drops, as run does at every start.
func BenchmarkEnvKeep(b *testing.B) {
	var e EnvPolicy
	for _, d := range builtinEnvDrops {
		e.Drop = append(e.Drop, EnvRule{Pattern: d.pattern, Source: Source{Origin: OriginBuiltin}})
	}
	names := []string{"HOME", "PATH", "SHELL", "TERM", "LANG", "LC_ALL", "USER", "LOGNAME", "PWD", "OLDPWD",
		"SHLVL", "EDITOR", "PAGER", "LS_COLORS", "GOPATH", "GOCACHE", "GOFLAGS", "XDG_CONFIG_HOME",
		"XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR", "SSH_AUTH_SOCK", "DISPLAY", "TMUX",
		"GITHUB_TOKEN", "npm_config_cache", "NODE_OPTIONS", "VIRTUAL_ENV", "HISTSIZE", "MAIL", "_",
		"COLORTERM", "TERM_PROGRAM", "http_proxy", "NO_PROXY", "CARGO_HOME", "RUSTUP_HOME", "JAVA_HOME",
		"MANPATH", "DEBIAN_FRONTEND"}
	b.ReportAllocs()
	for b.Loop() {
		for _, n := range names {
			e.Keep(n)
		}
	}
}
