package landlock

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/agent-launcher/agent-launcher/rules"
	"github.com/agent-launcher/agent-launcher/tiers"
)

// clone copies the snapshot.
func (m *memFS) clone() *memFS {
	c := &memFS{entries: map[string]Info{}, kids: map[string]map[string]FileType{}, ctime: map[string]int64{}, clock: m.clock}
	for p, i := range m.entries {
		c.entries[p] = i
	}
	for p, t := range m.ctime {
		c.ctime[p] = t
	}
	for d, ks := range m.kids {
		c.kids[d] = map[string]FileType{}
		for n, t := range ks {
			c.kids[d][n] = t
		}
	}
	if m.targets != nil {
		c.targets = map[string]string{}
		for l, t := range m.targets {
			c.targets[l] = t
		}
	}
	return c
}

// remove deletes p and everything below it.
func (m *memFS) remove(p string) {
	for q := range m.entries {
		if q == p || strings.HasPrefix(q, p+"/") {
			delete(m.entries, q)
			delete(m.kids, q)
		}
	}
	if ks := m.kids[path.Dir(p)]; ks != nil {
		delete(ks, path.Base(p))
	}
	m.touch(path.Dir(p))
}

// mutate changes the snapshot as one byte pair says: a new path (as
// fuzzTree makes them), a path removed, a file given another hard link, a
// file replaced by a directory, a symlink pointed somewhere, or a path
// made again (a new inode, as an atomic save makes).
func (m *memFS) mutate(op, x byte) {
	all := m.all()
	pick := all[int(x)%len(all)]
	switch op % 6 {
	case 0:
		root := []string{testWS, testHome, testWS + "/a", testHome + "/.local/state/agent-launcher"}[x%4]
		segs := []string{root}
		for d := 0; d < int(op>>3)%3+1; d++ {
			segs = append(segs, fuzzNames[int(x+byte(d*5)+op)%len(fuzzNames)])
		}
		p := strings.Join(segs, "/")
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if i, ok := m.entries[d]; ok && i.Type != TypeDir {
				return
			}
		}
		if _, ok := m.entries[p]; !ok {
			m.addPath(p + []string{"", "/", "@"}[int(op>>5)%3])
		}
	case 1:
		if pick != "/" {
			m.remove(pick)
		}
	case 2:
		if i := m.entries[pick]; i.Type == TypeFile {
			i.Nlink++
			m.entries[pick] = i
		}
	case 3:
		if i := m.entries[pick]; i.Type == TypeFile {
			m.remove(pick)
			m.addPath(pick + "/")
		}
	case 4:
		if i := m.entries[pick]; i.Type == TypeSymlink {
			if m.targets == nil {
				m.targets = map[string]string{}
			}
			m.targets[pick] = all[int(op)%len(all)]
		}
	case 5:
		if i := m.entries[pick]; pick != "/" && i.Type != TypeDir {
			i.Ino = uint64(len(m.entries)) + 1000
			m.entries[pick] = i
			m.touch(path.Dir(pick)) // renamed over: the directory changed
		}
	}
}

// linkAll gives every file of the snapshot a second hard link.
func (m *memFS) linkAll() {
	for p, i := range m.entries {
		if i.Type == TypeFile {
			i.Nlink = 2
			m.entries[p] = i
		}
	}
}

// planFlow plans fsys as run does: on the policy, or with binds on
// FloorPolicy again until no new unbound path appears (planWithBinds).
func planFlow(whole *tiers.Matcher, abi int, fsys FS, binds bool) (*Plan, error) {
	opts := Options{Canaries: []string{"/home/u/.local/state/agent-launcher"}, ScanRoots: []string{testHome, testWS}}
	if !binds {
		return NewPlan(whole, abi, fsys, opts)
	}
	return planBinds(whole, abi, fsys, opts)
}

// floorMemo caches the floors planFlow compiles, by the policy's JSON
// form: the fuzzer plans the same few floors many times, and compiling
// dominates.
var (
	floorMemoMu sync.Mutex
	floorMemo   = map[string]*tiers.Matcher{}
)

func compileFloorMemo(q *rules.Policy) (*tiers.Matcher, error) {
	b, err := json.Marshal(q)
	if err != nil {
		return nil, err
	}
	for _, r := range q.Rules { // Globs are not in the JSON form
		for _, g := range r.Globs {
			b = fmt.Appendf(b, "\x00%s", g.Text)
		}
		b = append(b, '\x01')
	}
	floorMemoMu.Lock()
	m, ok := floorMemo[string(b)]
	floorMemoMu.Unlock()
	if ok {
		return m, nil
	}
	if m, err = tiers.Compile(q); err != nil {
		return nil, err
	}
	floorMemoMu.Lock()
	floorMemo[string(b)] = m
	floorMemoMu.Unlock()
	return m, nil
}

// replayStats counts, across the property's inputs, the mutated snapshots
// whose answers held and those whose answers did not: a property that
// only ever saw one kind would prove nothing.
type replayStats struct{ held, changed int }

// checkReplay is the plan cache's soundness: a snapshot that gives every
// recorded answer again is planned exactly as the recorded one (so a
// kept plan may stand for planning again), and the unchanged snapshot
// always does.
func checkReplay(t *testing.T, policy, tree, muts []byte, stats *replayStats) {
	m := fuzzMatcher(t, fuzzDoc(policy))
	for _, abi := range []int{1, 7} {
		for _, binds := range []bool{false, true} {
			for _, linked := range []bool{false, true} {
				for _, stamped := range []bool{false, true} {
					base := fuzzTree(tree)
					if linked {
						base.linkAll()
					}
					checkReplayOf(t, m, abi, binds, stamped, base, policy, muts, stats)
				}
			}
		}
	}
}

// checkReplayOf checks the replay property on base; stamped: with
// directory stamps (stampFS), so that Hold lists only the directories
// whose stamps changed.
func checkReplayOf(t *testing.T, m *tiers.Matcher, abi int, binds, stamped bool, base *memFS, policy, muts []byte, stats *replayStats) {
	fsOf := func(m *memFS) FS {
		if stamped {
			return stampFS{m, 20 * stampSettle}
		}
		return m
	}
	rec := NewRecorder(fsOf(base))
	pl, err := planFlow(m, abi, rec, binds)
	if err != nil {
		return // nothing to keep
	}
	obs, consistent := rec.Observations()
	if !consistent {
		t.Fatalf("a snapshot that does not change answered one question twice differently")
	}
	if stamped && !slices.ContainsFunc(obs, func(o Observation) bool { return o.Stamp != Stamp{} }) {
		t.Fatalf("stamped: no listing has a stamp")
	}
	if !obs.Hold(fsOf(base)) {
		t.Fatalf("ABI %d binds %v: the unchanged snapshot does not hold", abi, binds)
	}
	enc, err := EncodePlan(pl)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := DecodePlan(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(kept, pl) {
		t.Fatalf("EncodePlan/DecodePlan lost something:\n%+v\n%+v", pl, kept)
	}
	for i := 0; i+1 < len(muts) && i < 16; i += 2 {
		changed := base.clone()
		changed.mutate(muts[i], muts[i+1])
		if !obs.Hold(fsOf(changed)) {
			stats.changed++
			continue
		}
		stats.held++
		fresh, err := planFlow(m, abi, fsOf(changed), binds)
		if err != nil {
			t.Fatalf("ABI %d binds %v: the answers held after mutation %d,%d but planning fails: %v\npolicy:\n%s\nbefore: %q\nafter:  %q",
				abi, binds, muts[i], muts[i+1], err, fuzzDoc(policy), base.all(), changed.all())
		}
		if !reflect.DeepEqual(fresh, kept) {
			t.Fatalf("ABI %d binds %v: the answers held after mutation %d,%d but the plan differs\npolicy:\n%s\nbefore: %q\nafter:  %q\nkept:\n%s\nfresh:\n%s",
				abi, binds, muts[i], muts[i+1], fuzzDoc(policy), base.all(), changed.all(), kept.Format(), fresh.Format())
		}
	}
}

func fuzzMatcher(t *testing.T, doc string) *tiers.Matcher {
	matchersMu.Lock()
	m, ok := matchers[doc]
	matchersMu.Unlock()
	if !ok {
		m = compile(t, doc)
		matchersMu.Lock()
		matchers[doc] = m
		matchersMu.Unlock()
	}
	return m
}

// The mutations each corpus entry is checked with: one of every kind at a
// spread of paths, and paths added at the places the policies name.
var replayMutations = func() []byte {
	var b []byte
	for x := 0; x < 64; x += 3 {
		for op := 0; op < 40; op += 7 {
			b = append(b, byte(op), byte(x))
		}
	}
	return b
}()

func TestPlanReplay(t *testing.T) {
	var stats replayStats
	for i, c := range planCorpus {
		for j := 0; j+16 <= len(replayMutations); j += 16 {
			t.Run(fmt.Sprint(i, "/", j), func(t *testing.T) {
				checkReplay(t, c.policy, c.tree, replayMutations[j:j+16], &stats)
			})
		}
	}
	t.Logf("mutated snapshots: %d held the answers (planned alike), %d did not", stats.held, stats.changed)
	if stats.held == 0 || stats.changed == 0 {
		t.Fatalf("the property saw only one outcome (held %d, changed %d): it proves nothing", stats.held, stats.changed)
	}
}

func FuzzPlanReplay(f *testing.F) {
	for _, c := range planCorpus {
		f.Add(c.policy, c.tree, replayMutations[:16])
	}
	f.Fuzz(func(t *testing.T, policy, tree, muts []byte) {
		var stats replayStats
		checkReplay(t, policy, tree, muts, &stats)
	})
}

// A new .env in a granted tree: the workspace's listing answers
// differently, and planning again protects it. A file the launcher
// rewrites in its state directory (a new inode, one link) answers alike.
func TestReplayExamples(t *testing.T) {
	m := compile(t, basePolicy)
	base := newMemFS(system...)
	base.addPath("/home/u/.local/state/agent-launcher/review/last.json")
	rec := NewRecorder(base)
	pl, err := planFlow(m, 7, rec, true)
	if err != nil {
		t.Fatal(err)
	}
	obs, _ := rec.Observations()

	withEnv := base.clone()
	withEnv.addPath(testWS + "/src/.env")
	if obs.Hold(withEnv) {
		t.Fatalf("a new %s/src/.env holds the recorded answers", testWS)
	}
	fresh, err := planFlow(m, 7, withEnv, true)
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(fresh, pl) {
		t.Fatalf("control: planning again with the new .env gives the same plan, so this example shows nothing")
	}

	rewritten := base.clone()
	rewritten.remove("/home/u/.local/state/agent-launcher/review/last.json")
	rewritten.addPath("/home/u/.local/state/agent-launcher/review/last.json") // a new inode
	if !obs.Hold(rewritten) {
		t.Fatalf("the launcher's own review file, rewritten, changed the answers")
	}
	// A file a rule protects by its name is kept by its inode: the same
	// name on a new inode (an atomic save from outside) answers
	// differently.
	hard := base.clone()
	rec = NewRecorder(hard)
	hpl, err := planFlow(m, 7, rec, true)
	if err != nil {
		t.Fatal(err)
	}
	hobs, _ := rec.Observations()
	saved := hard.clone()
	i := saved.entries[testHome+"/.bashrc"]
	i.Ino += 1000
	saved.entries[testHome+"/.bashrc"] = i
	if hobs.Hold(saved) {
		t.Fatalf("a protected file on a new inode holds the recorded answers")
	}
	if again, err := planFlow(m, 7, saved, true); err != nil || reflect.DeepEqual(again, hpl) {
		t.Fatalf("control: planning again with the new inode: %v, or the same plan, so this example shows nothing", err)
	}

	linked := base.clone()
	linked.remove("/home/u/.local/state/agent-launcher/review/last.json")
	linked.addPath("/home/u/.local/state/agent-launcher/review/last.json*2")
	if obs.Hold(linked) {
		t.Fatalf("a second hard link to a file in the state directory holds the recorded answers")
	}
}

// The agents' caches are not searched for hard links (Options.LinkScanSkip),
// the rest of the state directory is.
func TestLinkScanSkip(t *testing.T) {
	m := compile(t, basePolicy)
	state := "/home/u/.local/state/agent-launcher"
	fsys := newMemFS(append(system, state+"/caches/a/go-build/x*2", state+"/cache/y")...)
	opts := Options{Canaries: []string{state}}
	if _, err := NewPlan(m, 7, fsys, opts); !errors.Is(err, ErrHardLink) {
		t.Fatalf("control: a hard-linked file in the caches without the skip: %v, want ErrHardLink", err)
	}
	opts.LinkScanSkip = []string{state + "/caches"}
	if _, err := NewPlan(m, 7, fsys, opts); err != nil {
		t.Fatalf("with the caches skipped: %v", err)
	}
	fsys.addPath(state + "/cache/z*2")
	if _, err := NewPlan(m, 7, fsys, opts); !errors.Is(err, ErrHardLink) {
		t.Fatalf("a hard-linked file elsewhere in the state directory with the caches skipped: %v, want ErrHardLink", err)
	}
}

// Every field of Info and DirEntry is digested: a field added to either
// must be added to sumLstat, sumLinks and sumReadDir too.
func TestObservationDigestsEveryField(t *testing.T) {
	if n := reflect.TypeFor[Info]().NumField(); n != 5 {
		t.Errorf("Info has %d fields; sumLstat and sumLinks digest 5", n)
	}
	if n := reflect.TypeFor[DirEntry]().NumField(); n != 2 {
		t.Errorf("DirEntry has %d fields; sumReadDir digests 2", n)
	}
	base := Info{Type: TypeFile, Dev: 1, Ino: 2, Nlink: 1}
	for i, v := range []Info{{Type: TypeDir, Dev: 1, Ino: 2, Nlink: 1}, {Type: TypeFile, Dev: 9, Ino: 2, Nlink: 1},
		{Type: TypeFile, Dev: 1, Ino: 9, Nlink: 1}, {Type: TypeFile, Dev: 1, Ino: 2, Nlink: 9}, {Type: TypeFile, Dev: 1, Ino: 2, Nlink: 1, View: true}} {
		if sumLstat(v, nil) == sumLstat(base, nil) {
			t.Errorf("field %d: sumLstat does not tell %+v from %+v", i, v, base)
		}
	}
	if sumLstat(base, nil) == sumLstat(base, fs.ErrNotExist) || sumLstat(Info{}, fs.ErrNotExist) == sumLstat(Info{}, fs.ErrPermission) {
		t.Errorf("sumLstat does not tell the errors apart")
	}
	if sumReadDir([]DirEntry{{"a", TypeFile}}, nil) == sumReadDir([]DirEntry{{"a", TypeDir}}, nil) ||
		sumReadDir([]DirEntry{{"ab", TypeFile}}, nil) == sumReadDir([]DirEntry{{"a", TypeFile}, {"b", TypeFile}}, nil) {
		t.Errorf("sumReadDir does not tell listings apart")
	}
	one, two := Info{Type: TypeFile, Dev: 1, Ino: 2, Nlink: 1}, Info{Type: TypeFile, Dev: 1, Ino: 3, Nlink: 1}
	if sumLinks(one, false) != sumLinks(two, false) {
		t.Errorf("sumLinks tells apart two files with one link each")
	}
	if sumLinks(Info{Type: TypeFile, Dev: 1, Ino: 2, Nlink: 2}, true) == sumLinks(Info{Type: TypeFile, Dev: 1, Ino: 3, Nlink: 2}, true) {
		t.Errorf("sumLinks does not tell apart two hard-linked files")
	}
}

func TestSelfProc(t *testing.T) {
	pid := strconv.Itoa(os.Getpid())
	for in, want := range map[string]string{
		"/proc/" + pid + "/fd":           "/proc/self/fd",
		"/proc/" + pid:                   "/proc/self",
		"/proc/" + pid + "/task/77/fd/1": "/proc/thread-self/fd/1",
		"/proc/" + pid + "/task/x":       "/proc/self/task/x",
		"/proc/" + pid + "7/fd":          "/proc/" + pid + "7/fd",
		"/proc/1/fd":                     "/proc/1/fd",
		"/dev/pts/3":                     "/dev/pts/3",
		"/home/u/ws/proc/" + pid + "/x":  "/home/u/ws/proc/" + pid + "/x",
	} {
		if got := selfProc(in); got != want {
			t.Errorf("selfProc(%q) = %q, want %q", in, got, want)
		}
	}
	if sumResolve("", errors.New("pipe:[1]")) != sumResolve("", errors.New("pipe:[2]")) {
		t.Errorf("two failed resolutions digest apart (the planner only sees that it failed)")
	}
}

func TestObservationsBinary(t *testing.T) {
	obs := Observations{{Op: ObsLstat, Path: "/a\nb", Sum: [32]byte{1}}, {Op: ObsReadDir, Path: "", Sum: [32]byte{31: 9}}}
	b, err := obs.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var got Observations
	if err := got.UnmarshalBinary(b); err != nil || !reflect.DeepEqual(got, obs) {
		t.Fatalf("round trip: %v %v", got, err)
	}
	for i := range b {
		var x Observations
		if err := x.UnmarshalBinary(b[:i]); err == nil {
			t.Fatalf("a truncation to %d bytes decoded", i)
		}
	}
	if err := got.UnmarshalBinary(append(b, 0)); err == nil {
		t.Fatalf("trailing bytes decoded")
	}
	// A count the bytes cannot hold is refused before anything is
	// allocated for it.
	huge := binary.AppendUvarint(nil, 1<<40)
	if err := got.UnmarshalBinary(append(huge, make([]byte, 100)...)); err == nil {
		t.Fatalf("a count of 2^40 observations in 100 bytes decoded")
	}
	if (Observations{{Op: 'z', Path: "/"}}).Hold(newMemFS()) {
		t.Fatalf("an unknown operation holds")
	}
}

// Hold asks from several goroutines when there are many questions: the
// same verdicts as asking in order, whichever question differs.
func TestHoldParallel(t *testing.T) {
	m := compile(t, basePolicy)
	paths := slices.Clone(system)
	for d := range 300 {
		paths = append(paths, fmt.Sprintf("%s/src/d%03d/f.go", testWS, d))
	}
	base := newMemFS(paths...)
	rec := NewRecorder(base)
	if _, err := planFlow(m, 7, rec, true); err != nil {
		t.Fatal(err)
	}
	obs, _ := rec.Observations()
	if len(obs) < 4*holdChunk {
		t.Fatalf("only %d questions: the parallel path is not taken", len(obs))
	}
	if !obs.Hold(base) {
		t.Fatalf("the unchanged snapshot does not hold")
	}
	for _, p := range []string{testWS + "/src/d000/.env", testWS + "/src/d299/.env", testWS + "/src/d150/x/"} {
		changed := base.clone()
		changed.addPath(p)
		if obs.Hold(changed) || obs.hold(changed, nil) {
			t.Errorf("%s added: the answers hold", p)
		}
	}
	bad := slices.Clone(obs)
	bad[len(bad)-1].Op = 'z'
	if bad.Hold(base) {
		t.Errorf("an unknown operation at the end holds")
	}
}

// sumReadDir streams its encoding through the hash: the digest must stay
// the digest of the whole encoding (plans kept by an earlier release still
// hold), for names of every length and listings of every size.
func TestSumReadDirStreamed(t *testing.T) {
	whole := func(entries []DirEntry, err error) [32]byte {
		s := summer{byte(ObsReadDir)}.u64(uint64(len(entries)))
		for _, e := range entries {
			s = s.str(e.Name).u64(uint64(e.Type))
		}
		return s.err(err).sum()
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 300 {
		entries := make([]DirEntry, n%40)
		for i := range entries {
			name := strings.Repeat("x", 1+rng.IntN(255))
			if n < 255 {
				name = strings.Repeat("y", 1+(n+i)%255) // every length, in order
			}
			entries[i] = DirEntry{Name: name, Type: FileType(rng.IntN(4))}
		}
		for _, err := range []error{nil, fs.ErrPermission} {
			if got, want := sumReadDir(entries, err), whole(entries, err); got != want {
				t.Fatalf("%d entries (%v): streamed digest differs from the whole encoding's", len(entries), err)
			}
		}
	}
}
