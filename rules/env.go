package rules

import (
	"path"
	"strings"
)

// builtinEnvDrops are the variables that point at the operator's services
// (an agent that inherits SSH_AUTH_SOCK uses the operator's keys without
// reading them) and the names that look like secrets. A profile may pass
// any of them by name in [env] pass.
var builtinEnvDrops = []struct{ pattern, note string }{
	{"SSH_AUTH_SOCK", "the operator's ssh-agent"},
	{"SSH_AGENT_PID", "the operator's ssh-agent"},
	{"GPG_AGENT_INFO", "the operator's gpg-agent"},
	{"DBUS_SESSION_BUS_ADDRESS", "the operator's D-Bus session (systemd --user, secret service)"},
	{"DISPLAY", "the operator's X11 display"},
	{"WAYLAND_DISPLAY", "the operator's Wayland display"},
	{"XAUTHORITY", "the operator's X11 cookie"},
	{"TMUX", "the operator's tmux server"},
	{"TMUX_PANE", "the operator's tmux server"},
	{"STY", "the operator's screen session"},
	{"DOCKER_HOST", "the operator's docker daemon"},
	{"XDG_RUNTIME_DIR", "the operator's runtime sockets"},
	{"KRB5CCNAME", "the operator's Kerberos tickets"},
	{"*_TOKEN", "looks like a secret"},
	{"*_SECRET*", "looks like a secret"},
	{"*PASSWORD*", "looks like a secret"},
	{"*_PASS", "looks like a secret"},
	{"*_PWD", "looks like a secret"},
	{"*PASSWD*", "looks like a secret"},
	{"*API_KEY*", "looks like a secret"},
	{"*PRIVATE_KEY*", "looks like a secret"},
	{"*_AUTHTOKEN*", "looks like a secret (npm_config__authToken)"},
	{"*_CREDENTIALS", "names a credentials file"},
}

// EnvRule is one [env] pass or drop entry. Drop patterns match whole
// variable names, with "*" and "?" as wildcards; pass entries are exact
// names.
type EnvRule struct {
	Pattern string `json:"pattern"`
	Note    string `json:"note,omitempty"`
	Source  Source `json:"source"`
}

// EnvPolicy says which environment variables reach the agent. Pass wins over
// Drop; a variable neither list matches is passed.
type EnvPolicy struct {
	Pass []EnvRule `json:"pass"`
	Drop []EnvRule `json:"drop"`
}

// Keep reports whether variable name reaches the agent, and the rule that
// decided it (nil when no rule matched and the variable passes). A pass
// wins over a drop, except that the agent overlay's drops win over the
// global file's passes (protections only accumulate).
func (e *EnvPolicy) Keep(name string) (bool, *EnvRule) {
	for i := range e.Pass {
		if envMatch(e.Pass[i].Pattern, name) {
			if e.Pass[i].Source.Origin != OriginAgent {
				for j := range e.Drop {
					if e.Drop[j].Source.Origin == OriginAgent && envMatch(e.Drop[j].Pattern, name) {
						return false, &e.Drop[j]
					}
				}
			}
			return true, &e.Pass[i]
		}
	}
	upper := strings.ToUpper(name)
	for i := range e.Drop {
		// The built-in drops are written in upper case and match in any
		// case (github_token, npm_config__authToken).
		if envMatch(e.Drop[i].Pattern, name) || e.Drop[i].Source.Origin == OriginBuiltin && envMatch(e.Drop[i].Pattern, upper) {
			return false, &e.Drop[i]
		}
	}
	return true, nil
}

func envMatch(pattern, name string) bool {
	ok, err := path.Match(pattern, name)
	return err == nil && ok
}

// validEnvPattern reports whether p is a variable name, optionally with the
// wildcards "*" and "?".
func validEnvPattern(p string) bool {
	if p == "" {
		return false
	}
	return !strings.ContainsFunc(p, func(r rune) bool {
		return !(r == '_' || r == '*' || r == '?' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	})
}
