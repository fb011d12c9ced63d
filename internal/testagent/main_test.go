//go:build linux

package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// agentTimeout bounds every agent invocation in these tests.
const agentTimeout = 30 * time.Second

// TestAgent builds the agent and checks, without any sandbox, that every
// operation works where the kernel allows it (the positive controls the
// sandbox tests rely on) and reports the right errno where it does not.
func TestAgent(t *testing.T) {
	bin := buildAgent(t)

	type agentCase struct {
		name string
		// setup prepares dir and returns the agent's arguments.
		setup    func(t *testing.T, dir string) []string
		want     string // exact stdout without the final newline, unless wantRe is set
		wantRe   string
		wantCode int
		check    func(t *testing.T, dir string) // optional, after the run
		skip     func() string                  // optional; a non-empty reason skips the case
	}
	args := func(a ...string) func(*testing.T, string) []string {
		return func(*testing.T, string) []string { return a }
	}
	tests := []agentCase{
		// Files.
		{
			name: "read",
			setup: func(t *testing.T, dir string) []string {
				writeFile(t, filepath.Join(dir, "f"), "hello\nworld")
				return []string{"read", filepath.Join(dir, "f")}
			},
			want: `ok "hello\nworld"`,
		},
		{
			name: "read missing",
			setup: func(t *testing.T, dir string) []string {
				return []string{"read", filepath.Join(dir, "missing")}
			},
			wantRe:   `^err ENOENT open /.*/missing: no such file or directory$`,
			wantCode: 1,
		},
		{
			name:     "read directory",
			setup:    func(t *testing.T, dir string) []string { return []string{"read", dir} },
			wantRe:   `^err EISDIR read /.*: is a directory$`,
			wantCode: 1,
		},
		{
			name:  "write creates",
			setup: func(t *testing.T, dir string) []string { return []string{"write", filepath.Join(dir, "f"), "abc"} },
			want:  "ok wrote 3 bytes",
			check: wantContent("f", "abc"),
		},
		{
			name: "write truncates",
			setup: func(t *testing.T, dir string) []string {
				writeFile(t, filepath.Join(dir, "f"), "longer content")
				return []string{"write", filepath.Join(dir, "f"), "xy"}
			},
			want:  "ok wrote 2 bytes",
			check: wantContent("f", "xy"),
		},
		{
			name: "append",
			setup: func(t *testing.T, dir string) []string {
				writeFile(t, filepath.Join(dir, "f"), "ab")
				return []string{"append", filepath.Join(dir, "f"), "cd"}
			},
			want:  "ok wrote 2 bytes",
			check: wantContent("f", "abcd"),
		},
		{
			name:     "append does not create",
			setup:    func(t *testing.T, dir string) []string { return []string{"append", filepath.Join(dir, "f"), "cd"} },
			wantRe:   `^err ENOENT open .*`,
			wantCode: 1,
		},
		{
			name:  "create",
			setup: func(t *testing.T, dir string) []string { return []string{"create", filepath.Join(dir, "f")} },
			want:  "ok created",
			check: wantContent("f", ""),
		},
		{
			name: "create existing",
			setup: func(t *testing.T, dir string) []string {
				writeFile(t, filepath.Join(dir, "f"), "keep")
				return []string{"create", filepath.Join(dir, "f")}
			},
			wantRe:   `^err EEXIST open .*: file exists$`,
			wantCode: 1,
			check:    wantContent("f", "keep"),
		},
		{
			name: "open-trunc",
			setup: func(t *testing.T, dir string) []string {
				writeFile(t, filepath.Join(dir, "f"), "data")
				return []string{"open-trunc", filepath.Join(dir, "f")}
			},
			want:  "ok opened, size=0",
			check: wantContent("f", ""),
		},
		{
			name: "truncate",
			setup: func(t *testing.T, dir string) []string {
				writeFile(t, filepath.Join(dir, "f"), "data")
				return []string{"truncate", filepath.Join(dir, "f"), "2"}
			},
			want:  "ok truncated to 2",
			check: wantContent("f", "da"),
		},
		{
			name: "mkdir",
			setup: func(t *testing.T, dir string) []string {
				return []string{"mkdir", filepath.Join(dir, "d")}
			},
			want: "ok created",
			check: func(t *testing.T, dir string) {
				if fi, err := os.Stat(filepath.Join(dir, "d")); err != nil || !fi.IsDir() {
					t.Errorf("d is not a directory: %v", err)
				}
			},
		},
		{
			name:     "mkdir existing",
			setup:    func(t *testing.T, dir string) []string { return []string{"mkdir", dir} },
			wantRe:   `^err EEXIST mkdir .*`,
			wantCode: 1,
		},
		{
			name: "rmdir",
			setup: func(t *testing.T, dir string) []string {
				mkdir(t, filepath.Join(dir, "d"))
				return []string{"rmdir", filepath.Join(dir, "d")}
			},
			want:  "ok removed",
			check: wantMissing("d"),
		},
		{
			name: "rmdir not empty",
			setup: func(t *testing.T, dir string) []string {
				mkdir(t, filepath.Join(dir, "d"))
				writeFile(t, filepath.Join(dir, "d", "f"), "")
				return []string{"rmdir", filepath.Join(dir, "d")}
			},
			wantRe:   `^err ENOTEMPTY rmdir /.*/d: directory not empty$`,
			wantCode: 1,
		},
		{
			name: "unlink",
			setup: func(t *testing.T, dir string) []string {
				writeFile(t, filepath.Join(dir, "f"), "")
				return []string{"unlink", filepath.Join(dir, "f")}
			},
			want:  "ok removed",
			check: wantMissing("f"),
		},
		{
			name: "rename",
			setup: func(t *testing.T, dir string) []string {
				writeFile(t, filepath.Join(dir, "a"), "A")
				return []string{"rename", filepath.Join(dir, "a"), filepath.Join(dir, "b")}
			},
			want: "ok renamed",
			check: func(t *testing.T, dir string) {
				wantMissing("a")(t, dir)
				wantContent("b", "A")(t, dir)
			},
		},
		{
			name: "exchange",
			setup: func(t *testing.T, dir string) []string {
				writeFile(t, filepath.Join(dir, "a"), "A")
				writeFile(t, filepath.Join(dir, "b"), "B")
				return []string{"exchange", filepath.Join(dir, "a"), filepath.Join(dir, "b")}
			},
			want: "ok exchanged",
			check: func(t *testing.T, dir string) {
				wantContent("a", "B")(t, dir)
				wantContent("b", "A")(t, dir)
			},
		},
		{
			name: "link",
			setup: func(t *testing.T, dir string) []string {
				writeFile(t, filepath.Join(dir, "a"), "A")
				return []string{"link", filepath.Join(dir, "a"), filepath.Join(dir, "b")}
			},
			want: "ok linked",
			check: func(t *testing.T, dir string) {
				a, errA := os.Stat(filepath.Join(dir, "a"))
				b, errB := os.Stat(filepath.Join(dir, "b"))
				if errA != nil || errB != nil || !os.SameFile(a, b) {
					t.Errorf("a and b are not the same file: %v, %v", errA, errB)
				}
			},
		},
		{
			name: "symlink",
			setup: func(t *testing.T, dir string) []string {
				return []string{"symlink", "target", filepath.Join(dir, "l")}
			},
			want: "ok linked",
			check: func(t *testing.T, dir string) {
				if got, err := os.Readlink(filepath.Join(dir, "l")); err != nil || got != "target" {
					t.Errorf("readlink l = %q, %v; want target", got, err)
				}
			},
		},
		{
			name:  "mkfifo",
			setup: func(t *testing.T, dir string) []string { return []string{"mkfifo", filepath.Join(dir, "p")} },
			want:  "ok created",
			check: func(t *testing.T, dir string) {
				if fi, err := os.Lstat(filepath.Join(dir, "p")); err != nil || fi.Mode().Type() != os.ModeNamedPipe {
					t.Errorf("p is not a fifo: %v", err)
				}
			},
		},
		{
			name: "list",
			setup: func(t *testing.T, dir string) []string {
				for _, name := range []string{"c", "a", "b"} {
					writeFile(t, filepath.Join(dir, name), "")
				}
				return []string{"list", dir}
			},
			want: "ok a,b,c",
		},
		{
			name:  "list empty",
			setup: func(t *testing.T, dir string) []string { return []string{"list", dir} },
			want:  "ok",
		},
		{
			name: "stat file",
			setup: func(t *testing.T, dir string) []string {
				writeFile(t, filepath.Join(dir, "f"), "12345")
				if err := os.Chmod(filepath.Join(dir, "f"), 0o640); err != nil {
					t.Fatal(err)
				}
				return []string{"stat", filepath.Join(dir, "f")}
			},
			want: "ok type=file size=5 mode=0640",
		},
		{
			name: "stat symlink",
			setup: func(t *testing.T, dir string) []string {
				if err := os.Symlink("abc", filepath.Join(dir, "l")); err != nil {
					t.Fatal(err)
				}
				return []string{"stat", filepath.Join(dir, "l")}
			},
			want: "ok type=symlink size=3 mode=0777",
		},
		{
			name: "opath-reopen",
			setup: func(t *testing.T, dir string) []string {
				writeFile(t, filepath.Join(dir, "f"), "via O_PATH")
				return []string{"opath-reopen", filepath.Join(dir, "f")}
			},
			want: `ok "via O_PATH"`,
		},
		{
			name:     "opath-reopen missing",
			setup:    func(t *testing.T, dir string) []string { return []string{"opath-reopen", filepath.Join(dir, "f")} },
			wantRe:   `^err ENOENT open .*`,
			wantCode: 1,
		},
		{
			name: "opath-openat",
			setup: func(t *testing.T, dir string) []string {
				writeFile(t, filepath.Join(dir, "f"), "via dirfd")
				return []string{"opath-openat", dir, "f"}
			},
			want: `ok "via dirfd"`,
		},
		{
			name: "opath-openat missing",
			setup: func(t *testing.T, dir string) []string {
				return []string{"opath-openat", dir, "f"}
			},
			wantRe:   `^err ENOENT openat dirfd \d+ f: no such file or directory$`,
			wantCode: 1,
		},
		{
			name: "chdir-read",
			setup: func(t *testing.T, dir string) []string {
				writeFile(t, filepath.Join(dir, "f"), "relative")
				return []string{"chdir-read", dir, "f"}
			},
			want: `ok "relative"`,
		},

		// Programs.
		{
			name:  "exec",
			setup: args("exec", "/bin/echo", "hello", "exec"),
			want:  "hello exec",
		},
		{
			name: "exec not executable",
			setup: func(t *testing.T, dir string) []string {
				writeFile(t, filepath.Join(dir, "f"), "#!/bin/sh\n")
				return []string{"exec", filepath.Join(dir, "f")}
			},
			wantRe:   `^err EACCES execve .*: permission denied$`,
			wantCode: 1,
		},
		{
			name:     "exec missing",
			setup:    func(t *testing.T, dir string) []string { return []string{"exec", filepath.Join(dir, "f")} },
			wantRe:   `^err ENOENT execve .*`,
			wantCode: 1,
		},
		{
			name:  "memfd-exec",
			setup: args("memfd-exec", "/bin/echo", "from", "memfd"),
			want:  "from memfd",
		},
		{
			name:  "memfd-exec true",
			setup: func(t *testing.T, dir string) []string { return []string{"memfd-exec", truePath(t)} },
			want:  "",
		},
		{
			name:     "memfd-exec missing",
			setup:    func(t *testing.T, dir string) []string { return []string{"memfd-exec", filepath.Join(dir, "f")} },
			wantRe:   `^err ENOENT open .*`,
			wantCode: 1,
		},

		// Other processes.
		{
			name:   "ptrace",
			setup:  func(t *testing.T, _ string) []string { return []string{"ptrace", startTarget(t, bin)} },
			wantRe: `^ok attached to \d+ and detached$`,
			skip:   ptraceSkip,
		},
		{
			name:   "vm-read",
			setup:  func(t *testing.T, _ string) []string { return []string{"vm-read", startTarget(t, bin)} },
			wantRe: `^ok read 16 bytes at 0x[0-9a-f]+: 7f454c46[0-9a-f]{24}$`, // the ELF header
			skip:   ptraceSkip,
		},
		{
			name:   "proc-mem",
			setup:  func(t *testing.T, _ string) []string { return []string{"proc-mem", startTarget(t, bin)} },
			wantRe: `^ok opened /proc/\d+/mem$`,
			skip:   ptraceSkip,
		},
		{
			name: "pidfd-getfd",
			setup: func(t *testing.T, _ string) []string {
				return []string{"pidfd-getfd", startTarget(t, bin), "0"}
			},
			wantRe: `^ok fd=\d+ target=/dev/null$`,
			skip:   ptraceSkip,
		},
		{
			name:     "ptrace missing process",
			setup:    args("ptrace", "2147483647"),
			want:     "err ESRCH ptrace PTRACE_ATTACH 2147483647: no such process",
			wantCode: 1,
		},
		{
			name:     "vm-read missing process",
			setup:    args("vm-read", "2147483647"),
			want:     "err ENOENT open /proc/2147483647/maps: no such file or directory",
			wantCode: 1,
		},
		{
			name:   "kill 0",
			setup:  func(t *testing.T, _ string) []string { return []string{"kill", startTarget(t, bin), "0"} },
			wantRe: `^ok sent signal 0 to \d+$`,
		},
		{
			name:   "kill TERM",
			setup:  func(t *testing.T, _ string) []string { return []string{"kill", startTarget(t, bin), "TERM"} },
			wantRe: `^ok sent signal 15 to \d+$`,
		},
		{
			name:     "kill missing process",
			setup:    args("kill", "2147483647", "SIGKILL"),
			want:     "err ESRCH kill 2147483647 signal 9: no such process",
			wantCode: 1,
		},

		// Sockets and terminals.
		{
			name: "connect-abstract",
			setup: func(t *testing.T, _ string) []string {
				name := randomName(t)
				listen(t, "@"+name)
				return []string{"connect-abstract", name}
			},
			wantRe: `^ok connected to @testagent-[0-9a-f]+$`,
		},
		{
			name:     "connect-abstract unused",
			setup:    func(t *testing.T, _ string) []string { return []string{"connect-abstract", randomName(t)} },
			wantRe:   `^err ECONNREFUSED connect @testagent-[0-9a-f]+: connection refused$`,
			wantCode: 1,
		},
		{
			name: "connect-unix",
			setup: func(t *testing.T, dir string) []string {
				listen(t, filepath.Join(dir, "sock"))
				return []string{"connect-unix", filepath.Join(dir, "sock")}
			},
			wantRe: `^ok connected to /.*/sock$`,
		},
		{
			name:     "connect-unix missing",
			setup:    func(t *testing.T, dir string) []string { return []string{"connect-unix", filepath.Join(dir, "sock")} },
			wantRe:   `^err ENOENT connect /.*/sock: no such file or directory$`,
			wantCode: 1,
		},
		{
			name:     "tiocsti on /dev/null",
			setup:    args("tiocsti", "0", "x"),
			want:     "err ENOTTY ioctl TIOCSTI fd 0 after 0 of 1 bytes: inappropriate ioctl for device",
			wantCode: 1,
		},
		{
			// runAgent starts the agent in a new session, so it has no
			// controlling terminal.
			name:     "write-ctty without a terminal",
			setup:    args("write-ctty", "x"),
			want:     "err ENXIO open /dev/tty: no such device or address",
			wantCode: 1,
		},

		// Namespaces.
		{
			name:  "unshare-ns",
			setup: args("unshare-ns"),
			want:  "ok unshared user and mount namespaces",
			skip:  usernsSkip,
		},
		{
			name: "mount-tmpfs",
			setup: func(t *testing.T, dir string) []string {
				writeFile(t, filepath.Join(dir, "f"), "host")
				return []string{"mount-tmpfs", dir}
			},
			wantRe: `^ok mounted tmpfs on /.* in a new user and mount namespace$`,
			// The mount died with the agent's namespace.
			check: wantContent("f", "host"),
			skip:  usernsSkip,
		},
		{
			name:     "mount-tmpfs missing",
			setup:    func(t *testing.T, dir string) []string { return []string{"mount-tmpfs", filepath.Join(dir, "d")} },
			wantRe:   `^err ENOENT mount: tmpfs on /.*/d: no such file or directory$`,
			wantCode: 1,
			skip:     usernsSkip,
		},

		// Process state and helpers.
		{
			name:   "status",
			setup:  args("status"),
			wantRe: `^ok NoNewPrivs:[01];Seccomp:[0-2];CapEff:[0-9a-f]{16}$`,
		},
		{
			name:  "sleep",
			setup: args("sleep", "1"),
			want:  "ok slept 1ms",
		},
		{
			name:   "timerslack",
			setup:  args("timerslack"),
			wantRe: `^ok current=[0-9]+ default=[0-9]+$`,
		},
		{
			name: "wait-file present",
			setup: func(t *testing.T, dir string) []string {
				writeFile(t, filepath.Join(dir, "f"), "done\n")
				return []string{"wait-file", filepath.Join(dir, "f"), "1000"}
			},
			want: `ok "done\n"`,
		},
		{
			name: "wait-file empty",
			setup: func(t *testing.T, dir string) []string {
				writeFile(t, filepath.Join(dir, "f"), "")
				return []string{"wait-file", filepath.Join(dir, "f"), "30"}
			},
			wantRe:   `^err ETIMEDOUT wait-file /.*/f: still empty after 30ms$`,
			wantCode: 1,
		},
		{
			name:     "wait-file missing",
			setup:    func(t *testing.T, dir string) []string { return []string{"wait-file", filepath.Join(dir, "f"), "30"} },
			wantRe:   `^err ETIMEDOUT wait-file /.*/f: still missing after 30ms$`,
			wantCode: 1,
		},

		// Usage errors: nothing on stdout, exit status 2.
		{name: "no operation", setup: args(), wantCode: 2},
		{name: "unknown operation", setup: args("frobnicate"), wantCode: 2},
		{name: "too few arguments", setup: args("read"), wantCode: 2},
		{name: "too many arguments", setup: args("read", "a", "b"), wantCode: 2},
		{name: "bad number", setup: args("truncate", "f", "ten"), wantCode: 2},
		{name: "bad signal", setup: args("kill", "1", "NOSUCHSIG"), wantCode: 2},
		{name: "connect-unix with @", setup: args("connect-unix", "@x"), wantCode: 2},
		{name: "daemon unknown operation", setup: args("daemon", "out", "frobnicate"), wantCode: 2},
		{name: "daemon too few arguments", setup: args("daemon", "out", "read"), wantCode: 2},
		{name: "cgroup-spawn unknown operation", setup: args("cgroup-spawn", "/", "out", "frobnicate"), wantCode: 2},
		{name: "cgroup-spawn too few arguments", setup: args("cgroup-spawn", "/", "out"), wantCode: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.skip != nil {
				if reason := tc.skip(); reason != "" {
					// These are the controls the kernel suites' attacks
					// rely on: a declared machine must allow them.
					if os.Getenv("AGENT_LAUNCHER_EXPECT_LANDLOCK_ABI") != "" {
						t.Fatalf("%s, and AGENT_LAUNCHER_EXPECT_LANDLOCK_ABI is set", reason)
					}
					t.Skip(reason)
				}
			}
			dir := t.TempDir()
			res := runAgent(t, bin, tc.setup(t, dir)...)
			if res.code != tc.wantCode {
				t.Fatalf("exit status %d, want %d; stdout %q, stderr %q", res.code, tc.wantCode, res.stdout, res.stderr)
			}
			if tc.wantCode == exitUsage {
				if res.stdout != "" || res.stderr == "" {
					t.Errorf("usage error: stdout %q, stderr %q; want only stderr", res.stdout, res.stderr)
				}
				return
			}
			line := oneResultLine(t, res.stdout)
			if tc.wantRe != "" {
				if !regexp.MustCompile(tc.wantRe).MatchString(line) {
					t.Errorf("output %q does not match %q", line, tc.wantRe)
				}
			} else if line != tc.want {
				t.Errorf("output %q, want %q", line, tc.want)
			}
			if tc.check != nil {
				tc.check(t, dir)
			}
		})
	}

	// runAgent uses setsid, so the agent leads its session and group.
	t.Run("pid", func(t *testing.T) {
		t.Parallel()
		res := runAgent(t, bin, "pid")
		m := regexp.MustCompile(`^ok pid=(\d+) ppid=(\d+) sid=(\d+) pgid=(\d+)$`).FindStringSubmatch(oneResultLine(t, res.stdout))
		if m == nil {
			t.Fatalf("output %q", res.stdout)
		}
		if want := strconv.Itoa(res.pid); m[1] != want || m[3] != want || m[4] != want {
			t.Errorf("output %q, want pid, sid and pgid %s", res.stdout, want)
		}
		if want := strconv.Itoa(os.Getpid()); m[2] != want {
			t.Errorf("output %q, want ppid %s", res.stdout, want)
		}
	})

	t.Run("daemon", func(t *testing.T) {
		t.Parallel()
		out := filepath.Join(t.TempDir(), "out")
		top := runAgent(t, bin, "daemon", out, "pid")
		if line := oneResultLine(t, top.stdout); line != "ok started" {
			t.Fatalf("daemon: output %q (stderr %q), want ok started", line, top.stderr)
		}
		res := runAgent(t, bin, "wait-file", out, "10000")
		line := oneResultLine(t, res.stdout)
		m := regexp.MustCompile(`^ok "ok pid=(\d+) ppid=(\d+) sid=(\d+) pgid=(\d+)\\n"$`).FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("wait-file: output %q", line)
		}
		pid, ppid, sid, pgid := m[1], m[2], m[3], m[4]
		topPid := strconv.Itoa(top.pid)
		switch {
		case sid == topPid:
			t.Errorf("grandchild %s: still in the top stage's session %s", line, topPid)
		case sid == pid:
			t.Errorf("grandchild %s: leads its session, want the middle stage to", line)
		case pgid != sid:
			t.Errorf("grandchild %s: want the middle stage's process group", line)
		case ppid == sid || ppid == topPid:
			t.Errorf("grandchild %s: parent still alive, want it reparented", line)
		}
	})

	t.Run("daemon does not wait", func(t *testing.T) {
		t.Parallel()
		out := filepath.Join(t.TempDir(), "out")
		start := time.Now()
		top := runAgent(t, bin, "daemon", out, "sleep", "2000")
		elapsed := time.Since(start)
		if line := oneResultLine(t, top.stdout); line != "ok started" {
			t.Fatalf("daemon: output %q (stderr %q), want ok started", line, top.stderr)
		}
		// The grandchild needs at least 2.3 s; the top stage returns when
		// the middle stage has started it.
		if elapsed > 1500*time.Millisecond {
			t.Errorf("daemon took %v, want it not to wait for the grandchild", elapsed)
		}
		if _, err := os.Lstat(out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("OUTFILE exists right after daemon returned (%v), want it written after the grandchild's sleep", err)
		}
		res := runAgent(t, bin, "wait-file", out, "10000")
		if line, want := oneResultLine(t, res.stdout), `ok "ok slept 2000ms\n"`; line != want {
			t.Errorf("wait-file: output %q, want %q", line, want)
		}
	})

	t.Run("daemon exec", func(t *testing.T) {
		t.Parallel()
		out := filepath.Join(t.TempDir(), "out")
		top := runAgent(t, bin, "daemon", out, "exec", "/bin/echo", "from", "daemon")
		if line := oneResultLine(t, top.stdout); line != "ok started" {
			t.Fatalf("daemon: output %q (stderr %q), want ok started", line, top.stderr)
		}
		res := runAgent(t, bin, "wait-file", out, "10000")
		if line, want := oneResultLine(t, res.stdout), `ok "from daemon\n"`; line != want {
			t.Errorf("wait-file: output %q, want %q", line, want)
		}
	})

	t.Run("daemon error result", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		out := filepath.Join(dir, "out")
		top := runAgent(t, bin, "daemon", out, "read", filepath.Join(dir, "missing"))
		if line := oneResultLine(t, top.stdout); line != "ok started" {
			t.Fatalf("daemon: output %q (stderr %q), want ok started", line, top.stderr)
		}
		res := runAgent(t, bin, "wait-file", out, "10000")
		re := regexp.MustCompile(`^ok "err ENOENT open /.*/missing: no such file or directory\\n"$`)
		if line := oneResultLine(t, res.stdout); !re.MatchString(line) {
			t.Errorf("wait-file: output %q, want it to match %q", line, re)
		}
	})
}

func TestResultLine(t *testing.T) {
	tests := []struct {
		name   string
		detail string
		err    error
		want   string
	}{
		{"ok", "created", nil, "ok created"},
		{"ok empty", "", nil, "ok"},
		{"ok multiline", "a\nb\r", nil, `ok a\nb\r`},
		{"errno", "", &os.PathError{Op: "open", Path: "/x", Err: unix.EACCES}, "err EACCES open /x: permission denied"},
		{"wrapped errno", "", fmt.Errorf("mount: tmpfs on /x: %w", unix.EPERM), "err EPERM mount: tmpfs on /x: operation not permitted"},
		{"not an errno", "", errors.New("bad\nthing"), `err EOTHER bad\nthing`},
		{"unnamed errno", "", unix.Errno(4000), "err EOTHER errno 4000"},
		{"relayed", "", &relayedError{name: "EAGAIN", msg: "daemon: x"}, "err EAGAIN daemon: x"},
		{"timeout", "", &timeoutError{"wait-file f: still missing after 1ms"}, "err ETIMEDOUT wait-file f: still missing after 1ms"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := resultLine(tc.detail, tc.err); got != tc.want {
				t.Errorf("resultLine(%q, %v) = %q, want %q", tc.detail, tc.err, got, tc.want)
			}
		})
	}
}

func TestParseSignal(t *testing.T) {
	tests := []struct {
		in      string
		want    unix.Signal
		wantErr bool
	}{
		{in: "0", want: 0},
		{in: "9", want: unix.SIGKILL},
		{in: "STOP", want: unix.SIGSTOP},
		{in: "SIGTERM", want: unix.SIGTERM},
		{in: "term", want: unix.SIGTERM},
		{in: "-1", wantErr: true},
		{in: "NOPE", wantErr: true},
	}
	for _, tc := range tests {
		got, err := parseSignal(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("parseSignal(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestFirstReadableMapping(t *testing.T) {
	tests := []struct {
		name    string
		maps    string
		want    uintptr
		wantErr bool
	}{
		{
			name: "first readable",
			maps: "00400000-00401000 ---p 00000000 00:00 0\n" +
				"00401000-00500000 r-xp 00001000 fd:01 123 /bin/x\n",
			want: 0x401000,
		},
		{
			name: "vvar skipped",
			maps: "7ffd1000-7ffd5000 r--p 00000000 00:00 0 [vvar]\n" +
				"7ffd5000-7ffd7000 r-xp 00000000 00:00 0 [vdso]\n",
			want: 0x7ffd5000,
		},
		{name: "none", maps: "00400000-00401000 ---p 00000000 00:00 0\n", wantErr: true},
		{name: "empty", maps: "", wantErr: true},
		{name: "malformed", maps: "zz r--p\n", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := firstReadableMapping([]byte(tc.maps))
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("firstReadableMapping = %#x, %v; want %#x, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// buildAgent builds the agent with CGO_ENABLED=0 into a temporary directory
// and returns the binary's path.
func buildAgent(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("AGENT_LAUNCHER_TEST_BIN_DIR"); dir != "" {
		// Prebuilt (the unprivileged and VM runs, which cannot build).
		return filepath.Join(dir, "testagent")
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the agent's source")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("building the agent needs the go command in PATH: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "testagent")
	// -buildvcs=false: the tree may belong to another user, which git
	// refuses to inspect.
	cmd := exec.Command(goTool, "build", "-buildvcs=false", "-o", bin, ".")
	cmd.Dir = filepath.Dir(file)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

type agentResult struct {
	stdout, stderr string
	code           int
	pid            int
}

// runAgent runs the agent with args in a new session, with stdin /dev/null,
// and returns its output and exit status.
func runAgent(t *testing.T, bin string, args ...string) agentResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), agentTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err := cmd.Run()
	res := agentResult{stdout: stdout.String(), stderr: stderr.String()}
	if cmd.Process != nil {
		res.pid = cmd.Process.Pid
	}
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		res.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("testagent %q: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("testagent %q: no result within %v", args, agentTimeout)
	}
	return res
}

// oneResultLine checks that out is exactly one line and returns it without
// the newline.
func oneResultLine(t *testing.T, out string) string {
	t.Helper()
	line, ok := strings.CutSuffix(out, "\n")
	if out == "" {
		// memfd-exec of true prints nothing.
		return ""
	}
	if !ok || strings.Contains(line, "\n") {
		t.Fatalf("output %q is not one line", out)
	}
	return line
}

// startTarget starts a sleeping agent for the process operations to act on
// and returns its pid. It is killed when the test ends.
func startTarget(t *testing.T, bin string) string {
	t.Helper()
	cmd := exec.Command(bin, "sleep", "60000")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return strconv.Itoa(cmd.Process.Pid)
}

// ptraceSkip explains why this process cannot ptrace a sibling here, or
// returns "". Only Yama can forbid it outside a sandbox; that is a checked
// setting, not a guess.
func ptraceSkip() string {
	data, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope")
	if err != nil {
		return ""
	}
	switch scope := strings.TrimSpace(string(data)); {
	case scope == "3":
		return "kernel.yama.ptrace_scope=3 forbids all ptrace attaches"
	case scope != "0" && os.Geteuid() != 0:
		return "kernel.yama.ptrace_scope=" + scope + " forbids attaching to a non-descendant without CAP_SYS_PTRACE"
	}
	return ""
}

// usernsSkip explains why this process cannot create a user namespace here,
// or returns "". It checks the settings that disable user namespaces; any
// other refusal fails the test.
func usernsSkip() string {
	if sysctl("user/max_user_namespaces") == "0" {
		return "user.max_user_namespaces=0"
	}
	if os.Geteuid() == 0 {
		return ""
	}
	if sysctl("kernel/unprivileged_userns_clone") == "0" {
		return "kernel.unprivileged_userns_clone=0"
	}
	if sysctl("kernel/apparmor_restrict_unprivileged_userns") == "1" {
		return "kernel.apparmor_restrict_unprivileged_userns=1"
	}
	return ""
}

func sysctl(name string) string {
	data, err := os.ReadFile("/proc/sys/" + name)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

func randomName(t *testing.T) string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "testagent-" + hex.EncodeToString(b)
}

// listen listens on the unix socket address (abstract if it begins with @)
// until the test ends. Connections wait in the backlog; none is accepted.
func listen(t *testing.T, addr string) {
	t.Helper()
	l, err := net.Listen("unix", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
}

func truePath(t *testing.T) string {
	for _, p := range []string{"/bin/true", "/usr/bin/true"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatal("no /bin/true or /usr/bin/true")
	return ""
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, path string) {
	t.Helper()
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
}

func wantContent(name, want string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		t.Helper()
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", name, got, err, want)
		}
	}
}

func wantMissing(name string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		t.Helper()
		if _, err := os.Lstat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still exists (%v)", name, err)
		}
	}
}
