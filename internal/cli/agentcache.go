package cli

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agent-launcher/agent-launcher/landlock"
	"github.com/agent-launcher/agent-launcher/rules"
	"github.com/agent-launcher/agent-launcher/tiers"
)

// An agent's private cache (DESIGN.md section 7, "Usable by default"): the
// tools' caches persist from one session of an agent to the next, in the
// launcher's state directory at caches/<agent>, and the session's view
// shows that directory in its private /var/tmp (landlock.CacheBind). The state
// directory stays on the built-in denylist: the floor grants the cache only
// at its view path, through the policy's grant there, and the view seals
// the caches directory, so the agent reaches neither the other agents'
// caches nor anything else the launcher keeps. The cache is the agent's own
// and never the operator's (~/.cache/go-build): the operator's own builds
// would run what an agent put in a shared cache (DESIGN.md section 2,
// guarantee 6). Without a view there is no cache.

// cacheViewName is the cache's name in the view's private temporary
// directory.
const cacheViewName = "agent-launcher-cache"

// globalCacheName is the cache of sessions without --agent: not a valid
// agent name, so no agent shares it.
const globalCacheName = "_global"

// cacheVars point the usual tools at the cache, each at its own
// subdirectory, which the tool makes.
var cacheVars = []struct{ name, sub string }{
	{"GOCACHE", "go-build"},
	{"GOMODCACHE", "go-mod"},
	{"npm_config_cache", "npm"},
	{"PIP_CACHE_DIR", "pip"},
	{"XDG_CACHE_HOME", "xdg"},
}

// agentCache is one session's private cache, or why it has none.
type agentCache struct {
	dir    string // on the host: <state>/caches/<agent>
	target string // in the view
	why    string // "" when the session has the cache
	// set are the variables set to the cache, replaced those of them the
	// operator's environment had; passed are the ones the policy's
	// [env] pass keeps at the operator's value, dropped the ones its
	// drop leaves unset.
	set, replaced, passed, dropped []string
}

// addAgentCache gives e.view the private cache of agent ("" for the global
// policy) when the view has a private /var/tmp or /tmp whose cache path m
// lets the agent write. With create, the cache directory is made (mode
// 0700) where missing; without, a missing one is left out (check). The
// result says why there is no cache when there is none.
func (e *env) addAgentCache(m *tiers.Matcher, agent string, create bool) *agentCache {
	c := &agentCache{}
	if e.view == nil {
		c.why = "no private view"
		return c
	}
	for _, d := range []string{"/var/tmp", "/tmp"} {
		if cd, err := canonical(d); err == nil && slices.Contains(e.view.Private, cd) {
			c.target = filepath.Join(cd, cacheViewName)
			break
		}
	}
	if c.target == "" {
		c.why = "the view has no private /var/tmp or /tmp"
		return c
	}
	probe := filepath.Join(c.target, "x")
	for _, op := range []tiers.Op{tiers.OpRead, tiers.OpWrite, tiers.OpCreate, tiers.OpDelete} {
		if m.Decide(c.target, op).Verdict != tiers.Allowed || m.Decide(probe, op).Verdict != tiers.Allowed {
			c.why = "the policy does not let the agent write " + c.target
			return c
		}
	}
	name := cmp.Or(agent, globalCacheName)
	if name != globalCacheName && !rules.ValidAgentName(name) {
		c.why = fmt.Sprintf("%q is not a valid agent name", agent)
		return c
	}
	seal := filepath.Join(e.launcher.StateDir, "caches")
	dir, err := cacheDir(seal, name, create)
	if err != nil {
		c.why = err.Error()
		return c
	}
	if dir == "" {
		c.why = "none made yet"
		return c
	}
	if seal, err = canonical(seal); err != nil {
		c.why = err.Error()
		return c
	}
	c.dir = filepath.Join(seal, name)
	e.view.Caches = append(e.view.Caches, landlock.CacheBind{Source: c.dir, Target: c.target, Seal: seal})
	if err := e.view.Check(); err != nil {
		e.view.Caches = e.view.Caches[:len(e.view.Caches)-1]
		c.why = strings.TrimPrefix(err.Error(), "landlock: ")
		c.dir = ""
	}
	return c
}

// cacheDir returns caches/name, made with mode 0700 when create is set
// ("" when it does not exist and create is not). An agent may have
// changed its cache's mode (metadata is not Landlock's to guard): it is
// restored. Neither directory may be a symlink.
func cacheDir(caches, name string, create bool) (string, error) {
	dir := filepath.Join(caches, name)
	for _, d := range []string{filepath.Dir(caches), caches, dir} {
		if create {
			if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				if d == filepath.Dir(caches) {
					err = os.MkdirAll(d, 0o700)
				}
				if err != nil {
					return "", fmt.Errorf("making the cache directory: %w", err)
				}
			}
		}
		st, err := os.Lstat(d)
		if errors.Is(err, fs.ErrNotExist) && !create {
			return "", nil
		}
		if err != nil {
			return "", fmt.Errorf("the cache directory: %w", err)
		}
		if !st.IsDir() {
			return "", fmt.Errorf("%s is not a directory", d)
		}
		if create && st.Mode().Perm() != 0o700 {
			if err := os.Chmod(d, 0o700); err != nil {
				return "", fmt.Errorf("the cache directory: %w", err)
			}
		}
	}
	return dir, nil
}

// env returns environ with the cache's variables applied. Precedence, for
// each variable: the policy's [env] first (a pass keeps the operator's
// value where the operator's environment has one; a drop leaves it
// unset), then the cache, which replaces the operator's value: that value
// names the operator's own cache, which the default policy denies (the
// tool would fail) and which, where a policy grants it, the agent could
// fill with what the operator's builds run later. environ is the
// environment after the policy's [env] (filterEnv). Only a drop that names
// the variable exactly counts: a pattern such as "*" drops the operator's
// variables, not the launcher's. Without a cache,
// environ is returned as it is.
func (c *agentCache) env(ep *rules.EnvPolicy, environ []string) []string {
	c.set, c.replaced, c.passed, c.dropped = nil, nil, nil, nil
	if c.why != "" {
		return environ
	}
	out := slices.Clone(environ)
	for _, v := range cacheVars {
		i := slices.IndexFunc(out, func(kv string) bool { return strings.HasPrefix(kv, v.name+"=") })
		switch keep, rule := ep.Keep(v.name); {
		case rule != nil && !keep && rule.Pattern == v.name:
			c.dropped = append(c.dropped, v.name)
			if i >= 0 { // filterEnv removed it already; never pass it
				out = slices.Delete(out, i, i+1)
			}
			continue
		case rule != nil && i >= 0:
			c.passed = append(c.passed, v.name)
			continue
		}
		kv := v.name + "=" + filepath.Join(c.target, v.sub)
		c.set = append(c.set, v.name)
		if i >= 0 {
			c.replaced = append(c.replaced, v.name)
			out[i] = kv
		} else {
			out = append(out, kv)
		}
	}
	return out
}

// describe is the start-up line's part about the cache.
func (c *agentCache) describe() string {
	if c == nil {
		return ""
	}
	if c.why != "" {
		return "; no private cache (" + c.why + ")"
	}
	s := fmt.Sprintf("; private cache %s (kept in %s): %s", c.target, display(c.dir), strings.Join(c.set, " "))
	if len(c.replaced) > 0 {
		s += fmt.Sprintf(", replacing your %s (to keep yours, name it in [env] pass)", strings.Join(c.replaced, " "))
	}
	if len(c.passed) > 0 {
		s += fmt.Sprintf("; %s kept at your value ([env] pass)", strings.Join(c.passed, " "))
	}
	if len(c.dropped) > 0 {
		s += fmt.Sprintf("; %s unset ([env] drop)", strings.Join(c.dropped, " "))
	}
	return s
}

// bindText renders the view's binds for check --landlock.
func bindText(binds []landlock.CacheBind) []string {
	var out []string
	for _, b := range binds {
		out = append(out, fmt.Sprintf("%s = %s (%s sealed)", b.Target, display(b.Source), display(b.Seal)))
	}
	return out
}
