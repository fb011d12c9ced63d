package landlock

import (
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
)

// listCounter counts the listings asked of the FS it wraps (a stampFS,
// the OS), and passes the stamps through.
type listCounter struct {
	FS
	lists *atomic.Int32
}

func (c listCounter) ReadDir(p string) ([]DirEntry, error) {
	c.lists.Add(1)
	return c.FS.ReadDir(p)
}

func (c listCounter) stampNow() int64 { return c.FS.(dirStamper).stampNow() }

func (c listCounter) dirStamp(p string) (Stamp, bool) { return c.FS.(dirStamper).dirStamp(p) }

// readDirStamped records as the wrapped FS does (the OS: from one
// descriptor), uncounted.
func (c listCounter) readDirStamped(p string) ([]DirEntry, Stamp, bool, error) {
	return listStamped(c.FS, p)
}

// roundTrip fails t unless obs comes back from the plan cache's encoding
// as it went in.
func roundTrip(t *testing.T, obs Observations) {
	t.Helper()
	b, err := obs.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var back Observations
	if err := back.UnmarshalBinary(b); err != nil || !reflect.DeepEqual(back, obs) {
		t.Fatalf("round trip: %v\n%v\n%v", err, obs, back)
	}
}

func stampedObs(t *testing.T, fsys FS, dirs ...string) Observations {
	t.Helper()
	rec := NewRecorder(fsys)
	for _, d := range dirs {
		if _, err := rec.ReadDir(d); err != nil {
			t.Fatal(err)
		}
	}
	obs, ok := rec.Observations()
	if !ok {
		t.Fatal("the snapshot changed while recording")
	}
	return obs
}

func TestHoldStamps(t *testing.T) {
	base := newMemFS(testWS+"/a/b/f", testWS+"/c/g", "/proc/1/status")
	dirs := []string{testWS, testWS + "/a", testWS + "/a/b", testWS + "/c", "/proc"}
	var lists atomic.Int32
	settled := listCounter{stampFS{base, 20 * stampSettle}, &lists}
	obs := stampedObs(t, settled, dirs...)
	for _, o := range obs {
		if want := o.Path != "/proc"; (o.Stamp != Stamp{}) != want {
			t.Errorf("%s: stamp %+v; want one: %v (only trusted filesystems)", o.Path, o.Stamp, want)
		}
	}
	lists.Store(0)
	if !obs.Hold(settled) || lists.Load() != 1 {
		t.Errorf("unchanged: Hold listed %d directories; want only /proc, which has no stamp", lists.Load())
	}

	// A change moves the directory's stamp: listed again, and seen.
	changed := base.clone()
	changed.addPath(testWS + "/a/b/.env")
	if obs.Hold(listCounter{stampFS{changed, 0}, &lists}) {
		t.Errorf("a new entry: the answers hold")
	}
	// The stamp is what Hold trusts: an entry that appears with no change
	// of stamp (no filesystem does that) is not seen. This is the control
	// that the listing was not asked.
	silent := base.clone()
	silent.kids[testWS+"/a/b"][".env"] = TypeFile
	if !obs.Hold(stampFS{silent, 0}) {
		t.Errorf("an entry added behind the stamp's back: Hold listed the directory")
	}
	if obs.Hold(silent) {
		t.Errorf("control: without stamps, the entry added is not seen")
	}

	// Directories that changed just before the recording are racy: no
	// stamp, listed every time.
	racy := stampFS{base.clone(), stampSettle / 2}
	racy.touch(testWS + "/c")
	robs := stampedObs(t, racy, dirs...)
	for _, o := range robs {
		if o.Path == testWS+"/c" && (o.Stamp != Stamp{}) {
			t.Errorf("a directory changed %v ns before the recording has a stamp", stampSettle/2)
		}
		if o.Path == testWS+"/a" && (o.Stamp == Stamp{}) {
			t.Errorf("control: a settled directory has no stamp")
		}
	}
	lists.Store(0)
	if !robs.Hold(listCounter{racy, &lists}) || lists.Load() != 2 {
		t.Errorf("racy: Hold listed %d directories; want 2 (/proc and the racy one)", lists.Load())
	}

	// The stamps survive the plan cache's encoding; a malformed one does
	// not decode.
	roundTrip(t, obs)
	var back Observations
	i := slices.IndexFunc(obs, func(o Observation) bool { return o.Stamp != Stamp{} })
	one, _ := Observations{obs[i]}.MarshalBinary()
	for _, bad := range [][]byte{one[:len(one)-1], append(slices.Clone(one), 0)} {
		if err := back.UnmarshalBinary(bad); err == nil {
			t.Errorf("%x decodes", bad)
		}
	}
	flag := 1 + 1 + 32 + 1 + len(obs[i].Path) // count, op, sum, path length, path
	for _, f := range []byte{2, 0xff} {
		mod := slices.Clone(one)
		mod[flag] = f
		if err := back.UnmarshalBinary(mod); err == nil {
			t.Errorf("stamp flag %d decodes", f)
		}
	}
	lstat := Observations{{Op: ObsLstat, Path: "/x", Stamp: Stamp{Dev: 1, Ino: 2, Sec: 3}}}
	if b, _ := lstat.MarshalBinary(); back.UnmarshalBinary(b) == nil {
		t.Errorf("a stamp on an lstat decodes")
	}
}

// statCounter counts the lstats asked of the FS it wraps, and passes the
// stamps through.
type statCounter struct {
	FS
	stats *atomic.Int32
}

func (c statCounter) Lstat(p string) (Info, error) {
	c.stats.Add(1)
	return c.FS.Lstat(p)
}

func (c statCounter) stampNow() int64 { return c.FS.(dirStamper).stampNow() }

func (c statCounter) dirStamp(p string) (Stamp, bool) { return c.FS.(dirStamper).dirStamp(p) }

func (c statCounter) stampAbsent(d, n string) (Stamp, bool, bool) {
	return c.FS.(absentStamper).stampAbsent(d, n)
}

// TestHoldAbsentStamps: an lstat that found nothing is answered, while
// the nearest directory above that exists keeps its stamp, without being
// asked again; the home directory's absent credentials (~/.aws, ~/.config/gh)
// are a third of a kept plan's questions. Making the name, or any entry
// on the way to it, moves that stamp: the question is asked, and the
// change seen.
func TestHoldAbsentStamps(t *testing.T) {
	home := "/home/u"
	base := newMemFS(home+"/.bashrc", home+"/.config/x", testWS+"/f")
	absent := []string{home + "/.aws", home + "/.ssh/id_ed25519", home + "/.config/gh/hosts.yml", home + "/.cargo/credentials"}
	record := func(fsys FS) Observations {
		t.Helper()
		rec := NewRecorder(fsys)
		for _, p := range absent {
			if _, err := rec.Lstat(p); err == nil {
				t.Fatalf("%s exists", p)
			}
		}
		if _, err := rec.Lstat(home + "/.bashrc"); err != nil {
			t.Fatal(err)
		}
		obs, ok := rec.Observations()
		if !ok {
			t.Fatal("the snapshot changed while recording")
		}
		return obs
	}
	var stats atomic.Int32
	settled := stampFS{base, 20 * stampSettle}
	obs := record(settled)
	for _, o := range obs {
		want := map[string]string{home + "/.aws": home, home + "/.ssh/id_ed25519": home,
			home + "/.config/gh/hosts.yml": home + "/.config", home + "/.cargo/credentials": home}[o.Path]
		if o.Via != want || (want != "") != (o.Stamp != Stamp{}) {
			t.Errorf("%s: stamped via %q (%+v); want via %q", o.Path, o.Via, o.Stamp, want)
		}
	}
	stats.Store(0)
	if !obs.Hold(statCounter{settled, &stats}) || stats.Load() != 1 {
		t.Errorf("unchanged: Hold asked %d lstats; want 1 (.bashrc, which exists)", stats.Load())
	}

	// What is made there moves the stamp: asked again, and seen.
	for _, made := range absent {
		changed := base.clone()
		changed.addPath(made)
		if obs.Hold(stampFS{changed, 0}) {
			t.Errorf("%s made: the answers hold", made)
		}
	}
	// The stamp is what Hold trusts: a name that appears with no change of
	// stamp (no filesystem does that) is not seen. The control that the
	// question was not asked.
	silent := base.clone()
	silent.entries[home+"/.aws"] = Info{Type: TypeDir, Dev: 1, Ino: 999}
	if !obs.Hold(stampFS{silent, 0}) {
		t.Errorf("a name made behind the stamp's back: Hold asked its lstat")
	}
	if obs.Hold(silent) {
		t.Errorf("control: without stamps, the name made is not seen")
	}
	// An unrelated change in the directory moves its stamp too: every
	// question under it is asked, and they still hold.
	other := base.clone()
	other.addPath(home + "/.lesshst")
	stats.Store(0)
	if !obs.Hold(statCounter{stampFS{other, 0}, &stats}) || stats.Load() != 4 {
		t.Errorf("home changed: Hold asked %d lstats and held? want 4 asked (3 under home, .bashrc), holding", stats.Load())
	}

	// A directory changed just before the recording stamps nothing.
	racy := stampFS{base.clone(), stampSettle / 2}
	racy.touch(home)
	for _, o := range record(racy) {
		if o.Via == home && o.Stamp != (Stamp{}) || (o.Via == "" && o.Stamp != Stamp{}) {
			t.Errorf("%s: stamped via %q, changed %v ns before the recording", o.Path, o.Via, stampSettle/2)
		}
		if o.Path == home+"/.aws" && o.Via != home {
			t.Errorf("%s: via %q; want %s named without a stamp, for Settle", o.Path, o.Via, home)
		}
		if o.Path == home+"/.config/gh/hosts.yml" && o.Via != home+"/.config" {
			t.Errorf("control: %s is not stamped via the settled %s/.config", o.Path, home)
		}
	}

	// The stamps survive the plan cache's encoding; one on an lstat that
	// found something does not decode.
	roundTrip(t, obs)
	var back Observations
	i := slices.IndexFunc(obs, func(o Observation) bool { return o.Via != "" })
	forged := obs[i]
	forged.Op = ObsReadDir
	if one, _ := (Observations{forged}).MarshalBinary(); back.UnmarshalBinary(one) == nil {
		t.Errorf("a listing stamped via another directory decoded")
	}
}

// TestSettleAbsent: the absences a recording left without a stamp (their
// directory had just changed) get one later, once it settled; after that
// they hold without being asked, and what is made there is still seen.
func TestSettleAbsent(t *testing.T) {
	home := "/home/u"
	base := newMemFS(home+"/.bashrc", testWS+"/f")
	racy := stampFS{base, stampSettle / 2}
	racy.touch(home) // just before the recording: no stamp
	rec := NewRecorder(racy)
	for _, p := range []string{home + "/.aws", home + "/.ssh/id_ed25519", home + "/.bashrc", testWS + "/g"} {
		rec.Lstat(p)
	}
	obs, ok := rec.Observations()
	if !ok {
		t.Fatal("the snapshot changed while recording")
	}
	for _, o := range obs {
		if o.Via == home && o.Stamp != (Stamp{}) {
			t.Fatalf("%s: stamped via %s, changed just before the recording", o.Path, o.Via)
		}
	}
	// Named without a stamp, through the plan cache's encoding.
	roundTrip(t, obs)
	// Settled since: the three absences get stamps; .bashrc, which
	// exists, none.
	settled := stampFS{base, 20 * stampSettle}
	up, n := obs.Settle(settled)
	if n != 2 || len(up) != len(obs) {
		t.Fatalf("Settle added %d stamps to %d observations; want 2 (.aws and .ssh/id_ed25519, via %s)", n, len(up), home)
	}
	for _, o := range up {
		if absent := o.Path != home+"/.bashrc"; absent != (o.Via != "") {
			t.Errorf("%s: via %q after Settle", o.Path, o.Via)
		}
	}
	var stats atomic.Int32
	if !up.Hold(statCounter{settled, &stats}) || stats.Load() != 1 {
		t.Errorf("settled: Hold asked %d lstats; want 1 (.bashrc)", stats.Load())
	}
	made := base.clone()
	made.addPath(home + "/.aws")
	if up.Hold(stampFS{made, 0}) {
		t.Errorf("~/.aws made after Settle: the answers hold")
	}
	// An absence that is no longer one is not stamped.
	if _, n := obs.Settle(stampFS{made, 20 * stampSettle}); n != 1 {
		t.Errorf("with ~/.aws made, Settle added %d stamps; want 1 (.ssh/id_ed25519)", n)
	}
}

// TestSettleWaits: while the directory an absence names is still
// changing, Settle asks nothing about the paths below it.
func TestSettleWaits(t *testing.T) {
	home := "/home/u"
	racy := stampFS{newMemFS(home + "/.bashrc"), stampSettle / 2}
	racy.touch(home)
	rec := NewRecorder(racy)
	rec.Lstat(home + "/.aws")
	obs, _ := rec.Observations()
	var stats atomic.Int32
	if _, n := obs.Settle(statCounter{racy, &stats}); n != 0 || stats.Load() != 0 {
		t.Errorf("home still racy: Settle added %d stamps and asked %d lstats; want none", n, stats.Load())
	}
	if _, n := obs.Settle(statCounter{stampFS{racy.memFS, 20 * stampSettle}, &stats}); n != 1 {
		t.Errorf("control: settled, Settle added %d stamps; want 1", n)
	}
}
