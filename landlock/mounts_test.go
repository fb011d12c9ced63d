package landlock

import (
	"errors"
	"testing"
)

const mountinfoText = `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
23 22 0:5 / /proc rw - proc proc rw
40 22 8:1 /home/u /mnt/home\040copy rw,relatime shared:1 - ext4 /dev/sda1 rw
41 22 8:1 /home/u/.ssh /srv/keys rw - ext4 /dev/sda1 rw
42 22 8:2 / /data rw - ext4 /dev/sdb1 rw
`

func TestCheckMounts(t *testing.T) {
	mounts, err := ParseMountinfo(mountinfoText)
	if err != nil || len(mounts) != 5 || mounts[2].MountPoint != "/mnt/home copy" {
		t.Fatalf("ParseMountinfo: %v %+v", err, mounts)
	}
	if mounts[0].FSType != "ext4" || mounts[1].FSType != "proc" {
		t.Errorf("file system types (after optional fields): %q %q", mounts[0].FSType, mounts[1].FSType)
	}
	prot := []Protected{{Path: "/home/u/.ssh", Type: TypeDir, Tier: 0}}
	for _, c := range []struct {
		name  string
		rules []Rule
		alias string
	}{
		{"no grant reaches a copy", []Rule{{Path: "/usr", Dir: true}}, ""},
		{"the bind of the home is granted", []Rule{{Path: "/mnt/home copy", Dir: true}}, "/mnt/home copy/.ssh"},
		{"a file inside the copy is granted", []Rule{{Path: "/mnt/home copy/.ssh/id_rsa"}}, "/mnt/home copy/.ssh"},
		{"the bind of the protected tree itself is granted", []Rule{{Path: "/srv", Dir: true}}, "/srv/keys"},
		{"another filesystem", []Rule{{Path: "/data", Dir: true}}, ""},
	} {
		err := CheckMounts(&Plan{Protected: prot, Rules: c.rules}, mounts)
		var ae *AliasError
		switch {
		case c.alias == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.alias != "" && (!errors.As(err, &ae) || ae.Alias != c.alias):
			t.Errorf("%s: err = %v, want alias %s", c.name, err, c.alias)
		}
	}
}

// TestParseMountinfoOnlySpaces: the kernel escapes a space, a tab, a
// newline and a backslash in mountinfo's paths, nothing else, so fields
// are split at spaces alone: a mount point holding a carriage return, a
// vertical tab, a form feed or a no-break space is one path (the init
// stage's C parser reads the table so; a planner that split there read
// another table, and could miss a mount that exposes a protected path).
func TestParseMountinfoOnlySpaces(t *testing.T) {
	for _, odd := range []string{"\r", "\v", "\f", "\u00a0", "\u0085"} {
		text := "50 22 8:1 /home/u /mnt/a" + odd + "b rw - ext4 /dev/sda1 rw\n"
		mounts, err := ParseMountinfo(text)
		if err != nil || len(mounts) != 1 || mounts[0].MountPoint != "/mnt/a"+odd+"b" || mounts[0].Root != "/home/u" || mounts[0].FSType != "ext4" {
			t.Errorf("a mount point with %q: %+v, %v", odd, mounts, err)
		}
	}
}
