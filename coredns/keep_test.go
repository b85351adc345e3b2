package rrl

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/miekg/dns"

	core "github.com/dnsrrl/rrl"
)

// KeptLimiters tells the external tests how many limiters the registry holds.
func KeptLimiters() int { return limiters.size() }

// reloadHandler builds the handler of block on one listener, as setup does.
func reloadHandler(t *testing.T, block string, clk *clock) (*RRL, carry) {
	t.Helper()
	h := testHandler(t, block, zoneNext, clk)
	h.listeners = []string{"dns://127.0.0.1:53"}
	return h, limiters.adopt(h)
}

// TestSettingsStringCoversEverySetting: each setting, core keyword and
// plugin option alike, changes the string; the same block gives the same.
func TestSettingsStringCoversEverySetting(t *testing.T) {
	lines := map[string]string{
		"window":                       "window 10",
		"ipv4-prefix-length":           "ipv4-prefix-length 16",
		"ipv6-prefix-length":           "ipv6-prefix-length 48",
		"responses-per-second":         "responses-per-second 7",
		"referrals-per-second":         "referrals-per-second 7",
		"nodata-per-second":            "nodata-per-second 7",
		"nxdomains-per-second":         "nxdomains-per-second 7",
		"errors-per-second":            "errors-per-second 7",
		"requests-per-second":          "requests-per-second 7",
		"proven-requests-per-second":   "proven-requests-per-second 7",
		"all-per-second":               "all-per-second 7",
		"slip-ratio":                   "slip-ratio 3",
		"qps-scale":                    "qps-scale 100",
		"max-table-size":               "max-table-size 5000",
		"exempt-clients":               "exempt-clients 10.0.0.0/8",
		"report-only":                  "report-only",
		"cookie-secret":                "cookie-secret 00112233445566778899aabbccddeeff",
		"cookie-secret previous":       "cookie-secret 00112233445566778899aabbccddeeff ffeeddccbbaa99887766554433221100",
		"status (the record it needs)": "status 127.0.0.1:9154",
		"ipv4-request-prefixes":        "ipv4-request-prefixes 32:5,20:400",
		"ipv6-request-prefixes":        "ipv6-request-prefixes 128:5,48:800",
		"all-bytes-per-second":         "all-bytes-per-second 100000",
		"nocookie-udp-size":            "nocookie-udp-size 512",
		"stream-time-per-second":       "stream-time-per-second 100ms",
		"stream-time-instant":          "stream-time-instant 1s",
	}
	for _, k := range core.Keywords() {
		if lines[k] == "" {
			t.Errorf("no case for the keyword %s: add one, and make sure settingsString has it", k)
		}
	}
	settings := func(line string) string {
		h, err := parseString("rrl {\n " + line + "\n}")
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		return h.settings
	}
	base := settings("")
	if again := settings(""); again != base {
		t.Fatalf("the same block gives %q and %q", base, again)
	}
	seen := map[string]string{base: "nothing"}
	for name, line := range lines {
		s := settings(line)
		if other, dup := seen[s]; dup {
			t.Errorf("%s gives the same settings string as %s: %q", name, other, s)
		}
		seen[s] = name
		if strings.Contains(s, "00112233") || strings.Contains(s, "ffeeddcc") {
			t.Errorf("%s: the settings string holds the secret: %q", name, s)
		}
	}
}

// TestReloadKeepsLimiterWithoutChain reloads a block many times with the
// same settings: each replacement has the limiter of the first, with its
// accounts, while the registry holds one limiter and one block, and the
// blocks replaced can be collected.
func TestReloadKeepsLimiterWithoutChain(t *testing.T) {
	before := limiters.size()
	const block = "{\n responses-per-second 2\n}"
	first, c := reloadHandler(t, block, nil)
	if c != carryNone {
		t.Fatalf("first block: carry %d, want none", c)
	}
	first.start()
	flood := func(h *RRL) map[outcome]int {
		return tally(t, h, "127.0.50.1", false, 20, func(int) *dns.Msg { return query("www.example.org.", dns.TypeA) })
	}
	if got := flood(first)[sent]; got == 0 || got > 3 {
		t.Fatalf("first flood: %d sent, want about 2", got)
	}
	limited := first.stats.limited.value()
	if limited == 0 {
		t.Fatal("the flood started no episode")
	}
	gone := weak.Make(first)
	old := first
	first = nil
	for i := range 50 {
		h, c := reloadHandler(t, block, nil)
		if c != carryKept {
			t.Fatalf("reload %d: carry %d, want kept", i, c)
		}
		h.start()
		old.stop()
		if n := h.stats.limited.value(); n != limited {
			t.Fatalf("reload %d: %d accounts limited, want %d handed over", i, n, limited)
		}
		old = h
	}
	if got := flood(old)[sent]; got != 0 {
		t.Errorf("after 50 reloads: %d of 20 sent, want 0 (the account is in debt)", got)
	}
	if n := limiters.size(); n != before+1 {
		t.Errorf("registry holds %d limiters, want %d", n, before+1)
	}
	if n := len(old.shared.live); n != 1 {
		t.Errorf("the limiter has %d live blocks, want 1", n)
	}
	runtime.GC()
	runtime.GC()
	if gone.Value() != nil {
		t.Error("the first block is still reachable after 50 reloads")
	}
	old.stop()
	if n := limiters.size(); n != before {
		t.Errorf("after the last block stopped the registry holds %d limiters, want %d", n, before)
	}
}

// TestReloadChangedSettingsResets: a block whose settings changed gets a
// fresh table, and says so.
func TestReloadChangedSettingsResets(t *testing.T) {
	old, _ := reloadHandler(t, "{\n responses-per-second 2\n}", nil)
	old.start()
	defer old.stop()
	h, c := reloadHandler(t, "{\n responses-per-second 3\n}", nil)
	if c != carryReset {
		t.Errorf("carry %d, want reset", c)
	}
	if h.limiter == old.limiter {
		t.Error("a block with other settings has the old limiter")
	}
	h.start()
	h.stop()
}

// TestFailedReloadHandsBack: when a reload fails after its blocks started,
// they stop, and the old block gets the limiter's events back with the
// episodes under way, so that their stop lines and the gauge stay right.
func TestFailedReloadHandsBack(t *testing.T) {
	lb := captureLog(t)
	clk := newClock()
	const block = "{\n responses-per-second 1\n}"
	old, _ := reloadHandler(t, block, clk)
	old.start()
	defer old.stop()
	tally(t, old, "127.0.51.1", false, 5, func(int) *dns.Msg { return query("www.example.org.", dns.TypeA) })
	if n := old.stats.limited.value(); n != 1 {
		t.Fatalf("%d accounts limited, want 1", n)
	}
	h, _ := reloadHandler(t, block, nil)
	h.start()
	h.stop() // the reload failed
	if old.shared.stats != old.stats {
		t.Fatal("the old block did not get the events back")
	}
	if n := old.stats.limited.value(); n != 1 {
		t.Errorf("%d accounts limited after the failed reload, want 1", n)
	}
	clk.advance(16 * time.Second) // out of debt (window 15)
	if n := old.limiter.EndQuietEpisodes(0); n != 1 {
		t.Fatalf("%d episodes ended, want 1", n)
	}
	if n := old.stats.limited.value(); n != 0 {
		t.Errorf("%d accounts limited after the episode ended, want 0", n)
	}
	if !strings.Contains(lb.String(), "stop limiting") || !strings.Contains(lb.String(), "127.0.51.0/24") {
		t.Errorf("no stop line naming the network:\n%s", lb)
	}
}

// TestReloadUnderFlood reloads a block while a flood from many networks
// starts and ends episodes in its limiter, for the race detector: the
// events go to one block's stats or the other's, never to both or none.
func TestReloadUnderFlood(t *testing.T) {
	const block = "{\n responses-per-second 1\n}"
	var cur atomic.Pointer[RRL]
	first, _ := reloadHandler(t, block, nil)
	first.start()
	cur.Store(first)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				h := cur.Load()
				ip := fmt.Sprintf("127.%d.%d.1", 60+g, i%64)
				tally(t, h, ip, false, 3, func(int) *dns.Msg { return query("www.example.org.", dns.TypeA) })
				h.limiter.EndQuietEpisodes(0)
			}
		}()
	}
	old := first
	for range 20 {
		h, _ := reloadHandler(t, block, nil)
		h.start()
		cur.Store(h)
		old.stop()
		old = h
	}
	close(stop)
	wg.Wait()
	if n := old.stats.limited.value(); n < 1 || n > 128 {
		t.Errorf("%d accounts limited after the reloads, want 1 to 128", n)
	}
	old.stop()
}
