package landlock

import (
	"errors"
	"io/fs"
	"slices"
	"testing"
)

const (
	stateDir  = "/home/u/.local/state/agent-launcher"
	caches    = stateDir + "/caches"
	coder     = caches + "/coder"
	cacheView = "/var/tmp/agent-launcher-cache"
)

// cacheWorld is a host with two agents' caches in the launcher's state
// directory, one holding a file with two hard links.
func cacheWorld() *memFS {
	return newMemFS("/var/tmp/host-file", coder+"/go-build/00/a-d", caches+"/other/pip/x*2",
		stateDir+"/canary", stateDir+"/reviews/last.json", "/usr/bin/sh", "/home/u/.ssh/key")
}

func cacheBindView() *View {
	return &View{Private: []string{"/tmp", "/var/tmp"}, Fresh: []string{"/proc"},
		Caches: []CacheBind{{Source: coder, Target: cacheView, Seal: caches}}}
}

// TestViewBindFS: the agent's cache appears at its target with the host's
// inodes; its home in the state directory is sealed, other agents' caches
// with it.
func TestViewBindFS(t *testing.T) {
	base := cacheWorld()
	v := cacheBindView()
	if err := v.Check(); err != nil {
		t.Fatal(err)
	}
	f := v.FS(base)
	for dir, want := range map[string][]string{
		"/var/tmp":              {"agent-launcher-cache"},
		cacheView:               {"go-build"},
		cacheView + "/go-build": {"00"},
		caches:                  nil,
		stateDir:                {"caches", "canary", "reviews"},
	} {
		ents, err := f.ReadDir(dir)
		if err != nil {
			t.Fatalf("ReadDir(%s): %v", dir, err)
		}
		if got := names(ents); !slices.Equal(got, want) {
			t.Errorf("ReadDir(%s) = %q, want %q", dir, got, want)
		}
	}
	host, _ := base.Lstat(coder)
	if got, err := f.Lstat(cacheView); err != nil || got != host {
		t.Errorf("Lstat(%s) = %+v, %v; want the host's inode %+v", cacheView, got, err, host)
	}
	hostFile, _ := base.Lstat(coder + "/go-build/00/a-d")
	if got, err := f.Lstat(cacheView + "/go-build/00/a-d"); err != nil || got != hostFile {
		t.Errorf("a file in the cache: %+v, %v; want %+v", got, err, hostFile)
	}
	if info, err := f.Lstat(caches); err != nil || !info.View || info.Type != TypeDir {
		t.Errorf("Lstat(%s) = %+v, %v; want a view directory (the seal)", caches, info, err)
	}
	for _, p := range []string{coder, caches + "/other", caches + "/other/pip/x", "/var/tmp/host-file"} {
		if _, err := f.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Lstat(%s): %v; want it gone from the view", p, err)
		}
	}
	if f.Pseudo(cacheView) || f.Pseudo(caches) {
		t.Errorf("Pseudo: the cache %v, the seal %v", f.Pseudo(cacheView), f.Pseudo(caches))
	}
}

// TestPlanWithBind: a policy that grants the cache's view path literally
// gets a rule there naming the host's inode of the bound directory; one
// that grants the private directory covers it with the directory's view
// rule. Nothing is planned in the state directory either way, and a hard
// link in another agent's cache, which the agent made and could use to
// stop every later start, is out of the view's sight (the plan against
// the host's tree refuses it).
func TestPlanWithBind(t *testing.T) {
	base := cacheWorld()
	host, _ := base.Lstat(coder)
	opts := Options{Canaries: []string{stateDir + "/canary"}}
	for _, tc := range []struct {
		name, policy string
		wantPath     string
		wantView     bool
	}{
		{"literal grant", "write_paths = [\"" + cacheView + "/**\"]\n", cacheView, false},
		{"private directory", "write_paths = [\"/var/tmp/**\"]\n", "/var/tmp", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := compile(t, "[file_policy]\ndefault = \"deny\"\npresets = [\"system\"]\n"+tc.policy)
			pl, err := NewPlan(m, 7, cacheBindView().FS(base), opts)
			if err != nil {
				t.Fatal(err)
			}
			var got *Rule
			for i, r := range pl.Rules {
				if r.Path == tc.wantPath {
					got = &pl.Rules[i]
				}
				if within(r.Path, stateDir) {
					t.Errorf("a rule in the state directory: %+v", r)
				}
			}
			if got == nil || got.Access&(WriteFile|MakeRights|RemoveRights) != WriteFile|MakeRights|RemoveRights || got.View != tc.wantView {
				t.Fatalf("the rule at %s: %+v\n%s", tc.wantPath, got, pl.Format())
			}
			if !tc.wantView && (got.Dev != host.Dev || got.Ino != host.Ino) {
				t.Errorf("the cache's rule names %d:%d, want the bound directory %d:%d", got.Dev, got.Ino, host.Dev, host.Ino)
			}
			if _, err := NewPlan(m, 7, base, opts); !errors.Is(err, ErrHardLink) {
				t.Errorf("control: planned against the host, the hard link in the other cache: %v", err)
			}
		})
	}
}

func TestViewCheckBinds(t *testing.T) {
	ok := CacheBind{Source: coder, Target: cacheView, Seal: caches}
	for name, b := range map[string][]CacheBind{
		"relative source":        {{Source: "caches/coder", Target: cacheView, Seal: "caches"}},
		"target outside private": {{Source: coder, Target: "/opt/cache", Seal: caches}},
		"target is private":      {{Source: coder, Target: "/var/tmp", Seal: caches}},
		"source above seal":      {{Source: caches, Target: cacheView, Seal: coder}},
		"overlapping targets":    {ok, {Source: caches + "/b", Target: cacheView + "/b", Seal: caches}},
		"target in seal":         {{Source: "/var/tmp/x/y", Target: "/var/tmp/x/y/z", Seal: "/var/tmp/x"}},
		"unclean target":         {{Source: coder, Target: "/var/tmp/../etc", Seal: caches}},
	} {
		v := View{Private: []string{"/var/tmp"}, Caches: b}
		if err := v.Check(); err == nil {
			t.Errorf("%s: %+v: no error", name, b)
		}
	}
	v := View{Private: []string{"/var/tmp"}, Keep: []string{cacheView}, Caches: []CacheBind{ok}}
	if err := v.Check(); err == nil {
		t.Errorf("a bind over a kept path: no error")
	}
	v = View{Private: []string{"/var/tmp"}, Caches: []CacheBind{ok}}
	if err := v.Check(); err != nil {
		t.Errorf("a good bind: %v", err)
	}
}
