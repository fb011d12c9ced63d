package cli

import (
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agent-launcher/agent-launcher/landlock"
	"github.com/agent-launcher/agent-launcher/rules"
)

// privateDirs get a fresh tmpfs in the session's view: its temporary
// files are its own, and the host's (other sessions' files, the sockets of
// tmux, X11 and editors under /tmp) are out of sight.
var privateDirs = []string{"/tmp", "/var/tmp", "/dev/shm"}

// hiddenDirs and maskedSockets hold the operator's service sockets, out of
// the view unless connect_paths names one (DESIGN.md section 7): the
// runtime directory (D-Bus, systemd --user, ssh-agent), the system bus,
// and GNU screen's sessions (Debian's /run/screen, or $SCREENDIR), whose
// commands run outside (tmux's are under /tmp, private anyway).
func hiddenDirs() []string {
	d := []string{"/run/user/" + strconv.Itoa(os.Getuid()), "/run/dbus", "/run/screen"}
	for _, v := range []string{"XDG_RUNTIME_DIR", "SCREENDIR"} {
		if x := os.Getenv(v); strings.HasPrefix(x, "/") {
			d = append(d, x)
		}
	}
	return d
}

var maskedSockets = []string{"/var/run/docker.sock", "/run/docker.sock"}

// privateView returns the view the session gets: the directories above as
// they exist here (resolved, directories only), and what must stay
// visible inside them: the workspace, the home directory, the launcher's
// state, the literal paths the policy grants and the sockets
// connect_paths names. A working directory inside them and outside all
// of these is not the host's but the session's own, an empty directory
// of the same name (privateCwd): bound back, the grant that makes the
// private directory the agent's (the default policy's /tmp/**) would let
// the agent write the host's directory beside its workspace, which
// reaches other programs (an adversarial review planted a git hook in a
// repository there: TestViewWorkingDirInPrivateTmp).
func (e *env) privateView(pol *rules.Policy, cwd string) *landlock.View {
	v := &landlock.View{Fresh: []string{"/proc"}}
	res := newResolver()
	isDir := func(p string) (string, bool) {
		c, err := res.canonical(p)
		if err != nil {
			return "", false
		}
		comp := res.lookup(c)
		return c, comp.err == nil && comp.mode == unix.S_IFDIR
	}
	inside := func(p string, dirs []string) bool {
		return slices.ContainsFunc(dirs, func(d string) bool { return p == d || strings.HasPrefix(p, d+"/") })
	}
	for _, d := range privateDirs {
		if c, ok := isDir(d); ok && !inside(c, v.Private) && c != "/" {
			v.Private = append(v.Private, c)
		}
	}
	for _, d := range hiddenDirs() {
		if c, ok := isDir(d); ok && !inside(c, v.Private) && !inside(c, v.Hidden) && c != "/" {
			v.Hidden = append(v.Hidden, c)
		}
	}
	covered := slices.Concat(v.Private, v.Hidden)
	for _, s := range maskedSockets {
		c, err := res.canonical(s)
		if err != nil || inside(c, covered) || slices.Contains(v.Masked, c) {
			continue
		}
		if comp := res.lookup(c); comp.err == nil && comp.mode != unix.S_IFDIR {
			v.Masked = append(v.Masked, c)
		}
	}
	keep := []string{e.workspace, e.home, e.launcher.StateDir, e.launcher.ConfigDir, e.config}
	for _, r := range pol.Rules {
		if r.Kind != rules.KindTier || r.Tier == rules.Deny {
			continue
		}
		for i := range r.Globs {
			if prefix, _ := r.Globs[i].LiteralPrefix(); prefix != "" {
				keep = append(keep, prefix)
			}
		}
	}
	for _, c := range pol.Connect {
		if !c.Abstract {
			if slices.Contains(v.Masked, c.Value) {
				v.Masked = slices.DeleteFunc(v.Masked, func(m string) bool { return m == c.Value })
				continue
			}
			keep = append(keep, c.Value)
		}
	}
	for _, k := range keep {
		if k == "" || !inside(k, covered) || slices.Contains(covered, k) {
			continue
		}
		if comp := res.lookup(k); comp.err != nil || comp.mode == unix.S_IFLNK {
			// Nothing to bind (what the agent makes there is its own), or
			// a symlink, which a bind would not reproduce: its target is
			// kept where a rule names it.
			continue
		}
		if !slices.Contains(v.Keep, k) {
			v.Keep = append(v.Keep, k)
		}
	}
	slices.Sort(v.Keep)
	e.privateCwd = ""
	if cwd != "" && v.Covered(cwd) != "" && v.Kept(cwd) == "" {
		e.privateCwd = cwd
	}
	return v
}
