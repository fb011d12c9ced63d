// The supervisor's address space, outliving it by a moment (teardown.go).
//
// On the machine the start-up target is measured on (a PVM guest) every
// page-table entry the kernel writes traps to the hypervisor: a page fault
// costs 13 us there, and so does, page by page, tearing down a process's
// address space when it exits. A Go supervisor's exit took about 1 ms from
// exit_group to its parent's wait returning, most of it that teardown,
// which the parent waits for: the kernel frees the memory before it
// reports the exit. A process that shares the address space (CLONE_VM)
// and outlives the supervisor takes the teardown with it: the supervisor's
// exit drops one user of the memory, its parent's wait returns, and the
// helper, woken by the supervisor's exit, exits and frees the memory.
//
// The helper runs nothing but system calls, made here without the C
// library: it shares the memory, and the thread-local storage, of the
// thread that started it, whose errno a library call would write. It
// starts with every signal blocked (a signal's handler is the Go
// runtime's, which must never run in another process), closes every file
// descriptor it was given but its pidfd of the supervisor (so that no
// pipe, terminal or socket of the session stays open a moment longer),
// waits until the supervisor has exited, and exits.

#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "initstage.h"

#if defined(__x86_64__)
static long raw3(long n, long a, long b, long c) {
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
	return r;
}
static long raw4(long n, long a, long b, long c, long d) {
	long r;
	register long r10 __asm__("r10") = d;
	__asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10) : "rcx", "r11", "memory");
	return r;
}
#define AL_HAVE_RAW 1
#elif defined(__aarch64__)
static long raw4(long n, long a, long b, long c, long d) {
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	__asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory", "cc");
	return x0;
}
static long raw3(long n, long a, long b, long c) { return raw4(n, a, b, c, 0); }
#define AL_HAVE_RAW 1
#endif

#ifdef AL_HAVE_RAW

#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

// The helper's stack: one helper per process (al_defer_teardown runs
// once), in memory nothing else uses.
static char teardown_stack[16 << 10] __attribute__((aligned(16)));

static int teardown_main(void *arg) {
	long pidfd = (long)(intptr_t)arg;
	// Every descriptor but the pidfd: [0, pidfd) and (pidfd, ~0].
	if ((pidfd > 0 && raw3(SYS_close_range, 0, pidfd - 1, 0) != 0) ||
	    raw3(SYS_close_range, pidfd + 1, ~0U, 0) != 0)
		raw3(SYS_exit, 0, 0, 0); // a kernel without close_range: no helper
	struct pollfd p = {(int)pidfd, POLLIN, 0};
	// ppoll with no timeout and no mask change; every signal but SIGKILL
	// and SIGSTOP is blocked, so nothing interrupts it but the exit.
	while (raw4(SYS_ppoll, (long)&p, 1, 0, 0) < 0) {
	}
	raw3(SYS_exit, 0, 0, 0);
	return 0;
}

int al_defer_teardown(void) {
	static int started;
	if (__atomic_exchange_n(&started, 1, __ATOMIC_SEQ_CST))
		return -EALREADY;
	int pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
	if (pidfd < 0)
		return -errno;
	// Every signal blocked on this thread for the clone, which the child
	// starts with: the system call itself, as the C library's wrappers
	// leave their own signals (32-34) out, and a handler of the Go
	// runtime's must never run in the helper.
	uint64_t all = ~(uint64_t)0, old;
	if (raw4(SYS_rt_sigprocmask, SIG_SETMASK, (long)&all, (long)&old, sizeof all) != 0) {
		close(pidfd);
		return -EINVAL;
	}
	// A child of the supervisor's, reaped by whoever gets it once the
	// supervisor has exited (SIGCHLD, so that a subreaper's wait(2) does).
	int pid = clone(teardown_main, teardown_stack + sizeof teardown_stack, CLONE_VM | SIGCHLD, (void *)(intptr_t)pidfd);
	int e = errno;
	raw4(SYS_rt_sigprocmask, SIG_SETMASK, (long)&old, 0, sizeof old);
	close(pidfd);
	return pid < 0 ? -e : pid;
}

#else

int al_defer_teardown(void) { return -ENOSYS; }

#endif
