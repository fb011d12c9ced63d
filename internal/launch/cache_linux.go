package launch

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/agent-launcher/agent-launcher/landlock"
)

// bindCaches makes v.Caches in the view (an agent's private cache, kept in
// the launcher's state directory, shown in a private temporary directory)
// and then seals each bind's Seal with an empty, read-only tmpfs, so that
// the bound directory is reachable in the view only at its target and the
// other agents' caches beside it are out of sight. It runs after the
// private directories are covered and the kept paths bound back (a target
// lies in a private directory; a source may lie in a kept path) and
// returns devs with the seals' devices added: the plan names the seals
// as view directories. The floor, not the seal, is what keeps the agent
// out of the state directory (DESIGN.md section 6, invariant 1).
func bindCaches(v *landlock.View, devs []uint64) ([]uint64, error) {
	for _, b := range v.Caches {
		fd, err := unix.Open(b.Source, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			// The supervisor made it before planning: gone or replaced
			// since, the plan is stale.
			return nil, fmt.Errorf("view: opening the cache %s to bind it: %w", b.Source, err)
		}
		err = os.MkdirAll(filepath.Dir(b.Target), 0o755)
		if err == nil {
			err = unix.Mkdir(b.Target, 0o700)
		}
		if err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("view: a mount point for %s: %w", b.Target, err)
		}
		err = unix.Mount("/proc/self/fd/"+strconv.Itoa(fd), b.Target, "", unix.MS_BIND, "")
		unix.Close(fd)
		if err != nil {
			return nil, &ViewError{fmt.Sprintf("binding the cache %s at %s: %v", b.Source, b.Target, err)}
		}
	}
	sealed := map[string]bool{}
	for _, b := range v.Caches {
		if sealed[b.Seal] {
			continue
		}
		sealed[b.Seal] = true
		if err := unix.Mount("tmpfs", b.Seal, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0000"); err != nil {
			return nil, &ViewError{fmt.Sprintf("sealing %s: %v", b.Seal, err)}
		}
		var st unix.Stat_t
		if err := unix.Lstat(b.Seal, &st); err != nil {
			return nil, fmt.Errorf("view: %s: %w", b.Seal, err)
		}
		devs = append(devs, st.Dev)
	}
	return devs, nil
}
