package replay

import (
	"strconv"

	"github.com/dnsrrl/rrl"
)

// Cut is what one limit cut from the replayed traffic: the requests it
// refused, the responses it dropped or slipped (for a request limit, the
// responses of the requests it refused), and the bytes it cut, which are
// the bytes of the captured responses not sent less those of the
// truncated replies sent in their place.
type Cut struct {
	Limit           string `json:"limit"` // the keyword, with the prefix length for a request prefix ("ipv4-request-prefixes /18")
	RequestsRefused int64  `json:"requests_refused"`
	Dropped         int64  `json:"dropped"`
	Slipped         int64  `json:"slipped"`
	BytesCut        int64  `json:"bytes_cut"`
}

// cause numbers the limits that can cut a request or a response, in the
// order the report lists them; causeNone is none.
type cause uint8

const (
	causeNone cause = iota
	causeRequests
	causeProvenRequests
	causePrefix4 // + the pair's place in ipv4-request-prefixes
)

const (
	causePrefix6    = causePrefix4 + rrl.MaxRequestPrefixes // + the pair's place in ipv6-request-prefixes
	causeStreamTime = causePrefix6 + rrl.MaxRequestPrefixes // stream-time-per-second
	causeAll        = causeStreamTime + 1
	causeAllBytes   = causeAll + 1
	causeTooLarge   = causeAll + 2
	causeResponses  = causeAll + 3                              // + the category: the tuple's allowance
	causeLast       = causeResponses + cause(rrl.AllowanceLast) // number of causes; not a cause
)

// responseCause is the limit that an RTReason of DebitResponse names.
func responseCause(rtr rrl.RTReason, cat rrl.AllowanceCategory) cause {
	switch rtr {
	case rrl.RTAllLimit:
		return causeAll
	case rrl.RTAllBytesLimit:
		return causeAllBytes
	case rrl.RTTooLarge:
		return causeTooLarge
	case rrl.RTRateLimit:
		return causeResponses + cause(min(cat, rrl.AllowanceLast-1))
	}
	return causeNone
}

// categoryKeywords are the keywords of the tuple allowances, by category.
var categoryKeywords = [rrl.AllowanceLast]string{"responses-per-second", "referrals-per-second",
	"nodata-per-second", "nxdomains-per-second", "errors-per-second"}

// cutRows returns, for each cause, the label of its row in the report and
// whether the row is listed even when it cut nothing: every limit that is
// on, but for the per-category allowances that only inherit
// responses-per-second, which are listed when they cut something.
func (lc *limiterConfig) cutRows() (labels [causeLast]string, listed [causeLast]bool) {
	labels[causeRequests], listed[causeRequests] = "requests-per-second", lc.on("requests-per-second")
	labels[causeProvenRequests] = "proven-requests-per-second"
	listed[causeProvenRequests] = lc.cfg.IsSet("proven-requests-per-second") && lc.on("proven-requests-per-second")
	for fam, base := range []cause{causePrefix4, causePrefix6} {
		kw := "ipv4-request-prefixes"
		if fam == 1 {
			kw = "ipv6-request-prefixes"
		}
		for i, p := range lc.prefixes[fam] {
			labels[base+cause(i)] = kw + " /" + strconv.Itoa(p.Bits)
			listed[base+cause(i)] = p.Rate > 0
		}
	}
	for _, c := range []struct {
		cause
		kw string
	}{{causeStreamTime, "stream-time-per-second"}, {causeAll, "all-per-second"}, {causeAllBytes, "all-bytes-per-second"}, {causeTooLarge, "nocookie-udp-size"}} {
		labels[c.cause], listed[c.cause] = c.kw, lc.on(c.kw)
	}
	for cat, kw := range categoryKeywords {
		c := causeResponses + cause(cat)
		labels[c] = kw
		listed[c] = lc.on(kw) && (cat == 0 || lc.cfg.IsSet(kw))
	}
	return labels, listed
}

// requestCause is the cause of the request limit that the core says
// refused a request.
func requestCause(why rrl.RequestRefusal) cause {
	switch why.Limit {
	case rrl.LimitProvenRequests:
		return causeProvenRequests
	case rrl.LimitIPv4RequestPrefixes:
		return causePrefix4 + cause(why.Prefix)
	case rrl.LimitIPv6RequestPrefixes:
		return causePrefix6 + cause(why.Prefix)
	case rrl.LimitStreamTime:
		return causeStreamTime
	}
	return causeRequests
}

// cutCounts accumulates the Cut of each cause.
type cutCounts struct {
	rows   [causeLast]Cut
	listed [causeLast]bool
}

func (c *cutCounts) refuse(k cause) {
	if k != causeNone {
		c.rows[k].RequestsRefused++
	}
}

// response counts a response that cause k cut: dropped, or slipped with
// a reply of slipSize bytes in place of its size.
func (c *cutCounts) response(k cause, act rrl.Action, size, slipSize int) {
	if k == causeNone || act == rrl.Send {
		return
	}
	row := &c.rows[k]
	if act == rrl.Slip {
		row.Slipped++
		row.BytesCut += int64(size - slipSize)
		return
	}
	row.Dropped++
	row.BytesCut += int64(size)
}

// list returns the rows to report: those listed, and any other that cut
// something.
func (c *cutCounts) list() []*Cut {
	out := []*Cut{}
	for k := causeNone + 1; k < causeLast; k++ {
		row := c.rows[k]
		if c.listed[k] || row.RequestsRefused+row.Dropped+row.Slipped > 0 {
			out = append(out, &row)
		}
	}
	return out
}

// label names the rows, and says which are listed whatever they cut.
func (c *cutCounts) label(labels [causeLast]string, listed [causeLast]bool) {
	for k := range c.rows {
		c.rows[k].Limit = labels[k]
	}
	c.listed = listed
}
