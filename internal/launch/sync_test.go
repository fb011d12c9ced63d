package launch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agent-launcher/agent-launcher/landlock"
)

// testConfig fills every field of a "config" message, with bytes that
// are not UTF-8 in its paths, arguments and environment.
func testConfig() initConfig {
	pl := &landlock.Plan{Handled: landlock.HandledFS(7), Scoped: landlock.Scopes(7), Canary: "/s/canary\xff",
		Rules: []landlock.Rule{
			{Path: "/w/d\xffir", Dir: true, Access: landlock.ReadDir | landlock.ReadFile, Dev: 3, Ino: 9},
			{Path: "/tmp", Dir: true, View: true, Access: landlock.HandledFS(7), Dev: 1 << 40, Ino: 1<<63 + 5},
			{Path: "/etc/f", Access: landlock.ReadFile},
		},
		Binds: []landlock.Bind{{Path: "/w/.git", Dir: true, Dev: 3, Ino: 10}, {Path: "/w/.envrc", ReadOnly: true, NoExec: true, Dev: 3, Ino: 11}},
	}
	cfg := newConfig(pl, "/bin/p\xfe", []string{"p", "a\xffb", ""}, []string{"LATIN=caf\xe9"})
	cfg.View = &landlock.View{Private: []string{"/tmp", "/var/tmp"}, Hidden: []string{"/run/user/1"}, Masked: []string{"/x"},
		Fresh: []string{"/proc"}, Keep: []string{"/tmp/.X11-unix\xff"},
		Caches: []landlock.CacheBind{{Source: "/s/caches/a", Target: "/var/tmp/c", Seal: "/s/caches"}}}
	cfg.Cwd = "/w/sub\xff"
	return cfg
}

// TestConfigRoundTrip: the plan, the view, the program, its arguments and
// its environment arrive byte for byte, also when they are not UTF-8.
func TestConfigRoundTrip(t *testing.T) {
	for _, cfg := range []initConfig{testConfig(), newConfig(nil, "/bin/p", nil, nil), {}} {
		var buf bytes.Buffer
		if err := writeRawFrame(&buf, cfg.encode()); err != nil {
			t.Fatal(err)
		}
		payload, err := readRawFrame(&buf)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeConfig(payload)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(*got, cfg) {
			t.Errorf("round trip:\n got %+v\nwant %+v", *got, cfg)
		}
	}
	if u := newConfig(nil, "/bin/p", nil, nil); u.Confined || len(u.Rules) != 0 {
		t.Errorf("unconfined config: %+v", u)
	}
	// An empty view is a view.
	cfg := initConfig{View: &landlock.View{}}
	if got, err := decodeConfig(cfg.encode()); err != nil || got.View == nil {
		t.Errorf("an empty view: %+v, %v", got, err)
	}
}

// TestConfigRefusesMalformed: a payload cut short anywhere, with a byte
// too many, of another kind (a JSON message), or with a length larger
// than what follows is refused, never half decoded.
func TestConfigRefusesMalformed(t *testing.T) {
	cfg := testConfig()
	b := cfg.encode()
	for n := range len(b) {
		if got, err := decodeConfig(b[:n]); err == nil {
			t.Fatalf("cut at %d of %d bytes: decoded %+v", n, len(b), got)
		}
	}
	if _, err := decodeConfig(append(b, 0)); !errors.Is(err, errConfig) {
		t.Errorf("a byte too many: %v", err)
	}
	if _, err := decodeConfig([]byte(`{"type":"config"}`)); err == nil {
		t.Error("a JSON message was taken for a configuration")
	}
	huge := binary.AppendUvarint([]byte(configMagic+"\x01\x00\x00"), 1<<62) // the canary's length
	if _, err := decodeConfig(huge); !errors.Is(err, errConfig) {
		t.Errorf("a length past the end: %v", err)
	}
}

// FuzzDecodeConfig: any payload decodes or is refused without a panic,
// and what decodes encodes to a payload that decodes to the same.
func FuzzDecodeConfig(f *testing.F) {
	cfg := testConfig()
	f.Add(cfg.encode())
	empty := initConfig{}
	f.Add(empty.encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeConfig(b)
		if err != nil {
			return
		}
		again, err := decodeConfig(got.encode())
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Fatalf("re-encoded: %+v, %v; first %+v", again, err, got)
		}
	})
}

// TestFrames: a clean end, a truncated frame and an oversized one are
// told apart, and an oversized frame is refused before it is read.
func TestFrames(t *testing.T) {
	var v report
	if err := readFrame(bytes.NewReader(nil), &v); !errors.Is(err, errEOF) {
		t.Errorf("empty stream: %v", err)
	}
	var buf bytes.Buffer
	writeFrame(&buf, report{Type: msgReady, Rules: 3})
	b := buf.Bytes()
	if err := readFrame(bytes.NewReader(b[:len(b)-1]), &v); err == nil || errors.Is(err, errEOF) {
		t.Errorf("truncated frame: %v", err)
	}
	if err := readFrame(bytes.NewReader(b), &v); err != nil || v.Type != msgReady || v.Rules != 3 {
		t.Errorf("frame: %v %+v", err, v)
	}
	var big [4]byte
	binary.BigEndian.PutUint32(big[:], maxFrame+1)
	if err := readFrame(bytes.NewReader(big[:]), &v); err == nil {
		t.Error("an oversized frame was accepted")
	}
}

// TestReportRoundTrip: every field of every other message arrives, and a
// message cut short, with a byte too many or a number out of range is
// refused.
func TestReportRoundTrip(t *testing.T) {
	for _, r := range []report{
		{Type: msgReady, Rules: 151},
		{Type: msgError, Msg: "view: mounting /tmp: \xff EPERM", View: true},
		{Type: msgError, Msg: "landlock rule for /etc: changed since planning", Stale: true},
		{Type: msgExecError, Errno: 2, Msg: "no such file"},
		{Type: msgStarted, Pid: 1 << 22},
		{Type: msgGo},
	} {
		var got report
		if err := got.decode(r.encode()); err != nil || got != r {
			t.Errorf("round trip of %+v: %+v, %v", r, got, err)
		}
		b := r.encode()
		for n := range len(b) {
			if err := got.decode(b[:n]); err == nil {
				t.Errorf("%+v cut at %d of %d bytes: decoded %+v", r, n, len(b), got)
			}
		}
		if err := got.decode(append(b, 0)); err == nil {
			t.Errorf("%+v with a byte too many: decoded", r)
		}
	}
	var got report
	if err := got.decode(report{Type: msgStarted, Pid: -1}.encode()); err == nil {
		t.Errorf("a negative pid decoded as %+v", got)
	}
	// Each value has one encoding: a varint written long is refused.
	b := report{Type: msgReady, Rules: 5}.encode()
	long := slices.Concat([]byte{b[0] | 0x80, 0}, b[1:])
	if err := got.decode(long); err == nil {
		t.Errorf("a length written long decoded as %+v", got)
	}
	// The cause is 0, 1 (view) or 2 (stale): 3 is refused, not read as
	// either.
	b = report{Type: msgError, Msg: "x", Stale: true}.encode()
	b[len(b)-1] = 3
	if err := got.decode(b); err == nil {
		t.Errorf("an error of cause 3 decoded as %+v", got)
	}
}

// errConfig is a "config" payload that does not decode.
var errConfig = errors.New("sync: malformed configuration")

// decodeConfig decodes a "config" payload (encode) as initstage.c does:
// the format's reference, for the round-trip tests. Anything left over,
// missing or out of range is errConfig.
func decodeConfig(b []byte) (*initConfig, error) {
	rest, ok := bytes.CutPrefix(b, []byte(configMagic))
	if !ok {
		return nil, fmt.Errorf("sync: expected %q", msgConfig)
	}
	bad := false
	num := func() uint64 {
		x, n := binary.Uvarint(rest)
		if n <= 0 || n > 1 && rest[n-1] == 0 { // not minimal
			bad, rest = true, nil
			return 0
		}
		rest = rest[n:]
		return x
	}
	// count is a list's length, bounded by the bytes left (every item
	// takes one at least), so that no length makes a large allocation.
	count := func() int {
		n := num()
		if n > uint64(len(rest)) {
			bad, rest = true, nil
			return 0
		}
		return int(n)
	}
	str := func() string {
		n := count()
		s := string(rest[:n])
		rest = rest[n:]
		if strings.IndexByte(s, 0) >= 0 {
			bad = true // no path, argument or variable holds a NUL
		}
		return s
	}
	strs := func() []string {
		n := count()
		if n == 0 {
			return nil
		}
		ss := make([]string, n)
		for i := range ss {
			ss[i] = str()
		}
		return ss
	}
	cfg := &initConfig{}
	cfg.Confined = num() == 1
	cfg.Handled = landlock.Access(num())
	cfg.Scoped = landlock.Scope(num())
	cfg.Canary = str()
	if n := count(); n > 0 {
		cfg.Rules = make([]landlock.Rule, n)
		for i := range cfg.Rules {
			r := &cfg.Rules[i]
			r.Path = str()
			f := num()
			r.Dir, r.View = f&flagDir != 0, f&flagView != 0
			r.Access = landlock.Access(num())
			r.Dev, r.Ino = num(), num()
		}
	}
	cfg.Path = str()
	cfg.Argv = strs()
	cfg.Env = strs()
	if num() == 1 {
		v := &landlock.View{}
		for _, list := range []*[]string{&v.Private, &v.Hidden, &v.Masked, &v.Fresh, &v.Keep} {
			*list = strs()
		}
		if n := count(); n > 0 {
			v.Caches = make([]landlock.CacheBind, n)
			for i := range v.Caches {
				v.Caches[i] = landlock.CacheBind{Source: str(), Target: str(), Seal: str()}
			}
		}
		cfg.View = v
	}
	cfg.Cwd = str()
	if n := count(); n > 0 {
		cfg.Binds = make([]landlock.Bind, n)
		for i := range cfg.Binds {
			bd := &cfg.Binds[i]
			bd.Path = str()
			f := num()
			bd.Dir, bd.ReadOnly, bd.NoExec = f&flagDir != 0, f&flagReadOnly != 0, f&flagNoExec != 0
			bd.Dev, bd.Ino = num(), num()
		}
	}
	if bad || len(rest) != 0 {
		return nil, errConfig
	}
	return cfg, nil
}
