package landlock

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agent-launcher/agent-launcher/rules"
	"github.com/agent-launcher/agent-launcher/tiers"
	"github.com/bmatcuk/doublestar/v4"
)

var update = flag.Bool("update", false, "rewrite golden files")

const (
	testHome = "/home/u"
	testWS   = "/home/u/proj"
)

func compile(t testing.TB, doc string) *tiers.Matcher {
	t.Helper()
	o := rules.Options{Config: "/cfg/config.toml", Home: testHome, Workspace: testWS,
		ReadFile: func(name string) ([]byte, error) {
			if name == "/cfg/config.toml" {
				return []byte(doc), nil
			}
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		},
		Launcher: rules.LauncherPaths{StateDir: "/home/u/.local/state/agent-launcher"},
	}
	if strings.Contains(doc, "[agents.a.") {
		o.Agent = "a"
	}
	p, err := rules.Load(o)
	if err != nil {
		t.Fatalf("load: %v\n%s", err, doc)
	}
	m, err := tiers.Compile(p)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return m
}

// system is the snapshot most tests plan against: a usrmerged system, a
// home with credentials, a workspace with a repository.
var system = []string{
	"/usr/bin/cat", "/usr/bin/sh", "/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/share/ca-certificates/cacert.pem",
	"/bin@", "/lib@", "/lib64@", "/sbin@",
	"/etc/passwd", "/etc/shadow", "/etc/ssl/certs/ca-certificates.crt", "/etc/ssl/cert.pem",
	"/dev/null", "/dev/tty", "/dev/zero", "/dev/shm/",
	"/proc/1/status", "/proc/self@",
	"/tmp/x", "/var/tmp/",
	"/home/u/.ssh/id_ed25519", "/home/u/.ssh/config", "/home/u/.bashrc", "/home/u/.gitconfig", "/home/u/notes/todo.txt",
	"/home/u/.local/state/agent-launcher/",
	testWS + "/main.go", testWS + "/README.md", testWS + "/.env", testWS + "/src/a.go", testWS + "/src/deep/b.go",
	testWS + "/src/deep/server.key", testWS + "/secrets/token", testWS + "/.git/config", testWS + "/.git/HEAD",
	testWS + "/.git/hooks/pre-commit.sample", testWS + "/.git/objects/ab/cdef", testWS + "/docs/", testWS + "/link@",
}

const basePolicy = `[file_policy]
default = "deny"
presets = ["system"]
write_paths = ["<workspace>/**", "/tmp/**", "/var/tmp/**", "/dev/shm/**"]
read_paths = ["~/.gitconfig"]
`

func TestPlanGolden(t *testing.T) {
	for _, c := range []struct{ name, policy string }{
		{"default", basePolicy},
		{"prompt-tree", basePolicy + `prompt_paths = ["<workspace>/secrets/**"]` + "\n"},
		{"read-only-workspace", strings.Replace(basePolicy, `"<workspace>/**", `, "", 1) + `read_paths = ["<workspace>/**", "~/.gitconfig"]` + "\n"},
		{"deny-single-file", basePolicy + `deny_paths = ["<workspace>/README.md"]` + "\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := compile(t, strings.Replace(c.policy, "read_paths = [\"~/.gitconfig\"]\nread_paths", "read_paths", 1))
			pl, err := NewPlan(m, 7, newMemFS(system...), Options{Canaries: []string{"/home/u/.local/state/agent-launcher"}})
			if err != nil {
				t.Fatal(err)
			}
			checkPlanSound(t, m, newMemFS(system...), pl)
			golden(t, c.name, pl.Format())
		})
	}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	file := filepath.Join("testdata", "golden", name+".txt")
	if *update {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if string(want) != got {
		t.Errorf("plan differs from %s (go test -update rewrites it):\n%s", file, got)
	}
}

// checkPlanSound is the planner's property: no existing path gets a right
// the policy does not give it, and neither does whatever replaces it from
// outside after launch (a new inode at the same name: only its ancestors'
// rules reach it), nor a new name below a directory that no
// anywhere-pattern ("**/") decides.
func checkPlanSound(t *testing.T, m *tiers.Matcher, fsys *memFS, pl *Plan) {
	t.Helper()
	anywhere := anywhereGlobs(m)
	for _, p := range fsys.all() {
		info, _ := fsys.Lstat(p)
		v := planVerdicts(m, p)
		relief, bound := pl.mountRelief(p)
		if got, allowed := pl.Grants(p, info.Type), rightsFor(v, info.Type, false)|relief; got&^allowed != 0 {
			t.Fatalf("%s (%s) gets %s, the policy allows only %s", p, info.Type, got, allowed)
		}
		if p == "/" {
			continue
		}
		// Replaced by an entry of the same type. (A directory replacing a
		// carved file may be listed: ReadDir stays on a parent whose
		// carve-outs are files, and lists names, never contents.) A
		// replaced mount point loses its mount: the session-end review
		// reports what the agent then changes (DESIGN.md section 7).
		inherited := pl.inherited(p)
		if got := inherited & applicable(info.Type, false) &^ rightsFor(v, info.Type, false); got != 0 && !bound {
			t.Fatalf("a replacement of %s from outside would get %s from its ancestors, beyond the policy", p, got)
		}
		// Nothing above a mount may be moved away with it.
		if _, isBind := pl.bindAt(p); isBind {
			for a := path.Dir(p); a != "/"; a = path.Dir(a) {
				if _, ok := pl.bindAt(a); !ok && pl.inherited(a)&(RemoveDir|RemoveFile|Refer) != 0 {
					t.Fatalf("%s is mounted over, but its ancestor %s may be moved away (%s) and is not pinned", p, a, pl.inherited(a))
				}
			}
		}
		if info.Type != TypeDir {
			continue
		}
		for _, name := range []string{"zz-new", ".env", "id_rsa", "x.pem", "config"} {
			q := join(p, name)
			if _, err := fsys.Lstat(q); err == nil || matchesAny(anywhere, q) {
				continue
			}
			allowed, exempt := rightsFor(planVerdicts(m, q), TypeOther, true), Access(0)
			if r, _ := pl.mountRelief(q); r != 0 {
				exempt = r
			} else if d := m.Decide(q, tiers.OpWrite).Rule; len(pl.Binds) > 0 && d != nil && d.Kind == rules.KindWriteProtect {
				// With mounts, the write protection holds where a path
				// exists at launch; one the agent creates is reported by
				// the session-end review (DESIGN.md section 3).
				exempt = mutations
			}
			if got := pl.Grants(q, TypeOther) &^ allowed &^ exempt; got != 0 {
				t.Fatalf("a new name %s would get %s beyond the policy", q, got)
			}
			if got := pl.inherited(q) &^ constraint(planVerdicts(m, q), TypeOther, true) &^ exempt; got != 0 {
				t.Fatalf("a new name %s would get %s beyond the policy", q, got)
			}
		}
	}
}

// bindAt returns the plan's mount at path, if any.
func (pl *Plan) bindAt(path string) (Bind, bool) {
	for _, b := range pl.Binds {
		if b.Path == path {
			return b, true
		}
	}
	return Bind{}, false
}

// mutations are the rights a read-only mount refuses whatever Landlock
// grants.
const mutations = WriteFile | Truncate | MakeRights | RemoveRights | Refer | IoctlDev

// mountRelief returns the rights the plan's mounts take away from path
// whatever the floor grants, and whether path is a mount point or lies
// below a read-only one: below a read-only mount every mutation (and
// execution where it is noexec); on a pinned directory the entry's own
// renames and removal, and the content rights its entries' own verdicts
// decide.
func (pl *Plan) mountRelief(path string) (Access, bool) {
	var a Access
	bound := false
	for _, b := range pl.Binds {
		switch {
		case b.ReadOnly && (path == b.Path || strings.HasPrefix(path, b.Path+"/")):
			a |= mutations
			if b.NoExec {
				a |= Execute
			}
			bound = true
		case !b.ReadOnly && path == b.Path:
			a |= MakeRights | RemoveRights | Refer
			bound = true
		}
	}
	return a, bound
}

func planVerdicts(m *tiers.Matcher, p string) verdicts { return decideAll(m, p) }

func anywhereGlobs(m *tiers.Matcher) []rules.Glob {
	var out []rules.Glob
	for _, r := range m.Policy().Rules {
		for _, g := range r.Globs {
			for _, tk := range g.Tokens {
				if tk.Kind == rules.TokDirs {
					out = append(out, g)
					break
				}
			}
		}
	}
	return out
}

func matchesAny(gs []rules.Glob, p string) bool {
	for _, g := range gs {
		if ok, _ := globMatch(g.Text, p); ok {
			return true
		}
	}
	return false
}

func TestPlanErrors(t *testing.T) {
	m := compile(t, basePolicy)
	// A protected file with a second name.
	fsys := newMemFS(append(append([]string(nil), system...), testWS+"/src/.env*2")...)
	_, err := NewPlan(m, 7, fsys, Options{})
	var hl *HardLinkError
	if !errors.As(err, &hl) || !errors.Is(err, ErrHardLink) || !strings.Contains(err.Error(), testWS+"/src/.env (deny tier) has 2 hard links") {
		t.Errorf("hard-linked .env: err = %v", err)
	}
	// A credential with a second name elsewhere (found by listing ~/.ssh).
	fsys = newMemFS(append(append([]string(nil), system...), "/home/u/.ssh/id_rsa*2")...)
	if _, err := NewPlan(m, 7, fsys, Options{}); !errors.Is(err, ErrHardLink) || !strings.Contains(err.Error(), "/home/u/.ssh/id_rsa") {
		t.Errorf("hard-linked key: err = %v", err)
	}
	// A write-protected file with a second name: the hook, the rc file.
	for _, f := range []string{testWS + "/.git/hooks/pre-commit*2", "/home/u/.bashrc*2", "/home/u/.ssh/keys/deep/id_work*2"} {
		fsys = newMemFS(append(append([]string(nil), system...), f)...)
		name := f[:strings.IndexByte(f, '*')]
		if _, err := NewPlan(m, 7, fsys, Options{}); !errors.Is(err, ErrHardLink) || !strings.Contains(err.Error(), name) {
			t.Errorf("hard-linked %s: err = %v", name, err)
		}
	}
	// The scan bound.
	if _, err := NewPlan(m, 7, newMemFS(system...), Options{MaxEntries: 3}); !errors.Is(err, ErrScanLimit) {
		t.Errorf("scan limit: err = %v", err)
	}
	// Nothing denied to test with.
	all := compile(t, "[file_policy]\ndefault = \"read\"\n")
	if _, err := NewPlan(all, 7, newMemFS("/usr/bin/cat"), Options{}); !errors.Is(err, ErrNoCanary) {
		t.Errorf("no canary: err = %v", err)
	}
}

func TestAccessString(t *testing.T) {
	for _, c := range []struct {
		a    Access
		want string
	}{
		{0, "none"},
		{ReadFile | ReadDir, "read_file|read_dir"},
		{HandledFS(7), "execute|write_file|read_file|read_dir|remove_*|make_*|refer|truncate|ioctl_dev"},
		{HandledFS(1), "execute|write_file|read_file|read_dir|remove_*|make_*"},
		{MakeReg | RemoveFile, "remove_file|make_reg"},
	} {
		if got := c.a.String(); got != c.want {
			t.Errorf("%#x: %q, want %q", uint64(c.a), got, c.want)
		}
	}
	if HandledFS(0) != 0 || Scopes(5) != 0 || Scopes(6) != ScopeAbstractUnixSocket|ScopeSignal {
		t.Error("ABI tables")
	}
	_ = fmt.Sprint
}

func globMatch(pattern, name string) (bool, error) { return doublestar.Match(pattern, name) }

// TestPlanLinks: a protected name that is a symlink to a file the policy
// protects less is reported, so that the caller protects the target.
func TestPlanLinks(t *testing.T) {
	m := compile(t, basePolicy)
	fsys := newMemFS(append(append([]string(nil), system...), "/home/u/.profile@", testWS+"/dotfiles/profile", testWS+"/.envrc@", "/etc/envrc")...)
	fsys.targets = map[string]string{"/home/u/.profile": testWS + "/dotfiles/profile", testWS + "/.envrc": "/etc/envrc", testWS + "/link": "/usr/bin/cat"}
	pl, err := NewPlan(m, 7, fsys, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// ~/.profile (write-protected) leads into the workspace (write): reported.
	// .envrc leads to /etc (read): no more than the name. link: not protected.
	if len(pl.Links) != 1 || pl.Links[0] != (Link{"/home/u/.profile", testWS + "/dotfiles/profile"}) {
		t.Errorf("links = %+v", pl.Links)
	}
}

// TestPlanScanRoots: anywhere-patterns are resolved only in the scan
// roots; elsewhere the plan says so.
func TestPlanScanRoots(t *testing.T) {
	m := compile(t, basePolicy+`deny_paths = ["**/.env"]`+"\n")
	fsys := newMemFS(append(append([]string(nil), system...), "/usr/share/x/.env")...)
	pl, err := NewPlan(m, 7, fsys, Options{ScanRoots: []string{testHome, testWS}})
	if err != nil {
		t.Fatal(err)
	}
	if got := pl.Grants("/usr/share/x/.env", TypeFile); got&ReadFile == 0 || len(pl.Warnings) == 0 || !strings.Contains(pl.Warnings[0], "/usr") {
		t.Errorf("outside the scan roots: grants %s, warnings %q", got, pl.Warnings)
	}
	if got := pl.Grants(testWS+"/.env", TypeFile); got != 0 {
		t.Errorf("inside: %s", got)
	}
	all, err := NewPlan(m, 7, fsys, Options{})
	if err != nil || all.Grants("/usr/share/x/.env", TypeFile) != 0 || len(all.Warnings) != 0 {
		t.Errorf("everywhere: %v %s %q", err, all.Grants("/usr/share/x/.env", TypeFile), all.Warnings)
	}
}

// TestPlanRootRuleUnderGrant: a scan root that a grant above reaches (a
// workspace under /tmp, which the default policy grants) gets a rule of
// its own carrying exactly what reaches it, so that the kernel's walk up
// from an access below it ends there instead of climbing on (across the
// bind that brings the workspace back into a private /tmp). It grants
// nothing more: every path has the grants of the plan in which the
// workspace is not a scan root, which has no rule there; and no other
// directory below the grant gets one.
func TestPlanRootRuleUnderGrant(t *testing.T) {
	const ws = "/tmp/proj/ws"
	m := compile(t, basePolicy)
	fsys := newMemFS(append(append([]string(nil), system...), ws+"/src/main.go", ws+"/sub/", "/tmp/proj/other")...)
	for _, binds := range []bool{false, true} {
		t.Run(fmt.Sprint("binds ", binds), func(t *testing.T) {
			plan := func(roots ...string) *Plan {
				opts := Options{ScanRoots: roots}
				var pl *Plan
				var err error
				if binds {
					pl, err = planBinds(m, 7, fsys, opts)
				} else {
					pl, err = NewPlan(m, 7, fsys, opts)
				}
				if err != nil {
					t.Fatal(err)
				}
				return pl
			}
			rule := func(pl *Plan, path string) *Rule {
				for i := range pl.Rules {
					if pl.Rules[i].Path == path {
						return &pl.Rules[i]
					}
				}
				return nil
			}
			pl := plan(testHome, ws)
			tmp, own := rule(pl, "/tmp"), rule(pl, ws)
			if tmp == nil {
				t.Fatalf("no rule on /tmp: %+v", pl.Rules)
			}
			if own == nil || !own.Dir || own.Access != tmp.Access {
				t.Fatalf("the workspace's rule: %+v, want a directory rule with /tmp's %s", own, tmp.Access)
			}
			base := plan(testHome)
			if r := rule(base, ws); r != nil {
				t.Fatalf("the workspace is no scan root, yet has a rule: %+v", r)
			}
			for _, c := range []struct {
				path string
				t    FileType
			}{{ws, TypeDir}, {ws + "/src", TypeDir}, {ws + "/src/main.go", TypeFile}, {ws + "/new", TypeFile}, {"/tmp/proj/other", TypeFile}, {"/tmp/x", TypeFile}, {testHome + "/.ssh/id_ed25519", TypeFile}, {"/etc/shadow", TypeFile}} {
				if got, want := pl.Grants(c.path, c.t), base.Grants(c.path, c.t); got != want {
					t.Errorf("%s: grants %s, without the workspace's rule %s", c.path, got, want)
				}
			}
			if got := pl.Grants(ws+"/src/main.go", TypeFile); got&WriteFile == 0 {
				t.Errorf("%s/src/main.go: grants %s, no writing", ws, got)
			}
			// Only the scan root: not the directories between it and the
			// grant, nor its siblings.
			for _, p := range []string{"/tmp/proj", "/tmp/proj/other", ws + "/src"} {
				if r := rule(pl, p); r != nil {
					t.Errorf("a rule on %s: %+v", p, r)
				}
			}
		})
	}
}

// TestPlanRootUnderGrant: a scan root (a workspace, the home directory)
// below a tree the policy grants whole where it does not search for the
// patterns that match names anywhere (/tmp, or /home under a broad rule):
// the grant above reaches every entry of the root, which no rule below
// can take back. A root holding an entry such a pattern protects is
// refused (ErrExposed), or planned so that the entry gets nothing; without
// one it plans, and the grant stands.
func TestPlanRootUnderGrant(t *testing.T) {
	const ws = "/tmp/proj/ws"
	for _, c := range []struct {
		name, policy, secret string
		roots                []string
	}{
		{"workspace under /tmp", basePolicy + `deny_paths = ["**/.env"]` + "\n", ws + "/sub/.env", []string{testHome, ws}},
		{"home under a broad read rule", strings.Replace(basePolicy, `read_paths = ["~/.gitconfig"]`, `read_paths = ["~/.gitconfig", "/home/**"]`, 1) + `deny_paths = ["**/.env"]` + "\n", testHome + "/other/.env", []string{testHome, testWS}},
	} {
		for _, binds := range []bool{false, true} {
			t.Run(fmt.Sprint(c.name, " binds ", binds), func(t *testing.T) {
				m := compile(t, c.policy)
				plan := func(fsys FS) (*Plan, error) {
					opts := Options{ScanRoots: c.roots}
					if binds {
						return planBinds(m, 7, fsys, opts)
					}
					return NewPlan(m, 7, fsys, opts)
				}
				clean := append(slices.Clone(system), ws+"/main.go", "/tmp/other/f", testHome+"/other/notes")
				pl, err := plan(newMemFS(clean...))
				if err != nil {
					t.Fatalf("control: no protected entry in the root: %v", err)
				}
				if g := pl.Grants(path.Dir(c.secret)+"/x", TypeFile); g&ReadFile == 0 {
					t.Fatalf("control: the grant does not reach the root: %s", g)
				}
				pl, err = plan(newMemFS(append(clean, c.secret)...))
				switch {
				case err == nil && pl.Grants(c.secret, TypeFile) != 0:
					t.Fatalf("planned, granting %s on %s", pl.Grants(c.secret, TypeFile), c.secret)
				case err != nil && (!errors.Is(err, ErrExposed) || !strings.Contains(err.Error(), c.secret) || !strings.Contains(err.Error(), `the rule "/tmp/**"`)):
					t.Errorf("error %q: want ErrExposed naming %s and the rule that grants /tmp", err, c.secret)
				}
			})
		}
	}
}
