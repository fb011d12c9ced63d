//go:build linux && cgo

package launch

/*
extern void al_sig_init(int fd);
extern int al_sig_catch(int sig);
extern int al_sig_release(int sig);
extern int al_sig_fork_raise(int sig);
extern long al_sig_test_delay_ns;
static void al_sig_set_test_delay(long ns) { __atomic_store_n(&al_sig_test_delay_ns, ns, __ATOMIC_SEQ_CST); }
*/
import "C"

import (
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// catchSignals delivers sigs to c from now on, as signal.Notify does, until
// stop, which, like signal.Stop, returns once every signal caught before it
// is in c (or was dropped: nothing waits for a full channel). It catches
// them with a handler of its own (sigcatch.c), which writes each to a pipe
// that one goroutine of this process reads, and not through os/signal:
// signal.Notify hands each signal over to the runtime's signal thread, a
// thread of its own that it starts for the first, and waits for it, twice
// a signal. For run's seven that made about 30 of the 75 to 80 context
// switches of `run -- /bin/true` here, and one thread more to start and to
// end (docs/design-amendments.md, the twenty-second pass). While a signal is
// caught here, os/signal does not see it: the launcher uses os/signal for
// none of these.
func catchSignals(c chan<- os.Signal, sigs ...os.Signal) (stop func(), err error) {
	if err := catcher.init(); err != nil {
		return nil, err
	}
	catcher.mu.Lock()
	defer catcher.mu.Unlock()
	var want [65]bool
	var added []int
	for _, s := range sigs {
		n := int(s.(syscall.Signal))
		if n <= 0 || n >= len(want) || want[n] {
			continue
		}
		if catcher.refs[n] == 0 {
			if e := C.al_sig_catch(C.int(n)); e != 0 {
				catcher.drop(added)
				return nil, fmt.Errorf("catching %v: sigaction: %v", s, syscall.Errno(e))
			}
		}
		catcher.refs[n]++
		want[n] = true
		added = append(added, n)
	}
	reg := &sigReg{c: c, want: want}
	catcher.regs = append(catcher.regs, reg)
	var once sync.Once
	return func() { once.Do(func() { catcher.stop(reg, added) }) }, nil
}

// sigReg is one catchSignals: its channel and its signals.
type sigReg struct {
	c    chan<- os.Signal
	want [65]bool
}

// catcher is the process's one pipe, its reader and the registrations.
var catcher sigCatcher

type sigCatcher struct {
	once    sync.Once
	initErr error
	// wfd is the write end, non-blocking: kept, never closed (al_sig_fd).
	// A raw descriptor, never an os.File: Fd would make it blocking, and
	// a handler would then wait on a full pipe with every signal blocked.
	wfd int

	mu   sync.Mutex
	regs []*sigReg
	refs [65]int // per signal, the registrations that catch it
	// A stop writes a zero byte, a mark, after the signals it must see
	// delivered, and waits until the reader has passed that many marks.
	// markMu orders the marks (the reader never takes it); marksRead is
	// mu's.
	markMu                  sync.Mutex
	marksWritten, marksRead uint64
	passed                  *sync.Cond
}

func (k *sigCatcher) init() error {
	k.once.Do(func() {
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
			k.initErr = fmt.Errorf("catching signals: pipe2: %v", err)
			return
		}
		k.wfd = p[1]
		k.passed = sync.NewCond(&k.mu)
		C.al_sig_init(C.int(p[1]))
		go k.read(os.NewFile(uintptr(p[0]), "caught signals")) // non-blocking: in the runtime's poller
	})
	return k.initErr
}

// read delivers what the handler writes, for the life of the process.
func (k *sigCatcher) read(r *os.File) {
	var b [64]byte
	for {
		n, err := r.Read(b[:])
		if err != nil {
			// Nothing closes the pipe; a read that fails leaves the
			// signals caught and undelivered, and every stop waiting.
			panic(fmt.Sprintf("agent-launcher: reading the caught signals: %v", err))
		}
		k.mu.Lock()
		for _, x := range b[:n] {
			if x == 0 {
				k.marksRead++
				k.passed.Broadcast()
				continue
			}
			wanted := false
			for _, reg := range k.regs {
				if int(x) < len(reg.want) && reg.want[x] {
					wanted = true
					select {
					case reg.c <- syscall.Signal(x):
					default:
					}
				}
			}
			if !wanted {
				// Caught by a handler that the kernel chose before a stop
				// put the previous action back, and that ran only after
				// the stop had passed its mark: raised again, for the
				// action in place now.
				unix.Kill(os.Getpid(), syscall.Signal(x))
			}
		}
		k.mu.Unlock()
	}
}

// drop takes one registration's count off each of sigs, and puts back the
// action from before where none is left (waiting for a handler that is
// running). k.mu is held.
func (k *sigCatcher) drop(sigs []int) {
	for _, n := range sigs {
		k.refs[n]--
		if k.refs[n] == 0 {
			C.al_sig_release(C.int(n))
		}
	}
}

// stop ends reg: the actions its signals had before are back where no
// other registration catches them, and what the handler wrote before is
// delivered.
func (k *sigCatcher) stop(reg *sigReg, sigs []int) {
	k.mu.Lock()
	k.drop(sigs)
	k.mu.Unlock()
	// The mark, after whatever the handlers wrote until now. While the
	// pipe is full, the handlers drop signals and this waits for the
	// reader to make room, holding only markMu, which orders the marks in
	// the pipe as their numbers.
	k.markMu.Lock()
	for {
		_, err := unix.Write(k.wfd, []byte{0})
		if err == nil {
			break
		}
		if err != unix.EAGAIN && err != unix.EINTR {
			panic(fmt.Sprintf("agent-launcher: marking the caught signals: %v", err))
		}
		time.Sleep(100 * time.Microsecond)
	}
	k.marksWritten++
	mark := k.marksWritten
	k.markMu.Unlock()
	k.mu.Lock()
	for k.marksRead < mark {
		k.passed.Wait()
	}
	for i, r := range k.regs {
		if r == reg {
			k.regs = append(k.regs[:i], k.regs[i+1:]...)
			break
		}
	}
	k.mu.Unlock()
}

// forkRaise forks a child that raises sig at itself with this process's
// handlers, and waits for it: for TestCatchSignalsForked alone.
func forkRaise(sig syscall.Signal) error {
	if e := C.al_sig_fork_raise(C.int(sig)); e != 0 {
		return syscall.Errno(e)
	}
	return nil
}

// setSigTestDelay makes the handler sleep ns before it counts itself as
// running: for TestCatchSignalsLateHandler alone.
func setSigTestDelay(ns int64) { C.al_sig_set_test_delay(C.long(ns)) }
