package rules

// The built-in lists. They are always on; an overlay cannot remove them and
// only the global file may lift one at an exact path (builtin_exceptions).
// Name patterns apply under "~" and "<workspace>" only, so that CA bundles
// such as /etc/ssl/certs/ca-certificates.crt or /usr/share/.../cacert.pem
// keep working.

type builtinEntry struct{ pattern, note string }

// Layer names for Source.Key of built-in rules.
const (
	layerDenylist      = "built-in denylist"
	layerWriteProtect  = "built-in write protection"
	layerLauncher      = "built-in launcher protection"
	layerEnvDrop       = "built-in env drop"
	layerDefault       = "built-in default"
	presetPrefix       = "preset "
	EmbeddedName       = "(embedded default policy)"
	defaultPromptTimer = "5m"
)

// credentialDirs are denied outright under the home directory.
var credentialDirs = []builtinEntry{
	{"~/.ssh/**", "SSH keys"},
	{"~/.aws/**", "AWS credentials"},
	{"~/.gnupg/**", "GnuPG keys"},
	{"~/.kube/**", "Kubernetes credentials"},
	{"~/.docker/**", "Docker registry credentials"},
	{"~/.password-store/**", "pass password store"},
	{"~/.azure/**", "Azure credentials"},
	{"~/.config/gcloud/**", "Google Cloud credentials"},
	{"~/.config/op/**", "1Password CLI"},
	{"~/.op/**", "1Password CLI"},
	{"~/.config/gh/**", "GitHub CLI token"},
	{"~/.git-credentials", "git credential store"},
	{"~/.config/git/credentials", "git credential store"},
	{"~/.local/share/keyrings/**", "desktop keyring"},
	{"~/.pypirc", "PyPI upload credentials"},
	{"~/.cargo/credentials", "crates.io token"},
	{"~/.cargo/credentials.toml", "crates.io token"},
	{"~/.gem/credentials", "RubyGems API key"},
	{"~/.vault-token", "HashiCorp Vault token"},
	{"~/.terraform.d/credentials.tfrc.json", "Terraform Cloud token"},
	{"~/.s3cfg", "S3 credentials (s3cmd)"},
	{"~/.boto", "cloud credentials (boto, gsutil)"},
	{"~/.my.cnf", "MySQL client password"},
	{"~/.config/rclone/**", "rclone remotes' credentials"},
	{"~/.config/github-copilot/**", "GitHub Copilot token"},
	{"~/.config/glab-cli/**", "GitLab CLI token"},
	{"~/.config/hub", "hub GitHub token"},
	{"~/.cache/huggingface/token", "Hugging Face token"},
	{"~/.huggingface/token", "Hugging Face token"},
}

// credentialNames are file names denied anywhere under "~" and "<workspace>".
var credentialNames = []builtinEntry{
	{"id_rsa", "SSH private key"},
	{"id_dsa", "SSH private key"},
	{"id_ecdsa", "SSH private key"},
	{"id_ecdsa_sk", "SSH private key"},
	{"id_ed25519", "SSH private key"},
	{"id_ed25519_sk", "SSH private key"},
	{"*.pem", "private key or certificate"},
	{"*.key", "private key"},
	{"*.p12", "PKCS#12 key store"},
	{"*.pfx", "PKCS#12 key store"},
	{"*.ppk", "PuTTY private key"},
	{"*.jks", "Java key store"},
	{"*.keystore", "Java or Android key store"},
	{".env", "environment secrets"},
	{".env.*", "environment secrets"},
	{"credentials.json", "credentials file"},
	{"secrets.{yaml,yml,json}", "secrets file"},
	{"token.json", "OAuth token"},
	{"service-account.json", "cloud service account key"},
	{".netrc", "login credentials"},
	{".pgpass", "PostgreSQL passwords"},
}

// systemSecrets are denied at absolute paths.
var systemSecrets = []builtinEntry{
	{"/etc/shadow", "password hashes"},
	{"/etc/shadow-", "password hashes (backup)"},
	{"/etc/gshadow", "group password hashes"},
	{"/etc/gshadow-", "group password hashes (backup)"},
	{"/etc/sudoers", "sudo configuration"},
	{"/etc/sudoers.d/**", "sudo configuration"},
	{"/etc/ssh/ssh_host_*_key", "SSH host private keys"},
}

// writeProtectHome are files that programs outside the session execute or
// obey later; they are read-only even inside a write tree.
var writeProtectHome = []builtinEntry{
	{"~/.bashrc", "shell start-up file"},
	{"~/.bash_profile", "shell start-up file"},
	{"~/.bash_login", "shell start-up file"},
	{"~/.bash_logout", "shell start-up file"},
	{"~/.bash_aliases", "shell start-up file (sourced by Debian's .bashrc)"},
	{"~/.profile", "shell start-up file"},
	{"~/.zshrc", "shell start-up file"},
	{"~/.zshenv", "shell start-up file"},
	{"~/.zprofile", "shell start-up file"},
	{"~/.zlogin", "shell start-up file"},
	{"~/.config/fish/**", "shell start-up files"},
	{"~/.inputrc", "readline start-up file"},
	{"~/.pam_environment", "login environment"},
	{"~/.config/environment.d/**", "login environment"},
	{"~/.config/systemd/user/**", "systemd user units"},
	{"~/.local/share/systemd/user/**", "systemd user units"},
	{"~/.config/autostart/**", "desktop autostart entries"},
	{"~/.gitconfig", "git configuration (aliases, hooks path, fsmonitor run commands)"},
	{"~/.config/git/**", "git configuration"},
	{"~/.vimrc", "editor start-up file"},
	{"~/.vim/**", "editor plugins"},
	{"~/.config/nvim/**", "editor start-up files"},
	{"~/.emacs", "editor start-up file"},
	{"~/.emacs.d/**", "editor start-up files"},
	{"~/.tmux.conf", "tmux runs its commands"},
	{"~/.config/tmux/**", "tmux runs its commands"},
	{"~/.local/bin/**", "programs on the operator's PATH"},
	{"~/bin/**", "programs on the operator's PATH"},
	{"~/.cargo/bin/**", "programs on the operator's PATH"},
	{"~/go/bin/**", "programs on the operator's PATH"},
	{"~/.local/lib/python*/site-packages/*.pth", "Python runs .pth files at every start"},
	{"~/.local/lib/python*/site-packages/usercustomize*", "Python imports it at every start (a module, compiled or not)"},
	{"~/.local/lib/python*/site-packages/usercustomize/**", "Python imports it at every start (a package)"},
	{"~/.local/lib/python*/site-packages/sitecustomize*", "Python imports it at every start (a module, compiled or not)"},
	{"~/.local/lib/python*/site-packages/sitecustomize/**", "Python imports it at every start (a package)"},
	{"~/.config/direnv/**", "direnv sources its direnvrc for every .envrc"},
	{"~/.local/share/nvim/site/**", "editor plugins"},
	{"~/.local/share/nvim/lazy/**", "editor plugins (lazy.nvim)"},
	{"~/.local/share/direnv/allow/**", "direnv runs an allowed .envrc without asking"},
	{"~/.vscode/extensions/**", "editor extensions (VS Code)"},
	{"~/.yarnrc.yml", "yarn runs the program its yarnPath names"},
	{"~/.local/share/applications/**", "desktop entries run the commands they name"},
	{"~/.config/Code/User/**", "editor tasks and settings (VS Code)"},
	{"~/.config/pip/**", "pip configuration (package index)"},
	{"~/.pip/**", "pip configuration (package index)"},
	{"~/.bashrc.d/**", "shell start-up files (sourced by Fedora's .bashrc)"},
	{"~/.oh-my-zsh/**", "shell start-up files (oh-my-zsh and its custom plugins)"},
	{"~/.config/starship.toml", "the prompt runs its custom commands"},
	{"~/.xinitrc", "X session start-up script"},
	{"~/.xprofile", "X session start-up script"},
	{"~/.xsession", "X session start-up script"},
	{"~/.xsessionrc", "X session start-up script"},
	{"~/.config/i3/**", "window manager configuration (runs commands)"},
	{"~/.config/sway/**", "window manager configuration (runs commands)"},
	{"~/.config/hypr/**", "window manager configuration (runs commands)"},
	{"~/.gdbinit", "gdb runs its commands at start"},
	{"~/.config/gdb/**", "gdb runs its commands at start"},
	{"~/.lldbinit", "lldb runs its commands at start"},
	{"~/.psqlrc", "psql runs its commands (\\! runs a shell) at start"},
	{"~/.ipython/profile_*/startup/**", "IPython runs these scripts at start"},
	{"~/.ipython/profile_*/*.py", "IPython runs its configuration"},
	{"~/.gradle/init.d/**", "Gradle runs init scripts in every build"},
	{"~/.gradle/init.gradle", "Gradle runs it in every build"},
	{"~/.gradle/init.gradle.kts", "Gradle runs it in every build"},
	{"~/.gradle/gradle.properties", "Gradle options (JVM arguments, agents)"},
}

// writeProtectNames are protected anywhere under "~" and "<workspace>".
var writeProtectNames = []builtinEntry{
	// The .git entry itself: a .git file ("gitdir: elsewhere") or a
	// replaced .git directory points git at a config and hooks the agent
	// wrote, and renaming .git would move its config out from under the
	// rules below.
	{".git", "a .git file or directory tells git where its config and hooks are"},
	{".git/hooks/**", "git hooks run on the operator's next git command"},
	{".git/config", "git configuration (core.fsmonitor, core.hooksPath run commands)"},
	{".git/config.worktree", "per-worktree git configuration"},
	{".git/commondir", "points git at another repository's config and hooks"},
	{".git/worktrees/**", "linked worktrees: their commondir, gitdir and config"},
	{".git/modules/**/hooks/**", "submodule git hooks"},
	{".git/modules/**/config", "submodule git configuration"},
	{".git/modules/**/config.worktree", "submodule git configuration"},
	{".git/modules/**/commondir", "points git at another repository's config and hooks"},
	{".git/rebase-merge/git-rebase-todo", "a stopped rebase runs its exec lines on the operator's --continue"},
	{".envrc", "direnv runs it on cd"},
	{".vscode/tasks.json", "editor tasks"},
	{".cargo/config.toml", "cargo configuration (runners, linkers)"},
	{".cargo/config", "cargo configuration (runners, linkers)"},
	{".npmrc", "npm configuration (scripts, registries)"},
}

// presets are named rule groups a policy lists in file_policy.presets.
var presets = map[string][]struct {
	tier Tier
	builtinEntry
}{
	// system: what an ordinary program needs to start and run: the system
	// trees read-only, the harmless devices, /proc (a fresh one in the
	// session view) and the few /sys files language runtimes read. Not
	// /proc/self: a path-based rule would bind to one process.
	"system": {
		{Read, builtinEntry{"/usr/**", "system programs and libraries"}},
		{Read, builtinEntry{"/bin/**", "system programs"}},
		{Read, builtinEntry{"/sbin/**", "system programs"}},
		{Read, builtinEntry{"/lib/**", "system libraries"}},
		{Read, builtinEntry{"/lib32/**", "system libraries"}},
		{Read, builtinEntry{"/lib64/**", "system libraries"}},
		{Read, builtinEntry{"/libx32/**", "system libraries"}},
		{Read, builtinEntry{"/etc/**", "system configuration"}},
		{Read, builtinEntry{"/opt/**", "optional software"}},
		{Read, builtinEntry{"/proc/**", "process information"}},
		{Read, builtinEntry{"/sys/devices/system/cpu/**", "CPU topology (runtimes size thread pools)"}},
		{Read, builtinEntry{"/sys/fs/cgroup/**", "cgroup limits (runtimes size memory and threads)"}},
		{Read, builtinEntry{"/sys/kernel/mm/transparent_hugepage/**", "memory settings (the Go runtime reads them)"}},
		{Read, builtinEntry{"/run/systemd/resolve/**", "DNS resolver configuration"}},
		{Read, builtinEntry{"/dev/random", "randomness"}},
		{Read, builtinEntry{"/dev/urandom", "randomness"}},
		{Write, builtinEntry{"/dev/null", "discard device"}},
		{Write, builtinEntry{"/dev/zero", "zero device"}},
		{Write, builtinEntry{"/dev/full", "full device"}},
		{Write, builtinEntry{"/dev/tty", "the session's own terminal"}},
	},
}

// perProcessPaths are refused in rules: they are symlinks that resolve
// differently in every process, so a rule on them would bind to one process
// (the launcher's) and mean nothing for the agent.
var perProcessPaths = []string{"/proc/self", "/proc/thread-self", "/dev/fd", "/dev/stdin", "/dev/stdout", "/dev/stderr"}
