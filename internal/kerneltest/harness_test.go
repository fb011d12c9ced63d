package kerneltest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agent-launcher/agent-launcher/landlock"
)

// runTimeout bounds every launcher or agent invocation.
const runTimeout = 30 * time.Second

var (
	binDir   string // holds agent-launcher and testagent
	launcher string
	agent    string
	kernel   landlock.Kernel
	// skipReason is set when this kernel cannot run the suites (and the
	// run did not declare an ABI it should have).
	skipReason string
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	// The processes the tests start begin with the forwarded signals at
	// their defaults, whatever the shell that started the suite ignored
	// (nohup, a background job): a signal ignored where run starts stays
	// ignored (TestIgnoredSignalsStayIgnored), and TestSignals needs them
	// forwarded. Caught here, they reach the children as defaults (exec
	// resets a handler, not an ignore), and this process survives them.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH)
	var err error
	kernel, err = landlock.Detect()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kerneltest: detecting Landlock:", err)
		return 1
	}
	if want := os.Getenv("AGENT_LAUNCHER_EXPECT_LANDLOCK_ABI"); want != "" {
		n, err := strconv.Atoi(want)
		if err != nil || n != kernel.ABI {
			fmt.Fprintf(os.Stderr, "kerneltest: AGENT_LAUNCHER_EXPECT_LANDLOCK_ABI=%s but this kernel has Landlock ABI %d (%s)\n", want, kernel.ABI, kernel.Reason)
			return 1
		}
	}
	// On a kernel below the ladder's minimum, run refuses by design
	// (TestLadder and TestDoctor check that, on every kernel); the tests of a confined session skip
	// there, and only there: a declared ABI that does not match fails above.
	if err := landlock.RunSupported(kernel); err != nil {
		skipReason = "run refuses on this kernel by design: " + err.Error()
	}
	binDir = os.Getenv("AGENT_LAUNCHER_TEST_BIN_DIR")
	if binDir == "" {
		dir, err := os.MkdirTemp("", "kerneltest-bin")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		if err := os.Chmod(dir, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := build(dir); err != nil {
			fmt.Fprintln(os.Stderr, "kerneltest:", err)
			return 1
		}
		binDir = dir
	}
	launcher = filepath.Join(binDir, "agent-launcher")
	agent = filepath.Join(binDir, "testagent")
	if worldRoot, err = chooseWorldRoot(); err != nil {
		fmt.Fprintln(os.Stderr, "kerneltest:", err)
		return 1
	}
	if worldRoot != "" {
		defer os.RemoveAll(worldRoot)
	}
	return m.Run()
}

// worldRoot holds the tests' worlds when the temporary directory lies in
// a directory the session's private view replaces (/tmp): there, a world
// would be out of the agent's sight except for the paths the view keeps,
// and the tests of the floor would test the view instead. "" means
// t.TempDir().
var worldRoot string

func chooseWorldRoot() (string, error) {
	if d := os.Getenv("AGENT_LAUNCHER_TEST_DIR"); d != "" {
		return os.MkdirTemp(d, "kerneltest-")
	}
	tmp, err := filepath.EvalSymlinks(os.TempDir())
	if err != nil {
		return "", err
	}
	private := false
	for _, d := range []string{"/tmp", "/var/tmp", "/dev/shm"} {
		if c, err := filepath.EvalSymlinks(d); err == nil && (tmp == c || strings.HasPrefix(tmp, c+"/")) {
			private = true
		}
	}
	if !private {
		return "", nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("the temporary directory %s is private in a session's view, and there is no cache directory for the tests' worlds: %w (set AGENT_LAUNCHER_TEST_DIR)", tmp, err)
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	d, err := os.MkdirTemp(cache, "agent-launcher-kerneltest-")
	if err == nil {
		err = os.Chmod(d, 0o755)
	}
	return d, err
}

// hostTempDir returns a fresh directory of the host's in parent (/tmp,
// /var/tmp: a directory the session's view replaces), mode 0755, removed
// when the test ends.
func hostTempDir(t *testing.T, parent, prefix string) string {
	t.Helper()
	d, err := os.MkdirTemp(parent, prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// gitWorkspaceIn returns a fresh git repository of the host's in parent
// (hostTempDir), for a workspace under a tree the policy grants whole.
func (s *sandbox) gitWorkspaceIn(parent string) string {
	s.t.Helper()
	git := s.lookPath("git")
	if git == "" {
		s.t.Fatalf("this test needs git in %s", sandboxPATH)
	}
	ws := hostTempDir(s.t, parent, "al-kerneltest-ws-")
	if out, err := exec.Command(git, "init", "-q", ws).CombinedOutput(); err != nil {
		s.t.Fatalf("git init: %v: %s", err, out)
	}
	return ws
}

// worldDir returns a fresh directory for one test's world, removed when
// the test ends.
func worldDir(t *testing.T) string {
	t.Helper()
	if worldRoot == "" {
		return t.TempDir()
	}
	d, err := os.MkdirTemp(worldRoot, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())+"-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// build compiles the launcher and the test agent into dir.
func build(dir string) error {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	// The launcher as make build makes it (with cgo, for its init stage).
	for _, cmd := range []*exec.Cmd{
		exec.Command("./scripts/build-launcher", filepath.Join(dir, "agent-launcher")),
		exec.Command("go", "build", "-buildvcs=false", "-o", filepath.Join(dir, "testagent"), "./internal/testagent"),
	} {
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
		}
	}
	return nil
}

// needKernel skips a test only where the kernel genuinely lacks what it
// needs and the run declared no ABI (TestMain fails a declared mismatch).
func needKernel(t *testing.T) {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
}

// sandbox is one test's world: a home with a credential, a workspace, a
// policy file.
type sandbox struct {
	t      *testing.T
	dir    string
	home   string
	ws     string
	config string
	// extraEnv is added to the launcher's environment.
	extraEnv []string
	// cwd, when set, replaces the workspace as the working directory of
	// what exec runs; stdin, when set, is its standard input.
	cwd   string
	stdin *os.File
	// cgroup, when set, is the cgroup v2 directory what exec runs starts
	// in (clone3 with CLONE_INTO_CGROUP).
	cgroup string
}

// Secrets the tests plant; reading one back is a leak.
const (
	sshKey = "SSH-PRIVATE-KEY-SECRET"
	envSec = "DOTENV-SECRET"
)

// policyHeader is the start of every test policy: the system preset, the
// test binaries readable, and the workspace writable.
func (s *sandbox) policyHeader() string {
	return fmt.Sprintf("[file_policy]\ndefault = \"deny\"\npresets = [\"system\"]\nread_paths = [%q]\n", binDir+"/**")
}

// newSandbox makes a world; extra is appended to the policy header (more
// keys of [file_policy]). It skips the test where run refuses by design.
func newSandbox(t *testing.T, extra string) *sandbox {
	t.Helper()
	needKernel(t)
	return newWorld(t, extra)
}

// newWorld makes a world on any kernel, for the tests of refusals.
func newWorld(t *testing.T, extra string) *sandbox {
	t.Helper()
	dir := worldDir(t)
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := &sandbox{t: t, dir: dir, home: filepath.Join(dir, "home"), ws: filepath.Join(dir, "home", "proj")}
	s.write("home/.ssh/id_ed25519", sshKey)
	s.mkdir("home/proj")
	s.config = filepath.Join(dir, "config.toml")
	header := s.policyHeader()
	if strings.Contains(extra, "read_paths = [") {
		// One read_paths key: the binaries join the test's list.
		extra = strings.Replace(extra, "read_paths = [", fmt.Sprintf("read_paths = [%q, ", binDir+"/**"), 1)
		header = "[file_policy]\ndefault = \"deny\"\npresets = [\"system\"]\n"
	}
	s.writeAbs(s.config, header+extra)
	return s
}

// standard is the policy most tests use: write the workspace.
const standard = "write_paths = [\"<workspace>/**\"]\n"

func (s *sandbox) path(rel string) string { return filepath.Join(s.dir, rel) }

func (s *sandbox) write(rel, content string) string {
	s.t.Helper()
	p := s.path(rel)
	s.writeAbs(p, content)
	return p
}

func (s *sandbox) writeAbs(p, content string) {
	s.t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

func (s *sandbox) mkdir(rel string) string {
	s.t.Helper()
	p := s.path(rel)
	if err := os.MkdirAll(p, 0o755); err != nil {
		s.t.Fatal(err)
	}
	return p
}

// result is one invocation's outcome.
type result struct {
	stdout, stderr string
	code           int
}

// line returns the agent's result line.
func (r result) line() string { return strings.TrimSpace(r.stdout) }

func (r result) String() string {
	return fmt.Sprintf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
}

// env is the environment of the launcher: the sandbox's home, nothing of
// the test process's own configuration.
func (s *sandbox) env() []string {
	return append([]string{"HOME=" + s.home, "PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "LANG=C"}, s.extraEnv...)
}

// launch runs `agent-launcher run --config --workspace -- argv...`.
func (s *sandbox) launch(argv ...string) result {
	s.t.Helper()
	args := append([]string{"run", "--config", s.config, "--workspace", s.ws, "--"}, argv...)
	return s.exec(launcher, args...)
}

// agent runs the test agent confined.
func (s *sandbox) agent(args ...string) result {
	s.t.Helper()
	return s.launch(append([]string{agent}, args...)...)
}

// bare runs the test agent unconfined: the positive control that the
// attack works without the launcher.
func (s *sandbox) bare(args ...string) result {
	s.t.Helper()
	return s.exec(agent, args...)
}

// sh runs a shell script confined.
func (s *sandbox) sh(script string) result {
	s.t.Helper()
	return s.launch("/bin/sh", "-c", script)
}

// execFiles is sandbox.exec with files passed to the child as fds 3, 4, ...
// (a nil entry leaves that fd closed) and extraEnv added to its
// environment.
func (s *sandbox) execFiles(files []*os.File, extraEnv []string, bin string, args ...string) result {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(s.env(), extraEnv...)
	cmd.Dir = s.ws
	if s.cwd != "" {
		cmd.Dir = s.cwd
	}
	if s.stdin != nil {
		cmd.Stdin = s.stdin
	}
	cmd.ExtraFiles = files
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if s.cgroup != "" {
		cg, err := os.Open(s.cgroup)
		if err != nil {
			s.t.Fatal(err)
		}
		defer cg.Close()
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(cg.Fd())
	}
	err := cmd.Run()
	if ctx.Err() != nil {
		s.t.Fatalf("%s %q: no result within %s (killed): stdout %q stderr %q", bin, args, runTimeout, out.String(), errb.String())
	}
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.code = 128 + int(ws.Signal())
		}
	case err != nil:
		s.t.Fatalf("%s: %v", bin, err)
	}
	return r
}

// execIn is exec with dir as the working directory.
func (s *sandbox) execIn(dir, bin string, args ...string) result {
	s.t.Helper()
	old := s.cwd
	s.cwd = dir
	defer func() { s.cwd = old }()
	return s.exec(bin, args...)
}

// exec runs bin with args in the sandbox's environment, workspace and a
// new session, under runTimeout.
func (s *sandbox) exec(bin string, args ...string) result {
	s.t.Helper()
	return s.execFiles(nil, nil, bin, args...)
}

// wantOK asserts the agent's operation succeeded.
func wantOK(t *testing.T, what string, r result) {
	t.Helper()
	if r.code != 0 || !strings.HasPrefix(r.line(), "ok") {
		t.Errorf("%s: want success, got %s", what, r)
	}
}

// wantErr asserts the agent's operation failed with one of errnos, and
// that nothing secret came back.
func wantErr(t *testing.T, what string, r result, errnos ...string) {
	t.Helper()
	line := r.line()
	if strings.Contains(r.stdout, sshKey) || strings.Contains(r.stdout, envSec) {
		t.Errorf("%s: LEAKED a secret: %s", what, r)
		return
	}
	for _, e := range errnos {
		if strings.HasPrefix(line, "err "+e+" ") {
			return
		}
	}
	t.Errorf("%s: want err %v, got %s", what, errnos, r)
}
