package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-launcher/agent-launcher/internal/kernel"
	"github.com/agent-launcher/agent-launcher/internal/launch"
	"github.com/agent-launcher/agent-launcher/landlock"
	"github.com/agent-launcher/agent-launcher/rules"
)

// run confines a command: DESIGN.md sections 5 and 11.
func (c *command) run(args []string) int {
	fs := c.flagSet("run")
	var pf policyFlags
	pf.register(fs)
	allowUnconfined := fs.Bool("allow-unconfined", false, "")
	argv, status, ok := c.parse(fs, args)
	if !ok {
		return status
	}
	if len(argv) == 0 {
		c.errorf("run: name the command to run, after --: agent-launcher run [flags] -- COMMAND [ARG...]")
		return ExitFailure
	}
	e, err := resolveEnv(&pf)
	if err != nil {
		c.errorf("run: %s", err)
		return ExitFailure
	}
	if msg := refusedWorkspace(e.workspace, e.home); msg != "" {
		c.errorf("run: %s; pass --workspace with a project directory", msg)
		return ExitFailure
	} else if msg := riskyWorkspace(e.workspace, e.home); msg != "" {
		c.errorf("warning: %s", msg)
	}
	k, kerr := c.detectLandlock()
	// Where the session will have a private view (Landlock runs it), its
	// init stage starts now, before the policy is loaded: it starts in its
	// namespaces, as their PID 1, execs and waits for its configuration
	// while the policy loads and the floor is planned (about 2 ms of a
	// kept start here).
	// It runs nothing of the agent's before "go", and whatever stops run
	// first, a policy with errors included, kills it (Abort; Pdeathsig
	// besides). A Go init stage started this early slowed the load more
	// than it gained; the C one does not (docs/design-amendments.md, the
	// sixth and ninth passes).
	var pending *launch.Pending
	startPending := func() {
		if pending == nil && kerr == nil && landlock.RunSupported(k) == nil {
			pending, _ = launch.Start(launch.Session{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, View: &landlock.View{}, Notice: func(msg string) { c.errorf("%s", msg) }})
		}
	}
	startPending()
	defer func() {
		if pending != nil {
			pending.Abort()
		}
	}()
	p, err := e.load(pf.agent)
	launch.Trace("policy loaded and compiled")
	if err != nil {
		c.reportPolicyError(err)
		c.errorf("run: the policy has errors; nothing was run")
		return ExitFailure
	}
	// The policy's warnings, as check shows them: an operator who never
	// runs check sees them at every start.
	for _, w := range p.pol.Warnings {
		c.errorf("policy warning: %s", w)
	}

	if kerr != nil {
		c.errorf("run: cannot detect Landlock: %v; nothing was run", kerr)
		return ExitFailure
	}
	if err := landlock.RunSupported(k); err != nil {
		if !errors.Is(err, landlock.ErrNoLandlock) {
			c.errorf("run: cannot confine the agent: %v; nothing was run (agent-launcher doctor says more)", err)
			return ExitFailure
		}
		if !*allowUnconfined {
			c.errorf("run: cannot confine the agent: %s; nothing was run (--allow-unconfined runs it with no confinement at all)", k.Reason)
			return ExitFailure
		}
		c.errorf("WARNING: running %s UNCONFINED, as --allow-unconfined asks: %s. The policy is not enforced; the agent can read and write everything you can.", display(argv[0]), k.Reason)
	}
	warnPrivileges(c, k.ABI >= 1)

	path, err := lookPath(argv[0])
	if err != nil {
		var ee *launch.ExecError
		if errors.As(err, &ee) {
			c.errorf("run: %s", ee)
			return ee.ExitCode()
		}
		c.errorf("run: %s", err)
		return 127
	}

	agentEnv, dropped := filterEnv(&p.pol.Env, os.Environ())
	cwd, err := os.Getwd()
	if err == nil {
		cwd, err = canonical(cwd)
	}
	if err != nil {
		c.errorf("run: cannot find the current directory: %v; nothing was run", err)
		return ExitFailure
	}
	session := launch.Session{
		Path: path, Argv: argv, Env: agentEnv, Cwd: cwd,
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		Notice:       func(msg string) { c.errorf("%s", msg) },
		KeepCatching: true, // run ends after its review
	}
	// With Landlock, the session gets its private view; where the system
	// refuses the namespaces it needs, the floor is planned again for the
	// host's tree and the session runs without one, saying so.
	noView := ""
	// A kept plan goes to the init stage before the check that it still
	// holds, which runs while the init stage builds the view and applies
	// it; the agent starts only once it passed. When it does not, run
	// starts again, planning afresh at once, with a new init stage
	// starting beside the planning (about 2 ms of a kept start here:
	// docs/design-amendments.md, the ninth pass).
	plans := planSpeculate
	stale := func() {
		plans = planAfresh
		if noView == "" {
			startPending()
		}
	}
	replans := 0
	for attempt := 0; ; attempt++ {
		var cache *agentCache
		var hold func() bool
		if k.ABI >= 1 {
			if noView == "" {
				e.view = e.privateView(p.pol, cwd)
				launch.Trace("private view planned")
			} else {
				e.view = nil
			}
			cache = e.addAgentCache(p.m, pf.agent, true) // in the view: planned with it
			session.Env = cache.env(&p.pol.Env, agentEnv)
			launch.Trace("private view and agent cache planned")
			var err error
			session.Plan, hold, err = c.prepareFloor(e, p, k, cwd, noView, plans)
			if errors.Is(err, errStalePlan) {
				stale()
				continue
			}
			if err != nil {
				return ExitFailure
			}
			session.View = e.view
		}
		// The session-end review's first snapshot runs while the init
		// stage starts; the agent starts only once it is taken.
		roots := e.reviewRoots(p.pol, p.m)
		hooks := &reviewHooks{}
		var before persistSnapshot
		var metaBefore map[string]metaEntry
		var incomplete string
		var walked *walkIndex
		snapped := make(chan struct{})
		key := e.keptUnder
		go func() {
			metaBefore = protectedMeta(p.pol, e.launcher.StateDir, e.home, e.workspace)
			hooks.Dirs = hooksDirs(e.gitPtrs) // the end's walk reads it after snapped
			// The last session's walk index spares listing again the
			// directories that did not change since (walkIndex).
			before, incomplete, walked = walkPersistence(p.m, e.home, roots, hooks, e.planCache().walkIndex(key))
			launch.Trace("session review: persistence paths recorded")
			close(snapped)
		}()
		plan, view := session.Plan, noView
		session.BeforeStart = func() error {
			if hold != nil && !hold() {
				return errStalePlan
			}
			<-snapped
			return nil
		}
		session.Ready = func(end launch.Ending) {
			if plan != nil {
				c.startLine(argv, pf.agent, e, plan, view, end, cache)
			}
		}
		if attempt == 0 && len(dropped) > 0 {
			c.errorf("%s", droppedLine(dropped))
		}
		var code int
		if pending != nil && session.View == nil {
			pending.Abort() // started for a view
			pending = nil
		}
		code, err = runSession(c.ctx, pending, session)
		pending = nil // ended with the attempt
		if err == nil {
			<-snapped
			launch.Trace("agent exited")
			if key == "" {
				// No plan key (AGENT_LAUNCHER_PLAN_CACHE=0, or none could
				// be made): no stamps either, every directory listed again.
				walked = nil
			}
			hooks.Fixed = true // the start's list (reviewHooks)
			after, inc2, index := walkPersistence(p.m, e.home, roots, hooks, walked)
			e.planCache().putWalkIndex(key, index)
			if e.settleKept != nil {
				e.settleKept()
				e.settleKept = nil
			}
			launch.Trace("session review: persistence paths compared")
			r := &reviewReport{Schema: 1, Ended: time.Now().UTC(), Command: argv, Workspace: e.workspace, Roots: roots,
				Changes:    mergeChanges(diffPersistence(before, after), diffMeta(metaBefore, metaAgain(metaBefore))),
				Incomplete: cmp.Or(incomplete, inc2)}
			c.printReview(r)
			if err := saveReview(e.launcher.StateDir, r); err != nil {
				c.errorf("session review: keeping the report: %v", err)
			}
			launch.Trace("session review: report kept")
		}
		// A Ctrl-C or a termination caught before the agent started ends
		// run, even where the attempt ended for another reason that would
		// have it start again.
		var ie *launch.InterruptedError
		if errors.As(err, &ie) {
			c.errorf("run: %s; nothing was run", ie)
			return ie.ExitCode()
		}
		var ve *launch.ViewError
		if errors.As(err, &ve) && noView == "" {
			noView = ve.Msg
			continue
		}
		if errors.Is(err, errStalePlan) {
			stale()
			continue
		}
		// The init stage found a path the plan names replaced since it
		// was planned (between the kept plan's check and the rules, or
		// while a plan was made): planned again, a few times at most, for
		// a path that keeps changing. Said in a line, since the start-up
		// line of the plan that failed may be out already.
		if se := (*launch.StaleError)(nil); errors.As(err, &se) {
			if replans < maxReplans {
				replans++
				c.errorf("%s; planning again", se)
				stale()
				continue
			}
			c.errorf("run: %s, again after planning %d times; nothing was run", se, maxReplans)
			return ExitFailure
		}
		if err != nil {
			var ee *launch.ExecError
			if errors.As(err, &ee) {
				c.errorf("run: %s", ee)
				return ee.ExitCode()
			}
			if se := (*launch.SetupError)(nil); errors.As(err, &se) && se.Started {
				c.errorf("run: %s; it was ended with whatever it had started", err)
				return ExitFailure
			}
			c.errorf("run: %s; nothing was run", err)
			return ExitFailure
		}
		return code
	}
}

// runSession runs one attempt at the session s: in the init stage started
// ahead, pending, when there is one (which it ends), else in a new one. A
// variable for the tests of run's attempts (replan_test.go).
var runSession = func(ctx context.Context, pending *launch.Pending, s launch.Session) (int, error) {
	if pending != nil {
		return pending.Run(ctx, s)
	}
	return launch.Run(ctx, s)
}

// maxReplans bounds the plans made again for a path the init stage found
// replaced since it was planned (launch.StaleError).
const maxReplans = 3

// errStalePlan: a kept plan that no longer holds, found after it was
// used (prepareFloor with planSpeculate); run starts again, planning
// afresh (planAfresh).
var errStalePlan = errors.New("the kept plan no longer holds")

// How prepareFloor plans: with the kept plan, checked later (its hold),
// or afresh, the kept plan being stale.
const (
	planSpeculate = iota
	planAfresh
)

// prepareFloor plans the floor for e.view (nil: the host's tree) and runs
// the start-up checks; an error when run must stop (the reason printed).
// noView says why a view was refused, if it was: the notes and warnings
// were printed for the first plan. With planSpeculate, a kept plan comes
// with hold, the check that it still holds, not yet made: it must pass
// before the agent starts, and it prints the plan's notes and warnings
// when it does. When a start-up check refuses a kept plan, hold is asked
// first: errStalePlan when it does not hold (then planAfresh).
func (c *command) prepareFloor(e *env, p *compiled, k landlock.Kernel, cwd, noView string, plans int) (*landlock.Plan, func() bool, error) {
	canary, err := prepareCanary(e.launcher.StateDir)
	if err != nil {
		c.errorf("run: %v; nothing was run", err)
		return nil, nil, err
	}
	var plan *landlock.Plan
	var notes []string
	var hold func() bool
	if plans == planSpeculate {
		plan, notes, hold, err = e.planFloorUnchecked(p, k.ABI, canary)
	} else {
		plan, notes, err = e.planFloorAfresh(p, k.ABI, canary)
	}
	report := func() {
		if noView != "" || c.planNotes {
			return
		}
		c.planNotes = true
		for _, n := range notes {
			c.errorf("%s", n)
		}
		if plan != nil {
			for _, w := range plan.Warnings {
				c.errorf("warning: %s", w)
			}
		}
	}
	if err != nil {
		plan = nil
		report()
		c.errorf("run: %s; nothing was run", strings.TrimPrefix(err.Error(), "landlock: "))
		return nil, nil, err
	}
	if hold == nil {
		report()
	} else {
		kept := hold
		hold = func() bool {
			if !kept() {
				return false
			}
			report()
			return true
		}
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		err = fmt.Errorf("reading the mount table for the bind-mount check: %v", err)
	} else {
		var mounts []landlock.Mount
		mounts, err = landlock.ParseMountinfo(string(mi))
		if err == nil {
			err = landlock.CheckMounts(plan, mounts)
		}
		if err == nil {
			err = insideProtected(plan, cwd)
		}
	}
	if err != nil {
		if hold != nil && !hold() {
			return nil, nil, errStalePlan
		}
		c.errorf("run: %v; nothing was run", err)
		return nil, nil, err
	}
	return plan, hold, nil
}

// insideProtected refuses a working directory or an inherited stdio fd
// inside a path the floor protects (review finding 6): the agent would
// start with a handle on what it may not open.
func insideProtected(pl *landlock.Plan, cwd string) error {
	// The working directory: what the policy denies or prompts. A mount
	// over a protected path does not count: the init stage enters the
	// working directory again after the view's mounts, so it lies on
	// them, not under them.
	var protected, readOnly []string
	for _, pr := range pl.Protected {
		protected = append(protected, pr.Path)
	}
	// A stdio fd on a file opened before the view's mounts writes past a
	// read-only one. (A directory fd is refused whatever it is, below.)
	for _, b := range pl.Binds {
		if b.ReadOnly {
			readOnly = append(readOnly, b.Path)
		}
	}
	under := func(p string, trees ...[]string) string {
		for _, t := range trees {
			for _, pr := range t {
				if p == pr || strings.HasPrefix(p, pr+"/") {
					return pr
				}
			}
		}
		return ""
	}
	if pr := under(cwd, protected); pr != "" {
		return fmt.Errorf("the current directory %s lies inside %s, which the policy protects; start from elsewhere", display(cwd), display(pr))
	}
	for fd := 0; fd <= 2; fd++ {
		// A directory (or a symlink, opened O_PATH) is a handle from
		// outside the session's view: names looked up through it
		// (/proc/self/fd/0/hooks/pre-commit) resolve on the host's
		// mounts, past the view's read-only mounts, private /tmp and
		// hidden sockets. No program needs one as its stdio.
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err == nil && (st.Mode&unix.S_IFMT == unix.S_IFDIR || st.Mode&unix.S_IFMT == unix.S_IFLNK) {
			target, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
			kind := "directory"
			if st.Mode&unix.S_IFMT == unix.S_IFLNK {
				kind = "symlink"
			}
			return fmt.Errorf("fd %d is open on the %s %s, a handle from outside the session's view through which its files would be reached past its mounts; redirect it elsewhere", fd, kind, display(target))
		}
		target, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
		if err != nil || !strings.HasPrefix(target, "/") {
			continue // closed, a pipe, a socket
		}
		if pr := under(target, protected, readOnly); pr != "" {
			return fmt.Errorf("fd %d is open on %s, inside %s, which the policy protects; redirect it elsewhere", fd, display(target), display(pr))
		}
	}
	return nil
}

// filterEnv applies the policy's [env] to environ: the variables that reach
// the agent, and the names of the ones dropped, sorted and each once.
func filterEnv(ep *rules.EnvPolicy, environ []string) (keep, dropped []string) {
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			continue // not a variable a program can read by name
		}
		if pass, _ := ep.Keep(name); pass {
			keep = append(keep, kv)
		} else {
			dropped = append(dropped, name)
		}
	}
	slices.Sort(dropped)
	return keep, slices.Compact(dropped)
}

// droppedLine is the start-up line that names the dropped variables.
func droppedLine(names []string) string {
	return fmt.Sprintf("not passed to the agent (the policy's [env]): %s; to pass one, name it in [env] pass = [\"NAME\"]",
		strings.Join(names, " "))
}

// refusedWorkspace says why run refuses a workspace, or "".
func refusedWorkspace(ws, home string) string {
	switch {
	case ws == "/", ws == home, ws == "/tmp", strings.HasPrefix(home, ws+"/"):
		return riskyWorkspace(ws, home)
	}
	return ""
}

// lookPath finds the program the way a shell would, in $PATH unless the
// name has a slash. Errors are *launch.ExecError.
func lookPath(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err == nil || errors.Is(err, exec.ErrDot) && p != "" {
		return p, nil
	}
	if strings.Contains(name, "/") {
		// A path: execve tells apart "missing" and "not executable".
		if _, serr := os.Stat(name); serr != nil {
			return "", &launch.ExecError{Path: name, Err: errNotFound}
		}
		return name, nil
	}
	return "", &launch.ExecError{Path: name, Err: errNotFound}
}

var errNotFound = fmt.Errorf("not found in $PATH: %w", os.ErrNotExist)

// warnPrivileges warns loudly when the agent would run as root or with
// capabilities: Landlock still applies, but root bypasses much of what the
// launcher relies on (DESIGN.md section 2, out of scope).
func warnPrivileges(c *command, confined bool) {
	pr, err := kernel.CurrentPrivileges()
	if err != nil {
		c.errorf("warning: cannot read this process's privileges: %v", err)
		return
	}
	floor := "The Landlock floor still applies, but "
	if !confined {
		floor = "Nothing is confined, and "
	}
	switch {
	case pr.Root:
		c.errorf("WARNING: running as root. %sroot can inject keystrokes into terminals, open files by handle and more; run agents as an ordinary user.", floor)
	case pr.CapEff != 0:
		c.errorf("WARNING: running with capabilities (CapEff %#x). %scapabilities bypass other protections; drop them.", pr.CapEff, floor)
	}
}

// startLine tells the operator, in one line, what is in force; end says
// how the session's processes end without a view.
// cache is the agent's cache, or why there is none.
func (c *command) startLine(argv []string, agent string, e *env, pl *landlock.Plan, noView string, end launch.Ending, cache *agentCache) {
	who := "the global policy"
	if agent != "" {
		who = "agent " + agent
	}
	src := configName(e.config)
	msg := fmt.Sprintf("confining %s (%s from %s, workspace %s): Landlock ABI %d, %d rules", display(argv[0]), who, src, e.workspace, pl.ABI, len(pl.Rules))
	if n := len(pl.Carved); n > 0 {
		var names []string
		for i, cv := range pl.Carved {
			if i == 3 {
				names = append(names, "...")
				break
			}
			names = append(names, cv.Path)
		}
		msg += fmt.Sprintf("; %d carved directories (%s), where some operations the policy allows fail for now, such as new entries and renames (agent-launcher check --landlock lists them)", n, strings.Join(names, ", "))
	}
	switch {
	case e.view != nil:
		msg += fmt.Sprintf("; private view: own PID namespace and /proc, private %s", strings.Join(e.view.Private, " "))
		if hidden := slices.Concat(e.view.Hidden, e.view.Masked); len(hidden) > 0 {
			msg += ", hidden " + strings.Join(hidden, " ")
		}
		if n := len(pl.Binds); n > 0 {
			msg += fmt.Sprintf(", %d protected paths mounted over themselves (git hooks and config, start-up files)", n)
		}
		if e.privateCwd != "" {
			msg += fmt.Sprintf("; the working directory %s is the session's own there, not the host's", display(e.privateCwd))
		}
	case noView != "":
		msg += fmt.Sprintf("; NO private view (%s): the agent shares /tmp, /proc and the operator's sockets; its processes end with the session: %s", noView, end)
	}
	msg += cache.describe()
	c.errorf("%s", msg)
}

// simulateABIVar names the testing knob that makes the launcher behave as
// on an older Landlock ABI: it handles only that ABI's rights and applies
// that ABI's refusals. It can only lower the ABI, never raise it, so it
// cannot make the launcher trust a feature the kernel lacks; 0 simulates a
// kernel without Landlock. The VM matrix uses it for ABIs Debian ships no
// kernel for.
const simulateABIVar = "AGENT_LAUNCHER_SIMULATE_ABI"

// detectLandlock returns the running kernel's Landlock, lowered to
// $AGENT_LAUNCHER_SIMULATE_ABI when that is set and lower.
func (c *command) detectLandlock() (landlock.Kernel, error) {
	k, err := landlock.Detect()
	if err != nil {
		return k, err
	}
	v, ok := os.LookupEnv(simulateABIVar)
	if !ok || v == "" {
		return k, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return k, fmt.Errorf("%s=%q is not an ABI number", simulateABIVar, v)
	}
	if n >= k.ABI {
		return k, nil
	}
	c.errorf("simulating Landlock ABI %d on a kernel with ABI %d (%s)", n, k.ABI, simulateABIVar)
	k.ABI = n
	if n == 0 {
		k.Errata, k.Reason = 0, "no Landlock (simulated by "+simulateABIVar+"=0)"
	}
	return k, nil
}

// prepareCanary makes the canary the init stage probes: a file in the
// state directory (on the built-in denylist) that this user can certainly
// read, so that a failing open inside can only be Landlock's doing. The
// agent of an earlier session may have chmod-ed them (metadata is not
// Landlock's to guard): the modes are restored, and the open is checked
// here first. Most runs find both as the last left them, and write
// nothing (a rewrite took up to 1.4 ms of a traced start here; 0.5 ms
// less in interleaved runs, within their spread).
func prepareCanary(stateDir string) (string, error) {
	st, err := os.Stat(stateDir)
	if err != nil {
		if err := os.MkdirAll(stateDir, 0o700); err != nil {
			return "", fmt.Errorf("creating the state directory: %w", err)
		}
	}
	if err != nil || st.Mode().Perm() != 0o700 {
		if err := os.Chmod(stateDir, 0o700); err != nil {
			return "", fmt.Errorf("state directory: %w", err)
		}
	}
	// And the directories in it (an agent can chmod them too; the review
	// reports it): one stat each, a chmod only where it differs.
	for _, d := range stateDirs(stateDir)[1:] {
		if st, err := os.Lstat(d); err == nil && st.IsDir() && st.Mode().Perm() != 0o700 {
			if err := os.Chmod(d, 0o700); err != nil {
				return "", fmt.Errorf("state directory: %w", err)
			}
		}
	}
	path := filepath.Join(stateDir, "canary")
	if canaryIntact(path) {
		return path, nil
	}
	// Made anew: its owner cannot write a canary of mode 000, and what
	// stands in its place (a symlink, a FIFO) is removed, never followed
	// nor waited on.
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("removing the damaged canary: %w", err)
	}
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return "", fmt.Errorf("writing the canary: %w", &fs.PathError{Op: "open", Path: path, Err: err})
	}
	w := os.NewFile(uintptr(fd), path)
	_, err = w.WriteString(canaryText)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(path, 0o600) // past the umask
	}
	if err != nil {
		return "", fmt.Errorf("writing the canary: %w", err)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("the canary %s cannot be opened even outside the sandbox: %w", path, err)
	}
	f.Close()
	return path, nil
}

const canaryText = "agent-launcher canary: the session's floor must deny opening this\n"

// canaryIntact reports whether path opens for reading here, as a regular
// file of mode 0600 that holds canaryText.
func canaryIntact(path string) bool {
	// Never a FIFO's wait for a writer, nor a symlink's target.
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Mode().Perm() != 0o600 || st.Size() != int64(len(canaryText)) {
		return false
	}
	b := make([]byte, len(canaryText)+1)
	n, _ := io.ReadFull(f, b)
	return n == len(canaryText) && string(b[:n]) == canaryText
}
