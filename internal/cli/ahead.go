package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/agent-launcher/agent-launcher/internal/launch"
	"github.com/agent-launcher/agent-launcher/landlock"
)

// The configuration sent ahead. run keeps, beside the plans, a launch
// record for each way it was started: the configuration frame its init
// stage got and the key of the kept plan it came from, under a key that
// digests what run was started with (its arguments, environment, working
// directory, credentials, stdio and binary: launchKey). A run started the
// same way sends that frame to its init stage as soon as the init stage
// starts, before the policy is loaded, and asks the kept plan's questions
// to the filesystem meanwhile: the init stage builds the view and applies
// the floor while the supervisor loads the policy and plans.
//
// The record is a prediction, never trusted. The supervisor still loads
// the policy, plans (the kept plan must still hold, as before) and makes
// the configuration; the agent starts only when that configuration is the
// frame sent ahead, byte for byte (launch.Pending.SendAhead). Otherwise
// the init stage, which started nothing, is killed and a new one gets the
// configuration made now (launch.ErrAheadStale): a changed policy, plan or
// environment costs a second init stage, about 5 ms here, and the record
// is replaced after the session. The record lives in the state directory,
// which the built-in denylist keeps from every agent; one that does not
// decode is ignored.

// launchRecordFormat changes whenever the record's layout or what
// launchKey digests changes.
const launchRecordFormat = "agent-launcher launch record 1"

// launchRecordDir is the directory of the launch records, beside the
// plans': made before anything is planned (keptDirs), as the state
// directory's listing is one of the plans' questions, and bounded on its
// own (maxLaunchRecords), so that records of runs started in ever new
// ways (an environment that changes every time) never push a plan out.
func launchRecordDir(stateDir string) string { return filepath.Join(stateDir, "launch") }

// maxLaunchRecords bounds the launch records kept; the least recently
// written go first.
const maxLaunchRecords = 32

// launchKey digests what run was started with, besides the files it reads:
// args (run's own, flags included), the environment, the working
// directory, the credentials, what fds 0-2 are, and the launcher's binary.
// Any of them may change the configuration; the files it reads (the
// policy, the plan's answers) are checked as before, and the frame itself
// decides.
func launchKey(args []string) string {
	h := sha256.New()
	var n [8]byte
	put := func(s string) {
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	num := func(v uint64) {
		binary.LittleEndian.PutUint64(n[:], v)
		h.Write(n[:])
	}
	put(launchRecordFormat)
	num(uint64(len(args)))
	for _, a := range args {
		put(a)
	}
	env := os.Environ()
	num(uint64(len(env)))
	for _, kv := range env {
		put(kv)
	}
	cwd, _ := os.Getwd()
	put(cwd)
	num(uint64(os.Getuid()))
	num(uint64(os.Getgid()))
	groups, _ := os.Getgroups()
	num(uint64(len(groups)))
	for _, g := range groups {
		num(uint64(g))
	}
	// The stdio fds by what they are (a terminal, a pipe, which file),
	// not by their times, which every write to them moves; the binary by
	// its times too.
	stat := func(st *unix.Stat_t, err error, times bool) {
		if err != nil {
			put(err.Error())
			return
		}
		num(st.Dev)
		num(st.Ino)
		num(uint64(st.Mode))
		num(st.Rdev)
		if times {
			num(uint64(st.Size))
			num(uint64(st.Mtim.Nano()))
			num(uint64(st.Ctim.Nano()))
		}
	}
	for fd := range 3 {
		var st unix.Stat_t
		err := unix.Fstat(fd, &st)
		if typ := st.Mode & unix.S_IFMT; err == nil && (typ == unix.S_IFIFO || typ == unix.S_IFSOCK) {
			// A new pipe or socket every run: only what kind.
			num(uint64(typ))
			continue
		}
		stat(&st, err, false)
	}
	var st unix.Stat_t
	stat(&st, unix.Stat("/proc/self/exe", &st), true)
	return hex.EncodeToString(h.Sum(nil))
}

// encodeLaunchRecord is launchRecordFormat and a newline, then three
// fields, each its length (uvarint) and its bytes: the launch key, the
// plan key and the configuration frame.
func encodeLaunchRecord(key, planKey string, frame []byte) []byte {
	b := append([]byte(launchRecordFormat), '\n')
	for _, f := range [][]byte{[]byte(key), []byte(planKey), frame} {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	return b
}

var errLaunchRecord = errors.New("not a launch record")

func decodeLaunchRecord(b []byte) (key, planKey string, frame []byte, err error) {
	rest, ok := bytes.CutPrefix(b, []byte(launchRecordFormat+"\n"))
	if !ok {
		return "", "", nil, errLaunchRecord
	}
	var fields [3][]byte
	for i := range fields {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)-k) {
			return "", "", nil, errLaunchRecord
		}
		fields[i], rest = rest[k:k+int(n)], rest[k+int(n):]
	}
	if len(rest) != 0 || len(fields[2]) == 0 {
		return "", "", nil, errLaunchRecord
	}
	return string(fields[0]), string(fields[1]), fields[2], nil
}

// ahead is a launch record read back, with its kept plan, whose questions
// are being asked.
type ahead struct {
	key     string // the launch key
	planKey string
	frame   []byte
	plan    *landlock.Plan
	notes   []string
	// held reports whether the kept plan still holds (asked once, from
	// when the record was read).
	held func() bool
}

// readAhead reads the launch record of key and the kept plan it names,
// and starts asking that plan's questions; nil where there is none (or
// the plan cache is off).
func (e *env) readAhead(key string) *ahead {
	if os.Getenv(planCacheVar) == "0" {
		return nil
	}
	d, err := openEntryDir(launchRecordDir(e.launcher.StateDir), false)
	if err != nil {
		return nil
	}
	b, ok := d.read(key, maxPlanEntry)
	d.close()
	if !ok {
		return nil
	}
	k, planKey, frame, err := decodeLaunchRecord(b)
	if err != nil || k != key || !validEntryName(planKey) {
		return nil
	}
	pl, notes, obs, ok := e.planCache().kept(planKey)
	if !ok {
		return nil
	}
	held := make(chan bool, 1)
	go func() { held <- holds(obs, landlock.OS()) }()
	return &ahead{key: key, planKey: planKey, frame: frame, plan: pl, notes: notes,
		held: sync.OnceValue(func() bool { return <-held })}
}

// putLaunchRecord keeps frame, the configuration of a session whose plan
// is kept under planKey, as the launch record of key, unless a is that
// record already. Failures are silent: a miss costs only the time the
// record saves.
func (e *env) putLaunchRecord(key, planKey string, frame []byte, a *ahead) {
	if key == "" || planKey == "" || len(frame) == 0 {
		return
	}
	if a != nil && a.key == key && a.planKey == planKey && bytes.Equal(a.frame, frame) {
		return
	}
	storeEntry(launchRecordDir(e.launcher.StateDir), key, encodeLaunchRecord(key, planKey, frame), maxLaunchRecords)
	launch.Trace("launch record kept (%s bytes)", strconv.Itoa(len(frame)))
}
