package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is set at link time (-ldflags "-X ...cli.Version=v1.2.3"); without
// it the module version and VCS revision from the build info are shown.
var Version = ""

func (c *command) version(args []string) int {
	if len(args) > 0 {
		c.errorf("version: takes no arguments")
		return ExitFailure
	}
	fmt.Fprintf(c.stdout, "agent-launcher %s (%s, %s/%s)\n", versionString(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return ExitOK
}

func versionString() string {
	if Version != "" {
		return Version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := info.Main.Version
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		v += " " + rev
		if dirty {
			v += "-dirty"
		}
	}
	return v
}
