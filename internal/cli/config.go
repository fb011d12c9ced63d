package cli

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agent-launcher/agent-launcher/landlock"
	"github.com/agent-launcher/agent-launcher/rules"
	"github.com/agent-launcher/agent-launcher/tiers"
)

// policyFlags are the flags every policy-reading command shares.
type policyFlags struct {
	config    string
	agent     string
	workspace string
}

func (p *policyFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&p.config, "config", "", "policy file")
	fs.StringVar(&p.agent, "agent", "", "agent overlay to apply")
	fs.StringVar(&p.workspace, "workspace", "", "workspace directory (default: the current directory)")
}

// env is the part of the process environment the policy commands read.
type env struct {
	home      string
	workspace string
	config    string // "" = the embedded default
	launcher  rules.LauncherPaths
	// view is the session's private view the floor is planned for; nil
	// plans against the host's tree as it is.
	view *landlock.View
	// privateCwd is the working directory when the view makes it the
	// session's own (privateView), else "".
	privateCwd string
	// gitPtrs are where the git configurations git reads for the
	// workspace send git (allGitPointers), read once (gitRead) by the
	// first load.
	gitPtrs []gitPointer
	gitRead bool
	// keptUnder is the plan cache's key of the floor run planned last (""
	// when there is none): the review walk's index is kept under it.
	keptUnder string
	// settleKept, once a kept plan held, adds to it the stamps its
	// recording could not take (landlock.Observations.Settle); run calls
	// it after the session, off the start-up.
	settleKept func()
}

// configPath applies the lookup order of DESIGN.md section 11.
func configPath(flagValue string) (string, error) {
	if flagValue != "" {
		return absClean(flagValue)
	}
	if v, ok := os.LookupEnv("AGENT_LAUNCHER_CONFIG"); ok && v != "" {
		return absClean(v)
	}
	p := filepath.Join(configHome(), "agent-launcher", "config.toml")
	if _, err := os.Stat(p); err == nil {
		return p, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("cannot read %s: %w", p, err)
	}
	return "", nil
}

func configHome() string {
	if v := os.Getenv("XDG_CONFIG_HOME"); filepath.IsAbs(v) {
		return v
	}
	return filepath.Join(os.Getenv("HOME"), ".config")
}

func stateHome() string {
	if v := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(v) {
		return v
	}
	return filepath.Join(os.Getenv("HOME"), ".local", "state")
}

func absClean(p string) (string, error) {
	a, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("cannot make %q absolute: %w", p, err)
	}
	return a, nil
}

// canonical resolves p the way the kernel's path walk does: relative to the
// current directory, each symlink followed where it occurs (so "link/.." is
// the parent of the link's target, not the directory holding the link, and a
// dangling symlink leads to where a create would land), "." and ".." applied
// to the resolved prefix. The part that does not exist yet is appended as
// written (as is a part this user may not search); a ".." after a missing
// component is an error, as it is for the kernel.
func canonical(p string) (string, error) { return (*resolver)(nil).canonical(p) }

// A resolver resolves several paths as canonical does, reading each
// component from the filesystem once: the built-in rules' paths share
// their leading components (/home/u, /home/u/.config), and lstat is a
// system call of about 1.6 us on the machine start-up was measured on,
// where resolving them one by one cost about a hundred of them. Use one
// for one pass that reads the tree (nothing the launcher writes in
// between); the nil resolver remembers nothing.
type resolver struct {
	seen map[string]component
	// listable are the directories expect named, where many names are
	// looked up: each is listed once, when the first is, and its names
	// answered from the listing (listed; nil where it could not be read)
	// instead of by an lstat each. lstats counts the lstat calls made.
	listable map[string]bool
	listed   map[string]map[string]uint32
	lstats   int
}

// fsCasefoldFL is FS_CASEFOLD_FL (linux/fs.h), a case-insensitive
// directory's flag.
const fsCasefoldFL = 0x40000000

// minListed is how many names a directory must be expected to be asked
// of before it is listed instead: a listing is six system calls or so
// (listNames); an absent name's lstat is one, about 2 us here.
const minListed = 4

// expect tells r the paths it will resolve: a directory that holds the
// components of at least minListed of them is listed, once, by the
// first lookup in it. The built-in rules name some 70 paths in the home
// directory and 25 in ~/.config, most of them absent, which run resolved
// with an lstat each before the agent starts (about 0.6 ms here).
func (r *resolver) expect(paths []string) {
	count := map[string]int{}
	seen := map[string]bool{}
	for _, p := range paths {
		for p != "/" && p != "." && p != "" {
			if seen[p] {
				break // its ancestors are counted already
			}
			seen[p] = true
			dir := filepath.Dir(p)
			count[dir]++
			p = dir
		}
	}
	for dir, n := range count {
		if n >= minListed {
			if r.listable == nil {
				r.listable, r.listed = map[string]bool{}, map[string]map[string]uint32{}
			}
			r.listable[dir] = true
		}
	}
}

// fromListing answers name from its directory's listing, where expect
// asked for one: absent from it, ENOENT, as lstat would say; a directory
// or a symlink (read), as lstat would type them; anything else lstat
// answers (false). A name seen in a directory this user may list but not
// search would be EACCES to lstat: such a directory is not listed. What
// a name's type is, the listing says as lstat would, but for a mount over
// it, whose root lstat sees: a directory for a directory, and nothing a
// mount can cover turns a symlink into a directory for this purpose (a
// readlink there fails, and canonical says it cannot resolve the path).
func (r *resolver) fromListing(name string) (component, bool) {
	dir, base := filepath.Dir(name), filepath.Base(name)
	if r == nil || !r.listable[dir] || base == "." || base == ".." || base == "/" {
		return component{}, false
	}
	names, ok := r.listed[dir]
	if !ok {
		names = listNames(dir)
		r.listed[dir] = names
	}
	if names == nil {
		return component{}, false
	}
	mode, present := names[base]
	switch {
	case !present:
		return component{err: &fs.PathError{Op: "lstat", Path: name, Err: unix.ENOENT}}, true
	case mode == unix.S_IFDIR:
		return component{mode: mode}, true
	case mode == unix.S_IFLNK:
		c := component{mode: mode}
		c.target, c.lerr = os.Readlink(name)
		return c, true
	}
	return component{}, false
}

// listNames lists dir, each name with its type bits (S_IFDIR, S_IFLNK, or
// 0 for any other); nil where a listing may not say what lookups would:
// a directory this user may not both read and search, one on a
// filesystem other than a local one the kernel keeps (landlock.TrustedFS,
// those whose stamps the plan cache trusts; a network or FUSE
// filesystem's listing and lookups may come from different caches), and
// a case-insensitive one (ext4's or tmpfs's casefold: a lookup of
// ".bashrc" finds ".BashRC", which no listing names so).
func listNames(dir string) map[string]uint32 {
	if unix.Faccessat(unix.AT_FDCWD, dir, unix.R_OK|unix.X_OK, unix.AT_EACCESS) != nil {
		return nil
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	var sfs unix.Statfs_t
	if unix.Fstatfs(fd, &sfs) != nil || !landlock.TrustedFS(int64(sfs.Type)) {
		return nil
	}
	if flags, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS); err != nil || flags&fsCasefoldFL != 0 {
		return nil
	}
	ents, err := landlock.ReadDirFD(fd, dir)
	if err != nil {
		return nil
	}
	names := make(map[string]uint32, len(ents))
	for _, e := range ents {
		switch e.Type {
		case landlock.TypeDir:
			names[e.Name] = unix.S_IFDIR
		case landlock.TypeSymlink:
			names[e.Name] = unix.S_IFLNK
		default:
			names[e.Name] = 0
		}
	}
	return names
}

// component is what a path walk learned of one name.
type component struct {
	mode   uint32 // st_mode's type bits
	err    error  // the lstat's error
	target string // a symlink's target
	lerr   error  // the readlink's error
}

func newResolver() *resolver { return &resolver{seen: map[string]component{}} }

// lookup lstats name, and reads it when it is a symlink.
func (r *resolver) lookup(name string) component {
	if r != nil {
		if c, ok := r.seen[name]; ok {
			return c
		}
	}
	if c, ok := r.fromListing(name); ok {
		r.seen[name] = c
		return c
	}
	if r != nil {
		r.lstats++
	}
	var c component
	var st unix.Stat_t
	err := unix.Lstat(name, &st)
	for err == unix.EINTR {
		err = unix.Lstat(name, &st)
	}
	if err != nil {
		c.err = &fs.PathError{Op: "lstat", Path: name, Err: err}
	} else {
		c.mode = st.Mode & unix.S_IFMT
		if c.mode == unix.S_IFLNK {
			c.target, c.lerr = os.Readlink(name)
		}
	}
	if r != nil {
		r.seen[name] = c
	}
	return c
}

func (r *resolver) canonical(p string) (string, error) {
	if p == "" {
		return "", errors.New("empty path")
	}
	if !filepath.IsAbs(p) {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("cannot find the current directory: %w", err)
		}
		p = wd + "/" + p
	}
	const maxLinks = 40 // the kernel's MAXSYMLINKS
	done := "/"
	rest := strings.Split(p, "/")
	links := 0
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			done = filepath.Dir(done)
			continue
		}
		next := filepath.Join(done, c)
		comp := r.lookup(next)
		err := comp.err
		// What does not exist, or what this user may not look into, is
		// taken as written: the policy decides on the name either way.
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			for _, r := range rest {
				if r == ".." {
					return "", fmt.Errorf("%s does not exist, so %q cannot be resolved", next, p)
				}
			}
			return filepath.Join(next, strings.Join(rest, "/")), nil
		}
		if err != nil {
			return "", fmt.Errorf("cannot resolve %s: %w", p, err)
		}
		if comp.mode == unix.S_IFLNK {
			if links++; links > maxLinks {
				return "", fmt.Errorf("cannot resolve %s: too many levels of symbolic links", p)
			}
			if comp.lerr != nil {
				return "", fmt.Errorf("cannot resolve %s: %w", p, comp.lerr)
			}
			if filepath.IsAbs(comp.target) {
				done = "/"
			}
			rest = append(strings.Split(comp.target, "/"), rest...)
			continue
		}
		if comp.mode != unix.S_IFDIR && slices.ContainsFunc(rest, func(r string) bool { return r != "" && r != "." }) {
			return "", fmt.Errorf("cannot resolve %s: %s is not a directory", p, next)
		}
		done = next
	}
	return done, nil
}

// canonicalParent resolves everything but the last component of p, which
// it appends as written: the path unlink or rename acts on.
func canonicalParent(p string) (string, error) {
	dir, base := filepath.Split(strings.TrimRight(p, "/"))
	if base == "" || base == "." || base == ".." {
		return canonical(p)
	}
	if dir == "" {
		dir = "."
	}
	d, err := canonical(dir)
	if err != nil {
		return "", err
	}
	return filepath.Join(d, base), nil
}

// resolveEnv finds the policy file, home, workspace and the launcher's own
// paths.
func resolveEnv(pf *policyFlags) (*env, error) {
	e := &env{}
	home := os.Getenv("HOME")
	if home == "" || !filepath.IsAbs(home) {
		return nil, errors.New("HOME is not set to an absolute path; set it, the policy's \"~\" needs it")
	}
	var err error
	if e.home, err = canonical(home); err != nil {
		return nil, err
	}
	ws := pf.workspace
	if ws == "" {
		if ws, err = os.Getwd(); err != nil {
			return nil, fmt.Errorf("cannot find the current directory for the workspace: %w", err)
		}
	}
	if e.workspace, err = canonical(ws); err != nil {
		return nil, err
	}
	if st, err := os.Stat(e.workspace); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("workspace %s is not a directory; pass --workspace DIR", e.workspace)
	}
	if e.config, err = configPath(pf.config); err != nil {
		return nil, err
	}
	e.launcher = launcherPaths(e.config, pf.agent)
	return e, nil
}

// maxConfigLinks bounds the entries of one launcher configuration
// directory looked at for symlinks.
const maxConfigLinks = 1024

// launcherPaths lists the launcher's own files for the built-in denylist.
func launcherPaths(config, agent string) rules.LauncherPaths {
	res := newResolver()
	lp := rules.LauncherPaths{
		ConfigDir: filepath.Join(configHome(), "agent-launcher"),
		StateDir:  filepath.Join(stateHome(), "agent-launcher"),
	}
	// The default location too, when XDG_CONFIG_HOME moves it elsewhere:
	// a later session without the variable would read it.
	if def := filepath.Join(os.Getenv("HOME"), ".config", "agent-launcher"); def != lp.ConfigDir {
		lp.ConfigFiles = append(lp.ConfigFiles, def+"/")
	}
	// The state directory's default place too: the sessions of a run
	// without XDG_STATE_HOME trust the plans and automata kept there.
	if def := filepath.Join(os.Getenv("HOME"), ".local", "state", "agent-launcher"); def != lp.StateDir && filepath.IsAbs(def) {
		lp.OtherStateDirs = append(lp.OtherStateDirs, def)
	}
	if v := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(v) {
		lp.RuntimeDir = filepath.Join(v, "agent-launcher")
	} else {
		lp.RuntimeDir = filepath.Join(lp.StateDir, "run")
	}
	if config != "" {
		// The path as given and as resolved: an agent that replaced a
		// symlink to the policy would write the operator's next policy.
		lp.ConfigFiles = append(lp.ConfigFiles, config)
		lp.AgentsDir = filepath.Join(filepath.Dir(config), "agents")
		if c, err := res.canonical(config); err == nil && c != config {
			lp.ConfigFiles = append(lp.ConfigFiles, c, filepath.Join(filepath.Dir(c), "agents")+"/")
		}
	}
	if exe, err := os.Executable(); err == nil {
		if r, err := filepath.EvalSymlinks(exe); err == nil {
			lp.Executable = r
		}
	}
	// Resolve what exists, so that the rules match canonical paths (a
	// HOME that is a symlink, as /home -> /var/home on Fedora Silverblue).
	for _, p := range []*string{&lp.ConfigDir, &lp.StateDir, &lp.RuntimeDir, &lp.AgentsDir} {
		if *p != "" {
			if c, err := res.canonical(*p); err == nil {
				*p = c
			}
		}
	}
	for i, d := range lp.OtherStateDirs {
		if c, err := res.canonical(d); err == nil {
			lp.OtherStateDirs[i] = c
		}
	}
	// Symlinks in the launcher's configuration directories (an overlay
	// GNU stow links from a dotfiles repository, agents/coder.toml ->
	// ~/dotfiles/coder.toml): where each leads is the launcher's policy
	// too. The planner finds such links only in the trees it can see,
	// and a policy under /tmp or /var/tmp is out of the session's view.
	dirs := []string{lp.ConfigDir, filepath.Join(lp.ConfigDir, "agents"), lp.AgentsDir}
	for _, f := range lp.ConfigFiles {
		if strings.HasSuffix(f, "/") {
			dirs = append(dirs, strings.TrimSuffix(f, "/"), filepath.Join(f, "agents"))
		}
	}
	seen := map[string]bool{}
	for _, d := range dirs {
		if d == "" || seen[d] {
			continue
		}
		seen[d] = true
		ents, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for i, ent := range ents {
			if i == maxConfigLinks {
				break
			}
			if ent.Type()&fs.ModeSymlink == 0 {
				continue
			}
			link := filepath.Join(d, ent.Name())
			if c, err := res.canonical(link); err == nil && c != link {
				if st, err := os.Stat(c); err == nil && st.IsDir() {
					c += "/"
				}
				lp.ConfigFiles = append(lp.ConfigFiles, c)
			}
		}
	}
	// Config files as given and as resolved: replacing the given name (a
	// symlink) would redirect the next session as much as editing the file.
	for _, f := range slices.Clone(lp.ConfigFiles) {
		dir := strings.HasSuffix(f, "/")
		if c, err := res.canonical(strings.TrimSuffix(f, "/")); err == nil {
			if dir {
				c += "/"
			}
			if c != f && !slices.Contains(lp.ConfigFiles, c) {
				lp.ConfigFiles = append(lp.ConfigFiles, c)
			}
		}
	}
	return lp
}

func (e *env) options(agent string) rules.Options {
	return rules.Options{Config: e.config, Agent: agent, Home: e.home, Workspace: e.workspace,
		LookupEnv: os.LookupEnv, Launcher: e.launcher}
}

// compiled is one agent's policy, compiled.
type compiled struct {
	name string // "" for the global policy
	pol  *rules.Policy
	m    *tiers.Matcher
}

// load loads and compiles the policy of one agent ("" = global).
func (e *env) load(agent string) (*compiled, error) {
	pol, err := rules.Load(e.options(agent))
	if err != nil {
		return nil, err
	}
	// The compiled automata are cached in the state directory: compiling
	// the built-in rules costs more than the rest of a launch.
	var cache tiers.Cache = newFileCache(filepath.Join(e.launcher.StateDir, "cache"))
	m, err := tiers.CompileCached(pol, cache)
	if err != nil {
		return nil, err
	}
	// What protected git configurations include or name as their hooks
	// (gitconfig.go), and protected paths that lead elsewhere through
	// symlinks (plan.go): protect where they lead too, and compile again
	// when that added rules.
	if !e.gitRead {
		e.gitPtrs, e.gitRead = allGitPointers(e.workspace, e.home), true
	}
	n, err := protectGitPointers(pol, m, e.gitPtrs, e.home, e.workspace)
	if err != nil {
		return nil, err
	}
	if k, err := protectResolved(pol, m); err != nil {
		return nil, err
	} else if n+k > 0 {
		if m, err = tiers.CompileCached(pol, cache); err != nil {
			return nil, err
		}
	}
	return &compiled{name: agent, pol: pol, m: m}, nil
}

// reportPolicyError prints a policy error as one line per problem, each
// once (check loads several agents that share the global file).
func (c *command) reportPolicyError(err error) {
	seen := map[string]bool{}
	for _, one := range flatten(err) {
		var list rules.ErrorList
		if errors.As(one, &list) {
			for _, e := range list {
				if s := e.Error(); !seen[s] {
					seen[s] = true
					c.errorf("%s", s)
				}
			}
			continue
		}
		if s := strings.TrimPrefix(one.Error(), "tiers: "); !seen[s] {
			seen[s] = true
			c.errorf("%s", s)
		}
	}
}

// riskyWorkspace says why a workspace would grant far more than a project,
// or "". Run refuses /, the home directory and /tmp (DESIGN.md section 7);
// check warns about those and the others here.
func riskyWorkspace(ws, home string) string {
	switch ws {
	case "/":
		return "the workspace is /, which run refuses: it would grant the whole filesystem"
	case home:
		return "the workspace is the home directory, which run refuses: it would grant every file you own"
	case "/tmp":
		return "the workspace is /tmp, which run refuses: it is shared with every other program"
	case "/var/tmp", "/dev/shm", "/home", "/usr", "/etc", "/var", "/opt", "/root", "/srv", "/run":
		return "the workspace is " + ws + ", a system directory; choose a project directory"
	}
	if strings.HasPrefix(home, ws+"/") {
		return "the workspace " + ws + " contains the home directory: it would grant every file you own"
	}
	return ""
}
