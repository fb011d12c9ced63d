// Package rules reads agent-launcher policy files and turns them into a
// validated, layered, fully expanded rule set (a *Policy) that package tiers
// compiles. It is pure Go (no cgo, no golang.org/x/sys/unix) and does no I/O
// beyond reading the policy files through Options.ReadFile and ReadDir.
//
// # Files and layering
//
// The global file holds [file_policy], [env], [prompt] and per-agent overlays
// under [agents.NAME.file_policy] (and [agents.NAME.env], [agents.NAME.prompt]);
// an overlay may instead live in agents/NAME.toml beside the global file, at
// its top level. A field the overlay sets replaces the global one, an omitted
// field inherits it, except that protections only accumulate: deny_paths,
// prompt_paths, prompt_write_paths, exec_paths and [env] drop of both layers
// apply, and the built-in lists are always on. An overlay cannot loosen
// precedence from "restrictive", loosen a prompt or prompt-write default, or
// pass a variable the global file drops; package tiers keeps an overlay's
// grants from outranking a prompt the global file decides. Only the global
// file may list builtin_exceptions.
//
// # Schema
//
//	[file_policy]
//	default            = "deny"        # tier where no rule matches
//	precedence         = "specific"    # or "restrictive"
//	presets            = ["system"]    # named built-in rule groups
//	deny_paths         = []            # always win
//	prompt_paths       = []            # every access asks first
//	prompt_write_paths = []            # reads free; writes, creates, deletes ask
//	read_paths         = []
//	write_paths        = []
//	exec_paths         = []            # when non-empty, execve only where these match (both layers')
//	connect_paths      = []            # unix socket paths and "@abstract" names
//	builtin_exceptions = []            # exact paths the built-in lists skip (global file only)
//	[env]
//	pass = []                          # exact names, passed even when a drop pattern matches
//	drop = []                          # added to the built-in drops
//	[prompt]
//	timeout = "5m"                     # then the request is denied
//
// Strict decoding refuses unknown keys; every problem is reported as
// "file:line: key: what is wrong, how to fix it" (an ErrorList).
//
// # Patterns
//
// A pattern is absolute, or starts with "**/" to match at any depth. "~" and
// "<workspace>" expand at its start, ${VAR} anywhere (an unset or empty
// variable is an error; "$$" is a literal "$"); what they expand to matches
// literally, even if it contains glob characters. A trailing "/" means "/**".
// The glob syntax is ParsePattern's.
//
// # Built-in lists
//
// The built-in denylist covers credential directories under the home
// directory (~/.ssh, ~/.aws, ~/.gnupg, ~/.kube, ~/.docker, ...), credential
// file names under the home directory and the workspace (id_rsa, *.pem, *.key,
// .env, .env.*, credentials.json, ...; not under /usr or /etc, where CA
// bundles live), /etc/shadow and /etc/sudoers, and the launcher's own files
// (LauncherPaths), which no exception can lift. The built-in write protection
// keeps files that programs outside the session run or obey later read-only
// inside write trees: git hooks and .git/config, .envrc, .vscode/tasks.json,
// .cargo/config.toml, .npmrc, shell start-up files, systemd user units,
// autostart entries, ~/.gitconfig, ~/.local/bin and the launcher's executable.
package rules
