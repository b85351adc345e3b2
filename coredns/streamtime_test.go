package rrl

import (
	"net/netip"
	"strings"
	"testing"

	core "github.com/dnsrrl/rrl"
)

// TestParseStreamTime: stream-time-per-second and stream-time-instant reach
// the core's Config, make the block active alone, and turn on the timing
// of stream requests.
func TestParseStreamTime(t *testing.T) {
	h, err := parseString("rrl {\n stream-time-per-second 100ms\n stream-time-instant 500ms\n}")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"stream-time-per-second 100ms; ", "stream-time-instant 500ms"} {
		if !strings.Contains(h.settings, want) {
			t.Errorf("settings %q, want %q in them", h.settings, want)
		}
	}
	if !h.active || !h.streamed {
		t.Errorf("active %v, streamed %v: want both", h.active, h.streamed)
	}
	h, err = parseString("rrl {\n responses-per-second 5\n}")
	if err != nil {
		t.Fatal(err)
	}
	if h.streamed {
		t.Error("stream requests timed without stream-time-per-second")
	}
}

// TestParseStreamTimeInvalid: a bad value is refused with the keyword, the
// value and the range, on its line of the Corefile.
func TestParseStreamTimeInvalid(t *testing.T) {
	checkBadLines(t, []badLine{
		{"stream-time-per-second 100", []string{"stream-time-per-second", `"100"`, "from 100µs to 1h0m0s", "such as 100ms"}},
		{"stream-time-per-second 50us", []string{"stream-time-per-second", `"50us"`, "from 100µs to 1h0m0s"}},
		{"stream-time-per-second -1s", []string{"stream-time-per-second", `"-1s"`}},
		{"stream-time-per-second 2h", []string{"stream-time-per-second", `"2h"`, "1h0m0s"}},
		{"stream-time-per-second", []string{"stream-time-per-second takes exactly one value, got 0"}},
		{"stream-time-instant 1e3ms", []string{"stream-time-instant", `"1e3ms"`, "from 100µs to 1h0m0s"}},
		{"stream-time-instant 1s 2s", []string{"stream-time-instant takes exactly one value, got 2"}},
	})
}

// TestDescribeStreamTime: the log lines name the limit by its keyword and
// say it limits stream requests from the network.
func TestDescribeStreamTime(t *testing.T) {
	ev := core.Event{Started: true, Limit: "stream-time-per-second", LimitKind: core.LimitStreamTime, Network: netip.MustParsePrefix("192.0.2.0/24")}
	if got, want := describe(ev, false), "limit stream requests from 192.0.2.0/24 (stream-time-per-second)"; got != want {
		t.Errorf("start line %q, want %q", got, want)
	}
	ev.Started = false
	if got, want := describe(ev, true), "would stop limiting stream requests from 192.0.2.0/24 (stream-time-per-second)"; got != want {
		t.Errorf("stop line %q, want %q", got, want)
	}
}
