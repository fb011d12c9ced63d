package landlock

import (
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// OS returns the running system's filesystem as the planner's FS.
func OS() FS { return osFS{} }

type osFS struct{}

func (osFS) Lstat(path string) (Info, error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return Info{}, &fs.PathError{Op: "lstat", Path: path, Err: err}
	}
	return Info{Type: modeType(st.Mode), Dev: st.Dev, Ino: st.Ino, Nlink: st.Nlink}, nil
}

func modeType(mode uint32) FileType {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return TypeDir
	case unix.S_IFREG:
		return TypeFile
	case unix.S_IFLNK:
		return TypeSymlink
	}
	return TypeOther
}

func (osFS) ReadDir(path string) ([]DirEntry, error) {
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	out := make([]DirEntry, len(entries))
	for i, e := range entries {
		t := TypeOther
		switch m := e.Type(); {
		case m.IsDir():
			t = TypeDir
		case m.IsRegular():
			t = TypeFile
		case m&fs.ModeSymlink != 0:
			t = TypeSymlink
		}
		out[i] = DirEntry{Name: e.Name(), Type: t}
	}
	return out, nil
}

// pseudoMagic lists the filesystems whose names the kernel makes: no
// policy name pattern can match a file a user put there.
var pseudoMagic = map[int64]string{
	unix.PROC_SUPER_MAGIC:      "proc",
	unix.SYSFS_MAGIC:           "sysfs",
	unix.CGROUP_SUPER_MAGIC:    "cgroup",
	unix.CGROUP2_SUPER_MAGIC:   "cgroup2",
	unix.SECURITYFS_MAGIC:      "securityfs",
	unix.DEBUGFS_MAGIC:         "debugfs",
	unix.TRACEFS_MAGIC:         "tracefs",
	unix.BPF_FS_MAGIC:          "bpf",
	unix.DEVPTS_SUPER_MAGIC:    "devpts",
	unix.PSTOREFS_MAGIC:        "pstore",
	unix.EFIVARFS_MAGIC:        "efivarfs",
	0x62656570 /* configfs */ : "configfs",
	0x65735543 /* fusectl */ :  "fusectl",
	unix.HUGETLBFS_MAGIC:       "hugetlbfs",
	0x19800202 /* mqueue */ :   "mqueue",
	unix.BINFMTFS_MAGIC:        "binfmt_misc",
	unix.SELINUX_MAGIC:         "selinuxfs",
	unix.SMACK_MAGIC:           "smackfs",
	unix.NSFS_MAGIC:            "nsfs",
}

func (osFS) Pseudo(path string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return false
	}
	_, ok := pseudoMagic[int64(st.Type)]
	return ok
}

func (osFS) Resolve(path string) (string, error) { return filepath.EvalSymlinks(path) }
