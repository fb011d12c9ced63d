// floor.c is the C reference for `make bench`: the least a program can pay
// for what agent-launcher does, measured in the same run as the launcher so
// that "close to the floor" is a ratio, not a guess. bench/cmd/floorbench
// builds it, runs it beside the launcher and prints the table.
//
// Usage (ITERS > 0; prints "ARM ITERS NS ns/op" on stdout):
//
//	floor bare     ITERS FILE          open(O_RDONLY)+close of FILE, unrestricted
//	floor openloop ITERS FILE          the same loop (the name used under the launcher)
//	floor landlock ITERS FILE [DIR...] restrict self with Landlock, then the same loop
//	floor exec     ITERS PROG [ARG...] fork, execve PROG with stdio on /dev/null, wait
//	floor faults   ITERS               touch ITERS fresh anonymous pages: the cost of
//	                                   one page fault, which every process start pays
//	                                   hundreds of times (a Go runtime about 300)
//	floor sandbox  [PATH...] -- PROG [ARG...]
//	                                   restrict self as the landlock arm does, then
//	                                   execve PROG (found in $PATH): the least a
//	                                   Landlock launcher does
//	floor viewbox  [PATH...] -- PROG [ARG...]
//	                                   the sandbox arm in a session view, as an init
//	                                   stage in C would build it: new user, mount and
//	                                   PID namespaces (ids mapped 1:1), / made
//	                                   private, a tmpfs on /tmp, /var/tmp and
//	                                   /dev/shm, a fresh /proc; a PID 1 that forks
//	                                   PROG, restricted and with no capability left,
//	                                   reaps it and exits with its status: the least
//	                                   a launcher with agent-launcher's view does
//
// The landlock arm handles every filesystem right of the running Landlock
// ABI, grants read (execute, read_file, read_dir) beneath "/" and every
// handled right beneath each DIR, which is how the launcher grants a
// workspace in the write tier: give it the workspace as DIR and it walks
// the same path the launcher's domain walks. The sandbox arm does the same
// with PATHs that may also be files (granted the rights a file can have,
// as /dev/null needs). Both refuse to run unrestricted: after restricting
// itself, creating a directory in "/" must fail with EACCES.
//
// The exec arm fails (exit 1) when a child does not exit 0, so a launcher
// that refuses to run is never timed as a fast one.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <linux/capability.h>
#include <sched.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

extern char **environ;

static void fail(const char *what) {
	fprintf(stderr, "floor: %s: %s\n", what, strerror(errno));
	exit(1);
}

static uint64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

// fs_rights returns every filesystem access right of Landlock ABI abi
// (Documentation/userspace-api/landlock.rst): ABI 1 has bits 0-12, ABI 2
// adds REFER (13), ABI 3 TRUNCATE (14), ABI 5 IOCTL_DEV (15). ABIs 4, 6
// and 7 add network rights, scopes and audit flags, no filesystem right.
static uint64_t fs_rights(long abi) {
	uint64_t r = (1ull << 13) - 1;
	if (abi >= 2) r |= 1ull << 13;
	if (abi >= 3) r |= 1ull << 14;
	if (abi >= 5) r |= 1ull << 15;
	return r;
}

// FILE_RIGHTS are the rights a rule on a file (not a directory) may grant.
#define FILE_RIGHTS ((1ull << 0) | (1ull << 1) | (1ull << 2) | (1ull << 14) | (1ull << 15))

static void add_rule(int ruleset, const char *path, uint64_t access) {
	struct landlock_path_beneath_attr pb = {.allowed_access = access};
	struct stat st;
	pb.parent_fd = open(path, O_PATH | O_CLOEXEC);
	if (pb.parent_fd < 0) fail(path);
	if (fstat(pb.parent_fd, &st)) fail(path);
	if (!S_ISDIR(st.st_mode)) pb.allowed_access &= FILE_RIGHTS;
	if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0)) fail("landlock_add_rule");
	close(pb.parent_fd);
}

static void restrict_self(char **paths, int npaths) {
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	if (abi < 1) fail("landlock_create_ruleset(VERSION)");
	uint64_t all = fs_rights(abi);
	// Only the first field: its size is understood by every ABI.
	struct { uint64_t handled_access_fs; } attr = {all};
	int ruleset = syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
	if (ruleset < 0) fail("landlock_create_ruleset");
	add_rule(ruleset, "/", LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR);
	for (int i = 0; i < npaths; i++) add_rule(ruleset, paths[i], all);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) fail("prctl(PR_SET_NO_NEW_PRIVS)");
	if (syscall(SYS_landlock_restrict_self, ruleset, 0)) fail("landlock_restrict_self");
	close(ruleset);
	// The canary: "/" is granted read only.
	if (mkdir("/floor-canary", 0700) == 0) rmdir("/floor-canary");
	else if (errno == EACCES) return;
	fprintf(stderr, "floor: Landlock is not in force: mkdir /floor-canary did not fail with EACCES\n");
	exit(1);
}

static void write_file(const char *path, const char *text) {
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0) fail(path);
	if (write(fd, text, strlen(text)) != (ssize_t)strlen(text)) fail(path);
	close(fd);
}

static int wait_status(pid_t pid) {
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) fail("waitpid");
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// viewbox runs argv in a session view (see the usage at the top) and
// returns its exit status.
static int viewbox(char **paths, int npaths, char **argv) {
	char map[64];
	unsigned uid = getuid(), gid = getgid();
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID)) fail("unshare");
	write_file("/proc/self/setgroups", "deny");
	snprintf(map, sizeof map, "%u %u 1", uid, uid);
	write_file("/proc/self/uid_map", map);
	snprintf(map, sizeof map, "%u %u 1", gid, gid);
	write_file("/proc/self/gid_map", map);
	pid_t init = fork(); // PID 1 of the new namespace
	if (init < 0) fail("fork");
	if (init > 0) return wait_status(init);
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) fail("mount(/, MS_PRIVATE)");
	const char *private[] = {"/tmp", "/var/tmp", "/dev/shm"};
	for (int i = 0; i < 3; i++)
		if (mount("tmpfs", private[i], "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")) fail(private[i]);
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL)) fail("mount(/proc)");
	pid_t agent = fork();
	if (agent < 0) fail("fork");
	if (agent == 0) {
		restrict_self(paths, npaths);
		struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
		struct __user_cap_data_struct data[2] = {{0}};
		if (syscall(SYS_capset, &hdr, data)) fail("capset");
		execvpe(argv[0], argv, environ);
		fail(argv[0]);
	}
	// PID 1: reap everything; exit with the agent's status.
	for (;;) {
		int status;
		pid_t p = wait(&status);
		if (p < 0 && errno == EINTR) continue;
		if (p < 0) fail("wait");
		if (p == agent) _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
	}
}

static void open_once(const char *file) {
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0) fail(file);
	close(fd);
}

static uint64_t open_loop(const char *file, long iters) {
	for (long i = 0; i < iters / 10 + 1; i++) open_once(file); // warm the dcache
	uint64_t t0 = now_ns();
	for (long i = 0; i < iters; i++) open_once(file);
	return now_ns() - t0;
}

static uint64_t exec_loop(char **argv, long iters) {
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0) fail("/dev/null");
	uint64_t t0 = now_ns();
	for (long i = 0; i < iters; i++) {
		pid_t pid = fork();
		if (pid < 0) fail("fork");
		if (pid == 0) {
			dup2(null, 0), dup2(null, 1), dup2(null, 2);
			execve(argv[0], argv, environ);
			_exit(127);
		}
		int status;
		while (waitpid(pid, &status, 0) < 0)
			if (errno != EINTR) fail("waitpid");
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "floor: exec %s: wait status %#x; run it by hand to see why\n", argv[0], status);
			exit(1);
		}
	}
	return now_ns() - t0;
}

// fault_loop touches iters fresh pages of a private anonymous mapping.
static uint64_t fault_loop(long iters) {
	long page = sysconf(_SC_PAGESIZE);
	volatile char *p = mmap(NULL, (size_t)iters * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) fail("mmap");
	uint64_t t0 = now_ns();
	for (long i = 0; i < iters; i++) p[i * page] = 1;
	return now_ns() - t0;
}

static void usage(void) {
	fprintf(stderr, "usage: floor bare|openloop ITERS FILE\n"
	                "       floor landlock ITERS FILE [DIR...]\n"
	                "       floor exec ITERS PROG [ARG...]\n"
	                "       floor faults ITERS\n"
	                "       floor sandbox [PATH...] -- PROG [ARG...]\n"
	                "       floor viewbox [PATH...] -- PROG [ARG...]\n");
	exit(2);
}

int main(int argc, char **argv) {
	if (argc >= 4 && !strcmp(argv[1], "viewbox")) {
		int sep = 2;
		while (sep < argc && strcmp(argv[sep], "--")) sep++;
		if (sep + 1 >= argc) usage();
		return viewbox(argv + 2, sep - 2, argv + sep + 1);
	}
	if (argc >= 4 && !strcmp(argv[1], "sandbox")) {
		int sep = 2;
		while (sep < argc && strcmp(argv[sep], "--")) sep++;
		if (sep + 1 >= argc) usage();
		restrict_self(argv + 2, sep - 2);
		execvpe(argv[sep + 1], argv + sep + 1, environ); // $PATH, as a shell would
		fail(argv[sep + 1]);
	}
	if (argc < 3 || (argc < 4 && strcmp(argv[1], "faults"))) usage();
	const char *arm = argv[1];
	char *end;
	long iters = strtol(argv[2], &end, 10);
	if (*end || iters <= 0) usage();
	uint64_t ns;
	if (!strcmp(arm, "bare") || !strcmp(arm, "openloop")) {
		if (argc != 4) usage();
		ns = open_loop(argv[3], iters);
	} else if (!strcmp(arm, "landlock")) {
		restrict_self(argv + 4, argc - 4);
		ns = open_loop(argv[3], iters);
	} else if (!strcmp(arm, "faults") && argc == 3) {
		ns = fault_loop(iters);
	} else if (!strcmp(arm, "exec")) {
		ns = exec_loop(argv + 3, iters);
	} else {
		usage();
	}
	printf("%s %ld %.1f ns/op\n", arm, iters, (double)ns / (double)iters);
	return 0;
}
