package kerneltest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestFloor is the demo as a test: the agent writes its workspace, and
// cannot read the key directly, through a renamed copy of cat, or through
// a symlink; each attack works without the launcher.
func TestFloor(t *testing.T) {
	s := newSandbox(t, standard)
	key := s.path("home/.ssh/id_ed25519")

	wantOK(t, "write in the workspace", s.agent("write", s.ws+"/notes.txt", "hello"))
	if b, err := os.ReadFile(s.ws + "/notes.txt"); err != nil || string(b) != "hello" {
		t.Errorf("the write did not land: %q %v", b, err)
	}
	wantOK(t, "control: the key is readable without the launcher", s.bare("read", key))
	wantErr(t, "read the key", s.agent("read", key), "EACCES")

	// A renamed binary: the floor does not care what the program is called.
	r := s.sh("cp /bin/cat ./mycat && ./mycat " + key)
	if r.code == 0 || strings.Contains(r.stdout, sshKey) || !strings.Contains(r.stderr, "Permission denied") {
		t.Errorf("renamed cat: %s", r)
	}
	if _, err := os.Stat(s.ws + "/mycat"); err != nil {
		t.Errorf("control: the copy was not made inside: %v", err)
	}
	// A symlink from the workspace to the key.
	if err := os.Symlink(key, s.ws+"/key-link"); err != nil {
		t.Fatal(err)
	}
	wantOK(t, "control: the symlink works without the launcher", s.bare("read", s.ws+"/key-link"))
	wantErr(t, "read through a symlink", s.agent("read", s.ws+"/key-link"), "EACCES")
	wantErr(t, "../ traversal (corpus 4)", s.agent("read", s.ws+"/../.ssh/id_ed25519"), "EACCES")
	wantErr(t, "/proc/self/root (corpus 7)", s.agent("read", "/proc/self/root"+key), "EACCES")
	wantErr(t, "O_PATH then reopen (corpus 10)", s.agent("opath-reopen", key), "EACCES")
	wantOK(t, "control: O_PATH reopen of a workspace file", s.agent("opath-reopen", s.ws+"/notes.txt"))
	wantErr(t, "O_PATH dirfd then openat", s.agent("opath-openat", s.path("home/.ssh"), "id_ed25519"), "EACCES")
	wantErr(t, "memfd copy of the agent (corpus 21)", s.agent("memfd-exec", agent, "read", key), "EACCES")
	wantOK(t, "control: the memfd copy runs", s.agent("memfd-exec", agent, "read", s.ws+"/notes.txt"))
}

// TestExitStatus: the agent's status passes through; 126 and 127 for a
// command that cannot run; 128+N for a signal.
func TestExitStatus(t *testing.T) {
	s := newSandbox(t, standard)
	for _, c := range []struct {
		argv []string
		want int
		msg  string
	}{
		{[]string{"/bin/sh", "-c", "exit 0"}, 0, ""},
		{[]string{"/bin/sh", "-c", "exit 7"}, 7, ""},
		{[]string{"/bin/sh", "-c", "kill -TERM $$"}, 128 + int(syscall.SIGTERM), ""},
		{[]string{"no-such-command-xyz"}, 127, "not found"},
		{[]string{s.ws + "/missing"}, 127, "not found"},
	} {
		r := s.launch(c.argv...)
		if r.code != c.want || !strings.Contains(r.stderr, c.msg) {
			t.Errorf("%q: %s, want exit %d with %q", c.argv, r, c.want, c.msg)
		}
	}
	// Not executable: 126.
	s.write("home/proj/script", "#!/bin/sh\necho hi\n")
	if r := s.launch(s.ws + "/script"); r.code != 126 {
		t.Errorf("non-executable: %s, want 126", r)
	}
	// Executable but outside the policy (exec denied by the floor): 126.
	other := s.write("elsewhere/prog", "#!/bin/sh\necho hi\n")
	os.Chmod(other, 0o755)
	if r := s.launch(other); r.code != 126 || !strings.Contains(r.stderr, "permission denied") {
		t.Errorf("exec outside the policy: %s, want 126 and permission denied", r)
	}
	// Usage and refusals: 125, nothing run.
	if r := s.exec(launcher, "run", "--config", s.config, "--workspace", s.ws); r.code != 125 {
		t.Errorf("no command: %s", r)
	}
	for _, ws := range []string{"/", s.home, "/tmp"} {
		r := s.exec(launcher, "run", "--config", s.config, "--workspace", ws, "--", "/bin/true")
		if r.code != 125 || !strings.Contains(r.stderr, "refuses") {
			t.Errorf("workspace %s: %s, want 125 and a refusal", ws, r)
		}
	}
}

// TestSignals: the launcher forwards signals to the agent and reports how
// it ended.
func TestSignals(t *testing.T) {
	s := newSandbox(t, standard)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGQUIT} {
		marker := s.ws + "/started-" + strconv.Itoa(int(sig))
		cmd := exec.Command(launcher, "run", "--config", s.config, "--workspace", s.ws, "--",
			"/bin/sh", "-c", "touch "+marker+"; exec sleep 30")
		cmd.Env = s.env()
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if !waitFile(marker) {
			cmd.Process.Kill()
			t.Fatalf("%s: the agent never started", sig)
		}
		cmd.Process.Signal(sig)
		if !endsWithin(cmd, runTimeout) {
			t.Fatalf("%s: the launcher did not end", sig)
		}
		if got, want := cmd.ProcessState.ExitCode(), 128+int(sig); got != want {
			t.Errorf("%s: exit %d, want %d", sig, got, want)
		}
	}
}

// TestSignalDuringStartUp: a Ctrl-C (SIGINT) or SIGTERM that comes while
// run is starting, before its agent does, is not lost: either nothing runs
// (the launcher ends by the signal) or the agent gets it as it starts, as
// any signal later. The agent must not run on as though nothing was asked
// (it did: run caught the signal and dropped it). The start is made slow,
// no kept plan and a workspace of 4,000 files to plan and review, so that
// the signal comes first; the control, the same start unsignalled, gets its
// agent started.
func TestSignalDuringStartUp(t *testing.T) {
	s := newSandbox(t, standard)
	for i := range 40 {
		for j := range 100 {
			s.write(fmt.Sprintf("home/proj/d%d/f%d", i, j), "x")
		}
	}
	start := func(name string) (*exec.Cmd, string, string) {
		started, finished := s.ws+"/started-"+name, s.ws+"/finished-"+name
		cmd := exec.Command(launcher, "run", "--config", s.config, "--workspace", s.ws, "--",
			"/bin/sh", "-c", "touch "+started+"; sleep 20; touch "+finished)
		cmd.Env = append(s.env(), "AGENT_LAUNCHER_PLAN_CACHE=0")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, started, finished
	}
	cmd, started, _ := start("control")
	if !waitFile(started) {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("control: the agent never started")
	}
	cmd.Process.Kill()
	cmd.Wait()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		// Once the Go runtime runs (a second thread), and a little after:
		// the launcher's main is loading the policy or planning. A start
		// the test saw too late (a busy machine oversleeps) is tried again.
		var cmd *exec.Cmd
		var started, finished string
		for try := 0; ; try++ {
			cmd, started, finished = start(fmt.Sprintf("%d-%d", sig, try))
			for deadline := time.Now().Add(runTimeout); threads(cmd.Process.Pid) < 2 && time.Now().Before(deadline); {
				time.Sleep(100 * time.Microsecond)
			}
			time.Sleep(3 * time.Millisecond)
			if !exists(started) {
				break
			}
			cmd.Process.Kill()
			cmd.Wait()
			if try == 4 {
				t.Fatalf("%s: in 5 tries the agent had started before the signal could be sent; the start-up was not slow enough to test this", sig)
			}
		}
		cmd.Process.Signal(sig)
		if !endsWithin(cmd, 10*time.Second) {
			t.Errorf("%s during start-up: the agent ran on (started: %v)", sig, exists(started))
			continue
		}
		ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if !(ws.Signaled() && ws.Signal() == sig) && ws.ExitStatus() != 128+int(sig) {
			t.Errorf("%s during start-up: %v; want the launcher ended by it or exit %d", sig, cmd.ProcessState, 128+int(sig))
		}
		if ws.Signaled() {
			// Ended by it before "go": none of the agent runs, not even
			// later, from an init stage left behind.
			time.Sleep(500 * time.Millisecond)
			if exists(started) {
				t.Errorf("%s during start-up: the launcher ended by it, but the agent started", sig)
			}
		}
		if exists(finished) {
			t.Errorf("%s during start-up: the agent finished", sig)
		}
	}
}

// TestSignalDuringReview: an interrupt or a termination that comes after
// the agent ended, while run reviews the session, cuts neither the review
// nor run short: the change the agent made is reported, and run exits with
// the agent's status (Session.KeepCatching). The workspace is large and
// the plan cache off, so that the review lists every directory again and
// the signal, sent when run traces the agent's end, comes during it.
func TestSignalDuringReview(t *testing.T) {
	s := newSandbox(t, standard)
	for i := range 40 {
		for j := range 100 {
			s.write(fmt.Sprintf("home/proj/d%d/f%d", i, j), "x")
		}
	}
	// One session: the launcher's stderr, whether the signal was sent
	// once the agent had ended, and whether the launcher was still
	// running (not a zombie) as it went, else the try tested nothing.
	session := func(sig syscall.Signal) (cmd *exec.Cmd, out string, sent, alive bool) {
		envrc := s.ws + "/.envrc"
		os.Remove(envrc)
		cmd = exec.Command(launcher, "run", "--config", s.config, "--workspace", s.ws, "--",
			"/bin/sh", "-c", "echo 'export X=1' > "+envrc+"; exit 3")
		cmd.Env = append(s.env(), "AGENT_LAUNCHER_PLAN_CACHE=0", "AGENT_LAUNCHER_TRACE=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			b.WriteString(line + "\n")
			if !sent && strings.Contains(line, "trace") && strings.HasSuffix(line, "agent exited") {
				alive = procState(cmd.Process.Pid) != 'Z'
				cmd.Process.Signal(sig)
				sent = true
			}
		}
		if !endsWithin(cmd, 10*time.Second) {
			t.Fatalf("%s during the review: run did not end", sig)
		}
		return cmd, b.String(), sent, alive
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		// A review that ended before the signal could go (a busy machine
		// reads the pipe late) is tried again.
		var cmd *exec.Cmd
		var out string
		for try := 0; ; try++ {
			var sent, alive bool
			cmd, out, sent, alive = session(sig)
			if sent && alive {
				break
			}
			if !sent || try == 4 {
				t.Fatalf("%s during the review: the signal could not be sent while run reviewed, in %d tries (traced the agent's end: %v); stderr:\n%s", sig, try+1, sent, out)
			}
		}
		ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if ws.Signaled() || ws.ExitStatus() != 3 {
			t.Errorf("%s during the review: %v; want the agent's exit status 3; stderr:\n%s", sig, cmd.ProcessState, out)
		}
		if !strings.Contains(out, "session review: 1 change(s)") || !strings.Contains(out, ".envrc") ||
			!strings.Contains(out, "session review: report kept") {
			t.Errorf("%s during the review: the review was cut short; stderr:\n%s", sig, out)
		}
	}
}

// procState is the state letter of process pid (/proc/PID/stat), 0 when
// it is gone.
func procState(pid int) byte {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if i := bytes.LastIndexByte(b, ')'); err == nil && i >= 0 && i+2 < len(b) {
		return b[i+2]
	}
	return 0
}

// threads is the number of threads of process pid, 0 when it is gone.
func threads(pid int) int {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	return len(ents)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestBlockedSignalsStayBlocked: the signals blocked where run was
// started (a caller's mask, here SIGUSR1 and real-time signal 40) are
// blocked for the agent too, exactly those, with the view (the
// constructor records the mask before the Go runtime runs, and PID 1 gives
// it to the agent) and without it (os/exec restores it). The control: the
// same start without the launcher.
func TestBlockedSignalsStayBlocked(t *testing.T) {
	s := newSandbox(t, standard)
	const blocked, want = "10,40", uint64(1<<9 | 1<<39)
	// grep itself, not through a shell: dash clears the mask of what it
	// forks.
	grep := s.lookPath("grep")
	if grep == "" {
		t.Fatalf("this test needs grep in %s", sandboxPATH)
	}
	argv := []string{grep, "SigBlk", "/proc/self/status"}
	block := []string{agent, "exec-blocked", blocked}
	for _, how := range []string{"bare", "view", "no view"} {
		var cmd []string
		switch how {
		case "bare":
			cmd = slices.Concat(block, argv)
		case "view":
			cmd = slices.Concat(block, []string{launcher, "run", "--config", s.config, "--workspace", s.ws, "--"}, argv)
		case "no view":
			// Blocked after noViewArgs's shell, just before the launcher.
			bin, args := s.noViewArgs("", false, argv...)
			i := slices.Index(args, launcher)
			cmd = slices.Concat([]string{bin}, args[:i], block, args[i:])
		}
		r := s.exec(cmd[0], cmd[1:]...)
		var blk uint64
		if f := strings.Fields(r.stdout); len(f) >= 2 && f[0] == "SigBlk:" {
			blk, _ = strconv.ParseUint(f[1], 16, 64)
		}
		if r.code != 0 || blk != want {
			t.Errorf("%s: the agent's SigBlk %#x, want %#x: %s", how, blk, want, r)
		}
	}
}

// TestIgnoredSignalsStayIgnored: signals ignored where the launcher is
// started (nohup ignores HUP; a shell ignores INT and QUIT for a
// background job) stay ignored for the agent, and the launcher does not
// catch them to forward: a hangup does not end a nohup-ed session, with
// the view or without. The control: the same start without the launcher
// leaves the same signals ignored and survives them; TestSignals shows
// that signals not ignored are forwarded.
func TestIgnoredSignalsStayIgnored(t *testing.T) {
	s := newSandbox(t, standard)
	const trap = "trap '' HUP INT QUIT TERM USR1 USR2 WINCH; "
	var mask uint64 // bit N-1 for signal N, as SigIgn shows it
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH} {
		mask |= 1 << (sig - 1)
	}
	for _, how := range []string{"bare", "view", "no view"} {
		marker, out := s.ws+"/started-"+strings.ReplaceAll(how, " ", "-"), s.ws+"/out-"+strings.ReplaceAll(how, " ", "-")
		script := "grep SigIgn /proc/self/status > " + shq(out) + "; touch " + shq(marker) + "; sleep 1; echo alive >> " + shq(out)
		var cmd *exec.Cmd
		switch how {
		case "bare":
			cmd = exec.Command("/bin/sh", "-c", trap+`exec "$@"`, "sh", "/bin/sh", "-c", script)
		case "view":
			cmd = exec.Command("/bin/sh", "-c", trap+`exec "$@"`, "sh", launcher, "run", "--config", s.config, "--workspace", s.ws, "--", "/bin/sh", "-c", script)
		case "no view":
			bin, args := s.noViewArgs(trap, false, "/bin/sh", "-c", script)
			cmd = exec.Command(bin, args...)
		}
		cmd.Env = s.env()
		cmd.Dir = s.ws
		var errb bytes.Buffer
		cmd.Stderr = &errb
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if !waitFile(marker) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("%s: the agent never started: %s", how, errb.String())
		}
		for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH} {
			cmd.Process.Signal(sig)
		}
		if !endsWithin(cmd, runTimeout) {
			t.Fatalf("%s: did not end", how)
		}
		b, _ := os.ReadFile(out)
		var ign uint64
		if f := strings.Fields(string(b)); len(f) >= 2 {
			ign, _ = strconv.ParseUint(f[1], 16, 64)
		}
		if code := cmd.ProcessState.ExitCode(); code != 0 || !strings.Contains(string(b), "alive") || ign&mask != mask {
			t.Errorf("%s: exit %d, the agent wrote %q (SigIgn %#x, want %#x set); stderr %s", how, code, b, ign, mask, errb.String())
		}
		if want := map[string]string{"view": "private view: own PID namespace", "no view": "NO private view"}[how]; !strings.Contains(errb.String(), want) {
			t.Errorf("%s: the start-up line does not say %q: %s", how, want, errb.String())
		}
	}
}

// TestGrandchildConfined: a process started after a setsid double fork,
// whose parents are gone, is still confined. The agent waits for the
// grandchild's report: the session ends every process when the agent
// exits (TestNothingOutlivesSession).
func TestGrandchildConfined(t *testing.T) {
	s := newSandbox(t, standard)
	out := s.ws + "/daemon.out"
	a := shq(agent)
	r := s.sh(a + " daemon " + shq(out) + " read " + shq(s.path("home/.ssh/id_ed25519")) + " && exec " + a + " wait-file " + shq(out) + " 10000")
	wantOK(t, "the daemon reported", r)
	if !strings.Contains(r.line(), "err EACCES") || strings.Contains(r.line(), sshKey) {
		t.Errorf("the double-forked grandchild read the key: %s", r)
	}
	out2 := s.ws + "/daemon2.out"
	r = s.sh(a + " daemon " + shq(out2) + " write " + shq(s.ws+"/from-daemon") + " x && exec " + a + " wait-file " + shq(out2) + " 10000")
	if !strings.Contains(r.line(), "ok wrote") {
		t.Errorf("control: the grandchild could not write the workspace: %s", r)
	}
}

// TestToolsAgainstTiers: ordinary tools against deny and read tiers.
func TestToolsAgainstTiers(t *testing.T) {
	s := newSandbox(t, standard+"read_paths = [\"<workspace>/ro/**\"]\n")
	key := s.path("home/.ssh/id_ed25519")
	s.write("home/proj/ro/doc.txt", "read-only")
	s.write("home/proj/rw/doc.txt", "writable")
	cases := []struct {
		name, script string
	}{
		{"cp the key out", "cp " + key + " ./k"},
		{"mv the key in", "mv " + key + " ./k"},
		{"rm the key", "rm -f " + key},
		{"ln the key", "ln " + key + " ./k"},
		{"tar the key", "tar cf ./k.tar " + key},
		{"find -delete in .ssh", "find " + s.path("home/.ssh") + " -delete"},
		{"rm a read-tier file", "rm -f ro/doc.txt"},
		{"mv a read-tier file", "mv ro/doc.txt rw/moved.txt"},
		{"overwrite a read-tier file", "echo x > ro/doc.txt"},
		{"truncate a read-tier file", "truncate -s 0 ro/doc.txt"},
		{"tar over a read-tier tree", "tar cf /dev/null rw && tar xf - -C ro < /dev/null && cd ro && tar cf - -C ../rw . | tar xf -"},
		{"find -delete a read-tier tree", "find ro -delete"},
		{"python3 reads the key", "python3 -c 'print(open(\"" + key + "\").read())'"},
		{"a script reads the key", "printf '#!/bin/sh\\ncat " + key + "\\n' > s.sh && chmod +x s.sh && ./s.sh"},
	}
	for _, c := range cases {
		if strings.HasPrefix(c.name, "python3") {
			if _, err := exec.LookPath("python3"); err != nil {
				continue // not installed: nothing to test
			}
		}
		r := s.sh(c.script)
		if r.code == 0 || strings.Contains(r.stdout, sshKey) {
			t.Errorf("%s: the tool succeeded: %s", c.name, r)
		}
	}
	if b, _ := os.ReadFile(key); string(b) != sshKey {
		t.Errorf("the key changed: %q", b)
	}
	if b, _ := os.ReadFile(s.ws + "/ro/doc.txt"); string(b) != "read-only" {
		t.Errorf("the read-tier file changed: %q", b)
	}
	if _, err := os.Stat(s.ws + "/k"); err == nil {
		t.Errorf("a copy of the key exists in the workspace")
	}
	// Controls: the same tools inside the write tree work.
	for _, script := range []string{"cp rw/doc.txt rw/c && mv rw/c rw/d && ln rw/d rw/e && rm rw/d rw/e", "cd rw && tar cf t.tar doc.txt && mkdir x && tar xf t.tar -C x && find x -delete", "cat ro/doc.txt"} {
		if r := s.sh(script); r.code != 0 {
			t.Errorf("control %q: %s", script, r)
		}
	}
	_ = filepath.Join
}

// TestStrayFDsClosed: an fd the launcher inherited (here a descriptor for
// the key, open before launch, at fds 3, 7 and 9) does not reach the
// agent; Landlock would not re-check it.
func TestStrayFDsClosed(t *testing.T) {
	s := newSandbox(t, standard)
	key, err := os.Open(s.path("home/.ssh/id_ed25519"))
	if err != nil {
		t.Fatal(err)
	}
	defer key.Close()
	// Entry i of the files becomes fd 3+i: the key at 3, 7 and 9.
	files := []*os.File{key, nil, nil, nil, key, nil, key}
	run := func(bin string, args ...string) result { return s.execFiles(files, nil, bin, args...) }
	// The agent, a Go program, opens fds 3-6 itself at start: probe 7 and 9
	// with it, and all of them with a shell that opens none.
	for _, fd := range []string{"7", "9"} {
		wantOK(t, "control: the inherited fd "+fd+" reads the key bare", run(agent, "read", "/proc/self/fd/"+fd))
		r := run(launcher, "run", "--config", s.config, "--workspace", s.ws, "--", agent, "read", "/proc/self/fd/"+fd)
		wantErr(t, "inherited fd "+fd, r, "ENOENT", "EACCES")
	}
	r := run(launcher, "run", "--config", s.config, "--workspace", s.ws, "--", "/bin/sh", "-c", "for fd in 3 7 9; do eval \"cat <&$fd\" 2>/dev/null || echo closed$fd; done")
	if strings.Contains(r.stdout, sshKey) || r.stdout != "closed3\nclosed7\nclosed9\n" {
		t.Errorf("the shell read an inherited fd: %s", r)
	}
	if r := run("/bin/sh", "-c", "cat <&3"); !strings.Contains(r.stdout, sshKey) {
		t.Errorf("control: the bare shell cannot read fd 3: %s", r)
	}
}

// TestPlanCache: run keeps its plan and uses it again only while the
// filesystem answers as it did. A .env made in the workspace between two
// sessions is denied in the second, whose plan is made afresh.
// TestPlanCacheOffKeepsNothing: with AGENT_LAUNCHER_PLAN_CACHE=0 every
// session plans afresh and keeps neither a plan nor the session review's
// walk index (whose stamps would spare listing directories), and the
// sessions run and review as before; with the cache on again, both are kept.
func TestPlanCacheOffKeepsNothing(t *testing.T) {
	s := newSandbox(t, standard)
	s.write("home/proj/sub/notes.txt", "notes")
	plans := s.home + "/.local/state/agent-launcher/plans"
	kept := func() []string {
		ents, err := os.ReadDir(plans)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return names
	}
	base := slices.Clone(s.extraEnv)
	s.extraEnv = append(base, "AGENT_LAUNCHER_TRACE=1", "AGENT_LAUNCHER_PLAN_CACHE=0")
	for i := range 2 {
		r := s.agent("read", s.ws+"/sub/notes.txt")
		wantOK(t, "read a workspace file with the plan cache off", r)
		if !strings.Contains(r.stderr, "floor: planned") || strings.Contains(r.stderr, "kept plan") {
			t.Fatalf("session %d with the plan cache off: %s", i+1, r.stderr)
		}
		if !strings.Contains(r.stderr, "session review: report kept") {
			t.Fatalf("session %d with the plan cache off kept no review report: %s", i+1, r.stderr)
		}
	}
	if names := kept(); len(names) != 0 {
		t.Fatalf("with the plan cache off, kept %q in %s", names, plans)
	}
	s.extraEnv = append(base, "AGENT_LAUNCHER_TRACE=1")
	wantOK(t, "control: read it with the plan cache on", s.agent("read", s.ws+"/sub/notes.txt"))
	names := kept()
	if !slices.ContainsFunc(names, func(n string) bool { return strings.HasSuffix(n, ".walk") }) ||
		!slices.ContainsFunc(names, func(n string) bool { return !strings.HasSuffix(n, ".walk") && !strings.HasPrefix(n, ".") }) {
		t.Fatalf("control: with the plan cache on, kept %q; want a plan and a walk index", names)
	}
}

func TestPlanCache(t *testing.T) {
	s := newSandbox(t, standard)
	s.extraEnv = append(s.extraEnv, "AGENT_LAUNCHER_TRACE=1")
	s.write("home/proj/sub/notes.txt", "notes")
	s.write("home/proj/other/readme.txt", "readme")
	first := s.agent("read", s.ws+"/sub/notes.txt")
	wantOK(t, "read a workspace file", first)
	if !strings.Contains(first.stderr, "floor: planned") {
		t.Fatalf("the first session did not plan: %s", first.stderr)
	}
	// The first session's review report is a new entry in the launcher's
	// state directory, which the hard-link check lists: planned once more.
	wantOK(t, "read it again", s.agent("read", s.ws+"/sub/notes.txt"))
	again := s.agent("read", s.ws+"/sub/notes.txt")
	wantOK(t, "read it a third time", again)
	if !strings.Contains(again.stderr, "floor: the kept plan holds") {
		t.Fatalf("the second session, nothing changed, did not use the kept plan: %s", again.stderr)
	}

	env := s.write("home/proj/sub/.env", envSec)
	wantOK(t, "control: the new .env is readable without the launcher", s.bare("read", env))
	r := s.agent("read", env)
	wantErr(t, "read a .env made since the plan was kept", r, "EACCES")
	if strings.Contains(r.stdout, envSec) || !strings.Contains(r.stderr, "floor: planned") {
		t.Errorf("the session after the .env appeared: %s", r)
	}
	// The kept plan went to the init stage before it was found stale
	// (run's speculation): that init stage ended unused, and the session
	// started once, with the plan made afresh.
	if !strings.Contains(r.stderr, "floor: the kept plan does not hold") || strings.Count(r.stderr, "agent-launcher: confining") != 1 {
		t.Errorf("the session after the .env appeared: want the kept plan read, found stale and one start: %s", r.stderr)
	}
	wantOK(t, "control: its sibling stays readable", s.agent("read", s.ws+"/sub/notes.txt"))

	// Directory stamps (landlock/stamp.go): a directory at rest when the
	// plan was kept is not listed again while its ctime stays the same. A
	// key put in one whose times are then put back is seen all the same:
	// no one can put a ctime back.
	time.Sleep(2100 * time.Millisecond) // landlock.stampSettle: other/ is at rest
	s.write("home/proj/touch.txt", "x") // the workspace's root changed: planned again, other/ stamped
	r = s.agent("read", s.ws+"/other/readme.txt")
	wantOK(t, "read a file in a directory at rest", r)
	if !strings.Contains(r.stderr, "floor: planned") {
		t.Fatalf("the session after the workspace's root changed did not plan: %s", r.stderr)
	}
	r = s.agent("read", s.ws+"/other/readme.txt")
	wantOK(t, "read it again", r)
	if !strings.Contains(r.stderr, "floor: the kept plan holds") {
		t.Fatalf("nothing changed, and the kept plan was not used: %s", r.stderr)
	}
	other := s.ws + "/other"
	var st syscall.Stat_t
	if err := syscall.Lstat(other, &st); err != nil {
		t.Fatal(err)
	}
	pem := s.write("home/proj/other/server.pem", envSec)
	if err := syscall.UtimesNano(other, []syscall.Timespec{st.Atim, st.Mtim}); err != nil {
		t.Fatal(err)
	}
	var now syscall.Stat_t
	if err := syscall.Lstat(other, &now); err != nil || now.Mtim != st.Mtim || now.Ctim == st.Ctim {
		t.Fatalf("control: other/'s mtime is not back (%v), or its ctime did not move", err)
	}
	wantOK(t, "control: the new key is readable without the launcher", s.bare("read", pem))
	r = s.agent("read", pem)
	wantErr(t, "read a key made in a directory at rest, its mtime put back", r, "EACCES")
	if strings.Contains(r.stdout, envSec) || !strings.Contains(r.stderr, "floor: planned") {
		t.Errorf("the session after the key appeared: %s", r)
	}
}

// TestWorkspaceUnderGrantedTmp: a workspace inside /tmp, which the
// policy (as the default one does) lets the agent write whole. The grant
// on /tmp reaches every entry of the workspace, and no rule below can
// take it back, so a .env in it would be readable: run refuses to start
// (found by a review; it printed the secret before).
func TestWorkspaceUnderGrantedTmp(t *testing.T) {
	s := newSandbox(t, `write_paths = ["<workspace>/**", "/tmp/**"]`+"\n")
	ws := hostTempDir(t, "/tmp", "al-kerneltest-ws-")
	s.ws = ws
	s.writeAbs(ws+"/notes.txt", "notes")
	wantOK(t, "control: a workspace in /tmp with nothing protected runs", s.agent("read", ws+"/notes.txt"))

	env := ws + "/sub/.env"
	s.writeAbs(env, envSec)
	wantOK(t, "control: the .env is readable without the launcher", s.bare("read", env))
	r := s.agent("read", env)
	if r.code != 125 || strings.Contains(r.stdout, envSec) || !strings.Contains(r.stderr, "protected entry reachable through a grant above it: "+env) || !strings.Contains(r.stderr, "nothing was run") {
		t.Errorf("a .env in a workspace under /tmp: want a refusal (exit 125) naming it: %s", r)
	}
	if err := os.Remove(env); err != nil {
		t.Fatal(err)
	}
	wantOK(t, "control: with the .env gone, it runs again", s.agent("read", ws+"/notes.txt"))
}

// endsWithin waits up to d for the started cmd to end; false when it did
// not, and was killed and waited for.
func endsWithin(cmd *exec.Cmd, d time.Duration) bool {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		cmd.Process.Kill()
		<-done
		return false
	}
}

// waitFile waits up to runTimeout for path to exist (an agent's "started"
// marker); false when it never does.
func waitFile(path string) bool {
	for deadline := time.Now().Add(runTimeout); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return true
		}
	}
	return false
}

// TestKeptPlanStaleOutsideWorkspace: a kept plan is sent to the init stage
// before its questions outside the workspace and the home directory are
// asked again (run's speculation). When one of those answers changed (a
// file the policy denies appeared in a tree it lets the agent read, which
// the kept plan grants whole), that init stage ends without starting the
// agent, and the session runs on a plan made afresh, which denies the
// file. The trace shows two init stages started (a stale plan found in the
// check before "go" is the only way to a second), and one start-up line. Controls: the file is readable without the launcher, and
// its sibling under it.
func TestKeptPlanStaleOutsideWorkspace(t *testing.T) {
	s := newSandbox(t, standard)
	elsewhere := s.mkdir("elsewhere/sub")
	secret := filepath.Join(elsewhere, "secret.txt")
	s.writeAbs(s.config, fmt.Sprintf("[file_policy]\ndefault = \"deny\"\npresets = [\"system\"]\nwrite_paths = [\"<workspace>/**\"]\nread_paths = [%q, %q]\ndeny_paths = [%q]\n",
		binDir+"/**", s.path("elsewhere")+"/**", secret))
	s.extraEnv = append(s.extraEnv, "AGENT_LAUNCHER_TRACE=1")
	notes := s.write("elsewhere/sub/notes.txt", "notes")
	for i := 0; ; i++ {
		r := s.agent("read", notes)
		wantOK(t, "read a file in the tree granted to read", r)
		if strings.Contains(r.stderr, "floor: the kept plan holds") {
			break
		}
		if i == 3 {
			t.Fatalf("nothing changed, and the kept plan was not used: %s", r.stderr)
		}
	}
	s.writeAbs(secret, envSec)
	wantOK(t, "control: the new file is readable without the launcher", s.bare("read", secret))
	r := s.agent("read", secret)
	wantErr(t, "read a denied file made outside the workspace since the plan was kept", r, "EACCES")
	if strings.Contains(r.stdout, envSec) {
		t.Errorf("the file's content reached the agent: %s", r)
	}
	// Two init stages started (the supervisor traces each before it sends
	// it anything): the first got the kept plan, and may have been ended
	// before it even read it, as the check found the plan stale.
	if n := strings.Count(r.stderr, "init stage started"); n != 2 ||
		!strings.Contains(r.stderr, "floor: the kept plan does not hold") || !strings.Contains(r.stderr, "floor: planned") ||
		strings.Count(r.stderr, "agent-launcher: confining") != 1 {
		t.Errorf("want the kept plan sent to an init stage, found stale, a plan made afresh for a second one, and one start-up line (init stages started: %d): %s", n, r.stderr)
	}
	wantOK(t, "control: its sibling stays readable", s.agent("read", notes))
}

// TestRulesUnderLowFileLimit: the init stage applies its Landlock rules
// with their descriptors open in runs of up to 64 (initstage.c, apply):
// under an RLIMIT_NOFILE of 40, lower than a run, the session (150-odd
// rules) still starts, and denies what it denies. The supervisor, a Go
// program, raises its own limit, and restores the one it was given for
// the init stage.
func TestRulesUnderLowFileLimit(t *testing.T) {
	s := newSandbox(t, standard)
	key := s.write("home/.ssh/id_ed25519", sshKey)
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	low := old
	low.Cur = 40
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	r := s.agent("write", s.ws+"/x", "1")
	denied := s.agent("read", key)
	// The session's PID 1, C like the rest of the init stage, has the
	// limit the Go supervisor was given (the test agent, a Go program,
	// raises its own).
	limits := s.agent("read", "/proc/1/limits")
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	wantOK(t, "a session under RLIMIT_NOFILE 40", r)
	wantErr(t, "read the key under RLIMIT_NOFILE 40", denied, "EACCES")
	if !regexp.MustCompile(`Max open files\s+40\s`).MatchString(limits.stdout) {
		t.Errorf("control: the init stage did not run under the low limit: %s", limits)
	}
	if !strings.Contains(r.stderr, "rules") {
		t.Errorf("no start-up line: %s", r)
	}
}
