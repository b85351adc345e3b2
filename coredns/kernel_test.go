package rrl

import (
	"strings"
	"testing"
	"time"
)

// TestParseKernelDrop: the kernel-drop keywords, their defaults and their
// durations.
func TestParseKernelDrop(t *testing.T) {
	h, err := parseString("rrl {\n requests-per-second 20\n kernel-drop lo eth0\n kernel-drop-after 500ms\n kernel-drop-for 30s\n}")
	if err != nil {
		t.Fatal(err)
	}
	want := kernelOptions{interfaces: []string{"lo", "eth0"}, after: 500 * time.Millisecond, hold: 30 * time.Second}
	if h.kernel == nil || strings.Join(h.kernel.opts.interfaces, " ") != "lo eth0" || h.kernel.opts.after != want.after || h.kernel.opts.hold != want.hold {
		t.Errorf("kernel %+v, want %+v", h.kernel, want)
	}
	if h, err := parseString("rrl {\n ipv4-request-prefixes 18:200\n kernel-drop lo\n}"); err != nil || h.kernel == nil || h.kernel.opts.after != 0 {
		t.Errorf("kernel-drop over a request prefix alone, durations left to their defaults: %+v %v", h, err)
	}
	if h, err := parseString("rrl {\n requests-per-second 20\n}"); err != nil || h.kernel != nil {
		t.Errorf("without kernel-drop: %+v %v", h, err)
	}
}

// TestParseKernelDropInvalid: each bad line is refused, naming the keyword,
// the value and the range.
func TestParseKernelDropInvalid(t *testing.T) {
	for input, want := range map[string]string{
		"rrl {\n requests-per-second 20\n kernel-drop\n}":                             "kernel-drop needs at least one interface",
		"rrl {\n requests-per-second 20\n kernel-drop lo\n kernel-drop-after 1\n}":    `kernel-drop-after "1": want a duration from 100ms to 1h0m0s`,
		"rrl {\n requests-per-second 20\n kernel-drop lo\n kernel-drop-after 50ms\n}": `kernel-drop-after "50ms": want a duration from 100ms to 1h0m0s`,
		"rrl {\n requests-per-second 20\n kernel-drop lo\n kernel-drop-for 2h\n}":     `kernel-drop-for "2h": want a duration from 1s to 1h0m0s`,
		"rrl {\n requests-per-second 20\n kernel-drop lo\n kernel-drop-for 1s 2s\n}":  "kernel-drop-for takes exactly one value, got 2",
		"rrl {\n requests-per-second 20\n kernel-drop-for 10s\n}":                     "kernel-drop-for needs kernel-drop INTERFACE",
		"rrl {\n responses-per-second 5\n kernel-drop lo\n}":                          "kernel-drop needs requests-per-second or a request prefix",
		"rrl {\n requests-per-second 20\n kernel-drop lo\n kernel-drop eth0\n}":       "kernel-drop given more than once",
		"rrl {\n requests-per-second 20\n kernel-drop-aftr 1s\n}":                     `did you mean "kernel-drop-after"?`,
	} {
		_, err := parseString(input)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want it to say %q", input, err, want)
		}
	}
}

// TestKernelListeners: the block's hosts as the program matches them.
func TestKernelListeners(t *testing.T) {
	got := kernelListeners([]string{"", "127.0.0.1", "::1", "dns.example."}, "53")
	want := []string{"[::]:53", "127.0.0.1:53", "[::1]:53"}
	if len(got) != len(want) {
		t.Fatalf("listeners %v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("listener %d: %v, want %s", i, got[i], want[i])
		}
	}
	if got := kernelListeners([]string{"127.0.0.1"}, "x"); got != nil {
		t.Errorf("a port that is not a number: %v", got)
	}
}
