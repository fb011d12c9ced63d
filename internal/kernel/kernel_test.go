package kernel

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// helperEnv makes the test binary act as a helper process for a test
// instead of running the tests; see runTestHelper.
const helperEnv = "AGENT_LAUNCHER_KERNEL_TEST_HELPER"

func TestMain(m *testing.M) {
	// The probes re-execute this test binary; this is where the children
	// run their probe and exit.
	RunProbeChild()
	if h, ok := os.LookupEnv(helperEnv); ok {
		os.Exit(runTestHelper(h))
	}

	// The runtime opens its netpoller (an epoll fd and an eventfd) on first
	// use, which is the first child's stdout pipe; open it now so that the
	// baseline includes it.
	if r, w, err := os.Pipe(); err == nil {
		r.Close()
		w.Close()
	}
	fds, goroutines := openFDs(), runtime.NumGoroutine()
	code := m.Run()
	if code == 0 {
		if err := checkLeaks(fds, goroutines); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// checkLeaks reports an error if, after the tests, more file descriptors are
// open or more goroutines run than before. Child processes are waited for
// asynchronously by os/exec, so it allows a moment to settle.
func checkLeaks(fds, goroutines int) error {
	deadline := time.Now().Add(2 * time.Second)
	for {
		nowFDs, nowG := openFDs(), runtime.NumGoroutine()
		if nowFDs <= fds && nowG <= goroutines {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("leak: %d open fds (was %d), %d goroutines (was %d)", nowFDs, fds, nowG, goroutines)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// openFDs returns the number of open file descriptors, or 0 where
// /proc/self/fd does not exist.
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(ents)
}

func TestParseRelease(t *testing.T) {
	tests := []struct {
		release string
		want    version
		wantErr bool
	}{
		{release: "6.18.44-fc-v769", want: version{6, 18}},
		{release: "5.4.0-150-generic", want: version{5, 4}},
		{release: "3.10.0-1160.el7.x86_64", want: version{3, 10}},
		{release: "6.6", want: version{6, 6}},
		{release: "6.1-rc1", want: version{6, 1}},
		{release: "6.19+", want: version{6, 19}},
		{release: "6", wantErr: true},
		{release: "6.x", wantErr: true},
		{release: "v6.1", wantErr: true},
		{release: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.release, func(t *testing.T) {
			got, err := parseRelease(tt.release)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseRelease(%q) error = %v, wantErr %v", tt.release, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("parseRelease(%q) = %v, want %v", tt.release, got, tt.want)
			}
		})
	}
}

func TestVersionAtLeast(t *testing.T) {
	tests := []struct {
		v, w version
		want bool
	}{
		{version{6, 6}, version{6, 6}, true},
		{version{6, 18}, version{6, 6}, true},
		{version{6, 5}, version{6, 6}, false},
		{version{6, 0}, version{5, 19}, true},
		{version{5, 19}, version{6, 0}, false},
		{version{4, 20}, version{5, 0}, false},
	}
	for _, tt := range tests {
		if got := tt.v.atLeast(tt.w); got != tt.want {
			t.Errorf("%v.atLeast(%v) = %v, want %v", tt.v, tt.w, got, tt.want)
		}
	}
}

func TestParseCapEff(t *testing.T) {
	tests := []struct {
		name    string
		status  string
		want    uint64
		wantErr bool
	}{
		{
			name:   "root",
			status: "Name:\tcat\nCapInh:\t0000000000000000\nCapPrm:\t000001ffffffffff\nCapEff:\t000001ffffffffff\nCapBnd:\t000001ffffffffff\n",
			want:   0x1ffffffffff,
		},
		{
			name:   "user",
			status: "Uid:\t4242\t4242\t4242\t4242\nCapEff:\t0000000000000000\n",
			want:   0,
		},
		{
			name:   "sys_admin only",
			status: "CapEff:\t0000000000200000\n",
			want:   1 << 21,
		},
		{name: "missing", status: "Name:\tcat\nCapPrm:\t0000000000000000\n", wantErr: true},
		{name: "garbage", status: "CapEff:\tzz\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseCapEff(strings.NewReader(tt.status))
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseCapEff error = %v, wantErr %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("parseCapEff = %#x, want %#x", got, tt.want)
			}
		})
	}
}

func TestHasCap(t *testing.T) {
	p := Privileges{CapEff: 1<<21 | 1<<0}
	for c, want := range map[uint]bool{0: true, 1: false, 21: true, 63: false, 64: false, 200: false} {
		if got := p.HasCap(c); got != want {
			t.Errorf("HasCap(%d) = %v, want %v", c, got, want)
		}
	}
}
