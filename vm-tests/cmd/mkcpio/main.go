// Command mkcpio writes an initramfs: a cpio archive in the "newc" format
// the Linux kernel unpacks (Documentation/driver-api/early-userspace/
// buffer-format.rst), without root and without cpio(1).
//
// Usage:
//
//	mkcpio [-tree DIR] [-o FILE] [DEST=SRC ...]
//
// Each DEST=SRC argument adds the host file SRC at DEST inside the archive
// (mode from SRC, owner root); a SRC that is a directory is added with
// everything below it. -tree DIR adds a whole directory as the root of the
// archive, keeping owners, modes, symbolic links and hard links, and
// skipping device nodes, sockets and FIFOs (devtmpfs supplies /dev in the
// guest). Parent directories are added as needed (mode 0755, owner root),
// and every archive carries /dev/console (c 5 1), which the kernel opens as
// the stdio of /init before anything is mounted, and the mount points /dev,
// /proc, /sys and /tmp.
//
// Archives concatenate: the kernel unpacks one after another into the same
// root, so a large cached root filesystem and a small per-run archive with
// /init and the test binaries can be joined with cat.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "mkcpio:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fl := flag.NewFlagSet("mkcpio", flag.ContinueOnError)
	out := fl.String("o", "-", "output `file` (- for stdout)")
	tree := fl.String("tree", "", "add `dir` as the archive's root, keeping owners and links")
	noBase := fl.Bool("no-base", false, "do not add /dev/console and the mount points")
	if err := fl.Parse(args); err != nil {
		return err
	}
	var w io.Writer = os.Stdout
	var f *os.File
	if *out != "-" {
		var err error
		if f, err = os.Create(*out); err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	a := newArchive(bw)
	if !*noBase {
		for _, d := range []string{"dev", "proc", "sys", "tmp"} {
			a.dir(d, 0o755, 0, 0)
		}
		if err := a.add(entry{name: "dev/console", mode: syscall.S_IFCHR | 0o600, rmajor: 5, rminor: 1}); err != nil {
			return err
		}
	}
	if *tree != "" {
		if err := a.addTree(*tree); err != nil {
			return err
		}
	}
	for _, arg := range fl.Args() {
		dest, src, ok := strings.Cut(arg, "=")
		if !ok || dest == "" || src == "" {
			return fmt.Errorf("argument %q: want DEST=SRC", arg)
		}
		if err := a.addPath(clean(dest), src); err != nil {
			return err
		}
	}
	if err := a.close(); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if f != nil {
		return f.Close()
	}
	return nil
}

// clean turns an archive path into the form the kernel expects: relative,
// no "." or ".." elements.
func clean(p string) string {
	return strings.TrimPrefix(path.Clean("/"+p), "/")
}

// entry is one cpio member. Regular files carry their data as a host path.
type entry struct {
	name           string
	mode           uint32 // file type and permission bits, as in stat(2)
	uid, gid       uint32
	nlink          uint32
	mtime          uint32
	rmajor, rminor uint32
	ino            uint32
	src            string // regular files: the host file
	size           int64
	link           string // symbolic links: the target
}

// archive writes newc members; it remembers the directories already
// written so that parents are added once.
type archive struct {
	w    io.Writer
	off  int64
	ino  uint32
	dirs map[string]bool
	// hard links from -tree: host (dev, ino) to the archive inode number.
	links map[[2]uint64]uint32
	// err is the first error of a directory added on the way; close
	// returns it.
	err error
}

func newArchive(w io.Writer) *archive {
	return &archive{w: w, ino: 1, dirs: map[string]bool{"": true}, links: map[[2]uint64]uint32{}}
}

// dir adds directory name and its missing parents.
func (a *archive) dir(name string, perm, uid, gid uint32) {
	if a.dirs[name] {
		return
	}
	a.parents(name)
	a.dirs[name] = true
	if err := a.add(entry{name: name, mode: syscall.S_IFDIR | perm, uid: uid, gid: gid, nlink: 2}); err != nil && a.err == nil {
		a.err = err
	}
}

func (a *archive) parents(name string) {
	if p := path.Dir(name); p != "." && p != "/" {
		a.dir(p, 0o755, 0, 0)
	}
}

// add writes one member's header and data.
func (a *archive) add(e entry) error {
	if e.ino == 0 {
		a.ino++
		e.ino = a.ino
	}
	if e.nlink == 0 {
		e.nlink = 1
	}
	var data io.Reader
	switch e.mode & syscall.S_IFMT {
	case syscall.S_IFREG:
		if e.src != "" {
			f, err := os.Open(e.src)
			if err != nil {
				return err
			}
			defer f.Close()
			st, err := f.Stat()
			if err != nil {
				return err
			}
			e.size = st.Size()
			data = f
		}
	case syscall.S_IFLNK:
		e.size = int64(len(e.link))
		data = strings.NewReader(e.link)
	}
	if e.size > 0xffffffff {
		return fmt.Errorf("%s: %d bytes is too large for newc", e.name, e.size)
	}
	name := e.name + "\x00"
	hdr := fmt.Sprintf("070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
		e.ino, e.mode, e.uid, e.gid, e.nlink, e.mtime, e.size,
		0, 0, e.rmajor, e.rminor, len(name), 0)
	if err := a.write([]byte(hdr + name)); err != nil {
		return err
	}
	if err := a.pad(); err != nil {
		return err
	}
	if data != nil {
		n, err := io.CopyN(a.w, data, e.size)
		a.off += n
		if err != nil {
			return fmt.Errorf("%s: %w", e.name, err)
		}
		if err := a.pad(); err != nil {
			return err
		}
	}
	return nil
}

func (a *archive) write(b []byte) error {
	n, err := a.w.Write(b)
	a.off += int64(n)
	return err
}

// pad aligns the stream to 4 bytes, as newc requires after the name and
// after the data.
func (a *archive) pad() error {
	if r := a.off % 4; r != 0 {
		return a.write(make([]byte, 4-r))
	}
	return nil
}

// close writes the trailer and pads the archive to 512 bytes, so that
// archives can be concatenated.
func (a *archive) close() error {
	if a.err != nil {
		return a.err
	}
	if err := a.add(entry{name: "TRAILER!!!", ino: 0}); err != nil {
		return err
	}
	if r := a.off % 512; r != 0 {
		return a.write(make([]byte, 512-r))
	}
	return nil
}

// addPath adds src at dest, owned by root; a directory recursively.
func (a *archive) addPath(dest, src string) error {
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		a.parents(dest)
		return a.add(entry{name: dest, mode: syscall.S_IFREG | uint32(st.Mode().Perm()), src: src})
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		name := clean(path.Join(dest, filepath.ToSlash(rel)))
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			a.dir(name, uint32(info.Mode().Perm()), 0, 0)
		case info.Mode().IsRegular():
			a.parents(name)
			return a.add(entry{name: name, mode: syscall.S_IFREG | uint32(info.Mode().Perm()), src: p})
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			a.parents(name)
			return a.add(entry{name: name, mode: syscall.S_IFLNK | 0o777, link: target})
		}
		return nil
	})
}

// addTree adds root as the archive's root, keeping owners, modes and links.
// Entries are written in sorted order so that the archive is reproducible.
func (a *archive) addTree(root string) error {
	var paths []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != root {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(paths)
	for _, p := range paths {
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return &fs.PathError{Op: "lstat", Path: p, Err: err}
		}
		rel, _ := filepath.Rel(root, p)
		name := filepath.ToSlash(rel)
		e := entry{name: name, mode: st.Mode, uid: st.Uid, gid: st.Gid, mtime: uint32(st.Mtim.Sec)}
		switch st.Mode & syscall.S_IFMT {
		case syscall.S_IFDIR:
			if a.dirs[name] {
				continue // a mount point added above
			}
			a.dirs[name] = true
			e.nlink = 2
		case syscall.S_IFREG:
			if st.Nlink > 1 {
				// newc hard links: members with equal inode number and
				// nlink > 1 are one file. The data travels with the first
				// (the kernel's maybe_link links the later, empty ones to
				// it, init/initramfs.c).
				key := [2]uint64{st.Dev, st.Ino}
				if ino, ok := a.links[key]; ok {
					e.ino, e.nlink = ino, uint32(st.Nlink)
					if err := a.add(e); err != nil {
						return err
					}
					continue
				}
				a.ino++
				a.links[key] = a.ino
				e.ino, e.nlink = a.ino, uint32(st.Nlink)
			}
			e.src = p
		case syscall.S_IFLNK:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			e.link = target
		default:
			continue // devices, sockets, FIFOs
		}
		if err := a.add(e); err != nil {
			return err
		}
	}
	return nil
}
