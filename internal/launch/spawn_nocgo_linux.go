//go:build !cgo

package launch

// spawnView: without initstage.c there is no init stage to start (Start
// refuses first).
func spawnView(env []string, fds [4]int, ctty int) (pid, pidfd int, err error) {
	return 0, -1, &SetupError{Msg: "this build of agent-launcher has no init stage"}
}

// spawnThread: without initstage.c there is none.
type spawnThread struct{}

func spawnViewThread(env []string, fds [4]int, ctty int) (*spawnThread, error) {
	return nil, &SetupError{Msg: "this build of agent-launcher has no init stage"}
}

func (t *spawnThread) started() (pid, pidfd int, err error) {
	return 0, -1, &SetupError{Msg: "this build of agent-launcher has no init stage"}
}

func (t *spawnThread) exited() (int, error) { return 125, nil }

func failSpawnerDup(fail bool) {}
