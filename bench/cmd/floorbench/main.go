// Command floorbench measures agent-launcher against its floor, in one run:
// the C reference bench/floor.c, built here with the system's C compiler,
// runs the same arms beside the launcher, so that each target is a ratio of
// two numbers taken side by side on the same machine, not a guess.
//
//	go run ./bench/cmd/floorbench [-launcher bin/agent-launcher] [-rounds 11]
//
// It measures three things, each arm interleaved with the others (A B A B
// ...) after one untimed warm-up run of every arm:
//
//   - start-up: `agent-launcher run -- /bin/true` against a bare fork+execve
//     of /bin/true and against floor's sandbox arm (the least a Landlock
//     launcher does), all timed by floor's exec arm; with a minimal policy
//     file and with the embedded default policy (a throwaway HOME), warm
//     and cold (an empty HOME each start, so no cached state), and with
//     the plan cache off (AGENT_LAUNCHER_PLAN_CACHE=0: planned afresh,
//     the automata kept). The `version` arm is the Go start-up,
//     `check --landlock` loading and planning afresh; run's own phases
//     come from AGENT_LAUNCHER_TRACE, medians over as many runs.
//   - open: floor's open()+close() loop of a file in the workspace run
//     under the launcher, against floor restricting itself with Landlock
//     (read on "/", every right on the workspace: the launcher's shape)
//     and against the bare loop.
//   - workloads: tar extract and rm -rf of 10,000 files (on the scratch
//     filesystem and on tmpfs), git status in a 10,000-file repository,
//     warm-cache go build of a small module, each bare, under floor's
//     sandbox arm and under the launcher in its own workspace, beside
//     run -- /bin/true in the same workspace (the start-up there, which
//     grows with the workspace), and, for the 1.03x targets, in one
//     session: floor's exec arm run under the launcher times the workload
//     -inner times inside it, against the same floor exec bare, so that
//     the ratio is the workload's own cost in a session, its start-up
//     left to the start-up target.
//   - default: the same workloads, each workspace made a git repository,
//     bare and under the embedded default policy, whose built-in write
//     protection (.git, its config and hooks) the private view enforces
//     with mounts.
//
// The scratch directory is made under the user cache directory, not /tmp
// (see newBench), and removed at the end unless -keep. The table and the
// configuration measured go to stdout, progress to stderr. Missed targets
// are reported as NOT MET; with -strict they also make the exit status 1.
// The launcher must already be built.
package main

import (
	"archive/tar"
	"bytes"
	"cmp"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	var o options
	flag.StringVar(&o.launcher, "launcher", "bin/agent-launcher", "the launcher binary to measure (build it first)")
	flag.StringVar(&o.src, "src", "bench/floor.c", "the C reference")
	flag.StringVar(&o.reexecPkg, "reexec", "./bench/cmd/reexec", "the Go reference of the launcher's start-up (a package)")
	flag.StringVar(&o.cc, "cc", "gcc", "C compiler")
	flag.IntVar(&o.rounds, "rounds", 11, "timed runs of every arm (at least 10; odd gives a true median)")
	flag.IntVar(&o.execIters, "exec-iters", 10, "start-ups per start-up sample")
	flag.IntVar(&o.openIters, "open-iters", 100000, "open()+close() pairs per open sample")
	flag.IntVar(&o.files, "files", 10000, "files in the tar archive and in the git repository")
	flag.IntVar(&o.inner, "inner", 3, "workload runs per in-session sample (floor exec N inside one session)")
	flag.StringVar(&o.only, "only", "startup,open,workloads,default", "sections to run, comma-separated")
	flag.StringVar(&o.dir, "dir", "", "parent of the scratch directory (default: the user cache directory, ~/.cache)")
	flag.BoolVar(&o.keep, "keep", false, "keep the scratch directory")
	flag.BoolVar(&o.strict, "strict", false, "exit 1 when a target is not met")
	flag.IntVar(&o.uid, "uid", 4242, "run as root: the ordinary user the start-up is measured as too (this uid, and a gid of the same number); 0 for none")
	flag.Parse()
	bad := flag.NArg() > 0 || o.rounds < 1 || o.execIters < 1 || o.openIters < 1 || o.files < 100 || o.inner < 1
	for _, s := range strings.Split(o.only, ",") {
		bad = bad || !slices.Contains([]string{"startup", "open", "workloads", "default"}, s)
	}
	if bad {
		flag.Usage()
		os.Exit(2)
	}
	b, err := newBench(o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "floorbench: %v\n", err)
		os.Exit(1)
	}
	missed, err := b.run()
	for _, d := range append([]string{b.root}, b.extra...) {
		if o.keep {
			b.logf("kept %s", d)
		} else {
			os.RemoveAll(d)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "floorbench: %v\n", err)
		os.Exit(1)
	}
	if missed > 0 && o.strict {
		os.Exit(1)
	}
}

type options struct {
	launcher, src, cc, only, dir string
	reexecPkg                    string
	rounds, execIters, openIters int
	inner                        int
	files                        int
	keep, strict                 bool
	uid                          int
}

// bench is one run: the scratch tree under root and what has been measured.
type bench struct {
	options
	root   string // scratch directory, symlinks resolved
	home   string // the throwaway HOME of every arm
	ws     string // the small workspace of the start-up and open sections
	floor  string // the built C reference, inside ws so the launcher may run it
	reexec string // the built Go reference of the launcher's start-up
	file   string // the file the open loops open, inside ws
	pmin   string // the minimal policy file
	pwork  string // the minimal policy plus what go needs in HOME
	loads  []*workload
	path   string // PATH of every arm

	// The peers the start-up target is set against (about 9 ms each
	// where the target was set): bubblewrap's path, "" where it is not
	// installed or cannot make its namespaces, and go-landlock's
	// landlock-restrict, built from the module this one requires.
	bwrap, restrict string

	out    table
	missed int
	load0  string   // the load average when the run began
	extra  []string // scratch directories outside root (on tmpfs)
	// user is the ordinary user's copy of the start-up arms (root runs
	// only, uid set), nil when there is none.
	user *userWorld
}

// userWorld is what an ordinary user needs to be measured: a directory it
// may reach (root's cache directory is root's alone) with its own HOME and
// workspace, and copies of the launcher, of floor and of the minimal
// policy; floor runs as the user, so only the launcher's starts are timed.
type userWorld struct {
	cred                            *syscall.Credential
	dir, home, ws                   string
	launcher, floor, pmin, restrict string
	plan                            string // what check --landlock says, as the user
	// bwrap: bubblewrap can make its namespaces as the user too (where
	// unprivileged user namespaces are refused, it cannot).
	bwrap bool
}

// newUserWorld makes b.user under /var/tmp, its HOME and workspace the
// user's.
func (b *bench) newUserWorld() error {
	dir, err := os.MkdirTemp("/var/tmp", "floorbench-user-")
	if err != nil {
		return err
	}
	b.extra = append(b.extra, dir)
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	u := &userWorld{cred: &syscall.Credential{Uid: uint32(b.uid), Gid: uint32(b.uid)}, dir: dir,
		home: filepath.Join(dir, "home"), ws: filepath.Join(dir, "ws"),
		launcher: filepath.Join(dir, "agent-launcher"), floor: filepath.Join(dir, "floor"), pmin: filepath.Join(dir, "minimal.toml"),
		restrict: filepath.Join(dir, "landlock-restrict")}
	for _, d := range []string{u.home, u.ws} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
		if err := os.Chown(d, b.uid, b.uid); err != nil {
			return err
		}
	}
	for src, dst := range map[string]string{b.launcher: u.launcher, b.floor: u.floor, b.pmin: u.pmin, b.restrict: u.restrict} {
		data, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		if err := os.WriteFile(dst, data, 0o755); err != nil {
			return err
		}
		if err := os.Chmod(dst, 0o755); err != nil { // whatever the umask
			return err
		}
	}
	// The user's runs must be confined too, or the numbers mean nothing;
	// what the floor leaves to the file permissions is said with them.
	cmd := exec.Command(u.launcher, "check", "--landlock", "--json", "--config", u.pmin, "--workspace", u.ws)
	cmd.Env, cmd.Dir = []string{"PATH=" + b.path, "HOME=" + u.home, "LC_ALL=C"}, u.ws
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: u.cred}
	out, err := cmd.Output()
	var pl struct {
		ABI    int               `json:"abi"`
		Rules  []json.RawMessage `json:"rules"`
		Sealed []string          `json:"sealed"`
	}
	if err != nil || json.Unmarshal(out, &pl) != nil || pl.ABI < 1 {
		return fmt.Errorf("check --landlock as uid %d: %v: %s", b.uid, err, out)
	}
	u.plan = fmt.Sprintf("%d rules (minimal policy), system secrets left to the file permissions: %q", len(pl.Rules), pl.Sealed)
	b.user = u
	return nil
}

// userMs times the launcher's run -- /bin/true under policy ("" = the
// embedded default) as the ordinary user.
func (b *bench) userMs(policy string) (float64, error) {
	u := b.user
	argv := []string{u.launcher, "run"}
	if policy != "" {
		argv = append(argv, "--config", policy)
	}
	return b.userExecMs(append(argv, "--workspace", u.ws, "--", "/bin/true")...)
}

// userExecMs times run as the ordinary user, in its workspace with its
// HOME: floor's exec arm, run as it.
func (b *bench) userExecMs(run ...string) (float64, error) {
	u := b.user
	argv := append([]string{u.floor, "exec", strconv.Itoa(b.execIters)}, run...)
	env := []string{"PATH=" + b.path, "HOME=" + u.home, "LC_ALL=C"}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = env, u.ws
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: u.cred}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	ns, perr := parseNs(string(out))
	if err != nil || perr != nil {
		// floor discards the child's output; run it to show why.
		run := exec.Command(argv[3], argv[4:]...)
		run.Env, run.Dir = env, u.ws
		run.SysProcAttr = &syscall.SysProcAttr{Credential: u.cred}
		why, _ := run.CombinedOutput()
		return 0, fmt.Errorf("%s: %v %s\n%s\n%s", strings.Join(argv, " "), cmp.Or(err, perr), out, stderr.Bytes(), why)
	}
	return ns / 1e6, nil
}

// loadavg returns the first three fields of /proc/loadavg: other work on
// the machine is the main source of noise.
func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func newBench(o options) (*bench, error) {
	b := &bench{options: o}
	var err error
	if b.launcher, err = filepath.Abs(o.launcher); err != nil {
		return nil, err
	}
	if _, err := os.Stat(b.launcher); err != nil {
		return nil, fmt.Errorf("the launcher: %w (build it first: make build)", err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("the go command is needed for the go build workload: %w", err)
	}
	// PATH is fixed so that bare and confined arms find the same programs.
	b.path = filepath.Dir(goBin) + ":/usr/local/bin:/usr/bin:/bin"
	// Not under /tmp: the embedded default policy grants /tmp, and the
	// throwaway HOME there would put the launcher's denied state
	// directory inside a write tree, which carves /tmp and gives each of
	// its entries a rule (racing every program's temporary files). Real
	// homes are not under /tmp.
	dir := o.dir
	if dir == "" {
		if dir, err = os.UserCacheDir(); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
	}
	root, err := os.MkdirTemp(dir, "floorbench-")
	if err != nil {
		return nil, err
	}
	// The policy is compiled against resolved paths; so are ours.
	if b.root, err = filepath.EvalSymlinks(root); err != nil {
		return nil, err
	}
	b.home = filepath.Join(b.root, "home")
	b.ws = filepath.Join(b.root, "ws")
	b.file = filepath.Join(b.ws, "f")
	b.floor = filepath.Join(b.ws, "floor")
	b.reexec = filepath.Join(b.root, "reexec")
	b.restrict = filepath.Join(b.root, "landlock-restrict")
	b.pmin = filepath.Join(b.root, "minimal.toml")
	b.pwork = filepath.Join(b.root, "workload.toml")
	return b, nil
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "floorbench: "+format+"\n", args...)
}

// env is the environment of every arm, bare or confined: a throwaway HOME,
// no $XDG_* or $AGENT_LAUNCHER_CONFIG (so that the default-policy arm gets
// the embedded default), and the extra variables given.
func (b *bench) env(extra ...string) []string {
	return append([]string{"PATH=" + b.path, "HOME=" + b.home, "LC_ALL=C"}, extra...)
}

// sandbox returns argv run under floor's sandbox arm: the least a Landlock
// launcher does (read on /, every right on ws and /dev/null).
func (b *bench) sandbox(ws string, argv ...string) []string {
	return append([]string{b.floor, "sandbox", ws, "/dev/null", "--"}, argv...)
}

// restrictPkg is go-landlock's own launcher, at the version go.mod
// requires.
const restrictPkg = "github.com/landlock-lsm/go-landlock/cmd/landlock-restrict"

// restricted returns argv run under landlock-restrict (the binary at bin)
// with the rules of floor's sandbox arm: read on /, read and write on ws
// and /dev/null, in go-landlock's default (best-effort) mode.
func (b *bench) restricted(bin, ws string, argv ...string) []string {
	return append([]string{bin, "-ro", "/", "-rw", ws, "-rwfiles", "/dev/null", "--"}, argv...)
}

// bwrapArgv returns argv run under bubblewrap (at bw) in a view like the
// one run gives a session without a policy: new user and PID namespaces,
// its own /proc, private /tmp, /var/tmp and /dev/shm, the rest of the
// host's tree as it is. No Landlock, no policy.
func bwrapArgv(bw string, argv ...string) []string {
	return append([]string{bw, "--unshare-user", "--unshare-pid", "--dev-bind", "/", "/", "--proc", "/proc",
		"--tmpfs", "/tmp", "--tmpfs", "/var/tmp", "--tmpfs", "/dev/shm", "--"}, argv...)
}

// confined returns argv run under the launcher with policy (""
// = the embedded default) and workspace ws.
func (b *bench) confined(policy, ws string, argv ...string) []string {
	a := []string{b.launcher, "run"}
	if policy != "" {
		a = append(a, "--config", policy)
	}
	return append(append(a, "--workspace", ws, "--"), argv...)
}

func (b *bench) run() (missed int, err error) {
	start := time.Now()
	b.load0 = loadavg()
	if err := b.setup(); err != nil {
		return 0, err
	}
	b.header()
	sections := strings.Split(b.only, ",")
	for _, s := range []struct {
		name string
		fn   func() error
	}{{"startup", b.startup}, {"open", b.open}, {"workloads", b.workloads}, {"default", b.defaultWorkloads}} {
		if slices.Contains(sections, s.name) {
			if err := s.fn(); err != nil {
				return b.missed, fmt.Errorf("%s: %w", s.name, err)
			}
		}
	}
	fmt.Printf("\nload average (1, 5, 15 min) at the end: %s; at the start: %s\n", loadavg(), b.load0)
	b.logf("done in %s", time.Since(start).Round(time.Second))
	return b.missed, nil
}

const minimalPolicy = `[file_policy]
default     = "deny"
presets     = ["system"]
write_paths = ["<workspace>/**"]
`

// workloadPolicy adds what the go command reads in HOME: its telemetry
// mode file ("off", written in setup), so that bare and confined go
// commands do the same work.
const workloadPolicy = minimalPolicy + `read_paths  = ["~/.config/go/**"]
`

func (b *bench) setup() error {
	for _, d := range []string{b.home, b.ws} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(b.file, []byte("floor\n"), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(b.pmin, []byte(minimalPolicy), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(b.pwork, []byte(workloadPolicy), 0o644); err != nil {
		return err
	}
	b.logf("building %s with %s", b.src, b.cc)
	if _, err := output(b.env(), "", b.cc, "-O2", "-Wall", "-Wextra", "-o", b.floor, b.src); err != nil {
		return err
	}
	b.logf("building %s and %s with go build", b.reexecPkg, restrictPkg)
	for pkg, out := range map[string]string{b.reexecPkg: b.reexec, restrictPkg: b.restrict} {
		if _, err := output(append(os.Environ(), "CGO_ENABLED=0"), "", "go", "build", "-trimpath", "-o", out, pkg); err != nil {
			return err
		}
	}
	if _, err := output(b.env(), b.ws, b.restricted(b.restrict, b.ws, "/bin/true")...); err != nil {
		return err
	}
	// bubblewrap is the peer the issue names first; without it (scripts/
	// deps installs it) or where it cannot make its namespaces, its rows
	// say so.
	if bw, err := lookPathIn(b.env(), "bwrap"); err != nil {
		b.logf("bubblewrap is left out: %v (scripts/deps installs it)", err)
	} else if _, err := output(b.env(), b.ws, bwrapArgv(bw, "/bin/true")...); err != nil {
		b.logf("bubblewrap is left out: %v", err)
	} else {
		b.bwrap = bw
	}
	// A confined run must say it is confined, or the numbers mean nothing.
	out, err := output(b.env(), b.ws, b.confined(b.pmin, b.ws, "/bin/true")...)
	if err != nil {
		return err
	}
	if !strings.Contains(out, "Landlock ABI") {
		return fmt.Errorf("the launcher did not report a Landlock floor:\n%s", out)
	}
	if os.Geteuid() == 0 && b.uid > 0 {
		if err := b.newUserWorld(); err != nil {
			b.logf("the start-up as an ordinary user is left out: %v", err)
		} else if b.bwrap != "" {
			if _, err := b.userExecMs(bwrapArgv(b.bwrap, "/bin/true")...); err != nil {
				b.logf("bubblewrap as uid %d is left out: %v", b.uid, err)
			} else {
				b.user.bwrap = true
			}
		}
	}
	return nil
}

func (b *bench) header() {
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	abi := "?"
	if out, err := output(b.env(), b.ws, b.launcher, "check", "--config", b.pmin, "--workspace", b.ws, "--landlock"); err == nil {
		abi = strings.TrimPrefix(strings.SplitN(out, "\n", 2)[0], "Landlock ABI ")
	}
	fmt.Printf("agent-launcher floor benchmark: Linux %s, %d CPUs, Landlock ABI %s, %s; %d interleaved rounds per arm after one warm-up\n",
		strings.TrimSpace(string(kernel)), runtime.NumCPU(), abi, runtime.Version(), b.rounds)
	fmt.Printf("launcher %s, %s\n", b.launcher, revision(b.launcher))
	fmt.Printf("median, min-max and interquartile range (IQR) of the rounds; ratios and differences are of medians\n")
}

// revision says when the binary at path was built and from which commit,
// as the go command stamped it.
func revision(path string) string {
	var built string
	if st, err := os.Stat(path); err == nil {
		built = "built " + st.ModTime().Format(time.DateTime) + ", "
	}
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return built + "revision unknown: " + err.Error()
	}
	rev, dirty := "not stamped (-buildvcs=false)", ""
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision" && len(s.Value) >= 12:
			rev = s.Value[:12]
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = " with uncommitted changes"
		}
	}
	return built + "revision " + rev + dirty
}

// arm is one thing to time. run returns one sample in the section's unit.
type arm struct {
	name string
	run  func() (float64, error)
}

// measure runs every arm once untimed, then rounds times interleaved, and
// returns the samples of each arm.
func (b *bench) measure(arms []arm) ([][]float64, error) {
	samples := make([][]float64, len(arms))
	for r := -1; r < b.rounds; r++ {
		for i, a := range arms {
			v, err := a.run()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", a.name, err)
			}
			if r >= 0 {
				samples[i] = append(samples[i], v)
			}
		}
	}
	return samples, nil
}

// floorNs runs the C reference (possibly under the launcher) and returns
// the ns/op it printed.
func (b *bench) floorNs(env []string, argv ...string) (float64, error) {
	out, err := outputSplit(env, b.ws, argv...)
	if err != nil {
		return 0, err
	}
	return parseNs(out)
}

// parseNs reads the ns/op floor printed last.
func parseNs(out string) (float64, error) {
	f := strings.Fields(out)
	if len(f) < 2 || f[len(f)-1] != "ns/op" {
		return 0, fmt.Errorf("unexpected output of floor: %q", out)
	}
	return strconv.ParseFloat(f[len(f)-2], 64)
}

func (b *bench) startup() error {
	b.logf("start-up: %d rounds of %d start-ups per arm", b.rounds, b.execIters)
	env := b.env()
	execMs := func(argv ...string) func() (float64, error) {
		return func() (float64, error) { return b.execMs(env, argv...) }
	}
	noCache := b.env("AGENT_LAUNCHER_PLAN_CACHE=0")
	// A cold start has an empty HOME, so no state the launcher keeps
	// there (the compiled-policy cache) survives from an earlier start.
	cold := 0
	coldMs := func(argv ...string) func() (float64, error) {
		return func() (float64, error) {
			var sum float64
			for range b.execIters {
				cold++
				home := filepath.Join(b.root, "cold", strconv.Itoa(cold))
				if err := os.MkdirAll(home, 0o755); err != nil {
					return 0, err
				}
				env := append(b.env()[:0:0], "PATH="+b.path, "HOME="+home, "LC_ALL=C")
				ns, err := b.floorNs(env, append([]string{b.floor, "exec", "1"}, argv...)...)
				if err != nil {
					_, err2 := output(env, b.ws, argv...)
					return 0, errors.Join(err, err2)
				}
				sum += ns
				if err := os.RemoveAll(home); err != nil {
					return 0, err
				}
			}
			return sum / float64(b.execIters) / 1e6, nil
		}
	}
	check := func(policy string) []string {
		a := []string{b.launcher, "check"}
		if policy != "" {
			a = append(a, "--config", policy)
		}
		return append(a, "--workspace", b.ws, "--landlock")
	}
	arms := []arm{
		{"exec /bin/true (C fork+execve+wait)", execMs("/bin/true")},
		{"C Landlock wrapper: floor sandbox", execMs(b.sandbox(b.ws, "/bin/true")...)},
		{"C view launcher: floor viewbox", execMs(append([]string{b.floor, "viewbox", b.ws, "/dev/null", "--"}, "/bin/true")...)},
		{"agent-launcher version (Go start-up)", execMs(b.launcher, "version")},
		{"Go re-exec floor: 2 Go starts, execve", execMs(b.reexec, "/bin/true")},
		{"check --landlock, minimal policy", execMs(check(b.pmin)...)},
		{"run -- /bin/true, minimal policy", execMs(b.confined(b.pmin, b.ws, "/bin/true")...)},
		{"  the same, cold (empty HOME)", coldMs(b.confined(b.pmin, b.ws, "/bin/true")...)},
		{"  the same, plan cache off", func() (float64, error) { return b.execMs(noCache, b.confined(b.pmin, b.ws, "/bin/true")...) }},
		{"check --landlock, default policy", execMs(check("")...)},
		{"run -- /bin/true, default policy", execMs(b.confined("", b.ws, "/bin/true")...)},
		{"  the same, cold (empty HOME)", coldMs(b.confined("", b.ws, "/bin/true")...)},
		{"peer: go-landlock's landlock-restrict", execMs(b.restricted(b.restrict, b.ws, "/bin/true")...)},
	}
	// Where each peer's row is (-1: not measured), for the comparison below.
	peer := struct{ restrict, bwrap, userRun, userRestrict, userBwrap int }{len(arms) - 1, -1, -1, -1, -1}
	if b.bwrap != "" {
		peer.bwrap = len(arms)
		arms = append(arms, arm{"peer: bubblewrap, a view like run's", execMs(bwrapArgv(b.bwrap, "/bin/true")...)})
	}
	// An operator is an ordinary user, not root (the built-in system
	// secrets are the file permissions' for it: fewer rules).
	if b.user != nil {
		peer.userRun = len(arms)
		arms = append(arms,
			arm{fmt.Sprintf("run -- /bin/true, minimal policy, as uid %d", b.uid), func() (float64, error) { return b.userMs(b.user.pmin) }},
			arm{fmt.Sprintf("run -- /bin/true, default policy, as uid %d", b.uid), func() (float64, error) { return b.userMs("") }})
		peer.userRestrict = len(arms)
		arms = append(arms, arm{fmt.Sprintf("peer: landlock-restrict, as uid %d", b.uid), func() (float64, error) {
			return b.userExecMs(b.restricted(b.user.restrict, b.user.ws, "/bin/true")...)
		}})
		if b.user.bwrap {
			peer.userBwrap = len(arms)
			arms = append(arms, arm{fmt.Sprintf("peer: bubblewrap, as uid %d", b.uid), func() (float64, error) {
				return b.userExecMs(bwrapArgv(b.bwrap, "/bin/true")...)
			}})
		}
	}
	s, err := b.measure(arms)
	if err != nil {
		return err
	}
	base := median(s[0])
	b.section("a. start-up, ms per start", "vs exec /bin/true")
	for i, a := range arms {
		d := median(s[i]) - base
		cmp, verdict := "", ""
		if i > 0 {
			cmp = fmt.Sprintf("+%.1f ms", d)
		}
		if strings.HasPrefix(a.name, "run") || strings.HasPrefix(a.name, "  the same") {
			verdict = b.verdict(d <= 15, "<= +15 ms")
		}
		b.row(a.name, s[i], "%.2f", cmp, verdict)
	}
	b.out.flush()
	fmt.Printf("  a cold start (no kept automata or plan) costs %+.1f ms more (minimal policy), %+.1f ms (default policy); planning afresh with the automata kept %+.1f ms\n",
		median(s[7])-median(s[6]), median(s[11])-median(s[10]), median(s[8])-median(s[6]))
	// The target was set where the peers took about 9 ms: their start-up
	// measured here, in the same rounds, says how this machine compares
	// with that one; the verdict above stays the target as written.
	over := func(i int) float64 { return median(s[i]) - base }
	ratio := func(run, peer int) string {
		if peer < 0 {
			return "not measured"
		}
		return fmt.Sprintf("%.2fx", over(run)/over(peer))
	}
	bw := "bubblewrap not measured"
	if peer.bwrap >= 0 {
		bw = fmt.Sprintf("bubblewrap %+.1f ms", over(peer.bwrap))
	}
	fmt.Printf("  the peers the target was set against (about 9 ms each there, 15 ms = 1.67x them): here %s, landlock-restrict %+.1f ms; run's start-up (minimal policy) is %s bubblewrap's and %s landlock-restrict's as root",
		bw, over(peer.restrict), ratio(6, peer.bwrap), ratio(6, peer.restrict))
	if peer.userRun >= 0 {
		fmt.Printf(", %s and %s as uid %d (each against the peer as that user)", ratio(peer.userRun, peer.userBwrap), ratio(peer.userRun, peer.userRestrict), b.uid)
	}
	fmt.Printf("\n")
	if phases, err := b.phases(env, b.confined(b.pmin, b.ws, "/bin/true")); err == nil {
		fmt.Printf("  where run's time goes (minimal policy, AGENT_LAUNCHER_TRACE, medians of %d runs): the Go start-up before main, about %.1f ms (version), then from main:\n    %s\n",
			b.rounds, median(s[3])-base, phases)
	} else {
		fmt.Printf("  where run's time goes: %v\n", err)
	}
	fmt.Printf("  Go re-exec floor (bench/cmd/reexec): what a launcher that re-executes a Go init stage pays before doing any work (run's init stage is C since the seventh pass); the floor of run's own design is a Go start-up (version) and the C view launcher (viewbox), %+.1f ms together; run is %+.1f ms above it (minimal policy)\n",
		median(s[3])-base+median(s[2])-base, median(s[6])-median(s[3])-(median(s[2])-base))
	if us, err := b.faultUs(); err == nil {
		fmt.Printf("  one anonymous page fault here: %.1f us (floor faults); a Go start-up takes about 300, a C /bin/true about 50\n", us)
	} else {
		fmt.Printf("  page-fault cost: %v\n", err)
	}
	fmt.Printf("  floor sandbox %s /dev/null -- /bin/true: restrict to read on /, every right on the workspace and /dev/null, then execve; landlock-restrict (%s, built from the go-landlock module go.mod requires) with the same paths\n", b.ws, restrictPkg)
	if b.bwrap != "" {
		fmt.Printf("  bubblewrap: %s (no Landlock, no policy)\n", strings.Join(bwrapArgv(b.bwrap, "/bin/true"), " "))
	}
	fmt.Printf("  floor viewbox: the same in a session view built in C (user, mount and PID namespaces, private /tmp /var/tmp /dev/shm, a fresh /proc, a PID 1 that forks the agent with no capability and reaps it): what run's init stage (initstage.c) does, %+.1f ms over the sandbox arm\n",
		median(s[2])-median(s[1]))
	fmt.Printf("  each sample: floor exec %d ARGV (fork, execve, wait, %d times; cold: %d times floor exec 1 ARGV, each with a new empty HOME); run's ARGV: %s run [--config minimal.toml] --workspace %s -- /bin/true\n", b.execIters, b.execIters, b.execIters, b.launcher, b.ws)
	fmt.Printf("  minimal policy: {%s}; default policy: the embedded one, with HOME=%s\n", oneLine(minimalPolicy), b.home)
	if b.user != nil {
		fmt.Printf("  as uid %d: floor (a copy) runs as that user, in %s with its own HOME and workspace, the launcher a copy of the one measured; compared with root's exec /bin/true; its plan: %s\n", b.uid, b.user.dir, b.user.plan)
	}
	return nil
}

// execMs times argv, execIters starts per sample, by floor's exec arm.
func (b *bench) execMs(env []string, argv ...string) (float64, error) {
	ns, err := b.floorNs(env, append([]string{b.floor, "exec", strconv.Itoa(b.execIters)}, argv...)...)
	if err != nil {
		// floor discards the child's output; run it to show why.
		if _, err2 := output(env, b.ws, argv...); err2 != nil {
			err = err2
		}
	}
	return ns / 1e6, err
}

// phases runs argv with AGENT_LAUNCHER_TRACE=1 b.rounds times, after one
// warm-up, and returns the median time of each phase it prints (with how
// many runs printed it when not all did), in the order of those medians.
func (b *bench) phases(env []string, argv []string) (string, error) {
	times := map[string][]float64{}
	for i := range b.rounds + 1 {
		out, err := output(append(slices.Clone(env), "AGENT_LAUNCHER_TRACE=1"), b.ws, argv...)
		if err != nil {
			return "", err
		}
		if i == 0 {
			continue // a warm-up: its output goes to a pipe, not /dev/null as above, a new plan
		}
		for _, l := range strings.Split(out, "\n") {
			rest, ok := strings.CutPrefix(l, "agent-launcher: trace ")
			if !ok {
				continue
			}
			ms, phase, ok := strings.Cut(strings.TrimSpace(rest), " ms  ")
			v, err := strconv.ParseFloat(ms, 64)
			if !ok || err != nil {
				continue
			}
			phase, _, _ = strings.Cut(phase, " (") // counts vary
			times[phase] = append(times[phase], v)
		}
	}
	if len(times) == 0 {
		return "", errors.New("AGENT_LAUNCHER_TRACE printed nothing")
	}
	order := slices.Collect(maps.Keys(times))
	slices.SortFunc(order, func(x, y string) int { return cmp.Compare(median(times[x]), median(times[y])) })
	var parts []string
	for _, p := range order {
		part := fmt.Sprintf("%s %.1f", p, median(times[p]))
		if len(times[p]) != b.rounds {
			part += fmt.Sprintf(" (in %d of %d)", len(times[p]), b.rounds)
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ", "), nil
}

// faultUs measures one anonymous page fault, the median of five runs of
// floor faults.
func (b *bench) faultUs() (float64, error) {
	var v []float64
	for range 5 {
		ns, err := b.floorNs(b.env(), b.floor, "faults", "10000")
		if err != nil {
			return 0, err
		}
		v = append(v, ns/1e3)
	}
	return median(v), nil
}

func (b *bench) open() error {
	b.logf("open: %d rounds of %d open()+close() per arm, file %s", b.rounds, b.openIters, b.file)
	n := strconv.Itoa(b.openIters)
	env := b.env()
	c := func(argv ...string) func() (float64, error) {
		return func() (float64, error) { return b.floorNs(env, argv...) }
	}
	// The same Landlock domain as the launcher's, size included: the
	// workspace rule plus empty directories up to the plan's rule count
	// (a lookup per walked dentry searches a tree of the domain's rules).
	nrules, err := b.planRules(b.pmin, b.ws)
	if err != nil {
		return err
	}
	sameSize := []string{b.floor, "landlock", n, b.file, b.ws}
	for i := 2; i < nrules; i++ { // "/" and the workspace are two
		d := filepath.Join(b.root, "rules", fmt.Sprintf("r%04d", i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		sameSize = append(sameSize, d)
	}
	arms := []arm{
		{"bare (C)", c(b.floor, "bare", n, b.file)},
		{"Landlock only (C restricts itself)", c(b.floor, "landlock", n, b.file, b.ws)},
		{"under agent-launcher run (C bare loop)", c(b.confined(b.pmin, b.ws, b.floor, "openloop", n, b.file)...)},
		{fmt.Sprintf("Landlock only, %d rules as run's (C)", nrules), c(sameSize...)},
		{"Landlock, read rule on / only (C)", c(b.floor, "landlock", n, b.file)},
	}
	s, err := b.measure(arms)
	if err != nil {
		return err
	}
	bare, ll, run, same := median(s[0]), median(s[1]), median(s[2]), median(s[3])
	b.section("b. open()+close() of a workspace file, ns per pair", "ratio")
	b.row(arms[0].name, s[0], "%.0f", "", "")
	b.row(arms[1].name, s[1], "%.0f", fmt.Sprintf("%.3fx bare", ll/bare), "")
	b.row(arms[2].name, s[2], "%.0f", fmt.Sprintf("%.3fx Landlock", run/ll), b.verdict(run/ll <= 1.02, "<= 1.02x"))
	b.row("", nil, "", fmt.Sprintf("%.3fx bare", run/bare), "")
	b.row("", nil, "", fmt.Sprintf("%.3fx Landlock, %d rules", run/same, nrules), "")
	b.row(arms[3].name, s[3], "%.0f", fmt.Sprintf("%.3fx bare", same/bare), "")
	b.row(arms[4].name, s[4], "%.0f", fmt.Sprintf("%.3fx bare", median(s[4])/bare), "")
	b.out.flush()
	fmt.Printf("  file %s; the C Landlock arms handle every filesystem right of the ABI and grant read on /, every right on the workspace (and on %d empty directories for the %d-rule arm); under run: the minimal policy\n", b.file, nrules-2, nrules)
	return nil
}

// planRules returns the number of Landlock rules of the launcher's plan for
// policy and ws.
func (b *bench) planRules(policy, ws string) (int, error) {
	out, err := output(b.env(), ws, b.launcher, "check", "--config", policy, "--workspace", ws, "--landlock")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "rules ("); ok {
			v, _, _ = strings.Cut(v, ")")
			return strconv.Atoi(v)
		}
	}
	return 0, fmt.Errorf("check --landlock printed no rule count:\n%s", out)
}

// workload is a command run bare, under floor's sandbox arm and under the
// launcher, in workspace ws.
type workload struct {
	name   string
	ws     string
	argv   []string
	env    []string
	prep   func() error // untimed, before each run
	config string       // what was measured, for the notes
	// repeat is argv as floor's exec arm runs it several times in a row
	// (in one session, and bare beside it): its program's absolute path,
	// and prep done by the command itself where there is one. nil: argv.
	repeat []string
	floor  string // a copy of floor in ws, where a confined session may run it
}

// makeLoads prepares the workloads' workspaces once (b.loads).
func (b *bench) makeLoads() error {
	if b.loads != nil {
		return nil
	}
	var loads []*workload
	makers := []func() (*workload, error){func() (*workload, error) { return b.tarWorkload(b.root) }}
	// The same on tmpfs: creating files right after deleting thousands is
	// slow and erratic on some filesystems (ext4 without a journal skips
	// inodes freed in the last minutes: recently_deleted() in
	// fs/ext4/ialloc.c), which buries a few percent under tens.
	if fsType("/dev/shm") == "tmpfs" && fsType(b.root) != "tmpfs" {
		makers = append(makers, func() (*workload, error) {
			d, err := os.MkdirTemp("/dev/shm", "floorbench-")
			if err != nil {
				return nil, err
			}
			b.extra = append(b.extra, d)
			return b.tarWorkload(d)
		})
	}
	makers = append(makers, b.gitWorkload, b.goWorkload)
	for _, mk := range makers {
		w, err := mk()
		if err != nil {
			return err
		}
		if err := b.placeFloor(w); err != nil {
			return fmt.Errorf("%s: %w", w.name, err)
		}
		loads = append(loads, w)
	}
	b.loads = loads
	return nil
}

// sessionRows adds the in-session arms of a workload: the milliseconds of
// one run, bare and inside one session, and the session's ratio, which the
// 1.03x target is read against.
func (b *bench) sessionRows(bare, inside []float64) {
	r := median(inside) / median(bare)
	b.row(fmt.Sprintf("  bare, per run of floor exec %d", b.inner), bare, "%.1f", "", "")
	b.row(fmt.Sprintf("  in one session, per run of floor exec %d", b.inner), inside, "%.1f", fmt.Sprintf("%.3fx bare", r), b.verdict(r <= 1.03, "<= 1.03x"))
}

// sessionNote says how the in-session rows were measured and why the
// target is read against them.
func (b *bench) sessionNote() {
	fmt.Printf("  in one session: floor exec %d REPEAT inside one run (one start-up per sample, outside the timing), against floor exec %d REPEAT bare, interleaved with the other arms; REPEAT is the workload, go build's as sh -c 'rm -f floorwork && exec go build -o floorwork .'. The 1.03x target is read against it: the workload's own cost confined, the start-up having its own target (section a); the start-up-included rows say what one short run costs\n", b.inner, b.inner)
}

// placeFloor copies floor into w's workspace, where the session of every
// policy measured lets the agent run it (a git repository's status does not
// list it), and makes w.repeat's program an absolute path (floor's exec arm
// does not search PATH).
func (b *bench) placeFloor(w *workload) error {
	w.floor = filepath.Join(w.ws, ".floorbench-floor")
	data, err := os.ReadFile(b.floor)
	if err != nil {
		return err
	}
	if err := os.WriteFile(w.floor, data, 0o755); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(w.ws, ".git")); err == nil {
		if err := writeFile(filepath.Join(w.ws, ".git", "info", "exclude"), ".floorbench-floor\n"); err != nil {
			return err
		}
	}
	if w.repeat == nil {
		w.repeat = slices.Clone(w.argv)
	}
	if !filepath.IsAbs(w.repeat[0]) {
		path, err := lookPathIn(w.env, w.repeat[0])
		if err != nil {
			return err
		}
		w.repeat[0] = path
	}
	return nil
}

// lookPathIn finds name in the PATH of env.
func lookPathIn(env []string, name string) (string, error) {
	for _, kv := range env {
		if dirs, ok := strings.CutPrefix(kv, "PATH="); ok {
			for _, d := range filepath.SplitList(dirs) {
				p := filepath.Join(d, name)
				if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
					return p, nil
				}
			}
		}
	}
	return "", fmt.Errorf("%s: not found in the workload's PATH", name)
}

// inSession returns an arm that times w's repeat b.inner times with floor's
// exec arm, under the launcher with policy ("": the embedded default) when
// confined, else bare, and gives the milliseconds of one run: inside a
// session, the workload's own cost, the session's start-up left out.
func (b *bench) inSession(w *workload, policy string, confined bool) func() (float64, error) {
	argv := append([]string{w.floor, "exec", strconv.Itoa(b.inner)}, w.repeat...)
	if confined {
		argv = b.confined(policy, w.ws, argv...)
	}
	return func() (float64, error) {
		out, err := outputSplit(w.env, w.ws, argv...)
		if err != nil {
			return 0, err
		}
		ns, err := parseNs(out)
		return ns / 1e6, err
	}
}

func (b *bench) workloads() error {
	if err := b.makeLoads(); err != nil {
		return err
	}
	loads := b.loads
	var results [][][]float64
	for _, w := range loads {
		b.logf("workload %s: %d rounds per arm", w.name, b.rounds)
		wall := w.wall
		// The /bin/true arms measure the start-up in this workspace's
		// configuration (its plan's size), to be subtracted.
		s, err := b.measure([]arm{
			{"bare", wall(w.prep, w.argv)},
			{"C Landlock wrapper", wall(w.prep, b.sandbox(w.ws, w.argv...))},
			{"launcher", wall(w.prep, b.confined(b.pwork, w.ws, w.argv...))},
			{"bare /bin/true", wall(nil, []string{"/bin/true"})},
			{"launcher /bin/true", wall(nil, b.confined(b.pwork, w.ws, "/bin/true"))},
			{"bare, floor exec", b.inSession(w, "", false)},
			{"in one session, floor exec", b.inSession(w, b.pwork, true)},
		})
		if err != nil {
			return fmt.Errorf("%s: %w", w.name, err)
		}
		results = append(results, s)
	}
	b.section("c. workloads, ms wall", "ratio")
	for i, w := range loads {
		s := results[i]
		bare, floor, run := median(s[0]), median(s[1]), median(s[2])
		startup := median(s[4]) - median(s[3])
		b.row(w.name+", bare", s[0], "%.1f", "", "")
		b.row("  under floor sandbox (C Landlock)", s[1], "%.1f", fmt.Sprintf("%.3fx bare", floor/bare), "")
		b.row("  under agent-launcher run (start-up included)", s[2], "%.1f", fmt.Sprintf("%.3fx bare", run/bare), "")
		b.row("", nil, "", fmt.Sprintf("%.3fx C Landlock", run/floor), "")
		b.row("", nil, "", fmt.Sprintf("%.3fx bare less start-up", (run-startup)/bare), "")
		b.row("  start-up here: run -- /bin/true", s[4], "%.1f", fmt.Sprintf("+%.1f ms over bare /bin/true", startup), "")
		b.sessionRows(s[5], s[6])
	}
	b.out.flush()
	fmt.Printf("  policy: {%s}; HOME=%s (go's telemetry mode file there says off); each arm timed from fork to reaping\n", oneLine(workloadPolicy), b.home)
	b.sessionNote()
	for _, w := range loads {
		fmt.Printf("  %s: %s\n", w.name, w.config)
		fmt.Printf("    %s\n", b.planSummary(w.ws))
	}
	return nil
}

// defaultWorkloads runs the workloads again, each workspace made a git
// repository, under the embedded default policy: its built-in write
// protection is then in force (.git, .git/config and .git/hooks are mounts
// in the session's private view), and the target is the same 1.03x of
// bare. The C wrapper is not run here: it knows no policy.
func (b *bench) defaultWorkloads() error {
	if err := b.makeLoads(); err != nil {
		return err
	}
	env := b.env("GIT_CONFIG_NOSYSTEM=1")
	for _, w := range b.loads {
		if _, err := os.Stat(filepath.Join(w.ws, ".git")); err == nil {
			continue
		}
		if err := gitCommitAll(env, w.ws); err != nil {
			return fmt.Errorf("%s: making the workspace a git repository: %w", w.name, err)
		}
	}
	var results [][][]float64
	for _, w := range b.loads {
		b.logf("default policy, git workspace, workload %s: %d rounds per arm", w.name, b.rounds)
		wall := w.wall
		// A name that comes and goes at the workspace's top: every start
		// after it finds the kept plan no longer holds, as after a
		// session that changed the workspace.
		toggle := filepath.Join(w.ws, ".floorbench-change")
		change := func() error {
			err := os.Remove(toggle)
			if errors.Is(err, fs.ErrNotExist) {
				return os.WriteFile(toggle, nil, 0o644)
			}
			return err
		}
		s, err := b.measure([]arm{
			{"bare", wall(w.prep, w.argv)},
			{"launcher, default policy", wall(w.prep, b.confined("", w.ws, w.argv...))},
			{"bare /bin/true", wall(nil, []string{"/bin/true"})},
			{"launcher /bin/true", wall(nil, b.confined("", w.ws, "/bin/true"))},
			{"launcher /bin/true after a change", wall(change, b.confined("", w.ws, "/bin/true"))},
			{"bare, floor exec", b.inSession(w, "", false)},
			{"in one session, floor exec", b.inSession(w, "", true)},
		})
		os.Remove(toggle)
		if err != nil {
			return fmt.Errorf("%s, default policy: %w", w.name, err)
		}
		results = append(results, s)
	}
	b.section("d. workloads in a git workspace under the embedded default policy, ms wall", "ratio")
	for i, w := range b.loads {
		s := results[i]
		bare, run := median(s[0]), median(s[1])
		startup := median(s[3]) - median(s[2])
		b.row(w.name+", bare", s[0], "%.1f", "", "")
		b.row("  under agent-launcher run, default policy (start-up included)", s[1], "%.1f", fmt.Sprintf("%.3fx bare", run/bare), "")
		b.row("", nil, "", fmt.Sprintf("%.3fx bare less start-up", (run-startup)/bare), "")
		b.row("  start-up here: run -- /bin/true", s[3], "%.1f", fmt.Sprintf("+%.1f ms over bare /bin/true", startup), "")
		b.row("  the same after a change in it (plans afresh)", s[4], "%.1f", fmt.Sprintf("+%.1f ms over bare /bin/true", median(s[4])-median(s[2])), "")
		b.sessionRows(s[5], s[6])
	}
	b.out.flush()
	b.sessionNote()
	fmt.Printf("  policy: the embedded default (no --config; HOME=%s holds no policy); every workspace is a git repository with one commit\n", b.home)
	for _, w := range b.loads {
		fmt.Printf("  %s: %s\n    %s\n", w.name, w.ws, b.planSummaryWith("", w.ws))
	}
	return nil
}

// planSummary says what Landlock plan the workload policy gives ws.
func (b *bench) planSummary(ws string) string { return b.planSummaryWith(b.pwork, ws) }

// planSummaryWith says what Landlock plan policy ("": the embedded
// default) gives ws, and what the private view mounts there.
func (b *bench) planSummaryWith(policy, ws string) string {
	args := []string{"check"}
	if policy != "" {
		args = append(args, "--config", policy)
	}
	out, err := output(b.env(), ws, append([]string{b.launcher}, append(args, "--workspace", ws, "--landlock")...)...)
	if err != nil {
		return "check --landlock failed: " + err.Error()
	}
	var rules, carved string
	var inWs []string
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "rules ("):
			rules = strings.TrimSuffix(l, ":")
		case strings.HasPrefix(l, "carved directories ("):
			carved, _, _ = strings.Cut(l, ":")
		case strings.HasPrefix(l, "  "+ws) && carved != "" && !strings.Contains(l, " dir ") && !strings.Contains(l, " file "):
			inWs = append(inWs, strings.TrimSpace(l))
		}
	}
	s := fmt.Sprintf("Landlock plan: %s, %s", rules, carved)
	if n := strings.Count(out, "  (read-only") + strings.Count(out, "  (pinned"); n > 0 {
		s += fmt.Sprintf(", %d paths mounted over themselves", n)
	}
	if len(inWs) == 0 {
		return s + "; nothing in the workspace is carved"
	}
	return s + "; carved in the workspace: " + strings.Join(inWs, ", ")
}

// tree writes n small files under dir, 100 to a directory, calling add
// for each with its relative name and contents.
func tree(n int, add func(name string, data []byte) error) error {
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("d%03d/f%04d.txt", i/100, i)
		size := (i * 131) % 2048 // 0-2 KiB, about 1 KiB on average
		data := bytes.Repeat([]byte{byte('a' + i%26)}, size)
		if err := add(name, data); err != nil {
			return err
		}
	}
	return nil
}

func writeTree(dir string, n int) error {
	return tree(n, func(name string, data []byte) error {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return os.WriteFile(p, data, 0o644)
	})
}

// fsType names the filesystem holding path (statfs(2) f_type), or gives
// its magic number.
func fsType(path string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return "unknown"
	}
	switch uint32(st.Type) {
	case 0xEF53:
		return "ext4"
	case 0x01021994:
		return "tmpfs"
	case 0x58465342:
		return "xfs"
	case 0x9123683E:
		return "btrfs"
	}
	return fmt.Sprintf("%#x", uint32(st.Type))
}

// tarWorkload extracts and removes b.files files in a workspace under
// parent.
func (b *bench) tarWorkload(parent string) (*workload, error) {
	ws := filepath.Join(parent, "ws-tar")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(ws, "files.tar"))
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(f)
	dirs := map[string]bool{}
	err = tree(b.files, func(name string, data []byte) error {
		if d := "x/" + filepath.Dir(name) + "/"; !dirs[d] {
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755}); err != nil {
				return err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "x/" + name, Mode: 0o644, Size: int64(len(data))}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("writing the tar archive: %w", err)
	}
	return &workload{
		name:   fmt.Sprintf("tar xf + rm -rf, %d files, %s", b.files, fsType(parent)),
		ws:     ws,
		argv:   []string{"/bin/sh", "-c", "tar -xf files.tar && rm -rf x"},
		env:    b.env(),
		config: fmt.Sprintf("workspace %s holds files.tar only (%d files of 0-2 KiB in %d directories); sh -c 'tar -xf files.tar && rm -rf x' in it", ws, b.files, (b.files+99)/100),
	}, nil
}

// gitCommitAll makes ws a git repository with everything in it committed.
func gitCommitAll(env []string, ws string) error {
	for _, argv := range [][]string{
		{"git", "init", "-q"},
		{"git", "add", "-A"},
		{"git", "-c", "user.name=floorbench", "-c", "user.email=floorbench@localhost", "commit", "-q", "-m", "files"},
	} {
		if _, err := output(env, ws, argv...); err != nil {
			return err
		}
	}
	return nil
}

// wall returns an arm that runs prep (if any), untimed, then times argv
// in w's workspace and environment.
func (w *workload) wall(prep func() error, argv []string) func() (float64, error) {
	return func() (float64, error) {
		if prep != nil {
			if err := prep(); err != nil {
				return 0, err
			}
		}
		return wallMs(w.env, w.ws, argv...)
	}
}

func (b *bench) gitWorkload() (*workload, error) {
	ws := filepath.Join(b.root, "ws-git")
	b.logf("creating a %d-file git repository", b.files)
	if err := writeTree(ws, b.files); err != nil {
		return nil, err
	}
	env := b.env("GIT_CONFIG_NOSYSTEM=1")
	if err := gitCommitAll(env, ws); err != nil {
		return nil, err
	}
	return &workload{
		name:   fmt.Sprintf("git status, %d files", b.files),
		ws:     ws,
		argv:   []string{"git", "--no-optional-locks", "status"},
		env:    env,
		config: "the repository is the workspace root, so its .git entry (write-protected) carves the root and .git itself: each entry gets its own rule and neither takes new entries, so a confined git cannot create .git/index.lock; --no-optional-locks keeps both arms from trying (status refreshes no index)",
	}, nil
}

// goPackages are standard-library packages that import nothing internal:
// copied into a module, they are a small real module with no network and
// no dependencies.
var goPackages = []string{"container/heap", "container/list", "container/ring", "encoding/csv", "text/tabwriter", "text/template/parse"}

const goMain = `package main

import (
	"fmt"
	"os"
	"strings"

	"example.com/floorwork/lib/csv"
	"example.com/floorwork/lib/heap"
	"example.com/floorwork/lib/list"
	"example.com/floorwork/lib/parse"
	"example.com/floorwork/lib/ring"
	"example.com/floorwork/lib/tabwriter"
)

type ints []int

func (h ints) Len() int           { return len(h) }
func (h ints) Less(i, j int) bool { return h[i] < h[j] }
func (h ints) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *ints) Push(x any)        { *h = append(*h, x.(int)) }
func (h *ints) Pop() any          { o := *h; x := o[len(o)-1]; *h = o[:len(o)-1]; return x }

func main() {
	recs, err := csv.NewReader(strings.NewReader("a,b\nc,d\n")).ReadAll()
	if err != nil {
		panic(err)
	}
	h := &ints{3, 1, 2}
	heap.Init(h)
	l := list.New()
	l.PushBack(heap.Pop(h))
	trees, err := parse.Parse("t", "{{.}}", "{{", "}}", map[string]any{})
	if err != nil {
		panic(err)
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 1, ' ', 0)
	fmt.Fprintf(w, "%d\t%d\t%d\t%d\n", len(recs), l.Len(), ring.New(3).Len(), len(trees))
	w.Flush()
}
`

func (b *bench) goWorkload() (*workload, error) {
	ws := filepath.Join(b.root, "ws-go")
	goroot, err := output(b.env(), "", "go", "env", "GOROOT")
	if err != nil {
		return nil, err
	}
	goroot = strings.TrimSpace(goroot)
	version := strings.TrimPrefix(runtime.Version(), "go")
	if parts := strings.SplitN(version, ".", 3); len(parts) >= 2 {
		version = parts[0] + "." + parts[1]
	}
	if err := writeFile(filepath.Join(ws, "go.mod"), "module example.com/floorwork\n\ngo "+version+"\n"); err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(ws, "main.go"), goMain); err != nil {
		return nil, err
	}
	for _, pkg := range goPackages {
		if err := copyPackage(filepath.Join(goroot, "src", pkg), filepath.Join(ws, "lib", filepath.Base(pkg))); err != nil {
			return nil, err
		}
	}
	tmp := filepath.Join(ws, ".tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, err
	}
	env := b.env(
		"GOCACHE="+filepath.Join(ws, ".cache", "go-build"),
		"GOPATH="+filepath.Join(ws, ".gopath"),
		"TMPDIR="+tmp,
		"GOTOOLCHAIN=local", "GOPROXY=off", "GOFLAGS=", "CGO_ENABLED=0",
	)
	// Telemetry off, in the throwaway HOME; the workload policy lets the
	// confined go command read it, so both arms skip the counter files.
	if _, err := output(env, ws, "go", "telemetry", "off"); err != nil {
		return nil, err
	}
	b.logf("go build: filling the build cache in the workspace (a cold build of the standard library)")
	if _, err := output(env, ws, "go", "build", "-o", "floorwork", "."); err != nil {
		return nil, err
	}
	bin := filepath.Join(ws, "floorwork")
	return &workload{
		name: fmt.Sprintf("go build (warm cache), %d packages", len(goPackages)+1),
		ws:   ws,
		argv: []string{"go", "build", "-o", "floorwork", "."},
		env:  env,
		prep: func() error {
			// Without the binary, every run links; with it, go build
			// would find it up to date and do almost nothing.
			if err := os.Remove(bin); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			return nil
		},
		repeat: []string{"/bin/sh", "-c", "rm -f floorwork && exec go build -o floorwork ."},
		config: fmt.Sprintf("module of %s copied from GOROOT plus a main package, CGO_ENABLED=0; GOCACHE, GOPATH and TMPDIR inside the workspace, cache warm (each run compiles nothing and links the binary afresh)", strings.Join(goPackages, ", ")),
	}, nil
}

// copyPackage copies the non-test Go files of dir to dst and checks that
// they import nothing internal to the standard library.
func copyPackage(dir, dst string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		src, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), n, src, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, im := range f.Imports {
			if p, _ := strconv.Unquote(im.Path.Value); strings.HasPrefix(p, "internal/") || strings.Contains(p, "/internal/") {
				return fmt.Errorf("%s/%s imports %s, which a module outside the standard library cannot", dir, n, p)
			}
		}
		if err := os.WriteFile(filepath.Join(dst, n), src, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(path, s string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(s), 0o644)
}

// table collects rows and prints them aligned: the first column and the
// last two left-aligned, the numbers right-aligned.
type table [][]string

func (t *table) add(cells ...string) { *t = append(*t, cells) }

func (t *table) flush() {
	var w []int
	for _, r := range *t {
		for i, c := range r {
			if i >= len(w) {
				w = append(w, 0)
			}
			w[i] = max(w[i], len(c))
		}
	}
	for _, r := range *t {
		var line strings.Builder
		for i, c := range r {
			if i > 0 {
				line.WriteString("  ")
			}
			if i == 0 || i >= 5 {
				fmt.Fprintf(&line, "%-*s", w[i], c)
			} else {
				fmt.Fprintf(&line, "%*s", w[i], c)
			}
		}
		fmt.Println(strings.TrimRight(line.String(), " "))
	}
	*t = nil
}

// section starts a part of the table.
func (b *bench) section(title, cmpTitle string) {
	fmt.Println()
	b.out.add(title, "median", "min", "max", "IQR", cmpTitle, "target")
}

// row adds one arm: its statistics in format f, a comparison and a
// verdict. A nil s adds a continuation line.
func (b *bench) row(name string, s []float64, f, cmp, verdict string) {
	if s == nil {
		b.out.add("", "", "", "", "", cmp, verdict)
		return
	}
	q1, q3 := quantile(s, 0.25), quantile(s, 0.75)
	num := func(v float64) string { return fmt.Sprintf(f, v) }
	b.out.add("  "+name, num(median(s)), num(slices.Min(s)), num(slices.Max(s)), num(q3-q1), cmp, verdict)
}

// oneLine renders a policy file's settings on one line.
func oneLine(policy string) string {
	var kv []string
	for _, l := range strings.Split(policy, "\n") {
		if strings.Contains(l, "=") {
			kv = append(kv, strings.Join(strings.Fields(l), " "))
		}
	}
	return strings.Join(kv, ", ")
}

func (b *bench) verdict(ok bool, target string) string {
	if ok {
		return target + ": met"
	}
	b.missed++
	return target + ": NOT MET"
}

func median(s []float64) float64 { return quantile(s, 0.5) }

// quantile is the q-quantile of s with linear interpolation between
// order statistics (type 7, as R and NumPy default to).
func quantile(s []float64, q float64) float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	c := slices.Clone(s)
	slices.Sort(c)
	pos := q * float64(len(c)-1)
	lo := int(math.Floor(pos))
	if lo+1 >= len(c) {
		return c[lo]
	}
	return c[lo] + (pos-float64(lo))*(c[lo+1]-c[lo])
}

// output runs argv in dir with env and returns its stdout and stderr
// together; an error carries both.
func output(env []string, dir string, argv ...string) (string, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = env, dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, out)
	}
	return string(out), nil
}

// outputSplit runs argv and returns its stdout; stderr is kept only for
// the error.
func outputSplit(env []string, dir string, argv ...string) (string, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = env, dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, stderr.Bytes())
	}
	return string(out), nil
}

// wallMs runs argv with stdio on /dev/null and returns its wall time in
// ms, from fork to reaping; a failure is run again to show its output.
func wallMs(env []string, dir string, argv ...string) (float64, error) {
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	defer null.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = env, dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = null, null, null
	t0 := time.Now()
	err = cmd.Run()
	d := time.Since(t0)
	if err != nil {
		out, _ := output(env, dir, argv...)
		return 0, fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, out)
	}
	return float64(d) / 1e6, nil
}
