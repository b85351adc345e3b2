package replay_test

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dnsrrl/rrl/replay"
	"github.com/dnsrrl/rrl/replay/internal/capgen"
)

// suggestMix is the capture the suggestion was worked out on: two minutes
// of quiet networks and busy resolvers (IPv4 and IPv6), and three attacks
// from the 20th second: a 1,200-byte answer reflected toward one /24 at
// 100 q/s; NXDOMAIN floods from 16 /24s of one /20 at 10 q/s each; 60
// names of 300 bytes in turn toward another /24 at 60 q/s.
func suggestMix() *capgen.Mix {
	return &capgen.Mix{Seed: 1, Start: start, Duration: 2 * time.Minute, Zone: "example.org.",
		Quiet: 200, QuietQPS: 0.5, Busy: 15, BusyQPS: 12, Names: 40, IPv6: 0.3, BusyTCP: 0.5,
		Attacks: []capgen.Attack{
			{Kind: capgen.Reflection, Target: netip.MustParsePrefix("198.51.100.0/24"), QPS: 100, Size: 1200, From: 20 * time.Second},
			{Kind: capgen.NXFlood, Target: netip.MustParsePrefix("10.1.16.0/20"), Networks: 16, QPS: 10, From: 20 * time.Second},
			{Kind: capgen.Rotation, Target: netip.MustParsePrefix("203.0.113.0/24"), QPS: 60, Size: 300, Names: 60, From: 20 * time.Second},
		}}
}

// heldOutMix is another capture, of another seed and shape, that the
// rule's factors were not chosen on: more and slower resolvers, half the
// networks IPv6, fewer resolvers asking over TCP, ordinary clients asking
// for the large record too, and attacks of other rates, sizes and places.
func heldOutMix() *capgen.Mix {
	return &capgen.Mix{Seed: 99, Start: start, Duration: 90 * time.Second, Zone: "example.net.",
		Quiet: 300, QuietQPS: 0.3, Busy: 25, BusyQPS: 8, Names: 100, IPv6: 0.5, BusyTCP: 0.2, BigShare: 0.01, BigSize: 1400,
		Attacks: []capgen.Attack{
			{Kind: capgen.Reflection, Target: netip.MustParsePrefix("198.18.0.0/24"), QPS: 70, Size: 1400, From: 10 * time.Second, To: 70 * time.Second},
			{Kind: capgen.NXFlood, Target: netip.MustParsePrefix("10.9.32.0/20"), Networks: 12, QPS: 8, From: 30 * time.Second},
			{Kind: capgen.Rotation, Target: netip.MustParsePrefix("198.18.7.0/24"), QPS: 45, Size: 420, Names: 100, From: 5 * time.Second},
		}}
}

// attacked returns the networks (/24) a mix's attacks involve.
func attacked(m *capgen.Mix) []string {
	var out []string
	for _, a := range m.Attacks {
		if a.Kind != capgen.NXFlood {
			out = append(out, a.Target.String())
			continue
		}
		b := a.Target.Addr().As4()
		for i := range a.Networks {
			n := b
			n[2] += byte(i)
			out = append(out, netip.PrefixFrom(netip.AddrFrom4(n), 24).String())
		}
	}
	slices.Sort(out)
	return out
}

func mixCapture(t testing.TB, m *capgen.Mix) []byte {
	t.Helper()
	ex, err := m.Exchanges()
	if err != nil {
		t.Fatal(err)
	}
	return pcapOf(t, ethernet, false, ex)
}

// suggestAndCheck suggests settings for the capture with opts and checks
// them on it.
func suggestAndCheck(t testing.TB, capture []byte, opts replay.Options) *replay.Suggestion {
	t.Helper()
	s, err := replay.NewSuggester(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Replay().Read(bytes.NewReader(capture)); err != nil {
		t.Fatal(err)
	}
	sg, err := s.Suggest()
	if err != nil {
		t.Fatal(err)
	}
	r, err := sg.NewCheck()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Read(bytes.NewReader(capture)); err != nil {
		t.Fatal(err)
	}
	sg.Checked(r)
	return sg
}

// namedNetworks returns the networks a suggestion left out, spread floods
// as their networks: the check's groups are those.
func namedNetworks(t testing.TB, sg *replay.Suggestion) []string {
	t.Helper()
	var out []string
	for _, a := range sg.Attacks {
		if a.Networks == 0 {
			out = append(out, a.Network)
		}
	}
	// The networks of a spread flood are not listed one by one; the
	// check's count of named networks includes them.
	return out
}

// checkHolds asserts what a suggestion must do on the capture it was made
// from: limit no ordinary network, limit every attacked one, and cut at
// least minCut percent of the attacks' bytes.
func checkHolds(t *testing.T, m *capgen.Mix, sg *replay.Suggestion, minCut float64) {
	t.Helper()
	var text strings.Builder
	if err := replay.WriteSuggestion(&text, sg); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", text.String())
	ck := sg.Check
	if ck == nil {
		t.Fatal("no check")
	}
	if ck.Ordinary.Limited != 0 || len(ck.OrdinaryLimited) != 0 {
		t.Errorf("ordinary networks limited: %d %v", ck.Ordinary.Limited, ck.OrdinaryLimited)
	}
	want := attacked(m)
	if ck.Attacks.Networks != len(want) {
		t.Errorf("%d networks named as attacks, want the %d attacked: %v", ck.Attacks.Networks, len(want), sg.Attacks)
	}
	for _, n := range namedNetworks(t, sg) {
		if !slices.Contains(want, n) {
			t.Errorf("ordinary network %s named as an attack", n)
		}
	}
	if ck.Attacks.Limited != len(want) || len(ck.AttacksNotLimited) != 0 {
		t.Errorf("%d of %d attacked networks limited; not limited: %v", ck.Attacks.Limited, len(want), ck.AttacksNotLimited)
	}
	if ck.Attacks.BytesCut < minCut {
		t.Errorf("attacks' bytes cut %.1f%%, want at least %g%%", ck.Attacks.BytesCut, minCut)
	}
	if ck.Ordinary.BytesCut != 0 || ck.Ordinary.ResponsesCut != 0 || ck.Ordinary.RequestsRefused != 0 {
		t.Errorf("ordinary traffic cut: %+v", ck.Ordinary)
	}
}

func TestSuggestOnAttacks(t *testing.T) {
	m := suggestMix()
	sg := suggestAndCheck(t, mixCapture(t, m), replay.Options{})
	checkHolds(t, m, sg, 80)
	// The flood spread over the /20 needs a request prefix at /20.
	v := value(sg, "ipv4-request-prefixes")
	if !strings.HasPrefix(v, "20:") {
		t.Errorf("ipv4-request-prefixes %q, want a /20 pair", v)
	}
	// Only the attacks were sent answers over 512 bytes.
	if v := value(sg, "nocookie-udp-size"); v == "0" || v == "" {
		t.Errorf("nocookie-udp-size %q, want it set: only the attacks were sent large answers", v)
	}
}

func TestSuggestHeldOut(t *testing.T) {
	m := heldOutMix()
	sg := suggestAndCheck(t, mixCapture(t, m), replay.Options{})
	checkHolds(t, m, sg, 80)
	// Ordinary clients asked for the large record too: truncating it
	// would limit them.
	if v := value(sg, "nocookie-udp-size"); v != "0" {
		t.Errorf("nocookie-udp-size %q, want 0: ordinary networks were sent the largest answers", v)
	}
}

func value(sg *replay.Suggestion, kw string) string {
	for _, s := range sg.Settings {
		if s.Keyword == kw {
			return s.Value
		}
	}
	return ""
}

func setting(sg *replay.Suggestion, kw string) *replay.SuggestedSetting {
	for _, s := range sg.Settings {
		if s.Keyword == kw {
			return s
		}
	}
	return nil
}

// TestSuggestKeepsGivenSettings: a setting given (-set, or a Corefile's)
// is kept as given, said to be, and compared with the ordinary peak; the
// others are still suggested.
func TestSuggestKeepsGivenSettings(t *testing.T) {
	m := suggestMix()
	m.Duration = 30 * time.Second
	opts := replay.Options{Settings: settings(t, "responses-per-second=1", "exempt-clients=192.0.2.0/24")}
	opts.Settings[1].Origin = "Corefile:7"
	sg := suggestAndCheck(t, mixCapture(t, m), opts)
	rps := setting(sg, "responses-per-second")
	if rps == nil || rps.Value != "1" || rps.Given != "-set" || !strings.Contains(rps.Reason, "BELOW the ordinary peak") {
		t.Errorf("responses-per-second: %+v, want 1 as given by -set, below the peak", rps)
	}
	ex := setting(sg, "exempt-clients")
	if ex == nil || ex.Value != "192.0.2.0/24" || ex.Given != "Corefile:7" {
		t.Errorf("exempt-clients: %+v, want kept from Corefile:7", ex)
	}
	if v := value(sg, "all-per-second"); v == "" || v == "0" {
		t.Errorf("all-per-second %q: want it still suggested", v)
	}
	// The check replays the given value: ordinary networks are limited by
	// it, and the check says so.
	if sg.Check.Ordinary.Limited == 0 {
		t.Error("responses-per-second 1, below the ordinary peak, limited no ordinary network in the check")
	}
	n := 0
	for _, s := range sg.CheckOptions().Settings {
		if s.Keyword == "responses-per-second" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("responses-per-second applied %d times in the check, want once (as given)", n)
	}
}

// TestSuggestRespectsZones: with zones given, traffic of other zones is
// not counted, and the block names the zones.
func TestSuggestRespectsZones(t *testing.T) {
	m := suggestMix()
	m.Duration = 20 * time.Second
	capture := mixCapture(t, m)
	s, err := replay.NewSuggester(replay.Options{Zones: []string{"example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Replay().Read(bytes.NewReader(capture)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Suggest(); err == nil || !strings.Contains(err.Error(), "outside the limited zones") {
		t.Errorf("suggestion from traffic all outside the zones: %v, want an error naming why", err)
	}
	sg := suggestAndCheck(t, capture, replay.Options{Zones: []string{"example.org"}})
	if !strings.HasPrefix(sg.Block(), "rrl example.org {\n") {
		t.Errorf("block %q, want it for the zone", sg.Block())
	}
}

func TestSuggestJSON(t *testing.T) {
	m := suggestMix()
	m.Duration = 30 * time.Second
	sg := suggestAndCheck(t, mixCapture(t, m), replay.Options{})
	b, err := json.Marshal(sg)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Settings []struct {
			Keyword, Value, Reason string
			Peak                   float64 `json:"ordinary_peak"`
			Margin                 float64
		}
		Attacks []struct{ Network, Reason string }
		Rule    string
		Check   struct {
			Attacks, Ordinary struct {
				Limited  int
				BytesCut float64 `json:"bytes_cut_percent"`
			}
			Headroom []struct {
				Keyword string
				Percent float64
			}
		}
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Settings) != len(sg.Settings) || got.Rule == "" || len(got.Attacks) == 0 || len(got.Check.Headroom) == 0 {
		t.Fatalf("JSON missing parts: %s", b)
	}
	for _, s := range got.Settings {
		if s.Reason == "" || s.Value == "" {
			t.Errorf("setting %+v without a value or reason", s)
		}
		if s.Peak > 0 && s.Margin < 2 {
			t.Errorf("setting %+v: margin under 2", s)
		}
	}
	if got.Check.Ordinary.Limited != sg.Check.Ordinary.Limited || got.Check.Attacks.BytesCut != sg.Check.Attacks.BytesCut {
		t.Errorf("JSON check %+v differs from %+v", got.Check, sg.Check)
	}
}

// TestSuggestEmpty: a capture with nothing in it gives a clear error, not
// a panic nor a suggestion of nothing.
func TestSuggestEmpty(t *testing.T) {
	for name, capture := range map[string][]byte{
		"no packets": pcapOf(t, ethernet, false, nil),
		"no bytes":   nil,
	} {
		s, err := replay.NewSuggester(replay.Options{})
		if err != nil {
			t.Fatal(err)
		}
		rerr := s.Replay().Read(bytes.NewReader(capture))
		_, err = s.Suggest()
		if err == nil || !strings.Contains(err.Error(), "no DNS queries or responses") {
			t.Errorf("%s: read %v, suggest %v; want an error saying there was nothing", name, rerr, err)
		}
	}
}

func TestSuggestHTML(t *testing.T) {
	m := suggestMix()
	m.Duration = 30 * time.Second
	sg := suggestAndCheck(t, mixCapture(t, m), replay.Options{})
	var page bytes.Buffer
	if err := replay.WriteSuggestionHTML(&page, sg); err != nil {
		t.Fatal(err)
	}
	html := page.String()
	charts := strings.Count(html, `class="allowance"`)
	if charts < 8 {
		t.Errorf("%d peak charts, want one per allowance with a peak (at least 8)", charts)
	}
	// Every chart has a caption, and the attacks are marked.
	if n := strings.Count(html, `<svg class="chart"`); strings.Count(html, `class="caption"`) < n {
		t.Errorf("%d charts, fewer captions", n)
	}
	if !strings.Contains(html, `data-attack="true"`) || !strings.Contains(html, "Suggested settings") || !strings.Contains(html, "rrl {") {
		t.Error("page lacks the attacks marked, or the suggestion")
	}
}

// FuzzSuggest: whatever the input, a suggestion is made or refused with an
// error, never a panic.
func FuzzSuggest(f *testing.F) {
	f.Add([]byte{})
	f.Add(pcapOf(f, ethernet, false, nil))
	f.Add(pcapOf(f, ethernet, false, traffic(f, 2, 20, 0.3, 0.1)))
	f.Fuzz(func(t *testing.T, in []byte) {
		s, err := replay.NewSuggester(replay.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s.Replay().Read(bytes.NewReader(in)) // a damaged input is an error, or is skipped
		sg, err := s.Suggest()
		if err != nil {
			return
		}
		r, err := sg.NewCheck()
		if err != nil {
			t.Fatal(err)
		}
		r.Read(bytes.NewReader(in))
		sg.Checked(r)
		var b strings.Builder
		if err := replay.WriteSuggestion(&b, sg); err != nil {
			t.Fatal(err)
		}
	})
}
