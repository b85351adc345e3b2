package replay

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// timeFormat shows report times to the millisecond, in UTC.
const timeFormat = "2006-01-02T15:04:05.000Z"

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(timeFormat)
}

// WriteText writes reports as text: with several (a sweep), a table that
// compares them, then each in full.
func WriteText(w io.Writer, reports []*Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if len(reports) > 1 {
		fmt.Fprintf(w, "sweep of %d settings over the same traffic:\n", len(reports))
		width := len("setting")
		for _, r := range reports {
			width = max(width, len(r.Setting))
		}
		fmt.Fprintf(tw, "%-*s\tresponses\tsent\tslipped\tdropped\trequests dropped\tlimited networks\tbytes sent\tcut\t\n", width, "setting")
		for _, r := range reports {
			fmt.Fprintf(tw, "%-*s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", width, r.Setting, r.Responses, r.Sent, r.Slipped, r.Dropped,
				r.RequestsDropped, r.LimitedNetworks, r.Bytes.Sent, r.Bytes.cut())
		}
		tw.Flush()
		fmt.Fprintln(w)
	}
	for i, r := range reports {
		if i > 0 {
			fmt.Fprintln(w)
		}
		r.writeText(w)
	}
	return nil
}

// cut is the share of captured bytes that would not have been sent.
func (b Bytes) cut() string {
	if b.Captured == 0 {
		return "0%"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(b.Captured-b.Sent)/float64(b.Captured))
}

func (r *Report) writeText(w io.Writer) {
	if r.Setting != "" {
		fmt.Fprintf(w, "== %s\n", r.Setting)
	}
	if r.First.IsZero() {
		fmt.Fprintf(w, "no DNS message replayed, %d packets read\n", r.Packets)
	} else {
		fmt.Fprintf(w, "traffic from %s to %s (%s), %d packets\n", fmtTime(r.First), fmtTime(r.Last), r.Last.Sub(r.First).Round(time.Millisecond), r.Packets)
	}
	settings := "none (nothing is limited)"
	if len(r.Settings) > 0 {
		settings = strings.Join(r.Settings, "; ")
	}
	fmt.Fprintf(w, "settings: %s\n", settings)
	if len(r.Zones) > 0 {
		fmt.Fprintf(w, "zones: %s\n", strings.Join(r.Zones, " "))
	}
	fmt.Fprintf(w, "cookies: %s\n\n", r.Cookies)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "category\tresponses\tsent\tslipped\tdropped\t")
	for _, name := range categoryNames {
		c := r.Categories[name]
		fmt.Fprintf(tw, "%-8s\t%d\t%d\t%d\t%d\t\n", name, c.total(), c.Sent, c.Slipped, c.Dropped)
	}
	fmt.Fprintf(tw, "%-8s\t%d\t%d\t%d\t%d\t\n", "all", r.Responses, r.Sent, r.Slipped, r.Dropped)
	tw.Flush()
	fmt.Fprintf(w, "\nqueries %d, refused by a request limit %d (their %d responses, never made, count as dropped above), without a response in the input %d\n",
		r.Queries, r.RequestsDropped, r.ResponsesRefused, r.Unanswered)
	fmt.Fprintf(w, "responses sent unlimited for a valid server cookie %d; responses whose query was not seen %d\n", r.CookieExempt, r.Unmatched)
	fmt.Fprintf(w, "bytes of responses: captured %d, would have been sent %d (%s cut)\n", r.Bytes.Captured, r.Bytes.Sent, r.Bytes.cut())
	r.writeCuts(w)
	fmt.Fprintf(w, "networks limited at least once: %d", r.LimitedNetworks)
	if r.EvictedNetworks > 0 {
		fmt.Fprintf(w, " (the report's table of networks filled up: %d of the least limited were dropped from it, and one limited again is counted again)", r.EvictedNetworks)
	}
	fmt.Fprintln(w)

	if len(r.Networks) > 0 {
		fmt.Fprintf(w, "\nmost limited networks, from each one's first limited response or refused request on\n(dropped: by a response limit; requests refused: by a request limit, their responses not counted again):\n")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "network\tsent\tslipped\tdropped\trequests refused\tfirst limited\tlast limited")
		for _, n := range r.Networks {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\n", n.Network, n.Sent, n.Slipped, n.Dropped, n.RequestsDropped, fmtTime(n.First), fmtTime(n.Last))
		}
		tw.Flush()
	}
	if len(r.Limited) > 0 {
		fmt.Fprintf(w, "\nmost limited responses (network, category, name, type), by the response limits, from the first limited response on:\n")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "network\tcategory\tname\ttype\tsent\tslipped\tdropped\tfirst limited\tlast limited")
		for _, t := range r.Limited {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", t.Network, t.Category, orDash(t.Name), orDash(t.classType()), t.Sent, t.Slipped, t.Dropped, fmtTime(t.First), fmtTime(t.Last))
		}
		tw.Flush()
	}
	if len(r.Skipped) > 0 {
		fmt.Fprintf(w, "\nskipped:\n")
		keys := make([]string, 0, len(r.Skipped))
		for k := range r.Skipped {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "  %s: %d\n", k, r.Skipped[k])
		}
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// writeCuts writes the table of what each limit cut.
func (r *Report) writeCuts(w io.Writer) {
	if len(r.Cuts) == 0 {
		return
	}
	fmt.Fprintf(w, "\ncut by limit (bytes cut: of responses not sent, less the truncated replies sent instead):\n")
	width := len("limit")
	for _, c := range r.Cuts {
		width = max(width, len(c.Limit))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s\trequests refused\tresponses dropped\tslipped\tbytes cut\t\n", width, "limit")
	for _, c := range r.Cuts {
		fmt.Fprintf(tw, "%-*s\t%d\t%d\t%d\t%d\t\n", width, c.Limit, c.RequestsRefused, c.Dropped, c.Slipped, c.BytesCut)
	}
	tw.Flush()
	fmt.Fprintln(w)
}
