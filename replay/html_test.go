package replay_test

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dnsrrl/rrl/replay"
)

func sweepReports(t *testing.T) []*replay.Report {
	t.Helper()
	capture := pcapOf(t, ethernet, false, traffic(t, 30, 100, 0.3, 0.1))
	sw, _ := replay.ParseSweep("responses-per-second=1,2,5,10")
	r, _ := replay.New(replay.Options{Sweep: sw})
	if err := r.Read(bytesReader(capture)); err != nil {
		t.Fatal(err)
	}
	return r.Reports()
}

// The page stands alone: no script, no style sheet, image or font fetched.
func TestHTMLSelfContained(t *testing.T) {
	var buf bytes.Buffer
	reports := sweepReports(t)
	if err := replay.WriteHTML(&buf, reports); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, bad := range []string{"<script", "<link", "<img", "<iframe", "src=", "href=", "url(", "@import"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page has %q", bad)
		}
	}
	if n, want := strings.Count(page, "<svg"), charts(reports); n != want {
		t.Errorf("%d charts, want %d", n, want)
	}
	if !strings.Contains(page, "Share of responses limited, by responses-per-second") || !strings.Contains(page, "Responses per second to 198.51.100.0/24") {
		t.Error("a chart is missing")
	}
}

// charts is the number of charts the page of reports has: for a sweep,
// the sweep's; then for each report three overall ones (responses,
// requests refused, bytes cut) and one per network followed.
func charts(reports []*replay.Report) int {
	n := 0
	if len(reports) > 1 {
		n++
	}
	for _, r := range reports {
		n += 3 + len(r.Timeline.Networks)
	}
	return n
}

// floodReport replays a flood with response and request limits, so that
// responses are sent, slipped and dropped, and requests refused.
func floodReport(t *testing.T) []*replay.Report {
	t.Helper()
	capture := pcapOf(t, ethernet, false, traffic(t, 30, 100, 0.3, 0.1))
	rep := replayBytes(t, replay.Options{Settings: settings(t, "responses-per-second=5", "requests-per-second=20")}, capture)
	return []*replay.Report{rep}
}

// chromium returns a headless Chromium or Chrome, or skips the test.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless_shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium installed (apt-get install chromium): the page is not checked in a browser")
	return ""
}

// measure is appended to the page, for the test only (the report has no
// script): it writes what the browser laid out into the DOM that
// --dump-dom prints, each chart's rendered width and each text's.
const measure = `<script>
for (const svg of document.querySelectorAll("svg.chart")) svg.setAttribute("data-width", Math.round(svg.getBoundingClientRect().width));
for (const t of document.querySelectorAll("svg text")) t.setAttribute("data-width", Math.round(t.getBoundingClientRect().width));
</script>`

// render writes the page of reports, with measure, and returns its DOM as
// headless Chromium lays it out in a window 1400 pixels wide.
func render(t *testing.T, browser string, reports []*replay.Report) (dom string, page []byte) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "report.html")
	var buf bytes.Buffer
	if err := replay.WriteHTML(&buf, reports); err != nil {
		t.Fatal(err)
	}
	page = buf.Bytes()
	measured := strings.Replace(buf.String(), "</body>", measure+"</body>", 1)
	if err := os.WriteFile(file, []byte(measured), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, browser, append(chromiumArgs(t), "--dump-dom", "file://"+file)...).Output()
	if err != nil {
		t.Fatalf("%s --dump-dom: %v", browser, err)
	}
	return string(out), page
}

func chromiumArgs(t *testing.T) []string {
	return []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(), "--window-size=1400,2400"}
}

var (
	svgRe    = regexp.MustCompile(`(?s)<svg[^>]*class="chart"[^>]*>.*?</svg>`)
	attrRe   = func(name string) *regexp.Regexp { return regexp.MustCompile(name + `="([^"]*)"`) }
	titleRe  = regexp.MustCompile(`class="title"[^>]*>([^<]*)<`)
	seriesRe = regexp.MustCompile(`class="series (steps|points)" data-series="([^"]*)"`)
	tickRe   = func(axis string) *regexp.Regexp {
		return regexp.MustCompile(`<text x="([0-9.]+)"[^>]*class="tick ` + axis + `"[^>]*>([^<]*)<`)
	}
)

// renderedChart is a chart as the browser laid it out.
type renderedChart struct {
	title          string
	width          float64
	series         map[string]string // name: steps or points
	xTicks, yTicks []string
	xAt            []float64
	xLabel, yLabel string
}

func charted(t *testing.T, dom string) []renderedChart {
	t.Helper()
	var out []renderedChart
	for _, svg := range svgRe.FindAllString(dom, -1) {
		c := renderedChart{series: map[string]string{}}
		if m := titleRe.FindStringSubmatch(svg); m != nil {
			c.title = m[1]
		}
		if m := attrRe("data-width").FindStringSubmatch(svg); m != nil {
			c.width, _ = strconv.ParseFloat(m[1], 64)
		}
		for _, m := range seriesRe.FindAllStringSubmatch(svg, -1) {
			c.series[m[2]] = m[1]
		}
		for _, m := range tickRe("x").FindAllStringSubmatch(svg, -1) {
			x, _ := strconv.ParseFloat(m[1], 64)
			c.xAt, c.xTicks = append(c.xAt, x), append(c.xTicks, m[2])
		}
		for _, m := range tickRe("y").FindAllStringSubmatch(svg, -1) {
			c.yTicks = append(c.yTicks, m[2])
		}
		if m := regexp.MustCompile(`class="axis-label x"[^>]*>([^<]*)<`).FindStringSubmatch(svg); m != nil {
			c.xLabel = m[1]
		}
		if m := regexp.MustCompile(`class="axis-label y"[^>]*>([^<]*)<`).FindStringSubmatch(svg); m != nil {
			c.yLabel = m[1]
		}
		out = append(out, c)
	}
	return out
}

// Headless Chromium renders the report of a flood: each chart fills the
// width of a 1400-pixel window; the responses chart has sent, slipped and
// dropped as series of their own, and there are charts of requests refused
// and bytes cut per second; the time axis is labelled with its time zone,
// its ticks evenly spaced on round times; the count axes have whole-number
// ticks; a sparse series is drawn as points; no heading says "Report".
func TestHTMLInChromium(t *testing.T) {
	browser := chromium(t)
	reports := floodReport(t)
	tl := reports[0].Timeline
	few := func(at ...int) []int64 {
		v := make([]int64, len(tl.Sent))
		for _, i := range at {
			v[i] = 1
		}
		return v
	}
	tl.Networks = append(tl.Networks, replay.NetworkSeries{Network: "203.0.113.0/24",
		Sent: few(3), Slipped: few(9, 20), Dropped: few(), Refused: few(), Limited: few(9, 20)})
	dom, page := render(t, browser, reports)
	got := charted(t, dom)
	if len(got) != charts(reports) {
		t.Fatalf("rendered DOM has %d charts, want %d", len(got), charts(reports))
	}
	if strings.Contains(string(page), "<h2>Report</h2>") {
		t.Error(`the page has the heading "Report" under its title`)
	}
	want := map[string][]string{
		"Responses per second, all clients":                         {"sent", "slipped", "dropped"},
		"Requests refused (request limits) per second, all clients": {"refused"},
		"Bytes of responses cut per second, all clients":            {"bytes cut"},
		"Responses per second to 198.51.100.0/24":                   {"sent", "slipped", "dropped", "requests refused"},
	}
	seen := map[string]bool{}
	for _, c := range got {
		seen[c.title] = true
		for _, name := range want[c.title] {
			if c.series[name] == "" {
				t.Errorf("%s: no series %q (has %v)", c.title, name, c.series)
			}
		}
		if c.width < 1300 {
			t.Errorf("%s: %g pixels wide in a 1400-pixel window", c.title, c.width)
		}
		if !strings.HasPrefix(c.xLabel, "time (UTC)") || !strings.HasSuffix(c.yLabel, "per second") {
			t.Errorf("%s: axes labelled %q and %q", c.title, c.xLabel, c.yLabel)
		}
		for _, y := range c.yTicks {
			if _, err := strconv.Atoi(y); err != nil {
				t.Errorf("%s: y tick %q is not a whole number", c.title, y)
			}
		}
		if len(c.xAt) < 3 {
			t.Errorf("%s: x ticks %v", c.title, c.xTicks)
			continue
		}
		for i := 2; i < len(c.xAt); i++ {
			if d0, d := c.xAt[1]-c.xAt[0], c.xAt[i]-c.xAt[i-1]; math.Abs(d-d0) > 0.2 {
				t.Errorf("%s: x ticks at %v, unevenly spaced", c.title, c.xAt)
				break
			}
		}
		for _, tick := range c.xTicks {
			if ts, err := time.Parse("15:04:05", tick); err != nil || ts.Second()%5 != 0 {
				t.Errorf("%s: x tick %q is not a round time", c.title, tick)
			}
		}
	}
	for title := range want {
		if !seen[title] {
			t.Errorf("no chart %q", title)
		}
	}
	// A network that asked now and then: its sparse series are points,
	// one at each second with a count, not spikes.
	for _, c := range got {
		if c.title == "Responses per second to 203.0.113.0/24" && (c.series["slipped"] != "points" || c.series["sent"] != "points") {
			t.Errorf("%s: series drawn %v, want points", c.title, c.series)
		}
	}
	sparse := regexp.MustCompile(`(?s)to 203\.0\.113\.0/24.*?data-series="slipped"[^>]*>(.*?)</g>`).FindStringSubmatch(dom)
	if sparse == nil || strings.Count(sparse[1], "<circle") != 2 {
		t.Errorf("the sparse slipped series of 203.0.113.0/24 is not two points: %v", sparse)
	}

	img := screenshot(t, browser, page, os.Getenv("RRL_REPLAY_SCREENSHOT")) // set, the screenshot is kept to look at
	for _, c := range [][3]uint8{{0x2a, 0x9d, 0x46}, {0xe0, 0x8a, 0x00}, {0xd6, 0x27, 0x28}, {0x7b, 0x3f, 0xb5}, {0x1f, 0x5f, 0xb4}} {
		if countColor(img, c[0], c[1], c[2]) == 0 {
			t.Errorf("the screenshot shows no series of colour #%02x%02x%02x", c[0], c[1], c[2])
		}
	}
}

// The sweep's chart, rendered: its swept values on a log axis (1, 2, 5, 10
// spaced as their logarithms, not evenly) and drawn as points, not a line;
// its table has the cut column of the text report.
func TestHTMLSweepInChromium(t *testing.T) {
	browser := chromium(t)
	reports := sweepReports(t)
	dom, page := render(t, browser, reports)
	got := charted(t, dom)
	if len(got) == 0 || !strings.HasPrefix(got[0].title, "Share of responses limited") {
		t.Fatalf("no sweep chart first: %+v", got)
	}
	c := got[0]
	if c.series["limited"] != "points" || len(c.xAt) != 4 || c.xLabel != "responses-per-second (log scale)" {
		t.Fatalf("sweep chart: series %v, x ticks %v at %v, x label %q", c.series, c.xTicks, c.xAt, c.xLabel)
	}
	unit := (c.xAt[3] - c.xAt[0]) / math.Log10(10)
	for i, v := range []float64{1, 2, 5, 10} {
		if want := c.xAt[0] + unit*math.Log10(v); math.Abs(c.xAt[i]-want) > 1 {
			t.Errorf("value %g at x %.1f, want %.1f on a log scale", v, c.xAt[i], want)
		}
	}
	if c.width < 1300 {
		t.Errorf("sweep chart %g pixels wide in a 1400-pixel window", c.width)
	}
	var text bytes.Buffer
	replay.WriteText(&text, reports)
	for _, r := range reports {
		cut := regexp.MustCompile(regexp.QuoteMeta(r.Setting) + `\s.*\s(\S+%)\s*\n`).FindStringSubmatch(text.String())
		if cut == nil || !strings.Contains(string(page), "<td>"+r.Setting+"</td>") || !regexp.MustCompile(`<td>`+regexp.QuoteMeta(r.Setting)+`</td>(<td>[^<]*</td>)*<td>`+regexp.QuoteMeta(cut[1])+`</td></tr>`).Match(page) {
			t.Errorf("%s: the sweep table lacks the text report's cut %v", r.Setting, cut)
		}
	}
	if !strings.Contains(string(page), "<th>cut</th>") {
		t.Error("the sweep table has no cut column")
	}
}

// In Chromium, a slipped series equal to the dropped one still shows its
// colour, over many pixels, not only at the edges of the dropped one.
func TestEqualSeriesInChromium(t *testing.T) {
	browser := chromium(t)
	reports := floodReport(t)
	tl := reports[0].Timeline
	tl.Slipped, tl.Networks = tl.Dropped, nil
	_, page := render(t, browser, reports)
	img := screenshot(t, browser, page, "")
	if n := countColor(img, 0xe0, 0x8a, 0x00); n < 300 {
		t.Errorf("%d pixels of the slipped series' colour, want at least 300", n)
	}
}

// screenshot returns Chromium's picture of the page, written to shot (""
// for a temporary file).
func screenshot(t *testing.T, browser string, page []byte, shot string) image.Image {
	t.Helper()
	if shot == "" {
		shot = filepath.Join(t.TempDir(), "page.png")
	}
	file := filepath.Join(t.TempDir(), "page.html")
	if err := os.WriteFile(file, page, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, append(chromiumArgs(t), "--screenshot="+shot, "file://"+file)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s --screenshot: %v\n%s", browser, err, out)
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// countColor counts the pixels of img close to the colour.
func countColor(img image.Image, r, g, b uint8) int {
	near := func(a uint32, b uint8) bool { d := int(a>>8) - int(b); return d > -24 && d < 24 }
	n := 0
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			pr, pg, pb, _ := img.At(x, y).RGBA()
			if near(pr, r) && near(pg, g) && near(pb, b) {
				n++
			}
		}
	}
	return n
}

// The sweep's x axis: a log scale for rates, a linear one when a value is
// zero, the sweep's order for values that are not numbers.
func TestSweepScale(t *testing.T) {
	capture := pcapOf(t, ethernet, false, traffic(t, 5, 50, 0.3, 0.1))
	for sweep, want := range map[string]string{
		"responses-per-second=1,10,100":               ">responses-per-second (log scale)<",
		"slip-ratio=0,1,2":                            ">slip-ratio<",
		"exempt-clients=192.0.2.0/24,198.51.100.0/24": ">exempt-clients<",
	} {
		sw, err := replay.ParseSweep(sweep)
		if err != nil {
			t.Fatal(err)
		}
		r, err := replay.New(replay.Options{Settings: settings(t, "responses-per-second=5"), Sweep: sw})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Read(bytesReader(capture)); err != nil {
			t.Fatal(err)
		}
		var page bytes.Buffer
		if err := replay.WriteHTML(&page, r.Reports()); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(page.String(), `class="axis-label x" text-anchor="middle"`+want) {
			t.Errorf("%s: no x axis labelled %s", sweep, want)
		}
	}
}

// Without a browser: the page has the series and axis labels the charts
// need, the sweep table its cut column, and no "Report" heading.
func TestHTMLParts(t *testing.T) {
	reports := sweepReports(t)
	var buf bytes.Buffer
	if err := replay.WriteHTML(&buf, append(reports, floodReport(t)...)); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, want := range []string{
		`<th>bytes sent</th><th>cut</th></tr>`,
		`data-series="sent"`, `data-series="slipped"`, `data-series="dropped"`, `data-series="refused"`, `data-series="bytes cut"`,
		`class="axis-label x" text-anchor="middle">time (UTC)`, `>responses per second</text>`, `>requests per second</text>`, `>bytes per second</text>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if strings.Contains(page, "<h2>Report</h2>") {
		t.Error(`the page has a "Report" heading`)
	}
	if n := strings.Count(page, "limited (slipped or dropped)"); n != 1 {
		t.Errorf("%d series of slipped and dropped together, want the sweep's alone", n)
	}
}
