package replay

import (
	"cmp"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dnsrrl/rrl/replay/internal/words"
)

// WriteHTML writes reports as one self-contained HTML page (no scripts, no
// fetches): the figures of each report and its charts drawn as inline SVG,
// per second of the traffic's time (UTC): responses sent, slipped and
// dropped, requests refused and bytes cut, overall and for the most
// limited networks; and, for a sweep, the share of responses limited
// against the swept value.
func WriteHTML(w io.Writer, reports []*Report) error {
	page := htmlPage{Reports: reports}
	if len(reports) > 1 {
		page.Sweep = sweepChart(reports)
	}
	for _, r := range reports {
		page.Sections = append(page.Sections, section(r))
	}
	return pageTemplate.Execute(w, page)
}

type htmlPage struct {
	Reports  []*Report
	Sweep    template.HTML
	Sections []htmlSection
}

type htmlSection struct {
	R        *Report
	Cut      string
	Overall  []template.HTML
	Networks []template.HTML
}

// Colours of the series.
const (
	colorSent    = "#2a9d46"
	colorSlipped = "#e08a00"
	colorDropped = "#d62728"
	colorRefused = "#7b3fb5"
	colorCut     = "#1f5fb4"
)

func section(r *Report) htmlSection {
	s := htmlSection{R: r, Cut: r.Bytes.cut()}
	tl := r.Timeline
	if tl == nil {
		return s
	}
	per := perStep(tl.Step)
	s.Overall = []template.HTML{
		timeChart(chartText{"Responses per " + per + ", all clients", captionResponses, "responses per " + per}, tl, time.Time{}, []line{
			styleSent.of("sent", tl.Sent), styleSlipped.of("slipped", tl.Slipped), styleDropped.of("dropped", tl.Dropped),
		}),
		timeChart(chartText{"Requests refused (request limits) per " + per + ", all clients", captionRefused, "requests per " + per}, tl, time.Time{}, []line{
			styleRefused.of("refused", tl.Refused),
		}),
		timeChart(chartText{"Bytes of responses cut per " + per + ", all clients", captionBytesCut, "bytes per " + per}, tl, time.Time{}, []line{
			styleCut.of("bytes cut", tl.BytesCut),
		}),
	}
	for _, n := range tl.Networks {
		text := chartText{"Responses per " + per + " to " + n.Network, networkCaption(n, tl.Start), "responses per " + per}
		s.Networks = append(s.Networks, timeChart(text, tl, n.From, []line{
			styleSent.of("sent", n.Sent), styleSlipped.of("slipped", n.Slipped), styleDropped.of("dropped", n.Dropped),
			styleRefused.of("requests refused", n.Refused),
		}))
	}
	return s
}

// Captions say what each chart counts, and what it leaves out.
const (
	captionResponses = "Responses by fate: sent, slipped (a truncated reply sent instead) and dropped by a response limit. " +
		"The responses of requests refused by a request limit were never made: they are in the requests refused, not here."
	captionRefused  = "Queries refused by requests-per-second, proven-requests-per-second or a request prefix; their responses were never made."
	captionBytesCut = "Bytes of the captured responses not sent, less the truncated replies sent in place of slipped ones."
	captionOverlap  = " Where two series are equal, the dashed line runs over the solid one."
)

// networkCaption says from when a network's chart counts: it is followed
// from its first limited response or refused request (the timeline
// cannot keep every network from the start), so before that nothing is
// counted, not nothing sent.
func networkCaption(n NetworkSeries, start time.Time) string {
	what := "Responses sent, slipped and dropped by a response limit; requests refused by a request limit. "
	if n.From.IsZero() || !n.From.After(start) {
		return what + "Counted from the start of the traffic."
	}
	return what + "Counted from " + n.From.UTC().Format("15:04:05.000") + " UTC, when the network was first limited: the shaded time before is not counted."
}

// chartText is what a chart says: its title, a caption of what it counts,
// and the label of its y axis.
type chartText struct{ title, caption, unit string }

// perStep names the timeline's step: "second", or "16 s" once a long
// capture has merged its seconds. Counts are charted per step, so that
// they stay whole numbers.
func perStep(step float64) string {
	if step == 1 {
		return "second"
	}
	return strconv.FormatFloat(step, 'g', -1, 64) + " s"
}

// Chart geometry, in SVG user units; the page scales a chart to its width.
const (
	chartW, chartH = 1200.0, 282.0
	padL, padR     = 72.0, 40.0
	padT, padB     = 60.0, 58.0
)

// lineStyle draws a series so that it shows where it equals another:
// thicker solid lines are drawn first, and thinner dashed ones over them.
type lineStyle struct {
	color string
	width float64
	dash  string // an SVG stroke-dasharray; "" for solid
}

var (
	styleDropped = lineStyle{colorDropped, 4, ""}
	styleSent    = lineStyle{colorSent, 2, ""}
	styleSlipped = lineStyle{colorSlipped, 2, "7 4"}
	styleRefused = lineStyle{colorRefused, 2, "2 3"}
	styleCut     = lineStyle{colorCut, 1.5, ""}
)

func (st lineStyle) of(name string, values []int64) line {
	return line{name: name, lineStyle: st, values: values}
}

type line struct {
	name string
	lineStyle
	values []int64
}

// drawOrder returns the lines in the order they are drawn: the thickest
// first, so that a thinner one equal to it is drawn over it and shows.
func drawOrder(lines []line) []line {
	out := slices.Clone(lines)
	slices.SortStableFunc(out, func(a, b line) int { return cmp.Compare(b.width, a.width) })
	return out
}

// sparse reports whether a series is mostly zeros, but not all: it is then
// drawn as points, which a line would turn into spikes.
func sparse(v []int64) bool {
	nonzero := 0
	for _, x := range v {
		if x != 0 {
			nonzero++
		}
	}
	return nonzero > 0 && nonzero*2 < len(v)
}

// svgChart is a chart being drawn: its plot area maps x in [x0, x1] and y
// in [0, top].
type svgChart struct {
	b            strings.Builder
	x0, x1, top  float64
	logX         bool
	plotW, plotH float64
	legendX      float64
}

// newChart begins a chart with its title and, under it, the caption that
// says what it counts.
func newChart(title, caption string) *svgChart {
	c := &svgChart{plotW: chartW - padL - padR, plotH: chartH - padT - padB, legendX: padL}
	fmt.Fprintf(&c.b, `<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %g %g" preserveAspectRatio="xMinYMin meet" role="img" aria-label="%s">`,
		chartW, chartH, template.HTMLEscapeString(title))
	fmt.Fprintf(&c.b, `<text x="%g" y="18" class="title">%s</text>`, padL, template.HTMLEscapeString(title))
	for i, l := range words.Wrap(caption, captionWidth) {
		fmt.Fprintf(&c.b, `<text x="%g" y="%d" class="caption">%s</text>`, padL, 34+14*i, template.HTMLEscapeString(l))
	}
	return c
}

// captionWidth is the most characters of a caption's line: two lines fit
// between the title and the plot, each within the plot's width.
const captionWidth = 160

func (c *svgChart) x(v float64) float64 {
	if c.logX {
		v, lo, hi := math.Log10(v), math.Log10(c.x0), math.Log10(c.x1)
		return padL + c.plotW*(v-lo)/(hi-lo)
	}
	if c.x1 == c.x0 {
		return padL + c.plotW/2
	}
	return padL + c.plotW*(v-c.x0)/(c.x1-c.x0)
}

func (c *svgChart) y(v float64) float64 { return padT + c.plotH*(1-v/c.top) }

// yAxis draws the grid and ticks of the y axis for values up to max, on
// whole numbers when integer, and its label.
func (c *svgChart) yAxis(maxV float64, integer bool, label string) {
	step := niceStep(maxV / 4)
	if integer {
		step = max(1, math.Round(step))
	}
	c.top = max(step, math.Ceil(maxV/step)*step)
	for v := 0.0; v <= c.top+step/2; v += step {
		fmt.Fprintf(&c.b, `<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" class="grid"/>`, padL, c.y(v), chartW-padR, c.y(v))
		fmt.Fprintf(&c.b, `<text x="%g" y="%.1f" class="tick y" text-anchor="end">%s</text>`, padL-6, c.y(v)+4, strconv.FormatFloat(v, 'f', -1, 64))
	}
	mid := padT + c.plotH/2
	fmt.Fprintf(&c.b, `<text x="14" y="%g" class="axis-label y" transform="rotate(-90 14 %g)" text-anchor="middle">%s</text>`, mid, mid, template.HTMLEscapeString(label))
}

// xTick draws a tick of the x axis at v.
func (c *svgChart) xTick(v float64, label string) {
	x := c.x(v)
	fmt.Fprintf(&c.b, `<line x1="%.1f" y1="%g" x2="%.1f" y2="%g" class="axis"/>`, x, padT+c.plotH, x, padT+c.plotH+4)
	fmt.Fprintf(&c.b, `<text x="%.1f" y="%g" class="tick x" text-anchor="middle">%s</text>`, x, padT+c.plotH+17, template.HTMLEscapeString(label))
}

func (c *svgChart) xLabel(label string) {
	fmt.Fprintf(&c.b, `<text x="%g" y="%g" class="axis-label x" text-anchor="middle">%s</text>`, padL+c.plotW/2, padT+c.plotH+34, template.HTMLEscapeString(label))
}

// legend adds a series to the legend, as a stretch of its line (its
// width and dashes) or a dot for points.
func (c *svgChart) legend(name string, st lineStyle, points bool) {
	y := chartH - 8.0
	if points {
		fmt.Fprintf(&c.b, `<circle cx="%g" cy="%g" r="4" fill="%s"/>`, c.legendX+9, y-4, st.color)
	} else {
		fmt.Fprintf(&c.b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="%s" stroke-width="%g"%s/>`, c.legendX, y-4, c.legendX+20, y-4, st.color, st.width, dashAttr(st.dash))
	}
	fmt.Fprintf(&c.b, `<text x="%g" y="%g" class="tick">%s</text>`, c.legendX+26, y, template.HTMLEscapeString(name))
	c.legendX += 50 + 7*float64(len(name))
}

func dashAttr(dash string) string {
	if dash == "" {
		return ""
	}
	return ` stroke-dasharray="` + dash + `"`
}

// shadeBefore greys the plot before x, a time not counted.
func (c *svgChart) shadeBefore(x float64) {
	fmt.Fprintf(&c.b, `<rect class="uncounted" x="%g" y="%g" width="%.1f" height="%g" fill="#e8e8e8"/>`, padL, padT, c.x(x)-padL, c.plotH)
}

func (c *svgChart) html() template.HTML {
	c.b.WriteString(`</svg>`)
	return template.HTML(c.b.String())
}

// timeChart draws series of counts per step of the timeline: each as steps
// (a count holds for its whole bucket), or as points at its non-zero
// buckets when it is sparse, from the bucket of from on (the time before
// shaded, as not counted; zero: from the start). The x axis is the
// traffic's time in UTC, with ticks on round times.
func timeChart(text chartText, tl *Timeline, from time.Time, lines []line) template.HTML {
	if len(lines) > 1 {
		text.caption += captionOverlap
	}
	c := newChart(text.title, text.caption)
	n := len(tl.Sent)
	span := float64(n) * tl.Step
	c.x0, c.x1 = 0, span
	top := 1.0
	for _, l := range lines {
		for _, v := range l.values {
			top = max(top, float64(v))
		}
	}
	first0 := 0
	if from.After(tl.Start) {
		first0 = min(n-1, int(from.Sub(tl.Start).Seconds()/tl.Step))
	}
	c.yAxis(top, true, text.unit)
	if first0 > 0 {
		c.shadeBefore(float64(first0) * tl.Step)
	}
	every := tickEvery(span)
	first := math.Ceil(float64(tl.Start.Unix())/every)*every - float64(tl.Start.Unix())
	format := "15:04:05"
	if math.Mod(every, 60) == 0 {
		format = "15:04"
	}
	for v := first; v <= span+1e-9; v += every {
		c.xTick(v, tl.Start.Add(time.Duration(v*float64(time.Second))).UTC().Format(format))
	}
	c.xLabel("time (UTC), from " + tl.Start.UTC().Format("2006-01-02 15:04:05") + ", " + perStep(tl.Step) + " per bucket")
	for _, l := range drawOrder(lines) {
		values := l.values[min(first0, len(l.values)):]
		if sparse(values) {
			fmt.Fprintf(&c.b, `<g class="series points" data-series="%s" fill="%s">`, template.HTMLEscapeString(l.name), l.color)
			for i, v := range values {
				if v != 0 {
					fmt.Fprintf(&c.b, `<circle cx="%.1f" cy="%.1f" r="%g"/>`, c.x((float64(first0+i)+0.5)*tl.Step), c.y(float64(v)), 1+l.width)
				}
			}
			c.b.WriteString(`</g>`)
		} else {
			var d strings.Builder
			for i, v := range values {
				x0, x1, y := c.x(float64(first0+i)*tl.Step), c.x(float64(first0+i+1)*tl.Step), c.y(float64(v))
				if i == 0 {
					fmt.Fprintf(&d, "M%.1f,%.1f", x0, y)
				} else {
					fmt.Fprintf(&d, "V%.1f", y)
				}
				fmt.Fprintf(&d, "H%.1f", x1)
			}
			fmt.Fprintf(&c.b, `<path class="series steps" data-series="%s" fill="none" stroke="%s" stroke-width="%g"%s d="%s"/>`,
				template.HTMLEscapeString(l.name), l.color, l.width, dashAttr(l.dash), d.String())
		}
	}
	for _, l := range lines {
		c.legend(l.name, l.lineStyle, sparse(l.values[min(first0, len(l.values)):]))
	}
	return c.html()
}

// tickEvery returns the time between ticks, in seconds, for a span of
// seconds: a round step of the clock that gives at most ten ticks.
func tickEvery(span float64) float64 {
	for _, s := range []float64{1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400} {
		if span/s <= 10 {
			return s
		}
	}
	return 86400 * math.Ceil(span/86400/10)
}

// sweepChart draws the share of responses limited against the swept
// value, as points: on a log scale when every value is a positive number,
// as rates are; on a linear one when a value is zero; else evenly spaced
// in the sweep's order.
func sweepChart(reports []*Report) template.HTML {
	kw, _, _ := strings.Cut(reports[0].Setting, "=")
	c := newChart("Share of responses limited, by "+kw, "Per value of "+kw+", the share of all responses that would have been slipped or dropped, with the rest of the settings as given.")
	xs := make([]float64, len(reports))
	numeric, positive := true, true
	for i, r := range reports {
		_, v, _ := strings.Cut(r.Setting, "=")
		f, err := strconv.ParseFloat(v, 64)
		numeric = numeric && err == nil && !math.IsInf(f, 0) && !math.IsNaN(f)
		positive = positive && f > 0
		xs[i] = f
	}
	scale := ""
	lo, hi := slices.Min(xs), slices.Max(xs)
	switch {
	case numeric && positive:
		c.logX, scale = true, " (log scale)"
		pad := max(2, math.Pow(hi/lo, 0.05)) // hi/lo may be 1
		if hi > lo {
			pad = math.Pow(hi/lo, 0.05)
		}
		c.x0, c.x1 = lo/pad, hi*pad
	case numeric && hi > lo: // a zero, as slip-ratio may be: a linear scale
		pad := (hi - lo) / 20
		c.x0, c.x1 = lo-pad, hi+pad
	default: // not numbers (exempt-clients), or one value: in the sweep's order
		for i := range xs {
			xs[i] = float64(i)
		}
		c.x0, c.x1 = -0.5, float64(len(xs))-0.5
	}
	vals := make([]float64, len(reports))
	for i, r := range reports {
		if r.Responses > 0 {
			vals[i] = 100 * float64(r.Slipped+r.Dropped) / float64(r.Responses)
		}
	}
	c.yAxis(max(1, slices.Max(vals)), false, "% of responses limited")
	for i, r := range reports {
		_, v, _ := strings.Cut(r.Setting, "=")
		c.xTick(xs[i], v)
	}
	c.xLabel(kw + scale)
	fmt.Fprintf(&c.b, `<g class="series points" data-series="limited" fill="%s">`, colorDropped)
	for i, v := range vals {
		fmt.Fprintf(&c.b, `<circle cx="%.1f" cy="%.1f" r="4"><title>%s: %.1f%%</title></circle>`, c.x(xs[i]), c.y(v), template.HTMLEscapeString(reports[i].Setting), v)
	}
	c.b.WriteString(`</g>`)
	c.legend("limited (slipped or dropped)", lineStyle{color: colorDropped}, true)
	return c.html()
}

// niceStep rounds v up to 1, 2 or 5 times a power of ten.
func niceStep(v float64) float64 {
	if !(v > 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{"time": fmtTime, "cats": func() []string { return categoryNames[:] }, "total": (*Counts).total, "classType": (*TupleEntry).classType, "cut": Bytes.cut}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>rrl-replay report</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
p{max-width:60em}
table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border-bottom:1px solid #ddd;padding:.2em .8em;text-align:right;white-space:nowrap}
td:first-child,th:first-child{text-align:left}
svg.chart{display:block;width:100%;height:auto;margin:1em 0;background:#fafafa;border:1px solid #eee;box-sizing:border-box}
svg .title{font-size:14px;font-weight:600}
svg .caption{font-size:11.5px;fill:#444}
svg .tick{font-size:11px;fill:#555}
svg .axis-label{font-size:12px;fill:#333}
svg .grid{stroke:#e4e4e4}
svg .axis{stroke:#999}
</style></head><body>
<h1>rrl-replay report</h1>
{{if .Sweep}}<h2>Sweep</h2>
<table><tr><th>setting</th><th>responses</th><th>sent</th><th>slipped</th><th>dropped</th><th>requests dropped</th><th>limited networks</th><th>bytes sent</th><th>cut</th></tr>
{{range .Reports}}<tr><td>{{.Setting}}</td><td>{{.Responses}}</td><td>{{.Sent}}</td><td>{{.Slipped}}</td><td>{{.Dropped}}</td><td>{{.RequestsDropped}}</td><td>{{.LimitedNetworks}}</td><td>{{.Bytes.Sent}}</td><td>{{cut .Bytes}}</td></tr>
{{end}}</table>
{{.Sweep}}{{end}}
{{range .Sections}}{{$r := .R}}<section>
{{if $r.Setting}}<h2>{{$r.Setting}}</h2>{{end}}
<p>Traffic from {{time $r.First}} to {{time $r.Last}}, {{$r.Packets}} packets. Settings: {{range $i, $s := $r.Settings}}{{if $i}}; {{end}}{{$s}}{{else}}none (nothing is limited){{end}}.
{{if $r.Zones}}Zones: {{range $i, $z := $r.Zones}}{{if $i}}, {{end}}{{$z}}{{end}}{{end}} Cookies: {{$r.Cookies}}.</p>
<table><tr><th>category</th><th>responses</th><th>sent</th><th>slipped</th><th>dropped</th></tr>
{{range cats}}{{$c := index $r.Categories .}}<tr><td>{{.}}</td><td>{{total $c}}</td><td>{{$c.Sent}}</td><td>{{$c.Slipped}}</td><td>{{$c.Dropped}}</td></tr>
{{end}}<tr><th>all</th><th>{{$r.Responses}}</th><th>{{$r.Sent}}</th><th>{{$r.Slipped}}</th><th>{{$r.Dropped}}</th></tr></table>
<p>Queries {{$r.Queries}}, refused by a request limit {{$r.RequestsDropped}} (their {{$r.ResponsesRefused}} responses, never made, count as dropped above), without a response in the input {{$r.Unanswered}}. Bytes of responses captured {{$r.Bytes.Captured}}, would have been sent {{$r.Bytes.Sent}} ({{.Cut}} cut). Networks limited at least once: {{$r.LimitedNetworks}}.</p>
{{if $r.Cuts}}<h3>Cut by limit</h3>
<p>Bytes cut: of the responses not sent, less the truncated replies sent instead.</p>
<table><tr><th>limit</th><th>requests refused</th><th>responses dropped</th><th>slipped</th><th>bytes cut</th></tr>
{{range $r.Cuts}}<tr><td>{{.Limit}}</td><td>{{.RequestsRefused}}</td><td>{{.Dropped}}</td><td>{{.Slipped}}</td><td>{{.BytesCut}}</td></tr>
{{end}}</table>{{end}}
{{range .Overall}}{{.}}{{end}}
{{range .Networks}}{{.}}{{end}}
{{if $r.Networks}}<h3>Most limited networks</h3>
<p>Counted from each one's first limited response or refused request on: responses sent, slipped and dropped by the response limits; requests refused by the request limits, whose responses are not counted again.</p>
<table><tr><th>network</th><th>sent</th><th>slipped</th><th>dropped</th><th>requests refused</th><th>first limited</th><th>last limited</th></tr>
{{range $r.Networks}}<tr><td>{{.Network}}</td><td>{{.Sent}}</td><td>{{.Slipped}}</td><td>{{.Dropped}}</td><td>{{.RequestsDropped}}</td><td>{{time .First}}</td><td>{{time .Last}}</td></tr>
{{end}}</table>{{end}}
{{if $r.Limited}}<h3>Most limited responses</h3>
<p>By the response limits, from the first limited response on.</p>
<table><tr><th>network</th><th>category</th><th>name</th><th>type</th><th>sent</th><th>slipped</th><th>dropped</th><th>first limited</th><th>last limited</th></tr>
{{range $r.Limited}}<tr><td>{{.Network}}</td><td>{{.Category}}</td><td>{{.Name}}</td><td>{{classType .}}</td><td>{{.Sent}}</td><td>{{.Slipped}}</td><td>{{.Dropped}}</td><td>{{time .First}}</td><td>{{time .Last}}</td></tr>
{{end}}</table>{{end}}
{{if $r.Skipped}}<h3>Skipped</h3><table>{{range $k, $v := $r.Skipped}}<tr><td>{{$k}}</td><td>{{$v}}</td></tr>{{end}}</table>{{end}}
</section>
{{end}}</body></html>
`))
