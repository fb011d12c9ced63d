package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agent-launcher/agent-launcher/internal/kernel"
	"github.com/agent-launcher/agent-launcher/internal/launch"
	"github.com/agent-launcher/agent-launcher/landlock"
)

// doctorReport is what doctor finds; its JSON form is schema 1.
type doctorReport struct {
	Schema   int             `json:"schema"`
	Release  string          `json:"kernel_release"`
	Landlock landlock.Kernel `json:"landlock"`
	Seccomp  *kernel.Seccomp `json:"seccomp"`
	UserNS   kernel.UserNS   `json:"user_namespaces"`
	// NoViewEnd is how a session without the private view ends its
	// processes here (a cgroup made and removed to find out).
	NoViewEnd launch.Ending    `json:"no_view_session_end"`
	Root      bool             `json:"root"`
	CapEff    string           `json:"cap_eff"`
	Ladder    []landlock.Row   `json:"ladder"`
	Run       doctorRunVerdict `json:"run"`
	Problems  []string         `json:"problems,omitempty"`
}

type doctorRunVerdict struct {
	Works  bool   `json:"works"`
	Reason string `json:"reason,omitempty"`
}

// doctor reports what this machine offers and whether run will work; exit
// 0 when it will, 1 when it will not, 125 when doctor itself failed.
func (c *command) doctor(args []string) int {
	fs := c.flagSet("doctor")
	jsonOut := fs.Bool("json", false, "")
	pos, status, ok := c.parse(fs, args)
	if !ok {
		return status
	}
	if len(pos) > 0 {
		c.errorf("doctor: unexpected argument %q; doctor takes only --json", pos[0])
		return ExitFailure
	}
	ctx, cancel := context.WithTimeout(c.ctx, 20*time.Second)
	defer cancel()
	r := doctorReport{Schema: jsonSchema}
	var err error
	if r.Release, err = kernel.Release(); err != nil {
		r.Problems = append(r.Problems, err.Error())
	}
	if r.Landlock, err = c.detectLandlock(); err != nil {
		c.errorf("doctor: %v", err)
		return ExitFailure
	}
	if sc, err := kernel.ProbeSeccomp(ctx); err != nil {
		r.Problems = append(r.Problems, "seccomp probe: "+err.Error())
	} else {
		r.Seccomp = &sc
	}
	if r.UserNS, err = kernel.ProbeUserNS(ctx); err != nil {
		r.Problems = append(r.Problems, "user namespace probe: "+err.Error())
	}
	r.NoViewEnd = launch.ProbeEnding()
	if pr, err := kernel.CurrentPrivileges(); err != nil {
		r.Problems = append(r.Problems, err.Error())
	} else {
		r.Root, r.CapEff = pr.Root, fmt.Sprintf("%#x", pr.CapEff)
	}
	r.Ladder = landlock.Ladder(r.Landlock)
	if err := landlock.RunSupported(r.Landlock); err != nil {
		r.Run.Reason = strings.TrimPrefix(err.Error(), landlock.ErrNoLandlock.Error()+": ")
		if r.Landlock.ABI < 1 {
			r.Run.Reason = "no Landlock: " + r.Run.Reason
		}
	} else {
		r.Run.Works = true
	}
	if *jsonOut {
		writeJSON(c.stdout, r)
	} else {
		writeDoctor(c, &r)
	}
	if !r.Run.Works {
		return 1
	}
	return ExitOK
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func writeDoctor(c *command, r *doctorReport) {
	w := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "kernel\t%s\n", r.Release)
	if r.Landlock.ABI > 0 {
		fmt.Fprintf(w, "Landlock\tABI %d, errata %#x\n", r.Landlock.ABI, r.Landlock.Errata)
	} else {
		fmt.Fprintf(w, "Landlock\tnone: %s\n", r.Landlock.Reason)
	}
	if s := r.Seccomp; s != nil {
		fmt.Fprintf(w, "seccomp user-notify\t%s (listener %s)\n", yes(s.UserNotif), yes(s.NewListener))
		fmt.Fprintf(w, "  ADDFD\t%s\n  ADDFD_FLAG_SEND\t%s\n  WAIT_KILLABLE_RECV\t%s\n  SYNC_WAKE_UP\t%s\n  TSYNC_ESRCH\t%s\n",
			yes(s.AddFD), yes(s.AddFDSend), yes(s.WaitKillableRecv), yes(s.SyncWakeUp), yes(s.TsyncESRCH))
	} else {
		fmt.Fprintf(w, "seccomp user-notify\tunknown (the probe failed)\n")
	}
	if r.UserNS.Available {
		fmt.Fprintf(w, "user namespaces\tyes\n")
	} else {
		fmt.Fprintf(w, "user namespaces\tno: %s\n", r.UserNS.Reason)
	}
	fmt.Fprintf(w, "without a private view\tprocesses end with the session: %s\n", r.NoViewEnd)
	priv := "ordinary user"
	if r.Root {
		priv = "root (agents should not run as root)"
	} else if r.CapEff != "0x0" {
		priv = "capabilities " + r.CapEff + " (agents should run without)"
	}
	fmt.Fprintf(w, "running as\t%s\n", priv)
	w.Flush()
	fmt.Fprintf(c.stdout, "\nkernel ladder (DESIGN.md section 7); rows marked * apply here:\n")
	w = tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	for _, row := range r.Ladder {
		mark := " "
		if row.Applies {
			mark = "*"
		}
		fmt.Fprintf(w, "%s %s\t%s\t%s\n", mark, row.ABIs, row.Change, row.Status)
	}
	w.Flush()
	for _, p := range r.Problems {
		fmt.Fprintf(c.stdout, "\nproblem: %s\n", p)
	}
	if r.Run.Works {
		fmt.Fprintf(c.stdout, "\nrun: works here (Landlock floor with scopes)\n")
	} else {
		fmt.Fprintf(c.stdout, "\nrun: will refuse here: %s\n", r.Run.Reason)
	}
}
