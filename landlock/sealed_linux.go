package landlock

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// sealed reports whether the file permissions alone keep the agent from
// every access to path: reading, writing, executing (a directory: listing,
// entering, changing it), and removing or renaming it. The agent runs with
// this process's user and groups, without capabilities and with
// no_new_privs (so no set-user-ID program runs as another user for it), in
// a user namespace that maps the ids 1:1: what the mode bits refuse this
// process without a capability, they refuse the agent. The check is the
// kernel's own for a file without an ACL (its owner's, group's or others'
// bits, whichever apply), computed from lstat, not asked of access(2):
// that would also count a security module's refusal of this process,
// which the agent's program may not share.
//
// It is false, and the floor keeps its rule:
//   - for root, a process with any capability (effective, permitted or
//     inheritable), or one in a user namespace of its own (where every
//     group it does not map looks alike);
//   - on a filesystem where the kernel's check of the mode bits is not the
//     whole check (FUSE, NFS, procfs: modeChecked);
//   - for a file of this user (its owner may chmod it), a symlink, or a
//     file with a POSIX ACL;
//   - when the parent directory is this user's, writable by it, setgid or
//     with a default ACL (either decides the permissions of a file made
//     there later), or a directory above it lets this user move it (not
//     sticky and writable by it, or its own).
//
// A path that does not exist is sealed when its first existing ancestor
// passes the parent's checks: the agent cannot make it, and what appears
// there later is root's, with root's permissions.
func (osFS) sealed(path string) bool {
	cred, ok := processCredentials()
	if !ok {
		return false
	}
	var st unix.Stat_t
	err := unix.Lstat(path, &st)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
			err := unix.Lstat(dir, &st)
			if err == nil {
				return cred.keeps(dir, &st)
			}
			if !errors.Is(err, unix.ENOENT) || dir == "/" {
				return false
			}
		}
	}
	if err != nil {
		return false
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG, unix.S_IFDIR:
	default:
		return false
	}
	if !modeChecked(path) || !cred.refused(path, &st, unix.S_IROTH|unix.S_IWOTH|unix.S_IXOTH) {
		return false
	}
	dir := filepath.Dir(path)
	return unix.Lstat(dir, &st) == nil && cred.keeps(dir, &st)
}

// keeps reports whether dir, of stat st, is a directory whose entries c
// cannot change, with no default ACL (which would give a file made there
// later an ACL of its own), below directories that do not let c move or
// replace it: each of them not c's, and not writable by c or sticky.
func (c credentials) keeps(dir string, st *unix.Stat_t) bool {
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Mode&unix.S_ISGID != 0 || !modeChecked(dir) || !c.refused(dir, st, unix.S_IWOTH) {
		return false
	}
	if !noXattr(dir, "system.posix_acl_default") {
		return false
	}
	for a := filepath.Dir(dir); ; a = filepath.Dir(a) {
		var ast unix.Stat_t
		if unix.Lstat(a, &ast) != nil || ast.Mode&unix.S_IFMT != unix.S_IFDIR || ast.Uid == c.uid {
			return false
		}
		if ast.Mode&unix.S_ISVTX == 0 && !c.refused(a, &ast, unix.S_IWOTH) {
			return false
		}
		if a == "/" {
			return true
		}
	}
}

// modeCheckedFS are the filesystems whose permission check is the kernel's
// own, on the mode bits and POSIX ACLs that lstat and getxattr show: not
// FUSE (its daemon may decide), NFS, CIFS or 9p (the server does), nor the
// kernel's pseudo-filesystems.
var modeCheckedFS = map[int64]bool{
	unix.EXT4_SUPER_MAGIC:      true, // ext2, ext3 and ext4 share it
	unix.XFS_SUPER_MAGIC:       true,
	unix.BTRFS_SUPER_MAGIC:     true,
	unix.F2FS_SUPER_MAGIC:      true,
	unix.TMPFS_MAGIC:           true,
	unix.RAMFS_MAGIC:           true, // an initramfs root
	unix.OVERLAYFS_SUPER_MAGIC: true, // checks the overlay's inode, then the layer's
}

// modeChecked reports whether path lies on a filesystem of modeCheckedFS.
func modeChecked(path string) bool {
	var fs unix.Statfs_t
	return unix.Statfs(path, &fs) == nil && modeCheckedFS[int64(fs.Type)]
}

// credentials are the user and groups the mode bits are checked for.
type credentials struct {
	uid    uint32
	groups []uint32 // the effective group and the supplementary ones
}

// processCredentials is dacCredentials, asked once: a process's ids,
// groups, capabilities and user namespace are the supervisor's for its
// whole run.
var processCredentials = sync.OnceValues(dacCredentials)

// dacCredentials returns this process's credentials, false when the mode
// bits do not bind it, or may not for its agent: root, a capability in any
// of its sets (a permitted one it could raise; the agent drops them all,
// but the supervisor is then not what the agent is), a real user or group
// other than the effective one, or a user namespace of its own.
func dacCredentials() (credentials, bool) {
	uid, gid := os.Geteuid(), os.Getegid()
	if uid == 0 || uid != os.Getuid() || gid != os.Getgid() || !initialUserNS() {
		return credentials{}, false
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if unix.Capget(&hdr, &data[0]) != nil {
		return credentials{}, false
	}
	for _, d := range data {
		if d.Effective|d.Permitted|d.Inheritable != 0 {
			return credentials{}, false
		}
	}
	gs, err := unix.Getgroups()
	if err != nil {
		return credentials{}, false
	}
	c := credentials{uid: uint32(uid), groups: []uint32{uint32(gid)}}
	for _, g := range gs {
		c.groups = append(c.groups, uint32(g))
	}
	return c, true
}

// initialUserNS reports whether this process is in the initial user
// namespace, which maps every id to itself.
func initialUserNS() bool {
	for _, f := range []string{"/proc/self/uid_map", "/proc/self/gid_map"} {
		b, err := os.ReadFile(f)
		if err != nil || !slices.Equal(strings.Fields(string(b)), []string{"0", "0", "4294967295"}) {
			return false
		}
	}
	return true
}

// refused reports whether the bits of st that apply to c (the owner's,
// the group's or the others', as the kernel picks them) give none of
// want (others' bits: S_IROTH, S_IWOTH, S_IXOTH), and st is not c's own
// and has no ACL. A directory refused only writing needs execute for
// nothing: without write its entries cannot change.
func (c credentials) refused(path string, st *unix.Stat_t, want uint32) bool {
	if st.Uid == c.uid {
		return false
	}
	bits := st.Mode & 0o7 // the others'
	if slices.Contains(c.groups, st.Gid) {
		bits = st.Mode >> 3 & 0o7
	}
	if bits&want != 0 {
		return false
	}
	// An ACL decides instead of the group's bits; any ACL keeps the rule.
	return noXattr(path, "system.posix_acl_access")
}

// noXattr reports whether path (not followed) has no extended attribute
// name, or a filesystem without them.
func noXattr(path, name string) bool {
	_, err := unix.Lgetxattr(path, name, nil)
	return errors.Is(err, unix.ENODATA) || errors.Is(err, unix.EOPNOTSUPP)
}
