package replay

import (
	"fmt"
	"html/template"
	"io"
	"strconv"
	"strings"
	"time"
)

// WriteHTML writes reports as one self-contained HTML page (no scripts, no
// fetches): the figures of each report, its charts drawn as inline SVG
// (responses per second over time, sent against limited, overall and for
// the most limited networks) and, for a sweep, the share of responses
// limited against the swept value.
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
	Overall  template.HTML
	Networks []template.HTML
}

func section(r *Report) htmlSection {
	s := htmlSection{R: r, Cut: r.Bytes.cut()}
	tl := r.Timeline
	if tl == nil {
		return s
	}
	s.Overall = timeChart("Responses per second, all clients", tl, tl.Sent, tl.Limited)
	for _, n := range tl.Networks {
		s.Networks = append(s.Networks, timeChart("Responses per second to "+n.Network, tl, n.Sent, n.Limited))
	}
	return s
}

// Chart geometry, in SVG user units.
const (
	chartW, chartH = 720.0, 220.0
	padL, padR     = 56.0, 16.0
	padT, padB     = 28.0, 36.0
)

type line struct {
	name, color string
	values      []float64
}

// timeChart draws sent and limited responses per second over the timeline.
func timeChart(title string, tl *Timeline, sent, limited []int64) template.HTML {
	perSec := func(v []int64) []float64 {
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = float64(x) / tl.Step
		}
		return out
	}
	n := len(tl.Sent)
	xlabel := func(i int) string {
		return tl.Start.Add(time.Duration(float64(i) * tl.Step * float64(time.Second))).UTC().Format("15:04:05")
	}
	return chart(title, "responses/s", n, xlabel, []line{
		{"sent", "#2a9d46", perSec(sent)},
		{"limited (slipped or dropped)", "#d62728", perSec(limited)},
	})
}

// sweepChart draws the share of responses limited against the swept value.
func sweepChart(reports []*Report) template.HTML {
	vals := make([]float64, len(reports))
	for i, r := range reports {
		if r.Responses > 0 {
			vals[i] = 100 * float64(r.Slipped+r.Dropped) / float64(r.Responses)
		}
	}
	label := func(i int) string {
		_, v, _ := strings.Cut(reports[i].Setting, "=")
		return v
	}
	kw, _, _ := strings.Cut(reports[0].Setting, "=")
	return chart("Share of responses limited, by "+kw, "% limited", len(reports), label, []line{{"limited", "#d62728", vals}})
}

// chart draws lines over n points as an SVG line chart with axes, ticks
// and a legend.
func chart(title, unit string, n int, xlabel func(int) string, lines []line) template.HTML {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %g %g" width="%g" height="%g" role="img" aria-label="%s">`,
		chartW, chartH, chartW, chartH, template.HTMLEscapeString(title))
	fmt.Fprintf(&b, `<text x="%g" y="18" class="title">%s</text>`, padL, template.HTMLEscapeString(title))
	top := 0.0
	for _, l := range lines {
		for _, v := range l.values {
			top = max(top, v)
		}
	}
	top = niceCeil(top)
	plotW, plotH := chartW-padL-padR, chartH-padT-padB
	x := func(i int) float64 {
		if n <= 1 {
			return padL + plotW/2
		}
		return padL + plotW*float64(i)/float64(n-1)
	}
	y := func(v float64) float64 { return padT + plotH*(1-v/top) }
	for k := 0; k <= 4; k++ {
		v := top * float64(k) / 4
		fmt.Fprintf(&b, `<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" class="grid"/>`, padL, y(v), chartW-padR, y(v))
		fmt.Fprintf(&b, `<text x="%g" y="%.1f" class="tick" text-anchor="end">%s</text>`, padL-4, y(v)+4, strconv.FormatFloat(v, 'g', 4, 64))
	}
	ticks := min(n, 6)
	for k := 0; k < ticks; k++ {
		i := 0
		if ticks > 1 {
			i = k * (n - 1) / (ticks - 1)
		}
		anchor := "middle"
		if ticks > 1 && k == ticks-1 {
			anchor = "end"
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%g" class="tick" text-anchor="%s">%s</text>`, x(i), chartH-padB+16, anchor, template.HTMLEscapeString(xlabel(i)))
	}
	fmt.Fprintf(&b, `<text x="12" y="%g" class="tick" transform="rotate(-90 12 %g)" text-anchor="middle">%s</text>`, padT+plotH/2, padT+plotH/2, unit)
	for li, l := range lines {
		var pts strings.Builder
		for i, v := range l.values {
			fmt.Fprintf(&pts, "%.1f,%.1f ", x(i), y(v))
		}
		fmt.Fprintf(&b, `<polyline class="series" fill="none" stroke="%s" stroke-width="2" points="%s"/>`, l.color, strings.TrimSpace(pts.String()))
		if len(l.values) == 1 {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`, x(0), y(l.values[0]), l.color)
		}
		lx := padL + 8 + float64(li)*220
		fmt.Fprintf(&b, `<rect x="%g" y="%g" width="12" height="4" fill="%s"/><text x="%g" y="%g" class="tick">%s</text>`,
			lx, chartH-12, l.color, lx+16, chartH-8, template.HTMLEscapeString(l.name))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten (at least 1).
func niceCeil(v float64) float64 {
	if v <= 1 {
		return 1
	}
	p := 1.0
	for p*10 <= v {
		p *= 10
	}
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{"time": fmtTime, "cats": func() []string { return categoryNames[:] }, "total": (*Counts).total, "classType": (*TupleEntry).classType}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>rrl-replay report</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
p{max-width:60em}
table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border-bottom:1px solid #ddd;padding:.2em .8em;text-align:right;white-space:nowrap}
td:first-child,th:first-child{text-align:left}
svg.chart{display:block;margin:1em 0;background:#fafafa;border:1px solid #eee}
svg .title{font-size:14px;font-weight:600}
svg .tick{font-size:11px;fill:#555}
svg .grid{stroke:#e4e4e4}
</style></head><body>
<h1>rrl-replay report</h1>
{{if .Sweep}}<h2>Sweep</h2>
<table><tr><th>setting</th><th>responses</th><th>sent</th><th>slipped</th><th>dropped</th><th>requests dropped</th><th>limited networks</th><th>bytes sent</th></tr>
{{range .Reports}}<tr><td>{{.Setting}}</td><td>{{.Responses}}</td><td>{{.Sent}}</td><td>{{.Slipped}}</td><td>{{.Dropped}}</td><td>{{.RequestsDropped}}</td><td>{{.LimitedNetworks}}</td><td>{{.Bytes.Sent}}</td></tr>
{{end}}</table>
{{.Sweep}}{{end}}
{{range .Sections}}{{$r := .R}}<section>
<h2>{{if $r.Setting}}{{$r.Setting}}{{else}}Report{{end}}</h2>
<p>Traffic from {{time $r.First}} to {{time $r.Last}}, {{$r.Packets}} packets. Settings: {{range $i, $s := $r.Settings}}{{if $i}}; {{end}}{{$s}}{{else}}none (nothing is limited){{end}}.
{{if $r.Zones}}Zones: {{range $i, $z := $r.Zones}}{{if $i}}, {{end}}{{$z}}{{end}}{{end}} Cookies: {{$r.Cookies}}.</p>
<table><tr><th>category</th><th>responses</th><th>sent</th><th>slipped</th><th>dropped</th></tr>
{{range cats}}{{$c := index $r.Categories .}}<tr><td>{{.}}</td><td>{{total $c}}</td><td>{{$c.Sent}}</td><td>{{$c.Slipped}}</td><td>{{$c.Dropped}}</td></tr>
{{end}}<tr><th>all</th><th>{{$r.Responses}}</th><th>{{$r.Sent}}</th><th>{{$r.Slipped}}</th><th>{{$r.Dropped}}</th></tr></table>
<p>Queries {{$r.Queries}}, dropped by requests-per-second {{$r.RequestsDropped}}, without a response in the input {{$r.Unanswered}}. Bytes of responses captured {{$r.Bytes.Captured}}, would have been sent {{$r.Bytes.Sent}} ({{.Cut}} cut). Networks limited at least once: {{$r.LimitedNetworks}}.</p>
{{.Overall}}
{{range .Networks}}{{.}}{{end}}
{{if $r.Networks}}<h3>Most limited networks</h3>
<table><tr><th>network</th><th>sent</th><th>slipped</th><th>dropped</th><th>requests dropped</th><th>first limited</th><th>last limited</th></tr>
{{range $r.Networks}}<tr><td>{{.Network}}</td><td>{{.Sent}}</td><td>{{.Slipped}}</td><td>{{.Dropped}}</td><td>{{.RequestsDropped}}</td><td>{{time .First}}</td><td>{{time .Last}}</td></tr>
{{end}}</table>{{end}}
{{if $r.Limited}}<h3>Most limited responses</h3>
<table><tr><th>network</th><th>category</th><th>name</th><th>type</th><th>sent</th><th>slipped</th><th>dropped</th><th>first limited</th><th>last limited</th></tr>
{{range $r.Limited}}<tr><td>{{.Network}}</td><td>{{.Category}}</td><td>{{.Name}}</td><td>{{classType .}}</td><td>{{.Sent}}</td><td>{{.Slipped}}</td><td>{{.Dropped}}</td><td>{{time .First}}</td><td>{{time .Last}}</td></tr>
{{end}}</table>{{end}}
{{if $r.Skipped}}<h3>Skipped</h3><table>{{range $k, $v := $r.Skipped}}<tr><td>{{$k}}</td><td>{{$v}}</td></tr>{{end}}</table>{{end}}
</section>
{{end}}</body></html>
`))
