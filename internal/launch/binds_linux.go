package launch

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agent-launcher/agent-launcher/landlock"
)

// mountProtected enforces the plan's integrity carve-outs (landlock.Bind):
// each protected path is mounted over itself, read-only or as a plain
// pin, at every place a mount of the session's namespace exposes it, so
// that no other name of the same directory tree reaches it writable. The
// floor gives the parent its full grant and relies on these mounts, so any
// failure stops the session; a refusal by the kernel is a ViewError (a
// start without the view protects the paths by sibling rules instead).
//
// The mounts are made with the fd-based API on an O_PATH handle that is
// checked against the inode the planner saw: a path replaced since
// planning is refused, never mounted over blindly. Parents come first: a
// pinned .git is itself a mount that exposes .git/config.
func mountProtected(binds []landlock.Bind) error {
	slices.SortFunc(binds, func(a, b landlock.Bind) int { return strings.Compare(a.Path, b.Path) })
	var table []landlock.Mount // the mount table, read again only when it lacks a mount
	for _, b := range binds {
		fd, err := openChecked(b.Path, b)
		if err != nil {
			return err
		}
		places, err := exposures(fd, b, &table)
		unix.Close(fd)
		if err != nil {
			return err
		}
		for _, place := range places {
			if err := mountOver(place, b); err != nil {
				return err
			}
		}
	}
	return nil
}

// openChecked opens path as an O_PATH handle, without following a final
// symlink, and checks that it is b's inode, of b's type (a directory, or
// a regular file): an inode number alone may be a freed one reused.
func openChecked(path string, b landlock.Bind) (int, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("view: protecting %s: %w", path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("view: protecting %s: %w", path, err)
	}
	want := uint32(unix.S_IFREG)
	if b.Dir {
		want = unix.S_IFDIR
	}
	if st.Dev != b.Dev || st.Ino != b.Ino || st.Mode&unix.S_IFMT != want {
		unix.Close(fd)
		return -1, fmt.Errorf("view: %s was replaced after the floor was planned; start the session again", path)
	}
	return fd, nil
}

// exposures returns every path of the mount namespace that reaches the
// inode fd (the protected path b): for each mount of the same filesystem
// whose root lies at or above it, the place it appears there, when that
// place resolves to the same inode now (a place covered by a later mount
// is out of reach and needs nothing). *table is the mount table, read
// when it lacks the mount fd was opened through (one made since, such as
// a pin above b); the mounts made here need not be in it, as each lies
// at a place an earlier mount of the table already exposed.
func exposures(fd int, b landlock.Bind, table *[]landlock.Mount) ([]string, error) {
	var sx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &sx); err != nil {
		return nil, fmt.Errorf("view: protecting %s: statx: %w", b.Path, err)
	}
	byID := func(m landlock.Mount) bool { return uint64(m.ID) == sx.Mnt_id }
	if !slices.ContainsFunc(*table, byID) {
		text, err := os.ReadFile("/proc/thread-self/mountinfo") // the mount namespace is the calling thread's
		if err != nil {
			return nil, fmt.Errorf("view: protecting %s: %w", b.Path, err)
		}
		if *table, err = landlock.ParseMountinfo(string(text)); err != nil {
			return nil, fmt.Errorf("view: protecting %s: %w", b.Path, err)
		}
	}
	mounts := *table
	// Where the path lies inside its filesystem, from the mount it was
	// opened through.
	i := slices.IndexFunc(mounts, byID)
	if i < 0 {
		return nil, fmt.Errorf("view: protecting %s: its mount %d is not in the mount table", b.Path, sx.Mnt_id)
	}
	home := mounts[i]
	rel, ok := below(b.Path, home.MountPoint)
	if !ok {
		return nil, fmt.Errorf("view: protecting %s: it does not lie below its mount point %s", b.Path, home.MountPoint)
	}
	inFS := joinRel(home.Root, rel)
	places := []string{b.Path}
	for _, m := range mounts {
		if m.Device != home.Device {
			continue
		}
		r, ok := below(inFS, m.Root)
		if !ok {
			continue
		}
		place := joinRel(m.MountPoint, r)
		if slices.Contains(places, place) {
			continue
		}
		var st unix.Stat_t
		if err := unix.Lstat(place, &st); err != nil || st.Dev != b.Dev || st.Ino != b.Ino {
			continue
		}
		places = append(places, place)
	}
	return places, nil
}

// below returns p relative to dir ("" for dir itself) when p is dir or
// lies below it.
func below(p, dir string) (string, bool) {
	switch {
	case p == dir:
		return "", true
	case dir == "/":
		return strings.TrimPrefix(p, "/"), strings.HasPrefix(p, "/")
	}
	rel, ok := strings.CutPrefix(p, dir+"/")
	return rel, ok
}

func joinRel(dir, rel string) string {
	switch {
	case rel == "":
		return dir
	case dir == "/":
		return "/" + rel
	}
	return dir + "/" + rel
}

// mountOver mounts place over itself with b's attributes: a detached
// clone of it (open_tree), its attributes set before it is attached
// (mount_setattr), then moved onto the very inode it came from
// (move_mount), which is checked again afterwards through the new mount.
func mountOver(place string, b landlock.Bind) error {
	fd, err := openChecked(place, b)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	tree, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
	if err != nil {
		return &ViewError{fmt.Sprintf("protecting %s: open_tree: %v", place, err)}
	}
	defer unix.Close(tree)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if b.ReadOnly {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
	}
	if b.NoExec {
		attr.Attr_set |= unix.MOUNT_ATTR_NOEXEC
	}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		return &ViewError{fmt.Sprintf("protecting %s: mount_setattr: %v", place, err)}
	}
	if err := unix.MoveMount(tree, "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return &ViewError{fmt.Sprintf("protecting %s: move_mount: %v", place, err)}
	}
	// The place now resolves through the new mount: the same inode, and
	// read-only where it must be.
	top, err := openChecked(place, b)
	if err != nil {
		return err
	}
	defer unix.Close(top)
	var under, over unix.Statx_t
	if err := errors.Join(unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &under), unix.Statx(top, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &over)); err != nil {
		return fmt.Errorf("view: protecting %s: statx: %w", place, err)
	}
	if under.Mnt_id == over.Mnt_id {
		return fmt.Errorf("view: protecting %s: the mount over it did not take", place)
	}
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(top, &sfs); err != nil {
		return fmt.Errorf("view: protecting %s: %w", place, err)
	}
	if b.ReadOnly && sfs.Flags&unix.ST_RDONLY == 0 {
		return fmt.Errorf("view: protecting %s: the mount over it is not read-only", place)
	}
	return nil
}
