// Package launch starts a confined agent: the supervisor side of `run`, and
// the init stage, the launcher's own binary re-executed to restrict itself
// and exec the agent (DESIGN.md section 5).
//
// # The sync protocol
//
// The supervisor and the init stage talk over a stream socketpair, the init
// stage's end at fd 3. Each message is a frame: a 4-byte big-endian length,
// then a JSON object with a "type" field. In order:
//
//	step  supervisor                          init stage
//	----  ----------------------------------  -------------------------------------------
//	 1    start the init stage: /proc/self/exe
//	      InitArg, fd 3 = socket, setsid,
//	      Pdeathsig SIGKILL, from a locked
//	      OS thread that outlives it; with a
//	      view, in new user, mount and PID
//	      namespaces, uid and gid mapped 1:1
//	      (os/exec writes the maps); without
//	      one, as a child subreaper, and in a
//	      cgroup of its own (clone3 with
//	      CLONE_INTO_CGROUP) where it can
//	      make one (cgroup_linux.go)
//	 2    -> "config" (plan, view, argv, env) lock the OS thread; mark every fd but 0-2
//	                                          close-on-exec
//	 3                                        with a view: build it (view_linux.go):
//	                                          MS_REC|MS_PRIVATE on /, private tmpfs,
//	                                          kept paths bound back, sockets hidden,
//	                                          the agent's cache bound at its target and
//	                                          the caches directory sealed,
//	                                          protected paths mounted over themselves
//	                                          (read-only or pinned) at every place a
//	                                          mount exposes them, a fresh /proc, the
//	                                          cwd entered again; mounts are
//	                                          impossible after Landlock
//	 4                                        Landlock: no_new_privs, restrict self with
//	                                          the plan (view rules checked against the
//	                                          view's filesystems); with a view, drop
//	                                          every capability and become undumpable;
//	                                          assert no_new_privs and no capabilities;
//	                                          canary: opening a denied path must fail
//	                                          with EACCES, else abort
//	 5                                        [seccomp, a later release: load the filter,
//	                                          <- "listener" with the fd (SCM_RIGHTS); from
//	                                          here on only untrapped syscalls]
//	 6    (start watchers, signal forwarding) <- "ready"
//	 7    -> "go"                             without a view: execve(agent); on failure
//	                                          <- "exec-error" and exit 126 (127: not found)
//	                                          with a view: fork and exec the agent as a
//	                                          child; <- "started" or "exec-error"; stay
//	                                          PID 1: reap, pass TERM, USR1, USR2 on, exit
//	                                          with the agent's status, which ends every
//	                                          process of the session
//	 8    EOF on the socket (close-on-exec,
//	      or closed by PID 1): the agent
//	      runs; wait, forward signals, pass
//	      its status through
//
// Any failure in steps 2-5 is reported as <- "error" and the init stage exits
// 125 without running the agent; an "error" with "view" set came from the
// namespaces or mounts of step 3, and the supervisor may start again
// without a view. The supervisor kills the init stage if
// "ready" does not arrive within ReadyTimeout. Frames are at most
// maxFrame bytes.
package launch

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/agent-launcher/agent-launcher/landlock"
)

// InitArg is the first argument that makes the launcher's binary run the
// init stage.
const InitArg = "__agent-launcher-init"

// ReadyTimeout bounds steps 2-6.
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

// initConfig is the "config" message: everything the init stage needs.
type initConfig struct {
	Type string `json:"type"`
	// Confined is false for an unconfined session (--allow-unconfined on
	// a kernel without Landlock); the Landlock fields are then empty.
	Confined bool       `json:"confined"`
	Rules    []wireRule `json:"rules"`
	Handled  uint64     `json:"handled"`
	Scoped   uint64     `json:"scoped"`
	// Paths, arguments and the environment are bytes, which JSON carries
	// as base64: a string field would replace bytes that are not UTF-8.
	Canary []byte `json:"canary"`
	// Path is the program, resolved by the supervisor; Argv its arguments.
	Path []byte   `json:"path"`
	Argv [][]byte `json:"argv"`
	Env  [][]byte `json:"env"`
	// View is the private view to build (nil: none; the init stage then
	// execs the agent itself instead of staying as PID 1), Cwd the
	// agent's working directory, entered again inside it.
	View *landlock.View `json:"view,omitempty"`
	Cwd  []byte         `json:"cwd,omitempty"`
	// Binds are the mounts over protected paths the view makes
	// (landlock.Bind), with the plan's view only.
	Binds []wireBind `json:"binds,omitempty"`
}

// wireBind is a landlock.Bind with its path as bytes.
type wireBind struct {
	Path     []byte `json:"path"`
	Dir      bool   `json:"dir"`
	ReadOnly bool   `json:"read_only"`
	NoExec   bool   `json:"no_exec"`
	Dev      uint64 `json:"dev"`
	Ino      uint64 `json:"ino"`
}

// wireRule is a landlock.Rule with its access as a number.
type wireRule struct {
	Path   []byte `json:"path"`
	Dir    bool   `json:"dir"`
	Access uint64 `json:"access"`
	Dev    uint64 `json:"dev"`
	Ino    uint64 `json:"ino"`
	View   bool   `json:"view,omitempty"`
}

// newConfig encodes what the init stage needs of pl (nil: unconfined).
func newConfig(pl *landlock.Plan, path string, argv, env []string) initConfig {
	cfg := initConfig{Type: msgConfig, Path: []byte(path), Argv: toBytes(argv), Env: toBytes(env)}
	if pl != nil {
		cfg.Confined = true
		cfg.Handled, cfg.Scoped, cfg.Canary = uint64(pl.Handled), uint64(pl.Scoped), []byte(pl.Canary)
		for _, r := range pl.Rules {
			cfg.Rules = append(cfg.Rules, wireRule{[]byte(r.Path), r.Dir, uint64(r.Access), r.Dev, r.Ino, r.View})
		}
		for _, b := range pl.Binds {
			cfg.Binds = append(cfg.Binds, wireBind{[]byte(b.Path), b.Dir, b.ReadOnly, b.NoExec, b.Dev, b.Ino})
		}
	}
	return cfg
}

// binds decodes the mounts over protected paths.
func (cfg *initConfig) binds() []landlock.Bind {
	var out []landlock.Bind
	for _, b := range cfg.Binds {
		out = append(out, landlock.Bind{Path: string(b.Path), Dir: b.Dir, ReadOnly: b.ReadOnly, NoExec: b.NoExec, Dev: b.Dev, Ino: b.Ino})
	}
	return out
}

// plan decodes the Landlock part of cfg.
func (cfg *initConfig) plan() *landlock.Plan {
	pl := &landlock.Plan{Handled: landlock.Access(cfg.Handled), Scoped: landlock.Scope(cfg.Scoped), Canary: string(cfg.Canary)}
	for _, r := range cfg.Rules {
		pl.Rules = append(pl.Rules, landlock.Rule{Path: string(r.Path), Dir: r.Dir, Access: landlock.Access(r.Access), Dev: r.Dev, Ino: r.Ino, View: r.View})
	}
	return pl
}

// report is every message from the init stage.
type report struct {
	Type string `json:"type"`
	// Msg is one sentence for the operator ("error", "exec-error").
	Msg string `json:"msg,omitempty"`
	// Errno is execve's error ("exec-error").
	Errno int `json:"errno,omitempty"`
	// Rules counts the Landlock rules in force ("ready").
	Rules int `json:"rules,omitempty"`
	// View is set on an "error" that building the private view caused
	// and a start without it avoids.
	View bool `json:"view,omitempty"`
	// Pid is the agent's process id in the session's PID namespace
	// ("started").
	Pid int `json:"pid,omitempty"`
}

// writeFrame writes v as one frame.
func writeFrame(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(b) > maxFrame {
		return fmt.Errorf("sync: frame of %d bytes exceeds %d", len(b), maxFrame)
	}
	buf := make([]byte, 4+len(b))
	binary.BigEndian.PutUint32(buf, uint32(len(b)))
	copy(buf[4:], b)
	_, err = w.Write(buf)
	return err
}

// errEOF is a clean end of the stream before a frame.
var errEOF = errors.New("sync: end of stream")

// readFrame reads one frame into v.
func readFrame(r io.Reader, v any) error {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return errEOF
		}
		return fmt.Errorf("sync: %w", err)
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxFrame {
		return fmt.Errorf("sync: frame of %d bytes exceeds %d", n, maxFrame)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	return nil
}

func toBytes(ss []string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

func toStrings(bs [][]byte) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = string(b)
	}
	return out
}
