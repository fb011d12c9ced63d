package launch

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// sessionPTY is the agent's own terminal (DESIGN.md section 5): when the
// operator's stdin, stdout or stderr is a terminal, the agent gets a new
// pseudo-terminal instead, which the supervisor relays. The agent then
// never holds the operator's terminal: TIOCSTI and TIOCLINUX from it
// reach only its own pty, on any ABI and as root too.
type sessionPTY struct {
	master, slave *os.File
	// tty is the operator's terminal whose size the pty follows; in is
	// the operator's stdin when it is a terminal (put in raw mode and
	// relayed), else nil; out receives what the agent writes to the pty.
	tty, in *os.File
	out     *os.File
	saved   *unix.Termios
	outDone chan struct{}
	// raw is set while the relay holds the operator's terminal (in) raw.
	raw atomic.Bool
}

func isTerminal(f *os.File) bool {
	if f == nil {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// newSessionPTY returns nil, nil when none of stdio is a terminal.
func newSessionPTY(stdin, stdout, stderr *os.File) (*sessionPTY, error) {
	var tty, out *os.File
	for _, f := range []*os.File{stdin, stdout, stderr} {
		if isTerminal(f) && tty == nil {
			tty = f
		}
	}
	if tty == nil {
		return nil, nil
	}
	switch {
	case isTerminal(stdout):
		out = stdout
	case isTerminal(stderr):
		out = stderr
	default:
		out = stdout // only stdin is a terminal; the pty's output is the agent's
	}
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening a pty for the agent: %w", err)
	}
	fail := func(err error) (*sessionPTY, error) {
		m.Close()
		return nil, fmt.Errorf("setting up the agent's pty: %w", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		return fail(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		return fail(err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail(err)
	}
	p := &sessionPTY{master: m, slave: s, tty: tty, out: out, outDone: make(chan struct{})}
	// The agent's terminal starts as the operator's: modes and size.
	if t, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS); err == nil {
		_ = unix.IoctlSetTermios(int(s.Fd()), unix.TCSETS, t)
	}
	p.resize()
	if isTerminal(stdin) {
		p.in = stdin
	}
	return p, nil
}

// stdio returns what the agent gets as fds 0-2: the pty where the
// operator's fd was a terminal, the operator's fd otherwise; and the
// index of the pty among them, its controlling terminal.
func (p *sessionPTY) stdio(stdin, stdout, stderr *os.File) (files [3]*os.File, ctty int) {
	ctty = -1
	for i, f := range []*os.File{stdin, stdout, stderr} {
		files[i] = f
		if isTerminal(f) {
			files[i] = p.slave
			if ctty < 0 {
				ctty = i
			}
		}
	}
	return files, ctty
}

// resize gives the pty the size of the operator's terminal; the kernel
// then signals SIGWINCH to the pty's foreground process group.
func (p *sessionPTY) resize() {
	if ws, err := unix.IoctlGetWinsize(int(p.tty.Fd()), unix.TIOCGWINSZ); err == nil {
		_ = unix.IoctlSetWinsize(int(p.master.Fd()), unix.TIOCSWINSZ, ws)
	}
}

// start begins the relay, once the agent's side holds the slave: the
// operator's terminal goes raw (its keys, Ctrl-C included, are the
// agent's terminal's to interpret) and bytes flow both ways.
func (p *sessionPTY) start() error {
	p.slave.Close() // the agent holds it now; EIO on the master ends the output
	if p.in != nil {
		t, err := unix.IoctlGetTermios(int(p.in.Fd()), unix.TCGETS)
		if err != nil {
			return fmt.Errorf("reading the terminal's modes: %w", err)
		}
		saved := *t
		raw := *t
		raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
		raw.Oflag &^= unix.OPOST
		raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
		raw.Cflag &^= unix.CSIZE | unix.PARENB
		raw.Cflag |= unix.CS8
		raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
		if err := unix.IoctlSetTermios(int(p.in.Fd()), unix.TCSETS, &raw); err != nil {
			return fmt.Errorf("putting the terminal in raw mode: %w", err)
		}
		p.saved = &saved
		p.raw.Store(true)
		go func() { _, _ = io.Copy(p.master, p.in) }()
	}
	go func() {
		defer close(p.outDone)
		_, _ = io.Copy(p.out, p.master)
	}()
	return nil
}

// finish waits (briefly) for the agent's last output and restores the
// operator's terminal.
func (p *sessionPTY) finish() {
	select {
	case <-p.outDone:
	case <-time.After(2 * time.Second):
	}
	p.restore()
	p.master.Close()
}

// restore puts the operator's terminal back as it was.
func (p *sessionPTY) restore() {
	if p.saved != nil {
		_ = unix.IoctlSetTermios(int(p.in.Fd()), unix.TCSETS, p.saved)
		p.saved = nil
		p.raw.Store(false)
	}
}

// rawNotices wraps notice, which writes a line to stderr, for a session
// on this pty: while the relay holds the operator's terminal raw, the
// terminal adds no carriage return to a newline, so a line for it carries
// its own (when stderr is that terminal: a log file gets none).
func (p *sessionPTY) rawNotices(stderr *os.File, notice func(string)) func(string) {
	if p == nil || p.in == nil || notice == nil || !sameTerminal(stderr, p.in) {
		return notice
	}
	return func(msg string) {
		if p.raw.Load() {
			msg += "\r"
		}
		notice(msg)
	}
}

// sameTerminal reports whether a and b are open on the same terminal.
func sameTerminal(a, b *os.File) bool {
	if a == nil || b == nil || !isTerminal(a) {
		return false
	}
	var sa, sb unix.Stat_t
	return unix.Fstat(int(a.Fd()), &sa) == nil && unix.Fstat(int(b.Fd()), &sb) == nil &&
		sa.Mode&unix.S_IFMT == unix.S_IFCHR && sb.Mode&unix.S_IFMT == unix.S_IFCHR && sa.Rdev == sb.Rdev
}

// discard closes the pty of a session that did not start.
func (p *sessionPTY) discard() {
	p.restore()
	p.slave.Close()
	p.master.Close()
}
