package landlock

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/agent-launcher/agent-launcher/rules"
	"github.com/agent-launcher/agent-launcher/tiers"
	"github.com/bmatcuk/doublestar/v4"
)

// FileType is the type of a filesystem entry.
type FileType uint8

const (
	TypeOther FileType = iota // fifo, socket, device
	TypeDir
	TypeFile
	TypeSymlink
)

func (t FileType) String() string {
	return [...]string{"other", "dir", "file", "symlink"}[t]
}

// Info is what the planner needs to know of one entry: an lstat.
type Info struct {
	Type  FileType
	Dev   uint64
	Ino   uint64
	Nlink uint64
	// View marks a directory of the private view that the init stage
	// makes (View.FS): Dev and Ino are not known when planning.
	View bool
}

// DirEntry is one name in a directory listing, with its type (d_type).
type DirEntry struct {
	Name string
	Type FileType
}

// FS is the planner's view of the filesystem at launch. The planner only
// reads it; OS returns the real one, tests use a map.
type FS interface {
	// Lstat describes path without following a final symlink.
	Lstat(path string) (Info, error)
	// ReadDir lists a directory.
	ReadDir(path string) ([]DirEntry, error)
	// Pseudo reports whether path, a directory on another device than its
	// parent, is the root of a filesystem whose names the kernel makes
	// (proc, sysfs, cgroup, ...): name patterns need not be searched there.
	Pseudo(path string) bool
	// Resolve returns the canonical path of the symlink path's target, as
	// the kernel would follow it.
	Resolve(path string) (string, error)
}

// Rule is one Landlock rule of a plan: Access on the file hierarchy below
// Path (a directory) or on the file Path. Dev and Ino identify the inode the
// planner saw; the apply step refuses a path that now names another.
type Rule struct {
	Path   string   `json:"path"`
	Dir    bool     `json:"dir"`
	Access Access   `json:"-"`
	Rights []string `json:"access"`
	Dev    uint64   `json:"dev"`
	Ino    uint64   `json:"ino"`
	// View: the inode is one the init stage makes for the private view
	// (a fresh tmpfs or /proc, or a directory on such a tmpfs); the apply
	// step checks that it lies on a filesystem the view mounted.
	View bool `json:"view,omitempty"`
}

// Carved is a granted directory that holds a carve-out: entries the policy
// protects more than the directory. It keeps only the rights that cannot
// reach the carve-outs (see the package documentation); Deferred are the
// rights the policy allows for new names in it that the floor therefore
// does not give, which the supervisor serves in a later release and which
// fail with EACCES until then.
type Carved struct {
	Path      string   `json:"path"`
	Kept      string   `json:"kept"`
	Deferred  string   `json:"deferred"`
	CarveOuts []string `json:"carve_outs"`
	Dev       uint64   `json:"-"`
	Ino       uint64   `json:"-"`
	// View: a directory of the private view (Rule.View), which nothing
	// outside the session can change.
	View bool `json:"view,omitempty"`
}

// Protected is an existing entry the floor gives less than its parent
// directory's rule would: a carve-out, or a path a deny or prompt rule
// names literally.
type Protected struct {
	Path  string     `json:"path"`
	Type  FileType   `json:"-"`
	Tier  tiers.Tier `json:"tier"`
	Nlink uint64     `json:"nlink"`
	Dev   uint64     `json:"-"`
	Ino   uint64     `json:"-"`
}

// Plan is the Landlock ruleset for one session. It is deterministic in its
// inputs: the matcher, the ABI and the filesystem snapshot.
type Plan struct {
	ABI       int         `json:"abi"`
	Handled   Access      `json:"-"`
	Scoped    Scope       `json:"-"`
	Rules     []Rule      `json:"rules"`
	Carved    []Carved    `json:"carved"`
	Protected []Protected `json:"protected"`
	// Canary is an existing path the policy denies reading and no rule
	// reaches: the init stage opens it after restricting itself and aborts
	// if that works.
	Canary string `json:"canary"`
	// Scanned counts the entries listed to resolve anywhere-patterns.
	Scanned int `json:"scanned"`
	// Links are symlinks whose own name the policy protects more than the
	// file they lead to (~/.bashrc -> a dotfiles repository in the
	// workspace). The kernel decides on the target, so the caller must
	// extend the protection to it (rules.Policy.AddDerived) and plan
	// again.
	Links []Link `json:"links,omitempty"`
	// Warnings are things the operator should know about the floor, one
	// sentence each.
	Warnings []string `json:"warnings,omitempty"`
	// Binds are the integrity carve-outs the private view enforces with a
	// mount over each existing path (Options.Integrity); the floor gives
	// their parent its full grant.
	Binds []Bind `json:"binds,omitempty"`
	// Unbound are integrity carve-outs no mount can enforce (a file with
	// another hard link, a directory holding something its protection does
	// not allow reading): the caller plans again with a rule that keeps
	// them read-only on the floor, by sibling rules.
	Unbound []Unbound `json:"unbound,omitempty"`
	// Sealed are the patterns of the built-in system secrets the floor
	// leaves to the file permissions, which alone keep the agent from
	// them (FloorPolicy); the caller sets them.
	Sealed []string `json:"sealed,omitempty"`
}

// Bind is an existing path the built-in write protection names inside a
// tree the policy lets the agent write: the init stage mounts it over
// itself, read-only (a file, or a directory whose contents are protected
// too: .git/hooks) or as a plain pin (a directory protected only as an
// entry: .git, which must not be renamed or replaced while its contents
// are the agent's to change). A mount point cannot be renamed, removed or
// replaced from inside the mount namespace (EBUSY); a read-only mount
// refuses every write below it (EROFS).
type Bind struct {
	Path     string `json:"path"`
	Dir      bool   `json:"dir"`
	ReadOnly bool   `json:"read_only"`
	// NoExec: the protection does not allow executing what lies there.
	NoExec bool   `json:"no_exec,omitempty"`
	Dev    uint64 `json:"dev"`
	Ino    uint64 `json:"ino"`
}

// Unbound is an integrity carve-out a mount cannot enforce, and why.
type Unbound struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Link is a protected symlink and its target.
type Link struct {
	Path   string `json:"path"`
	Target string `json:"target"`
}

// Options tune planning.
type Options struct {
	// MaxEntries bounds the entries listed to resolve anywhere-patterns
	// ("~/**/.env") in granted trees; 0 means DefaultMaxEntries.
	MaxEntries int
	// Canaries are paths to try first as the plan's canary (the launcher's
	// own state directory, which it creates before planning).
	Canaries []string
	// ScanRoots are the trees in which anywhere-patterns are resolved
	// against existing entries: the home directory and the workspace
	// (DESIGN.md section 7). Outside them such patterns do not shape the
	// floor (Plan.Warnings says so when a policy pattern is affected). Nil
	// means everywhere.
	ScanRoots []string
	// Integrity, when set, is the matcher of the whole policy, and the
	// planner's own matcher leaves the built-in write protection out: the
	// session's private view enforces it with a mount over each existing
	// protected path instead of sibling rules (DESIGN.md section 7,
	// integrity carve-outs), so that their parent keeps its full grant.
	// The planner finds those paths where the floor grants writing
	// (Plan.Binds, or Plan.Unbound when a mount cannot enforce one), and
	// decides symlinks and protected entries on the whole policy.
	Integrity *tiers.Matcher
	// LinkScanSkip are directories below a literal protected tree that the
	// hard-link check does not list: the caller vouches that no second
	// name of what they hold can matter (the agents' caches in the
	// launcher's state directory, which only sessions write, through a
	// mount from which link(2) reaches no other place). They stay
	// protected; only their contents are not searched for hard links.
	LinkScanSkip []string
}

// DefaultMaxEntries is the default bound of the anywhere-pattern scan.
const DefaultMaxEntries = 500_000

// Errors of planning; each is wrapped with the path concerned.
var (
	// ErrScanLimit: a granted tree is too large to search for the
	// anywhere-patterns that apply in it.
	ErrScanLimit = errors.New("too many entries to search")
	// ErrExposed: a rule above a scan root grants rights that reach an
	// entry in it the policy protects.
	ErrExposed = errors.New("protected entry reachable through a grant above it")
	// ErrHardLink: a protected file has another name, which a grant may reach.
	ErrHardLink = errors.New("protected file has more than one hard link")
	// ErrNoCanary: no existing path is denied, so the floor cannot be checked.
	ErrNoCanary = errors.New("no denied path to test the floor with")
)

// HardLinkError reports protected files with more than one hard link.
type HardLinkError struct {
	Files []Protected
}

func (e *HardLinkError) Error() string {
	var b strings.Builder
	for i, f := range e.Files {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s (%s tier) has %d hard links", f.Path, f.Tier, f.Nlink)
	}
	return b.String() + ": another name of the same file may lie in a granted tree, where the floor would expose it; remove the extra links (find / -xdev -samefile FILE lists them) or move the file"
}

func (e *HardLinkError) Unwrap() error { return ErrHardLink }

// verdicts is one path's verdict for every op.
type verdicts [tiers.NumOps]tiers.Verdict

// rightsFor returns the rights an entry of type t may have under v. TypeOther
// with unknown set means "any type": a name that does not exist yet.
func rightsFor(v verdicts, t FileType, unknown bool) Access {
	var a Access
	dir := unknown || t == TypeDir
	file := unknown || t == TypeFile || t == TypeOther
	if v[tiers.OpRead] == tiers.Allowed {
		if dir {
			a |= ReadDir
		}
		if file {
			a |= ReadFile
		}
	}
	if file && v[tiers.OpExec] == tiers.Allowed {
		a |= Execute
	}
	if file && v[tiers.OpWrite] == tiers.Allowed {
		a |= WriteFile | Truncate | IoctlDev
	}
	if v[tiers.OpCreate] == tiers.Allowed {
		a |= MakeRights
	}
	if v[tiers.OpDelete] == tiers.Allowed {
		a |= RemoveRights
	}
	if v[tiers.OpCreate] == tiers.Allowed && v[tiers.OpDelete] == tiers.Allowed {
		a |= Refer
	}
	return a
}

// applicable returns the rights that act on an entry of type t (unknown:
// all). A right that does not act on an entry cannot leak it.
func applicable(t FileType, unknown bool) Access {
	switch {
	case unknown:
		return allRights
	case t == TypeDir:
		return ReadDir | ContentRights
	case t == TypeSymlink:
		// Opening through a symlink is checked on its target; only the
		// entry itself (made, removed, moved) is the parent's business.
		return ContentRights
	}
	return FileRights | ContentRights
}

// constraint returns the rights a directory rule above an entry may carry
// without giving the entry more than v allows.
func constraint(v verdicts, t FileType, unknown bool) Access {
	return rightsFor(v, t, unknown) | (allRights &^ applicable(t, unknown))
}

// node is one directory of the snapshot, listed at most once.
type node struct {
	path    string
	info    Info
	entries []DirEntry
	listed  bool
	// The existing entries strictly below, once walked: the rights a rule
	// above them may carry (min) and the most any of them may have (max).
	walked   bool
	min, max Access
	// pseudo: the root of (or a directory on) a filesystem whose names the
	// kernel makes.
	pseudo bool
	// opaque: the directory cannot be listed; nothing is granted over it.
	opaque bool
}

type planner struct {
	m       *tiers.Matcher
	whole   *tiers.Matcher // the whole policy (Options.Integrity), or m
	binding bool           // Options.Integrity is set
	bound   map[string]bool
	fs      FS
	handled Access
	max     int
	roots   []string
	links   map[string]bool
	skipped map[string]bool // granted trees where anywhere-patterns were not resolved
	nodes   map[string]*node
	plan    *Plan
	// linkSkip is Options.LinkScanSkip.
	linkSkip []string
}

// NewPlan computes the Landlock rules that enforce m's policy as a floor on
// a kernel with Landlock ABI abi, given the filesystem fsys as it is at
// launch. See the package documentation for the algorithm and its limits.
func NewPlan(m *tiers.Matcher, abi int, fsys FS, opts Options) (*Plan, error) {
	if abi < 1 {
		return nil, fmt.Errorf("landlock: ABI %d: no Landlock to plan for", abi)
	}
	p := &planner{
		m: m, whole: m, fs: fsys, handled: HandledFS(abi), max: opts.MaxEntries, roots: opts.ScanRoots,
		links: map[string]bool{}, skipped: map[string]bool{}, bound: map[string]bool{},
		nodes: map[string]*node{}, linkSkip: opts.LinkScanSkip,
		plan: &Plan{ABI: abi, Handled: HandledFS(abi), Scoped: Scopes(abi)},
	}
	if p.max <= 0 {
		p.max = DefaultMaxEntries
	}
	if opts.Integrity != nil {
		p.whole, p.binding = opts.Integrity, true
	}
	root, err := p.node("/")
	if err != nil {
		return nil, err
	}
	if err := p.dir(root, 0); err != nil {
		return nil, err
	}
	if err := p.literals(); err != nil {
		return nil, err
	}
	pl := p.plan
	if len(p.skipped) > 0 {
		var dirs []string
		for d := range p.skipped {
			dirs = append(dirs, d)
		}
		sort.Strings(dirs)
		if len(dirs) > 8 {
			dirs = append(dirs[:8], "...")
		}
		pl.Warnings = append(pl.Warnings, fmt.Sprintf("the policy's patterns that match names anywhere (\"**/...\") are resolved against existing files only under the home directory and the workspace; in %s the floor grants what the other rules say", strings.Join(dirs, ", ")))
	}
	sort.Slice(pl.Rules, func(i, j int) bool { return pl.Rules[i].Path < pl.Rules[j].Path })
	sort.Slice(pl.Carved, func(i, j int) bool { return pl.Carved[i].Path < pl.Carved[j].Path })
	sort.Slice(pl.Protected, func(i, j int) bool { return pl.Protected[i].Path < pl.Protected[j].Path })
	pl.Protected = slices.CompactFunc(pl.Protected, func(a, b Protected) bool { return a.Path == b.Path })
	for i := range pl.Carved {
		c := &pl.Carved[i]
		prefix := strings.TrimSuffix(c.Path, "/") + "/"
		for _, f := range pl.Protected {
			if rel, ok := strings.CutPrefix(f.Path, prefix); ok && !slices.ContainsFunc(c.CarveOuts, func(o string) bool { return strings.HasPrefix(rel, o+"/") }) {
				c.CarveOuts = append(c.CarveOuts, rel)
			}
		}
	}
	for i := range pl.Rules {
		pl.Rules[i].Rights = strings.Split(pl.Rules[i].Access.String(), "|")
	}
	// A bind below a read-only one adds nothing; a pin's contents keep
	// their own binds (.git/hooks below a pinned .git).
	sort.Slice(pl.Binds, func(i, j int) bool { return pl.Binds[i].Path < pl.Binds[j].Path })
	all := slices.Clone(pl.Binds)
	pl.Binds = slices.DeleteFunc(pl.Binds, func(b Bind) bool {
		return slices.ContainsFunc(all, func(o Bind) bool { return o.ReadOnly && o.Dir && strings.HasPrefix(b.Path, o.Path+"/") })
	})
	// A mount point cannot be renamed, but a directory above it can, and
	// takes the mount along: the agent would move sub away and put its own
	// sub/.envrc in its place. Every ancestor the floor lets the agent
	// remove or move is pinned too, up to the first it does not (the
	// private view's own directories hold nothing that outlives the
	// session).
	pinned := map[string]bool{}
	for _, b := range pl.Binds {
		pinned[b.Path] = true
	}
	for _, b := range slices.Clone(pl.Binds) {
		for a := path.Dir(b.Path); a != "/" && pl.inherited(a)&(RemoveDir|RemoveFile|Refer) != 0; a = path.Dir(a) {
			if pinned[a] {
				continue
			}
			info, err := p.fs.Lstat(a)
			if err != nil || info.Type != TypeDir || info.View {
				break
			}
			pinned[a] = true
			pl.Binds = append(pl.Binds, Bind{Path: a, Dir: true, Dev: info.Dev, Ino: info.Ino})
		}
	}
	sort.Slice(pl.Binds, func(i, j int) bool { return pl.Binds[i].Path < pl.Binds[j].Path })
	sort.Slice(pl.Unbound, func(i, j int) bool { return pl.Unbound[i].Path < pl.Unbound[j].Path })
	var linked []Protected
	for _, f := range pl.Protected {
		if f.Type != TypeDir && f.Nlink > 1 {
			linked = append(linked, f)
		}
	}
	if len(linked) > 0 {
		return nil, &HardLinkError{Files: linked}
	}
	pl.Canary = p.canary(opts.Canaries)
	if pl.Canary == "" {
		return nil, fmt.Errorf("landlock: %w: the policy grants reading every existing path the planner looked at; deny something (the built-in denylist protects the launcher's state directory, which `run` creates)", ErrNoCanary)
	}
	return pl, nil
}

// decideAll returns m's verdict on path for every op.
func decideAll(m *tiers.Matcher, path string) verdicts {
	var v verdicts
	for op, d := range m.DecideAll(path) {
		v[op] = d.Verdict
	}
	return v
}

func (p *planner) verdicts(path string) verdicts { return decideAll(p.m, path) }

// wholeVerdicts is verdicts on the whole policy (Options.Integrity).
func (p *planner) wholeVerdicts(path string) verdicts { return decideAll(p.whole, path) }

func join(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// node returns the snapshot node of an existing directory.
func (p *planner) node(path string) (*node, error) {
	if n, ok := p.nodes[path]; ok {
		return n, nil
	}
	info, err := p.fs.Lstat(path)
	if err != nil {
		return nil, fmt.Errorf("landlock: planning: %w", err)
	}
	n := &node{path: path, info: info}
	p.nodes[path] = n
	return n, nil
}

// list lists n once.
func (p *planner) list(n *node) error {
	if n.listed {
		return nil
	}
	entries, err := p.fs.ReadDir(n.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		entries = nil // removed since it was seen
	case errors.Is(err, fs.ErrPermission):
		// The operator cannot list it, so neither can the planner: grant
		// nothing over it (opaque), rather than over what it may hold.
		n.opaque = true
		entries = nil
	case err != nil:
		return fmt.Errorf("landlock: planning: %w", err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	n.entries, n.listed = entries, true
	return nil
}

// sub returns the node of a child directory, and whether it lies on a
// pseudo filesystem (another device whose names the kernel makes).
func (p *planner) sub(n *node, name string) (*node, bool, error) {
	c, err := p.node(join(n.path, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil // removed since the listing
	}
	if err != nil {
		return nil, false, err
	}
	if c.info.Type != TypeDir {
		return nil, false, nil // replaced since the listing; not a directory now
	}
	if n.pseudo || c.info.Dev != n.info.Dev && p.fs.Pseudo(c.path) {
		c.pseudo = true
	}
	return c, c.pseudo, nil
}

// dir plans the directory n, whose ancestors' rules grant inh.
func (p *planner) dir(n *node, inh Access) error {
	st := p.m.Subtree(n.path)
	self := p.verdicts(n.path)
	// What a rule on n may carry so that no name below gets more than
	// the policy allows it; ReadDir also lists n itself.
	if n.pseudo {
		// Names there are the kernel's: no anywhere-pattern to resolve.
		st.Anywhere, st.AnywhereGrant = false, false
	}
	ignored := st.Anywhere && !p.scanned(n.path)
	if ignored {
		st.Anywhere, st.AnywhereGrant = false, false
	}
	// A scan root below a tree granted whole without a search (a
	// workspace under /tmp, which the default policy grants): that grant
	// reaches every entry of the root, and no rule below can take it back.
	// The root is searched, and an entry it holds that the grant reaches
	// but the policy protects refuses the plan.
	root := slices.Contains(p.roots, n.path)
	if inh != 0 && st.Anywhere && root {
		if err := p.walk(n); err != nil {
			return err
		}
		if over := inh &^ n.min & p.handled; over != 0 {
			return p.exposed(n, over)
		}
	}
	g := constraint(st.Weakest, TypeOther, true)
	if self[tiers.OpRead] != tiers.Allowed {
		g &^= ReadDir
	}
	g &= p.handled
	if ignored && g&^inh != 0 {
		p.skipped[n.path] = true
	}
	// With integrity binds, the write protection the planner's matcher
	// leaves out still decides where to look: below a directory where it
	// matches names anywhere every existing entry is visited, and below
	// one where it matches by literal or flat patterns the planner
	// descends, so that each protected path that exists is found.
	findBinds, seekBinds := false, false
	const writes = WriteFile | MakeRights | RemoveRights
	if p.binding && !n.pseudo && (st.AnywhereGrant || rightsFor(st.Strongest, TypeOther, true)&writes != 0) {
		whole := p.whole.Subtree(n.path)
		// Walked only where the floor lets the agent write (g, or what
		// n inherits): elsewhere no bind is needed, and the planner
		// descends to the writable trees below.
		findBinds = whole.Anywhere && p.scanned(n.path) && (inh|g)&writes != 0
		seekBinds = whole.Weakest != st.Weakest
	}
	walked := false
	if st.Anywhere && g&^inh != 0 || findBinds {
		if err := p.walk(n); err != nil {
			return err
		}
		g &= n.min
		walked = true
	}
	if g&^inh != 0 {
		p.plan.Rules = append(p.plan.Rules, Rule{Path: n.path, Dir: true, Access: g, Dev: n.info.Dev, Ino: n.info.Ino, View: n.info.View})
	} else if inh != 0 && root {
		// A scan root that a grant above reaches (a workspace under
		// /tmp or /dev/shm, which the default policy grants) gets a rule
		// of its own with what reaches it. Below the grant it gives no
		// path anything that did not reach it already; but the kernel
		// checks an access by walking up from it to the rules that grant
		// it, and with a rule here the walk ends at the workspace instead
		// of crossing the mount that brings it back into a private /tmp
		// or /dev/shm and climbing that tmpfs (tar + rm -rf in a
		// workspace on tmpfs: docs/design-amendments.md, the eighteenth
		// pass). Like every workspace's own rule, it is the directory's:
		// another path to it (a bind mount of the workspace made
		// elsewhere) gets the workspace's rights too, the same files.
		p.plan.Rules = append(p.plan.Rules, Rule{Path: n.path, Dir: true, Access: inh, Dev: n.info.Dev, Ino: n.info.Ino, View: n.info.View})
	}
	have := inh | g
	want := rightsFor(st.Strongest, TypeOther, true) & p.handled
	// Down to each scan root below, even through a tree granted whole:
	// with binds, the mounts protect what a grant from above cannot
	// withhold; and the root must be searched for what it exposes.
	descend := !st.Exact || want&^have != 0 || seekBinds || p.holdsRoot(n.path)
	if walked {
		descend = descend || n.max&p.handled&^have != 0
	} else if st.AnywhereGrant {
		descend = true
	}
	if !descend {
		return nil
	}
	if err := p.list(n); err != nil {
		return err
	}
	// n is carved when its own tier lets new names in it have rights the
	// floor does not give them.
	tree := rightsFor(self, TypeOther, true)
	if deferred := tree & want &^ have; deferred != 0 {
		p.carve(n, have, deferred)
	}
	for _, e := range n.entries {
		path := join(n.path, e.Name)
		v := p.verdicts(path)
		switch e.Type {
		case TypeDir:
			c, _, err := p.sub(n, e.Name)
			if err != nil {
				return err
			}
			if c == nil {
				continue
			}
			p.integrity(path, c.info, v)
			p.protect(path, c.info, v, tree)
			if err := p.dir(c, have); err != nil {
				return err
			}
		case TypeSymlink:
			// No rule: opening through it is decided on its target.
			p.link(path)
			p.integrity(path, Info{Type: TypeSymlink}, v)
		default:
			p.integrity(path, Info{Type: e.Type}, v)
			want := rightsFor(v, e.Type, false) & FileRights & p.handled
			restricted := rightsFor(v, e.Type, false)&WriteFile == 0
			if want&^have == 0 && !restricted {
				continue
			}
			info, err := p.fs.Lstat(path)
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed since the listing
			}
			if err != nil {
				return fmt.Errorf("landlock: planning: %w", err)
			}
			if info.Type == TypeDir || info.Type == TypeSymlink {
				continue // replaced since the listing
			}
			if want&^have != 0 {
				p.plan.Rules = append(p.plan.Rules, Rule{Path: path, Access: want, Dev: info.Dev, Ino: info.Ino, View: info.View})
			}
			p.protect(path, info, v, tree)
			if restricted && info.Nlink > 1 {
				// Another name of a protected file may lie in a granted tree.
				p.addProtected(path, info, p.m.Decide(path, tiers.OpRead).Tier)
			}
		}
	}
	return nil
}

// maxBindScan bounds the entries listed below a directory that would get
// a read-only bind, to check that its protection reaches all of them.
const maxBindScan = 20_000

// integrity records path, an existing entry of type info.Type, as an
// integrity carve-out when the planner works with binds
// (Options.Integrity), the whole policy write-protects it and the floor
// would let the agent write it: Plan.Binds when a mount over it can
// enforce the protection, else Plan.Unbound. It reports whether path is
// such a carve-out. v is the planner's verdicts on path.
func (p *planner) integrity(path string, info Info, v verdicts) bool {
	if !p.binding {
		return false
	}
	// Whether the policy makes path a carve-out depends on path alone:
	// asked again rather than remembered for every entry listed.
	d := p.whole.Decide(path, tiers.OpWrite)
	if d.Rule == nil || d.Rule.Kind != rules.KindWriteProtect || d.Verdict == tiers.Allowed ||
		v[tiers.OpWrite] != tiers.Allowed {
		return false
	}
	if done, ok := p.bound[path]; ok {
		return done
	}
	p.bound[path] = true
	if info.Dev == 0 && info.Ino == 0 {
		var err error
		if info, err = p.fs.Lstat(path); err != nil {
			p.bound[path] = false
			return false // gone since the listing
		}
	}
	unbound := func(format string, a ...any) bool {
		p.plan.Unbound = append(p.plan.Unbound, Unbound{Path: path, Reason: fmt.Sprintf(format, a...)})
		return true
	}
	if info.View {
		return unbound("the private view makes it")
	}
	w := p.wholeVerdicts(path)
	if w[tiers.OpRead] != tiers.Allowed {
		return unbound("its protection does not allow reading it")
	}
	b := Bind{Path: path, Dev: info.Dev, Ino: info.Ino, ReadOnly: true, NoExec: w[tiers.OpExec] != tiers.Allowed}
	switch info.Type {
	case TypeFile:
		if info.Nlink > 1 {
			return unbound("it has %d hard links; a mount covers one name", info.Nlink)
		}
	case TypeDir:
		b.Dir = true
		probe := p.whole.Decide(join(path, newNameProbe), tiers.OpWrite)
		if probe.Rule == nil || probe.Rule.Kind != rules.KindWriteProtect || probe.Verdict == tiers.Allowed {
			// Protected as an entry only (.git): pinned, its contents
			// decided by their own rules.
			b.ReadOnly, b.NoExec = false, false
			break
		}
		st := p.whole.Subtree(path)
		if !st.Exact || st.Weakest[tiers.OpRead] != tiers.Allowed {
			return unbound("the policy may deny reading names below it")
		}
		if st.Weakest[tiers.OpExec] != tiers.Allowed {
			b.NoExec = true
		}
		budget := maxBindScan
		if why := p.bindable(path, info.Dev, &b, &budget); why != "" {
			return unbound("%s", why)
		}
	default:
		return unbound("a %s cannot be mounted over", info.Type)
	}
	p.plan.Binds = append(p.plan.Binds, b)
	return true
}

// bindable checks that everything below dir, which would get a read-only
// bind, may be read under the whole policy, lies on the same filesystem
// and has no other hard link, and sets b.NoExec when something there may
// not be executed. It returns why not, or "".
func (p *planner) bindable(dir string, dev uint64, b *Bind, budget *int) string {
	entries, err := p.fs.ReadDir(dir)
	if err != nil {
		return fmt.Sprintf("listing %s: %v", dir, err)
	}
	for _, e := range entries {
		if *budget--; *budget < 0 {
			return fmt.Sprintf("it holds more than %d entries", maxBindScan)
		}
		path := join(dir, e.Name)
		w := p.wholeVerdicts(path)
		if w[tiers.OpRead] != tiers.Allowed {
			return fmt.Sprintf("the policy does not allow reading %s", path)
		}
		if w[tiers.OpExec] != tiers.Allowed {
			b.NoExec = true
		}
		if e.Type == TypeSymlink {
			continue // decided on its target
		}
		info, err := p.fs.Lstat(path)
		if err != nil {
			continue // gone since the listing
		}
		switch {
		case info.Dev != dev:
			return fmt.Sprintf("%s is another filesystem's mount point", path)
		case info.Type == TypeDir:
			if why := p.bindable(path, dev, b, budget); why != "" {
				return why
			}
		case info.Nlink > 1:
			return fmt.Sprintf("%s has %d hard links", path, info.Nlink)
		}
	}
	return ""
}

// protect records path as protected (a carve-out) when its parent's tier,
// tree, would give it rights the policy does not.
func (p *planner) protect(path string, info Info, v verdicts, tree Access) {
	if tree&applicable(info.Type, false)&^rightsFor(v, info.Type, false) == 0 {
		return
	}
	p.addProtected(path, info, p.m.Decide(path, tiers.OpRead).Tier)
}

func (p *planner) addProtected(path string, info Info, tier tiers.Tier) {
	p.plan.Protected = append(p.plan.Protected, Protected{Path: path, Type: info.Type, Tier: tier, Nlink: info.Nlink, Dev: info.Dev, Ino: info.Ino})
}

func (p *planner) carve(n *node, kept, deferred Access) {
	p.plan.Carved = append(p.plan.Carved, Carved{Path: n.path, Kept: kept.String(), Deferred: deferred.String(), Dev: n.info.Dev, Ino: n.info.Ino, View: n.info.View})
}

// walk lists everything below n to resolve anywhere-patterns, and sets
// n.min and n.max from the decisions of the existing entries.
func (p *planner) walk(n *node) error {
	if n.walked {
		return nil
	}
	if n.pseudo {
		n.min, n.max, n.walked = allRights, 0, true
		return nil
	}
	if err := p.list(n); err != nil {
		return err
	}
	n.min, n.max = allRights, 0
	if n.opaque {
		n.min, n.walked = 0, true
		return nil
	}
	for _, e := range n.entries {
		p.plan.Scanned++
		if p.plan.Scanned > p.max {
			return fmt.Errorf("landlock: %w: %s holds more than %d entries to search for the patterns that match names anywhere (\"**/...\"); narrow them or the granted tree", ErrScanLimit, n.path, p.max)
		}
		path := join(n.path, e.Name)
		v := p.verdicts(path)
		t := e.Type
		n.min &= constraint(v, t, false)
		n.max |= rightsFor(v, t, false) & applicable(t, false)
		p.integrity(path, Info{Type: t}, v)
		switch {
		case t == TypeSymlink:
			p.link(path)
			continue
		case t != TypeDir:
			if rightsFor(v, t, false)&WriteFile == 0 {
				// A protected file: another name of it may lie in a
				// granted tree.
				if info, ok := linkStat(p.fs, path); ok {
					p.addProtected(path, info, p.m.Decide(path, tiers.OpRead).Tier)
				}
			}
			continue
		}
		c, pseudo, err := p.sub(n, e.Name)
		if err != nil {
			return err
		}
		if c == nil || pseudo {
			continue
		}
		if err := p.walk(c); err != nil {
			return err
		}
		n.min &= c.min
		n.max |= c.max
	}
	n.walked = true
	return nil
}

// maxLiteralScan bounds the entries listed below one literal protected
// tree (~/.ssh, ~/.vim) for the hard-link check.
const maxLiteralScan = 20_000

// literals records the existing paths that deny, prompt and write-protect
// rules name literally ("/etc/shadow", "~/.bashrc", "~/.ssh/**": the
// directory, and the files below it with more than one hard link), for the
// hard-link and bind-mount checks. Only these trees are listed, bounded.
func (p *planner) literals() error {
	for _, r := range p.whole.Policy().Rules {
		switch {
		case r.Kind == rules.KindWriteProtect:
		case r.Kind == rules.KindTier && r.Tier <= tiers.PromptWrite:
		default:
			continue
		}
		for _, g := range r.Globs {
			path, tree, ok := g.LiteralPath()
			if !ok {
				continue
			}
			info, err := p.fs.Lstat(path)
			if err != nil {
				continue
			}
			v := p.verdicts(path)
			if p.integrity(path, info, v) {
				continue
			}
			if info.Type == TypeSymlink {
				p.link(path)
				continue
			}
			if rightsFor(v, info.Type, false)&WriteFile != 0 {
				continue // an exception or a more specific grant
			}
			p.addProtected(path, info, p.m.Decide(path, tiers.OpRead).Tier)
			if !tree || info.Type != TypeDir {
				continue
			}
			budget := maxLiteralScan
			if !p.scanLinks(path, &budget) {
				p.plan.Warnings = append(p.plan.Warnings, fmt.Sprintf("%s holds more than %d entries; only the first were checked for hard links", path, maxLiteralScan))
			}
		}
	}
	return nil
}

// scanLinks records the files below dir with more than one hard link that
// the policy protects, and the symlinks there that lead to something it
// protects less; false when the budget ran out.
func (p *planner) scanLinks(dir string, budget *int) bool {
	entries, err := p.fs.ReadDir(dir)
	if err != nil {
		return true
	}
	for _, e := range entries {
		if *budget--; *budget < 0 {
			return false
		}
		path := join(dir, e.Name)
		switch e.Type {
		case TypeSymlink:
			// A file a dotfile manager linked into the protected tree
			// (~/.ssh/config -> a repository in the workspace): the
			// kernel decides on the target.
			p.link(path)
		case TypeDir:
			if slices.Contains(p.linkSkip, path) {
				continue
			}
			if !p.scanLinks(path, budget) {
				return false
			}
		case TypeFile, TypeOther:
			info, ok := linkStat(p.fs, path)
			if !ok || info.Type == TypeDir {
				continue
			}
			if rightsFor(p.verdicts(path), info.Type, false)&WriteFile == 0 {
				p.addProtected(path, info, p.m.Decide(path, tiers.OpRead).Tier)
			}
		}
	}
	return true
}

// linkStat is the hard-link check's Lstat: the path's Info when it has
// more than one link, else false (an error, or a single link). The check
// needs nothing more, and a Recorder keeps nothing more of the answer: a
// file the launcher replaces in its state directory on every run does not
// change what the check sees.
func linkStat(fsys FS, path string) (Info, bool) {
	if l, ok := fsys.(linkStater); ok {
		return l.linkStat(path)
	}
	return plainLinkStat(fsys, path)
}

// linkStater is an FS (a Recorder, a view over one) that answers
// linkStat itself.
type linkStater interface {
	linkStat(path string) (Info, bool)
}

func plainLinkStat(fsys FS, path string) (Info, bool) {
	info, err := fsys.Lstat(path)
	if err != nil || info.Nlink < 2 {
		return Info{}, false
	}
	return info, true
}

// link records a symlink whose own name the policy protects more than the
// file it leads to: the kernel follows it, and decides on the target. Both
// are decided on the whole policy: a write-protected name enforced by a
// bind protects the target only if the target is protected too.
func (p *planner) link(path string) {
	if p.links[path] {
		return
	}
	p.links[path] = true
	target, err := p.fs.Resolve(path)
	if err != nil || target == path {
		return
	}
	v, t := p.wholeVerdicts(path), p.wholeVerdicts(target)
	for op := range tiers.NumOps {
		if t[op] > v[op] {
			p.plan.Links = append(p.plan.Links, Link{Path: path, Target: target})
			return
		}
	}
}

// exposed is the ErrExposed error for the scan root n, below which a rule
// above grants over: it names the first entry that over reaches and the
// policy protects (or a directory that cannot be listed, which may hold
// one), the nearest directory above that the plan grants, and the policy
// rule that grants it.
func (p *planner) exposed(n *node, over Access) error {
	var find func(n *node) (string, string)
	find = func(n *node) (string, string) {
		if n.opaque {
			return n.path, "cannot be listed (permission denied), so what it holds is unknown"
		}
		for _, e := range n.entries {
			path := join(n.path, e.Name)
			v := p.verdicts(path)
			if over&^constraint(v, e.Type, false) != 0 {
				if v[tiers.OpRead] == tiers.Allowed {
					return path, "the policy keeps read-only"
				}
				return path, "the policy protects"
			}
			if c, ok := p.nodes[path]; ok && e.Type == TypeDir && c.listed {
				if f, why := find(c); f != "" {
					return f, why
				}
			}
		}
		return "", ""
	}
	entry, why := find(n)
	if entry == "" {
		entry, why = "an entry of "+n.path, "the policy protects"
	}
	above, rule := "", ""
	for _, r := range p.plan.Rules {
		if r.Dir && r.Access&over != 0 && within(n.path, r.Path) && r.Path != n.path {
			above = r.Path // the rules go depth first: the last is the nearest
		}
	}
	if above == "" {
		above = "a directory above it"
	} else {
		op := tiers.OpWrite
		if over&ReadFile != 0 {
			op = tiers.OpRead
		}
		if d := p.m.Decide(above, op); d.Rule != nil {
			rule = fmt.Sprintf(" (the rule %q, %s)", d.Rule.Pattern, d.Rule.Source)
		}
	}
	return fmt.Errorf("landlock: %w: %s, which %s, lies in %s, below %s, which the policy grants whole%s with %s, without searching it for the patterns that match names anywhere; no rule below a grant can take it back. Move %s out of %s, or narrow that rule",
		ErrExposed, entry, why, n.path, above, rule, over&p.handled, n.path, above)
}

// holdsRoot reports whether a scan root (the home directory, the
// workspace) lies strictly below dir. The planner descends to it even
// through a tree granted whole (a workspace under the private /tmp): with
// binds the mounts protect what a grant from above cannot withhold, and
// the root is searched for what that grant would expose (ErrExposed).
func (p *planner) holdsRoot(dir string) bool {
	for _, r := range p.roots {
		if r != dir && within(r, dir) {
			return true
		}
	}
	return false
}

// scanned reports whether anywhere-patterns are resolved at dir.
func (p *planner) scanned(dir string) bool {
	if p.roots == nil {
		return true
	}
	for _, r := range p.roots {
		if within(dir, r) {
			return true
		}
	}
	return false
}

// canary picks an existing path the policy denies reading and no rule of
// the plan reaches.
func (p *planner) canary(first []string) string {
	var cands []string
	cands = append(cands, first...)
	for _, f := range p.plan.Protected {
		cands = append(cands, f.Path)
	}
	for _, c := range cands {
		info, err := p.fs.Lstat(c)
		if err != nil || info.Type == TypeSymlink {
			continue
		}
		if p.m.Decide(c, tiers.OpRead).Verdict != tiers.Denied {
			continue
		}
		if p.plan.Grants(c, info.Type)&(ReadFile|ReadDir) == 0 {
			return c
		}
	}
	return ""
}

// inherited returns the rights path gets from its ancestors' rules, of any
// type: for a directory, what the agent may do to it as an entry (remove
// it, move it).
func (pl *Plan) inherited(path string) Access {
	var a Access
	for _, r := range pl.Rules {
		if r.Dir && r.Path != path && (r.Path == "/" || strings.HasPrefix(path, r.Path+"/")) {
			a |= r.Access
		}
	}
	return a
}

// Grants returns the rights that act on path, of type t, through its own
// rule and its ancestors' rules (by name: hard links and bind
// mounts are the start-up checks' business). Only the rights that act on
// an entry of type t are returned.
func (pl *Plan) Grants(path string, t FileType) Access {
	var a Access
	for _, r := range pl.Rules {
		switch {
		case r.Path == path && r.Dir:
			// A directory's content rights act on its entries, not on it.
			a |= r.Access & ReadDir
		case r.Path == path:
			a |= r.Access
		case r.Dir && (r.Path == "/" || strings.HasPrefix(path, r.Path+"/")):
			a |= r.Access
		}
	}
	return a & applicable(t, false)
}

// FloorPolicy returns the policy the floor is planned on, and the
// patterns of the system secrets it leaves to the file permissions: whole's
// policy without each built-in system secret (/etc/shadow, ...) that the
// file permissions alone keep from the agent at every path it matches
// (sealedSecret), and, with integrity (the private view enforces the
// built-in write protection with mounts, Options.Integrity), without the
// write protection of existing paths, plus a literal one for each path in
// unbound, which a mount cannot protect and the floor must, by sibling
// rules (for a directory whose contents are protected too, its tree).
//
// A sealed secret needs no rule: the kernel refuses the agent with the
// mode bits, as it refuses every other user, and its rule inside a granted
// /etc would carve /etc into a rule per entry (140 here), with each entry
// replaced later (resolv.conf) unreachable until the next session. For
// root, or with a capability, no secret is sealed.
func FloorPolicy(whole *tiers.Matcher, fsys FS, integrity bool, unbound []Unbound) (*rules.Policy, []string, error) {
	q := *whole.Policy()
	q.Rules = nil
	var sealed []string
	for _, r := range whole.Policy().Rules {
		if r.SystemSecret() && sealedSecret(r, fsys) {
			sealed = append(sealed, r.Pattern)
			continue
		}
		if !integrity || r.Kind != rules.KindWriteProtect {
			q.Rules = append(q.Rules, r)
			continue
		}
		// A literal path or tree that does not exist yet (~/.zshrc,
		// ~/.config/systemd/user/**) keeps its rule: no mount can cover
		// it, and the floor keeps the agent from creating it where its
		// parent is carved. Names that match anywhere (.envrc) cannot be
		// covered before they exist; the session-end review reports them.
		var keep []rules.Glob
		for _, g := range r.Globs {
			if path, _, ok := g.LiteralPath(); ok {
				if _, err := fsys.Lstat(path); errors.Is(err, fs.ErrNotExist) {
					keep = append(keep, g)
				}
			}
		}
		if len(keep) > 0 {
			k := *r
			k.Globs = keep
			q.Rules = append(q.Rules, &k)
		}
	}
	for _, u := range unbound {
		r := whole.Decide(u.Path, tiers.OpWrite).Rule
		if r == nil || r.Kind != rules.KindWriteProtect {
			continue
		}
		patterns := []string{rules.EscapeLiteral(u.Path)}
		if info, err := fsys.Lstat(u.Path); err == nil && info.Type == TypeDir {
			if d := whole.Decide(join(u.Path, newNameProbe), tiers.OpWrite).Rule; d != nil && d.Kind == rules.KindWriteProtect {
				patterns = append(patterns, patterns[0]+"/**")
			}
		}
		for _, pattern := range patterns {
			globs, err := rules.ParsePattern(pattern)
			if err != nil {
				return nil, nil, fmt.Errorf("landlock: protecting %s: %w", u.Path, err)
			}
			src := r.Source
			src.Key += ", by sibling rules where " + u.Reason
			q.Rules = append(q.Rules, &rules.Rule{Pattern: pattern, Expanded: pattern, Globs: globs, Kind: rules.KindWriteProtect, Tier: rules.Read, Note: r.Note, Source: src})
		}
	}
	return &q, sealed, nil
}

// sealedSecret reports whether the file permissions alone keep the agent
// from every path r matches, now and where it may appear: each literal
// path (a tree's root), and for a pattern with one wildcard name under a
// literal directory (/etc/ssh/ssh_host_*_key) each entry there it matches
// and a new name there (sealedBy). Any other pattern keeps its rule.
func sealedSecret(r *rules.Rule, fsys FS) bool {
	for _, g := range r.Globs {
		if path, _, ok := g.LiteralPath(); ok {
			if !sealedBy(fsys, path) {
				return false
			}
			continue
		}
		dir, rest := g.LiteralPrefix()
		if dir == "" || strings.Contains(rest, "/") || strings.Contains(rest, "**") {
			return false
		}
		if !sealedBy(fsys, join(dir, newNameProbe)) {
			return false
		}
		entries, err := fsys.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue // a new name there was sealed: so is the directory's making
		}
		if err != nil {
			return false
		}
		for _, e := range entries {
			path := join(dir, e.Name)
			if ok, _ := doublestar.Match(g.Text, path); ok && !sealedBy(fsys, path) {
				return false
			}
		}
	}
	return true
}

// newNameProbe is a name that exists nowhere, to ask what the policy says
// of new names in a directory.
const newNameProbe = "agent-launcher-new-name"
