package cli

import (
	"encoding/binary"
	"github.com/agent-launcher/agent-launcher/rules"
	"golang.org/x/sys/unix"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/agent-launcher/agent-launcher/landlock"
	"github.com/agent-launcher/agent-launcher/tiers"
)

// planCacheEnv is a home with a workspace and a state directory under a
// temporary directory, the embedded default policy loaded, the private
// view planned as run plans it.
func planCacheEnv(t *testing.T) (e *env, p *compiled, ws string) {
	t.Helper()
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws = filepath.Join(tmp, "home", "ws")
	for _, d := range []string{filepath.Join(ws, "src"), filepath.Join(tmp, "home", ".ssh")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(ws)
	e, p = loadedEnv(t, tmp, &policyFlags{})
	e.view = e.privateView(p.pol, ws)
	return e, p, ws
}

// loadedEnv points HOME at tmp/home and the XDG configuration and state
// directories into tmp, with no AGENT_LAUNCHER_CONFIG, and loads the
// policy pf says (the embedded default without --config).
func loadedEnv(tb testing.TB, tmp string, pf *policyFlags) (*env, *compiled) {
	tb.Helper()
	tb.Setenv("HOME", filepath.Join(tmp, "home"))
	tb.Setenv("XDG_CONFIG_HOME", filepath.Join(tmp, "config"))
	tb.Setenv("XDG_STATE_HOME", filepath.Join(tmp, "state"))
	tb.Setenv("AGENT_LAUNCHER_CONFIG", "")
	e, err := resolveEnv(pf)
	if err != nil {
		tb.Fatal(err)
	}
	p, err := e.load("")
	if err != nil {
		tb.Fatal(err)
	}
	return e, p
}

// plan plans as run does; hit says whether the kept plan was used.
func cachedPlan(t *testing.T, e *env, p *compiled) (pl *landlock.Plan, hit bool) {
	t.Helper()
	canary, err := prepareCanary(e.launcher.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	pl, _, hit, err = e.planFloorCached(p, 7, canary)
	if err != nil {
		t.Fatal(err)
	}
	return pl, hit
}

func protects(pl *landlock.Plan, path string) bool {
	return slices.ContainsFunc(pl.Protected, func(p landlock.Protected) bool { return p.Path == path })
}

// The plan cache: a second plan of the same tree is the kept one, equal
// to planning again; a .env created since, a new inode at a protected
// name, a changed policy or a damaged entry plan afresh.
func TestPlanCache(t *testing.T) {
	e, p, ws := planCacheEnv(t)
	fresh, hit := cachedPlan(t, e, p)
	if hit {
		t.Fatalf("the first plan came from an empty cache")
	}
	kept, hit := cachedPlan(t, e, p)
	if !hit {
		t.Fatalf("the second plan of an unchanged tree was not the kept one")
	}
	if !reflect.DeepEqual(kept, fresh) {
		t.Fatalf("the kept plan differs from the one planned:\n%s\n%s", kept.Format(), fresh.Format())
	}

	// A .env created since: planned afresh, and carved out.
	env := filepath.Join(ws, "src", ".env")
	if protects(fresh, env) {
		t.Fatalf("control: %s is carved out before it exists", env)
	}
	if err := os.WriteFile(env, []byte("TOKEN=1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pl, hit := cachedPlan(t, e, p)
	if hit || !protects(pl, env) {
		t.Fatalf("after %s was created: kept %v, carved out %v; want a new plan that carves it out", env, hit, protects(pl, env))
	}
	if _, hit := cachedPlan(t, e, p); !hit {
		t.Fatalf("the new plan was not kept")
	}

	// The launcher rewriting its own review report (a new inode, one
	// link) keeps the plan; the first report adds a directory to the
	// state directory's listing, which plans afresh once.
	report := filepath.Join(e.launcher.StateDir, "review", "last.json")
	save := func() {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(report), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(report+".tmp", []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(report+".tmp", report); err != nil {
			t.Fatal(err)
		}
	}
	save()
	if _, hit := cachedPlan(t, e, p); hit {
		t.Fatalf("a new directory in the state directory kept the plan")
	}
	save()
	if _, hit := cachedPlan(t, e, p); !hit {
		t.Fatalf("a report the launcher rewrote in its state directory changed the plan")
	}

	// A second hard link to a file in the state directory: the hard-link
	// check must see it, so the kept plan is not used (and run refuses).
	if err := os.Link(report, filepath.Join(e.launcher.StateDir, "second-name")); err != nil {
		t.Fatal(err)
	}
	canary, _ := prepareCanary(e.launcher.StateDir)
	if _, _, hit, err := e.planFloorCached(p, 7, canary); hit || err == nil {
		t.Fatalf("with a hard-linked file in the state directory: kept %v, err %v; want a refusal", hit, err)
	}
	os.Remove(filepath.Join(e.launcher.StateDir, "second-name"))
	if _, hit := cachedPlan(t, e, p); !hit {
		t.Fatalf("with the link gone again, the kept plan was not used")
	}

	// Another policy is another key.
	key, err := e.planKey(p, 7, canary)
	if err != nil {
		t.Fatal(err)
	}
	q, err := e.load("")
	if err != nil {
		t.Fatal(err)
	}
	q.pol.Rules = q.pol.Rules[:len(q.pol.Rules)-1]
	if k2, _ := e.planKey(q, 7, canary); k2 == key {
		t.Fatalf("a policy with a rule less has the same key")
	}
	if k2, _ := e.planKey(p, 6, canary); k2 == key {
		t.Fatalf("another ABI has the same key")
	}
	v := *e.view
	e.view = nil
	if k2, _ := e.planKey(p, 7, canary); k2 == key {
		t.Fatalf("no view has the same key")
	}
	e.view = &v
	// Other credentials are another key: which listings fail depends on
	// them, and no stamp changes with them.
	me, err := currentCreds()
	if err != nil {
		t.Fatal(err)
	}
	if k2, _ := e.planKeyAs(me, p, 7, canary); k2 != key {
		t.Fatalf("control: the same credentials give another key")
	}
	for name, change := range map[string]func(*creds){
		"a supplementary group more": func(c *creds) { c.groups = append(slices.Clone(c.groups), 4243) },
		"another effective uid":      func(c *creds) { c.euid++ },
		"another effective gid":      func(c *creds) { c.egid++ },
		"another real uid":           func(c *creds) { c.uid++ },
	} {
		c := me
		change(&c)
		if k2, _ := e.planKeyAs(c, p, 7, canary); k2 == key {
			t.Errorf("%s: the same key", name)
		}
	}

	// A damaged entry, or one kept under another name, is not used.
	entry := filepath.Join(e.planCache().dir, key)
	b, err := os.ReadFile(entry)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]byte{b[:len(b)/2], append([]byte("x"), b[1:]...), nil} {
		if err := os.WriteFile(entry, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, hit := cachedPlan(t, e, p); hit {
			t.Fatalf("a damaged entry (%d bytes) was used", len(bad))
		}
	}
	other := filepath.Join(e.planCache().dir, "0000")
	if err := os.Rename(entry, other); err != nil {
		t.Fatal(err)
	}
	if _, _, _, _, err := decodePlanEntry(mustRead(t, other)); err != nil {
		t.Fatal(err)
	}
	if pl, _, ok := (planCache{dir: e.planCache().dir}).get("0000", landlock.OS()); ok || pl != nil {
		t.Fatalf("an entry kept under a name that is not its key was used")
	}
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A kept plan is read only from a real directory and a real file: a
// symlink at an entry's name (a later session could write the plan
// through its target, the agent's own cache) or at plans/ itself is not
// followed, by get or by put (found in review: H2).
func TestPlanCacheNoSymlinks(t *testing.T) {
	e, p, _ := planCacheEnv(t)
	elsewhere := filepath.Join(e.launcher.StateDir, "caches", "_global")
	if err := os.MkdirAll(elsewhere, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, hit := cachedPlan(t, e, p); hit {
		t.Fatal("a plan from an empty cache")
	}
	if _, hit := cachedPlan(t, e, p); !hit {
		t.Fatal("control: the kept plan was not used")
	}
	canary, _ := prepareCanary(e.launcher.StateDir)
	key, err := e.planKey(p, 7, canary)
	if err != nil {
		t.Fatal(err)
	}
	dir := e.planCache().dir
	if err := os.Rename(filepath.Join(dir, key), filepath.Join(elsewhere, "kept")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(elsewhere, "kept"), filepath.Join(dir, key)); err != nil {
		t.Fatal(err)
	}
	if _, hit := cachedPlan(t, e, p); hit {
		t.Fatalf("an entry that is a symlink was used")
	}
	if st, err := os.Lstat(filepath.Join(dir, key)); err != nil || !st.Mode().IsRegular() {
		t.Fatalf("the new plan did not replace the symlink with a file of its own: %v %v", st, err)
	}

	// plans/ a symlink to a directory someone else can write.
	other := filepath.Join(t.TempDir(), "other")
	if err := os.Rename(dir, other); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, dir); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadDir(other)
	if _, hit := cachedPlan(t, e, p); hit {
		t.Fatalf("a plan was read through a symlinked plans directory")
	}
	after, _ := os.ReadDir(other)
	if len(after) != len(before) {
		t.Fatalf("put wrote through a symlinked plans directory: %d entries, then %d", len(before), len(after))
	}
}

// TestFileCacheVouch: an automata entry that validated is marked, once it
// was last written vouchSettle ago, and the next load takes it as it is.
// The load takes the mark off, and the mark is back only once the
// process's command has ended without a panic (reaffirmVouches): after a
// launch that died, the next validates in full. A write to the entry (its
// time), a copy that keeps the time and the mark (its inode) or a mark made
// too soon leaves it to be validated again, and a damaged cell is then
// caught. The control shows that the mark is what decides: the same damage
// with a mark that matches is taken as it is. It fails where TMPDIR keeps
// no user extended attributes, rather than skip.
func TestFileCacheVouch(t *testing.T) {
	home := t.TempDir()
	pol, err := rules.Load(rules.Options{Home: home, Workspace: filepath.Join(home, "ws")})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "cache")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(dir, "user.agent-launcher.probe", []byte("1"), 0); err != nil {
		t.Fatalf("this test needs a TMPDIR whose file system keeps user extended attributes (ext4, xfs, btrfs, tmpfs from Linux 6.6): %s: %v", dir, err)
	}
	defer func(d time.Duration) { vouchSettle = d }(vouchSettle)
	vouchSettle = 0
	// load loads as a launcher would, and ends as one that did not panic
	// (ended) or as one that did.
	load := func(ended bool) (*fileCache, string) {
		t.Helper()
		c := newFileCache(dir)
		if _, err := tiers.CompileCached(pol, c); err != nil {
			t.Fatal(err)
		}
		if ended {
			reaffirmVouches()
		} else {
			taken.Lock()
			taken.entries = nil
			taken.Unlock()
		}
		// The matcher's entry, and the "**/" patterns' that the home
		// directory and the workspace share (tiers/anchor.go). The
		// matcher's holds every automaton: the larger.
		ents, _ := os.ReadDir(dir)
		if len(ents) != 2 {
			t.Fatalf("%d cache entries, want 2", len(ents))
		}
		var largest string
		var size int64
		for _, e := range ents {
			if info, err := e.Info(); err == nil && info.Size() > size {
				largest, size = e.Name(), info.Size()
			}
		}
		return c, filepath.Join(dir, largest)
	}
	mark := func(path string) string {
		buf := make([]byte, 256)
		n, err := unix.Getxattr(path, vouchXattr, buf)
		if err != nil {
			return ""
		}
		return string(buf[:n])
	}
	stat := func(path string) unix.Stat_t {
		var st unix.Stat_t
		if err := unix.Stat(path, &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	c, entry := load(true) // compiled and kept: nothing to validate
	key := filepath.Base(entry)
	if _, ok := c.got[key]; ok || mark(entry) != "" {
		t.Fatalf("a fresh entry was read back or marked: %q", mark(entry))
	}
	c, entry = load(true) // read back, validated, marked
	if c.got[key].vouched || mark(entry) == "" {
		t.Fatalf("first read: vouched %v, mark %q; want not vouched, then marked", c.got[key].vouched, mark(entry))
	}
	if c, entry = load(true); !c.got[key].vouched || mark(entry) == "" {
		t.Fatalf("second read: vouched %v, mark %q after the command ended", c.got[key].vouched, mark(entry))
	}
	// A launch that died with the entry in use: no mark, so the next one
	// validates (and marks again).
	if c, entry = load(false); !c.got[key].vouched || mark(entry) != "" {
		t.Fatalf("a launch that died: vouched %v, mark %q; want the mark off", c.got[key].vouched, mark(entry))
	}
	if c, entry = load(true); c.got[key].vouched || mark(entry) == "" {
		t.Fatalf("after a launch that died: vouched %v, mark %q; want validated and marked", c.got[key].vouched, mark(entry))
	}

	// Written in place, the same bytes: the time moves, the mark no longer
	// matches.
	good, err := os.ReadFile(entry)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	if err := os.WriteFile(entry, good, 0o600); err != nil {
		t.Fatal(err)
	}
	if c, _ = load(true); c.got[key].vouched {
		t.Fatalf("vouched for after a write")
	}
	// A copy that keeps the time and the mark: another inode.
	if c, _ = load(true); !c.got[key].vouched {
		t.Fatalf("control: not vouched for once validated again")
	}
	m, st := mark(entry), stat(entry)
	cp := entry + ".copy"
	if err := os.WriteFile(cp, good, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(cp, vouchXattr, []byte(m), 0); err != nil {
		t.Fatal(err)
	}
	mtime := time.Unix(st.Mtim.Unix())
	if err := os.Chtimes(cp, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(cp, entry); err != nil {
		t.Fatal(err)
	}
	if now := stat(entry); now.Mtim != st.Mtim || now.Size != st.Size || now.Ino == st.Ino {
		t.Fatalf("the copy: mtime %v size %d inode %d; want the original's time and size, another inode", now.Mtim, now.Size, now.Ino)
	}
	if c, _ = load(true); c.got[key].vouched {
		t.Fatalf("a copy that carries the mark and the time was vouched for")
	}

	// A damaged transition cell, written in place: validated again, refused
	// and compiled anew (a new file). The control: the same damage with a
	// mark that matches the file is taken as it is.
	damage := func() {
		t.Helper()
		b := append([]byte(nil), good...)
		// A word in the middle, inside a transition table (an entry is
		// little-endian words): no state's offset and no accept set's
		// index, whatever the entry's layout. (One flipped byte there
		// could still name a valid state: the test then failed in about
		// 1 run in 8 as another user, whose paths laid the entry out
		// otherwise.)
		binary.LittleEndian.PutUint32(b[len(b)/2&^3:], 0xfffffff0)
		time.Sleep(10 * time.Millisecond)
		if err := os.WriteFile(entry, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	damage()
	before := stat(entry).Ino
	if c, entry = load(true); c.got[key].vouched || stat(entry).Ino == before {
		t.Fatalf("a damaged entry was vouched for (%v) or kept (inode %d, was %d)", c.got[key].vouched, stat(entry).Ino, before)
	}
	good, _ = os.ReadFile(entry)
	damage()
	now := stat(entry)
	s := stampOf(&now)
	if err := unix.Setxattr(entry, vouchXattr, []byte(s.mark()), 0); err != nil {
		t.Fatal(err)
	}
	before = stat(entry).Ino
	if c, entry = load(false); !c.got[key].vouched || stat(entry).Ino != before {
		t.Fatalf("control: a matching mark was not what decided (vouched %v, inode %d, was %d)", c.got[key].vouched, stat(entry).Ino, before)
	}

	// Marked only once the entry's last write is vouchSettle old.
	os.RemoveAll(dir)
	vouchSettle = time.Hour
	load(true)
	if c, entry = load(true); c.got[key].vouched || mark(entry) != "" {
		t.Fatalf("an entry written just now was marked: %q", mark(entry))
	}
}

// TestFileCacheKeepsShared: the automata every workspace shares (the
// "**/" patterns' without their directory, tiers.SharedKeyPrefix) outlive
// the entries of more workspaces than the cache keeps: those push out each
// other, not the shared ones.
func TestFileCacheKeepsShared(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(t.TempDir(), "cache")
	names := func() (shared, own []string) {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if n := e.Name(); len(n) > 2 && n[:2] == tiers.SharedKeyPrefix {
				shared = append(shared, n)
			} else {
				own = append(own, n)
			}
		}
		return shared, own
	}
	var firstShared, firstOwn []string
	for i := range maxCacheEntries + 2 {
		pol, err := rules.Load(rules.Options{Home: home, Workspace: filepath.Join(home, "ws", string(rune('a'+i)))})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tiers.CompileCached(pol, newFileCache(dir)); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			firstShared, firstOwn = names()
			if len(firstShared) == 0 || len(firstOwn) == 0 {
				t.Fatalf("first compile: shared entries %q, others %q; want some of each", firstShared, firstOwn)
			}
		}
	}
	shared, own := names()
	if len(own) != maxCacheEntries {
		t.Errorf("%d entries of workspaces' matchers, want %d kept", len(own), maxCacheEntries)
	}
	for _, n := range firstOwn {
		if slices.Contains(own, n) {
			t.Errorf("control: the first workspace's entry %s is still there after %d others", n, maxCacheEntries+1)
		}
	}
	for _, n := range firstShared {
		if !slices.Contains(shared, n) {
			t.Errorf("the shared entry %s was pushed out by the workspaces' entries", n)
		}
	}
}

// The automata cache is read as carefully: no symlink, no second link.
func TestFileCacheChecks(t *testing.T) {
	dir := t.TempDir()
	c := newFileCache(dir)
	c.Put("k", []byte("value"))
	if b, ok := c.Get("k"); !ok || string(b) != "value" {
		t.Fatalf("control: Get after Put: %q %v", b, ok)
	}
	if err := os.Link(filepath.Join(dir, "k"), filepath.Join(dir, "second")); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Get("k"); ok {
		t.Fatalf("an entry with a second hard link was used")
	}
	os.Remove(filepath.Join(dir, "second"))
	if err := os.Rename(filepath.Join(dir, "k"), filepath.Join(dir, "target")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("target", filepath.Join(dir, "k")); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Get("k"); ok {
		t.Fatalf("an entry that is a symlink was used")
	}
	if err := os.Chmod(filepath.Join(dir, "target"), 0o666); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Get("target"); ok {
		t.Fatalf("an entry others may write was used")
	}
}

// The launcher's state directory at its default place stays denied when
// XDG_STATE_HOME moves this run's elsewhere: a session of that other
// configuration whose policy grants ~/.local/state could otherwise rewrite
// the plans and automata the default configuration's sessions trust
// (found in review: H1).
func TestDefaultStateDirDenied(t *testing.T) {
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(tmp, "home")
	ws := filepath.Join(home, "ws")
	cfg := filepath.Join(tmp, "grant.toml")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("[file_policy]\ndefault = \"deny\"\nwrite_paths = [\"<workspace>/**\", \"~/.local/state/**\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(tmp, "config"))
	t.Setenv("XDG_STATE_HOME", filepath.Join(home, "st2"))
	t.Setenv("AGENT_LAUNCHER_CONFIG", "")
	t.Chdir(ws)
	e, err := resolveEnv(&policyFlags{config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.load("")
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]tiers.Verdict{
		filepath.Join(home, ".local/state/agent-launcher/plans/k"): tiers.Denied,
		filepath.Join(home, ".local/state/agent-launcher/cache/k"): tiers.Denied,
		filepath.Join(home, "st2/agent-launcher/plans/k"):          tiers.Denied,
		filepath.Join(home, ".local/state/other/x"):                tiers.Allowed, // control: the grant works
	} {
		if got := p.m.Decide(path, tiers.OpWrite).Verdict; got != want {
			t.Errorf("write %s: %v, want %v", path, got, want)
		}
	}
}

// AGENT_LAUNCHER_PLAN_CACHE=0 plans afresh and keeps nothing.
func TestPlanCacheOff(t *testing.T) {
	e, p, _ := planCacheEnv(t)
	t.Setenv(planCacheVar, "0")
	for range 2 {
		if _, hit := cachedPlan(t, e, p); hit {
			t.Fatalf("a kept plan was used with %s=0", planCacheVar)
		}
	}
	if ents, _ := os.ReadDir(e.planCache().dir); len(ents) != 0 {
		t.Fatalf("%s=0 kept %d plans", planCacheVar, len(ents))
	}
	t.Setenv(planCacheVar, "")
	cachedPlan(t, e, p)
	if _, hit := cachedPlan(t, e, p); !hit {
		t.Fatalf("control: with the cache on, the second plan was not the kept one")
	}
}

// TestSplitObservations: the questions a kept plan asks now (in or below
// the workspace or the home directory) and those it asks while the init
// stage builds the view; a sibling that shares a prefix is not below.
func TestSplitObservations(t *testing.T) {
	obs := landlock.Observations{
		{Op: landlock.ObsLstat, Path: "/home/u"},
		{Op: landlock.ObsReadDir, Path: "/home/u/proj/src"},
		{Op: landlock.ObsLstat, Path: "/home/user2/x"},
		{Op: landlock.ObsLstat, Path: "/etc/passwd"},
		{Op: landlock.ObsLstat, Path: "/srv/ws"},
		{Op: landlock.ObsLstat, Path: "/srv/ws/.git"},
		{Op: landlock.ObsLstat, Path: "/srv/wsx"},
	}
	in, out := splitObservations(obs, "/srv/ws", "/home/u")
	var gotIn, gotOut []string
	for _, o := range in {
		gotIn = append(gotIn, o.Path)
	}
	for _, o := range out {
		gotOut = append(gotOut, o.Path)
	}
	wantIn := []string{"/home/u", "/home/u/proj/src", "/srv/ws", "/srv/ws/.git"}
	wantOut := []string{"/home/user2/x", "/etc/passwd", "/srv/wsx"}
	if !slices.Equal(gotIn, wantIn) || !slices.Equal(gotOut, wantOut) {
		t.Errorf("in %q, out %q; want %q and %q", gotIn, gotOut, wantIn, wantOut)
	}
}

// TestKeptPlanSettles: a plan recorded while the home directory had just
// changed (a first run makes its state there) keeps its absent
// credentials unstamped; once a later run found the plan holding, and the
// home directory settled, settleKept stamps them (the next runs then ask
// one stamp instead), and a credential made after that is still seen.
func TestKeptPlanSettles(t *testing.T) {
	e, p, _ := planCacheEnv(t)
	home := filepath.Dir(e.workspace)
	vias := func() (n int) {
		t.Helper()
		_, _, obs, ok := e.planCache().kept(e.keptUnder)
		if !ok {
			t.Fatal("no kept plan")
		}
		for _, o := range obs {
			if o.Via == home && o.Stamp != (landlock.Stamp{}) {
				n++
			}
		}
		return n
	}
	if _, hit := cachedPlan(t, e, p); hit {
		t.Fatal("the first plan came from an empty cache")
	}
	if n := vias(); n != 0 {
		t.Fatalf("%d answers stamped via %s, made just before the first plan", n, home)
	}
	time.Sleep(2100 * time.Millisecond) // landlock's stampSettle, and a tick
	if _, hit := cachedPlan(t, e, p); !hit || e.settleKept == nil {
		t.Fatalf("the kept plan was not used (%v), or nothing to settle", hit)
	}
	e.settleKept()
	n := vias()
	if n < 10 {
		t.Fatalf("%d answers stamped via %s after settling; want the built-in credentials' (~/.aws, ~/.config/gh, ...)", n, home)
	}
	if _, hit := cachedPlan(t, e, p); !hit {
		t.Fatal("the settled plan does not hold")
	}
	aws := filepath.Join(home, ".aws")
	if err := os.Mkdir(aws, 0o700); err != nil {
		t.Fatal(err)
	}
	if pl, hit := cachedPlan(t, e, p); hit || !protects(pl, aws) {
		t.Fatalf("%s made after settling: kept %v, protected %v; want a new plan that protects it", aws, hit, protects(pl, aws))
	}
}
