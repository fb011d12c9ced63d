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
)

// catchSignals delivers sigs to c from now on, as signal.Notify does, until
// stop, which, like signal.Stop, returns once every signal caught before it
// is in c (or was dropped: nothing waits for a full channel). It catches
// them with a handler of its own (sigcatch.c), which writes each to a pipe
// that one goroutine of this process reads, and not through os/signal:
// signal.Notify hands each signal over to the runtime's signal thread, a
// thread of its own that it starts for the first, and waits for it, twice
// a signal. For run's seven that made 27 of the 75 context switches of
// `run -- /bin/true` here, and one thread more to start and to end
// (docs/design-amendments.md, the twenty-second pass). While a signal is
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
				for _, m := range added {
					catcher.refs[m]--
					if catcher.refs[m] == 0 {
						C.al_sig_release(C.int(m))
					}
				}
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
	w       *os.File // the write end: kept, never closed (al_sig_fd)

	mu   sync.Mutex
	regs []*sigReg
	refs [65]int // per signal, the registrations that catch it
	// A stop writes a zero byte, a mark, after the signals it must see
	// delivered, and waits until the reader has passed that many marks.
	marksWritten, marksRead uint64
	passed                  *sync.Cond
}

func (k *sigCatcher) init() error {
	k.once.Do(func() {
		r, w, err := os.Pipe() // close-on-exec; non-blocking, in the runtime's poller
		if err != nil {
			k.initErr = fmt.Errorf("catching signals: %v", err)
			return
		}
		k.w = w
		k.passed = sync.NewCond(&k.mu)
		C.al_sig_init(C.int(w.Fd()))
		go k.read(r)
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
			for _, reg := range k.regs {
				if int(x) < len(reg.want) && reg.want[x] {
					select {
					case reg.c <- syscall.Signal(x):
					default:
					}
				}
			}
		}
		k.mu.Unlock()
	}
}

// stop ends reg: the actions its signals had before are back where no
// other registration catches them, and what the handler wrote before is
// delivered.
func (k *sigCatcher) stop(reg *sigReg, sigs []int) {
	k.mu.Lock()
	for _, n := range sigs {
		k.refs[n]--
		if k.refs[n] == 0 {
			C.al_sig_release(C.int(n)) // waits for a handler that is running
		}
	}
	// Written under the lock, so that the marks lie in the pipe in the
	// order of their numbers. The write end is non-blocking: while the
	// pipe is full, the poller waits, and the reader, which reads before
	// it takes the lock, makes room.
	if _, err := k.w.Write([]byte{0}); err != nil {
		panic(fmt.Sprintf("agent-launcher: marking the caught signals: %v", err))
	}
	k.marksWritten++
	mark := k.marksWritten
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
