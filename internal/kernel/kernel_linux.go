package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// probeEnv selects the probe a re-executed child runs; see the package
// documentation for the protocol.
const probeEnv = "AGENT_LAUNCHER_KERNEL_PROBE"

// The probes a child can run, as values of probeEnv.
const (
	probeSeccomp = "seccomp"
	probeUserNS  = "userns"
)

// probeTimeout caps every probe child, whatever the caller's context says:
// a probe does a handful of syscalls, and a child that takes longer is stuck.
const probeTimeout = 5 * time.Second

// maxProbeOutput bounds what is kept of a child's stdout and stderr, in
// case the re-executed program is not the one that was expected to be.
const maxProbeOutput = 64 << 10

// Release returns the kernel release, as printed by uname -r.
func Release() (string, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "", fmt.Errorf("kernel: uname: %w", err)
	}
	return unix.ByteSliceToString(u.Release[:]), nil
}

// CurrentPrivileges reports the effective uid and the effective capability
// set of the current process.
func CurrentPrivileges() (Privileges, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return Privileges{}, fmt.Errorf("kernel: privileges: %w", err)
	}
	defer f.Close()
	caps, err := parseCapEff(f)
	if err != nil {
		return Privileges{}, fmt.Errorf("kernel: privileges: /proc/self/status: %w", err)
	}
	return Privileges{Root: os.Geteuid() == 0, CapEff: caps}, nil
}

// RunProbeChild runs a kernel probe if this process was started as a probe
// child by ProbeSeccomp or ProbeUserNS, and then exits the process without
// returning. Otherwise it returns false at once and has no effect.
//
// A program that uses ProbeSeccomp or ProbeUserNS must call RunProbeChild
// first thing in main, before it parses flags or starts goroutines; a test
// binary calls it first thing in TestMain.
func RunProbeChild() bool {
	mode, ok := os.LookupEnv(probeEnv)
	if !ok {
		return false
	}
	var report any
	switch mode {
	case probeSeccomp:
		report = seccompChild()
	case probeUserNS:
		report = usernsChild()
	default:
		fmt.Fprintf(os.Stderr, "agent-launcher: unknown kernel probe %s=%q\n", probeEnv, mode)
		os.Exit(2)
	}
	if err := json.NewEncoder(os.Stdout).Encode(report); err != nil {
		fmt.Fprintf(os.Stderr, "agent-launcher: kernel probe %s: write report: %v\n", mode, err)
		os.Exit(1)
	}
	os.Exit(0)
	panic("unreachable")
}

// probeChild is a re-executed copy of the current program.
type probeChild struct {
	cmd            *exec.Cmd
	ctx            context.Context
	cancel         context.CancelFunc
	stdout, stderr cappedBuffer
}

// startProbeChild starts /proc/self/exe with env (a NAME=value pair) added
// to the environment and with the given process attributes. The child is
// killed when ctx is done or after probeTimeout. The caller must call wait.
func startProbeChild(ctx context.Context, env string, attr *syscall.SysProcAttr) (*probeChild, error) {
	// Without this check, a program whose main never calls RunProbeChild
	// would re-execute itself from the child, and so on.
	if v, ok := os.LookupEnv(probeEnv); ok {
		return nil, fmt.Errorf("%s=%s is set in the probing process: its main does not call kernel.RunProbeChild first", probeEnv, v)
	}
	name, _, _ := strings.Cut(env, "=")
	c := &probeChild{}
	c.ctx, c.cancel = context.WithTimeout(ctx, probeTimeout)
	// /proc/self/exe rather than os.Args[0] or os.Executable: it needs no
	// PATH lookup and still works if the binary was replaced on disk.
	c.cmd = exec.CommandContext(c.ctx, "/proc/self/exe")
	c.cmd.Args = []string{"agent-launcher-kernel-probe"}
	c.cmd.Env = append(withoutEnv(os.Environ(), name), env)
	c.cmd.SysProcAttr = attr
	c.stdout.max, c.stderr.max = maxProbeOutput, maxProbeOutput
	c.cmd.Stdout, c.cmd.Stderr = &c.stdout, &c.stderr
	// The pipes are ours; if a grandchild kept them open, Wait would
	// otherwise hang after the child is killed.
	c.cmd.WaitDelay = time.Second
	if err := c.cmd.Start(); err != nil {
		ctxErr := c.ctx.Err()
		c.cancel()
		if ctxErr != nil {
			return nil, fmt.Errorf("start child: %w", ctxErr)
		}
		return nil, fmt.Errorf("start child: %w", err)
	}
	return c, nil
}

// wait waits for the child and decodes its report into v.
func (c *probeChild) wait(v any) error {
	defer c.cancel()
	err := c.cmd.Wait()
	if ctxErr := c.ctx.Err(); ctxErr != nil {
		return fmt.Errorf("child killed (%v): %w", err, ctxErr)
	}
	if err != nil {
		return fmt.Errorf("child: %w%s", err, c.stderr.tail())
	}
	if err := json.Unmarshal(c.stdout.Bytes(), v); err != nil {
		return fmt.Errorf("child wrote no probe report (does main call kernel.RunProbeChild first?): %w%s", err, c.stderr.tail())
	}
	return nil
}

// withoutEnv returns env without the variables called name.
func withoutEnv(env []string, name string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != name {
			out = append(out, kv)
		}
	}
	return out
}

// cappedBuffer is a bytes.Buffer that silently drops what is written
// beyond max bytes.
type cappedBuffer struct {
	bytes.Buffer
	max int
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room < len(p) {
		b.Buffer.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return b.Buffer.Write(p)
}

// tail returns the last line of the child's stderr, prefixed for appending
// to an error message, or "" if it wrote nothing.
func (b *cappedBuffer) tail() string {
	s := strings.TrimSpace(b.String())
	if s == "" {
		return ""
	}
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return "; child stderr: " + s
}

// errnoText renders err for a user: the errno's description and its name,
// such as "operation not permitted (EPERM)".
func errnoText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if name := unix.ErrnoName(errno); name != "" {
			return fmt.Sprintf("%v (%s)", errno, name)
		}
	}
	return err.Error()
}
