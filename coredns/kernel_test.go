package rrl

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	core "github.com/dnsrrl/rrl"
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

// TestKernelRefusedNamesTheAccountsNetwork: a refusal names the network
// of the account that refused: the network's for requests-per-second, the
// prefix's for a request prefix, for each family.
func TestKernelRefusedNamesTheAccountsNetwork(t *testing.T) {
	cfg := core.NewConfig()
	for kw, v := range map[string]string{"requests-per-second": "20", "ipv6-prefix-length": "48",
		"ipv4-request-prefixes": "32:50 18:200", "ipv6-request-prefixes": "40:300"} {
		if err := cfg.SetValue(kw, v); err != nil {
			t.Fatal(err)
		}
	}
	k := newKernelDrop(cfg, kernelOptions{interfaces: []string{"lo"}})
	v4, v6 := netip.MustParseAddr("192.0.2.77"), netip.MustParseAddr("2001:db8:1:2::5")
	for _, tc := range []struct {
		client netip.Addr
		why    core.RequestRefusal
		want   string
	}{
		{v4, core.RequestRefusal{Limit: core.LimitRequests}, "192.0.2.0/24"},
		{v4, core.RequestRefusal{Limit: core.LimitIPv4RequestPrefixes, Prefix: 0}, "192.0.2.77/32"},
		{v4, core.RequestRefusal{Limit: core.LimitIPv4RequestPrefixes, Prefix: 1}, "192.0.0.0/18"},
		{v6, core.RequestRefusal{Limit: core.LimitRequests}, "2001:db8:1::/48"},
		{v6, core.RequestRefusal{Limit: core.LimitIPv6RequestPrefixes, Prefix: 0}, "2001:db8::/40"},
	} {
		if got, ok := k.network(tc.client, tc.why); !ok || got.String() != tc.want {
			t.Errorf("%v refused by %+v: network %v %v, want %s", tc.client, tc.why, got, ok, tc.want)
		}
	}
	if _, ok := k.network(v4, core.RequestRefusal{Limit: core.LimitIPv4RequestPrefixes, Prefix: 5}); ok {
		t.Error("a prefix that is not configured names a network")
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
