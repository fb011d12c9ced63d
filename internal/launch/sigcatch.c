// The signals run forwards, caught without the Go runtime's signal thread
// (sigcatch_cgo.go says why): a handler of this file writes each signal's
// number, one byte, to a pipe that the supervisor reads.

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

// al_sig_fd is the pipe's write end (non-blocking), set once before any
// handler is installed and never closed, so that a handler never writes to
// a descriptor that names something else by then.
static int al_sig_fd = -1;

// al_sig_pid is this process's: a child forked with the handler in place
// (os/exec resets only the handlers the Go runtime installed) writes
// nothing to the pipe it shares until its execve closes it.
static pid_t al_sig_pid;

// al_sig_running counts the handlers that are running now.
static int al_sig_running;

// al_sig_saved holds, per signal, the action the handler replaced.
static struct sigaction al_sig_saved[_NSIG];

// al_sig_test_delay_ns, set, makes the handler sleep that long before it
// counts itself as running: for TestCatchSignalsLateHandler alone, which
// stands for a thread that takes a while to run the handler the kernel
// chose for it.
long al_sig_test_delay_ns;

static void al_sig_handler(int sig) {
	long delay = __atomic_load_n(&al_sig_test_delay_ns, __ATOMIC_SEQ_CST);
	if (delay > 0) {
		struct timespec ts = {delay / 1000000000L, delay % 1000000000L};
		nanosleep(&ts, NULL);
	}
	__atomic_add_fetch(&al_sig_running, 1, __ATOMIC_SEQ_CST);
	int e = errno;
	unsigned char b = (unsigned char)sig;
	if (getpid() == al_sig_pid)
		(void)!write(al_sig_fd, &b, 1); // a full pipe drops it, as a full channel would
	errno = e;
	__atomic_sub_fetch(&al_sig_running, 1, __ATOMIC_SEQ_CST);
}

// al_sig_init names the pipe's write end, once.
void al_sig_init(int fd) {
	al_sig_pid = getpid();
	al_sig_fd = fd;
}

// al_sig_catch installs the handler for sig and keeps the action it
// replaces; 0, else the error number. On the signal stack, which every
// thread of the Go runtime has (its handlers run there too), and with every
// signal blocked while it runs.
int al_sig_catch(int sig) {
	if (sig <= 0 || sig >= _NSIG || al_sig_fd < 0)
		return EINVAL;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = al_sig_handler;
	sa.sa_flags = SA_ONSTACK | SA_RESTART;
	sigfillset(&sa.sa_mask);
	if (sigaction(sig, &sa, &al_sig_saved[sig]) != 0)
		return errno;
	return 0;
}

// al_sig_release puts back the action al_sig_catch replaced for sig, then
// waits for the handlers still running to end: whatever they write is in
// the pipe when it returns. 0, else the error number.
int al_sig_release(int sig) {
	if (sig <= 0 || sig >= _NSIG)
		return EINVAL;
	if (sigaction(sig, &al_sig_saved[sig], NULL) != 0)
		return errno;
	while (__atomic_load_n(&al_sig_running, __ATOMIC_SEQ_CST) != 0)
		sched_yield();
	return 0;
}

// al_sig_fork_raise forks a child that raises sig at itself, with the
// handler this process has, and waits for it: for TestCatchSignalsForked
// alone. 0, else the error number.
int al_sig_fork_raise(int sig) {
	pid_t pid = fork();
	if (pid < 0)
		return errno;
	if (pid == 0) {
		sigset_t set;
		sigemptyset(&set);
		sigaddset(&set, sig);
		sigprocmask(SIG_UNBLOCK, &set, NULL);
		raise(sig);
		_exit(0);
	}
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return errno;
	return 0;
}
