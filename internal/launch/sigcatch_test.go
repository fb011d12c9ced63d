//go:build linux && cgo

package launch

import (
	"os"
	"os/signal"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// raiseHere sends sig to the calling thread: it is handled before tgkill
// returns to this thread, so that whatever the handler does is done.
func raiseHere(t *testing.T, sig unix.Signal) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Tgkill(os.Getpid(), unix.Gettid(), sig); err != nil {
		t.Fatal(err)
	}
}

// mustCatch catches sigs into a new channel (catchSignals); stop ends it.
func mustCatch(t *testing.T, sigs ...os.Signal) (c chan os.Signal, stop func()) {
	t.Helper()
	c = make(chan os.Signal, 4)
	stop, err := catchSignals(c, sigs...)
	if err != nil {
		t.Fatal(err)
	}
	return c, stop
}

// notified registers a new channel for sig with os/signal, until the test
// ends: the action a catch replaces and puts back.
func notified(t *testing.T, sig os.Signal) chan os.Signal {
	c := make(chan os.Signal, 4)
	signal.Notify(c, sig)
	t.Cleanup(func() { signal.Stop(c) })
	return c
}

func received(c <-chan os.Signal, within time.Duration) (os.Signal, bool) {
	select {
	case s := <-c:
		return s, true
	case <-time.After(within):
		return nil, false
	}
}

// TestCatchSignals: a signal caught reaches the channel, from a kill of
// the process as from the thread itself; stopped, the action it had before
// is back: here os/signal's, whose channel gets the next one, and the
// caught channel nothing more.
func TestCatchSignals(t *testing.T) {
	before := notified(t, unix.SIGUSR1)
	c, stop := mustCatch(t, unix.SIGUSR1)
	unix.Kill(os.Getpid(), unix.SIGUSR1)
	if s, ok := received(c, 10*time.Second); !ok || s != unix.SIGUSR1 {
		t.Fatalf("caught: got %v (%v), want SIGUSR1", s, ok)
	}
	raiseHere(t, unix.SIGUSR1)
	if s, ok := received(c, 10*time.Second); !ok || s != unix.SIGUSR1 {
		t.Fatalf("caught, from the thread: got %v (%v), want SIGUSR1", s, ok)
	}
	if s, ok := received(before, 100*time.Millisecond); ok {
		t.Fatalf("os/signal got %v while it was caught here", s)
	}
	stop()
	stop() // a second stop does nothing
	unix.Kill(os.Getpid(), unix.SIGUSR1)
	if s, ok := received(before, 10*time.Second); !ok || s != unix.SIGUSR1 {
		t.Fatalf("after stop, os/signal: got %v (%v), want SIGUSR1", s, ok)
	}
	if s, ok := received(c, 100*time.Millisecond); ok {
		t.Fatalf("after stop, the caught channel got %v", s)
	}
}

// TestCatchSignalsStopDelivers: what the handler caught before stop is in
// the channel when stop returns, not later: the handler runs before tgkill
// returns, and stop is called at once. Run relies on it: a SIGINT caught
// while no agent started is read after stop (TestSignalBeforeAgentNotLost).
func TestCatchSignalsStopDelivers(t *testing.T) {
	// The control for the handler's default afterwards: os/signal's.
	after := notified(t, unix.SIGUSR2)
	for range 200 {
		c, stop := mustCatch(t, unix.SIGUSR2)
		raiseHere(t, unix.SIGUSR2)
		stop()
		select {
		case s := <-c:
			if s != unix.SIGUSR2 {
				t.Fatalf("got %v, want SIGUSR2", s)
			}
		default:
			t.Fatal("the signal caught before stop was not in the channel when stop returned")
		}
	}
	if s, ok := received(after, 100*time.Millisecond); ok {
		t.Fatalf("os/signal got %v, which was caught", s)
	}
}

// TestCatchSignalsTwice: two catches of one signal both get it; the first
// stopped, the second still does; both stopped, the action from before
// them is back.
func TestCatchSignalsTwice(t *testing.T) {
	before := notified(t, unix.SIGUSR1)
	a, stopA := mustCatch(t, unix.SIGUSR1)
	b, stopB := mustCatch(t, unix.SIGUSR1, unix.SIGUSR1) // named twice: caught once
	raiseHere(t, unix.SIGUSR1)
	for name, c := range map[string]chan os.Signal{"first": a, "second": b} {
		if _, ok := received(c, 10*time.Second); !ok {
			t.Fatalf("%s catch: nothing", name)
		}
	}
	stopA()
	raiseHere(t, unix.SIGUSR1)
	if _, ok := received(b, 10*time.Second); !ok {
		t.Fatal("the second catch lost the signal when the first stopped")
	}
	if s, ok := received(a, 100*time.Millisecond); ok {
		t.Fatalf("the stopped catch got %v", s)
	}
	if s, ok := received(b, 100*time.Millisecond); ok {
		t.Fatalf("the second catch got %v twice", s)
	}
	stopB()
	raiseHere(t, unix.SIGUSR1)
	if _, ok := received(before, 10*time.Second); !ok {
		t.Fatal("both stopped, os/signal did not get the signal back")
	}
}

// TestCatchSignalsForked: a child forked with the handler in place (as
// os/exec's child is between its fork and its execve, for a signal the Go
// runtime had no handler of its own for) writes nothing to the pipe it
// shares with this process: its signal is not this process's. The control:
// the same signal raised here is caught.
func TestCatchSignalsForked(t *testing.T) {
	c, stop := mustCatch(t, unix.SIGUSR1)
	defer stop()
	if err := forkRaise(unix.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if s, ok := received(c, 300*time.Millisecond); ok {
		t.Fatalf("the forked child's %v reached this process's channel", s)
	}
	raiseHere(t, unix.SIGUSR1)
	if _, ok := received(c, 10*time.Second); !ok {
		t.Fatal("control: the signal raised here was not caught")
	}
}

// TestCatchSignalsFullPipe: with the pipe full (its reader held off, as
// while a stop holds the catcher's lock), the handler drops what does not
// fit and returns: 70,000 signals raised on one thread are all handled
// within the time allowed. A handler that waited for room would hold the
// thread, with every signal blocked, until the reader ran; with enough
// threads held so, it never would again. The control: once the reader
// runs, a signal is delivered.
func TestCatchSignalsFullPipe(t *testing.T) {
	c, stop := mustCatch(t, unix.SIGUSR1)
	defer stop()
	catcher.mu.Lock() // the reader delivers nothing, so the pipe fills
	done := make(chan int)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		n := 0
		for ; n < 70000; n++ {
			if unix.Tgkill(os.Getpid(), unix.Gettid(), unix.SIGUSR1) != nil {
				break
			}
		}
		done <- n
	}()
	finished := false
	select {
	case n := <-done:
		finished = true
		if n != 70000 {
			t.Errorf("raised %d of 70000", n)
		}
	case <-time.After(30 * time.Second):
		t.Error("the handler blocked on the full pipe")
	}
	catcher.mu.Unlock()
	for len(c) > 0 {
		<-c
	}
	if !finished {
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("the thread that raised them is still held")
		}
	}
	for len(c) > 0 {
		<-c
	}
	time.Sleep(100 * time.Millisecond)
	for len(c) > 0 {
		<-c
	}
	raiseHere(t, unix.SIGUSR1)
	if _, ok := received(c, 10*time.Second); !ok {
		t.Fatal("control: nothing delivered once the reader ran")
	}
}

// TestCatchSignalsLateHandler: a signal whose handler the kernel chose
// before stop put the previous action back, but which runs only after
// stop returned (a thread not scheduled at once), is not lost: the reader
// finds no catch for it and raises it again, for the action now in place
// (os/signal's here). Run depends on it: a Ctrl-C as a Run that started
// no agent ends must end the launcher or be reported, not vanish.
func TestCatchSignalsLateHandler(t *testing.T) {
	after := notified(t, unix.SIGUSR2)
	setSigTestDelay(int64(200 * time.Millisecond))
	defer setSigTestDelay(0)
	// A loaded machine can run the handler before stop does; then the
	// signal was caught in time, and the case is tried again.
	for range 5 {
		c, stop := mustCatch(t, unix.SIGUSR2)
		// Raised on a thread of its own, whose handler sleeps there; stop
		// runs on another.
		raised := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			unix.Tgkill(os.Getpid(), unix.Gettid(), unix.SIGUSR2)
			close(raised)
		}()
		time.Sleep(5 * time.Millisecond) // its handler entered and sleeping, not counted yet
		stop()
		<-raised
		select {
		case <-c:
			continue // its handler ran before stop: not the late case
		default:
		}
		if _, ok := received(after, 10*time.Second); !ok {
			t.Error("the signal was lost: not in the channel when stop returned, and the action put back never got it")
		}
		return
	}
	t.Fatal("in five tries, the handler never ran after stop")
}
