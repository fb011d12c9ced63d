package launch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/agent-launcher/agent-launcher/landlock"
)

// TestConfigRoundTrip: the plan, the program, its arguments and its
// environment arrive byte for byte, also when they are not UTF-8.
func TestConfigRoundTrip(t *testing.T) {
	pl := &landlock.Plan{Handled: landlock.HandledFS(7), Scoped: landlock.Scopes(7), Canary: "/s/canary\xff",
		Rules: []landlock.Rule{{Path: "/w/d\xffir", Dir: true, Access: landlock.ReadDir | landlock.ReadFile, Dev: 3, Ino: 9}}}
	cfg := newConfig(pl, "/bin/p\xfe", []string{"p", "a\xffb"}, []string{"LATIN=caf\xe9"})
	var buf bytes.Buffer
	if err := writeFrame(&buf, cfg); err != nil {
		t.Fatal(err)
	}
	var got initConfig
	if err := readFrame(&buf, &got); err != nil {
		t.Fatal(err)
	}
	back := got.plan()
	if !got.Confined || string(got.Path) != "/bin/p\xfe" || toStrings(got.Argv)[1] != "a\xffb" || toStrings(got.Env)[0] != "LATIN=caf\xe9" ||
		back.Canary != pl.Canary || back.Handled != pl.Handled || back.Scoped != pl.Scoped || len(back.Rules) != 1 || back.Rules[0].Path != "/w/d\xffir" || !back.Rules[0].Dir || back.Rules[0].Access != pl.Rules[0].Access || back.Rules[0].Dev != 3 || back.Rules[0].Ino != 9 {
		t.Errorf("round trip: %+v, plan %+v", got, back)
	}
	if u := newConfig(nil, "/bin/p", nil, nil); u.Confined || len(u.Rules) != 0 {
		t.Errorf("unconfined config: %+v", u)
	}
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
