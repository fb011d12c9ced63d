package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agent-launcher/agent-launcher/landlock"
	"github.com/agent-launcher/agent-launcher/rules"
	"github.com/agent-launcher/agent-launcher/tiers"
)

// The policy decides on canonical paths, and the kernel follows symlinks.
// A protected name that is, or lies under, a symlink (~/.bashrc into a
// dotfiles repository in the workspace, ~/.config linked there whole,
// .git/hooks into the project) would lose its protection: what the agent
// reaches is the target, which the policy may grant. Two passes extend the
// protection to the targets:
//
//   - protectResolved, for every command: each protecting rule whose
//     literal leading part resolves elsewhere gets a twin rule at the
//     resolved place (the operator's own layout, read before anything ran);
//   - planFloor, for run and check --landlock: symlinks the planner meets in
//     granted trees whose own name a rule protects (a .git/hooks link in the
//     workspace). These the agent of an earlier session may have planted, so
//     they are extended only into the home directory or the workspace, never
//     over either's root or an ancestor of it, to a directory only for a
//     rule that protects trees, and each is named at start.

// protectResolved adds, for each protecting rule (rules.Rule.Protects) whose
// leading literal segments pass through a symlink, the same rule at the
// resolved location. It reads only those paths' components.
func protectResolved(pol *rules.Policy, m *tiers.Matcher) (added int, err error) {
	// Each protecting rule's literal prefixes, collected first, so that
	// the resolver lists the directories most of them are in (expect).
	type named struct {
		r            *rules.Rule
		prefix, rest string
	}
	var all []named
	var prefixes []string
	for _, r := range pol.Rules {
		if !r.Protects() {
			continue
		}
		for _, g := range r.Globs {
			if prefix, rest := g.LiteralPrefix(); prefix != "" {
				all = append(all, named{r, prefix, rest})
				prefixes = append(prefixes, prefix)
			}
		}
	}
	res := newResolver()
	res.expect(prefixes)
	memo := map[string]string{}
	for _, n := range all {
		resolved, ok := memo[n.prefix]
		if !ok {
			c, err := res.canonical(n.prefix)
			if err != nil {
				c = n.prefix // unresolvable: the kernel cannot follow it either
			}
			memo[n.prefix], resolved = c, c
		}
		if resolved == n.prefix {
			continue
		}
		pattern := rules.EscapeLiteral(resolved)
		if n.rest != "" {
			pattern += "/" + n.rest
		}
		if _, err := pol.AddDerived(n.r, derivedTier(m, n.r, n.prefix, resolved), pattern, n.prefix); err != nil {
			return added, err
		}
		added++
	}
	return added, nil
}

// derivedTier picks the tier of a rule derived from r for target, which the
// name path leads to: the most permissive tier that answers no op more
// permissively than the policy answers it at the name or at the target, so
// that a derived rule only ever protects (a prompt name leading to a
// read-only file must not make writing it a matter of approval).
func derivedTier(m *tiers.Matcher, r *rules.Rule, name, target string) rules.Tier {
	if r.Kind != rules.KindTier {
		return r.Tier
	}
	var limit [tiers.NumOps]tiers.Verdict
	for op := range tiers.NumOps {
		a, b := m.Decide(name, tiers.Op(op)).Verdict, m.Decide(target, tiers.Op(op)).Verdict
		limit[op] = min(a, b, tiers.TierVerdict(r.Tier, tiers.Op(op)))
	}
	for t := r.Tier; ; t-- {
		ok := true
		for op := range tiers.NumOps {
			if tiers.TierVerdict(t, tiers.Op(op)) > limit[op] {
				ok = false
				break
			}
		}
		if ok || t == rules.Deny {
			return t
		}
	}
}

// maxLinkRounds bounds the re-planning for symlinks found in granted trees.
const maxLinkRounds = 3

// planFloor plans the Landlock floor for p on ABI abi, extending the
// protection of protected names that are symlinks in granted trees to
// their targets (see above) and planning again; the returned compiled
// policy is the one planned. notes name each extension, for the operator.
func (e *env) planFloor(p *compiled, abi int, canary string) (pl *landlock.Plan, out *compiled, notes []string, err error) {
	pl, out, notes, _, err = e.planFloorOn(landlock.OS(), p, abi, canary)
	return pl, out, notes, err
}

// viewAsRun sets e up to plan as run plans: for the session's private
// view of the current directory, with the agent's cache in it (not made).
// Where the current directory cannot be found, e plans for the host's tree.
func (e *env) viewAsRun(p *compiled, agent string) {
	if cwd, err := os.Getwd(); err == nil {
		if cwd, err = canonical(cwd); err == nil {
			e.view = e.privateView(p.pol, cwd)
			e.addAgentCache(p.m, agent, false)
		}
	}
}

// planFloorOn is planFloor asking base every question about the
// filesystem (a landlock.Recorder, for the plan cache). reused is false
// when the plan depends on more than base's answers and the policy (a
// protection extended to a symlink's target changed the policy): it
// cannot be reused.
func (e *env) planFloorOn(base landlock.FS, p *compiled, abi int, canary string) (pl *landlock.Plan, out *compiled, notes []string, reusable bool, err error) {
	reusable = true
	// Two directories of the launcher's state are not searched for hard
	// links. The agents' caches are theirs to fill (agentcache.go): no
	// session can give what they hold a second name (the view binds them,
	// and link(2) does not cross a mount), and a build fills them with
	// more files than the check should list at every start. The kept
	// plans change with every new workspace, which would make every plan
	// answer differently; planCache.get checks each entry's links itself.
	opts := landlock.Options{ScanRoots: []string{e.home, e.workspace},
		LinkScanSkip: []string{filepath.Join(e.launcher.StateDir, "caches"), e.planCache().dir}}
	if canary != "" {
		opts.Canaries = []string{canary}
	}
	done := map[string]bool{}
	// With the private view, the built-in write protection of existing
	// paths is enforced by mounts (landlock.Bind): the floor is planned on
	// the policy without it, except at the paths a mount cannot protect.
	// The floor's policy leaves out the system secrets the file
	// permissions keep from the agent (landlock.FloorPolicy).
	var floor *tiers.Matcher
	var sealed []string
	var unbound []landlock.Unbound
	for round := 0; ; round++ {
		fsys := base
		opts.Integrity = nil
		if floor == nil {
			if floor, sealed, err = e.compileFloor(base, p, unbound); err != nil {
				return nil, p, notes, false, err
			}
		}
		if e.view != nil {
			fsys = e.view.FS(fsys) // planned as the agent will see it
			opts.Integrity = p.m
		}
		pl, err := landlock.NewPlan(floor, abi, fsys, opts)
		if err != nil {
			return nil, p, notes, false, err
		}
		pl.Sealed = sealed
		// New paths a mount cannot protect change only the floor's policy.
		for _, u := range pl.Unbound {
			if !slices.ContainsFunc(unbound, func(o landlock.Unbound) bool { return o.Path == u.Path }) {
				unbound = append(unbound, u)
				floor = nil
			}
		}
		added := 0 // derived rules, which change the whole policy
		for _, l := range pl.Links {
			if done[l.Path] {
				continue
			}
			done[l.Path] = true
			r := protectingRule(p.m, l.Path)
			if r == nil {
				continue
			}
			if !e.extendable(l.Target) {
				notes = append(notes, fmt.Sprintf("%s is protected (%s) but leads to %s; the protection is not extended there (outside the home directory and the workspace, or over a root of them)", display(l.Path), ruleName(r), display(l.Target)))
				continue
			}
			reusable = false // os.Stat is not base's
			st, err := os.Stat(l.Target)
			if err != nil {
				continue // dangling: the kernel cannot follow it either
			}
			if st.IsDir() && !treeRule(r) {
				// A name rule (x.key, .envrc) protects a file; a link by
				// that name to a directory does not make the directory one.
				notes = append(notes, fmt.Sprintf("%s is protected as a file (%s) but leads to the directory %s; the protection is not extended there", display(l.Path), ruleName(r), display(l.Target)))
				continue
			}
			pattern := rules.EscapeLiteral(l.Target)
			if st.IsDir() {
				pattern += "/**"
			}
			if _, err := p.pol.AddDerived(r, derivedTier(p.m, r, l.Path, l.Target), pattern, l.Path); err != nil {
				return nil, p, notes, false, err
			}
			notes = append(notes, fmt.Sprintf("%s is protected (%s) and leads to %s: protecting that too", display(l.Path), ruleName(r), display(l.Target)))
			added++
		}
		floorStale := e.view != nil && floor == nil // new paths no mount can protect
		if added == 0 && !floorStale {
			pl.Unbound = unbound // found in every round, kept by sibling rules now
			return pl, p, notes, reusable, nil
		}
		if round == maxLinkRounds {
			return nil, p, notes, false, errors.New("symlinks to protected names, or paths no mount can protect, keep changing the plan; " + strings.Join(notes, "; "))
		}
		if added == 0 {
			continue // only the floor's policy changed
		}
		whole, err := tiers.CompileCached(p.pol, newFileCache(filepath.Join(e.launcher.StateDir, "cache")))
		if err != nil {
			return nil, p, notes, false, err
		}
		p, floor = &compiled{name: p.name, pol: p.pol, m: whole}, nil
	}
}

// compileFloor compiles the policy the floor is planned on
// (landlock.FloorPolicy): without the system secrets the file permissions
// keep from the agent, whose patterns it returns, and, when the private
// view enforces the built-in write protection with mounts, without that.
// Where neither changes the policy, the floor's matcher is p's.
func (e *env) compileFloor(fsys landlock.FS, p *compiled, unbound []landlock.Unbound) (*tiers.Matcher, []string, error) {
	q, sealed, err := landlock.FloorPolicy(p.m, fsys, e.view != nil, unbound)
	if err != nil {
		return nil, nil, err
	}
	if e.view == nil && len(sealed) == 0 {
		return p.m, nil, nil
	}
	m, err := tiers.CompileCached(q, newFileCache(filepath.Join(e.launcher.StateDir, "cache")))
	return m, sealed, err
}

// extendable reports whether a protection may be extended to target: it
// lies strictly inside the home directory or the workspace, and is not the
// workspace or an ancestor of it.
func (e *env) extendable(target string) bool {
	if atOrAbove(target, e.workspace, e.home) {
		return false
	}
	inside := func(p, dir string) bool { return strings.HasPrefix(p, dir+"/") }
	return inside(target, e.workspace) || inside(target, e.home)
}

// atOrAbove reports whether dir is one of paths ("" ones ignored), "/",
// or a directory above one of them: a directory whose whole content a
// protection, a walk or a removal must not take on (the home directory,
// the workspace, a review root, or what holds them).
func atOrAbove(dir string, paths ...string) bool {
	for _, p := range paths {
		if p != "" && (dir == p || dir == "/" || strings.HasPrefix(p, dir+"/")) {
			return true
		}
	}
	return false
}

func ruleName(r *rules.Rule) string {
	return fmt.Sprintf("%q, %s", r.Pattern, r.Source)
}

// protectingRule returns the rule that protects the name path against
// writing: a write protection that matches it, or the deciding rule when
// it is a deny, prompt or prompt-write rule (not the default tier); nil
// when the name is not protected so. A plain read rule does not count: a
// symlink in a read tree may well lead into the workspace on purpose.
func protectingRule(m *tiers.Matcher, path string) *rules.Rule {
	ex := m.Explain(path, tiers.OpWrite)
	for _, mt := range ex.Matches {
		if mt.Rule.Kind == rules.KindWriteProtect && !mt.Lifted {
			return mt.Rule
		}
	}
	r := ex.Decision.Rule
	if r.Expanded != "(default)" && r.Protects() {
		return r
	}
	return nil
}

// treeRule reports whether r protects whole trees (a pattern ending in
// "/**", such as .git/hooks/**) rather than single names.
func treeRule(r *rules.Rule) bool {
	for _, g := range r.Globs {
		if strings.HasSuffix(g.Text, "/**") {
			return true
		}
	}
	return false
}
