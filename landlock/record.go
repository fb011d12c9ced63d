package landlock

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/agent-launcher/agent-launcher/internal/wire"
)

// A plan is a function of the policy, the options and the filesystem's
// answers to the planner's questions (FS), nothing else. Recorder keeps
// those answers; a caller that asks every question again later
// (Observations.Hold) and gets the same answers gets the same plan by
// planning again, so it may use the one it kept instead. The answers are
// compared, not timestamps: a change the planner could see is a change
// in an answer, whenever it was made. The one exception is a listing: a
// directory whose stamp (stamp.go) is the one it had when it was listed
// has the same listing, so where the filesystem gives trusted stamps, a
// listing is asked again only when the stamp changed.

// Observation is one question the planner asked of the filesystem and a
// digest of the answer (the error included).
type Observation struct {
	Op   ObsOp    `json:"op"`
	Path string   `json:"path"`
	Sum  [32]byte `json:"sum"`
	// Stamp is, for a listing, the directory's stamp taken just before
	// it was listed, when one was trusted and settled; else zero. For an
	// lstat that found nothing, it is the stamp of Via, the nearest
	// directory above Path that existed, taken before its entry on the
	// way to Path was seen absent (absentStamp), when trusted and
	// settled: while Via keeps it, nothing was made there, and the answer
	// holds. Via without a stamp: that directory had changed just before
	// (Settle stamps it later).
	Stamp Stamp  `json:"stamp"`
	Via   string `json:"via,omitempty"`
}

// ObsOp names an FS method.
type ObsOp byte

const (
	ObsLstat   ObsOp = 'l'
	ObsReadDir ObsOp = 'd'
	ObsPseudo  ObsOp = 'p'
	ObsResolve ObsOp = 'r'
	// ObsLinks is the hard-link check's question (linkStat): of the
	// answer only whether there is more than one link, and then the Info.
	ObsLinks ObsOp = 'n'
	// ObsSealed is FloorPolicy's question whether the file permissions
	// alone keep the agent from a system secret (sealedBy).
	ObsSealed ObsOp = 's'
)

// sealer is an FS that can tell whether the file permissions alone keep
// the agent from a path (osFS.sealed says how).
type sealer interface {
	sealed(path string) bool
}

// sealedBy asks fsys whether the file permissions alone keep the agent
// from path; false where fsys cannot tell.
func sealedBy(fsys FS, path string) bool {
	s, ok := fsys.(sealer)
	return ok && s.sealed(path)
}

// Observations are the questions of one or more planning passes, each once.
type Observations []Observation

// Recorder is an FS that records what the FS it wraps answers. It is safe
// for concurrent use.
type Recorder struct {
	fs FS
	mu sync.Mutex
	// seen maps an operation on a path to the digest of its answer.
	seen map[obsKey][32]byte
	// stamps are the directories' stamps taken before their listings
	// (none when fs stamps nothing), and start the time the recording
	// began, which the stamps must be settled by.
	stamps map[string]Stamp
	start  int64
	// changed: the same question got two answers (the filesystem changed
	// while planning); the record proves nothing.
	changed bool
	// vias are the directories, and their stamps, that stand for the
	// lstats that found nothing (absentStamp); exists remembers which
	// directories on the way exist.
	vias   map[string]viaStamp
	exists map[string]bool
}

// viaStamp is the directory whose stamp stands for an absent path.
type viaStamp struct {
	via   string
	stamp Stamp
}

type obsKey struct {
	op   ObsOp
	path string
}

// NewRecorder returns a Recorder over fsys.
func NewRecorder(fsys FS) *Recorder {
	r := &Recorder{fs: fsys, seen: map[obsKey][32]byte{}, stamps: map[string]Stamp{},
		vias: map[string]viaStamp{}, exists: map[string]bool{}}
	if ds, ok := fsys.(dirStamper); ok {
		r.start = ds.stampNow()
	}
	return r
}

func (r *Recorder) note(op ObsOp, path string, sum [32]byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.noteLocked(op, path, sum)
}

func (r *Recorder) noteLocked(op ObsOp, path string, sum [32]byte) {
	k := obsKey{op, path}
	if old, ok := r.seen[k]; ok && old != sum {
		r.changed = true
	}
	r.seen[k] = sum
}

func (r *Recorder) Lstat(path string) (Info, error) {
	info, err := r.fs.Lstat(path)
	var v viaStamp
	if errors.Is(err, fs.ErrNotExist) {
		v = r.absentStamp(path)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.noteLocked(ObsLstat, path, sumLstat(info, err))
	// A path asked twice keeps a stamp only if both agree.
	if old, ok := r.vias[path]; ok && old != v {
		v = viaStamp{}
	}
	r.vias[path] = v
	return info, err
}

// absentStamp finds the stamp that stands for path's absence, which an
// lstat just reported: the nearest directory above path that exists is
// stamped, and only then is its entry on the way to path, which was
// missing, asked again, both through one descriptor of the directory
// (absentStamper; the OS: osFS.stampAbsent). Missing still, it stays
// missing while the directory keeps that stamp, for nothing is made,
// removed or renamed in a directory without moving its change time
// (stamp.go); and with it every path below it. Nothing when fsys stamps
// nothing, the directory's filesystem is not trusted, or the entry is
// there now; the directory alone, without a stamp, when it changed
// stampSettle or less before the recording began (Settle tries again).
func (r *Recorder) absentStamp(path string) viaStamp {
	as, ok := r.fs.(absentStamper)
	if !ok || !strings.HasPrefix(path, "/") || path == "/" {
		return viaStamp{}
	}
	child := path
	for {
		dir := parentOf(child)
		r.mu.Lock()
		known, seen := r.exists[dir]
		r.mu.Unlock()
		if !seen {
			info, err := r.fs.Lstat(dir)
			known = err == nil && info.Type == TypeDir
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return viaStamp{} // not for this user to search, or no directory: not taken as absent
			}
			r.mu.Lock()
			r.exists[dir] = known
			r.mu.Unlock()
		}
		if known {
			st, stamped, absent := as.stampAbsent(dir, child[strings.LastIndexByte(child, '/')+1:])
			switch {
			case !absent || !stamped:
				return viaStamp{}
			case st.settled(r.start):
				return viaStamp{via: dir, stamp: st}
			}
			return viaStamp{via: dir} // racy: for Settle to try again later
		}
		if dir == "/" {
			return viaStamp{}
		}
		child = dir
	}
}

// Settle adds the stamps a recording could not take: an lstat that found
// nothing, and finds nothing still, gets the stamp of the nearest
// directory above it that exists, where that stamp is settled now
// (absentStamp). A recording leaves a directory changed shortly before it
// without one: the home directory of a launcher's first run, which made
// its state directory there. It returns obs with the stamps added, a
// copy when it added any, and how many it added.
func (obs Observations) Settle(fsys FS) (Observations, int) {
	ds, ok := fsys.(dirStamper)
	if !ok {
		return obs, 0
	}
	r := NewRecorder(fsys)
	out := obs // copied at the first stamp added: most runs add none
	n := 0
	var settled map[string]bool // whether each directory named could be stamped now
	for i, o := range obs {
		if o.Op != ObsLstat || o.Via == "" || o.Stamp != (Stamp{}) {
			continue // only what was absent, and left without a stamp for a racy directory
		}
		ok, seen := settled[o.Via]
		if !seen {
			if settled == nil {
				settled = map[string]bool{}
			}
			st, stamped := ds.dirStamp(o.Via)
			ok = stamped && st.settled(r.start)
			settled[o.Via] = ok
		}
		if !ok {
			continue // still changing: not a question asked for nothing at every run's end
		}
		if info, err := fsys.Lstat(o.Path); !errors.Is(err, fs.ErrNotExist) || sumLstat(info, err) != o.Sum {
			continue // there now, or another answer: the plan's own check says what that means
		}
		if v := r.absentStamp(o.Path); v.stamp != (Stamp{}) {
			if n == 0 {
				out = slices.Clone(obs)
			}
			out[i].Via, out[i].Stamp = v.via, v.stamp
			n++
		}
	}
	return out, n
}

// absentStamper is an FS that stamps a directory and asks whether a name
// is missing from it, the stamp first, through one descriptor (the OS:
// osFS.stampAbsent); stamped is false where the directory's filesystem
// is not trusted. Absences on other FSes get no stamps.
type absentStamper interface {
	stampAbsent(dir, name string) (st Stamp, stamped, absent bool)
}

// parentOf is the directory holding an absolute path's last name.
func parentOf(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

// ReadDir stamps the directory first, then lists it: a change made
// between the two is in the listing or in a later stamp. On the OS both
// come from one descriptor, so that the stamp is the listed directory's
// even when a rename swaps the path meanwhile.
func (r *Recorder) ReadDir(path string) ([]DirEntry, error) {
	entries, st, stamped, err := listStamped(r.fs, path)
	if !stamped || !st.settled(r.start) {
		st = Stamp{}
	}
	sum := sumReadDir(entries, err)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.noteLocked(ObsReadDir, path, sum)
	// A directory listed twice keeps a stamp only if both agree.
	if old, ok := r.stamps[path]; ok && old != st {
		st = Stamp{}
	}
	r.stamps[path] = st
	return entries, err
}

func (r *Recorder) Pseudo(path string) bool {
	p := r.fs.Pseudo(path)
	r.note(ObsPseudo, path, sumPseudo(p))
	return p
}

func (r *Recorder) Resolve(path string) (string, error) {
	t, err := r.fs.Resolve(path)
	r.note(ObsResolve, path, sumResolve(t, err))
	return t, err
}

func (r *Recorder) sealed(path string) bool {
	s := sealedBy(r.fs, path)
	r.note(ObsSealed, path, sumSealed(s))
	return s
}

func (r *Recorder) linkStat(path string) (Info, bool) {
	info, ok := linkStat(r.fs, path)
	r.note(ObsLinks, path, sumLinks(info, ok))
	return info, ok
}

// Observations returns what was recorded, in a stable order, and false
// when the filesystem gave two answers to one question meanwhile.
func (r *Recorder) Observations() (Observations, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(Observations, 0, len(r.seen))
	for k, sum := range r.seen {
		o := Observation{Op: k.op, Path: k.path, Sum: sum}
		switch k.op {
		case ObsReadDir:
			o.Stamp = r.stamps[k.path]
		case ObsLstat:
			v := r.vias[k.path]
			o.Stamp, o.Via = v.stamp, v.via
		}
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return out[i].Op < out[j].Op
	})
	return out, !r.changed
}

// Hold asks fsys every recorded question again and reports whether every
// answer is the recorded one. An unknown operation does not hold. The
// questions are independent system calls: with more than a few hundred,
// they are asked from holdWorkers goroutines at once (fsys must be safe
// for concurrent use, as the OS is), and the first different answer stops
// them all.
func (obs Observations) Hold(fsys FS) bool {
	if len(obs) < 2*holdChunk {
		return obs.hold(fsys, nil)
	}
	var changed atomic.Bool
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range holdWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !changed.Load() {
				i := int(next.Add(holdChunk)) - holdChunk
				if i >= len(obs) {
					return
				}
				if !obs[i:min(i+holdChunk, len(obs))].hold(fsys, &changed) {
					changed.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	return !changed.Load()
}

// holdWorkers and holdChunk: how many goroutines ask at once, and how
// many questions each takes at a time.
const (
	holdWorkers = 2
	holdChunk   = 64
)

// hold asks obs's questions in order; it stops early, false, at the first
// different answer or when stop is set.
func (obs Observations) hold(fsys FS, stop *atomic.Bool) bool {
	var vias map[viaStamp]bool // the directories stamped for absent paths, and whether they keep their stamps
	for _, o := range obs {
		if stop != nil && stop.Load() {
			return false
		}
		var sum [32]byte
		switch o.Op {
		case ObsLstat:
			if o.Via != "" && o.Stamp != (Stamp{}) {
				if vias == nil {
					vias = map[viaStamp]bool{}
				}
				v := viaStamp{o.Via, o.Stamp}
				kept, ok := vias[v]
				if !ok {
					kept = Observation{Op: ObsReadDir, Path: o.Via, Stamp: o.Stamp}.unchangedDir(fsys)
					vias[v] = kept
				}
				if kept {
					continue
				}
			}
			sum = sumLstat(fsys.Lstat(o.Path))
		case ObsReadDir:
			if o.unchangedDir(fsys) {
				continue
			}
			sum = sumReadDir(fsys.ReadDir(o.Path))
		case ObsPseudo:
			sum = sumPseudo(fsys.Pseudo(o.Path))
		case ObsResolve:
			sum = sumResolve(fsys.Resolve(o.Path))
		case ObsLinks:
			sum = sumLinks(linkStat(fsys, o.Path))
		case ObsSealed:
			sum = sumSealed(sealedBy(fsys, o.Path))
		default:
			return false
		}
		if sum != o.Sum {
			return false
		}
	}
	return true
}

// unchangedDir reports whether o, a listing, has a stamp that fsys gives
// the directory still: then its listing is the recorded one (stamp.go).
func (o Observation) unchangedDir(fsys FS) bool {
	if o.Stamp == (Stamp{}) {
		return false
	}
	ds, ok := fsys.(dirStamper)
	if !ok {
		return false
	}
	st, ok := ds.dirStamp(o.Path)
	return ok && st == o.Stamp
}

// The digests: SHA-256 of an unambiguous encoding of every field of the
// answer (a collision would let a changed tree pass for the recorded one,
// so the hash must resist one made on purpose), the error's text included.

// summer collects an answer's encoding, hashed once at the end (sum): no
// hash state and, for most answers, no allocation (the encoding starts in
// a caller's array: sumOf), where Hold asks hundreds of questions.
type summer []byte

// sumOf starts the encoding of an answer to op in buf.
func sumOf(buf *[256]byte, op ObsOp) summer { return append(buf[:0], byte(op)) }

func (s summer) u64(v uint64) summer { return binary.LittleEndian.AppendUint64(s, v) }

func (s summer) str(v string) summer { return append(s.u64(uint64(len(v))), v...) }

func (s summer) err(err error) summer {
	if err == nil {
		return s.u64(0)
	}
	return s.u64(1).str(err.Error())
}

func (s summer) sum() [32]byte { return sha256.Sum256(s) }

func boolU(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func sumLstat(info Info, err error) [32]byte {
	var buf [256]byte
	return sumOf(&buf, ObsLstat).u64(uint64(info.Type)).u64(info.Dev).u64(info.Ino).u64(info.Nlink).u64(boolU(info.View)).err(err).sum()
}

// sumReadDir digests a listing as the other answers are, the encoding
// streamed through the hash a buffer at a time: a listing of a hundred
// names would outgrow one.
func sumReadDir(entries []DirEntry, err error) [32]byte {
	var buf [256]byte
	h := sha256.New()
	s := sumOf(&buf, ObsReadDir).u64(uint64(len(entries)))
	for _, e := range entries {
		if len(s)+len(e.Name)+16 > len(buf) {
			h.Write(s)
			s = s[:0]
			if len(e.Name)+16 > len(buf) {
				h.Write(s.u64(uint64(len(e.Name))))
				h.Write([]byte(e.Name))
				s = s[:0].u64(uint64(e.Type))
				continue
			}
		}
		s = s.str(e.Name).u64(uint64(e.Type))
	}
	h.Write(s.err(err))
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

func sumSealed(s bool) [32]byte {
	var buf [256]byte
	return sumOf(&buf, ObsSealed).u64(boolU(s)).sum()
}

func sumPseudo(p bool) [32]byte {
	var buf [256]byte
	return sumOf(&buf, ObsPseudo).u64(boolU(p)).sum()
}

// sumResolve digests a symlink's resolution as the planner uses it: the
// target, or only that there is none (link ignores the error). The
// planning process's own /proc/PID is written /proc/self: a link through
// /proc/self (/dev/fd, /etc/mtab) resolves into the process that asks,
// which is no property of the filesystem (and not the agent's /proc/self
// either); /dev/stderr into a pipe fails to resolve at all.
func sumResolve(target string, err error) [32]byte {
	var buf [256]byte
	s := sumOf(&buf, ObsResolve)
	if err != nil {
		return s.u64(1).sum()
	}
	return s.u64(0).str(selfProc(target)).sum()
}

// selfProc rewrites a path that starts with "/proc/PID" (this process's)
// as "/proc/self", and one in a task of it, "/proc/PID/task/TID", as
// "/proc/thread-self".
func selfProc(s string) string {
	rest, ok := strings.CutPrefix(s, "/proc/"+strconv.Itoa(os.Getpid()))
	if !ok || rest != "" && rest[0] != '/' {
		return s // another process's, or no /proc path
	}
	if t, ok := strings.CutPrefix(rest, "/task/"); ok {
		n := 0
		for n < len(t) && t[n] >= '0' && t[n] <= '9' {
			n++
		}
		if n > 0 && (n == len(t) || t[n] == '/') {
			return "/proc/thread-self" + t[n:]
		}
	}
	return "/proc/self" + rest
}

func sumLinks(info Info, ok bool) [32]byte {
	var buf [256]byte
	s := sumOf(&buf, ObsLinks).u64(boolU(ok))
	if ok {
		s = s.u64(uint64(info.Type)).u64(info.Dev).u64(info.Ino).u64(info.Nlink).u64(boolU(info.View))
	}
	return s.sum()
}

// String is for test failures.
func (o Observation) String() string {
	return fmt.Sprintf("%c %s %x", o.Op, o.Path, o.Sum[:6])
}

// MarshalBinary encodes obs compactly: per observation its operation, its
// digest, its path with the path's length before it, and a byte that says
// what follows: nothing (0); a listing's stamp (1: device and inode as
// uvarints, seconds and nanoseconds as varints); for an absent path, its
// stamp and the directory it was taken of (2: the stamp, then that path
// with its length), or that directory alone (3), which had no settled
// stamp yet.
func (obs Observations) MarshalBinary() ([]byte, error) {
	b := binary.AppendUvarint(nil, uint64(len(obs)))
	for _, o := range obs {
		b = append(b, byte(o.Op))
		b = append(b, o.Sum[:]...)
		b = binary.AppendUvarint(b, uint64(len(o.Path)))
		b = append(b, o.Path...)
		stamped := o.Stamp != (Stamp{})
		switch {
		case !stamped && o.Via == "":
			b = append(b, 0)
		case o.Via == "":
			b = append(b, 1)
		case stamped:
			b = append(b, 2)
		default:
			b = append(b, 3)
		}
		if stamped {
			b = binary.AppendUvarint(b, o.Stamp.Dev)
			b = binary.AppendUvarint(b, o.Stamp.Ino)
			b = binary.AppendVarint(b, o.Stamp.Sec)
			b = binary.AppendVarint(b, o.Stamp.Nsec)
		}
		if o.Via != "" {
			b = binary.AppendUvarint(b, uint64(len(o.Via)))
			b = append(b, o.Via...)
		}
	}
	return b, nil
}

// UnmarshalBinary decodes what MarshalBinary encoded.
func (obs *Observations) UnmarshalBinary(b []byte) error {
	bad := fmt.Errorf("landlock: observations: truncated or malformed")
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k)/35 { // 35: the least an observation takes
		return bad
	}
	b = b[k:]
	out := make(Observations, 0, n)
	for range n {
		if len(b) < 33 {
			return bad
		}
		o := Observation{Op: ObsOp(b[0])}
		copy(o.Sum[:], b[1:33])
		b = b[33:]
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return bad
		}
		o.Path = string(b[k : k+int(l)])
		b = b[k+int(l):]
		if len(b) < 1 || b[0] > 3 {
			return bad
		}
		kind := b[0]
		b = b[1:]
		stamped, via := kind == 1 || kind == 2, kind == 2 || kind == 3
		if via != (o.Op == ObsLstat && kind != 0) || kind == 1 && o.Op != ObsReadDir {
			return bad
		}
		if stamped {
			var ok [4]bool
			var k int
			o.Stamp.Dev, k = binary.Uvarint(b)
			ok[0], b = k > 0, b[max(k, 0):]
			o.Stamp.Ino, k = binary.Uvarint(b)
			ok[1], b = k > 0, b[max(k, 0):]
			o.Stamp.Sec, k = binary.Varint(b)
			ok[2], b = k > 0, b[max(k, 0):]
			o.Stamp.Nsec, k = binary.Varint(b)
			ok[3], b = k > 0, b[max(k, 0):]
			if ok != [4]bool{true, true, true, true} || o.Stamp == (Stamp{}) {
				return bad
			}
		}
		if via {
			l, k := binary.Uvarint(b)
			if k <= 0 || l == 0 || l > uint64(len(b)-k) {
				return bad
			}
			o.Via = string(b[k : k+int(l)])
			b = b[k+int(l):]
		}
		out = append(out, o)
	}
	if len(b) != 0 {
		return bad
	}
	*obs = out
	return nil
}

// EncodePlan encodes pl whole, every field, for DecodePlan (a plan
// cache): internal/wire's binary form, which a build decodes only when it
// wrote it (the cache's key digests the binary).
func EncodePlan(pl *Plan) ([]byte, error) {
	return wire.Append(nil, pl)
}

// DecodePlan decodes what EncodePlan encoded.
func DecodePlan(b []byte) (*Plan, error) {
	var pl *Plan
	if err := wire.Decode(b, &pl); err != nil {
		return nil, fmt.Errorf("landlock: decoding a plan: %w", err)
	}
	if pl == nil {
		return nil, fmt.Errorf("landlock: decoding a plan: none")
	}
	return pl, nil
}
