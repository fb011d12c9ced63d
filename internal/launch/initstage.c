// The init stage (DESIGN.md section 5; the sync protocol: sync.go), in C.
//
// The launcher's binary runs it when executed as `agent-launcher
// __agent-launcher-init` by the supervisor: a constructor (initstage_cgo.go)
// calls al_init_stage before the Go runtime starts, and it never returns.
// The Go runtime a Go init stage started cost 8-12 ms of every run on the
// machine this was measured on, and its threads made "only these syscalls
// from here on" (the seccomp step) hard to promise; this process is
// single-threaded from its first instruction to the agent's execve.
//
// It reads the "config" frame the supervisor sends (initConfig.encode),
// builds the private view when there is one and stays as the session's
// PID 1, confines the process that becomes the agent with Landlock, checks
// the floor with the canary, and reports on the sync socket in the frames
// report.encode writes. Validation of the configuration (View.Check,
// ordering) is the supervisor's, which is the same binary; what this file
// checks is the filesystem, again, at the moment it acts on it.

#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <malloc.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <link.h>
#include <unistd.h>
#include <linux/capability.h>

#include "initstage.h"

#define SYNC_FD 3
#define MAX_FRAME (64u << 20)
#define INIT_ARG "__agent-launcher-init"
#define VIEW_ARG "view" // launch.ViewArg
#define CONFIG_MAGIC "agent-launcher config 1"  // and its NUL

// System calls a libc of 2022 may not name.
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif
#ifndef SYS_landlock_add_rule
#define SYS_landlock_add_rule 445
#endif
#ifndef SYS_landlock_restrict_self
#define SYS_landlock_restrict_self 446
#endif
#ifndef SYS_open_tree
#define SYS_open_tree 428
#endif
#ifndef SYS_move_mount
#define SYS_move_mount 429
#endif
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
#ifndef P_PIDFD
#define P_PIDFD 3
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef OPEN_TREE_CLOEXEC
#define OPEN_TREE_CLOEXEC O_CLOEXEC
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif
#ifndef MOVE_MOUNT_T_EMPTY_PATH
#define MOVE_MOUNT_T_EMPTY_PATH 0x00000040
#endif
#ifndef STATX_MNT_ID
#define STATX_MNT_ID 0x00001000U
#endif
#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif
#define AL_MOUNT_ATTR_RDONLY 0x00000001
#define AL_MOUNT_ATTR_NOSUID 0x00000002
#define AL_MOUNT_ATTR_NODEV 0x00000004
#define AL_MOUNT_ATTR_NOEXEC 0x00000008
#define AL_LANDLOCK_RULE_PATH_BENEATH 1

struct al_mount_attr {
	uint64_t attr_set, attr_clr, propagation, userns_fd;
};

struct al_ruleset_attr {
	uint64_t handled_access_fs, handled_access_net, scoped;
};

struct al_path_beneath_attr {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

// Flags of a rule or a bind in the configuration (sync.go).
enum { FLAG_DIR = 1, FLAG_VIEW = 2, FLAG_READ_ONLY = 4, FLAG_NO_EXEC = 8 };

struct rule {
	char *path;
	uint64_t flags, access, dev, ino;
};

struct cache_bind {
	char *source, *target, *seal;
};

struct list {
	size_t n;
	char **s;
};

struct config {
	int confined;
	uint64_t handled, scoped;
	char *canary;
	size_t nrules;
	struct rule *rules;
	char *path;
	struct list argv, env;
	int has_view;
	struct list private_, hidden, masked, fresh, keep;
	size_t ncaches;
	struct cache_bind *caches;
	char *cwd;
	size_t nbinds;
	struct rule *binds; // flags: FLAG_DIR, FLAG_READ_ONLY, FLAG_NO_EXEC
};

// ---- messages --------------------------------------------------------------

static long long trace_origin;

static long long monotonic(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

// trace prints one phase, as launch.Trace does, when the supervisor passed
// its origin.
static void trace(const char *what) {
	if (trace_origin == 0)
		return;
	char line[512];
	int n = snprintf(line, sizeof line, "agent-launcher: trace %8.2f ms  %s\n",
	                 (double)(monotonic() - trace_origin) / 1e6, what);
	if (n > 0)
		(void)!write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

// errstr is errno's message as Go's syscall.Errno prints it (lower case).
static const char *errstr(int e) {
	static char buf[128];
	snprintf(buf, sizeof buf, "%s", strerror(e));
	if (buf[0] >= 'A' && buf[0] <= 'Z' && !(buf[1] >= 'A' && buf[1] <= 'Z'))
		buf[0] = (char)(buf[0] - 'A' + 'a');
	return buf;
}

// send_all writes to the sync socket; a supervisor gone is an error,
// not a SIGPIPE.
static int send_all(int fd, const void *p, size_t n) {
	const char *b = p;
	while (n > 0) {
		ssize_t k = send(fd, b, n, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		b += k;
		n -= (size_t)k;
	}
	return 0;
}

static int read_all(int fd, void *p, size_t n) {
	char *b = p;
	while (n > 0) {
		ssize_t k = read(fd, b, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		b += k;
		n -= (size_t)k;
	}
	return 0;
}

// write_all writes all n bytes at p to fd (a pipe: no MSG_NOSIGNAL, and
// the spawner, its one writer, blocks SIGPIPE with every other signal):
// 0, else -1.
static int write_all(int fd, const void *p, size_t n) {
	const char *b = p;
	while (n > 0) {
		ssize_t k = write(fd, b, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		b += k;
		n -= (size_t)k;
	}
	return 0;
}

struct buf {
	unsigned char *b;
	size_t n, cap;
};

static void put(struct buf *w, const void *p, size_t n) {
	if (w->n + n > w->cap) {
		size_t cap = (w->cap + n) * 2;
		unsigned char *b = realloc(w->b, cap);
		if (b == NULL)
			_exit(125);
		w->b = b;
		w->cap = cap;
	}
	memcpy(w->b + w->n, p, n);
	w->n += n;
}

static void put_num(struct buf *w, uint64_t x) {
	unsigned char b[10];
	size_t n = 0;
	while (x >= 0x80) {
		b[n++] = (unsigned char)(x | 0x80);
		x >>= 7;
	}
	b[n++] = (unsigned char)x;
	put(w, b, n);
}

static void put_str(struct buf *w, const char *s) {
	size_t n = strlen(s);
	put_num(w, n);
	put(w, s, n);
}

// report writes one message other than "config" (report.encode).
static int report(const char *type, const char *msg, uint64_t err, uint64_t rules, uint64_t pid, int cause) {
	struct buf w = {0};
	unsigned char hdr[4] = {0};
	put(&w, hdr, 4);
	put_str(&w, type);
	put_str(&w, msg);
	put_num(&w, err);
	put_num(&w, rules);
	put_num(&w, pid);
	put_num(&w, (uint64_t)cause);
	uint32_t len = (uint32_t)(w.n - 4);
	w.b[0] = (unsigned char)(len >> 24);
	w.b[1] = (unsigned char)(len >> 16);
	w.b[2] = (unsigned char)(len >> 8);
	w.b[3] = (unsigned char)len;
	int rc = send_all(SYNC_FD, w.b, w.n);
	free(w.b);
	return rc;
}

// What caused a failure reported before the agent started: the supervisor
// starts again without the view (FAIL_VIEW), or plans again (FAIL_STALE),
// or gives up (FAIL_PLAIN). Sent as the "error" report's last number.
enum { FAIL_PLAIN = 0, FAIL_VIEW = 1, FAIL_STALE = 2 };

// fail reports a failure before the agent started ("error", with its
// cause, FAIL_*) and returns the init stage's exit status.
static int fail(int cause, const char *format, ...) __attribute__((format(printf, 2, 3)));
static int fail(int cause, const char *format, ...) {
	char msg[4096];
	va_list ap;
	va_start(ap, format);
	vsnprintf(msg, sizeof msg, format, ap);
	va_end(ap);
	report("error", msg, 0, 0, 0, cause);
	return 125;
}

// An error to pass up: its message, and its cause (FAIL_*).
struct failure {
	int cause;
	char msg[4096];
};

static int failf(struct failure *f, int cause, const char *format, ...) __attribute__((format(printf, 3, 4)));
static int failf(struct failure *f, int cause, const char *format, ...) {
	va_list ap;
	va_start(ap, format);
	vsnprintf(f->msg, sizeof f->msg, format, ap);
	va_end(ap);
	f->cause = cause;
	return -1;
}

// ---- the configuration -------------------------------------------------------

struct reader {
	const unsigned char *b;
	size_t n;
	int bad;
};

static uint64_t get_num(struct reader *r) {
	uint64_t x = 0;
	for (unsigned shift = 0; shift < 64; shift += 7) {
		if (r->n == 0) {
			r->bad = 1;
			return 0;
		}
		unsigned char c = *r->b++;
		r->n--;
		if (shift == 63 && c > 1) {
			r->bad = 1; // past 64 bits, as binary.Uvarint refuses it
			return 0;
		}
		x |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80)) {
			if (c == 0 && shift > 0) {
				r->bad = 1; // not minimal (a shorter form exists): each value has one encoding
				return 0;
			}
			return x;
		}
	}
	r->bad = 1;
	return 0;
}

// get_count reads a length no larger than the bytes left.
static size_t get_count(struct reader *r) {
	uint64_t n = get_num(r);
	if (n > r->n) {
		r->bad = 1;
		return 0;
	}
	return (size_t)n;
}

// get_str reads a string; one holding a NUL cannot be a path, an
// argument or a variable, and is refused.
static char *get_str(struct reader *r) {
	size_t n = get_count(r);
	char *s = malloc(n + 1);
	if (s == NULL)
		_exit(125);
	memcpy(s, r->b, n);
	s[n] = 0;
	if (memchr(s, 0, n) != NULL)
		r->bad = 1;
	r->b += n;
	r->n -= n;
	return s;
}

// get_list reads a list of strings, NULL-terminated (for execve).
static struct list get_list(struct reader *r) {
	struct list l;
	l.n = get_count(r);
	l.s = calloc(l.n + 1, sizeof(char *));
	if (l.s == NULL)
		_exit(125);
	for (size_t i = 0; i < l.n && !r->bad; i++)
		l.s[i] = get_str(r);
	return l;
}

// get_rules reads a list of rules (path, flags, access, device, inode)
// or, without access, of binds.
static struct rule *get_rules(struct reader *r, int with_access, size_t *n) {
	*n = get_count(r);
	struct rule *out = calloc(*n + 1, sizeof *out);
	if (out == NULL)
		_exit(125);
	for (size_t i = 0; i < *n && !r->bad; i++) {
		out[i].path = get_str(r);
		out[i].flags = get_num(r);
		out[i].access = with_access ? get_num(r) : 0;
		out[i].dev = get_num(r);
		out[i].ino = get_num(r);
	}
	return out;
}

static int decode_config(const unsigned char *b, size_t n, struct config *c) {
	size_t m = sizeof CONFIG_MAGIC; // with its NUL
	if (n < m || memcmp(b, CONFIG_MAGIC, m) != 0)
		return -1;
	struct reader r = {b + m, n - m, 0};
	memset(c, 0, sizeof *c);
	c->confined = get_num(&r) == 1;
	c->handled = get_num(&r);
	c->scoped = get_num(&r);
	c->canary = get_str(&r);
	c->rules = get_rules(&r, 1, &c->nrules);
	c->path = get_str(&r);
	c->argv = get_list(&r);
	c->env = get_list(&r);
	c->has_view = get_num(&r) == 1;
	if (c->has_view) {
		c->private_ = get_list(&r);
		c->hidden = get_list(&r);
		c->masked = get_list(&r);
		c->fresh = get_list(&r);
		c->keep = get_list(&r);
		c->ncaches = get_count(&r);
		c->caches = calloc(c->ncaches + 1, sizeof *c->caches);
		if (c->caches == NULL)
			_exit(125);
		for (size_t i = 0; i < c->ncaches && !r.bad; i++) {
			c->caches[i].source = get_str(&r);
			c->caches[i].target = get_str(&r);
			c->caches[i].seal = get_str(&r);
		}
	}
	c->cwd = get_str(&r);
	c->binds = get_rules(&r, 0, &c->nbinds);
	return r.bad || r.n != 0 ? -1 : 0;
}

// read_frame reads one frame's payload (malloc'd; NULL on error, with
// *eof set for a clean end).
static unsigned char *read_frame(size_t *n, int *eof) {
	unsigned char hdr[4];
	*eof = 0;
	ssize_t k;
	do
		k = read(SYNC_FD, hdr, 1);
	while (k < 0 && errno == EINTR);
	if (k == 0)
		*eof = 1;
	if (k != 1 || read_all(SYNC_FD, hdr + 1, 3) != 0)
		return NULL;
	uint32_t len = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 | (uint32_t)hdr[2] << 8 | hdr[3];
	if (len > MAX_FRAME)
		return NULL;
	unsigned char *b = malloc(len + 1);
	if (b == NULL || read_all(SYNC_FD, b, len) != 0)
		return NULL;
	*n = len;
	return b;
}

// wait_go waits for the supervisor's "go" (report.encode of type "go").
static int wait_go(void) {
	size_t n;
	int eof;
	unsigned char *b = read_frame(&n, &eof);
	if (b == NULL)
		return -1;
	struct reader r = {b, n, 0};
	char *type = get_str(&r);
	char *msg = get_str(&r);
	uint64_t err = get_num(&r), rules = get_num(&r), pid = get_num(&r), view = get_num(&r);
	int ok = !r.bad && r.n == 0 && strcmp(type, "go") == 0 && msg[0] == 0 && (err | rules | pid | view) == 0;
	free(type);
	free(msg);
	free(b);
	return ok ? 0 : -1;
}

// ---- fds ---------------------------------------------------------------------

// cloexec_from marks every fd from min on close-on-exec:
// close_range(CLOSE_RANGE_CLOEXEC) where the kernel has it (5.11), else
// each fd /proc/self/fd lists (Linux 5.10 answers EINVAL).
static int cloexec_from(int min, struct failure *f) {
	if (syscall(SYS_close_range, (unsigned)min, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return failf(f, FAIL_PLAIN, "close_range(CLOEXEC): %s", errstr(errno));
	DIR *d = opendir("/proc/self/fd");
	if (d == NULL)
		return failf(f, FAIL_PLAIN, "listing the open fds: %s", errstr(errno));
	int dfd = dirfd(d);
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		char *end;
		long fd = strtol(e->d_name, &end, 10);
		if (*end != 0 || e->d_name[0] == 0 || fd < min || fd == dfd)
			continue;
		int flags = fcntl((int)fd, F_GETFD);
		if (flags < 0)
			continue; // closed since the listing
		if (fcntl((int)fd, F_SETFD, flags | FD_CLOEXEC) < 0) {
			int e2 = errno;
			closedir(d);
			return failf(f, FAIL_PLAIN, "fcntl(%ld, F_SETFD, FD_CLOEXEC): %s", fd, errstr(e2));
		}
	}
	closedir(d);
	return 0;
}

// ---- Landlock ------------------------------------------------------------------

// xopen is open(2) as the kernel has it: musl's open follows an O_CLOEXEC
// open with fcntl(F_SETFD), for kernels before 2.6.23, which is one more
// system call for every Landlock rule and every bind.
static int xopen(const char *path, int flags, mode_t mode) {
	return (int)syscall(SYS_openat, AT_FDCWD, path, flags, mode);
}

static int in_devs(uint64_t dev, const uint64_t *devs, size_t ndevs) {
	for (size_t i = 0; i < ndevs; i++)
		if (devs[i] == dev)
			return 1;
	return 0;
}

// close_fds closes the descriptors from first to last.
static void close_fds(int first, int last) {
	if (syscall(SYS_close_range, (unsigned)first, (unsigned)last, 0) != 0) {
		for (int fd = first; fd <= last; fd++) // before Linux 5.9
			close(fd);
	}
}

// apply restricts the calling process with the plan's rules and scopes,
// after setting no_new_privs, as landlock.Apply does: every rule path is
// opened here with O_PATH|O_NOFOLLOW and refused when it now names another
// inode than the planner saw (a view rule: an inode of a filesystem the
// view mounted); a path gone since planning gets no rule. The ruleset
// handles exactly what the plan says: the supervisor chose the ABI.
static int apply(const struct config *c, const uint64_t *devs, size_t ndevs, struct failure *f) {
	int run_from = -1, run_to = -1; // the rules' descriptors still open
	struct al_ruleset_attr attr = {c->handled, 0, c->scoped};
	int rfd = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
	if (rfd < 0)
		return failf(f, FAIL_PLAIN, "landlock_create_ruleset(handled %#llx, scoped %#llx): %s",
		             (unsigned long long)c->handled, (unsigned long long)c->scoped, errstr(errno));
	for (size_t i = 0; i < c->nrules; i++) {
		const struct rule *r = &c->rules[i];
		int dir = (r->flags & FLAG_DIR) != 0;
		int flags = O_PATH | O_NOFOLLOW | O_CLOEXEC | (dir ? O_DIRECTORY : 0);
		int fd = xopen(r->path, flags, 0);
		if (fd < 0 && errno == EMFILE && run_from >= 0) {
			// A low RLIMIT_NOFILE: the run open so far closed first.
			close_fds(run_from, run_to);
			run_from = -1;
			fd = xopen(r->path, flags, 0);
		}
		if (fd < 0 && errno == ENOENT)
			continue; // removed since planning: nothing to grant; what is made there later has no rule
		if (fd < 0) {
			// ENOTDIR: a directory's path (or one above it) is another
			// kind of file now, a symlink included (O_NOFOLLOW).
			int e = errno;
			close(rfd);
			return failf(f, e == ENOTDIR || e == ELOOP ? FAIL_STALE : FAIL_PLAIN, "landlock rule for %s: open: %s", r->path, errstr(e));
		}
		struct stat st;
		if (fstat(fd, &st) != 0) {
			int e = errno;
			close(fd);
			close(rfd);
			return failf(f, FAIL_PLAIN, "landlock rule for %s: fstat: %s", r->path, errstr(e));
		}
		if ((r->flags & FLAG_VIEW) && !in_devs((uint64_t)st.st_dev, devs, ndevs)) {
			// Not planning's doing: the view's own mounts are not where
			// they were made. Planning again would give the same rule.
			close(fd);
			close(rfd);
			return failf(f, FAIL_PLAIN, "landlock rule for %s: not on a file system of the private view", r->path);
		}
		int same = (r->flags & FLAG_VIEW) || ((uint64_t)st.st_dev == r->dev && (uint64_t)st.st_ino == r->ino);
		if (!same || S_ISDIR(st.st_mode) != dir || S_ISLNK(st.st_mode)) {
			close(fd);
			close(rfd);
			return failf(f, FAIL_STALE, "landlock rule for %s: changed since planning (replaced or renamed)", r->path);
		}
		struct al_path_beneath_attr pb = {r->access, fd};
		if (syscall(SYS_landlock_add_rule, rfd, AL_LANDLOCK_RULE_PATH_BENEATH, &pb, 0) != 0) {
			int e = errno;
			close(fd);
			close(rfd);
			return failf(f, FAIL_PLAIN, "landlock rule for %s: landlock_add_rule(%#llx): %s", r->path,
			             (unsigned long long)r->access, errstr(e));
		}
		// Closed by runs of consecutive descriptors, all the rules', up to
		// 64 at a time, not one by one: a system call fewer per rule
		// (run's start-up 34.2 -> 33.4 ms, 41 interleaved rounds), and
		// never many open at once, whatever RLIMIT_NOFILE allows. A
		// descriptor that is not a rule's is never in a run: the kernel
		// gives the lowest free number, so a run breaks where one sits.
		if (run_from >= 0 && fd != run_to + 1) {
			close_fds(run_from, run_to);
			run_from = -1;
		}
		if (run_from < 0)
			run_from = fd;
		run_to = fd;
		if (run_to - run_from >= 63) {
			close_fds(run_from, run_to);
			run_from = -1;
		}
	}
	if (run_from >= 0)
		close_fds(run_from, run_to);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		int e = errno;
		close(rfd);
		return failf(f, FAIL_PLAIN, "prctl(PR_SET_NO_NEW_PRIVS): %s", errstr(e));
	}
	if (syscall(SYS_landlock_restrict_self, rfd, 0) != 0) {
		int e = errno;
		close(rfd);
		return failf(f, FAIL_PLAIN, "landlock_restrict_self: %s", errstr(e));
	}
	close(rfd);
	return 0;
}

// canary checks that the floor is in force: opening a path the policy
// denies and no rule reaches must fail with EACCES.
static int canary(const char *path, struct failure *f) {
	if (path[0] == 0)
		return failf(f, FAIL_PLAIN, "the plan names no canary; refusing to run without checking the floor");
	int fd = xopen(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0);
	if (fd >= 0) {
		close(fd);
		return failf(f, FAIL_PLAIN, "the Landlock floor is not in force: the canary %s, which the policy denies, opened after restriction; refusing to run", path);
	}
	if (errno != EACCES)
		return failf(f, FAIL_PLAIN, "the canary %s could not be checked (%s, not EACCES); refusing to run", path, errstr(errno));
	return 0;
}

// drop_privileges leaves the process that becomes the agent without
// capabilities and unable to regain any: an emptied bounding set,
// securebits that make root ordinary and are locked, no ambient
// capabilities, nothing effective, permitted or inheritable; and
// undumpable (review finding 17).
static int drop_privileges(struct failure *f) {
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
		return failf(f, FAIL_PLAIN, "init stage: prctl(PR_SET_DUMPABLE, 0): %s", errstr(errno));
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
		return failf(f, FAIL_PLAIN, "init stage: prctl(PR_CAP_AMBIENT_CLEAR_ALL): %s", errstr(errno));
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[2];
	if (syscall(SYS_capget, &hdr, data) != 0)
		return failf(f, FAIL_PLAIN, "init stage: capget: %s", errstr(errno));
	// The bounding set and the securebits need CAP_SETPCAP, which root
	// has, and a process with a view (every capability in its user
	// namespace, unless the launcher's file carries capabilities: an
	// execve there keeps those alone). Without it, emptying the sets
	// below leaves nothing to regain: no_new_privs keeps an execve from
	// adding to the empty permitted set (a second review checked both).
	if (data[CAP_SETPCAP / 32].effective & (1U << (CAP_SETPCAP % 32))) {
		for (int cap = 0; cap <= 63; cap++) {
			if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
				if (errno == EINVAL)
					break; // past the kernel's last capability
				return failf(f, FAIL_PLAIN, "init stage: prctl(PR_CAPBSET_DROP, %d): %s", cap, errstr(errno));
			}
		}
		// SECBIT_NOROOT, NO_SETUID_FIXUP and NO_CAP_AMBIENT_RAISE set
		// and locked, KEEP_CAPS locked off (capabilities(7),
		// "securebits").
		unsigned long bits = 1 << 0 | 1 << 1 | 1 << 2 | 1 << 3 | 1 << 5 | 1 << 6 | 1 << 7;
		if (prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) != 0)
			return failf(f, FAIL_PLAIN, "init stage: prctl(PR_SET_SECUREBITS): %s", errstr(errno));
	}
	memset(data, 0, sizeof data);
	if (syscall(SYS_capset, &hdr, data) != 0)
		return failf(f, FAIL_PLAIN, "init stage: capset(0): %s", errstr(errno));
	return 0;
}

// holds_capabilities reports whether the process has a capability
// effective or permitted (an operator who is root, or a program file
// capabilities gave some); -1 when it cannot tell.
static int holds_capabilities(void) {
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[2];
	if (syscall(SYS_capget, &hdr, data) != 0)
		return -1;
	for (int i = 0; i < 2; i++)
		if (data[i].effective != 0 || data[i].permitted != 0)
			return 1;
	return 0;
}

// check_privileges asserts what the agent inherits: no_new_privs set and
// no capability effective or permitted.
static int check_privileges(struct failure *f) {
	int nnp = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
	if (nnp != 1)
		return failf(f, FAIL_PLAIN, "init stage: no_new_privs is not set (%d); refusing to run", nnp);
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[2];
	if (syscall(SYS_capget, &hdr, data) != 0)
		return failf(f, FAIL_PLAIN, "init stage: capget: %s", errstr(errno));
	for (int i = 0; i < 2; i++)
		if (data[i].effective != 0 || data[i].permitted != 0)
			return failf(f, FAIL_PLAIN, "init stage: the init stage still holds capabilities (effective %#x, permitted %#x); refusing to run",
			             data[i].effective, data[i].permitted);
	return 0;
}

// own_session_keyring gives the calling process a new, empty session
// keyring (KEYCTL_JOIN_SESSION_KEYRING, no name) in place of the
// operator's, whose keys the agent could otherwise read, change and add to:
// keyrings are outside Landlock, and a login session's (pam_keyinit) also
// links the operator's user keyring. Inside the view's user namespace the
// user keyring is the namespace's own; without a view the agent still
// reaches the operator's (README, known limits). A kernel without keys
// (ENOSYS) has none to pass on; any other failure refuses the start.
static int own_session_keyring(struct failure *f) {
	if (syscall(SYS_keyctl, 1 /* KEYCTL_JOIN_SESSION_KEYRING */, (char *)NULL) < 0 && errno != ENOSYS)
		return failf(f, FAIL_PLAIN, "init stage: cannot give the agent a session keyring of its own (keyctl: %s); refusing to run with the operator's", errstr(errno));
	return 0;
}

// confine runs steps 4-7 of the sync protocol in the calling process:
// Landlock (devs: the view's filesystems, for its rules), no_new_privs,
// the capabilities dropped (drop_caps: a process with a view, or one
// that holds some) and none left; a session keyring of its own; the
// assertions and the canary; then
// "ready", and the supervisor's "go". It returns 0 when the agent may
// start, else the exit status (the failure reported).
static int confine(const struct config *c, const uint64_t *devs, size_t ndevs, int drop_caps) {
	struct failure f;
	if (c->confined) {
		if (apply(c, devs, ndevs, &f) != 0)
			return fail(f.cause, "%s", f.msg);
	} else if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		return fail(FAIL_PLAIN, "prctl(PR_SET_NO_NEW_PRIVS): %s", errstr(errno));
	}
	if (drop_caps && drop_privileges(&f) != 0)
		return fail(f.cause, "%s", f.msg);
	if (own_session_keyring(&f) != 0)
		return fail(f.cause, "%s", f.msg);
	if (check_privileges(&f) != 0)
		return fail(f.cause, "%s", f.msg);
	trace("init stage: Landlock in force");
	if (c->confined && canary(c->canary, &f) != 0)
		return fail(f.cause, "%s", f.msg);
	if (report("ready", "", 0, c->confined ? c->nrules : 0, 0, 0) != 0)
		return 125;
	if (wait_go() != 0)
		return 125; // the supervisor gave up; it reports why
	return 0;
}

// exec_failed reports a failed execve of the agent and returns the exit
// status: 127 when the program does not exist, else 126.
static int exec_failed(int e) {
	report("exec-error", errstr(e), (uint64_t)e, 0, 0, 0);
	return e == ENOENT ? 127 : 126;
}

// ---- the private view ------------------------------------------------------------

static char *xstrdup(const char *s) {
	char *d = strdup(s);
	if (d == NULL)
		_exit(125);
	return d;
}

static char *fmt_path(const char *format, ...) __attribute__((format(printf, 1, 2)));
static char *fmt_path(const char *format, ...) {
	va_list ap;
	va_start(ap, format);
	char *s = NULL;
	if (vasprintf(&s, format, ap) < 0)
		_exit(125);
	va_end(ap);
	return s;
}

// mkdir_all makes dir and its missing parents (mode 0755), as
// os.MkdirAll does: an existing directory is fine, anything else is not.
static int mkdir_all(const char *dir) {
	struct stat st;
	if (stat(dir, &st) == 0)
		return S_ISDIR(st.st_mode) ? 0 : (errno = ENOTDIR, -1);
	char *p = xstrdup(dir);
	char *slash = strrchr(p, '/');
	if (slash != NULL && slash != p) {
		*slash = 0;
		if (mkdir_all(p) != 0) {
			free(p);
			return -1;
		}
	}
	free(p);
	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		return -1;
	if (stat(dir, &st) != 0)
		return -1;
	return S_ISDIR(st.st_mode) ? 0 : (errno = ENOTDIR, -1);
}

static char *parent_of(const char *path) {
	char *p = xstrdup(path);
	char *slash = strrchr(p, '/');
	if (slash == p)
		slash[1] = 0;
	else if (slash != NULL)
		*slash = 0;
	return p;
}

struct devs {
	uint64_t *d;
	size_t n;
};

// add_dev adds the device of the filesystem just mounted at path.
static int add_dev(struct devs *ds, const char *path, struct failure *f) {
	struct stat st;
	if (lstat(path, &st) != 0)
		return failf(f, FAIL_PLAIN, "view: %s: %s", path, errstr(errno));
	uint64_t *d = realloc(ds->d, (ds->n + 1) * sizeof *d);
	if (d == NULL)
		_exit(125);
	ds->d = d;
	ds->d[ds->n++] = (uint64_t)st.st_dev;
	return 0;
}

// below returns p relative to dir ("" for dir itself) when p is dir or
// lies below it, else NULL.
static const char *below(const char *p, const char *dir) {
	size_t n = strlen(dir);
	if (strcmp(p, dir) == 0)
		return "";
	if (strcmp(dir, "/") == 0)
		return p[0] == '/' ? p + 1 : NULL;
	if (strncmp(p, dir, n) == 0 && p[n] == '/')
		return p + n + 1;
	return NULL;
}

static char *join_rel(const char *dir, const char *rel) {
	if (rel[0] == 0)
		return xstrdup(dir);
	if (strcmp(dir, "/") == 0)
		return fmt_path("/%s", rel);
	return fmt_path("%s/%s", dir, rel);
}

struct mount {
	uint64_t id;
	char *device, *root, *point;
};

struct table {
	struct mount *m;
	size_t n;
	int read;
};

// unescape undoes mountinfo's octal escapes (\040 for a space) in place.
static void unescape(char *s) {
	char *w = s;
	for (char *r = s; *r; r++) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' && r[3] >= '0' && r[3] <= '7') {
			*w++ = (char)((r[1] - '0') << 6 | (r[2] - '0') << 3 | (r[3] - '0'));
			r += 3;
			continue;
		}
		*w++ = *r;
	}
	*w = 0;
}

// read_table reads the calling thread's mount table
// (/proc/thread-self/mountinfo), as landlock.ParseMountinfo does.
static int read_table(struct table *t, const char *path, struct failure *f) {
	int fd = xopen("/proc/thread-self/mountinfo", O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return failf(f, FAIL_PLAIN, "view: protecting %s: %s", path, errstr(errno));
	struct buf w = {0};
	char chunk[65536];
	for (;;) {
		ssize_t k = read(fd, chunk, sizeof chunk);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			int e = errno;
			close(fd);
			return failf(f, FAIL_PLAIN, "view: protecting %s: reading the mount table: %s", path, errstr(e));
		}
		if (k == 0)
			break;
		put(&w, chunk, (size_t)k);
	}
	close(fd);
	put(&w, "", 1);
	for (size_t i = 0; i < t->n; i++) {
		free(t->m[i].device);
		free(t->m[i].root);
		free(t->m[i].point);
	}
	t->n = 0;
	char *save = NULL;
	size_t line = 0;
	for (char *l = strtok_r((char *)w.b, "\n", &save); l != NULL; l = strtok_r(NULL, "\n", &save)) {
		line++;
		char *fs[5], *fsave = NULL;
		int nf = 0;
		for (char *x = strtok_r(l, " ", &fsave); x != NULL && nf < 5; x = strtok_r(NULL, " ", &fsave))
			fs[nf++] = x;
		char *end = NULL;
		unsigned long long id = nf < 5 ? 0 : strtoull(fs[0], &end, 10);
		if (nf < 5 || *end != 0) {
			free(w.b);
			return failf(f, FAIL_PLAIN, "view: protecting %s: mountinfo line %zu: malformed", path, line);
		}
		struct mount *m = realloc(t->m, (t->n + 1) * sizeof *m);
		if (m == NULL)
			_exit(125);
		t->m = m;
		unescape(fs[3]);
		unescape(fs[4]);
		t->m[t->n++] = (struct mount){id, xstrdup(fs[2]), xstrdup(fs[3]), xstrdup(fs[4])};
	}
	free(w.b);
	t->read = 1;
	return 0;
}

// struct statx as the kernel lays it out (include/uapi/linux/stat.h), for
// its mount id alone: through the system call, as musl names statx only
// since 1.2.5, where <sys/stat.h> then defines what <linux/stat.h> does.
struct al_statx {
	unsigned char head[0x90];
	uint64_t mnt_id; // stx_mnt_id, at 0x90
	unsigned char tail[0x100 - 0x98];
};
_Static_assert(sizeof(struct al_statx) == 0x100, "struct statx is 256 bytes");

static int mnt_id(int fd, uint64_t *id) {
	struct al_statx sx;
	if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &sx) != 0)
		return -1;
	*id = sx.mnt_id;
	return 0;
}

// open_checked opens path as an O_PATH handle, without following a final
// symlink, and checks that it is b's inode, of b's type.
static int open_checked(const char *path, const struct rule *b, struct failure *f) {
	int fd = xopen(path, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
	if (fd < 0) {
		// Removed since planning, or a directory above it is another
		// kind of file now: planned again, it has no protection there.
		int e = errno;
		return failf(f, e == ENOENT || e == ENOTDIR ? FAIL_STALE : FAIL_PLAIN, "view: protecting %s: %s", path, errstr(e));
	}
	struct stat st;
	if (fstat(fd, &st) != 0) {
		int e = errno;
		close(fd);
		return failf(f, FAIL_PLAIN, "view: protecting %s: %s", path, errstr(e));
	}
	int dir = (b->flags & FLAG_DIR) != 0;
	if ((uint64_t)st.st_dev != b->dev || (uint64_t)st.st_ino != b->ino || (dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))) {
		close(fd);
		return failf(f, FAIL_STALE, "view: %s was replaced after the floor was planned", path);
	}
	return fd;
}

// mount_over mounts place over itself with b's attributes: a detached
// clone of it (open_tree), its attributes set before it is attached
// (mount_setattr), then moved onto the very inode it came from
// (move_mount), which is checked again through the new mount.
static int mount_over(const char *place, const struct rule *b, struct failure *f) {
	int fd = open_checked(place, b, f);
	if (fd < 0)
		return -1;
	int tree = (int)syscall(SYS_open_tree, fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
	if (tree < 0) {
		int e = errno;
		close(fd);
		return failf(f, FAIL_VIEW, "protecting %s: open_tree: %s", place, errstr(e));
	}
	struct al_mount_attr attr = {AL_MOUNT_ATTR_NOSUID | AL_MOUNT_ATTR_NODEV, 0, 0, 0};
	if (b->flags & FLAG_READ_ONLY)
		attr.attr_set |= AL_MOUNT_ATTR_RDONLY;
	if (b->flags & FLAG_NO_EXEC)
		attr.attr_set |= AL_MOUNT_ATTR_NOEXEC;
	int rc = -1;
	if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof attr) != 0) {
		failf(f, FAIL_VIEW, "protecting %s: mount_setattr: %s", place, errstr(errno));
		goto out;
	}
	if (syscall(SYS_move_mount, tree, "", fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0) {
		failf(f, FAIL_VIEW, "protecting %s: move_mount: %s", place, errstr(errno));
		goto out;
	}
	int top = open_checked(place, b, f);
	if (top < 0)
		goto out;
	uint64_t under, over;
	struct statfs sfs;
	if (mnt_id(fd, &under) != 0 || mnt_id(top, &over) != 0)
		failf(f, FAIL_PLAIN, "view: protecting %s: statx: %s", place, errstr(errno));
	else if (under == over)
		failf(f, FAIL_PLAIN, "view: protecting %s: the mount over it did not take", place);
	else if (fstatfs(top, &sfs) != 0)
		failf(f, FAIL_PLAIN, "view: protecting %s: %s", place, errstr(errno));
	else if ((b->flags & FLAG_READ_ONLY) && !(sfs.f_flags & ST_RDONLY))
		failf(f, FAIL_PLAIN, "view: protecting %s: the mount over it is not read-only", place);
	else
		rc = 0;
	close(top);
out:
	close(tree);
	close(fd);
	return rc;
}

// protect enforces one integrity carve-out: b's path mounted over itself,
// read-only or as a plain pin, at every place a mount of the session's
// namespace exposes it (the mounts of the same filesystem whose root lies
// at or above it, where that place resolves to the same inode now).
// Binds come sorted by path (the supervisor's), parents first: a pinned
// .git is itself a mount that exposes .git/config.
static int protect(const struct rule *b, struct table *t, struct failure *f) {
	int fd = open_checked(b->path, b, f);
	if (fd < 0)
		return -1;
	uint64_t id;
	if (mnt_id(fd, &id) != 0) {
		int e = errno;
		close(fd);
		return failf(f, FAIL_PLAIN, "view: protecting %s: statx: %s", b->path, errstr(e));
	}
	close(fd);
	// The table is read again when it lacks the mount the path was opened
	// through (one made since, such as a pin above it).
	struct mount *home = NULL;
	for (int pass = 0; pass < 2 && home == NULL; pass++) {
		if ((pass == 1 || !t->read) && read_table(t, b->path, f) != 0)
			return -1;
		for (size_t i = 0; i < t->n; i++)
			if (t->m[i].id == id)
				home = &t->m[i];
	}
	if (home == NULL)
		return failf(f, FAIL_PLAIN, "view: protecting %s: its mount %llu is not in the mount table", b->path, (unsigned long long)id);
	const char *rel = below(b->path, home->point);
	if (rel == NULL)
		return failf(f, FAIL_PLAIN, "view: protecting %s: it does not lie below its mount point %s", b->path, home->point);
	char *in_fs = join_rel(home->root, rel);
	char *device = xstrdup(home->device);
	size_t nplaces = 1;
	char **places = calloc(t->n + 1, sizeof(char *));
	if (places == NULL)
		_exit(125);
	places[0] = xstrdup(b->path);
	for (size_t i = 0; i < t->n; i++) {
		if (strcmp(t->m[i].device, device) != 0)
			continue;
		const char *r = below(in_fs, t->m[i].root);
		if (r == NULL)
			continue;
		char *place = join_rel(t->m[i].point, r);
		int seen = 0;
		for (size_t k = 0; k < nplaces; k++)
			seen |= strcmp(places[k], place) == 0;
		struct stat st;
		if (seen || lstat(place, &st) != 0 || (uint64_t)st.st_dev != b->dev || (uint64_t)st.st_ino != b->ino) {
			free(place);
			continue;
		}
		places[nplaces++] = place;
	}
	int rc = 0;
	for (size_t k = 0; k < nplaces && rc == 0; k++)
		rc = mount_over(places[k], b, f);
	for (size_t k = 0; k < nplaces; k++)
		free(places[k]);
	free(places);
	free(in_fs);
	free(device);
	return rc;
}

static int strictly_inside(const char *p, const char *dir) {
	size_t n = strlen(dir);
	return strncmp(p, dir, n) == 0 && p[n] == '/';
}

// build_view builds the session's private view in the init stage's own
// user, mount, PID and IPC namespaces (DESIGN.md section 7), as view_linux.go
// did, and returns the devices of the filesystems it mounted, whose inodes
// the plan's view rules name. Mounts are impossible after Landlock, so
// this comes first. A refusal by the kernel is a failure with view set:
// a start without the view avoids it.
static int build_view(const struct config *c, struct devs *ds, struct failure *f) {
	// The host's later mounts must not propagate in (review finding 3).
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		return failf(f, FAIL_VIEW, "mount(/, MS_REC|MS_PRIVATE): %s", errstr(errno));
	// Handles on the kept paths before their parents are covered. A kept
	// path inside another kept one comes with it.
	int *keep_fd = calloc(c->keep.n + 1, sizeof(int));
	int *keep_dir = calloc(c->keep.n + 1, sizeof(int));
	if (keep_fd == NULL || keep_dir == NULL)
		_exit(125);
	for (size_t i = 0; i < c->keep.n; i++) {
		keep_fd[i] = -1;
		int inner = 0;
		for (size_t j = 0; j < c->keep.n; j++)
			inner |= j != i && strictly_inside(c->keep.s[i], c->keep.s[j]);
		if (inner)
			continue;
		int fd = xopen(c->keep.s[i], O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
		if (fd < 0 && errno == ENOENT)
			continue; // gone since planning: the plan's rules for it are skipped too
		if (fd < 0)
			return failf(f, FAIL_PLAIN, "view: opening %s to keep it: %s", c->keep.s[i], errstr(errno));
		struct stat st;
		if (fstat(fd, &st) != 0)
			return failf(f, FAIL_PLAIN, "view: %s: %s", c->keep.s[i], errstr(errno));
		keep_fd[i] = fd;
		keep_dir[i] = S_ISDIR(st.st_mode);
	}
	for (size_t i = 0; i < c->private_.n + c->hidden.n; i++) {
		int private_ = i < c->private_.n;
		const char *d = private_ ? c->private_.s[i] : c->hidden.s[i - c->private_.n];
		if (mount("tmpfs", d, "tmpfs", MS_NOSUID | MS_NODEV, private_ ? "mode=1777" : "mode=0755") != 0)
			return failf(f, FAIL_VIEW, "mounting a private tmpfs on %s: %s", d, errstr(errno));
		if (add_dev(ds, d, f) != 0)
			return -1;
	}
	for (size_t i = 0; i < c->keep.n; i++) {
		if (keep_fd[i] < 0)
			continue;
		const char *k = c->keep.s[i];
		char *parent = parent_of(k);
		if (mkdir_all(parent) != 0)
			return failf(f, FAIL_PLAIN, "view: making the way to %s: %s", k, errstr(errno));
		free(parent);
		int rc;
		if (keep_dir[i]) {
			rc = mkdir(k, 0755);
		} else {
			int fd = xopen(k, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
			rc = fd < 0 ? -1 : close(fd);
		}
		if (rc != 0)
			return failf(f, FAIL_PLAIN, "view: a mount point for %s: %s", k, errstr(errno));
		char src[64];
		snprintf(src, sizeof src, "/proc/self/fd/%d", keep_fd[i]);
		if (mount(src, k, NULL, MS_BIND | MS_REC, NULL) != 0)
			return failf(f, FAIL_VIEW, "binding %s back into the view: %s", k, errstr(errno));
		close(keep_fd[i]);
	}
	free(keep_fd);
	free(keep_dir);
	// The agent's caches, each bound at its target, then each seal covered
	// with an empty, read-only tmpfs (cache_linux.go did this).
	for (size_t i = 0; i < c->ncaches; i++) {
		const struct cache_bind *b = &c->caches[i];
		int fd = xopen(b->source, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC, 0);
		if (fd < 0) // made before planning: gone or replaced since, the plan is stale
			return failf(f, FAIL_PLAIN, "view: opening the cache %s to bind it: %s", b->source, errstr(errno));
		char *parent = parent_of(b->target);
		if (mkdir_all(parent) != 0 || mkdir(b->target, 0700) != 0)
			return failf(f, FAIL_PLAIN, "view: a mount point for %s: %s", b->target, errstr(errno));
		free(parent);
		char src[64];
		snprintf(src, sizeof src, "/proc/self/fd/%d", fd);
		if (mount(src, b->target, NULL, MS_BIND, NULL) != 0)
			return failf(f, FAIL_VIEW, "binding the cache %s at %s: %s", b->source, b->target, errstr(errno));
		close(fd);
	}
	for (size_t i = 0; i < c->ncaches; i++) {
		int seen = 0;
		for (size_t j = 0; j < i; j++)
			seen |= strcmp(c->caches[j].seal, c->caches[i].seal) == 0;
		if (seen)
			continue;
		if (mount("tmpfs", c->caches[i].seal, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0000") != 0)
			return failf(f, FAIL_VIEW, "sealing %s: %s", c->caches[i].seal, errstr(errno));
		if (add_dev(ds, c->caches[i].seal, f) != 0)
			return -1;
	}
	for (size_t i = 0; i < c->masked.n; i++)
		if (mount("/dev/null", c->masked.s[i], NULL, MS_BIND, NULL) != 0 && errno != ENOENT)
			return failf(f, FAIL_VIEW, "masking %s: %s", c->masked.s[i], errstr(errno));
	struct table t = {0};
	for (size_t i = 0; i < c->nbinds; i++)
		if (protect(&c->binds[i], &t, f) != 0)
			return -1;
	for (size_t i = 0; i < c->fresh.n; i++) {
		if (strcmp(c->fresh.s[i], "/proc") != 0)
			return failf(f, FAIL_PLAIN, "view: no fresh instance of %s is known", c->fresh.s[i]);
		// The PID namespace's own /proc: no outside process is in it
		// (review finding 14).
		if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
			return failf(f, FAIL_VIEW, "mounting a fresh /proc: %s", errstr(errno));
		if (add_dev(ds, "/proc", f) != 0)
			return -1;
	}
	// The working directory, re-resolved in the view: the old one may lie
	// under a covered directory (review finding 6). Root in the session's
	// user namespace has no rights over owners it does not map (a root
	// operator in another user's directory): a start without the view
	// avoids it.
	// A working directory inside a private or hidden directory and
	// outside every kept path is not bound back (internal/cli/view.go,
	// TestViewWorkingDirInPrivateTmp): the session's own, made here.
	if (c->cwd[0] != 0 && chdir(c->cwd) != 0) {
		int own = 0;
		for (size_t i = 0; i < c->private_.n + c->hidden.n; i++)
			own |= strictly_inside(c->cwd, i < c->private_.n ? c->private_.s[i] : c->hidden.s[i - c->private_.n]);
		if (!own || errno != ENOENT || mkdir_all(c->cwd) != 0 || chdir(c->cwd) != 0)
			return failf(f, FAIL_VIEW, "entering the working directory %s in the view: %s", c->cwd, errstr(errno));
	}
	return 0;
}

// ---- PID 1 -----------------------------------------------------------------

// agent_main is the process that becomes the agent, started by PID 1 with
// CLONE_VM|CLONE_VFORK: it shares PID 1's memory, which stays suspended
// until its execve or exit, so no page table is copied and no page is
// faulted again for it (a fork of PID 1 took 0.7 ms here). It runs on its
// own stack, changes nothing PID 1 reads afterwards, and ends with execve
// or _exit only.
struct agent_args {
	const struct config *c;
	const struct devs *ds;
	const sigset_t *mask;
};

static char agent_stack[256 << 10] __attribute__((aligned(16)));

static int agent_main(void *p) {
	const struct agent_args *a = p;
	// The agent's dispositions are the ones this process was started
	// with: those the operator's shell ignored (nohup's SIGHUP, a
	// background job's SIGINT and SIGQUIT) the supervisor ignores again
	// and does not forward (IgnoreInherited), and the exec gave every
	// other signal its default. Only the mask is PID 1's.
	sigprocmask(SIG_SETMASK, a->mask, NULL);
	int code = confine(a->c, a->ds->d, a->ds->n, 1);
	if (code != 0)
		_exit(code);
	execve(a->c->path, a->c->argv.s, a->c->env.s);
	_exit(exec_failed(errno));
}

// pid1 is the init stage with a private view (steps 3-7 of the sync
// protocol): it builds the view, then starts the process that confines
// itself (Landlock, no capabilities) and becomes the agent (agent_main).
// PID 1 itself stays outside the agent's Landlock domain and undumpable,
// so that the scopes and the ptrace rules keep the agent from signalling,
// tracing or reading it. It reaps, passes TERM, USR1 and USR2 on to the
// agent (the supervisor sends the terminal's signals to the whole process
// group, which reaches the agent directly) and exits with the agent's
// status, 128+N when signal N killed it, which ends every process of the
// session. Until the agent's execve it is suspended in the kernel (the
// vfork; state D, killable): TERM, USR1 and USR2 wait until then, and are
// passed on to the agent as it starts.
static int pid1(const struct config *c, const sigset_t *agent_mask) {
	// PID 1 never execs: what it holds beyond stdio and the socket it
	// closes now, not at an execve.
	if (syscall(SYS_close_range, SYNC_FD + 1, ~0U, 0) != 0)
		return fail(FAIL_PLAIN, "init stage: close_range: %s", errstr(errno));
	prctl(PR_SET_NAME, "agent-launcher", 0, 0, 0);
	trace("init stage: configuration read");
	struct devs ds = {0};
	struct failure f;
	if (build_view(c, &ds, &f) != 0)
		return fail(f.cause, "init stage: private view: %s", f.msg);
	trace("init stage: private view built");
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
		return fail(FAIL_PLAIN, "init stage: prctl(PR_SET_DUMPABLE, 0): %s", errstr(errno));
	// The supervisor's signals are PID 1's to handle: they stay blocked,
	// as every signal was from this process's start (al_spawn_view), and
	// sigwaitinfo takes them; the others are unblocked as the supervisor
	// had them.
	sigset_t set, mask = *agent_mask;
	sigemptyset(&set);
	int sigs[] = {SIGCHLD, SIGINT, SIGQUIT, SIGHUP, SIGWINCH, SIGTERM, SIGUSR1, SIGUSR2};
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
		sigaddset(&set, sigs[i]);
		sigaddset(&mask, sigs[i]);
	}
	sigprocmask(SIG_SETMASK, &mask, NULL);
	struct agent_args a = {c, &ds, agent_mask};
	pid_t agent = clone(agent_main, agent_stack + sizeof agent_stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
	if (agent < 0)
		return fail(FAIL_PLAIN, "init stage: clone: %s", errstr(errno));
	// The agent's process reports from here (its end of the socket closes
	// at its execve: the supervisor's "started").
	close(SYNC_FD);
	for (;;) {
		siginfo_t si;
		int sig = sigwaitinfo(&set, &si);
		if (sig < 0)
			continue; // EINTR
		switch (sig) {
		case SIGCHLD:
			for (;;) {
				int status;
				pid_t p = waitpid(-1, &status, WNOHANG);
				if (p <= 0)
					break;
				if (p != agent)
					continue; // an orphan the namespace gave to PID 1
				if (WIFSIGNALED(status))
					return 128 + WTERMSIG(status);
				return WEXITSTATUS(status);
			}
			break;
		case SIGTERM:
		case SIGUSR1:
		case SIGUSR2:
			kill(agent, sig);
			break;
		}
	}
}

// ---- the namespaces ----------------------------------------------------------

// write_file writes s to path, which must take it whole.
static int write_file(const char *path, const char *s) {
	int fd = xopen(path, O_WRONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	size_t n = strlen(s);
	ssize_t k = write(fd, s, n);
	int e = errno;
	close(fd);
	errno = e;
	return k == (ssize_t)n ? 0 : -1;
}

// read_config reads and decodes the "config" frame (step 2), and marks
// every fd beyond stdio close-on-exec, the socket included, and whatever
// the supervisor inherited and passed on; 0, else the exit status (the
// failure reported).
static int read_config(struct config *c) {
	size_t n;
	int eof;
	unsigned char *b = read_frame(&n, &eof);
	if (b == NULL)
		return fail(FAIL_PLAIN, "init stage: reading the configuration: %s", eof ? "end of stream" : "malformed frame");
	if (decode_config(b, n, c) != 0)
		return fail(FAIL_PLAIN, "init stage: reading the configuration: sync: malformed configuration");
	free(b);
	struct failure f;
	if (cloexec_from(SYNC_FD, &f) != 0)
		return fail(FAIL_PLAIN, "init stage: %s", f.msg);
	return 0;
}

// with_view is the init stage with a private view (ViewArg): the
// supervisor started it as PID 1 of new user, mount, PID and IPC namespaces
// (al_spawn_view), its uid and gid mapped 1:1, every capability of the
// new user namespace kept across the execve (ambient), and its signals
// blocked; mask is the signal mask the supervisor itself was started
// with, in hex, which the agent gets. It reads the configuration and runs
// the session as its PID 1 (pid1).
static int with_view(const char *mask) {
	prctl(PR_SET_NAME, "agent-launcher", 0, 0, 0);
	char *end;
	errno = 0;
	unsigned long long bits = strtoull(mask, &end, 16);
	if (errno != 0 || end == mask || *end != 0 || mask[0] == '-' || mask[0] == '+')
		return fail(FAIL_PLAIN, "init stage: malformed signal mask \"%s\"", mask);
	sigset_t agent_mask;
	sigemptyset(&agent_mask);
	for (int n = 1; n <= 64; n++) {
		if (bits & (1ULL << (n - 1)))
			sigaddset(&agent_mask, n);
	}
	// A start outside its own PID namespace (by hand, or by a supervisor
	// that did not make the namespaces) would leave the session's
	// processes without the PID 1 that ends them.
	if (getpid() != 1)
		return fail(FAIL_PLAIN, "init stage: started for a private view, but not as PID 1 of a PID namespace of its own");
	struct config c;
	int code = read_config(&c);
	if (code != 0)
		return code;
	if (!c.has_view)
		return fail(FAIL_PLAIN, "init stage: started for a session with a private view, configured for one without");
	return pid1(&c, &agent_mask);
}

// ---- the supervisor's side: starting PID 1 ---------------------------------

// al_initial_mask is the signal mask this process was started with, as
// al_init_stage found it before the Go runtime ran: the agent's
// (al_spawn_view passes it to the init stage).
static sigset_t al_initial_mask;

// al_initial_nofile is the RLIMIT_NOFILE this process was started with:
// the Go runtime raises the soft limit to the hard one as it starts, and
// os/exec gives its children the original again; so does al_spawn_view.
static struct rlimit al_initial_nofile;
static int al_have_nofile;

// The supervisor's timer slack, and the one this process was started with.
// The supervisor's threads run with at least SUPERVISOR_SLACK_NS: the Go
// runtime's sysmon sleeps 20 us at a time while the start-up keeps it busy,
// and woke 53-57 times per run with the kernel's default 50 us (each a
// context switch, costly where the start-up target is measured; with 1 ms,
// 10 to 11 times: docs/design-amendments.md, the fifteenth and sixteenth
// passes). A thread's slack is what the thread that created it had, as
// its current and its default slack (copy_process), and an execve keeps
// it: so a thread that starts a child has the operator's slack while it
// does (al_child_slack), and the init stage, the agent and what they
// start have the operator's.
#define SUPERVISOR_SLACK_NS 1000000UL
static unsigned long al_initial_slack;
static int al_have_slack;

// supervisor_slack records the slack this process was started with and
// raises its own to SUPERVISOR_SLACK_NS; a larger one it keeps, and where
// the raise is refused, nothing has changed and nothing is restored.
static void supervisor_slack(void) {
	int cur = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
	if (cur <= 0 || (unsigned long)cur >= SUPERVISOR_SLACK_NS)
		return;
	if (prctl(PR_SET_TIMERSLACK, SUPERVISOR_SLACK_NS, 0, 0, 0) != 0)
		return;
	al_initial_slack = (unsigned long)cur;
	al_have_slack = 1;
}

// al_child_slack gives the calling thread the timer slack this process
// was started with (child = 1), when supervisor_slack raised it, or the
// supervisor's again (child = 0): a thread starts a child between the two,
// so that the child has the operator's slack and the supervisor's threads
// keep theirs (any may be the one that creates the runtime's next
// thread). 0, else -1 with errno.
int al_child_slack(int child) {
	if (!al_have_slack)
		return 0;
	return prctl(PR_SET_TIMERSLACK, child ? al_initial_slack : SUPERVISOR_SLACK_NS, 0, 0, 0) == 0 ? 0 : -1;
}

// spawn_failed records, in the memory the child shares with the
// supervisor, the step that failed and its errno; the child then exits.
static int spawn_failed(struct al_spawn *s, int step) {
	s->err = errno;
	s->step = step;
	_exit(127);
}

// spawn_child runs in the process that becomes PID 1, between the clone
// and its execve. It shares the supervisor's memory (CLONE_VM), which is
// suspended until the execve or _exit (CLONE_VFORK); it runs on its own
// stack with every signal blocked that the C library lets a program block
// (sigfillset leaves out the library's own, 32-34, for which the
// supervisor has no handler), so that no Go signal handler runs here, and
// makes system calls only: no allocation, no lock.
static int spawn_child(void *p) {
	struct al_spawn *s = p;
	// The maps first: the process holds every capability in its new user
	// namespace, and an unprivileged one may map only its own ids, with
	// setgroups denied (absent before Linux 3.19).
	if (write_file("/proc/self/setgroups", "deny") != 0 && errno != ENOENT)
		spawn_failed(s, AL_SPAWN_SETGROUPS);
	if (write_file("/proc/self/uid_map", s->uid_map) != 0)
		spawn_failed(s, AL_SPAWN_UID_MAP);
	if (write_file("/proc/self/gid_map", s->gid_map) != 0)
		spawn_failed(s, AL_SPAWN_GID_MAP);
	// A new session: the operator's terminal is not the agent's
	// controlling terminal, so it cannot inject keystrokes into it.
	if (setsid() < 0)
		spawn_failed(s, AL_SPAWN_SETSID);
	// PID 1 dies with the thread that started it (which outlives the
	// session); if that died already, the init stage finds the socket
	// closed and exits.
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
		spawn_failed(s, AL_SPAWN_PDEATHSIG);
	// fds 0-3: each copied above 3 first (close-on-exec), so that none is
	// overwritten before it is copied, then to its place.
	int tmp[4];
	for (int i = 0; i < 4; i++) {
		tmp[i] = fcntl(s->fd[i], F_DUPFD_CLOEXEC, 4);
		if (tmp[i] < 0)
			spawn_failed(s, AL_SPAWN_FDS);
	}
	for (int i = 0; i < 4; i++) {
		if (dup2(tmp[i], i) != i)
			spawn_failed(s, AL_SPAWN_FDS);
	}
	if (s->ctty >= 0 && ioctl(s->ctty, TIOCSCTTY, 1) != 0)
		spawn_failed(s, AL_SPAWN_CTTY);
	if (al_have_nofile && setrlimit(RLIMIT_NOFILE, &al_initial_nofile) != 0)
		spawn_failed(s, AL_SPAWN_RLIMIT);
	// An execve by a uid other than 0 drops every capability, which PID 1
	// needs in its user namespace to build the view: they are made
	// ambient, which an execve keeps. PID 1 never execs again; the agent's
	// process clears them all (drop_privileges).
	if (s->uid != 0) {
		struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
		struct __user_cap_data_struct data[2];
		if (syscall(SYS_capget, &hdr, data) != 0)
			spawn_failed(s, AL_SPAWN_CAPS);
		data[0].inheritable = data[0].permitted;
		data[1].inheritable = data[1].permitted;
		if (syscall(SYS_capset, &hdr, data) != 0)
			spawn_failed(s, AL_SPAWN_CAPS);
		for (int cap = 0; cap < 64; cap++) {
			if ((data[cap / 32].permitted & (1U << (cap % 32))) == 0)
				continue;
			if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0) != 0)
				spawn_failed(s, AL_SPAWN_CAPS);
		}
	}
	execve("/proc/self/exe", s->argv, s->envp);
	spawn_failed(s, AL_SPAWN_EXEC);
	return 127;
}

// al_spawn_view starts the init stage of a session with a private view as
// PID 1 of new user, mount, PID and IPC namespaces (step 1 of the sync
// protocol): one clone(CLONE_VM|CLONE_VFORK) into them and an execve,
// which share the supervisor's memory instead of copying it, so that no
// process stands between the supervisor and PID 1. The caller's thread
// is PID 1's parent for its parent-death signal and must outlive it. It
// returns 0 with s->pid and s->pidfd set, or -1 with s->step and s->err.
int al_spawn_view(struct al_spawn *s) {
	s->pid = 0;
	s->pidfd = -1;
	s->step = 0;
	s->err = 0;
	s->uid = geteuid();
	s->gid = getegid();
	snprintf(s->uid_map, sizeof s->uid_map, "%u %u 1\n", (unsigned)s->uid, (unsigned)s->uid);
	snprintf(s->gid_map, sizeof s->gid_map, "%u %u 1\n", (unsigned)s->gid, (unsigned)s->gid);
	unsigned long long bits = 0;
	for (int n = 1; n <= 64; n++) {
		if (sigismember(&al_initial_mask, n) == 1)
			bits |= 1ULL << (n - 1);
	}
	snprintf(s->mask, sizeof s->mask, "%llx", bits);
	s->argv[0] = "agent-launcher";
	s->argv[1] = INIT_ARG;
	s->argv[2] = VIEW_ARG;
	s->argv[3] = s->mask;
	s->argv[4] = NULL;
	// The init stage's timer slack, current and default, is the
	// operator's: this thread's as it clones.
	if (al_child_slack(1) != 0) {
		s->step = AL_SPAWN_SLACK;
		s->err = errno;
		return -1;
	}
	// The child's stack is on this thread's, which the vfork suspends.
	char stack[16 << 10] __attribute__((aligned(16)));
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int pidfd = -1;
	pid_t pid = clone(spawn_child, stack + sizeof stack,
	                  CLONE_VM | CLONE_VFORK | CLONE_PIDFD | CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | SIGCHLD, s, &pidfd,
	                  NULL, NULL);
	int e = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	al_child_slack(0); // the child has its slack (the vfork waited for its execve)
	if (pid < 0) {
		s->step = AL_SPAWN_CLONE;
		s->err = e;
		return -1;
	}
	if (s->step != 0) {
		// The child exited before its execve: reap it.
		siginfo_t si;
		while (waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED) != 0 && errno == EINTR)
			;
		close(pidfd);
		return -1;
	}
	s->pid = pid;
	s->pidfd = pidfd;
	return 0;
}

// spawner_reap waits for PID 1 (pidfd) to exit and reaps it: its exit
// status for the launcher (128+N when signal N killed it) in rec, or the
// error.
static void spawner_reap(int pidfd, struct al_spawn_record *rec) {
	for (;;) {
		siginfo_t si;
		memset(&si, 0, sizeof si);
		if (waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED) == 0) {
			rec->status = si.si_code == CLD_EXITED ? si.si_status : 128 + si.si_status;
			return;
		}
		if (errno != EINTR) {
			rec->result = -1;
			rec->err = errno;
			return;
		}
	}
}

// al_spawner_fail_dup, set, makes the spawner's dup of the pidfd fail as
// with EMFILE: for TestSpawnerPidfdFailure alone.
int al_spawner_fail_dup;

// spawner_main is the spawner thread (al_spawn_view_thread): it starts PID
// 1 (al_spawn_view), reports it, waits for it to exit and reports its
// status, then frees what it was given and ends. PID 1's parent-death
// signal is this thread's, which lives as long as PID 1 (or the process).
// A PID 1 the supervisor could not be told of, or could not signal by a
// pidfd of its own, is killed and reaped here, and the start reported as
// failed: nothing of the session runs without the supervisor's hold on it.
static void *spawner_main(void *arg) {
	struct al_spawner *sp = arg;
	struct al_spawn_record rec = {.kind = AL_SPAWN_STARTED, .pidfd = -1};
	rec.result = al_spawn_view(&sp->s);
	rec.pid = sp->s.pid;
	rec.step = sp->s.step;
	rec.err = sp->s.err;
	int pidfd = sp->s.pidfd;
	if (rec.result == 0) {
		// The supervisor's own pidfd, to signal PID 1 with; this one
		// waits for it.
		rec.pidfd = al_spawner_fail_dup ? (errno = EMFILE, -1) : fcntl(pidfd, F_DUPFD_CLOEXEC, 0);
		if (rec.pidfd < 0) {
			rec.result = -1;
			rec.step = AL_SPAWN_PIDFD;
			rec.err = errno;
		}
	}
	int told = write_all(sp->out, &rec, sizeof rec) == 0;
	if (pidfd >= 0 && (rec.result != 0 || !told)) {
		syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
		struct al_spawn_record ignored = {0};
		spawner_reap(pidfd, &ignored);
		close(pidfd);
		if (rec.pidfd >= 0)
			close(rec.pidfd); // never told of: the supervisor has none
	} else if (pidfd >= 0) {
		struct al_spawn_record end = {.kind = AL_SPAWN_EXITED, .pidfd = -1};
		spawner_reap(pidfd, &end);
		close(pidfd);
		write_all(sp->out, &end, sizeof end);
	}
	close(sp->out);
	for (char **e = (char **)sp->s.envp; e != NULL && *e != NULL; e++)
		free(*e);
	free((void *)sp->s.envp);
	free(sp);
	return NULL;
}

// al_spawn_view_thread starts PID 1 as al_spawn_view does, from a thread
// of its own, which reports on sp->out (al_spawn_record: AL_SPAWN_STARTED,
// then AL_SPAWN_EXITED when it started) and then closes it; it owns sp,
// its environment and sp->out from here on. The caller goes on at once:
// started from a goroutine, the start waited for the Go scheduler to run
// that goroutine, and its vfork held the goroutine's processor until the
// runtime's sysmon took it back (docs/design-amendments.md, the sixteenth
// pass). The thread blocks every signal, so that none meant for the
// supervisor lands on it. 0, else the error number (nothing started; sp
// is still the caller's).
int al_spawn_view_thread(struct al_spawner *sp) {
	pthread_attr_t attr;
	int e = pthread_attr_init(&attr);
	if (e != 0)
		return e;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 << 10); // al_spawn_view's child stack is on it
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old); // the thread starts with this mask
	pthread_t t;
	e = pthread_create(&t, &attr, spawner_main, sp);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	return e;
}

// ---- the entry ------------------------------------------------------------------

static int init_stage(int argc, char **argv, char **envp) {
	for (char **e = envp; e != NULL && *e != NULL; e++) {
		if (strncmp(*e, "AGENT_LAUNCHER_TRACE=", 21) == 0) {
			long long n = strtoll(*e + 21, NULL, 10);
			trace_origin = n > 1 ? n : 0;
		}
	}
	trace("init stage: running");
	// Reaping needs SIGCHLD's default disposition (ignored, the kernel
	// would reap children unseen); the supervisor's exec gives it, and it
	// is not left to chance.
	signal(SIGCHLD, SIG_DFL);
	struct stat st;
	if (fstat(SYNC_FD, &st) != 0 || !S_ISSOCK(st.st_mode)) {
		static const char msg[] = "agent-launcher: " INIT_ARG " is the launcher's internal init stage; use `agent-launcher run`\n";
		(void)!write(2, msg, sizeof msg - 1);
		return 125;
	}
	if (argc == 4 && strcmp(argv[2], VIEW_ARG) == 0)
		return with_view(argv[3]);
	if (argc != 2)
		return fail(FAIL_PLAIN, "init stage: unexpected arguments (%d, the second \"%s\")", argc, argv[2]);
	struct config c;
	int code = read_config(&c);
	if (code != 0)
		return code;
	if (c.has_view)
		return fail(FAIL_PLAIN, "init stage: configured for a session with a private view, started for one without (" VIEW_ARG ")");
	// Without a view the agent runs in the operator's user namespace:
	// an operator's capabilities (root's: CAP_SYS_MODULE, CAP_SYS_ADMIN,
	// ...) would reach past the floor, so they end here, as with the
	// view (TestNoViewPrivileges); an ordinary user has none to drop, and
	// the assertion holds for every agent.
	int caps = holds_capabilities();
	code = confine(&c, NULL, 0, caps != 0);
	if (code != 0)
		return code;
	execve(c.path, c.argv.s, c.env.s);
	return exec_failed(errno);
}

// al_ignored_signals has bit N-1 set for each signal N of those run
// forwards that this process was started with ignored. Recorded before
// the Go runtime starts, which installs its own handlers on all but
// SIGHUP and SIGINT (launch.IgnoreInherited reads it).
unsigned long long al_ignored_signals;

// initial_args finds the process's arguments without the constructor's
// parameters, which glibc passes and musl (the shipped build's C library,
// scripts/build-launcher) does not: at a constructor environ still points
// into the stack the kernel built at execve, where argc, argv's pointers
// and their NULL come just before it (the System V ABI's initial process
// stack). Walking back from environ, argc is the first word equal to the
// number of pointers passed (a pointer is never a small number). Both C
// libraries set program_invocation_name to argv[0] before any constructor
// runs, which checks the result: a mismatch ends the process, so that the
// init stage is never mistaken for the command line, nor the reverse.
static char **initial_args(int *argc) {
	char **envp = environ;
	if (envp == NULL || envp[-1] != NULL)
		goto lost;
	long n = 0;
	while ((long)envp[-2 - n] != n) {
		if (++n > (1L << 24))
			goto lost;
	}
	char **argv = envp - 1 - n;
	if (n > 0 && argv[0] != program_invocation_name)
		goto lost;
	*argc = (int)n;
	return argv;
lost: {
		static const char msg[] = "agent-launcher: cannot find this process's arguments at start-up (an unexpected C library start?); refusing to run\n";
		(void)!write(2, msg, sizeof msg - 1);
		_exit(125);
	}
}

// populate_text maps in, at once, the pages of this executable's
// read-only segments (its code and read-only data) that are in the page
// cache, reading the others: the supervisor, a Go program of 4 MiB of them,
// would otherwise fault them in 64 KiB at a time, some fifty faults at
// 11-14 us each on the machine the start-up target is measured on, where
// one MADV_POPULATE_READ of them all costs less (run's start-up: 37.7 ->
// 36.2 ms, 41 interleaved rounds; docs/design-amendments.md, a tenth
// pass). Only the supervisor's side: the init stage runs a few pages of C.
// Shared page-cache pages, so no memory is copied; a kernel before 5.14
// refuses the advice (EINVAL), and the faults happen as before.
static void populate_text(void) {
	const ElfW(Phdr) *ph = (const ElfW(Phdr) *)getauxval(AT_PHDR);
	size_t n = getauxval(AT_PHNUM);
	if (ph == NULL)
		return;
	// The load bias: 0 for the shipped static, fixed-address build; the
	// distance from the program headers' linked to their loaded address
	// otherwise (position-independent).
	uintptr_t bias = 0;
	for (size_t i = 0; i < n; i++) {
		if (ph[i].p_type == PT_PHDR)
			bias = (uintptr_t)ph - ph[i].p_vaddr;
	}
	long page = sysconf(_SC_PAGESIZE);
	if (page <= 0)
		return;
	for (size_t i = 0; i < n; i++) {
		if (ph[i].p_type != PT_LOAD || (ph[i].p_flags & PF_W))
			continue;
		uintptr_t lo = (bias + ph[i].p_vaddr) & ~(uintptr_t)(page - 1);
		uintptr_t hi = bias + ph[i].p_vaddr + ph[i].p_memsz;
		(void)madvise((void *)lo, hi - lo, 22 /* MADV_POPULATE_READ, Linux 5.14 */);
	}
}

void al_thp_arena_init(void);

// al_init_stage runs the init stage and exits when the process was
// started as one (argv[1] is the init argument); otherwise it maps the
// read-only segments in (populate_text), raises the timer slack
// (supervisor_slack), reserves the huge-page arena the Go runtime's small
// mappings are carved from (heapthp.c), records the ignored signals and
// returns at once, and the program starts as usual.
void al_init_stage(void) {
	int argc;
	char **argv = initial_args(&argc);
	if (argc < 2 || strcmp(argv[1], INIT_ARG) != 0) {
#ifdef M_ARENA_MAX
		// glibc: the supervisor's few C allocations (cgo's record of each
		// thread it starts) share one arena: each thread's first malloc
		// would make its own, a 64 MiB reservation mapped, trimmed and
		// faulted in (about 25 system calls fewer per run). musl's
		// allocator has no arenas.
		mallopt(M_ARENA_MAX, 1);
#endif
		populate_text();
		supervisor_slack(); // before the Go runtime starts a thread
		al_thp_arena_init(); // heapthp.c: the Go runtime's small mappings in huge pages
		sigprocmask(SIG_BLOCK, NULL, &al_initial_mask);
		al_have_nofile = getrlimit(RLIMIT_NOFILE, &al_initial_nofile) == 0;
		static const int forwarded[] = {SIGINT, SIGQUIT, SIGHUP, SIGWINCH, SIGTERM, SIGUSR1, SIGUSR2};
		for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++) {
			struct sigaction sa;
			if (sigaction(forwarded[i], NULL, &sa) == 0 && sa.sa_handler == SIG_IGN)
				al_ignored_signals |= 1ULL << (forwarded[i] - 1);
		}
		return;
	}
	_exit(init_stage(argc, argv, environ));
}
