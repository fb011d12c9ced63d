// What initstage.c offers the supervisor (initstage_cgo.go).

#ifndef AL_INITSTAGE_H
#define AL_INITSTAGE_H

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
int al_child_slack(int child);

#endif
