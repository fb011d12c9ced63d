//go:build linux && cgo

package launch

/*
#cgo CFLAGS: -O2 -Wall -Wextra -Wno-unused-parameter
extern void al_init_stage(int argc, char **argv, char **envp);

// Before the Go runtime starts: the init stage (initstage.c) never
// returns; any other run of the binary returns at once.
__attribute__((constructor)) static void al_init_stage_ctor(int argc, char **argv, char **envp) {
	al_init_stage(argc, argv, envp);
}
*/
import "C"

// hasInitStage says whether this build has the init stage (initstage.c,
// which needs cgo).
const hasInitStage = true
