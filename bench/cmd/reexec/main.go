// Command reexec is the Go reference for the launcher's start-up in `make
// bench`: the least a Go launcher that follows DESIGN.md section 5 pays,
// with none of the work. It starts a second copy of itself the way the
// launcher starts its init stage (a new session, Pdeathsig, a socket at
// fd 3), and that copy execve(2)s PROG. No policy, no plan, no Landlock:
// two Go runtime start-ups, two forks and two execs.
//
// Usage: reexec PROG [ARG...]
package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
)

const initArg = "__reexec-init"

func main() {
	if len(os.Args) > 2 && os.Args[1] == initArg {
		err := syscall.Exec(os.Args[2], os.Args[2:], os.Environ())
		fmt.Fprintln(os.Stderr, "reexec:", err)
		os.Exit(127)
	}
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: reexec PROG [ARG...]")
		os.Exit(2)
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "reexec:", err)
		os.Exit(125)
	}
	child := os.NewFile(uintptr(fds[1]), "sync")
	cmd := &exec.Cmd{
		Path:        "/proc/self/exe",
		Args:        append([]string{"reexec", initArg}, os.Args[1:]...),
		Stdin:       os.Stdin,
		Stdout:      os.Stdout,
		Stderr:      os.Stderr,
		ExtraFiles:  []*os.File{child},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL},
	}
	runtime.LockOSThread()
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "reexec:", err)
		os.Exit(125)
	}
	child.Close()
	if err := cmd.Wait(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			os.Exit(ee.ExitCode())
		}
		os.Exit(125)
	}
}
