package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/agent-launcher/agent-launcher/landlock"
	"github.com/agent-launcher/agent-launcher/rules"
	"github.com/agent-launcher/agent-launcher/tiers"
)

// maxLinkRounds bounds the re-planning for symlinked protected names.
const maxLinkRounds = 3

// planFloor plans the Landlock floor for p on ABI abi. A protected name
// that is a symlink to a file the policy protects less (~/.bashrc into a
// dotfiles repository in the workspace, .git/hooks into the project) gets
// its protection extended to the target, and the plan is made again with
// the policy so extended; the returned compiled policy is that one.
func (e *env) planFloor(p *compiled, abi int, canary string) (*landlock.Plan, *compiled, error) {
	opts := landlock.Options{ScanRoots: []string{e.home, e.workspace}}
	if canary != "" {
		opts.Canaries = []string{canary}
	}
	for round := 0; ; round++ {
		pl, err := landlock.NewPlan(p.m, abi, landlock.OS(), opts)
		if err != nil {
			return nil, p, err
		}
		added := 0
		for _, l := range pl.Links {
			r := protectingRule(p.m, l.Path)
			if r == nil {
				continue
			}
			st, err := os.Stat(l.Target)
			if err != nil {
				continue // a dangling link: the kernel cannot follow it either
			}
			if err := p.pol.ProtectLinkTarget(l.Path, l.Target, st.IsDir(), r); err != nil {
				return nil, p, err
			}
			added++
		}
		if added == 0 {
			return pl, p, nil
		}
		if round == maxLinkRounds {
			return nil, p, fmt.Errorf("symlinks to protected names keep changing the plan (%s -> %s); resolve them", pl.Links[0].Path, pl.Links[0].Target)
		}
		m, err := tiers.CompileCached(p.pol, fileCache{dir: filepath.Join(e.launcher.StateDir, "cache")})
		if err != nil {
			return nil, p, err
		}
		p = &compiled{name: p.name, pol: p.pol, m: m}
	}
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
	if r.Expanded != "(default)" && r.Kind == rules.KindTier && r.Tier <= rules.PromptWrite {
		return r
	}
	return nil
}
