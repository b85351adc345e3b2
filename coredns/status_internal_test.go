package rrl

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	core "github.com/dnsrrl/rrl"
)

func TestParseStatusAndLogLimited(t *testing.T) {
	h, err := parseString("rrl {\n responses-per-second 5\n status 127.0.0.1:9154\n log-limited 30s 7\n}")
	if err != nil {
		t.Fatal(err)
	}
	if h.ops == nil || h.ops.opts != (opsOptions{status: "127.0.0.1:9154", logEvery: 30 * time.Second, logN: 7}) {
		t.Errorf("ops %+v", h.ops)
	}
	if h, _ := parseString("rrl {\n responses-per-second 5\n log-limited 1m\n}"); h.ops.opts.logN != defaultLogLimited || h.ops.opts.status != "" {
		t.Errorf("log-limited 1m: %+v, want N %d and no status", h.ops.opts, defaultLogLimited)
	}
	if h, _ := parseString("rrl {\n responses-per-second 5\n status :9154\n}"); h.ops.opts.status != ":9154" {
		t.Errorf("status :9154: %+v", h.ops.opts)
	}
	if h, _ := parseString("rrl {\n responses-per-second 5\n}"); h.ops != nil {
		t.Errorf("neither set: ops %+v, want none", h.ops)
	}
	for input, want := range map[string]string{
		"status":                          "status takes exactly one HOST:PORT, got 0",
		"status 127.0.0.1":                `status "127.0.0.1": want HOST:PORT`,
		"status 127.0.0.1:http":           `port "http": want a number from 1 to 65535`,
		"status 127.0.0.1:0":              `port "0"`,
		"status :70000":                   `port "70000"`,
		"status a:1 b:2":                  "got 2 values",
		"log-limited":                     "log-limited takes DURATION and an optional N, got 0",
		"log-limited 10":                  `log-limited duration "10": want a duration from 1s to 24h0m0s`,
		"log-limited 500ms":               `duration "500ms"`,
		"log-limited 25h":                 `duration "25h"`,
		"log-limited 1m 0":                `log-limited N "0": want a whole number from 1 to 100`,
		"log-limited 1m 101":              `N "101"`,
		"log-limited 1m 5 6":              "got 3 values",
		"status :1\n status :2":           "status given more than once",
		"log-limited 1m\n log-limited 2m": "log-limited given more than once",
	} {
		_, err := parseString("rrl {\n responses-per-second 5\n " + input + "\n}")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", input, err, want)
		}
	}
}

func TestSummarize(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	acct := func(network string, kind core.LimitKind, name string, refused int64, ago time.Duration) core.LimitedAccount {
		a := core.LimitedAccount{Network: netip.MustParsePrefix(network), LimitKind: kind, Refused: refused, Since: now.Add(-ago)}
		if name != "" {
			a.Tuple = core.ResponseTuple{AllowanceCategory: core.AllowanceCategory(kind), SalientName: name}
		}
		if kind == core.LimitResponses {
			a.Tuple.Class, a.Tuple.Type = 1, 1
		}
		return a
	}
	accounts := []core.LimitedAccount{ // by refusals, as Limited gives them
		acct("192.0.2.0/24", core.LimitResponses, "www.example.org.", 100, time.Minute),
		acct("198.51.100.0/24", core.LimitRequests, "", 80, 10*time.Second),
		acct("192.0.2.0/24", core.LimitAll, "", 50, 2*time.Minute),
		acct("203.0.113.0/24", core.LimitNXDomains, "example.org.", 5, time.Second),
	}
	got := summarize(accounts, 2, []string{"example.org."}, false, now)
	want := "limited now in [example.org.]: 3 networks, 4 accounts; " +
		"192.0.2.0/24 150 refused in 2m0s by 2 accounts, most by responses-per-second for www.example.org. IN A; " +
		"198.51.100.0/24 80 refused in 10s by requests-per-second; and 1 more network"
	if got != want {
		t.Errorf("summary\n%q\nwant\n%q", got, want)
	}
	if got := summarize(accounts[3:], 5, []string{"example.org."}, true, now); !strings.HasPrefix(got, "would be limited now") ||
		!strings.HasSuffix(got, "203.0.113.0/24 5 refused in 1s by nxdomains-per-second for example.org.") {
		t.Errorf("report-only summary %q", got)
	}
	if got := summarize(nil, 5, nil, false, now); got != "" {
		t.Errorf("nothing limited: %q, want no line", got)
	}
}

// TestOpsStopIsIdempotent: stop before start, twice, and start after stop
// open nothing.
func TestOpsStopIsIdempotent(t *testing.T) {
	h, err := parseString("rrl {\n responses-per-second 5\n status 127.0.0.1:1\n log-limited 1s\n}")
	if err != nil {
		t.Fatal(err)
	}
	h.ops.stop()
	h.ops.stop()
	if err := h.ops.start(h); err != nil || h.ops.listed || h.ops.stopLog != nil {
		t.Errorf("start after stop: %v, listed %v, logging %v", err, h.ops.listed, h.ops.stopLog != nil)
	}
	var none *ops
	none.stop()
	if err := none.start(h); err != nil {
		t.Error(err)
	}
}

// TestStatusServesNewestBlock: during a reload the old block and its
// replacement (same zones, same servers) share the status listener; only
// the newer is served, and blocks come in the order of their zones.
func TestStatusServesNewestBlock(t *testing.T) {
	s := &statusListener{blocks: map[*ops]statusBlock{
		new(ops): {seq: 1, zones: []string{"b.test."}, servers: []string{"dns://:53"}},
		new(ops): {seq: 2, zones: []string{"b.test."}, servers: []string{"dns://:53"}},
		new(ops): {seq: 1, zones: []string{"a.test."}, servers: []string{"dns://:53"}},
	}}
	got := s.current()
	if len(got) != 2 || got[0].zones[0] != "a.test." || got[1].zones[0] != "b.test." || got[1].seq != 2 {
		t.Errorf("current() = %+v, want a.test. then b.test. of seq 2", got)
	}
}
