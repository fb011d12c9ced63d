package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/agent-launcher/agent-launcher/landlock"
	"github.com/agent-launcher/agent-launcher/rules"
	"github.com/agent-launcher/agent-launcher/tiers"
)

// The session-end review (DESIGN.md section 2, guarantee 6): the launcher
// records the persistence paths (what the built-in write protection
// names: git hooks and config, .envrc, shell start-up files, ...) in the
// trees the agent may write, before the agent runs and after it exits,
// reports every difference, and keeps the last report in its state
// directory for `agent-launcher review`, which can remove what the agent
// created. The floor already keeps the agent from changing the ones that
// exist at launch; the review catches the ones it creates where their
// parent directory is not carved (a sub/.envrc) and anything that changed
// them while the session ran.

// reviewLimit bounds each snapshot's walk.
const reviewLimit = 200000

// persistEntry is one persistence path as recorded.
type persistEntry struct {
	Type string `json:"type"` // file, dir, symlink, other
	Mode uint32 `json:"mode"`
	Size int64  `json:"size"`
	// Hash is the SHA-256 of a file's content, or "stat:" and that of its
	// identity and times for a file larger than hashMax or past the
	// walk's hashBudget (fileHash), or of a symlink's target.
	Hash string `json:"hash,omitempty"`
	// Rule names the protection that makes the path a persistence path.
	Rule string `json:"rule"`
}

// unreadable is the type of a directory entry the review could not list.
const unreadable = "unreadable"

// persistSnapshot maps path to entry.
type persistSnapshot map[string]persistEntry

// reviewChange is one difference between the snapshots.
type reviewChange struct {
	Kind string `json:"kind"` // created, modified, deleted, mode changed, unreadable
	Path string `json:"path"`
	Rule string `json:"rule"`
	// Entry is the path as it was left (empty for a deleted one).
	Entry persistEntry `json:"entry,omitzero"`
}

// reviewReport is what the launcher keeps of a session's review.
type reviewReport struct {
	Schema    int            `json:"schema"`
	Ended     time.Time      `json:"ended"`
	Command   []string       `json:"command"`
	Workspace string         `json:"workspace"`
	Roots     []string       `json:"roots"`
	Changes   []reviewChange `json:"changes"`
	// Incomplete says why a snapshot did not cover every root.
	Incomplete string `json:"incomplete,omitempty"`
}

// reviewRoots returns the trees a session of pol may write that outlive
// it: the directories the write rules name literally (the workspace),
// without the private view's temporary directories and without /dev, and
// the directories the view keeps inside those that m lets the agent write
// (a home directory under /tmp, which the default policy's /tmp/** grant
// reaches: a second review planted a .envrc there, unreported). Only there
// can the agent create or change a file.
func (e *env) reviewRoots(pol *rules.Policy, m *tiers.Matcher) []string {
	var roots []string
	skip := map[string]bool{}
	if e.view != nil {
		for _, d := range slices.Concat(e.view.Private, e.view.Hidden) {
			skip[d] = true
		}
	}
	for _, r := range pol.Rules {
		if r.Kind != rules.KindTier || r.Tier != rules.Write {
			continue
		}
		for i := range r.Globs {
			prefix, _ := r.Globs[i].LiteralPrefix()
			// Canonical, as the walk's joins assume (rules refuses dot
			// segments, escaped or not; cleaned all the same).
			if prefix != "" {
				prefix = filepath.Clean(prefix)
			}
			if prefix == "" || prefix == "/" || prefix == "/dev" || strings.HasPrefix(prefix, "/dev/") || skip[prefix] {
				continue
			}
			if st, err := os.Stat(prefix); err != nil || !st.IsDir() {
				continue
			}
			roots = append(roots, prefix)
		}
	}
	if e.view != nil {
		for _, k := range e.view.Keep {
			if e.view.Covered(k) == "" || m.Decide(k, tiers.OpWrite).Verdict != tiers.Allowed {
				continue
			}
			if st, err := os.Lstat(k); err == nil && st.IsDir() {
				roots = append(roots, k)
			}
		}
	}
	slices.Sort(roots)
	roots = slices.Compact(roots)
	// Drop roots inside other roots.
	return slices.DeleteFunc(roots, func(r string) bool {
		return slices.ContainsFunc(roots, func(o string) bool { return o != r && strings.HasPrefix(r, o+"/") })
	})
}

// walkIndex is what a review walk keeps of the directories it listed, so
// that the next walk (the session's end, the next session's start) need
// not list again a directory that did not change: per directory, its
// stamp (landlock.Stamp, taken before the listing and settled), how many
// entries it held, and the names of those the walk visits, the
// subdirectories and the persistence paths. A directory whose stamp is
// the kept one holds the same names (stamp.go says why), and the matcher
// is the same one (the index is kept under the plan key, which digests
// the policy), so the same of them are persistence paths; those are
// described again, their content may have changed.
type walkIndex struct {
	Dirs map[string]walkDir `json:"dirs"`
}

type walkDir struct {
	Stamp   landlock.Stamp `json:"stamp"`
	Entries int            `json:"entries"`
	// Git is set for a git directory (gitDirectory): its config and
	// hooks are persistence paths whatever its name.
	Git bool `json:"git,omitempty"`
	// Visit are the names walked into, in order: subdirectories and
	// persistence paths.
	Visit []string `json:"visit"`
	// Dirs marks which of Visit are directories.
	Dirs []bool `json:"dirs"`
}

// walkPersistence records every path under roots that the write
// protection names (git's object stores are not walked), and what name
// rules cannot name: everything below hooks (the directories git's
// core.hooksPath names: reviewHooks) and the config and hooks of every git
// directory whatever its name (a bare repository the agent plants, whose
// config git outside obeys). idx (nil: none) stands for the listings of
// the directories whose stamps did not change, and the index of this walk
// is returned (nil when the walk stopped at reviewLimit).
func walkPersistence(m *tiers.Matcher, home string, roots []string, hooks *reviewHooks, idx *walkIndex) (persistSnapshot, string, *walkIndex) {
	return walkPersistenceOn(landlock.OS(), m, home, roots, hooks, idx)
}

// reviewHooks are the hooks directories a review walk reads as
// persistence: Dirs, and, unless Fixed, those that the configs of the git
// directories the walk finds name, which the walk adds to Dirs. The
// session's end walks with the start's list, Fixed: a hooks directory
// first named during the session (by a config the agent planted, which
// is reported itself) is not walked, as its entries, absent from the
// start's record, would all read as created.
type reviewHooks struct {
	Dirs  []string
	Fixed bool
}

// Why walkPersistence records the paths no rule names.
const (
	hooksPathRule = "the hooks directory core.hooksPath names: git runs its hooks"
	gitDirRule    = "a git directory (a bare repository): git outside obeys its config and runs its hooks"
)

// gitDirEntries are the entries of a git directory that git obeys or runs.
var gitDirEntries = []string{"config", "config.worktree", "commondir", "hooks", "worktrees"}

// gitDirectory reports whether a listing may be a git directory's. Git
// takes a directory with HEAD for one when objects and refs are there, or
// a commondir naming where they are, and checks little of their types (a
// symlink for objects, an executable file for refs pass: a second review):
// so any entries of those names do here, HEAD anything but a directory.
func gitDirectory(ents []landlock.DirEntry) bool {
	head, objects, refs, common := false, false, false, false
	for _, e := range ents {
		switch e.Name {
		case "HEAD":
			head = e.Type != landlock.TypeDir
		case "objects":
			objects = true
		case "refs":
			refs = true
		case "commondir":
			common = true
		}
	}
	return head && (objects && refs || common)
}

// walkPersistenceOn walks fsys, the OS or one that counts its listings.
func walkPersistenceOn(fsys landlock.FS, m *tiers.Matcher, home string, roots []string, rh *reviewHooks, idx *walkIndex) (persistSnapshot, string, *walkIndex) {
	if rh == nil {
		rh = &reviewHooks{}
	}
	snap := persistSnapshot{}
	out := &walkIndex{Dirs: map[string]walkDir{}}
	now := landlock.StampNow()
	buf := make([]byte, 32<<10) // one read buffer for every file hashed
	budget := int64(hashBudget) // bytes this walk reads to hash files (fileHash)
	seen := 0
	incomplete := ""
	// Depth first in lexical order, as filepath.WalkDir walks, listing
	// with the planner's getdents listing (two allocations per entry fewer:
	// a workspace of 10,000 files is walked twice per session).
	stop := false
	// The hooks directories core.hooksPath names: those given, and those
	// the configs of the git directories the walk finds name (a nested
	// repository's husky hooks), walked again at the end when found after
	// the walk passed them.
	//
	// A hooks directory that is a root, the home directory or above
	// either is not walked as one: all it holds would be hooks (the hook
	// names of one a protected config names are protected instead:
	// protectGitPointers). One that a git directory the walk finds
	// names lies inside that repository (gitDirHooksPaths).
	walked := append(slices.Clip(roots), home)
	above := func(h string) bool { return atOrAbove(h, walked...) }
	var hooks []string
	for _, h := range rh.Dirs {
		if !above(h) {
			hooks = append(hooks, h)
		}
	}
	defer func() { rh.Dirs = hooks }()
	var later []string
	foundGitDir := func(p string) {
		if rh.Fixed {
			return
		}
		for _, h := range gitDirHooksPaths(p, home) {
			if !above(h) && !slices.Contains(hooks, h) {
				hooks = append(hooks, h)
				later = append(later, h)
			}
		}
	}
	// visit walks p and reports whether it is a persistence path; why
	// says why it is one where no rule names it (hooksPathRule,
	// gitDirRule), else "".
	var visit func(p string, dir bool, why string) bool
	visit = func(p string, dir bool, why string) bool {
		if stop {
			return false
		}
		if seen++; seen > reviewLimit {
			incomplete = fmt.Sprintf("more than %d entries under %s", reviewLimit, strings.Join(roots, " "))
			stop = true
			return false
		}
		// Only git's object stores are skipped: they hold nothing a
		// program runs. node_modules is walked: a package directory may
		// hold a repository whose config git outside obeys.
		if dir && (strings.HasSuffix(p, "/.git/objects") || strings.HasSuffix(p, "/.git/lfs")) {
			return false
		}
		if why == "" && slices.Contains(hooks, p) {
			why = hooksPathRule
		}
		marked := false
		if dec := m.Decide(p, tiers.OpWrite); dec.Rule != nil && dec.Rule.Kind == rules.KindWriteProtect {
			marked = true
			if ent, ok := describeBuf(p, buf, &budget); ok {
				ent.Rule = dec.Rule.Pattern
				snap[p] = ent
			}
		} else if why != "" {
			marked = true
			if ent, ok := describeBuf(p, buf, &budget); ok {
				ent.Rule = why
				snap[p] = ent
			}
		}
		if !dir {
			return marked
		}
		// What lies below a marked directory no rule names is marked too
		// (a hook in the hooks directory); in a git directory, its config
		// and hooks.
		below := func(git bool, name string) string {
			if why != "" || !git || !slices.Contains(gitDirEntries, name) {
				return why
			}
			return gitDirRule
		}
		if kept, ok := idx.dir(p); ok && stampIs(p, kept.Stamp) {
			if kept.Git {
				foundGitDir(p)
			}
			for i, name := range kept.Visit {
				visit(childPath(p, name), kept.Dirs[i], below(kept.Git, name))
			}
			seen += kept.Entries - len(kept.Visit)
			out.Dirs[p] = kept
			return marked
		}
		// Listed with the stamp of the very directory listed.
		ents, st, stamped, err := landlock.ReadDirStamped(fsys, p)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			// A directory the review cannot list may hide what it
			// looks for (a nested repository's config in a 0311
			// directory, which git outside still reaches by name):
			// recorded, so that one the session made unreadable is
			// reported, and what was listed before the error walked.
			// Gone since the listing: nothing to record.
			snap[p] = persistEntry{Type: unreadable, Rule: err.Error()}
		}
		rec := walkDir{Entries: len(ents), Git: gitDirectory(ents)}
		if rec.Git {
			foundGitDir(p)
		}
		for _, e := range ents {
			isDir := e.Type == landlock.TypeDir
			if visit(childPath(p, e.Name), isDir, below(rec.Git, e.Name)) || isDir {
				rec.Visit = append(rec.Visit, e.Name)
				rec.Dirs = append(rec.Dirs, isDir)
			}
		}
		if err == nil && stamped && st.Settled(now) {
			rec.Stamp = st
			out.Dirs[p] = rec
		}
		return marked
	}
	for _, root := range roots {
		if info, err := fsys.Lstat(root); err == nil {
			why := ""
			if slices.ContainsFunc(hooks, func(h string) bool { return strings.HasPrefix(root, h+"/") }) {
				why = hooksPathRule
			}
			visit(root, info.Type == landlock.TypeDir, why)
		}
	}
	for len(later) > 0 {
		h := later[0]
		later = later[1:]
		inRoot := slices.ContainsFunc(roots, func(r string) bool { return h == r || strings.HasPrefix(h, r+"/") })
		if info, err := fsys.Lstat(h); inRoot && err == nil && info.Type == landlock.TypeDir {
			visit(h, true, hooksPathRule)
		}
	}
	if stop {
		out = nil
	}
	return snap, incomplete, out
}

// childPath is filepath.Join(dir, name) for a canonical dir and one
// entry's name (neither empty, "." nor "..", nor holding a "/": a listing's,
// or an index's checked by walkIndex.dir), without the Clean that would
// cost the walk an allocation per entry.
func childPath(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// stampIs reports whether directory p has stamp st now.
func stampIs(p string, st landlock.Stamp) bool {
	now, ok := landlock.StampDir(p)
	return ok && now == st
}

// dir returns the kept record of directory p.
func (idx *walkIndex) dir(p string) (walkDir, bool) {
	if idx == nil {
		return walkDir{}, false
	}
	d, ok := idx.Dirs[p]
	if !ok || d.Stamp == (landlock.Stamp{}) || len(d.Visit) != len(d.Dirs) || d.Entries < len(d.Visit) {
		return walkDir{}, false
	}
	for _, name := range d.Visit {
		if !validEntryName(name) {
			return walkDir{}, false // one name, not "." or ".." (a damaged index would walk elsewhere)
		}
	}
	return d, true
}

// describe records path without following a final symlink.
func describe(path string) (persistEntry, bool) {
	return describeBuf(path, make([]byte, 32<<10), nil)
}

// hashMax is the largest file the review reads to hash, and hashBudget
// what one walk reads at most: persistence files are small, and a
// directory the agent filled with large files (a hooks directory of
// thousands of sparse 16 MiB files) made every later session spend
// minutes hashing. The others are recorded by identity and times
// (statHashPrefix).
const (
	hashMax        = 1 << 20
	hashBudget     = 64 << 20
	statHashPrefix = "stat:"
)

// describeBuf is describe, reading a file's content through buf, and no
// more than *budget bytes in all (nil: no bound), which it lowers.
func describeBuf(path string, buf []byte, budget *int64) (persistEntry, bool) {
	fi, err := os.Lstat(path)
	if err != nil {
		return persistEntry{}, false
	}
	ent := persistEntry{Mode: uint32(fi.Mode().Perm()), Size: fi.Size()}
	switch {
	case fi.Mode().IsRegular():
		ent.Type = "file"
		ent.Hash = fileHash(path, fi, buf, budget)
	case fi.IsDir():
		ent.Type, ent.Size = "dir", 0
	case fi.Mode()&fs.ModeSymlink != 0:
		ent.Type = "symlink"
		if t, err := os.Readlink(path); err == nil {
			sum := sha256.Sum256([]byte(t))
			ent.Hash = hex.EncodeToString(sum[:])
		}
	default:
		ent.Type = "other"
	}
	return ent, true
}

// fileHash hashes the content of the regular file path, read through buf
// (a fresh buffer per file costs a start-up its page faults).
func fileHash(path string, fi fs.FileInfo, buf []byte, budget *int64) string {
	h := sha256.New()
	if fi.Size() > hashMax || budget != nil && *budget < fi.Size() {
		// Not read: the file's identity and its times stand for its
		// content. A write moves the change time, which nothing the
		// agent can call sets back.
		st, _ := fi.Sys().(*syscall.Stat_t)
		if st == nil {
			st = &syscall.Stat_t{}
		}
		fmt.Fprintf(h, "ino %d size %d mtime %d ctime %d.%d", st.Ino, fi.Size(), fi.ModTime().UnixNano(), st.Ctim.Sec, st.Ctim.Nsec)
		return statHashPrefix + hex.EncodeToString(h.Sum(nil))
	}
	if budget != nil {
		*budget -= fi.Size()
	}
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintf(h, "unreadable: %v", err)
		return hex.EncodeToString(h.Sum(nil))
	}
	defer f.Close()
	for {
		n, err := f.Read(buf)
		h.Write(buf[:n])
		if err != nil {
			if err != io.EOF {
				fmt.Fprintf(h, "unreadable: %v", err)
			}
			break
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// diffPersistence lists what changed from before to after, by path.
func diffPersistence(before, after persistSnapshot) []reviewChange {
	var out []reviewChange
	for p, a := range after {
		b, ok := before[p]
		switch {
		case a.Type == unreadable:
			if !ok || b.Type != unreadable {
				out = append(out, reviewChange{Kind: "unreadable", Path: p, Rule: "a directory the review cannot list, which may hide any of them: " + a.Rule, Entry: a})
			}
		case !ok:
			out = append(out, reviewChange{Kind: "created", Path: p, Rule: a.Rule, Entry: a})
		case a.Type != b.Type || a.Hash != b.Hash || a.Size != b.Size && a.Type == "file":
			out = append(out, reviewChange{Kind: "modified", Path: p, Rule: a.Rule, Entry: a})
		case a.Mode != b.Mode:
			out = append(out, reviewChange{Kind: "mode changed", Path: p, Rule: a.Rule, Entry: a})
		}
	}
	for p, b := range before {
		if _, ok := after[p]; !ok && b.Type != unreadable {
			out = append(out, reviewChange{Kind: "deleted", Path: p, Rule: b.Rule})
		}
	}
	slices.SortFunc(out, func(x, y reviewChange) int { return strings.Compare(x.Path, y.Path) })
	return out
}

// writableByOthers says why the report f, and each directory from it up
// to state, is not the operator's alone: owned by another user, or
// writable by its group or others; "" when it is (or f does not exist).
func writableByOthers(f, state string) string {
	for p := f; ; p = filepath.Dir(p) {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			if p == f {
				return ""
			}
			return fmt.Sprintf("%s: %v", p, err)
		}
		if int(st.Uid) != os.Geteuid() {
			return fmt.Sprintf("%s is owned by uid %d", p, st.Uid)
		}
		if st.Mode&0o022 != 0 {
			return fmt.Sprintf("others can write %s (mode %04o)", p, st.Mode&0o7777)
		}
		if p == state || len(p) <= len(state) {
			return ""
		}
	}
}

func reviewFile(stateDir string) string { return filepath.Join(stateDir, "review", "last.json") }

// saveReview writes the report atomically (0600, in the state directory,
// which the agent cannot reach): a new file that takes the last one's
// place at once, so that a reader finds one whole report or the other.
//
// A report with changes is synced to disk before it takes that place, and
// the directory after: it is the record of what the agent left where
// programs outside the session will run it, and it outlives a crash. A
// report without changes, every other session's, is not, and takes the
// place by an exchange
// (renameat2 RENAME_EXCHANGE) with the last one, which is then removed:
// renamed over an existing file, ext4 (auto_da_alloc) allocates and starts
// writing the new file's blocks in the rename, which was 0.35-0.4 ms of
// every run's end on the machine the start-up is measured on, against
// about 0.05 ms (docs/design-amendments.md, the sixteenth pass). Where
// the system goes down before such a report reaches the disk, the file is
// left empty, and the review command says what that means.
func saveReview(stateDir string, r *reviewReport) error {
	path := reviewFile(stateDir)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b, err := encodeReview(r)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".last-*.json")
	if err != nil {
		return err
	}
	_, err = tmp.Write(append(b, '\n'))
	if err == nil && len(r.Changes) > 0 {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if len(r.Changes) == 0 && lastIsFile(path) && exchange(tmp.Name(), path) == nil {
		// The last report now has the temporary name.
		return os.Remove(tmp.Name())
	}
	// A report with changes; or no last report to exchange with (ENOENT),
	// or a file system without exchanges (EINVAL).
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if len(r.Changes) > 0 {
		// The rename, on disk too.
		d, err := os.Open(filepath.Dir(path))
		if err != nil {
			return err
		}
		defer d.Close()
		return d.Sync()
	}
	return nil
}

// lastIsFile reports whether path is a regular file or a symbolic link
// (which an exchange replaces, as a rename does); not a directory, which
// an exchange would move under the temporary name.
func lastIsFile(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && (fi.Mode().IsRegular() || fi.Mode()&fs.ModeSymlink != 0)
}

// exchange swaps the files at paths a and b in one step (renameat2(2),
// RENAME_EXCHANGE); a variable, so that a test can take it away.
var exchange = func(a, b string) error {
	return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
}

// encodeReview encodes r as json.MarshalIndent(r, "", "  ") does. A
// report without changes, every session's but those that changed a
// persistence file, is written here without reflection: encoding/json's
// first use in a process, building its encoders, took 0.25-0.3 ms of every
// run's end (docs/design-amendments.md, the eleventh pass).
// TestEncodeReviewMatchesJSON holds the two to the same bytes.
func encodeReview(r *reviewReport) ([]byte, error) {
	if len(r.Changes) > 0 {
		return json.MarshalIndent(r, "", "  ")
	}
	strs := func(b []byte, name string, v []string) []byte {
		b = append(b, ",\n  \""...)
		b = append(b, name...)
		b = append(b, "\": "...)
		switch {
		case v == nil:
			return append(b, "null"...)
		case len(v) == 0:
			return append(b, "[]"...)
		}
		b = append(b, '[')
		for i, s := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, "\n    "...)
			b = appendJSONString(b, s)
		}
		return append(b, "\n  ]"...)
	}
	ended, err := r.Ended.MarshalJSON()
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, 512)
	b = append(b, "{\n  \"schema\": "...)
	b = strconv.AppendInt(b, int64(r.Schema), 10)
	b = append(b, ",\n  \"ended\": "...)
	b = append(b, ended...)
	b = strs(b, "command", r.Command)
	b = append(b, ",\n  \"workspace\": "...)
	b = appendJSONString(b, r.Workspace)
	b = strs(b, "roots", r.Roots)
	if r.Changes == nil {
		b = append(b, ",\n  \"changes\": null"...)
	} else {
		b = append(b, ",\n  \"changes\": []"...)
	}
	if r.Incomplete != "" {
		b = append(b, ",\n  \"incomplete\": "...)
		b = appendJSONString(b, r.Incomplete)
	}
	return append(b, "\n}"...), nil
}

// appendJSONString appends s as a JSON string the way encoding/json writes
// one: <, > and & escaped, as are U+2028 and U+2029, and each byte of
// invalid UTF-8 written as U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// printReview prints the report's changes, one line each, for the
// operator at the session's end.
func (c *command) printReview(r *reviewReport) {
	if r.Incomplete != "" {
		c.errorf("session review: incomplete (%s)", r.Incomplete)
	}
	if len(r.Changes) == 0 {
		return
	}
	c.errorf("session review: %d change(s) to files that programs outside the session run or obey, or that the policy protects:", len(r.Changes))
	meta := false
	for _, ch := range r.Changes {
		c.errorf("  %s %s (%s)", ch.Kind, display(ch.Path), ch.Rule)
		meta = meta || ch.Kind == "owner changed" || ch.Entry == (persistEntry{}) && ch.Kind == "mode changed"
	}
	c.errorf("  agent-launcher review shows them again; agent-launcher review --remove removes what the session created")
	if meta {
		c.errorf("  the floor does not check chmod or chown yet: a mode or owner above is the session's doing unless yours; set it back")
	}
}

// review shows the last session's review and, with --remove, removes the
// persistence files the session created that are still as it left them.
func (c *command) review(args []string) int {
	flags := c.flagSet("review")
	jsonOut := flags.Bool("json", false, "")
	remove := flags.Bool("remove", false, "")
	pos, status, ok := c.parse(flags, args)
	if !ok {
		return status
	}
	if len(pos) > 0 {
		c.errorf("review: takes no arguments")
		return ExitFailure
	}
	lp := launcherPaths("", "")
	if why := writableByOthers(reviewFile(lp.StateDir), lp.StateDir); why != "" {
		c.errorf("review: not trusting %s: %s; another user could have written it (run starts make the state directories 0700 again)", reviewFile(lp.StateDir), why)
		return ExitFailure
	}
	b, err := os.ReadFile(reviewFile(lp.StateDir))
	if errors.Is(err, fs.ErrNotExist) {
		c.errorf("review: no session has ended here yet")
		return ExitFailure
	}
	if err == nil && len(b) == 0 {
		// saveReview: only a report without changes is written without
		// a sync, and only a crash before it reached the disk leaves it
		// empty.
		c.errorf("review: %s is empty: the system went down before the last session's report reached the disk; a report is left unsynced only when its session changed none of the persistence paths", reviewFile(lp.StateDir))
		return ExitFailure
	}
	var r reviewReport
	if err == nil {
		err = json.Unmarshal(b, &r)
	}
	if err != nil {
		c.errorf("review: %s: %v", reviewFile(lp.StateDir), err)
		return ExitFailure
	}
	if *remove {
		for _, ch := range r.Changes {
			if ch.Kind != "created" {
				continue
			}
			// Described as the session's end described it: a file
			// recorded by identity (fileHash) is compared by identity.
			var now persistEntry
			var ok bool
			if strings.HasPrefix(ch.Entry.Hash, statHashPrefix) {
				var none int64
				now, ok = describeBuf(ch.Path, make([]byte, 32<<10), &none)
			} else {
				now, ok = describe(ch.Path)
			}
			switch {
			case atOrAbove(ch.Path, append(slices.Clip(r.Roots), r.Workspace)...):
				// Never a directory the review walks, or one above it,
				// whatever the report says: a report the agent shaped
				// (a hooks path naming the workspace) must not make
				// --remove delete the workspace.
				fmt.Fprintf(c.stdout, "kept (the review walks it, or what is inside it): %s\n", display(ch.Path))
			case strings.ContainsRune(ch.Path, utf8.RuneError):
				// The report is JSON, which holds a name that is not
				// UTF-8 only with U+FFFD in place of its bytes: this is
				// not the name of the file the session made.
				fmt.Fprintf(c.stdout, "kept (its name is not UTF-8, and the report cannot hold it exactly; the session's end named it, escaped): %s\n", display(ch.Path))
			case !ok:
				fmt.Fprintf(c.stdout, "gone already: %s\n", display(ch.Path))
			case now.Type != ch.Entry.Type || now.Hash != ch.Entry.Hash:
				fmt.Fprintf(c.stdout, "kept (changed since the session ended): %s\n", display(ch.Path))
			case now.Type == "dir":
				if err := os.RemoveAll(ch.Path); err != nil {
					c.errorf("review: removing %s: %v", ch.Path, err)
					return ExitFailure
				}
				fmt.Fprintf(c.stdout, "removed: %s\n", display(ch.Path))
			default:
				if err := os.Remove(ch.Path); err != nil {
					c.errorf("review: removing %s: %v", ch.Path, err)
					return ExitFailure
				}
				fmt.Fprintf(c.stdout, "removed: %s\n", display(ch.Path))
			}
		}
		return ExitOK
	}
	if *jsonOut {
		writeJSON(c.stdout, r)
		return ExitOK
	}
	fmt.Fprintf(c.stdout, "session of %s, ended %s, workspace %s\n", plainLine(strings.Join(r.Command, " ")), r.Ended.Format(time.RFC3339), display(r.Workspace))
	if r.Incomplete != "" {
		fmt.Fprintf(c.stdout, "incomplete: %s\n", plainLine(r.Incomplete))
	}
	if len(r.Changes) == 0 {
		fmt.Fprintf(c.stdout, "no change to persistence files\n")
	}
	for _, ch := range r.Changes {
		fmt.Fprintf(c.stdout, "%-12s %s (%s)\n", ch.Kind, display(ch.Path), plainLine(ch.Rule))
	}
	return ExitOK
}

// Landlock does not check chmod, chown, utime or xattr calls (DESIGN.md
// section 8 leaves them to the seccomp supervisor of a later release): an
// agent can change the mode of a file the policy denies it, when the file
// is its operator's (an adversarial review made ~/.ssh/id_rsa 0644, and
// uid 65534 read it after the session). Until those calls are denied, the
// review records the mode and owner of the paths the policy names
// literally as denied, prompted or write-protected (and of what lies below
// a literal tree: ~/.ssh/**), wherever they are, and reports each one
// that changed. Only the metadata: their content the floor keeps the
// agent from, and the operator's own programs change (a credential
// refreshed during the session is no finding).

// metaLimit bounds the entries protectedMeta lists below literal trees.
const metaLimit = 4096

// metaEntry is a protected path's metadata as recorded.
type metaEntry struct {
	Mode     uint32 // permission bits, set-id and sticky bits
	Uid, Gid uint32
	Rule     string
}

// protectedLiteral is a path a deny, prompt or write-protect rule names
// literally, with the rule's pattern and whether it names the tree below
// it (a final "/**").
type protectedLiteral struct {
	path, rule string
	tree       bool
}

// protectedLiterals returns the protected literal paths of pol, by path,
// each once (a tree where any rule names it as one).
func protectedLiterals(pol *rules.Policy) []protectedLiteral {
	var out []protectedLiteral
	for _, r := range pol.Rules {
		switch {
		case r.Kind == rules.KindWriteProtect:
		case r.Kind == rules.KindTier && r.Tier <= rules.PromptWrite:
		default:
			continue
		}
		for i := range r.Globs {
			g := &r.Globs[i]
			// Only a literal path, or one followed by "/**": every segment
			// but a final "**" literal. Most globs are neither, and are
			// told apart without LiteralPrefix's cost, which every run's
			// start pays.
			segs := strings.Count(g.Text, "/")
			tree := strings.HasSuffix(g.Text, "/**")
			if !strings.HasPrefix(g.Text, "/") || g.LiteralSegments < segs-1 || g.LiteralSegments == segs-1 && !tree {
				continue
			}
			path := strings.TrimSuffix(g.Text, "/**")
			if strings.Contains(path, `\`) {
				prefix, rest := g.LiteralPrefix() // unescaped
				if prefix == "" || rest != "" && rest != "**" {
					continue
				}
				path = prefix
			}
			out = append(out, protectedLiteral{path: filepath.Clean(path), rule: g.Text, tree: tree})
		}
	}
	slices.SortStableFunc(out, func(a, b protectedLiteral) int { return strings.Compare(a.path, b.path) })
	// One entry a path: the first rule's pattern, a tree if any says so.
	for i := len(out) - 1; i > 0; i-- {
		if out[i].path == out[i-1].path {
			out[i-1].tree = out[i-1].tree || out[i].tree
			out = slices.Delete(out, i, i+1)
		}
	}
	return out
}

// protectedMeta records the metadata of the protected literal paths of
// pol and of what lies below their trees (up to metaLimit entries in all),
// outside skip (the launcher's state directory, which it changes itself),
// and of the directories above them up to the home directory or the
// workspace, both included: made writable to every user, they let another
// user replace what they hold (~/.bashrc, a new ~/.config/autostart: a
// second review).
// stateDirs are the launcher's state directory and the directories it
// keeps in it, which only their owner may write.
func stateDirs(state string) []string {
	return []string{state, filepath.Join(state, "review"), filepath.Join(state, "plans"), filepath.Join(state, "cache"), filepath.Join(state, "caches")}
}

func protectedMeta(pol *rules.Policy, skip, home, workspace string) map[string]metaEntry {
	out := map[string]metaEntry{}
	tried := map[string]bool{}
	budget := metaLimit
	literals := protectedLiterals(pol)
	// Most of the literal paths are absent credentials in the home
	// directory: the directories holding several are listed once, and
	// a name absent from the listing costs no lstat (resolver.expect).
	res := newResolver()
	names := make([]string, len(literals))
	for i, l := range literals {
		names[i] = l.path
	}
	res.expect(names)
	var record func(p, why string, below bool)
	record = func(p, why string, below bool) {
		if skip != "" && (p == skip || strings.HasPrefix(p, skip+"/")) {
			return
		}
		if tried[p] {
			return
		}
		tried[p] = true
		if c, ok := res.fromListing(p); ok && errors.Is(c.err, fs.ErrNotExist) {
			return
		}
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil {
			return
		}
		out[p] = metaOf(&st, why)
		if !below || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return
		}
		ents, err := landlock.OS().ReadDir(p)
		if err != nil {
			return
		}
		for _, e := range ents {
			if budget--; budget < 0 {
				return
			}
			record(childPath(p, e.Name), why, true)
		}
	}
	// The directories whose modes open everything in them to other users:
	// the home directory and the workspace (0777 lets another user replace
	// .git or ~/.bashrc), and the launcher's state (0777 lets another user
	// forge the report `review --remove` obeys), which the launcher, not
	// the review, writes in: only the directories themselves.
	record(home, "the home directory", false)
	record(workspace, "the workspace", false)
	if skip != "" {
		for _, d := range stateDirs(skip) {
			tried[d] = true
			var st unix.Stat_t
			if unix.Lstat(d, &st) == nil {
				out[d] = metaOf(&st, "the launcher's state")
			}
		}
	}
	for _, l := range literals {
		record(l.path, l.rule, l.tree)
		for _, top := range []string{home, workspace} {
			if top == "" || !strings.HasPrefix(l.path, top+"/") {
				continue
			}
			for d := filepath.Dir(l.path); ; d = filepath.Dir(d) {
				record(d, "the directory above "+l.rule, false)
				if d == top || len(d) <= len(top) {
					break
				}
			}
		}
	}
	return out
}

// metaOf is the metadata of st, recorded for rule.
func metaOf(st *unix.Stat_t, rule string) metaEntry {
	return metaEntry{Mode: st.Mode & 0o7777, Uid: st.Uid, Gid: st.Gid, Rule: rule}
}

// metaAgain records again the paths of before, as protectedMeta did: what
// diffMeta compares (a path recorded only after is no finding).
func metaAgain(before map[string]metaEntry) map[string]metaEntry {
	out := make(map[string]metaEntry, len(before))
	for p, b := range before {
		var st unix.Stat_t
		if unix.Lstat(p, &st) == nil {
			out[p] = metaOf(&st, b.Rule)
		}
	}
	return out
}

// diffMeta lists the protected paths whose mode or owner changed from
// before to after (a path created or removed meanwhile is not the
// agent's doing: the floor keeps it from them).
func diffMeta(before, after map[string]metaEntry) []reviewChange {
	var out []reviewChange
	for p, a := range after {
		b, ok := before[p]
		switch {
		case !ok:
		case a.Mode != b.Mode:
			out = append(out, reviewChange{Kind: "mode changed", Path: p, Rule: fmt.Sprintf("%s; mode %04o, was %04o", a.Rule, a.Mode, b.Mode)})
		case a.Uid != b.Uid || a.Gid != b.Gid:
			out = append(out, reviewChange{Kind: "owner changed", Path: p, Rule: fmt.Sprintf("%s; owner %d:%d, was %d:%d", a.Rule, a.Uid, a.Gid, b.Uid, b.Gid)})
		}
	}
	slices.SortFunc(out, func(x, y reviewChange) int { return strings.Compare(x.Path, y.Path) })
	return out
}

// mergeChanges adds to changes the metadata changes of paths it does not
// list already (a write-protected file in a write tree is both), in path
// order.
func mergeChanges(changes, meta []reviewChange) []reviewChange {
	for _, m := range meta {
		if !slices.ContainsFunc(changes, func(c reviewChange) bool { return c.Path == m.Path }) {
			changes = append(changes, m)
		}
	}
	slices.SortStableFunc(changes, func(x, y reviewChange) int { return strings.Compare(x.Path, y.Path) })
	return changes
}

// allGitPointers returns where the git configurations git reads for the
// workspace send git (gitConfigRoots, gitPointers).
func allGitPointers(workspace, home string) []gitPointer {
	files, bases := gitConfigRoots(workspace, home)
	var out []gitPointer
	for i, f := range files {
		out = append(out, gitPointers(f, bases[i], home)...)
	}
	return out
}

// gitDirHooksPaths returns the hooks directories the config of the git
// directory dir (and the files it includes) names inside its repository
// (its work tree, the directory above a .git, or dir itself for a bare
// repository), from which a relative one is taken; "~/" from home. One
// outside is not its to name: a planted config's "../../.." made the
// whole workspace its hooks.
func gitDirHooksPaths(dir, home string) []string {
	base := dir
	if filepath.Base(dir) == ".git" {
		base = filepath.Dir(dir)
	}
	return slices.DeleteFunc(hooksDirs(gitPointers(filepath.Join(dir, "config"), base, home)), func(h string) bool {
		return !strings.HasPrefix(h, base+"/")
	})
}

// readSmall reads the regular file path, refusing one larger than max
// (or anything else: a FIFO the agent planted would block the read;
// opened without blocking, it is refused).
func readSmall(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > max {
		return nil, fmt.Errorf("%s: not a regular file of at most %d bytes", path, max)
	}
	return io.ReadAll(io.LimitReader(f, max))
}

// gitConfigValues returns the values of section.key (both lower case) in a
// git config file's text: sections and keys case-insensitive, values
// unquoted, comments dropped. A section with a subsection is named
// "section.*", whatever the subsection ([includeIf "gitdir:~/w/"] is
// includeif.*). Enough for core.hooksPath and the include paths; not
// git's whole syntax (no continuation lines, no escapes but \" and \\).
func gitConfigValues(text, section, key string) []string {
	var out []string
	cur := ""
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			end := strings.IndexByte(line, ']')
			if end < 0 {
				cur = ""
				continue
			}
			// The section's name, and ".*" for one with a subsection:
			// "[includeIf \"gitdir:~/w/\"]" is includeif.*, and so is
			// "[includeIf.x]" (the old subsection form).
			name := strings.TrimSpace(line[1:end])
			sub := ""
			if i := strings.IndexAny(name, " \t\"."); i >= 0 {
				name, sub = name[:i], ".*"
			}
			cur = strings.ToLower(name) + sub
			line = strings.TrimSpace(line[end+1:]) // "[core] hooksPath = x"
		}
		if cur != section || line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		if strings.ToLower(strings.TrimSpace(k)) != key {
			continue
		}
		out = append(out, gitConfigValue(strings.TrimSpace(v)))
	}
	return out
}

// gitConfigValue unquotes a git config value and drops a trailing comment.
func gitConfigValue(v string) string {
	var b strings.Builder
	quoted := false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"':
			quoted = !quoted
		case c == '\\' && i+1 < len(v) && (v[i+1] == '"' || v[i+1] == '\\'):
			i++
			b.WriteByte(v[i])
		case !quoted && (c == '#' || c == ';'):
			return strings.TrimSpace(b.String())
		default:
			b.WriteByte(c)
		}
	}
	return strings.TrimSpace(b.String())
}
