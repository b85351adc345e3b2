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

// TestBlockListeners: the addresses a block serves plain DNS on, as the
// program matches them, from its keys and its bind hosts.
func TestBlockListeners(t *testing.T) {
	for _, tc := range []struct {
		keys, hosts []string
		want        string
	}{
		{[]string{"example.org:1053"}, []string{""}, "[::]:1053"},
		{[]string{"example.org"}, []string{"127.0.0.1", "::1", "dns.example."}, "127.0.0.1:53 [::1]:53"},
		{[]string{"dns://example.org:1053", "example.net:2053", "tls://example.org:853", "grpc://x:443"}, []string{"127.0.0.1"}, "127.0.0.1:1053 127.0.0.1:2053"},
		{[]string{"a.org:1053", "b.org:1053"}, []string{"::ffff:127.0.0.1"}, "127.0.0.1:1053"},
		{[]string{"tls://example.org:853"}, []string{""}, ""},
	} {
		var got []string
		for _, ap := range blockListeners(tc.keys, tc.hosts) {
			got = append(got, ap.String())
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("keys %v, hosts %v: %v, want %s", tc.keys, tc.hosts, got, tc.want)
		}
	}
}
