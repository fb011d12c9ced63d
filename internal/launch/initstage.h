// What initstage.c offers the supervisor (initstage_cgo.go).

#ifndef AL_INITSTAGE_H
#define AL_INITSTAGE_H

#include <stdint.h>
#include <sys/types.h>

// Steps of al_spawn_view, for its caller's message (spawnView).
enum {
	AL_SPAWN_CLONE = 1,
	AL_SPAWN_SETGROUPS,
	AL_SPAWN_UID_MAP,
	AL_SPAWN_GID_MAP,
	AL_SPAWN_SETSID,
	AL_SPAWN_PDEATHSIG,
	AL_SPAWN_FDS,
	AL_SPAWN_CTTY,
	AL_SPAWN_RLIMIT,
	AL_SPAWN_CAPS,
	AL_SPAWN_EXEC,
	AL_SPAWN_SLACK,
	AL_SPAWN_PIDFD, // al_spawn_view_thread's: a pidfd for the supervisor
};

struct al_spawn {
	// Set by the caller.
	char *const *envp; // the init stage's environment
	int fd[4];         // the init stage's fds 0-3
	int ctty;          // -1, or which of fds 0-2 becomes its controlling terminal
	// Set by al_spawn_view.
	int pid, pidfd, step, err;
	// al_spawn_view's, for the child.
	uid_t uid;
	gid_t gid;
	char uid_map[32], gid_map[32], mask[24];
	char *argv[5];
};

int al_spawn_view(struct al_spawn *s);

// al_spawn_view_thread's report records, on the spawner's pipe.
enum { AL_SPAWN_STARTED = 1, AL_SPAWN_EXITED = 2 };

struct al_spawn_record {
	int32_t kind;   // AL_SPAWN_STARTED or AL_SPAWN_EXITED
	int32_t result; // 0, or -1: see step and err
	int32_t pid;    // STARTED: PID 1
	int32_t pidfd;  // STARTED: the supervisor's pidfd of PID 1, or -1
	int32_t step;   // STARTED: al_spawn_view's failed step
	int32_t err;    // the errno of the failure
	int32_t status; // EXITED: PID 1's exit status, 128+N when signal N killed it
};

struct al_spawner {
	struct al_spawn s; // s.envp and its strings malloc'd: the spawner frees them
	int out;           // the write end of the report pipe: the spawner closes it
};

int al_spawn_view_thread(struct al_spawner *sp);
int al_child_slack(int child);

#endif
