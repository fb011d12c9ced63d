package landlock

import (
	"errors"
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/agent-launcher/agent-launcher/tiers"
)

func names(ents []DirEntry) []string {
	var out []string
	for _, e := range ents {
		out = append(out, e.Name)
	}
	return out
}

// TestViewFS: the tree as the agent sees it in the private view.
func TestViewFS(t *testing.T) {
	base := newMemFS("/tmp/other/secret", "/tmp/.X11-unix/X0", "/tmp/u/home/proj/a.go", "/tmp/u/home/.ssh/key",
		"/tmp/u/sibling", "/run/user/1000/bus", "/run/docker.sock", "/run/keep", "/proc/1/", "/usr/bin/sh", "/top.sock")
	// Masked in "/" too: the root's listing has its own parent case.
	v := &View{Private: []string{"/tmp"}, Hidden: []string{"/run/user/1000"}, Masked: []string{"/run/docker.sock", "/top.sock"},
		Fresh: []string{"/proc"}, Keep: []string{"/tmp/u/home"}}
	if err := v.Check(); err != nil {
		t.Fatal(err)
	}
	f := v.FS(base)
	ls := func(p string) []string {
		t.Helper()
		ents, err := f.ReadDir(p)
		if err != nil {
			t.Fatalf("ReadDir(%s): %v", p, err)
		}
		return names(ents)
	}
	for dir, want := range map[string][]string{
		"/tmp":           {"u"},                         // only the way to the kept home
		"/tmp/u":         {"home"},                      // not the sibling
		"/tmp/u/home":    {".ssh", "proj"},              // kept: the host's entries
		"/run":           {"keep", "user"},              // the masked socket is gone
		"/run/user/1000": nil,                           // hidden: empty
		"/proc":          nil,                           // fresh: nothing to rely on
		"/":              {"proc", "run", "tmp", "usr"}, // the masked socket is gone here too
		"/usr/bin":       {"sh"},                        // untouched elsewhere
	} {
		if got := ls(dir); !slices.Equal(got, want) {
			t.Errorf("ReadDir(%s) = %q, want %q", dir, got, want)
		}
	}
	for _, p := range []string{"/tmp", "/tmp/u", "/run/user/1000", "/proc"} {
		if info, err := f.Lstat(p); err != nil || !info.View || info.Type != TypeDir {
			t.Errorf("Lstat(%s) = %+v, %v; want a view directory", p, info, err)
		}
	}
	for _, p := range []string{"/tmp/u/home", "/tmp/u/home/.ssh/key", "/usr/bin/sh", "/run/keep"} {
		if info, err := f.Lstat(p); err != nil || info.View {
			t.Errorf("Lstat(%s) = %+v, %v; want the host's inode", p, info, err)
		}
	}
	for _, p := range []string{"/tmp/other/secret", "/tmp/.X11-unix/X0", "/tmp/u/sibling", "/run/user/1000/bus", "/run/docker.sock", "/top.sock", "/proc/1"} {
		if _, err := f.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Lstat(%s): %v; want it gone from the view", p, err)
		}
	}
	// Below a fresh instance nothing is known: listing answers as Lstat does.
	if ents, err := f.ReadDir("/proc/1"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadDir(/proc/1) = %q, %v; want it gone from the view, as Lstat says", names(ents), err)
	}
	if !f.Pseudo("/proc") || f.Pseudo("/tmp") {
		t.Errorf("Pseudo: /proc %v, /tmp %v", f.Pseudo("/proc"), f.Pseudo("/tmp"))
	}
}

func TestViewCheck(t *testing.T) {
	for _, v := range []View{
		{Private: []string{"tmp"}},
		{Private: []string{"/tmp/../etc"}},
		{Private: []string{"/"}},
		{Private: []string{"/tmp"}, Keep: []string{"/home/u"}}, // not inside a covered directory
		{Private: []string{"/tmp"}, Keep: []string{"/tmp"}},    // the covered directory itself
	} {
		if err := v.Check(); err == nil {
			t.Errorf("%+v: no error", v)
		}
	}
}

// TestPlanWithView: planned against the view, the private /tmp's rule is
// a view rule (the init stage makes its inode), the kept workspace's rule
// names the host's inode, and nothing is planned for what the view hides.
func TestPlanWithView(t *testing.T) {
	base := newMemFS("/tmp/other/.env", "/tmp/ws/a.go", "/usr/bin/sh", "/home/u/.ssh/key")
	m := compile(t, "[file_policy]\ndefault = \"deny\"\npresets = [\"system\"]\nwrite_paths = [\"/tmp/**\"]\n")
	v := &View{Private: []string{"/tmp"}, Keep: []string{"/tmp/ws"}}
	pl, err := NewPlan(m, 7, v.FS(base), Options{Canaries: []string{"/home/u/.ssh/key"}})
	if err != nil {
		t.Fatal(err)
	}
	var tmp *Rule
	for i, r := range pl.Rules {
		if r.Path == "/tmp" {
			tmp = &pl.Rules[i]
		}
		if r.Path == "/tmp/other" || r.Path == "/tmp/other/.env" {
			t.Errorf("a rule for what the view hides: %+v", r)
		}
		if r.View && r.Path != "/tmp" {
			t.Errorf("a view rule for a host inode: %+v", r)
		}
	}
	if tmp == nil || !tmp.View || tmp.Access&WriteFile == 0 {
		t.Fatalf("the private /tmp's rule: %+v\n%s", tmp, pl.Format())
	}
	for _, c := range pl.Carved {
		if c.Path == "/tmp" {
			t.Errorf("/tmp is carved in the view, where nothing in it is protected: %+v", c)
		}
	}
	// Without a view, no rule is a view rule.
	plain, err := NewPlan(m, 7, base, Options{Canaries: []string{"/home/u/.ssh/key"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range plain.Rules {
		if r.View {
			t.Errorf("a view rule without a view: %+v", r)
		}
	}
}

// TestPlanBinds: with the private view's mounts enforcing the built-in
// write protection, a git workspace keeps its full grant (no carve-out):
// .git is pinned, its config and hooks are read-only mounts. What a mount
// cannot protect stays on sibling rules.
func TestPlanBinds(t *testing.T) {
	whole := compile(t, basePolicy)
	base := []string{"/usr/bin/sh", "/etc/passwd", "/home/u/.local/state/agent-launcher/",
		testWS + "/main.go", testWS + "/.git/HEAD", testWS + "/.git/objects/ab/cdef"}
	cases := []struct {
		name    string
		extra   []string
		binds   []string // path:kind, kind ro, ro-noexec or pin
		unbound []string
		carved  bool // the workspace is carved
	}{
		{"git", []string{testWS + "/.git/config", testWS + "/.git/hooks/pre-commit.sample"},
			[]string{testWS + "/.git:pin", testWS + "/.git/config:ro", testWS + "/.git/hooks:ro"}, nil, false},
		{"no hooks yet", []string{testWS + "/.git/config"},
			[]string{testWS + "/.git:pin", testWS + "/.git/config:ro"}, nil, false},
		{"a key among the hooks", []string{testWS + "/.git/config", testWS + "/.git/hooks/deploy.pem"},
			[]string{testWS + "/.git:pin", testWS + "/.git/config:ro"}, []string{testWS + "/.git/hooks"}, true},
		// A symlink cannot be mounted over: a rule protects it, which
		// carves its parents as without the view.
		{"a symlinked hooks directory", []string{testWS + "/.git/config", testWS + "/.git/hooks@"},
			[]string{testWS + "/.git:pin", testWS + "/.git/config:ro"}, []string{testWS + "/.git/hooks"}, true},
		{"nested repository and .envrc", []string{testWS + "/sub/.git/config", testWS + "/.envrc", testWS + "/sub/.npmrc"},
			[]string{testWS + "/.envrc:ro", testWS + "/.git:pin", testWS + "/sub:pin", testWS + "/sub/.git:pin", testWS + "/sub/.git/config:ro", testWS + "/sub/.npmrc:ro"}, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fsys := newMemFS(append(slices.Clone(base), c.extra...)...)
			pl := planWithBinds(t, whole, 7, fsys)
			var got []string
			for _, b := range pl.Binds {
				kind := "pin"
				switch {
				case b.ReadOnly && b.NoExec:
					kind = "ro-noexec"
				case b.ReadOnly:
					kind = "ro"
				}
				got = append(got, b.Path+":"+kind)
			}
			if !slices.Equal(got, c.binds) {
				t.Errorf("binds %q, want %q", got, c.binds)
			}
			var unbound []string
			for _, u := range pl.Unbound {
				unbound = append(unbound, u.Path)
			}
			if !slices.Equal(unbound, c.unbound) {
				t.Errorf("unbound %q, want %q", unbound, c.unbound)
			}
			carved := slices.ContainsFunc(pl.Carved, func(cv Carved) bool { return cv.Path == testWS })
			if carved != c.carved {
				t.Errorf("workspace carved: %v, want %v\n%s", carved, c.carved, pl.Format())
			}
			checkPlanSound(t, whole, fsys, pl)
		})
	}
}

// TestPlanBindsHardLink: a hook with a second name is refused at start,
// with the view as without it: a mount covers one name only.
func TestPlanBindsHardLink(t *testing.T) {
	whole := compile(t, basePolicy)
	fsys := newMemFS("/usr/bin/sh", "/home/u/.local/state/agent-launcher/", testWS+"/.git/config", testWS+"/.git/hooks/pre-commit*2")
	q, _, err := FloorPolicy(whole, fsys, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	floor, err := tiers.Compile(q)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Canaries: []string{"/home/u/.local/state/agent-launcher"}, Integrity: whole}
	pl, err := NewPlan(floor, 7, fsys, opts)
	if err != nil || !slices.ContainsFunc(pl.Unbound, func(u Unbound) bool { return u.Path == testWS+"/.git/hooks" }) {
		t.Fatalf("first round: %v, unbound %+v, binds %+v", err, pl.Unbound, pl.Binds)
	}
	if q, _, err = FloorPolicy(whole, fsys, true, pl.Unbound); err != nil {
		t.Fatal(err)
	}
	if floor, err = tiers.Compile(q); err != nil {
		t.Fatal(err)
	}
	if _, err := NewPlan(floor, 7, fsys, opts); !errors.Is(err, ErrHardLink) {
		t.Fatalf("second round: %v, want ErrHardLink", err)
	}
}

// TestPlanBindsMissingLiteral: with a writable home, an existing ~/.bashrc
// is a read-only mount, while a ~/.zshrc or systemd user directory that
// does not exist yet stays a rule of the floor: the home directory is
// carved, so the agent cannot create them.
func TestPlanBindsMissingLiteral(t *testing.T) {
	whole := compile(t, strings.Replace(basePolicy, `write_paths = [`, `write_paths = ["~/**", `, 1))
	fsys := newMemFS("/usr/bin/sh", "/home/u/.local/state/agent-launcher/", "/home/u/.bashrc", "/home/u/.config/x", "/home/u/.config/systemd/", testWS+"/main.go")
	pl := planWithBinds(t, whole, 7, fsys)
	if !slices.ContainsFunc(pl.Binds, func(b Bind) bool { return b.Path == "/home/u/.bashrc" && b.ReadOnly }) {
		t.Errorf("~/.bashrc is not a read-only mount: %+v", pl.Binds)
	}
	for _, p := range []string{"/home/u/.zshrc", "/home/u/.config/systemd/user/a.service", "/home/u/.config/systemd/user"} {
		if got := pl.Grants(p, TypeOther) & (MakeRights | WriteFile); got != 0 {
			t.Errorf("the floor lets the agent create %s (%s)", p, got)
		}
	}
	if got := pl.Grants("/home/u/notes.txt", TypeOther); got&MakeReg != 0 {
		t.Errorf("control: a new ordinary file in the carved home gets %s, as a carve-out defers it", got)
	}
	checkPlanSound(t, whole, fsys, pl)
}

// hasDirPrefix and within decide coverage, mounts and grants without
// building dir+"/": they must answer as strings.HasPrefix(s, dir+"/") and
// the path-or-below test on every pair, "", "/" and "//" included.
func TestHasDirPrefix(t *testing.T) {
	vocab := []string{"", "/", "//", "/a", "/a/", "/ab", "/a/b", "/a/bc", "/a//b", "a", "a/b", "/b/a", "/a/b/c"}
	for _, s := range vocab {
		for _, dir := range vocab {
			if got, want := hasDirPrefix(s, dir), strings.HasPrefix(s, dir+"/"); got != want {
				t.Errorf("hasDirPrefix(%q, %q) = %v, want %v", s, dir, got, want)
			}
			if got, want := within(s, dir), s == dir || dir == "/" || strings.HasPrefix(s, dir+"/"); got != want {
				t.Errorf("within(%q, %q) = %v, want %v", s, dir, got, want)
			}
		}
	}
}
