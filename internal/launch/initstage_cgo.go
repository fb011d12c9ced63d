//go:build linux && cgo

package launch

/*
#cgo CFLAGS: -O2 -Wall -Wextra -Wno-unused-parameter
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include "initstage.h"
extern uintptr_t al_arena_lo, al_arena_hi, al_arena_next;
static uintptr_t al_arena_next_now(void) { return __atomic_load_n(&al_arena_next, __ATOMIC_SEQ_CST); }
extern void al_carve_many(uintptr_t *next, uintptr_t hi, size_t n, size_t count, uintptr_t *out);
extern void al_init_stage(void);
extern unsigned long long al_ignored_signals;
extern int al_spawner_fail_dup;

// Before the Go runtime starts: the init stage (initstage.c) never
// returns; any other run of the binary returns at once.
__attribute__((constructor)) static void al_init_stage_ctor(void) {
	al_init_stage();
}
*/
import "C"

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hasInitStage says whether this build has the init stage (initstage.c,
// which needs cgo).
const hasInitStage = true

// ignoredAtStart lists the forwarded signals this process was started
// with ignored, as initstage.c recorded them before the Go runtime ran.
func ignoredAtStart() []os.Signal {
	var out []os.Signal
	for _, s := range Forwarded {
		if n := s.(syscall.Signal); C.al_ignored_signals&(1<<(n-1)) != 0 {
			out = append(out, s)
		}
	}
	return out
}

// thpArena reports heapthp.c's arena of huge pages: its bounds and how far
// it has been handed out; zeros without one.
func thpArena() (lo, hi, next uintptr) {
	return uintptr(C.al_arena_lo), uintptr(C.al_arena_hi), uintptr(C.al_arena_next_now())
}

// carveMany runs heapthp.c's al_carve len(out) times on the arena *next
// up to hi, n bytes each, into out: for its tests.
func carveMany(next *uintptr, hi, n uintptr, out []uintptr) {
	C.al_carve_many((*C.uintptr_t)(unsafe.Pointer(next)), C.uintptr_t(hi), C.size_t(n), C.size_t(len(out)), (*C.uintptr_t)(unsafe.Pointer(&out[0])))
}

// cMmap maps n bytes as the Go runtime's sysAllocOS does (anonymous,
// private, read-write, no address asked), through the C library's mmap,
// which heapthp.c replaces: for its tests.
func cMmap(n uintptr) (unsafe.Pointer, error) {
	p, err := C.mmap(nil, C.size_t(n), C.PROT_READ|C.PROT_WRITE, C.MAP_ANONYMOUS|C.MAP_PRIVATE, -1, 0)
	if uintptr(p) == ^uintptr(0) { // MAP_FAILED
		return nil, err
	}
	return p, nil
}

// childSlack gives the calling thread, which is to start a child, the
// timer slack this process was started with (initstage.c,
// al_child_slack); the function it returns gives it the supervisor's
// again, once the child has started.
func childSlack() (restore func(), err error) {
	if r, err := C.al_child_slack(1); r != 0 {
		return nil, fmt.Errorf("giving the init stage the timer slack run was started with: prctl(PR_SET_TIMERSLACK): %v", err)
	}
	return func() { C.al_child_slack(0) }, nil
}

// spawnSteps names al_spawn_view's steps (initstage.h) for its errors.
var spawnSteps = map[C.int]string{
	C.AL_SPAWN_CLONE:     "clone into new user, mount, PID and IPC namespaces",
	C.AL_SPAWN_SETGROUPS: "writing /proc/self/setgroups",
	C.AL_SPAWN_UID_MAP:   "writing /proc/self/uid_map",
	C.AL_SPAWN_GID_MAP:   "writing /proc/self/gid_map",
	C.AL_SPAWN_SETSID:    "setsid",
	C.AL_SPAWN_PDEATHSIG: "prctl(PR_SET_PDEATHSIG)",
	C.AL_SPAWN_FDS:       "setting up fds 0-3",
	C.AL_SPAWN_CTTY:      "ioctl(TIOCSCTTY)",
	C.AL_SPAWN_RLIMIT:    "restoring RLIMIT_NOFILE",
	C.AL_SPAWN_CAPS:      "keeping its capabilities across execve (ambient)",
	C.AL_SPAWN_EXEC:      "execve /proc/self/exe",
	C.AL_SPAWN_SLACK:     "giving the init stage the timer slack run was started with (prctl(PR_SET_TIMERSLACK))",
	C.AL_SPAWN_PIDFD:     "a pidfd of PID 1 for the supervisor (fcntl(F_DUPFD_CLOEXEC))",
}

// spawnView starts the init stage of a session with a private view as
// PID 1 of new namespaces (al_spawn_view, step 1 of the sync protocol),
// with env as its environment, fds as its fds 0-3 and, unless ctty is
// -1, fd ctty as its controlling terminal. The calling goroutine must be
// locked to its thread, which must outlive the init stage (its
// parent-death signal). A system that refuses the namespaces gives a
// *ViewError (a start without the view follows); any other failure a
// *SetupError. run starts PID 1 from a thread of its own instead
// (spawnViewThread); the tests use this form to end the thread that
// started PID 1 when they choose.
func spawnView(env []string, fds [4]int, ctty int) (pid, pidfd int, err error) {
	s := (*C.struct_al_spawn)(C.calloc(1, C.size_t(unsafe.Sizeof(C.struct_al_spawn{}))))
	defer C.free(unsafe.Pointer(s))
	fillSpawn(s, env, fds, ctty)
	defer freeSpawnEnv(s)
	if C.al_spawn_view(s) == 0 {
		return int(s.pid), int(s.pidfd), nil
	}
	return 0, -1, spawnError(s.step, syscall.Errno(s.err))
}

// fillSpawn sets al_spawn_view's arguments in s: env (copied to C memory,
// which freeSpawnEnv frees), fds and ctty.
func fillSpawn(s *C.struct_al_spawn, env []string, fds [4]int, ctty int) {
	envp := (**C.char)(C.calloc(C.size_t(len(env)+1), C.size_t(unsafe.Sizeof(uintptr(0)))))
	ptrs := unsafe.Slice(envp, len(env)+1)
	for i, e := range env {
		ptrs[i] = C.CString(e)
	}
	s.envp = envp
	for i, fd := range fds {
		s.fd[i] = C.int(fd)
	}
	s.ctty = C.int(ctty)
}

// freeSpawnEnv frees the environment fillSpawn copied into s.
func freeSpawnEnv(s *C.struct_al_spawn) {
	for p := s.envp; *p != nil; p = (**C.char)(unsafe.Add(unsafe.Pointer(p), unsafe.Sizeof(*p))) {
		C.free(unsafe.Pointer(*p))
	}
	C.free(unsafe.Pointer(s.envp))
}

// spawnError is the error for al_spawn_view's failed step and its errno.
func spawnError(step C.int, errno syscall.Errno) error {
	msg := fmt.Sprintf("%s: %v", spawnSteps[step], errno)
	if step == C.AL_SPAWN_CLONE && errno == unix.ENOSPC {
		if limit, ok := namespacesExhausted(); ok {
			// Allowed here, but used up: another process of this user
			// holds them (an agent of another session can make that
			// happen on purpose). Not the system's refusal: running
			// without the view would hand the agent the operator's
			// sockets and processes. Refused.
			return &SetupError{Msg: fmt.Sprintf("starting the init stage: the user namespaces this user may create are exhausted (%s); another process holds them (another session's agent can); end it, or raise the limit", limit)}
		}
	}
	// Refused namespaces, or capabilities refused to PID 1 (by a security
	// module, a seccomp filter), without which it cannot build the view:
	// the session starts without one, under Landlock still.
	if step <= C.AL_SPAWN_GID_MAP && namespacesRefused(errno) || step == C.AL_SPAWN_CAPS {
		return &ViewError{Msg: "creating the session's namespaces: " + msg}
	}
	return &SetupError{Msg: "starting the init stage: " + msg}
}

// namespacesExhausted reports whether a clone that failed with ENOSPC
// failed on a count, not a refusal: every limit of the namespaces the view
// makes (user.max_user_namespaces, max_mnt_, max_pid_, max_ipc_) is above
// 0 here (0 is how a system turns them off, and the launcher then runs
// without the view). limit names the user namespace limit.
func namespacesExhausted() (limit string, ok bool) {
	for _, kind := range []string{"user", "mnt", "pid", "ipc"} {
		name := "/proc/sys/user/max_" + kind + "_namespaces"
		b, err := os.ReadFile(name)
		if err != nil {
			return "", false
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || n <= 0 {
			return "", false
		}
		if kind == "user" {
			limit = fmt.Sprintf("user.max_user_namespaces is %d", n)
		}
	}
	return limit, true
}

// A spawnThread is al_spawn_view_thread's thread, which starts PID 1 as
// spawnView does, waits for it and reports on a pipe: its parent-death
// signal is that thread's, which outlives it.
type spawnThread struct{ r *os.File }

// spawnViewThread starts a spawnThread for spawnView's arguments and
// returns at once; started reports the start. fds must stay open until
// started has returned.
func spawnViewThread(env []string, fds [4]int, ctty int) (*spawnThread, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, &SetupError{Msg: fmt.Sprintf("starting the init stage: %v", err)}
	}
	out, err := unix.FcntlInt(w.Fd(), unix.F_DUPFD_CLOEXEC, 0) // the thread's own, which it closes
	w.Close()
	if err != nil {
		r.Close()
		return nil, &SetupError{Msg: fmt.Sprintf("starting the init stage: %v", err)}
	}
	sp := (*C.struct_al_spawner)(C.calloc(1, C.size_t(unsafe.Sizeof(C.struct_al_spawner{}))))
	fillSpawn(&sp.s, env, fds, ctty)
	sp.out = C.int(out)
	if e := C.al_spawn_view_thread(sp); e != 0 {
		freeSpawnEnv(&sp.s)
		C.free(unsafe.Pointer(sp))
		unix.Close(out)
		r.Close()
		return nil, &SetupError{Msg: fmt.Sprintf("starting the init stage: pthread_create: %v", syscall.Errno(e))}
	}
	return &spawnThread{r: r}, nil
}

// failSpawnerDup makes the spawner thread's dup of PID 1's pidfd fail, or
// not: for TestSpawnerPidfdFailure alone.
func failSpawnerDup(fail bool) {
	if fail {
		C.al_spawner_fail_dup = 1
	} else {
		C.al_spawner_fail_dup = 0
	}
}

// started waits for PID 1's start: its pid and a pidfd of it (-1 where
// none could be made), or spawnView's error.
func (t *spawnThread) started() (pid, pidfd int, err error) {
	rec, err := t.read(C.AL_SPAWN_STARTED)
	if err != nil {
		t.r.Close()
		return 0, -1, &SetupError{Msg: fmt.Sprintf("starting the init stage: %v", err)}
	}
	if rec.result != 0 {
		t.r.Close()
		return 0, -1, spawnError(rec.step, syscall.Errno(rec.err))
	}
	return int(rec.pid), int(rec.pidfd), nil
}

// exited waits for PID 1, started, to exit: its exit status for the
// launcher (128+N when signal N killed it).
func (t *spawnThread) exited() (int, error) {
	defer t.r.Close()
	rec, err := t.read(C.AL_SPAWN_EXITED)
	if err != nil {
		return 0, err
	}
	if rec.result != 0 {
		return 0, fmt.Errorf("waitid: %v", syscall.Errno(rec.err))
	}
	return int(rec.status), nil
}

// read reads the thread's next report, which must be of kind.
func (t *spawnThread) read(kind C.int32_t) (C.struct_al_spawn_record, error) {
	var rec C.struct_al_spawn_record
	if _, err := io.ReadFull(t.r, unsafe.Slice((*byte)(unsafe.Pointer(&rec)), unsafe.Sizeof(rec))); err != nil {
		return rec, fmt.Errorf("the spawner's report: %v", err)
	}
	if rec.kind != kind {
		return rec, fmt.Errorf("the spawner's report: kind %d, not %d", rec.kind, kind)
	}
	return rec, nil
}

// namespacesRefused says whether errno, from making the session's
// namespaces, means the system does not allow them (user namespaces off
// or limited, a security module's veto), which a start without the view
// avoids, as opposed to any other failure.
func namespacesRefused(errno syscall.Errno) bool {
	switch errno {
	case unix.EPERM, unix.EACCES, unix.EINVAL, unix.ENOSPC, unix.EUSERS:
		return true
	}
	return false
}
