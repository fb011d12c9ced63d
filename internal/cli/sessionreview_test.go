package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-launcher/agent-launcher/landlock"
)

func TestDiffPersistence(t *testing.T) {
	before := persistSnapshot{
		"/w/.envrc":          {Type: "file", Mode: 0o644, Size: 3, Hash: "a", Rule: "r"},
		"/w/.git/config":     {Type: "file", Mode: 0o644, Size: 9, Hash: "b", Rule: "r"},
		"/w/.git/hooks":      {Type: "dir", Mode: 0o755, Rule: "r"},
		"/w/.git/hooks/post": {Type: "file", Mode: 0o755, Size: 1, Hash: "c", Rule: "r"},
		"/w/.npmrc":          {Type: "file", Mode: 0o644, Size: 1, Hash: "d", Rule: "r"},
		"/w/root-owned":      {Type: unreadable, Rule: "permission denied"},
		"/w/was-unreadable":  {Type: unreadable, Rule: "permission denied"},
	}
	after := persistSnapshot{
		"/w/.envrc":          {Type: "file", Mode: 0o644, Size: 3, Hash: "a", Rule: "r"}, // unchanged
		"/w/.git/config":     {Type: "file", Mode: 0o644, Size: 9, Hash: "B", Rule: "r"}, // same size, new content
		"/w/.git/hooks":      {Type: "dir", Mode: 0o755, Rule: "r"},                      // unchanged
		"/w/.git/hooks/post": {Type: "file", Mode: 0o777, Size: 1, Hash: "c", Rule: "r"}, // mode
		"/w/sub/.envrc":      {Type: "file", Mode: 0o644, Size: 5, Hash: "e", Rule: "r"}, // new
		"/w/.npmrc":          {Type: "symlink", Mode: 0o777, Hash: "f", Rule: "r"},       // replaced by a link
		"/w/root-owned":      {Type: unreadable, Rule: "permission denied"},              // unreadable before too
		"/w/lib":             {Type: unreadable, Rule: "permission denied"},              // made unreadable
	}
	var got []string
	for _, c := range diffPersistence(before, after) {
		got = append(got, c.Kind+" "+c.Path)
	}
	want := []string{"modified /w/.git/config", "mode changed /w/.git/hooks/post", "modified /w/.npmrc", "unreadable /w/lib", "created /w/sub/.envrc"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	delete(after, "/w/.envrc")
	if d := diffPersistence(before, after); !slices.ContainsFunc(d, func(c reviewChange) bool { return c.Kind == "deleted" && c.Path == "/w/.envrc" }) {
		t.Errorf("a deleted path is not reported: %+v", d)
	}
}

// countingFS is the OS, counting listings.
type countingFS struct {
	landlock.FS
	lists *atomic.Int32
}

func (c countingFS) ReadDir(p string) ([]landlock.DirEntry, error) {
	c.lists.Add(1)
	return c.FS.ReadDir(p)
}

// TestWalkIndex: a review walk with the last walk's index lists only the
// directories whose stamps changed, and sees every change all the same:
// a persistence file made in a directory whose times are then put back,
// one whose content changed in place, one in a directory changed just
// before the first walk.
func TestWalkIndex(t *testing.T) {
	e, p, ws := planCacheEnv(t)
	// Besides: a bare repository (HEAD, objects/, refs/) whose config
	// and hooks git outside obeys, a directory that only looks like one
	// (no refs/), and the hooks directory core.hooksPath names.
	for _, f := range []string{".git/config", ".git/hooks/pre-commit.sample", "src/a/b/main.go", "src/c/util.go", "docs/x/readme.md",
		"vendor/bare/HEAD", "vendor/bare/objects/x", "vendor/bare/refs/heads/main", "vendor/bare/config", "vendor/bare/hooks/post-update", "vendor/bare/description",
		"vendor/notgit/HEAD", "vendor/notgit/objects/x", "vendor/notgit/config", "tools/hooks/pre-push", "tools/readme"} {
		if err := os.MkdirAll(filepath.Join(ws, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, f), []byte("v1"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2100 * time.Millisecond) // landlock's stampSettle: the tree is at rest
	if err := os.WriteFile(filepath.Join(ws, "docs", "x", "new.md"), nil, 0o644); err != nil {
		t.Fatal(err) // docs/x changed just now: racy
	}
	roots := e.reviewRoots(p.pol, p.m)
	if !slices.ContainsFunc(roots, func(r string) bool { return ws == r || strings.HasPrefix(ws, r+"/") }) {
		t.Fatalf("the workspace is in no review root: %q", roots)
	}
	hooks := []string{filepath.Join(ws, "tools/hooks")}
	var lists atomic.Int32
	fsys := countingFS{landlock.OS(), &lists}
	snap1, inc, idx1 := walkPersistenceOn(fsys, p.m, e.home, roots, &reviewHooks{Dirs: hooks}, nil)
	if inc != "" || idx1 == nil {
		t.Fatalf("first walk: incomplete %q, index %v", inc, idx1)
	}
	if _, ok := snap1[filepath.Join(ws, ".git/config")]; !ok {
		t.Fatalf("control: .git/config is not recorded: %v", snap1)
	}
	for _, f := range []string{"vendor/bare/config", "vendor/bare/hooks", "vendor/bare/hooks/post-update", "tools/hooks", "tools/hooks/pre-push"} {
		if _, ok := snap1[filepath.Join(ws, f)]; !ok {
			t.Errorf("%s is not recorded", f)
		}
	}
	for _, f := range []string{"vendor/bare/description", "vendor/bare/HEAD", "vendor/notgit/config", "tools/readme"} {
		if _, ok := snap1[filepath.Join(ws, f)]; ok {
			t.Errorf("%s is recorded", f)
		}
	}
	listed := lists.Load()
	if _, ok := idx1.Dirs[filepath.Join(ws, "docs/x")]; ok {
		t.Errorf("a directory changed just before the walk is in its index")
	}
	if _, ok := idx1.Dirs[filepath.Join(ws, "src/a/b")]; !ok {
		t.Errorf("control: a directory at rest is not in the index")
	}

	lists.Store(0)
	snap2, _, idx2 := walkPersistenceOn(fsys, p.m, e.home, roots, &reviewHooks{Dirs: hooks}, idx1)
	if !reflect.DeepEqual(snap1, snap2) {
		t.Errorf("nothing changed, and the snapshots differ:\n%v\n%v", snap1, snap2)
	}
	if n := lists.Load(); n != 1 {
		t.Errorf("nothing changed: the walk listed %d directories (of %d); want 1, the racy one", n, listed)
	}
	if len(idx2.Dirs) < len(idx1.Dirs) {
		t.Errorf("the index lost directories: %d, was %d", len(idx2.Dirs), len(idx1.Dirs))
	}

	// Changes: a .envrc in src/a/b, whose times are put back; the
	// hooks sample rewritten in place; a .envrc in the racy docs/x.
	b := filepath.Join(ws, "src/a/b")
	var st unix.Stat_t
	if err := unix.Lstat(b, &st); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"src/a/b/.envrc", "docs/x/.envrc"} {
		if err := os.WriteFile(filepath.Join(ws, f), []byte("export X=1"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, b, []unix.Timespec{st.Atim, st.Mtim}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, ".git/hooks/pre-commit.sample"), []byte("v2"), 0o644); err != nil {
		t.Fatal(err)
	}
	snap3, _, _ := walkPersistenceOn(fsys, p.m, e.home, roots, &reviewHooks{Dirs: hooks}, idx2)
	var got []string
	for _, c := range diffPersistence(snap2, snap3) {
		got = append(got, c.Kind+" "+strings.TrimPrefix(c.Path, ws+"/"))
	}
	want := []string{"modified .git/hooks/pre-commit.sample", "created docs/x/.envrc", "created src/a/b/.envrc"}
	if !slices.Equal(got, want) {
		t.Errorf("changes: got %q\nwant %q", got, want)
	}

	// An index that does not hang together is not used: names and kinds
	// that do not pair, a name that is no single component (a damaged
	// index would walk elsewhere, or forever), fewer entries than names.
	for i, damage := range []func(d walkDir) walkDir{
		func(d walkDir) walkDir { d.Dirs = d.Dirs[:0]; d.Visit = append(d.Visit, "x"); return d },
		func(d walkDir) walkDir {
			d.Visit = append(slices.Clone(d.Visit), ".")
			d.Dirs = append(slices.Clone(d.Dirs), true)
			return d
		},
		func(d walkDir) walkDir {
			d.Visit = append(slices.Clone(d.Visit), "../..")
			d.Dirs = append(slices.Clone(d.Dirs), true)
			return d
		},
		func(d walkDir) walkDir { d.Entries = -1; return d },
	} {
		bad := &walkIndex{Dirs: map[string]walkDir{}}
		for p, d := range idx1.Dirs {
			bad.Dirs[p] = damage(d)
		}
		lists.Store(0)
		snap4, inc, _ := walkPersistenceOn(fsys, p.m, e.home, roots, &reviewHooks{Dirs: hooks}, bad)
		if !reflect.DeepEqual(snap3, snap4) || inc != "" || lists.Load() < int32(len(idx1.Dirs)) {
			t.Errorf("malformed index %d: %d listings, snapshots equal %v, incomplete %q", i, lists.Load(), reflect.DeepEqual(snap3, snap4), inc)
		}
	}
}

// TestWalkIndexKept: the review walk's index a run keeps is the one the
// next run reads back (an index that does not come back costs every
// listing again, which no other test would notice).
func TestWalkIndexKept(t *testing.T) {
	c := planCache{dir: t.TempDir()}
	idx := &walkIndex{Dirs: map[string]walkDir{
		"/w":      {Stamp: landlock.Stamp{Dev: 1, Ino: 2, Sec: 3, Nsec: 4}, Entries: 2, Visit: []string{".git", "a"}, Dirs: []bool{true, false}},
		"/w/.git": {Entries: 0},
	}}
	c.putWalkIndex("k", idx)
	if got := c.walkIndex("k"); !reflect.DeepEqual(got, idx) {
		t.Errorf("kept %+v, read back %+v", idx, got)
	}
	if got := c.walkIndex("other"); got != nil {
		t.Errorf("another key read back %+v", got)
	}
	// The same index again is not written again (most sessions change
	// nothing it records); a changed one is. Control: the file's inode
	// changes with a write (a new file renamed into place).
	ino := func() uint64 {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(c.dir, walkIndexName("k")), &st); err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	before := ino()
	c.putWalkIndex("k", idx)
	if ino() != before {
		t.Errorf("the same index was written again")
	}
	idx.Dirs["/w/new"] = walkDir{Entries: 1}
	c.putWalkIndex("k", idx)
	if ino() == before {
		t.Errorf("control: a changed index was not written")
	}
	if got := c.walkIndex("k"); !reflect.DeepEqual(got, idx) {
		t.Errorf("kept %+v, read back %+v", idx, got)
	}
}

// TestEncodeReviewMatchesJSON: encodeReview writes a report without
// changes by hand; it must give json.MarshalIndent's bytes exactly, for
// strings with every kind of character encoding/json escapes (control
// characters, quotes, HTML characters, U+2028 and U+2029, invalid UTF-8),
// nil and empty lists, and with and without the incomplete note. Control:
// a report with changes goes to encoding/json itself.
func TestEncodeReviewMatchesJSON(t *testing.T) {
	odd := []string{"", "/plain/path", "quote\" back\\slash", "<a>&b", "tab\tnl\nret\rbs\bff\f", "\x00\x01\x1f\x7f",
		"line\u2028para\u2029", "bad\xff\xfeutf8", "é日本\U0001F600", "\xed\xa0\x80", "trail\xe2\x82"}
	ended := time.Date(2026, 11, 23, 22, 18, 5, 123456789, time.UTC)
	var reports []*reviewReport
	for _, s := range odd {
		for _, changes := range [][]reviewChange{nil, {}} {
			reports = append(reports,
				&reviewReport{Schema: 1, Ended: ended, Command: []string{s, "x"}, Workspace: s, Roots: []string{"/r", s}, Changes: changes},
				&reviewReport{Schema: 1, Ended: ended.Add(-time.Hour), Command: nil, Workspace: s, Roots: []string{}, Changes: changes, Incomplete: s + "!"},
				&reviewReport{Schema: 2, Ended: time.Time{}, Command: []string{}, Roots: nil, Changes: changes})
		}
	}
	for _, r := range reports {
		want, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		got, err := encodeReview(r)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("encodeReview(%+v) = %q, %v;\nwant %q", r, got, err, want)
		}
	}
	withChange := &reviewReport{Schema: 1, Ended: ended, Changes: []reviewChange{{Kind: "created", Path: "/w/.envrc", Rule: "<workspace>/.envrc"}}}
	want, _ := json.MarshalIndent(withChange, "", "  ")
	if got, err := encodeReview(withChange); err != nil || !bytes.Equal(got, want) {
		t.Errorf("control, a change: %q, %v; want %q", got, err, want)
	}
}

// TestSaveReview: the report takes the last one's place whole, by an
// exchange when it has no changes (the fast way; saveReview says why) and
// by a rename after a sync when it has some, or when there is no last
// report or no exchange; no temporary file is left behind. The review
// command reads each back, and says what an empty report (a crash before
// an unsynced one reached the disk) means.
func TestSaveReview(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	stateDir := filepath.Join(state, "agent-launcher")
	path := reviewFile(stateDir)
	exchanges := 0
	realExchange := exchange
	t.Cleanup(func() { exchange = realExchange })
	exchange = func(a, b string) error {
		exchanges++
		return realExchange(a, b)
	}
	ended := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	check := func(what string, r *reviewReport, wantExchanges int) {
		t.Helper()
		exchanges = 0
		var before unix.Stat_t
		hadLast := unix.Stat(path, &before) == nil
		if err := saveReview(stateDir, r); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if exchanges != wantExchanges {
			t.Errorf("%s: %d exchanges, want %d", what, exchanges, wantExchanges)
		}
		want, _ := encodeReview(r)
		got, err := os.ReadFile(path)
		if err != nil || string(got) != string(want)+"\n" {
			t.Errorf("%s: the report reads %q, %v; want %q", what, got, err, want)
		}
		var after unix.Stat_t
		if err := unix.Stat(path, &after); err != nil || after.Mode&0o777 != 0o600 || after.Nlink != 1 {
			t.Errorf("%s: the report's mode %o, links %d (%v); want 600, 1", what, after.Mode&0o777, after.Nlink, err)
		}
		if hadLast && after.Ino == before.Ino {
			t.Errorf("%s: the report was written in place, not replaced", what)
		}
		names, _ := os.ReadDir(filepath.Dir(path))
		if len(names) != 1 || names[0].Name() != "last.json" {
			t.Errorf("%s: the review directory holds %v; want only last.json", what, names)
		}
		var cmd bytes.Buffer
		c := &command{stdout: &cmd, stderr: &cmd}
		if code := c.review([]string{"--json"}); code != ExitOK || !strings.Contains(cmd.String(), r.Workspace) {
			t.Errorf("%s: review = %d, %q; want 0 and the report", what, code, cmd.String())
		}
	}
	check("the first report", &reviewReport{Schema: 1, Ended: ended, Workspace: "/w/first"}, 0) // none to exchange with: renamed
	check("a report without changes", &reviewReport{Schema: 1, Ended: ended, Workspace: "/w/second"}, 1)
	check("a report with changes", &reviewReport{Schema: 1, Ended: ended, Workspace: "/w/third",
		Changes: []reviewChange{{Kind: "created", Path: "/w/third/.envrc", Rule: "<workspace>/.envrc"}}}, 0)
	exchange = func(a, b string) error {
		exchanges++
		return unix.EINVAL // a file system without RENAME_EXCHANGE
	}
	check("no exchange", &reviewReport{Schema: 1, Ended: ended, Workspace: "/w/fourth"}, 1)
	exchange = realExchange

	// A directory where the report goes is not exchanged away: the save
	// fails, as a rename over it does, and leaves both as they were.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(path, "kept"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	exchanges = 0
	if err := saveReview(stateDir, &reviewReport{Schema: 1, Ended: ended, Workspace: "/w/fifth"}); err == nil || exchanges != 0 {
		t.Errorf("a directory at last.json: saveReview = %v after %d exchanges; want an error and none", err, exchanges)
	}
	if names, _ := os.ReadDir(filepath.Dir(path)); len(names) != 1 {
		t.Errorf("a directory at last.json: the review directory holds %v; want only last.json", names)
	}
	if _, err := os.Stat(filepath.Join(path, "kept")); err != nil {
		t.Errorf("a directory at last.json: its content: %v", err)
	}
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}

	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	c := &command{stdout: &out, stderr: &out}
	if code := c.review(nil); code != ExitFailure || !strings.Contains(out.String(), "is empty: the system went down before the last session's report reached the disk") {
		t.Errorf("an empty report: review = %d, %q; want %d and what it means", code, out.String(), ExitFailure)
	}
}

// TestDiffMeta: a protected path's mode or owner changed is reported; one
// created or removed meanwhile (the operator's doing: the floor keeps the
// agent from it) and one unchanged are not; a path the walk reports
// already is not reported twice.
func TestDiffMeta(t *testing.T) {
	before := map[string]metaEntry{
		"/h/.ssh":        {Mode: 0o700, Uid: 1, Gid: 1, Rule: "~/.ssh/**"},
		"/h/.ssh/id":     {Mode: 0o600, Uid: 1, Gid: 1, Rule: "~/.ssh/**"},
		"/h/.ssh/gone":   {Mode: 0o600, Uid: 1, Gid: 1, Rule: "~/.ssh/**"},
		"/h/.aws/config": {Mode: 0o600, Uid: 1, Gid: 1, Rule: "~/.aws/**"},
		"/h/.bashrc":     {Mode: 0o644, Uid: 1, Gid: 1, Rule: "~/.bashrc"},
	}
	after := map[string]metaEntry{
		"/h/.ssh":        {Mode: 0o700, Uid: 1, Gid: 1, Rule: "~/.ssh/**"},
		"/h/.ssh/id":     {Mode: 0o644, Uid: 1, Gid: 1, Rule: "~/.ssh/**"},
		"/h/.ssh/new":    {Mode: 0o600, Uid: 1, Gid: 1, Rule: "~/.ssh/**"},
		"/h/.aws/config": {Mode: 0o600, Uid: 1, Gid: 2, Rule: "~/.aws/**"},
		"/h/.bashrc":     {Mode: 0o666, Uid: 1, Gid: 1, Rule: "~/.bashrc"},
	}
	var got []string
	for _, c := range mergeChanges([]reviewChange{{Kind: "mode changed", Path: "/h/.bashrc", Rule: "walk"}}, diffMeta(before, after)) {
		got = append(got, c.Kind+" "+c.Path+" ("+c.Rule+")")
	}
	want := []string{
		"owner changed /h/.aws/config (~/.aws/**; owner 1:2, was 1:1)",
		"mode changed /h/.bashrc (walk)",
		"mode changed /h/.ssh/id (~/.ssh/**; mode 0644, was 0600)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

// TestProtectedMeta: the literal paths of deny and write-protect rules
// and what lies below a literal tree are recorded, with their modes; the
// skipped directory (the launcher's state) and what no rule names
// literally are not.
func TestProtectedMeta(t *testing.T) {
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home, ws := filepath.Join(tmp, "home"), filepath.Join(tmp, "ws")
	for _, f := range []string{"home/.ssh/id_ed25519", "home/.ssh/sub/k", "home/.bashrc", "home/notes.txt", "state/agent-launcher/plans/x", "ws/x"} {
		p := filepath.Join(tmp, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e, p := loadedEnv(t, tmp, &policyFlags{workspace: ws})
	if !strings.HasPrefix(e.launcher.StateDir, tmp+"/state/") {
		t.Fatalf("the state directory %s is not the test's", e.launcher.StateDir)
	}
	got := protectedMeta(p.pol, e.launcher.StateDir, home, ws)
	for _, f := range []string{".ssh", ".ssh/id_ed25519", ".ssh/sub", ".ssh/sub/k", ".bashrc"} {
		if _, ok := got[filepath.Join(home, f)]; !ok {
			t.Errorf("%s is not recorded", f)
		}
	}
	if m := got[filepath.Join(home, ".ssh/id_ed25519")]; m.Mode != 0o600 || m.Uid != uint32(os.Getuid()) {
		t.Errorf("~/.ssh/id_ed25519 recorded as %+v", m)
	}
	// The state directories themselves, not what the launcher keeps in
	// them; the home directory and the workspace themselves.
	for _, d := range []string{e.launcher.StateDir, e.launcher.StateDir + "/plans", home, ws} {
		if _, ok := got[d]; !ok {
			t.Errorf("%s is not recorded", d)
		}
	}
	for p := range got {
		if strings.HasSuffix(p, "notes.txt") || strings.HasPrefix(p, e.launcher.StateDir+"/plans/") || p == ws+"/x" {
			t.Errorf("%s is recorded", p)
		}
	}
}

// TestGitConfigValues: core.hooksPath as git writes it and as people do.
func TestGitConfigValues(t *testing.T) {
	text := "[user]\n\thooksPath = not-core\n[core]\n\tbare = false\n\thooksPath = .husky/_\n" +
		"[Core] HOOKSPATH = \"quoted dir\" # a comment\n[core \"sub\"]\n\thookspath = subsection\n" +
		"[core]\n; hooksPath = commented\n\thookspath=~/hooks;trailing\n\thooksPath = \"a\\\"b\"\n"
	got := gitConfigValues(text, "core", "hookspath")
	want := []string{".husky/_", "quoted dir", "~/hooks", `a"b`}
	if !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	ws, home := t.TempDir(), t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", "")
	if err := os.MkdirAll(filepath.Join(ws, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ws, ".git/config"), []byte("[core]\n\thooksPath = .husky/_\n"), 0o644)
	os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[core]\n\thooksPath = ~/git-hooks\n"), 0o644)
	os.MkdirAll(filepath.Join(home, ".config/git"), 0o755)
	os.WriteFile(filepath.Join(home, ".config/git/config"), []byte("[core]\n\thooksPath = /abs/hooks/\n"), 0o644)
	if got, want := hooksDirs(allGitPointers(ws, home)), []string{ws + "/.husky/_", home + "/git-hooks", "/abs/hooks"}; !slices.Equal(got, want) {
		t.Errorf("hooks directories = %q, want %q", got, want)
	}
}

// TestWalkPlantedFIFOConfig: a git directory whose config is a FIFO (the
// agent's, in a write tree) does not stall the review: the walk reads a
// git directory's config for core.hooksPath only when it is a regular
// file, opened without blocking; the FIFO itself is recorded.
func TestWalkPlantedFIFOConfig(t *testing.T) {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"bare/objects", "bare/refs"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "bare/HEAD"), []byte("ref: refs/heads/main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(ws, "bare/config")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	_, p := loadedEnv(t, tmp, &policyFlags{workspace: ws})
	done := make(chan persistSnapshot, 1)
	var hooks []string
	go func() {
		hooks = gitDirHooksPaths(filepath.Join(ws, "bare"), tmp)
		snap, _, _ := walkPersistence(p.m, tmp, []string{ws}, nil, nil)
		done <- snap
	}()
	select {
	case snap := <-done:
		if len(hooks) != 0 {
			t.Errorf("hooks paths from a FIFO: %q", hooks)
		}
		if e, ok := snap[fifo]; !ok || e.Type != "other" {
			t.Errorf("the planted FIFO config is recorded as %+v (%v)", e, ok)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the review walk stalled on a FIFO planted as a git directory's config")
	}
}
