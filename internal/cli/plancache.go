package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/agent-launcher/agent-launcher/internal/launch"
	"github.com/agent-launcher/agent-launcher/internal/wire"
	"github.com/agent-launcher/agent-launcher/landlock"
)

// The plan cache: run keeps the floor it planned, with every answer the
// filesystem gave the planner (landlock.Observations), under a key that
// digests everything else the plan depends on. The next run with the same
// key asks the filesystem the same questions again; when every answer is
// the same, planning again would give the same plan, so the kept one is
// used. Asking costs a few hundred lstat and getdents calls; planning costs
// the automata's work on every name (DESIGN.md amendments, "Start-up").
//
// What a stale entry could cost is a hole, so the entry is used only when
// every answer matches; the entries live in the launcher's state
// directory, which the built-in denylist keeps from every agent; and any
// doubt (a key that cannot be made, an entry that does not decode, a
// filesystem that changed while planning) plans afresh.

// planCacheVar, set to 0, makes run plan afresh every time and keep
// nothing (to measure planning, or to rule the cache out).
const planCacheVar = "AGENT_LAUNCHER_PLAN_CACHE"

// planCacheFormat changes whenever the entry's layout or what the key
// digests changes.
const planCacheFormat = "agent-launcher plan cache v5"

// maxPlanEntries bounds the entries kept, plans and review walk indexes
// (one of each per workspace, agent and policy in use); the least recently
// written go first.
const maxPlanEntries = 64

// maxPlanEntry bounds an entry read back.
const maxPlanEntry = 16 << 20

// An entry is planCacheFormat and a newline, then four fields, each its
// length (uvarint) and its bytes: the key, the observations
// (landlock.Observations.MarshalBinary), the plan (landlock.EncodePlan)
// and the notes (internal/wire).

func encodePlanEntry(key string, obs landlock.Observations, pl *landlock.Plan, notes []string) ([]byte, error) {
	ob, err := obs.MarshalBinary()
	if err != nil {
		return nil, err
	}
	pb, err := landlock.EncodePlan(pl)
	if err != nil {
		return nil, err
	}
	nb, err := wire.Append(nil, notes)
	if err != nil {
		return nil, err
	}
	b := []byte(planCacheFormat + "\n")
	for _, f := range [][]byte{[]byte(key), ob, pb, nb} {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	return b, nil
}

func decodePlanEntry(b []byte) (key string, obs landlock.Observations, pl *landlock.Plan, notes []string, err error) {
	bad := errors.New("plan cache: malformed entry")
	rest, ok := bytes.CutPrefix(b, []byte(planCacheFormat+"\n"))
	if !ok {
		return "", nil, nil, nil, bad
	}
	var fields [4][]byte
	for i := range fields {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)-k) {
			return "", nil, nil, nil, bad
		}
		fields[i], rest = rest[k:k+int(n)], rest[k+int(n):]
	}
	if len(rest) != 0 {
		return "", nil, nil, nil, bad
	}
	if err := obs.UnmarshalBinary(fields[1]); err != nil {
		return "", nil, nil, nil, err
	}
	if pl, err = landlock.DecodePlan(fields[2]); err != nil {
		return "", nil, nil, nil, err
	}
	if err := wire.Decode(fields[3], &notes); err != nil {
		return "", nil, nil, nil, err
	}
	return string(fields[0]), obs, pl, notes, nil
}

// planKey digests what a plan depends on besides the filesystem's answers:
// the launcher's binary (its planner), the user, the ABI, the canary, the
// roots, the private view and the whole policy (every field: patterns as
// expanded, kinds, tiers, sources).
func (e *env) planKey(p *compiled, abi int, canary string) (string, error) {
	c, err := currentCreds()
	if err != nil {
		return "", err
	}
	return e.planKeyAs(c, p, abi, canary)
}

// creds are the credentials a plan's answers depend on: which listings
// fail depends on them, and a listing's stamp does not change when the
// operator's groups do.
type creds struct {
	uid, gid, euid, egid int
	groups               []int
}

func currentCreds() (creds, error) {
	groups, err := os.Getgroups()
	return creds{os.Getuid(), os.Getgid(), os.Geteuid(), os.Getegid(), groups}, err
}

// planKeyAs is planKey for the credentials c.
func (e *env) planKeyAs(c creds, p *compiled, abi int, canary string) (string, error) {
	var self syscall.Stat_t
	if err := syscall.Stat("/proc/self/exe", &self); err != nil {
		return "", err
	}
	h := sha256.New()
	field := func(b []byte) {
		fmt.Fprintf(h, "%d:", len(b))
		h.Write(b)
	}
	field([]byte(planCacheFormat))
	field(fmt.Appendf(nil, "exe %d %d %d %d.%d %d.%d", self.Dev, self.Ino, self.Size,
		self.Mtim.Sec, self.Mtim.Nsec, self.Ctim.Sec, self.Ctim.Nsec))
	field(fmt.Appendf(nil, "uid %d gid %d euid %d egid %d groups %v abi %d", c.uid, c.gid, c.euid, c.egid, c.groups, abi))
	field([]byte(canary))
	field([]byte(e.home))
	field([]byte(e.workspace))
	field([]byte(p.name))
	// The view and the whole policy, every field, in internal/wire's
	// form: encoding/json spent 1.5-2 ms of a run on the policy, building
	// an encoder for every rule.
	if err := wire.Write(h, e.view); err != nil {
		return "", err
	}
	if err := wire.Write(h, p.pol); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

type planCache struct{ dir string }

func (e *env) planCache() planCache {
	return planCache{dir: filepath.Join(e.launcher.StateDir, "plans")}
}

// get returns the plan kept under key when the filesystem still answers
// every question as it did; fsys is the filesystem the plan was made on
// (landlock.OS(), the host's: the recorder sat below the view).
func (c planCache) get(key string, fsys landlock.FS) (*landlock.Plan, []string, bool) {
	pl, notes, obs, ok := c.kept(key)
	if !ok || !holds(obs, fsys) {
		return nil, nil, false
	}
	return pl, notes, true
}

// kept returns the plan kept under key and the questions to the
// filesystem it depends on, not asked yet (holds asks them).
func (c planCache) kept(key string) (*landlock.Plan, []string, landlock.Observations, bool) {
	d, err := openEntryDir(c.dir, false)
	if err != nil {
		return nil, nil, nil, false
	}
	defer d.close()
	b, ok := d.read(key, maxPlanEntry)
	if !ok {
		return nil, nil, nil, false
	}
	k, obs, pl, notes, err := decodePlanEntry(b)
	if err != nil || k != key || len(obs) == 0 {
		return nil, nil, nil, false
	}
	launch.Trace("floor: kept plan read (%d questions)", len(obs))
	return pl, notes, obs, true
}

// splitObservations splits obs into the questions about paths in or
// below one of roots, and the others.
func splitObservations(obs landlock.Observations, roots ...string) (in, out landlock.Observations) {
	var prefixes []string
	for _, r := range roots {
		if r != "" {
			prefixes = append(prefixes, strings.TrimSuffix(r, "/")+"/")
		}
	}
	below := func(p string) bool {
		for _, pre := range prefixes {
			if p == pre[:len(pre)-1] || strings.HasPrefix(p, pre) {
				return true
			}
		}
		return false
	}
	// Both halves in one array of the right size: several hundred
	// questions, where appends grew two arrays by copying.
	n := 0
	for _, o := range obs {
		if below(o.Path) {
			n++
		}
	}
	all := make(landlock.Observations, 0, len(obs))
	in, out = all[:0:n], all[n:n]
	for _, o := range obs {
		if below(o.Path) {
			in = append(in, o)
		} else {
			out = append(out, o)
		}
	}
	return in, out
}

// holds asks obs of fsys again: whether a kept plan still holds.
func holds(obs landlock.Observations, fsys landlock.FS) bool {
	if obs.Hold(fsys) {
		return true
	}
	if launch.Tracing() {
		// Which answers changed, asked once more: only for the trace.
		for _, o := range obs {
			if !(landlock.Observations{o}).Hold(fsys) {
				launch.Trace("floor: the kept plan does not hold: %s", o)
			}
		}
	}
	return false
}

// walkIndexName is the name of the review walk's index kept beside the
// plan of key.
func walkIndexName(key string) string { return key + ".walk" }

// maxWalkIndex bounds an index read back.
const maxWalkIndex = 64 << 20

// walkIndex returns the review walk's index kept under key, nil when
// there is none (or key is "").
func (c planCache) walkIndex(key string) *walkIndex {
	if key == "" {
		return nil
	}
	d, err := openEntryDir(c.dir, false)
	if err != nil {
		return nil
	}
	defer d.close()
	b, ok := d.read(walkIndexName(key), maxWalkIndex)
	if !ok {
		return nil
	}
	var idx walkIndex
	if wire.Decode(b, &idx) != nil {
		return nil
	}
	return &idx
}

// putWalkIndex keeps idx under key, unless the one kept is the same
// (most sessions change nothing it records: no write then); failures are
// silent, as put's.
func (c planCache) putWalkIndex(key string, idx *walkIndex) {
	if key == "" || idx == nil {
		return
	}
	b, err := wire.Append(nil, *idx)
	if err != nil {
		return
	}
	if d, err := openEntryDir(c.dir, false); err == nil {
		old, ok := d.read(walkIndexName(key), maxWalkIndex)
		d.close()
		if ok && bytes.Equal(old, b) {
			return
		}
	}
	storeEntry(c.dir, walkIndexName(key), b, maxPlanEntries)
}

// put keeps pl, planned on obs, under key. Failures are silent: a miss
// only costs planning.
func (c planCache) put(key string, obs landlock.Observations, pl *landlock.Plan, notes []string) {
	if b, err := encodePlanEntry(key, obs, pl, notes); err == nil {
		storeEntry(c.dir, key, b, maxPlanEntries)
	}
}

// settle keeps the plan under key again with the stamps its recording
// could not take, when there are any to add now (Observations.Settle).
func (c planCache) settle(key string, obs landlock.Observations, pl *landlock.Plan, notes []string) {
	if up, n := obs.Settle(landlock.OS()); n > 0 {
		c.put(key, up, pl, notes)
		launch.Trace("floor: %d answers of the kept plan stamped", n)
	}
}

// planFloorCached is planFloor for run: the kept plan when the filesystem
// still answers as it did, else a new plan, kept for the next run when it
// depends on nothing but the key and the answers. cached says which.
func (e *env) planFloorCached(p *compiled, abi int, canary string) (pl *landlock.Plan, notes []string, cached bool, err error) {
	pl, notes, hold, err := e.planFloorUnchecked(p, abi, canary)
	if err != nil || hold == nil {
		return pl, notes, false, err
	}
	if hold() {
		return pl, notes, true, nil
	}
	return e.planFloorFresh(p, abi, canary)
}

// planFloorUnchecked is planFloorCached without the check that a kept
// plan holds: it returns the kept plan with hold, which asks whether the
// filesystem still answers as it did, not yet asked (run sends the plan to
// the init stage meanwhile, and starts nothing unless it holds; else it
// plans afresh: planFloorFresh). hold is nil for a plan made afresh.
func (e *env) planFloorUnchecked(p *compiled, abi int, canary string) (pl *landlock.Plan, notes []string, hold func() bool, err error) {
	if os.Getenv(planCacheVar) == "0" {
		pl, notes, err = e.planFloorAfresh(p, abi, canary)
		return pl, notes, nil, err
	}
	e.keptUnder, e.settleKept = "", nil
	key, kerr := e.keptDirs(p, abi, canary)
	if kerr == nil {
		if pl, notes, obs, ok := e.planCache().kept(key); ok {
			// What sessions change (the workspace, the home directory) is
			// asked now: a kept plan that fails there goes nowhere, and
			// the init stage waiting for its configuration gets the plan
			// made afresh. A speculation that fails costs a second init
			// stage (about 5 ms here); the rest of the tree rarely moves.
			now, later := splitObservations(obs, e.workspace, e.home)
			if holds(now, landlock.OS()) {
				return pl, notes, func() bool {
					if !holds(later, landlock.OS()) {
						return false
					}
					launch.Trace("floor: the kept plan holds (%d rules)", len(pl.Rules))
					e.settleKept = func() { e.planCache().settle(key, obs, pl, notes) }
					return true
				}, nil
			}
		}
	}
	pl, notes, _, err = e.planFloorFresh(p, abi, canary)
	return pl, notes, nil, err
}

// planFloorAfresh plans afresh for run when the kept plan was found
// stale: keptDirs, then planFloorFresh, which keeps the new plan.
func (e *env) planFloorAfresh(p *compiled, abi int, canary string) (*landlock.Plan, []string, error) {
	e.keptUnder = ""
	if os.Getenv(planCacheVar) == "0" {
		pl, _, notes, err := e.planFloor(p, abi, canary)
		if err == nil {
			launch.Trace("floor: planned (%d rules; %s=0)", len(pl.Rules), planCacheVar)
		}
		return pl, notes, err
	}
	e.keptDirs(p, abi, canary)
	pl, notes, _, err := e.planFloorFresh(p, abi, canary)
	return pl, notes, err
}

// keptDirs digests the plan key, makes the directories the launcher
// writes in (before anything is planned), and sets keptUnder: the key,
// or an error when no plan can be kept.
func (e *env) keptDirs(p *compiled, abi int, canary string) (string, error) {
	key, kerr := e.planKey(p, abi, canary)
	launch.Trace("floor: plan key digested")
	c := e.planCache()
	// The directories the launcher writes in exist before it plans: made
	// after, they would change the state directory's listing, which the
	// plan depends on (the hard-link check lists it), once.
	if d, err := openEntryDir(c.dir, true); err != nil {
		kerr = err
	} else {
		d.close()
	}
	if err := os.MkdirAll(filepath.Dir(reviewFile(e.launcher.StateDir)), 0o700); err != nil {
		kerr = err
	}
	if kerr == nil {
		e.keptUnder = key
	}
	return key, kerr
}

// planFloorFresh plans the floor afresh and keeps the plan under the
// key keptDirs set, when it depends on nothing but the key and the
// answers (none when keptDirs failed). keptDirs comes first.
func (e *env) planFloorFresh(p *compiled, abi int, canary string) (pl *landlock.Plan, notes []string, cached bool, err error) {
	key := e.keptUnder
	rec := landlock.NewRecorder(landlock.OS())
	pl, _, notes, reusable, err := e.planFloorOn(rec, p, abi, canary)
	if err != nil {
		return nil, notes, false, err
	}
	obs, consistent := rec.Observations()
	launch.Trace("floor: planned (%d rules, %d questions to the filesystem)", len(pl.Rules), len(obs))
	if key != "" && reusable && consistent {
		e.planCache().put(key, obs, pl, notes)
	}
	return pl, notes, false, nil
}
