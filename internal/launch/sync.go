// Package launch starts a confined agent: the supervisor side of `run`, and
// the init stage, the launcher's own binary re-executed to restrict itself
// and exec the agent (DESIGN.md section 5). The init stage is C
// (initstage.c), run by a constructor before the Go runtime starts
// (initstage_cgo.go): a process without a Go runtime starts in a
// millisecond instead of eight here, and is single-threaded until the
// agent's execve. The supervisor starts it with a vfork, which shares the
// supervisor's address space instead of copying it: with a view, into the
// session's new namespaces, as their PID 1 (al_spawn_view).
//
// # The sync protocol
//
// The supervisor and the init stage talk over a stream socketpair, the init
// stage's end at fd 3. Each message is a frame: a 4-byte big-endian length,
// then the message, binary: "config" as initConfig.encode writes it
// (configMagic, then its fields), every other one as report.encode does
// (its type, then its fields). In order:
//
//	step  supervisor                          init stage (initstage.c)
//	----  ----------------------------------  -------------------------------------------
//	 1    start the init stage (vfork):
//	      /proc/self/exe InitArg [ViewArg MASK],
//	      fd 3 = socket, setsid, Pdeathsig SIGKILL,
//	      from a thread that outlives it: with
//	      a view, a C thread of its own that
//	      waits for it (al_spawn_view_thread),
//	      else a locked OS thread. With a view
//	      (al_spawn_view): one clone(CLONE_VM|
//	      CLONE_VFORK) into new user, mount, PID
//	      and IPC namespaces, whose child maps its
//	      uid and gid 1:1 (setgroups denied),
//	      keeps its capabilities across the
//	      execve (ambient) and keeps signals
//	      blocked (all a program may); MASK is the
//	      supervisor's initial signal mask, in
//	      hex (the agent's). A system that
//	      refuses the namespaces (the clone, the
//	      maps) or PID 1's capabilities gives a
//	      *ViewError, and run starts again
//	      without a view. Without a view, as a
//	      child subreaper, and in a cgroup of
//	      its own (clone3 with
//	      CLONE_INTO_CGROUP) where it can
//	      make one (cgroup_linux.go). Either
//	      way with the timer slack run was
//	      started with (the supervisor's own is
//	      at least 1 ms: initstage.c)
//	 2                                        with a view, it is the session's PID 1: it
//	                                          refuses to run otherwise (getpid() != 1)
//	                                          or with a malformed MASK, and waits for
//	                                          "config" while the supervisor still loads
//	                                          and plans
//	 3    -> "config" (plan, view, argv, env; read by PID 1 (with a view): mark
//	      the view checked, the binds sorted  every fd but 0-2 close-on-exec; a view
//	      by path)                            only with ViewArg, none without. PID 1
//	                                          builds the view: MS_REC|MS_PRIVATE on /,
//	                                          private tmpfs, kept paths bound back,
//	                                          sockets hidden, the agent's cache bound at
//	                                          its target and the caches directory
//	                                          sealed, protected paths mounted over
//	                                          themselves (read-only or pinned) at every
//	                                          place a mount exposes them, a fresh /proc,
//	                                          the cwd entered again (mounts are
//	                                          impossible after Landlock); then forks the
//	                                          process that becomes the agent, which
//	                                          takes steps 4-7, and stays PID 1: reap,
//	                                          pass TERM, USR1, USR2 on, exit with the
//	                                          agent's status, which ends every process
//	                                          of the session
//	 4                                        Landlock: no_new_privs, restrict self with
//	                                          the plan (view rules checked against the
//	                                          view's filesystems); with a view, or
//	                                          holding any capability without one, drop
//	                                          every capability and become undumpable;
//	                                          join a new, empty session keyring;
//	                                          assert no_new_privs and no capabilities;
//	                                          canary: opening a denied path must fail
//	                                          with EACCES, else abort
//	 5                                        [seccomp, a later release: load the filter,
//	                                          <- "listener" with the fd (SCM_RIGHTS); from
//	                                          here on only untrapped syscalls]
//	 6    -> "go", right after "config", once <- "ready"
//	      what precedes the agent is done
//	      (Session.BeforeStart, watchers);
//	      not waiting for "ready"
//	 7    (the start-up line, on "ready")     read "go"; execve(agent); on failure
//	                                          <- "exec-error" and exit 126 (127: not
//	                                          found)
//	 8    EOF on the socket (close-on-exec;
//	      the others closed theirs): the
//	      agent runs; wait, forward signals,
//	      pass its status through
//
// Any failure in steps 2-5 is reported as <- "error" and the init stage
// exits 125 without running the agent. An "error" with "view" set came
// from the mounts of step 3, and the supervisor may start again without a
// view; one with "stale" set found a path of the plan (a Landlock rule's,
// a protected path's) replaced since it was planned, and run plans again
// (StaleError). The supervisor looks for an answer already there as it
// sends "config", and otherwise reads it after its own work before "go"
// (step 6). It kills the init stage if "config" cannot be written within
// ReadyTimeout, or "ready" does not arrive within ReadyTimeout of "go"
// (the agent, if it had started, ends with it).
// Frames are at most maxFrame bytes.
package launch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/agent-launcher/agent-launcher/landlock"
)

// InitArg is the first argument that makes the launcher's binary run the
// init stage.
const InitArg = "__agent-launcher-init"

// ViewArg, the init stage's second argument, says that the session has a
// private view: the init stage is the PID 1 of the session's namespaces
// (steps 1 and 2 of the sync protocol); the signal mask follows it.
const ViewArg = "view"

// ReadyTimeout bounds each wait for the init stage: the write of
// "config", and "ready" from the write of "go" on.
const ReadyTimeout = 30 * time.Second

const maxFrame = 64 << 20

// Message types.
const (
	msgConfig    = "config"
	msgReady     = "ready"
	msgGo        = "go"
	msgError     = "error"
	msgExecError = "exec-error"
	msgStarted   = "started"
)

// initConfig is the "config" message: everything the init stage needs,
// in the binary form encode writes and initstage.c decodes (its paths,
// arguments and environment are bytes that need not be UTF-8).
type initConfig struct {
	// Confined is false for an unconfined session (--allow-unconfined on
	// a kernel without Landlock); the Landlock fields are then empty.
	Confined bool
	Rules    []landlock.Rule
	Handled  landlock.Access
	Scoped   landlock.Scope
	Canary   string
	// Path is the program, resolved by the supervisor; Argv its arguments.
	Path string
	Argv []string
	Env  []string
	// View is the private view to build (nil: none; the init stage then
	// execs the agent itself instead of staying as PID 1), Cwd the
	// agent's working directory, entered again inside it.
	View *landlock.View
	Cwd  string
	// Binds are the mounts over protected paths the view makes, with the
	// plan's view only.
	Binds []landlock.Bind
}

// newConfig is what the init stage needs of pl (nil: unconfined).
// The binds are sorted by path: the init stage protects parents first (a
// pinned .git is itself a mount that exposes .git/config).
func newConfig(pl *landlock.Plan, path string, argv, env []string) initConfig {
	cfg := initConfig{Path: path, Argv: argv, Env: env}
	if pl != nil {
		cfg.Confined = true
		cfg.Handled, cfg.Scoped, cfg.Canary = pl.Handled, pl.Scoped, pl.Canary
		cfg.Rules = pl.Rules
		cfg.Binds = slices.SortedFunc(slices.Values(pl.Binds), func(a, b landlock.Bind) int { return strings.Compare(a.Path, b.Path) })
	}
	return cfg
}

// configMagic opens a "config" frame: its format and version.
const configMagic = "agent-launcher config 1\x00"

// Flags of a rule or a bind in a "config" frame.
const (
	flagDir = 1 << iota
	flagView
	flagReadOnly
	flagNoExec
)

// encode returns cfg as a "config" frame's payload: configMagic, then
// every field in order, numbers as uvarints, a string as its length and
// its bytes, a list as its length and its items.
func (cfg *initConfig) encode() []byte {
	b := []byte(configMagic)
	num := func(x uint64) { b = binary.AppendUvarint(b, x) }
	str := func(s string) { num(uint64(len(s))); b = append(b, s...) }
	strs := func(ss []string) {
		num(uint64(len(ss)))
		for _, s := range ss {
			str(s)
		}
	}
	flag := func(on bool, f uint64) uint64 {
		if on {
			return f
		}
		return 0
	}
	num(flag(cfg.Confined, 1))
	num(uint64(cfg.Handled))
	num(uint64(cfg.Scoped))
	str(cfg.Canary)
	num(uint64(len(cfg.Rules)))
	for _, r := range cfg.Rules {
		str(r.Path)
		num(flag(r.Dir, flagDir) | flag(r.View, flagView))
		num(uint64(r.Access))
		num(r.Dev)
		num(r.Ino)
	}
	str(cfg.Path)
	strs(cfg.Argv)
	strs(cfg.Env)
	if v := cfg.View; v == nil {
		num(0)
	} else {
		num(1)
		for _, list := range [][]string{v.Private, v.Hidden, v.Masked, v.Fresh, v.Keep} {
			strs(list)
		}
		num(uint64(len(v.Caches)))
		for _, c := range v.Caches {
			str(c.Source)
			str(c.Target)
			str(c.Seal)
		}
	}
	str(cfg.Cwd)
	num(uint64(len(cfg.Binds)))
	for _, bd := range cfg.Binds {
		str(bd.Path)
		num(flag(bd.Dir, flagDir) | flag(bd.ReadOnly, flagReadOnly) | flag(bd.NoExec, flagNoExec))
		num(bd.Dev)
		num(bd.Ino)
	}
	return b
}

// report is every message but "config": those of the init stage, and "go".
type report struct {
	Type string
	// Msg is one sentence for the operator ("error", "exec-error").
	Msg string
	// Errno is execve's error ("exec-error").
	Errno int
	// Rules counts the Landlock rules in force ("ready").
	Rules int
	// View is set on an "error" that building the private view caused
	// and a start without it avoids; Stale on one a plan made again
	// avoids: a path the plan names was replaced since it was planned.
	// On the wire: one number, 0, 1 (View) or 2 (Stale).
	View, Stale bool
	// Pid is the agent's process id in the session's PID namespace
	// ("started").
	Pid int
}

// encode returns r as a frame's payload: its type, message, errno,
// rules, pid (a string as its length and bytes, numbers as uvarints),
// then 1 when View is set, else 0.
func (r report) encode() []byte {
	var b []byte
	str := func(s string) { b = binary.AppendUvarint(b, uint64(len(s))); b = append(b, s...) }
	str(r.Type)
	str(r.Msg)
	for _, n := range []int{r.Errno, r.Rules, r.Pid} {
		b = binary.AppendUvarint(b, uint64(n))
	}
	switch {
	case r.View:
		return append(b, 1)
	case r.Stale:
		return append(b, 2)
	}
	return append(b, 0)
}

// decode sets r from a payload report.encode wrote; anything else is an
// error.
func (r *report) decode(b []byte) error {
	bad := false
	num := func() uint64 {
		x, n := binary.Uvarint(b)
		// A varint of more than one byte that ends in 0 has a shorter
		// form: each value has one encoding.
		if n <= 0 || x > math.MaxInt32 || n > 1 && b[n-1] == 0 {
			bad, b = true, nil
			return 0
		}
		b = b[n:]
		return x
	}
	str := func() string {
		n := num()
		if n > uint64(len(b)) {
			bad, b = true, nil
			return ""
		}
		s := string(b[:n])
		b = b[n:]
		return s
	}
	var out report
	out.Type, out.Msg = str(), str()
	out.Errno, out.Rules, out.Pid = int(num()), int(num()), int(num())
	cause := num()
	if bad || cause > 2 || len(b) != 0 || out.Type == "" {
		return errors.New("sync: malformed message")
	}
	out.View, out.Stale = cause == 1, cause == 2
	*r = out
	return nil
}

// writeRawFrame writes b as one frame.
func writeRawFrame(w io.Writer, b []byte) error {
	if len(b) > maxFrame {
		return fmt.Errorf("sync: frame of %d bytes exceeds %d", len(b), maxFrame)
	}
	buf := make([]byte, 4+len(b))
	binary.BigEndian.PutUint32(buf, uint32(len(b)))
	copy(buf[4:], b)
	_, err := w.Write(buf)
	return err
}

// writeFrame writes r as one frame.
func writeFrame(w io.Writer, r report) error {
	return writeRawFrame(w, r.encode())
}

// errEOF is a clean end of the stream before a frame.
var errEOF = errors.New("sync: end of stream")

// readFrame reads one frame into rep.
func readFrame(r io.Reader, rep *report) error {
	b, err := readRawFrame(r)
	if err != nil {
		return err
	}
	return rep.decode(b)
}

// readRawFrame reads one frame's payload.
func readRawFrame(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errEOF
		}
		return nil, fmt.Errorf("sync: %w", err)
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxFrame {
		return nil, fmt.Errorf("sync: frame of %d bytes exceeds %d", n, maxFrame)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("sync: %w", err)
	}
	return b, nil
}
