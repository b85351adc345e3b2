package replay_test

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/dnsrrl/rrl/replay"
)

// sampleReport replays the sample capture with the README's settings: the
// victim's network has requests refused and responses slipped and dropped.
func sampleReport(t *testing.T) *replay.Report {
	t.Helper()
	r, err := replay.New(replay.Options{Settings: settings(t, "responses-per-second=5", "requests-per-second=20"), Top: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.ReadFile("testdata/sample.pcap"); err != nil {
		t.Fatal(err)
	}
	return r.Reports()[0]
}

func sum(v []int64) (n int64) {
	for _, x := range v {
		n += x
	}
	return n
}

// A refused request is counted once by network, tuple and time: as a
// request refused, not again as a response dropped. The responses'
// fates still add up: the report's dropped holds the refused requests'
// responses, and says how many.
func TestRefusedApartFromDropped(t *testing.T) {
	rep := sampleReport(t)
	cut := cutOf(t, rep, "responses-per-second")
	if rep.Dropped != 208 || rep.RequestsDropped != 52 || rep.ResponsesRefused != 52 || cut.Dropped != 156 {
		t.Fatalf("dropped %d, requests refused %d with %d responses, responses-per-second dropped %d; want 208, 52, 52 and 156",
			rep.Dropped, rep.RequestsDropped, rep.ResponsesRefused, cut.Dropped)
	}
	n, l := rep.Networks[0], rep.Limited[0]
	if n.Network != "198.51.100.0/24" || n.Dropped != cut.Dropped || n.Slipped != cut.Slipped || n.RequestsDropped != 52 {
		t.Errorf("network %s: slipped %d, dropped %d, requests refused %d; want %d, %d and 52", n.Network, n.Slipped, n.Dropped, n.RequestsDropped, cut.Slipped, cut.Dropped)
	}
	if l.Dropped != cut.Dropped {
		t.Errorf("tuple %s %s: dropped %d, want %d", l.Network, l.Name, l.Dropped, cut.Dropped)
	}
	tl := rep.Timeline
	if got := sum(tl.Dropped); got != rep.Dropped-rep.ResponsesRefused {
		t.Errorf("timeline: %d dropped, want %d", got, rep.Dropped-rep.ResponsesRefused)
	}
	if got := sum(tl.BytesCut); got != rep.Bytes.Captured-rep.Bytes.Sent {
		t.Errorf("timeline: %d bytes cut, want %d", got, rep.Bytes.Captured-rep.Bytes.Sent)
	}
	if ns := tl.Networks[0]; sum(ns.Dropped) != n.Dropped || sum(ns.Refused) != n.RequestsDropped {
		t.Errorf("network's timeline: %d dropped, %d refused; want %d and %d", sum(ns.Dropped), sum(ns.Refused), n.Dropped, n.RequestsDropped)
	}
	text := textOf(t, rep)
	if !regexp.MustCompile(`(?m)^network +sent +slipped +dropped +requests refused .*\n198\.51\.100\.0/24 +0 +157 +156 +52 `).MatchString(text) ||
		!strings.Contains(text, "refused by a request limit 52 (their 52 responses, never made, count as dropped above)") {
		t.Errorf("the text report does not keep the refused apart:\n%s", text)
	}
	var page bytes.Buffer
	if err := replay.WriteHTML(&page, []*replay.Report{rep}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), "<th>requests refused</th>") || !strings.Contains(page.String(), "<td>198.51.100.0/24</td><td>0</td><td>157</td><td>156</td><td>52</td>") {
		t.Error("the HTML table of networks does not keep the refused apart")
	}
}

// captionRe finds a chart's title and the lines of its caption.
var captionRe = regexp.MustCompile(`class="title">([^<]*)</text>((?:<text[^>]*class="caption">[^<]*</text>)*)`)

// Every chart says what it counts, under its title; a network's says from
// when it counts, shades the time before and draws no series there.
func TestChartsSayWhatTheyCount(t *testing.T) {
	rep := sampleReport(t)
	var buf bytes.Buffer
	if err := replay.WriteHTML(&buf, append(sweepReports(t), rep)); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	svgs := svgRe.FindAllString(page, -1)
	captions := map[string]string{}
	for _, svg := range svgs {
		m := captionRe.FindStringSubmatch(svg)
		if m == nil || m[2] == "" {
			t.Errorf("a chart without a caption: %.200s", svg)
			continue
		}
		captions[m[1]] = regexp.MustCompile(`<[^>]*>`).ReplaceAllString(strings.ReplaceAll(m[2], "</text><text", "</text> <text"), "")
	}
	for title, want := range map[string]string{
		"Responses per second, all clients":                         "dropped by a response limit. The responses of requests refused by a request limit were never made",
		"Requests refused (request limits) per second, all clients": "their responses were never made",
		"Bytes of responses cut per second, all clients":            "less the truncated replies",
		"Responses per second to 198.51.100.0/24":                   "Counted from 12:00:05.240 UTC, when the network was first limited: the shaded time before is not counted.",
		"Share of responses limited, by responses-per-second":       "slipped or dropped",
	} {
		if !strings.Contains(captions[title], want) {
			t.Errorf("%s: caption %q, want %q in it", title, captions[title], want)
		}
	}
	victim := ""
	for _, svg := range svgs {
		if strings.Contains(svg, "to 198.51.100.0/24") {
			victim = svg
		}
	}
	shade := regexp.MustCompile(`class="uncounted" x="([0-9.]+)" y="[0-9.]+" width="([0-9.]+)"`).FindStringSubmatch(victim)
	if shade == nil {
		t.Fatal("the victim's chart shades no time as not counted")
	}
	x0, _ := strconv.ParseFloat(shade[1], 64)
	w, _ := strconv.ParseFloat(shade[2], 64)
	for _, m := range regexp.MustCompile(`data-series="([^"]*)"[^>]* d="M([0-9.]+),`).FindAllStringSubmatch(victim, -1) {
		if x, _ := strconv.ParseFloat(m[2], 64); x < x0+w-0.5 {
			t.Errorf("the victim's %s is drawn from x %g, in the time not counted (to %g)", m[1], x, x0+w)
		}
	}
	var js struct {
		Timeline struct{ Networks []struct{ From string } }
	}
	b, _ := json.Marshal(rep)
	if json.Unmarshal(b, &js); len(js.Timeline.Networks) == 0 || js.Timeline.Networks[0].From != "2026-11-30T12:00:05.24004Z" {
		t.Errorf("the JSON timeline does not say from when the network counts: %+v", js.Timeline.Networks)
	}
}

// seriesRe finds a drawn series: its name and attributes.
var seriesAttrRe = regexp.MustCompile(`<path class="series steps" data-series="([^"]*)"([^>]*)`)

// Where slipped equals dropped, both show: the thicker solid dropped is
// drawn first, the dashed slipped over it.
func TestEqualSeriesBothShow(t *testing.T) {
	reports := floodReport(t)
	tl := reports[0].Timeline
	tl.Slipped = tl.Dropped
	var buf bytes.Buffer
	if err := replay.WriteHTML(&buf, reports); err != nil {
		t.Fatal(err)
	}
	chart := svgRe.FindString(buf.String())
	var order []string
	width, dashed := map[string]float64{}, map[string]bool{}
	for _, m := range seriesAttrRe.FindAllStringSubmatch(chart, -1) {
		order = append(order, m[1])
		if w := attrRe("stroke-width").FindStringSubmatch(m[2]); w != nil {
			width[m[1]], _ = strconv.ParseFloat(w[1], 64)
		}
		dashed[m[1]] = strings.Contains(m[2], "stroke-dasharray")
	}
	at := func(name string) int { return strings.Index(strings.Join(order, " "), name) }
	if at("dropped") < 0 || at("slipped") < at("dropped") || !dashed["slipped"] || dashed["dropped"] || width["dropped"] <= width["slipped"] {
		t.Errorf("series drawn %v, widths %v, dashed %v: want dropped solid and thicker, and slipped dashed after it", order, width, dashed)
	}
	if !strings.Contains(chart, "the dashed line runs over the solid one") || !strings.Contains(chart, `stroke-dasharray="7 4"/><text`) {
		t.Error("the chart's caption and legend do not say how equal series are drawn")
	}
}
