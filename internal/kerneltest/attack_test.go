package kerneltest

import (
	"debug/elf"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// This file is the attack corpus of research/kernel.md section 5: each row
// the Landlock floor alone must stop is a subtest named after its row
// number. Every subtest pairs the attack under the launcher with a positive
// control: the same operation on an allowed sibling succeeds under the
// launcher, and the attack itself succeeds without it (bare), so a launcher
// that denied everything, or an attack that could never work, fails the
// test.
//
// Rows 8, 9, 22-25 attack "the supervisor": the agent's parent process, the
// `agent-launcher run` process that started the init stage, which execs the
// agent. Inside `s.sh`, that is $PPID (the init stage became sh). The bare
// controls attack the test process instead (the parent of a bare sh), or a
// helper process the test starts, both unconfined processes of the same
// user, as the supervisor is.

// corpusWorld is a sandbox for the corpus: the standard policy (write the
// workspace) plus extra, a deny-tier .env at the top of the workspace (so
// the workspace is a carved parent), a writable sibling directory rw/ and,
// when the policy names it, a read-tier tree ro/.
func corpusWorld(t *testing.T, extra string) *sandbox {
	t.Helper()
	s := newSandbox(t, standard+extra)
	s.write("home/proj/.env", envSec)
	s.write("home/proj/rw/a.txt", "allowed")
	s.write("home/proj/ro/doc.txt", "read-only")
	return s
}

// shq quotes a string for /bin/sh.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// bareSh runs a shell script unconfined; its $PPID is the test process.
func (s *sandbox) bareSh(script string) result {
	s.t.Helper()
	return s.exec("/bin/sh", "-c", script)
}

// helperProcess starts an unconfined `sleep` the test owns, in dir: a
// stand-in for an operator's process outside the session. It is killed at
// cleanup.
func helperProcess(t *testing.T, dir string) int {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process.Pid
}

// sandboxPATH is the PATH of the launcher's environment (sandbox.env).
const sandboxPATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"

// lookPath finds a program in the launcher's PATH (not the test process's,
// which may hold shims under the operator's home that the policy does not
// grant), or returns "".
func (s *sandbox) lookPath(name string) string {
	for _, dir := range filepath.SplitList(sandboxPATH) {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// wantFile asserts a file still holds want.
func wantFile(t *testing.T, path, want string) {
	t.Helper()
	if b, err := os.ReadFile(path); err != nil || string(b) != want {
		t.Errorf("%s: content %q (%v), want %q", path, b, err, want)
	}
}

// sleeper is a shell fragment that starts a child of the shell that will
// exec the agent, so that the agent becomes its parent: a process in the
// agent's own domain, for the controls of rows 22-25. Its stdio is
// /dev/null so that the harness does not wait for it.
const sleeper = "sleep 5 </dev/null >/dev/null 2>&1 & "

// supFD is where leakedKey's launcher holds the key.
const supFD = 9

// leakedKey opens the world's SSH key, as if the operator's shell had
// leaked it to the launcher, and returns it with a runner of shell
// scripts under a launcher that holds it at fd supFD. The key is closed
// when the test ends.
func (s *sandbox) leakedKey() (*os.File, func(script string) result) {
	s.t.Helper()
	key, err := os.Open(s.path("home/.ssh/id_ed25519"))
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { key.Close() })
	files := make([]*os.File, supFD-3+1)
	files[supFD-3] = key
	return key, func(script string) result {
		s.t.Helper()
		return s.execFiles(files, nil, launcher, "run", "--config", s.config, "--workspace", s.ws, "--", "/bin/sh", "-c", script)
	}
}

// wantSupervisorParent checks the premise of the supervisor rows: inside
// `s.sh`, $PPID is the launcher: the `agent-launcher run` process, or, with
// a private view, the init stage that stays the session's PID 1 (the
// supervisor is then outside the session's PID namespace altogether).
func wantSupervisorParent(t *testing.T, s *sandbox) {
	t.Helper()
	r := s.sh("exec " + shq(agent) + " read /proc/$PPID/comm")
	if !strings.Contains(r.line(), "agent-launcher") {
		t.Fatalf("premise: $PPID of the agent's shell is not the launcher: %s", r)
	}
}

// TestAttackCorpus: the rows of research/kernel.md section 5 that the
// Landlock floor, the new session and the scopes stop on their own.
func TestAttackCorpus(t *testing.T) {
	t.Run("row01-direct-open", func(t *testing.T) {
		s := corpusWorld(t, "")
		key := s.path("home/.ssh/id_ed25519")
		wantOK(t, "control: bare reads the key", s.bare("read", key))
		wantOK(t, "control: bare reads the workspace .env", s.bare("read", s.ws+"/.env"))
		wantErr(t, "read the key", s.agent("read", key), "EACCES")
		wantErr(t, "read the workspace .env", s.agent("read", s.ws+"/.env"), "EACCES")
		wantErr(t, "write the key", s.agent("write", key, "x"), "EACCES")
		wantOK(t, "control: read a workspace file", s.agent("read", s.ws+"/rw/a.txt"))
		wantOK(t, "control: write a workspace file", s.agent("write", s.ws+"/rw/a.txt", "written"))
		wantFile(t, key, sshKey)
	})

	t.Run("row04-dotdot", func(t *testing.T) {
		s := corpusWorld(t, "")
		up := s.ws + "/rw/../../.ssh/id_ed25519"
		wantOK(t, "control: bare reads through ../", s.bare("read", up))
		wantErr(t, "read the key through ../", s.agent("read", up), "EACCES")
		wantErr(t, "read .env through ../", s.agent("read", s.ws+"/rw/../.env"), "EACCES")
		wantOK(t, "control: read a workspace file through ../", s.agent("read", s.ws+"/rw/../rw/a.txt"))
	})

	t.Run("row05-symlink-in-write-tier", func(t *testing.T) {
		s := corpusWorld(t, "")
		key := s.path("home/.ssh/id_ed25519")
		// The agent makes the links itself, in its write tier.
		wantOK(t, "symlink to the key", s.agent("symlink", key, s.ws+"/rw/k"))
		wantOK(t, "symlink to .env", s.agent("symlink", s.ws+"/.env", s.ws+"/rw/e"))
		wantOK(t, "control: symlink to a sibling", s.agent("symlink", s.ws+"/rw/a.txt", s.ws+"/rw/a-link"))
		wantOK(t, "control: bare reads the key through the link", s.bare("read", s.ws+"/rw/k"))
		wantErr(t, "read the key through the link", s.agent("read", s.ws+"/rw/k"), "EACCES")
		wantErr(t, "write the key through the link", s.agent("write", s.ws+"/rw/k", "x"), "EACCES")
		wantErr(t, "read .env through the link", s.agent("read", s.ws+"/rw/e"), "EACCES")
		wantOK(t, "control: read a sibling through a link", s.agent("read", s.ws+"/rw/a-link"))
		wantFile(t, key, sshKey)
	})

	t.Run("row07-proc-self-root", func(t *testing.T) {
		s := corpusWorld(t, "")
		key := s.path("home/.ssh/id_ed25519")
		wantOK(t, "control: bare reads /proc/self/root/...", s.bare("read", "/proc/self/root"+key))
		wantErr(t, "read the key via /proc/self/root", s.agent("read", "/proc/self/root"+key), "EACCES")
		wantErr(t, "read .env via /proc/self/root", s.agent("read", "/proc/self/root"+s.ws+"/.env"), "EACCES")
		wantOK(t, "control: a workspace file via /proc/self/root", s.agent("read", "/proc/self/root"+s.ws+"/rw/a.txt"))
	})

	t.Run("row08-proc-supervisor-root-cwd", func(t *testing.T) {
		s := corpusWorld(t, "")
		wantSupervisorParent(t, s)
		key := s.path("home/.ssh/id_ed25519")
		// The supervisor's cwd is the workspace (the harness starts it there).
		wantOK(t, "control: bare reads /proc/<parent>/root/...", s.bareSh("exec "+shq(agent)+" read /proc/$PPID/root"+shq(key)))
		other := helperProcess(t, s.ws)
		wantOK(t, "control: bare reads /proc/<operator's process>/cwd/...", s.bare("read", fmt.Sprintf("/proc/%d/cwd/rw/a.txt", other)))
		wantErr(t, "/proc/<supervisor>/root/key", s.sh("exec "+shq(agent)+" read /proc/$PPID/root"+shq(key)), "EACCES")
		// Even a file the agent may read directly: the ptrace check refuses
		// the supervisor's /proc links as such.
		wantErr(t, "/proc/<supervisor>/root/<workspace file>", s.sh("exec "+shq(agent)+" read /proc/$PPID/root"+shq(s.ws+"/rw/a.txt")), "EACCES")
		wantErr(t, "/proc/<supervisor>/cwd/.env", s.sh("exec "+shq(agent)+" read /proc/$PPID/cwd/.env"), "EACCES")
		wantErr(t, "/proc/<supervisor>/cwd/<workspace file>", s.sh("exec "+shq(agent)+" read /proc/$PPID/cwd/rw/a.txt"), "EACCES")
		// ENOENT: the session's PID namespace has no such process.
		wantErr(t, "/proc/<operator's process>/cwd/<workspace file>", s.agent("read", fmt.Sprintf("/proc/%d/cwd/rw/a.txt", other)), "EACCES", "ENOENT")
		wantErr(t, "list /proc/<supervisor>/cwd", s.sh("exec "+shq(agent)+" list /proc/$PPID/cwd"), "EACCES")
		// Control: the same links of a process in the agent's own domain.
		wantOK(t, "control: /proc/<own shell>/root/<workspace file>", s.sh(shq(agent)+" read /proc/$$/root"+shq(s.ws+"/rw/a.txt")))
		wantOK(t, "control: /proc/<own shell>/cwd/<workspace file>", s.sh(shq(agent)+" read /proc/$$/cwd/rw/a.txt"))
	})

	t.Run("row09-proc-supervisor-fd", func(t *testing.T) {
		s := corpusWorld(t, "")
		wantSupervisorParent(t, s)
		key, run := s.leakedKey()
		wantOK(t, "control: bare reads /proc/<parent>/fd/N", s.bareSh("exec "+shq(agent)+" read /proc/$PPID/fd/"+strconv.Itoa(int(key.Fd()))))
		// ENOENT: with a private view the parent is PID 1, the init stage,
		// which closed every fd it had no use for.
		wantErr(t, "/proc/<supervisor>/fd/9 (the key)", run("exec "+shq(agent)+" read /proc/$PPID/fd/"+strconv.Itoa(supFD)), "EACCES", "ENOENT")
		wantErr(t, "/proc/<supervisor>/fd/2", run("exec "+shq(agent)+" read /proc/$PPID/fd/2"), "EACCES")
		// The supervisor's fd never reaches the agent (the init stage marks
		// every fd above 2 close-on-exec).
		wantErr(t, "the agent inherited the supervisor's fd 9", run("exec "+shq(agent)+" read /proc/self/fd/"+strconv.Itoa(supFD)), "ENOENT")
		wantOK(t, "control: /proc/<own shell>/fd/N of a workspace file", run("exec 5<rw/a.txt; "+shq(agent)+" read /proc/$$/fd/5"))
	})

	t.Run("row10-opath-reopen", func(t *testing.T) {
		s := corpusWorld(t, "")
		key := s.path("home/.ssh/id_ed25519")
		wantOK(t, "control: bare O_PATH reopen of the key", s.bare("opath-reopen", key))
		wantErr(t, "O_PATH reopen of the key", s.agent("opath-reopen", key), "EACCES")
		wantErr(t, "O_PATH reopen of .env", s.agent("opath-reopen", s.ws+"/.env"), "EACCES")
		wantErr(t, "O_PATH dirfd + openat of the key", s.agent("opath-openat", s.path("home/.ssh"), "id_ed25519"), "EACCES")
		wantErr(t, "O_PATH dirfd of the carved workspace + openat .env", s.agent("opath-openat", s.ws, ".env"), "EACCES")
		wantOK(t, "control: O_PATH reopen of a workspace file", s.agent("opath-reopen", s.ws+"/rw/a.txt"))
		wantOK(t, "control: O_PATH dirfd + openat of a workspace file", s.agent("opath-openat", s.ws+"/rw", "a.txt"))
	})

	t.Run("row12-new-hardlink", func(t *testing.T) {
		s := corpusWorld(t, "deny_paths = [\"<workspace>/secrets/**\"]\n")
		key := s.path("home/.ssh/id_ed25519")
		s.write("home/proj/secrets/token", envSec)
		// Landlock answers EXDEV when the link would give the file more
		// rights in its new place (REFER), EACCES when a right is missing
		// outright; both stop it.
		wantErr(t, "link the key into the write tier", s.agent("link", key, s.ws+"/rw/k"), "EXDEV", "EACCES")
		wantErr(t, "link .env into the write tier", s.agent("link", s.ws+"/.env", s.ws+"/rw/e"), "EXDEV", "EACCES")
		wantErr(t, "link a denied directory's file into the write tier", s.agent("link", s.ws+"/secrets/token", s.ws+"/rw/t"), "EXDEV", "EACCES")
		for _, p := range []string{"/rw/k", "/rw/e", "/rw/t"} {
			if _, err := os.Lstat(s.ws + p); err == nil {
				t.Errorf("%s exists after a refused link", p)
			}
		}
		wantOK(t, "control: link inside the write tier", s.agent("link", s.ws+"/rw/a.txt", s.ws+"/rw/b.txt"))
		wantOK(t, "control: bare links the key into the workspace", s.bare("link", key, s.ws+"/rw/k"))
		wantOK(t, "control: and reads it there", s.bare("read", s.ws+"/rw/k"))
	})

	t.Run("row13-preexisting-hardlink", func(t *testing.T) {
		// A hard link made before launch is the same inode under a granted
		// name: Landlock would let it through, so run must refuse to start.
		cases := []struct {
			name, protected, link string
		}{
			{"key linked into the workspace", "home/.ssh/id_ed25519", "home/proj/rw/notes.bak"},
			{"carved .env linked into a sibling", "home/proj/.env", "home/proj/rw/env.bak"},
			// A file one level below a denied directory (~/.ssh/**): the
			// check must not stop at the directory's direct entries.
			{"a file deeper in ~/.ssh linked into the workspace", "home/.ssh/old/id_backup", "home/proj/rw/old.bak"},
			// (A .env of another project, denied only by the built-in
			// name pattern in a tree no rule grants, is not found: see
			// TestKnownLimitLinkedAnywhereMatch.)
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				s := corpusWorld(t, "")
				prot := s.path(c.protected)
				if c.protected != "home/.ssh/id_ed25519" && c.protected != "home/proj/.env" {
					s.write(c.protected, sshKey)
				}
				link := s.path(c.link)
				if err := os.Link(prot, link); err != nil {
					t.Fatal(err)
				}
				wantOK(t, "control: bare reads the secret through the link", s.bare("read", link))
				r := s.agent("read", link)
				if strings.Contains(r.stdout, sshKey) || strings.Contains(r.stdout, envSec) {
					t.Errorf("HOLE: the agent read %s through its pre-existing hard link %s: %s", prot, link, r)
				}
				if r.code != 125 || r.stdout != "" || !strings.Contains(r.stderr, prot) || !strings.Contains(r.stderr, "2 hard links") || !strings.Contains(r.stderr, "nothing was run") {
					t.Errorf("run did not refuse with exit 125 naming %s and its 2 hard links: %s", prot, r)
				}
				// Control: without the extra link the same world runs.
				if err := os.Remove(link); err != nil {
					t.Fatal(err)
				}
				wantOK(t, "control: runs without the link", s.agent("read", s.ws+"/rw/a.txt"))
			})
		}
	})

	t.Run("row13-bind-mount", func(t *testing.T) {
		if _, err := exec.LookPath("unshare"); err != nil {
			t.Fatalf("row 13 needs unshare(1) (util-linux) to make a bind mount in a private mount namespace: %v", err)
		}
		cases := []struct {
			name, src string
			refuse    bool
		}{
			{"~/.ssh bound into the workspace", "home/.ssh", true},
			{"home (holding .ssh) bound into the workspace", "home", true},
			{"a subdirectory of a denied directory", "home/.ssh/old", true},
			{"control: a harmless directory", "other", false},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				s := corpusWorld(t, "")
				s.write("home/.ssh/old/id_backup", sshKey)
				s.write("other/file", "harmless")
				mnt := s.mkdir("home/proj/rw/mnt")
				src := s.path(c.src)
				probe := mnt + "/" + map[string]string{"home/.ssh": "id_ed25519", "home": ".ssh/id_ed25519", "home/.ssh/old": "id_backup", "other": "file"}[c.src]
				bare := s.withBind(src, mnt, agent, "read", probe)
				wantOK(t, "control: bare reads through the bind mount", bare)
				r := s.withBind(src, mnt, launcher, "run", "--config", s.config, "--workspace", s.ws, "--", agent, "read", probe)
				if !c.refuse {
					wantOK(t, "run with a harmless bind mount", r)
					return
				}
				if strings.Contains(r.stdout, sshKey) {
					t.Errorf("HOLE: the agent read the key through the bind mount %s: %s", mnt, r)
				}
				if r.code != 125 || r.stdout != "" || !strings.Contains(r.stderr, mnt) || !strings.Contains(r.stderr, "mounted again") {
					t.Errorf("run did not refuse with exit 125 naming the bind mount %s: %s", mnt, r)
				}
			})
		}
	})

	t.Run("row14-rename-protected-dir", func(t *testing.T) {
		s := corpusWorld(t, "deny_paths = [\"<workspace>/secrets/**\"]\n")
		s.write("home/proj/secrets/token", envSec)
		s.write("home/proj/src/d/f", "movable")
		s.mkdir("home/proj/docs")
		ssh := s.path("home/.ssh")
		wantErr(t, "rename ~/.ssh into the workspace", s.agent("rename", ssh, s.ws+"/rw/ssh"), "EACCES", "EXDEV")
		wantErr(t, "rename the denied secrets/ under a granted sibling", s.agent("rename", s.ws+"/secrets", s.ws+"/src/secrets"), "EACCES", "EXDEV")
		wantErr(t, "rename the denied secrets/ to a new name in the carved parent", s.agent("rename", s.ws+"/secrets", s.ws+"/public"), "EACCES", "EXDEV")
		wantFile(t, s.path("home/.ssh/id_ed25519"), sshKey)
		wantFile(t, s.ws+"/secrets/token", envSec)
		wantOK(t, "control: rename between granted siblings", s.agent("rename", s.ws+"/src/d", s.ws+"/docs/d"))
		wantFile(t, s.ws+"/docs/d/f", "movable")
		wantOK(t, "control: bare renames secrets/ under a sibling", s.bare("rename", s.ws+"/secrets", s.ws+"/src/secrets"))
		wantOK(t, "control: bare reads it there", s.bare("read", s.ws+"/src/secrets/token"))
	})

	t.Run("row21-memfd-exec", func(t *testing.T) {
		s := corpusWorld(t, "")
		key := s.path("home/.ssh/id_ed25519")
		wantOK(t, "control: bare memfd copy reads the key", s.bare("memfd-exec", agent, "read", key))
		wantErr(t, "memfd copy reads the key", s.agent("memfd-exec", agent, "read", key), "EACCES")
		wantErr(t, "memfd copy reads .env", s.agent("memfd-exec", agent, "read", s.ws+"/.env"), "EACCES")
		wantOK(t, "control: the memfd copy runs and reads a workspace file", s.agent("memfd-exec", agent, "read", s.ws+"/rw/a.txt"))
		// Still the same session and domain: no_new_privs stays.
		r := s.agent("memfd-exec", agent, "status")
		if !strings.Contains(r.line(), "NoNewPrivs:1") {
			t.Errorf("the memfd copy lost no_new_privs: %s", r)
		}
	})

	t.Run("row22-ptrace-supervisor", func(t *testing.T) {
		s := corpusWorld(t, "")
		wantSupervisorParent(t, s)
		other := helperProcess(t, s.ws)
		wantOK(t, "control: bare attaches to an operator's process", s.bare("ptrace", strconv.Itoa(other)))
		wantErr(t, "attach to the supervisor", s.sh("exec "+shq(agent)+" ptrace $PPID"), "EPERM")
		wantErr(t, "attach to an operator's process", s.agent("ptrace", strconv.Itoa(other)), "EPERM", "ESRCH") // ESRCH: not in the session's PID namespace
		wantOK(t, "control: attach to a child in the agent's own domain", s.sh(sleeper+"exec "+shq(agent)+" ptrace $!"))
	})

	t.Run("row23-supervisor-memory", func(t *testing.T) {
		s := corpusWorld(t, "")
		wantSupervisorParent(t, s)
		wantOK(t, "control: bare process_vm_readv of its parent", s.bareSh("exec "+shq(agent)+" vm-read $PPID"))
		wantOK(t, "control: bare opens /proc/<parent>/mem", s.bareSh("exec "+shq(agent)+" proc-mem $PPID"))
		// The test agent's vm-read finds its address in /proc/<pid>/maps
		// first, which the ptrace restriction already refuses (EACCES)
		// unless the agent is perfmon_capable (root, see below); then the
		// syscall's own EPERM shows.
		wantErr(t, "process_vm_readv of the supervisor", s.sh("exec "+shq(agent)+" vm-read $PPID"), "EPERM", "EACCES")
		// The syscall itself, whatever maps says: both binaries are
		// non-PIE, so the first PT_LOAD address is known without maps.
		py := s.lookPath("python3")
		if py == "" {
			t.Fatalf("the process_vm_readv(2) half of row 23 needs python3 in %s", sandboxPATH)
		}
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		wantOK(t, "control: bare process_vm_readv(2) of its parent at a known address", s.exec(py, "-c", fmt.Sprintf("%s\nmain(%d)\n", vmReadPy, loadAddr(t, self))))
		wantErr(t, "process_vm_readv(2) of the supervisor at a known address", s.launch(py, "-c", fmt.Sprintf("%s\nmain(%d)\n", vmReadPy, loadAddr(t, launcher))), "EPERM")
		wantErr(t, "open /proc/<supervisor>/mem", s.sh("exec "+shq(agent)+" proc-mem $PPID"), "EACCES", "EPERM")
		wantOK(t, "control: process_vm_readv of a child in the agent's domain", s.sh(sleeper+"exec "+shq(agent)+" vm-read $!"))
		wantOK(t, "control: /proc/<child>/mem in the agent's domain", s.sh(sleeper+"exec "+shq(agent)+" proc-mem $!"))

		// The supervisor's environment (which keeps what the launcher
		// drops for the agent) through /proc/<sup>/environ, and its
		// layout through maps and auxv. These are opened with
		// PTRACE_MODE_READ through mm_access(), which the Landlock
		// ptrace restriction refuses, except that may_access_mm()
		// (kernel/fork.c; the patch that added it cites perf and BPF
		// profilers) lets a perfmon_capable() caller, CAP_PERFMON or CAP_SYS_ADMIN in the
		// initial user namespace, read them whatever the LSMs say. A
		// root agent keeps both today: DESIGN.md section 2 puts it out
		// of scope (the launcher warns), and the session view of
		// section 7 empties the bounding set. So as root with those
		// capabilities the test demands the warning and reports the
		// leak in the log; everywhere else the read must fail.
		const marker = "KERNELTEST_SUPERVISOR_ONLY=dropped-secret-value"
		wantOK(t, "control: bare reads its parent's environ", s.execFiles(nil, []string{marker}, "/bin/sh", "-c", "exec "+shq(agent)+" read /proc/$PPID/environ"))
		perfmon := agentPerfmonCapable(t, s)
		for _, f := range []string{"environ", "maps", "auxv"} {
			r := s.execFiles(nil, []string{marker}, launcher, "run", "--config", s.config, "--workspace", s.ws, "--",
				"/bin/sh", "-c", "exec "+shq(agent)+" read /proc/$PPID/"+f)
			if perfmon {
				if !strings.Contains(r.stderr, "WARNING: running as root") {
					t.Errorf("/proc/<supervisor>/%s: a root agent with CAP_PERFMON/CAP_SYS_ADMIN ran without the root warning: %s", f, r)
				}
				t.Logf("root agent (perfmon_capable, out of scope) reading /proc/<supervisor>/%s: leaked=%v %.120s", f, strings.Contains(r.stdout, "dropped-secret-value") || strings.HasPrefix(r.line(), "ok"), r.line())
				continue
			}
			wantErr(t, "/proc/<supervisor>/"+f, r, "EACCES")
			if strings.Contains(r.stdout, "dropped-secret-value") {
				t.Errorf("LEAKED the supervisor's environment: %s", r)
			}
		}
	})

	t.Run("row24-pidfd-getfd", func(t *testing.T) {
		s := corpusWorld(t, "")
		wantSupervisorParent(t, s)
		key, run := s.leakedKey()
		wantOK(t, "control: bare steals its parent's fd of the key", s.bareSh("exec "+shq(agent)+" pidfd-getfd $PPID "+strconv.Itoa(int(key.Fd()))))
		r := run("exec " + shq(agent) + " pidfd-getfd $PPID " + strconv.Itoa(supFD))
		wantErr(t, "pidfd_getfd of the supervisor's fd 9 (the key)", r, "EPERM")
		wantErr(t, "pidfd_getfd of the supervisor's stderr", s.sh("exec "+shq(agent)+" pidfd-getfd $PPID 2"), "EPERM")
		wantOK(t, "control: pidfd_getfd of a child in the agent's domain", s.sh("exec 5<rw/a.txt; "+sleeper+"exec "+shq(agent)+" pidfd-getfd $! 5"))
	})

	t.Run("row25-signal-supervisor", func(t *testing.T) {
		s := corpusWorld(t, "")
		wantSupervisorParent(t, s)
		other := helperProcess(t, s.ws)
		victim := helperProcess(t, s.ws)
		for _, sig := range []string{"KILL", "STOP", "TERM", "0"} {
			r := s.sh("exec " + shq(agent) + " kill $PPID " + sig)
			wantErr(t, "signal "+sig+" to the supervisor", r, "EPERM")
			if r.code != 1 {
				t.Errorf("signal %s: the launcher did not pass the agent's status 1 through (the supervisor was hit?): %s", sig, r)
			}
		}
		wantErr(t, "SIGKILL to an operator's process", s.agent("kill", strconv.Itoa(other), "KILL"), "EPERM", "ESRCH") // ESRCH: not in the session's PID namespace
		if err := syscall.Kill(other, 0); err != nil {
			t.Errorf("the operator's process is gone: %v", err)
		}
		wantOK(t, "control: the agent signals its own child", s.sh(sleeper+"exec "+shq(agent)+" kill $! KILL"))
		wantOK(t, "control: bare kills an operator's process", s.bare("kill", strconv.Itoa(victim), "KILL"))
	})

	t.Run("row26-abstract-socket", func(t *testing.T) {
		s := corpusWorld(t, "")
		name := fmt.Sprintf("agent-launcher-kerneltest-%d-%s", os.Getpid(), filepath.Base(s.dir))
		ln, err := net.Listen("unix", "@"+name)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		wantOK(t, "control: bare connects", s.bare("connect-abstract", name))
		wantErr(t, "connect to the test's abstract socket", s.agent("connect-abstract", name), "EPERM")
	})

	t.Run("row31-unshare-mount", func(t *testing.T) {
		s := corpusWorld(t, "")
		ssh := s.path("home/.ssh")
		mnt := s.mkdir("home/proj/rw/mnt")
		// The test agent's probe writes the uid and gid maps first, under
		// /proc, which the system preset grants read-only: its first
		// failing step shows where the floor stops it.
		wantOK(t, "control: bare mounts a tmpfs over ~/.ssh in a new user+mount namespace", s.bare("mount-tmpfs", ssh))
		r := s.agent("mount-tmpfs", ssh)
		wantErr(t, "mount a tmpfs over ~/.ssh", r, "EPERM", "EACCES")
		t.Logf("testagent mount-tmpfs under the launcher: %s", r.line())
		// The mount syscall itself: Python's ctypes keeps the capabilities
		// that unshare(CLONE_NEWUSER) gives (no execve in between) and
		// needs no map to call mount(2).
		py := s.lookPath("python3")
		if py == "" {
			t.Fatalf("the mount(2) half of row 31 needs python3 in %s", sandboxPATH)
		}
		for _, c := range []struct{ name, src, dst string }{
			{"tmpfs over ~/.ssh", "tmpfs", ssh},
			{"bind ~/.ssh into the workspace", ssh, mnt},
		} {
			script := mountPy + "\nmain(" + strconv.Quote(c.src) + ", " + strconv.Quote(c.dst) + ")\n"
			wantOK(t, "control: bare "+c.name, s.exec(py, "-c", script))
			r := s.launch(py, "-c", script)
			wantErr(t, c.name, r, "EPERM")
			if !strings.Contains(r.line(), "mount") {
				t.Errorf("%s: want the mount(2) step to fail, got %s", c.name, r)
			}
			t.Logf("%s under the launcher: %s", c.name, r.line())
		}
	})

	t.Run("row44-truncate-read-tier", func(t *testing.T) {
		s := corpusWorld(t, "read_paths = [\"<workspace>/ro/**\"]\n")
		s.write("home/proj/ro/bare.txt", "bare")
		ro := s.ws + "/ro/doc.txt"
		wantOK(t, "control: bare O_RDONLY|O_TRUNC truncates", s.bare("open-trunc", s.ws+"/ro/bare.txt"))
		wantFile(t, s.ws+"/ro/bare.txt", "")
		wantErr(t, "O_RDONLY|O_TRUNC on a read-tier file", s.agent("open-trunc", ro), "EACCES")
		wantErr(t, "truncate(2) on a read-tier file", s.agent("truncate", ro, "0"), "EACCES")
		wantErr(t, "truncate(2) on the key", s.agent("truncate", s.path("home/.ssh/id_ed25519"), "0"), "EACCES")
		wantFile(t, ro, "read-only")
		wantFile(t, s.path("home/.ssh/id_ed25519"), sshKey)
		wantOK(t, "control: read the read-tier file", s.agent("read", ro))
		s.write("home/proj/rw/b.txt", "bbbb")
		wantOK(t, "control: O_RDONLY|O_TRUNC on a write-tier file", s.agent("open-trunc", s.ws+"/rw/a.txt"))
		wantOK(t, "control: truncate(2) on a write-tier file", s.agent("truncate", s.ws+"/rw/b.txt", "1"))
		wantFile(t, s.ws+"/rw/a.txt", "")
		wantFile(t, s.ws+"/rw/b.txt", "b")
	})
}

// agentPerfmonCapable reports whether the agent runs with CAP_PERFMON (38)
// or CAP_SYS_ADMIN (21) in its effective set.
func agentPerfmonCapable(t *testing.T, s *sandbox) bool {
	t.Helper()
	r := s.agent("status")
	_, capEff, ok := strings.Cut(r.line(), "CapEff:")
	if !ok {
		t.Fatalf("agent status: %s", r)
	}
	caps, err := strconv.ParseUint(strings.TrimSpace(capEff), 16, 64)
	if err != nil {
		t.Fatalf("agent status: CapEff %q: %v", capEff, err)
	}
	return caps&(1<<38|1<<21) != 0
}

// loadAddr returns the address of the first loadable segment of the
// non-PIE executable at path.
func loadAddr(t *testing.T, path string) uint64 {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC {
		t.Fatalf("%s is %s, not a non-PIE executable: its load address is not known in advance", path, f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			return p.Vaddr
		}
	}
	t.Fatalf("%s has no PT_LOAD segment", path)
	return 0
}

// vmReadPy defines main(addr): process_vm_readv(2) of 16 bytes at addr in
// the parent process, printing the test agent's result line.
const vmReadPy = `
import ctypes, errno, os, platform, sys
nr = {"x86_64": 310, "aarch64": 270}[platform.machine()]
libc = ctypes.CDLL(None, use_errno=True)
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
def main(addr):
    buf = ctypes.create_string_buffer(16)
    local, remote = iovec(ctypes.cast(buf, ctypes.c_void_p), 16), iovec(addr, 16)
    pid = os.getppid()
    n = libc.syscall(nr, pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    if n < 0:
        e = ctypes.get_errno()
        print("err %s process_vm_readv pid %d at %#x: %s" % (errno.errorcode.get(e, "EOTHER"), pid, addr, os.strerror(e)))
        sys.exit(1)
    print("ok read %d bytes at %#x" % (n, addr))
`

// mountPy defines main(src, dst): unshare(CLONE_NEWUSER|CLONE_NEWNS) and
// mount(2) src on dst (src "tmpfs": a tmpfs, else a bind mount), printing
// the test agent's result line.
const mountPy = `
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def step(what, r):
    if r != 0:
        e = ctypes.get_errno()
        print("err %s %s: %s" % (errno.errorcode.get(e, "EOTHER"), what, os.strerror(e)))
        sys.exit(1)
def main(src, dst):
    step("unshare CLONE_NEWUSER|CLONE_NEWNS", libc.unshare(0x10000000 | 0x00020000))
    if src == "tmpfs":
        step("mount tmpfs on " + dst, libc.mount(b"tmpfs", dst.encode(), b"tmpfs", 0, None))
    else:
        step("mount --bind %s %s" % (src, dst), libc.mount(src.encode(), dst.encode(), None, 4096, None))
    print("ok mounted")
`

// withBind runs bin with args in a private mount namespace in which src is
// bind-mounted on dst. As root that is a real bind mount in a new mount
// namespace (`unshare --mount`, private propagation: the host never sees
// it). As another user, `unshare --user --map-current-user --mount` is not
// enough: the mapped uid is not 0, so sh, and mount(8) after it, lose the
// namespace's capabilities at execve. So the bind is made as root of a new
// user namespace (--map-root-user), and a nested user namespace maps the
// caller's own uid and gid back (--map-user/--map-group), so that bin runs
// as the caller, without capabilities, seeing the mount.
func (s *sandbox) withBind(src, dst string, bin string, args ...string) result {
	s.t.Helper()
	const script = `mount --bind "$1" "$2" || exit 99; shift 2; exec "$@"`
	var argv []string
	if os.Geteuid() == 0 {
		argv = []string{"--mount", "--propagation", "private", "/bin/sh", "-c", script, "sh", src, dst, bin}
	} else {
		nested := fmt.Sprintf(`mount --bind "$1" "$2" || exit 99; shift 2; exec unshare --user --map-user=%d --map-group=%d -- "$@"`, os.Getuid(), os.Getgid())
		argv = []string{"--user", "--map-root-user", "--mount", "/bin/sh", "-c", nested, "sh", src, dst, bin}
	}
	r := s.exec("unshare", append(argv, args...)...)
	if r.code == 99 {
		s.t.Fatalf("could not make the bind mount %s on %s: %s", src, dst, r)
	}
	return r
}
