package cli

import (
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agent-launcher/agent-launcher/rules"
	"github.com/agent-launcher/agent-launcher/tiers"
)

// A git configuration sends git elsewhere: include.path and
// includeIf.<condition>.path read another file as part of it, and
// core.hooksPath names the directory whose hooks git runs. The built-in
// write protection keeps ~/.gitconfig, git's XDG configuration and
// .git/config from the agent, but a file they include, or a hooks
// directory they name, can lie in a tree the policy lets the agent write
// (a dotfiles repository as the workspace: `[include] path =
// ~/dotfiles/gitconfig`), and what the agent writes there git obeys at the
// operator's next command (core.fsmonitor runs a program). So the
// protection of a git configuration extends to what it includes and to
// its hooks directories (protectGitPointers), as a symlink's does to its
// target (plan.go).

// maxIncludeDepth is git's own bound on nested includes.
const maxIncludeDepth = 10

// gitHookNames are the hooks git runs (githooks(5)): what is protected of a
// hooks directory that is the home directory, the workspace or above
// either, where protecting all of it would protect them whole.
const gitHookNames = "{applypatch-msg,pre-applypatch,post-applypatch,pre-commit,pre-merge-commit," +
	"prepare-commit-msg,commit-msg,post-commit,pre-rebase,post-checkout,post-merge,pre-push," +
	"pre-receive,update,proc-receive,post-receive,post-update,reference-transaction," +
	"push-to-checkout,pre-auto-gc,post-rewrite,sendemail-validate,fsmonitor-watchman," +
	"p4-changelist,p4-prepare-changelist,p4-post-changelist,p4-pre-submit,post-index-change}"

// gitPointer is one place a git configuration sends git.
type gitPointer struct {
	root   string // the configuration git reads first (~/.gitconfig, a .git/config)
	file   string // the file that says it: root, or a file root includes
	target string // an absolute, clean path
	hooks  bool   // target is a hooks directory (core.hooksPath), else an included file
}

// gitConfigRoots returns the git configurations git reads for the
// workspace, with the directory a relative core.hooksPath in each is taken
// from: the config of the repository the workspace is in (its own, or the
// first above it, as git finds it), ~/.gitconfig and git's XDG
// configuration.
func gitConfigRoots(workspace, home string) (files, bases []string) {
	xdg := os.Getenv("XDG_CONFIG_HOME")
	if !filepath.IsAbs(xdg) {
		xdg = filepath.Join(home, ".config")
	}
	top := ""
	for dir := workspace; dir != ""; {
		var st unix.Stat_t
		if unix.Lstat(filepath.Join(dir, ".git"), &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			top = dir
			break
		}
		if dir == "/" || dir == "." {
			break
		}
		dir = filepath.Dir(dir)
	}
	if top != "" {
		files, bases = append(files, filepath.Join(top, ".git", "config")), append(bases, top)
	}
	for _, f := range []string{filepath.Join(home, ".gitconfig"), filepath.Join(xdg, "git", "config")} {
		files, bases = append(files, f), append(bases, cmp.Or(top, workspace))
	}
	return files, bases
}

// gitPointers returns where the git configuration file root, and the files
// it includes (to git's depth), send git. base is the directory a relative
// core.hooksPath is taken from; "~/" is taken from home. Files that are
// not regular, or larger than 1 MiB, are not read (a FIFO the agent
// planted would block).
func gitPointers(root, base, home string) []gitPointer {
	var out []gitPointer
	seen := map[string]bool{root: true}
	var read func(file string, depth int)
	read = func(file string, depth int) {
		b, err := readSmall(file, 1<<20)
		if err != nil {
			return
		}
		text := string(b)
		for _, v := range gitConfigValues(text, "core", "hookspath") {
			if t := gitPath(v, base, home); t != "" {
				out = append(out, gitPointer{root: root, file: file, target: t, hooks: true})
			}
		}
		if depth >= maxIncludeDepth {
			return
		}
		for _, v := range slices.Concat(gitConfigValues(text, "include", "path"), gitConfigValues(text, "includeif.*", "path")) {
			t := gitPath(v, filepath.Dir(file), home)
			if t == "" || seen[t] {
				continue
			}
			seen[t] = true
			out = append(out, gitPointer{root: root, file: file, target: t})
			read(t, depth+1)
		}
	}
	read(root, 0)
	return out
}

// gitPath resolves a path a git configuration names: "~/" from home, a
// relative one from base; "" for one it cannot place ("~user/", empty).
func gitPath(v, base, home string) string {
	switch {
	case v == "":
		return ""
	case v == "~" || strings.HasPrefix(v, "~/"):
		v = filepath.Join(home, v[1:])
	case strings.HasPrefix(v, "~"):
		return ""
	case !filepath.IsAbs(v):
		v = filepath.Join(base, v)
	}
	return filepath.Clean(v)
}

// hooksDirs returns the hooks directories among ptrs, each once.
func hooksDirs(ptrs []gitPointer) []string {
	var out []string
	for _, p := range ptrs {
		if p.hooks && !slices.Contains(out, p.target) {
			out = append(out, p.target)
		}
	}
	return out
}

// protectGitPointers extends the protection of each git configuration the
// policy keeps the agent from writing to the files it includes and the
// hooks directories it names, where the policy would let the agent write
// them (a write protection, whose source says which configuration sent
// git there). A hooks directory that is the home directory, the
// workspace, or above either gets its hook names protected, not all of
// it.
func protectGitPointers(pol *rules.Policy, m *tiers.Matcher, ptrs []gitPointer, home, workspace string) (added int, err error) {
	around := func(dir string) bool { return atOrAbove(dir, home, workspace) }
	done := map[string]bool{}
	for _, p := range ptrs {
		d := m.Decide(p.root, tiers.OpWrite)
		if d.Verdict == tiers.Allowed || done[p.target] {
			continue
		}
		done[p.target] = true
		lit := rules.EscapeLiteral(p.target)
		how, note := "the core.hooksPath of "+p.file, "git runs the hooks there"
		var patterns []string
		switch {
		case !p.hooks:
			if around(p.target) || m.Decide(p.target, tiers.OpWrite).Verdict != tiers.Allowed {
				// One of the directories git cannot read as a file, or
				// an include the policy protects already
				// (~/.config/git/extra).
				continue
			}
			patterns = []string{lit}
			how, note = "included from "+p.file, "git reads it as part of its configuration"
		case around(p.target):
			patterns = []string{strings.TrimSuffix(lit, "/") + "/" + gitHookNames}
		default:
			patterns = []string{lit, lit + "/**"}
		}
		for _, pat := range patterns {
			if _, err := pol.AddReferenced(d.Rule, pat, how, note); err != nil {
				return added, err
			}
			added++
		}
	}
	return added, nil
}
