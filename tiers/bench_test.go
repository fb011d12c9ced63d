package tiers

import (
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/agent-launcher/agent-launcher/rules"
)

// benchPolicy builds a policy with n user rules on top of the embedded
// default's built-ins and presets: project trees to write, tool trees to
// read, secrets carved out of projects, lock files that ask before writes.
func benchPolicy(tb testing.TB, n int) *rules.Policy {
	tb.Helper()
	var w, r, d, pw []string
	for i := range n {
		switch i % 4 {
		case 0:
			w = append(w, fmt.Sprintf("%q", fmt.Sprintf("~/work/p%d/**", i)))
		case 1:
			r = append(r, fmt.Sprintf("%q", fmt.Sprintf("/opt/tool%d/**", i)))
		case 2:
			d = append(d, fmt.Sprintf("%q", fmt.Sprintf("~/work/p%d/secrets/**", i-2)))
		case 3:
			pw = append(pw, fmt.Sprintf("%q", fmt.Sprintf("~/work/p%d/*.lock", i-3)))
		}
	}
	doc := fmt.Sprintf(`[file_policy]
default = "deny"
presets = ["system"]
write_paths = ["<workspace>/**", "/tmp/**", %s]
read_paths = [%s]
deny_paths = [%s]
prompt_write_paths = [%s]
`, strings.Join(w, ", "), strings.Join(r, ", "), strings.Join(d, ", "), strings.Join(pw, ", "))
	p, err := rules.Load(rules.Options{Config: "/bench/config.toml", Home: "/home/u", Workspace: "/home/u/work/p0",
		ReadFile: func(name string) ([]byte, error) {
			if name == "/bench/config.toml" {
				return []byte(doc), nil
			}
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}})
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

var benchPaths = []struct {
	path string
	op   Op
}{
	{"/home/u/work/p0/internal/cli/check.go", OpRead},
	{"/home/u/work/p0/internal/cli/check.go", OpWrite},
	{"/usr/lib/x86_64-linux-gnu/libc.so.6", OpRead},
	{"/home/u/work/p4/secrets/key.txt", OpRead},
	{"/home/u/.ssh/id_ed25519", OpRead},
	{"/home/u/work/p0/.git/hooks/pre-commit", OpCreate},
	{"/opt/tool1/bin/tool", OpExec},
	{"/home/u/work/p8/go.sum.lock", OpWrite},
	{"/etc/passwd", OpRead},
	{"/home/u/work/p0/node_modules/.pnpm/react@18.2.0/node_modules/react/index.js", OpRead},
	{"/tmp/go-build123456/b001/importcfg", OpWrite},
	{"/home/u/Documents/taxes.pdf", OpRead},
}

func BenchmarkDecide(b *testing.B) {
	for _, n := range []int{10, 100, 1000, 10000} {
		p := benchPolicy(b, n)
		m, err := Compile(p)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("rules=%d/dfa", n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				c := benchPaths[i%len(benchPaths)]
				_ = m.Decide(c.path, c.op)
				i++
			}
		})
		b.Run(fmt.Sprintf("rules=%d/naive-doublestar", n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				c := benchPaths[i%len(benchPaths)]
				_ = naiveDecide(m, c.path, c.op)
				i++
			}
		})
	}
}

// naiveDecide is the baseline: every alternative through doublestar.Match,
// the winner chosen by the same ranks. TestNaiveAgrees checks that it
// agrees with Decide, so that the benchmark compares equal work.
func naiveDecide(m *Matcher, path string, op Op) Verdict {
	best, wp, bestNX, wpNX, except, execOK := -1, -1, -1, -1, false, false
	for i, a := range m.alts {
		if ok, _ := doublestar.Match(a.glob.Text, path); !ok {
			continue
		}
		switch a.rule.Kind {
		case rules.KindException:
			except = true
		case rules.KindTier:
			if best < 0 { // ids are in precedence order: the first match wins
				best = i
			}
			if !a.rule.Exceptable() && bestNX < 0 {
				bestNX = i
			}
		case rules.KindWriteProtect:
			wp = i
			if !a.rule.Exceptable() {
				wpNX = i
			}
		case rules.KindExec:
			execOK = true
		}
	}
	if except {
		best, wp = bestNX, wpNX
	}
	tier := m.pol.Default
	if best >= 0 {
		tier = m.alts[best].rule.Tier
	}
	if tier == Write && wp >= 0 {
		tier = Read
	}
	v := verdicts[tier][op]
	if op == OpExec && m.execRestricted && v != Denied && !execOK {
		v = Denied
	}
	return v
}

func BenchmarkCompile(b *testing.B) {
	for _, n := range []int{10, 100, 1000, 10000} {
		p := benchPolicy(b, n)
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			var m *Matcher
			for b.Loop() {
				var err error
				if m, err = Compile(p); err != nil {
					b.Fatal(err)
				}
			}
			st := m.Stats()
			b.ReportMetric(float64(st.States), "states")
			b.ReportMetric(float64(st.TableBytes)/1024, "table-KiB")
		})
	}
}

// BenchmarkCompileDefault compiles the embedded default policy, as every
// launch does, fresh and from the automata cache.
func BenchmarkCompileDefault(b *testing.B) {
	p, err := rules.Load(rules.Options{Home: testHome, Workspace: testWS,
		Launcher: rules.LauncherPaths{StateDir: testHome + "/.local/state/agent-launcher", ConfigDir: testHome + "/.config/agent-launcher"}})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("fresh", func(b *testing.B) {
		for b.Loop() {
			if _, err := Compile(p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		c := &mapCache{m: map[string][]byte{}}
		if _, err := CompileCached(p, c); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := CompileCached(p, c); err != nil {
				b.Fatal(err)
			}
		}
	})
}
