package replay

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
)

// WriteSuggestion writes the suggestion as an rrl block ready for a
// Corefile, each setting with a comment giving its reason, and before and
// after it, as comments, the networks named as attacks, the rule, and the
// check. The whole text is a valid Corefile fragment.
func WriteSuggestion(w io.Writer, sg *Suggestion) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# rrl-replay -suggest: %d messages over %.1f s, %d client networks\n", sg.Messages, sg.Seconds, sg.Networks)
	if sg.Untracked > 0 {
		fmt.Fprintf(&b, "# %d charges beyond the tables' caps (%d accounts, %d networks) were not tracked: the peaks are of the accounts seen first\n",
			sg.Untracked, maxProfileAccounts, maxProfileNetworks)
	}
	sg.writeAttacks(&b)
	b.WriteString(sg.Block())
	for _, l := range wrapLines("rule: "+sg.Rule, 100) {
		b.WriteString("# " + l + "\n")
	}
	sg.writeCheck(&b)
	_, err := io.WriteString(w, b.String())
	return err
}

// Block returns the suggested rrl block, each line with its reason.
func (sg *Suggestion) Block() string {
	var b strings.Builder
	b.WriteString("rrl")
	for _, z := range sg.opts.Zones {
		b.WriteString(" " + z)
	}
	b.WriteString(" {\n")
	width := 0
	for _, s := range sg.Settings {
		width = max(width, len(s.Keyword)+1+len(s.Value))
	}
	for _, s := range sg.Settings {
		line := s.Keyword + " " + s.Value
		reason := s.Reason
		if s.Given != "" {
			reason = "given (" + s.Given + ")" + strings.TrimPrefix(reason, "kept as given")
		}
		fmt.Fprintf(&b, "    %-*s  # %s\n", width, line, reason)
	}
	b.WriteString("}\n")
	return b.String()
}

func (sg *Suggestion) writeAttacks(b *strings.Builder) {
	if len(sg.Attacks) == 0 {
		b.WriteString("# no network named as a likely attack: every network's peaks count\n")
		return
	}
	fmt.Fprintf(b, "# named as likely attacks, left out of the peaks (%d networks):\n", len(sg.attackSet))
	for _, a := range sg.Attacks {
		what := a.Network
		if a.Networks > 0 {
			what += fmt.Sprintf(" (%d networks)", a.Networks)
		}
		fmt.Fprintf(b, "#   %s: %s\n", what, a.Reason)
		fmt.Fprintf(b, "#     %s\n", strings.Join(a.Peaks, "; "))
	}
	if sg.AttacksNotListed > 0 {
		fmt.Fprintf(b, "#   and %d more\n", sg.AttacksNotListed)
	}
}

func (sg *Suggestion) writeCheck(b *strings.Builder) {
	ck := sg.Check
	if ck == nil {
		return
	}
	b.WriteString("# check: the same traffic replayed under these settings\n")
	for _, g := range []struct {
		name string
		g    GroupCut
	}{{"attacks", ck.Attacks}, {"ordinary", ck.Ordinary}} {
		fmt.Fprintf(b, "#   %-8s %d networks, %d limited; requests %d, refused %d; responses %d, slipped or dropped %d; bytes %d, sent %d (%.1f%% cut)\n",
			g.name, g.g.Networks, g.g.Limited, g.g.Requests, g.g.RequestsRefused, g.g.Responses, g.g.ResponsesCut, g.g.BytesCaptured, g.g.BytesSent, g.g.BytesCut)
	}
	if len(ck.AttacksNotLimited) > 0 {
		fmt.Fprintf(b, "#   named but not limited: %s\n", strings.Join(ck.AttacksNotLimited, " "))
	}
	if len(ck.OrdinaryLimited) > 0 {
		fmt.Fprintf(b, "#   ORDINARY NETWORKS LIMITED: %s\n", strings.Join(ck.OrdinaryLimited, " "))
	}
	b.WriteString("#   headroom, the busiest ordinary peak as a share of each allowance:\n")
	for _, h := range ck.Headroom {
		unit := "/s"
		if h.Keyword == "all-bytes-per-second" {
			unit = " bytes/s"
		}
		fmt.Fprintf(b, "#     %-22s %g: %g%s (%s), %.0f%%\n", h.Keyword, h.Allowance, h.Peak, unit, h.Of, h.Percent)
	}
}

// wrapLines wraps s at width characters.
func wrapLines(s string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return append(lines, line)
}

// WriteSuggestionHTML writes the report page of the check's replay with
// the suggestion before it: the block, the attacks named, the check, and
// for each allowance a chart of how the networks' peaks spread, with the
// suggested line and the attacks marked. The report's own part is the
// page WriteHTML writes, unchanged.
func WriteSuggestionHTML(w io.Writer, sg *Suggestion) error {
	var page bytes.Buffer
	rep := sg.checkRep
	if rep == nil {
		return fmt.Errorf("the suggestion has not been checked")
	}
	if err := WriteHTML(&page, []*Report{rep}); err != nil {
		return err
	}
	var part bytes.Buffer
	if err := suggestTemplate.Execute(&part, suggestPage{S: sg, Text: sg.text(), Charts: sg.charts()}); err != nil {
		return err
	}
	const h1 = "<h1>rrl-replay report</h1>\n"
	out := strings.Replace(page.String(), h1, h1+part.String()+"<h2>The traffic replayed under the suggestion</h2>\n", 1)
	_, err := io.WriteString(w, out)
	return err
}

func (sg *Suggestion) text() string {
	var b strings.Builder
	WriteSuggestion(&b, sg)
	return b.String()
}

type suggestPage struct {
	S      *Suggestion
	Text   string
	Charts []template.HTML
}

// Colours of the peak charts.
const (
	colorOrdinary = "#2a9d46"
	colorAttack   = "#d62728"
	colorLine     = "#1f5fb4"
)

// charts draws, for each allowance with a peak, the networks' peaks
// busiest first.
func (sg *Suggestion) charts() []template.HTML {
	var out []template.HTML
	for _, s := range sg.Settings {
		if s.measure < 0 || s.Peak <= 0 || len(sg.dists[s.measure]) == 0 {
			continue
		}
		v, err := parseRate(s.Value)
		if err != nil {
			continue
		}
		out = append(out, peakChart(s, sg.dists[s.measure], v))
	}
	return out
}

func parseRate(v string) (float64, error) {
	if _, after, ok := strings.Cut(v, ":"); ok {
		v = after
	}
	var f float64
	_, err := fmt.Sscan(v, &f)
	return f, err
}

// maxChartPoints bounds the points of a peak chart: past it, the ordinary
// networks are drawn every few ranks (the attacks all).
const maxChartPoints = 1500

// peakChart draws the peaks of one measure, one point a network ranked
// busiest first, on a log scale, with the allowance as a line.
func peakChart(s *SuggestedSetting, pts []peakPoint, allowance float64) template.HTML {
	unit := "per second"
	if s.measure == measureBytes {
		unit = "bytes per second"
	}
	what := measureName(s.measure)
	if s.measure < measureAll {
		what = "busiest " + what
	}
	c := newChart(fmt.Sprintf("%s %s: each network's %s in its busiest second", s.Keyword, s.Value, what),
		fmt.Sprintf("One point a client network, ranked by the peak (x), its peak per second on a log scale (y); red: named as a likely attack and left out; "+
			"the blue line is the allowance suggested (or given), %s, %.1f times the busiest ordinary peak (%s).", s.Value, allowance/s.Peak, s.PeakOf))
	top := math.Max(float64(pts[0].peak), allowance) * 2
	lo, hi := 0.0, math.Log10(top)
	y := func(v float64) float64 { return padT + c.plotH*(1-(math.Log10(math.Max(v, 1))-lo)/(hi-lo)) }
	for p := 1.0; p <= top; p *= 10 {
		fmt.Fprintf(&c.b, `<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" class="grid"/>`, padL, y(p), chartW-padR, y(p))
		fmt.Fprintf(&c.b, `<text x="%g" y="%.1f" class="tick y" text-anchor="end">%g</text>`, padL-6, y(p)+4, p)
	}
	mid := padT + c.plotH/2
	fmt.Fprintf(&c.b, `<text x="14" y="%g" class="axis-label y" transform="rotate(-90 14 %g)" text-anchor="middle">%s</text>`, mid, mid, unit)
	c.x0, c.x1 = 0, float64(len(pts)+1)
	for _, r := range []int{1, len(pts)/2 + 1, len(pts)} {
		c.xTick(float64(r), fmt.Sprint(r))
	}
	c.xLabel("networks, busiest first (rank)")
	every := max(1, len(pts)/maxChartPoints)
	for i, p := range pts {
		if !p.attack && i%every != 0 {
			continue
		}
		color := colorOrdinary
		if p.attack {
			color = colorAttack
		}
		fmt.Fprintf(&c.b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s" data-attack="%t"/>`, c.x(float64(i+1)), y(float64(p.peak)), color, p.attack)
	}
	fmt.Fprintf(&c.b, `<line class="allowance" x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="%s" stroke-width="2" stroke-dasharray="6 4"/>`,
		padL, y(allowance), chartW-padR, y(allowance), colorLine)
	c.legend("ordinary network", lineStyle{color: colorOrdinary}, true)
	c.legend("named attack", lineStyle{color: colorAttack}, true)
	c.legend("allowance "+s.Value, lineStyle{color: colorLine, width: 2, dash: "6 4"}, false)
	return c.html()
}

var suggestTemplate = template.Must(template.New("suggest").Parse(`<section class="suggestion">
<h2>Suggested settings</h2>
<p>From the traffic's peaks per second, ordinary networks only: each allowance is above what the busiest ordinary network (or account) did, by the margin its comment gives. The networks named as likely attacks are left out, and the same traffic is replayed under the suggestion below.</p>
<pre>{{.Text}}</pre>
{{if .S.Attacks}}<h3>Named as likely attacks</h3>
<table><tr><th>network</th><th>why</th><th>far above the rest in</th></tr>
{{range .S.Attacks}}<tr><td>{{.Network}}</td><td style="text-align:left;white-space:normal">{{.Reason}}</td><td style="text-align:left;white-space:normal">{{range $i, $p := .Peaks}}{{if $i}}; {{end}}{{$p}}{{end}}</td></tr>
{{end}}</table>{{end}}
<h3>How the networks' peaks spread</h3>
{{range .Charts}}{{.}}{{end}}
</section>
`))
