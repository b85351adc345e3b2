package replay_test

import (
	"encoding/json"
	"testing"

	"github.com/dnsrrl/rrl/replay"
)

// A sweep gives, for each value, the report of a replay with that value alone.
func TestSweep(t *testing.T) {
	capture := pcapOf(t, ethernet, false, traffic(t, 10, 200, 0.3, 0.1))
	base := settings(t, "nxdomains-per-second=1")
	sw, err := replay.ParseSweep("responses-per-second=1,5,50")
	if err != nil {
		t.Fatal(err)
	}
	r, _ := replay.New(replay.Options{Settings: base, Sweep: sw})
	if err := r.Read(bytesReader(capture)); err != nil {
		t.Fatal(err)
	}
	reports := r.Reports()
	if len(reports) != 3 {
		t.Fatalf("%d reports", len(reports))
	}
	for i, v := range sw.Values {
		alone := replayBytes(t, replay.Options{Settings: append(append([]replay.Setting(nil), base...), settings(t, "responses-per-second="+v)...)}, capture)
		got := reports[i]
		if got.Setting != "responses-per-second="+v {
			t.Errorf("report %d is for %q", i, got.Setting)
		}
		got.Setting = ""
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(alone)
		if string(a) != string(b) {
			t.Errorf("%s: swept and alone differ:\n%s\n%s", v, a, b)
		}
	}
	if !(reports[0].Dropped > reports[1].Dropped && reports[1].Dropped > reports[2].Dropped) {
		t.Errorf("drops do not fall as the allowance grows: %d, %d, %d", reports[0].Dropped, reports[1].Dropped, reports[2].Dropped)
	}
}

func TestParseSweepErrors(t *testing.T) {
	for _, s := range []string{"responses-per-second", "responses-per-second=", "responses-per-second=1,x", "nope=1", "window=1,0"} {
		if _, err := replay.ParseSweep(s); err == nil {
			t.Errorf("%q: no error", s)
		}
	}
}

func TestSweepBounds(t *testing.T) {
	for _, n := range []int{0, 65} {
		sw := &replay.Sweep{Keyword: "window", Values: make([]string, n)}
		for i := range sw.Values {
			sw.Values[i] = "5"
		}
		if _, err := replay.New(replay.Options{Sweep: sw}); err == nil {
			t.Errorf("a sweep of %d values: no error", n)
		}
	}
}
