package kerneltest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The tests of a session without the private view that ends its processes
// through a cgroup of its own (DESIGN.md section 7). Each runs the launcher
// in a cgroup the test makes below its own, so that what the launcher
// makes and leaves is the test's to see: the test process's cgroup must be
// writable, as it is for root and in the delegated cgroup
// scripts/test-unprivileged makes for al-test.

// cgroup2Mount returns the mount point of the cgroup2 hierarchy and the
// test process's cgroup v2 directory.
func cgroup2Mount(t *testing.T) (mnt, own string) {
	t.Helper()
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mi), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if ok && len(f) >= 5 && len(g) > 0 && g[0] == "cgroup2" && f[3] == "/" {
			mnt = f[4]
		}
	}
	pc, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(pc), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			own = filepath.Join(mnt, p)
		}
	}
	if mnt == "" || own == "" {
		t.Fatalf("no cgroup2 hierarchy mounted here (mountinfo and /proc/self/cgroup); the no-view tests need one")
	}
	return mnt, own
}

// testCgroup makes a cgroup for one test below the test process's own and
// returns its directory; at cleanup every process in it is killed and it
// is removed with whatever the launcher left below it.
func testCgroup(t *testing.T) string {
	t.Helper()
	_, own := cgroup2Mount(t)
	dir, err := os.MkdirTemp(own, "al-kerneltest-")
	if err != nil {
		t.Fatalf("the no-view cgroup tests need a cgroup v2 directory they may write (as root, or in a delegated cgroup: scripts/test-unprivileged makes one): %v", err)
	}
	if _, err := os.Stat(dir + "/cgroup.kill"); err != nil {
		os.Remove(dir)
		t.Fatalf("no cgroup.kill (Linux 5.14) on a kernel that runs the launcher (6.12 and later): %v", err)
	}
	t.Cleanup(func() {
		os.WriteFile(dir+"/cgroup.kill", []byte("1"), 0)
		for i := 0; i < 500 && populated(dir); i++ {
			time.Sleep(10 * time.Millisecond)
		}
		removeTree(dir)
	})
	return dir
}

func populated(dir string) bool {
	b, err := os.ReadFile(dir + "/cgroup.events")
	return err == nil && !bytes.Contains(b, []byte("populated 0"))
}

// removeTree removes a cgroup and the cgroups below it, deepest first.
func removeTree(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			removeTree(filepath.Join(dir, e.Name()))
		}
	}
	os.Remove(dir)
}

// sessionCgroups lists the cgroups the launcher made in dir.
func sessionCgroups(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "agent-launcher-") {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// noViewArgs is the command line that runs the launcher with argv where
// user namespaces are refused (in a child user namespace whose
// user.max_user_namespaces is 0), after the shell commands pre, which run
// as root of that namespace; mountNS adds a mount namespace for them.
func (s *sandbox) noViewArgs(pre string, mountNS bool, argv ...string) (string, []string) {
	s.t.Helper()
	return s.noViewCmd(pre, mountNS, nil, argv...)
}

// noViewCmd is noViewArgs with more flags for run (--agent NAME).
func (s *sandbox) noViewCmd(pre string, mountNS bool, runFlags []string, argv ...string) (string, []string) {
	s.t.Helper()
	unshare := s.lookPath("unshare")
	if unshare == "" {
		s.t.Fatalf("this test needs util-linux's unshare in %s", sandboxPATH)
	}
	flags := "-Ur"
	if mountNS {
		flags = "-Urm"
	}
	script := pre + `echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"`
	args := append([]string{flags, "/bin/sh", "-c", script, "sh", launcher, "run", "--config", s.config}, runFlags...)
	return unshare, append(append(args, "--workspace", s.ws, "--"), argv...)
}

// descendants lists the processes below pid (/proc/PID/task/*/children).
func descendants(pid int) []int {
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		c := children(queue[0])
		queue = append(queue[1:], c...)
		out = append(out, c...)
	}
	return out
}

// cgroupOf returns the cgroup v2 path of pid ("0::" line), "" if it is gone.
func cgroupOf(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p
		}
	}
	return ""
}

// zombie reports whether pid has exited and awaits its parent's wait.
func zombie(pid int) bool {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	_, after, ok := strings.Cut(string(b), ") ")
	return ok && strings.HasPrefix(after, "Z")
}

// TestNoViewCgroup: without the private view, where the launcher can make a
// cgroup (here below the test's own), the session runs in one: the
// start-up line names it; while the agent runs, every process of the
// session is in it and the supervisor is not; at the end a double-forked
// daemon that did setsid is gone, and so is the cgroup. The agent cannot
// move itself out by writing cgroup.procs: the floor grants /sys/fs/cgroup
// read only (control: the same write works without the launcher). It can
// leave the cgroup with clone3(CLONE_INTO_CGROUP) into the parent, which
// the kernel checks against the file modes alone, not Landlock: a
// documented limit this test pins; the supervisor, still its subreaper,
// kills that process too. Control: without the launcher the daemon
// outlives its parent (the test's cgroup ends it at cleanup).
func TestNoViewCgroup(t *testing.T) {
	s := newSandbox(t, standard)
	parent := testCgroup(t)
	s.cgroup = parent
	mnt, _ := cgroup2Mount(t)

	bareOut := s.ws + "/bare-daemon.out"
	wantOK(t, "control: bare daemon started", s.bare("daemon", bareOut, "sleep", "1500"))
	if r := s.bare("wait-file", bareOut, "10000"); !strings.Contains(r.line(), "ok") {
		t.Fatalf("control: the bare daemon did not outlive its parent: %s", r)
	}
	procs := parent + "/cgroup.procs"
	wantOK(t, "control: without the launcher, writing the parent's cgroup.procs", s.bare("write", procs, "0"))

	a := shq(agent)
	daemonOut, escRead, escSleep := s.ws+"/daemon.out", s.ws+"/escaped-read.out", s.ws+"/escaped-sleep.out"
	marker, goFile := s.ws+"/started", s.ws+"/go"
	script := a + " write " + shq(procs) + " 0; " +
		a + " daemon " + shq(daemonOut) + " sleep 1500 >/dev/null && " +
		a + " cgroup-spawn " + shq(parent) + " " + shq(escRead) + " read /proc/self/cgroup >/dev/null && " +
		a + " cgroup-spawn " + shq(parent) + " " + shq(escSleep) + " sleep 1500 >/dev/null && " +
		a + " wait-file " + shq(escRead) + " 10000 >/dev/null && " +
		a + " write " + shq(marker) + " x >/dev/null && exec " + a + " wait-file " + shq(goFile) + " 10000"
	bin, args := s.noViewArgs("", false, "/bin/sh", "-c", script)

	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env, cmd.Dir = s.env(), s.ws
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cg, err := os.Open(parent)
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Close()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, UseCgroupFD: true, CgroupFD: int(cg.Fd())}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() { cmd.Process.Kill(); <-done }()
	waitForOr(t, marker, done, &stderr)

	// While the agent runs.
	supervisor := cmd.Process.Pid // unshare and sh exec: the launcher's pid
	sessions := sessionCgroups(t, parent)
	if len(sessions) != 1 {
		t.Fatalf("want one session cgroup in %s, got %q: %s", parent, sessions, stderr.String())
	}
	session := sessions[0]
	rel := func(dir string) string { return strings.TrimPrefix(dir, mnt) }
	if got := cgroupOf(supervisor); got != rel(parent) {
		t.Errorf("the supervisor is in %q, want %q (outside the session's cgroup)", got, rel(parent))
	}
	pids := descendants(supervisor)
	in, escaped := 0, 0
	for _, p := range pids {
		if zombie(p) {
			continue // an orphan that ended; the supervisor reaps it at the end
		}
		switch cgroupOf(p) {
		case rel(session):
			in++
		case rel(parent):
			escaped++ // the cgroup-spawn sleeper
		case "":
			// exited since the listing
		default:
			t.Errorf("process %d of the session is in %q, want %q", p, cgroupOf(p), rel(session))
		}
	}
	if in < 2 || escaped != 1 {
		t.Errorf("while the agent runs: %d processes in the session's cgroup (want the agent and the daemon at least), %d in its parent (want the one cgroup-spawn started): %v", in, escaped, pids)
	}
	if b, err := os.ReadFile(escRead); err != nil || !strings.Contains(string(b), `0::`+rel(parent)+`\n`) {
		t.Errorf("the documented limit changed: clone3(CLONE_INTO_CGROUP) into the parent no longer leaves the session's cgroup (%v, %q); update the README and this test", err, b)
	}

	if err := os.WriteFile(goFile, []byte("go"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("launcher: %v: %s", err, stderr.String())
	}
	done <- nil // for the deferred kill
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "err EACCES ") || !strings.HasPrefix(lines[len(lines)-1], "ok") {
		t.Errorf("inside: writing the parent's cgroup.procs must fail with EACCES, then the agent end: %q", stdout.String())
	}
	if want := "its processes end with the session: cgroup.kill on the session's cgroup " + session; !strings.Contains(stderr.String(), want) {
		t.Errorf("the start-up line does not say %q: %s", want, stderr.String())
	}
	if _, err := os.Stat(session); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the session's cgroup %s is still there: %v", session, err)
	}
	for _, p := range pids {
		if err := syscall.Kill(p, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d of the session is still there (%v) in %q", p, err, cgroupOf(p))
		}
	}
	// Both would have written by 2 s after they started, before the
	// session ended.
	for i, out := range []string{daemonOut, escSleep} {
		if r := s.bare("wait-file", out, []string{"4000", "100"}[i]); !strings.Contains(r.line(), "ETIMEDOUT") {
			t.Errorf("a daemon of the session outlived it: %s", r)
		}
	}
}

// waitForOr waits for path like waitFor, and fails at once with the
// launcher's stderr if the launcher ends first.
func waitForOr(t *testing.T, path string, done chan error, stderr *bytes.Buffer) {
	t.Helper()
	deadline := time.Now().Add(runTimeout)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("the launcher ended (%v) before %s appeared: %s", err, path, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared: %s", path, stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestNoViewWithoutCgroup: where the launcher can make no cgroup (here the
// cgroup2 hierarchy is covered by a tmpfs in the launcher's mount
// namespace), the session without a view still ends what the agent left
// running, the supervisor being its subreaper, and the start-up line says
// that and why. Control: without the launcher the same double-forked
// daemon, which did setsid, outlives its parent.
func TestNoViewWithoutCgroup(t *testing.T) {
	s := newSandbox(t, standard)
	s.cgroup = testCgroup(t)
	mnt, _ := cgroup2Mount(t)
	bareOut := s.ws + "/bare-daemon.out"
	wantOK(t, "control: bare daemon started", s.bare("daemon", bareOut, "sleep", "1500"))
	if r := s.bare("wait-file", bareOut, "10000"); !strings.Contains(r.line(), "ok") {
		t.Fatalf("control: the bare daemon did not outlive its parent: %s", r)
	}
	out := s.ws + "/daemon.out"
	bin, args := s.noViewArgs("mount -t tmpfs none "+shq(mnt)+" && ", true, agent, "daemon", out, "sleep", "1500")
	r := s.exec(bin, args...)
	wantOK(t, "daemon started without the view or a cgroup", r)
	if want := "its processes end with the session: the supervisor, as subreaper, kills its descendants (no cgroup: " + mnt; !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "is not a cgroup2 file system") {
		t.Errorf("the start-up line does not say %q and why: %s", want, r.stderr)
	}
	if got := sessionCgroups(t, s.cgroup); len(got) != 0 {
		t.Errorf("a session cgroup was made: %q", got)
	}
	if r := s.bare("wait-file", out, "4000"); !strings.Contains(r.line(), "ETIMEDOUT") {
		t.Errorf("without the view or a cgroup, the session's daemon outlived the session: %s", r)
	}
}

// TestDoctorNoViewEnd: doctor says how a session without the view would
// end its processes here: in a writable cgroup, the session's own cgroup
// below it (the probe's cgroup removed again); with the cgroup2 hierarchy
// covered, the subreaper and why.
func TestDoctorNoViewEnd(t *testing.T) {
	s := newSandbox(t, standard)
	s.cgroup = testCgroup(t)
	mnt, _ := cgroup2Mount(t)
	type report struct {
		End struct {
			Cgroup   string `json:"cgroup"`
			NoCgroup string `json:"no_cgroup"`
		} `json:"no_view_session_end"`
	}
	var rep report
	r := s.exec(launcher, "doctor", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("doctor --json: %v: %s", err, r)
	}
	if want := s.cgroup + "/agent-launcher-PID"; rep.End.Cgroup != want || rep.End.NoCgroup != "" {
		t.Errorf("doctor --json: %+v, want the cgroup %s", rep.End, want)
	}
	if got := sessionCgroups(t, s.cgroup); len(got) != 0 {
		t.Errorf("doctor's probe left %q", got)
	}
	if r := s.exec(launcher, "doctor"); !strings.Contains(r.stdout, "processes end with the session: cgroup.kill on the session's cgroup "+s.cgroup+"/agent-launcher-PID") {
		t.Errorf("doctor does not name the cgroup: %s", r)
	}
	unshare := s.lookPath("unshare")
	r = s.exec(unshare, "-Urm", "/bin/sh", "-c", "mount -t tmpfs none "+shq(mnt)+` && exec "$@"`, "sh", launcher, "doctor")
	if !strings.Contains(r.stdout, "the supervisor, as subreaper, kills its descendants (no cgroup: "+mnt+" is not a cgroup2 file system") {
		t.Errorf("with the hierarchy covered, doctor does not name the subreaper and why: %s", r)
	}
}
