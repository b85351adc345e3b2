package replay

import (
	"net/netip"
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
	causePrefix6   = causePrefix4 + rrl.MaxRequestPrefixes // + the pair's place in ipv6-request-prefixes
	causeAll       = causePrefix6 + rrl.MaxRequestPrefixes
	causeAllBytes  = causeAll + 1
	causeTooLarge  = causeAll + 2
	causeResponses = causeAll + 3                              // + the category: the tuple's allowance
	causeLast      = causeResponses + cause(rrl.AllowanceLast) // number of causes; not a cause
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
	}{{causeAll, "all-per-second"}, {causeAllBytes, "all-bytes-per-second"}, {causeTooLarge, "nocookie-udp-size"}} {
		labels[c.cause], listed[c.cause] = c.kw, lc.on(c.kw)
	}
	for cat, kw := range categoryKeywords {
		c := causeResponses + cause(cat)
		labels[c] = kw
		listed[c] = lc.on(kw) && (cat == 0 || lc.cfg.IsSet(kw))
	}
	return labels, listed
}

// requestCause returns the limit that refused a request from client: the
// request prefix that refused it, else the request account it was charged
// to. For an unproven request from a family with request prefixes, it is
// the one account of the request in a limiting episode (the account that
// refuses a request is in one), else the request prefix whose count of
// refusals went up: reading the limiter's statistics costs about 20 µs, so
// it is read only when several of the accounts are in an episode.
func (e *engine) requestCause(client netip.Addr, proven bool) cause {
	fam := 0
	if !client.Is4() {
		fam = 1
	}
	if !proven && len(e.lc.prefixes[fam]) > 0 {
		if k, ok := e.soleEpisode(client, fam); ok {
			if k != causeRequests {
				e.prefixDrops[fam][int(k-causePrefix4)-fam*rrl.MaxRequestPrefixes]++ // as the limiter counted it
			}
			return k
		}
		drops := e.limiter.GetStats(false).RequestPrefixDrops
		before := e.prefixDrops
		e.prefixDrops = drops
		for i, n := range drops[fam] {
			if n != before[fam][i] {
				return causePrefix4 + cause(fam*rrl.MaxRequestPrefixes+i)
			}
		}
	}
	if proven && e.lc.provenApart {
		return causeProvenRequests
	}
	return causeRequests
}

// soleEpisode returns the one account, among those an unproven request
// from client is charged to, that is in a limiting episode, and false if
// none or several are.
func (e *engine) soleEpisode(client netip.Addr, fam int) (cause, bool) {
	ep := &e.episodes
	found, n := causeNone, 0
	if e.lc.requestsOn && ep.live[episodeKey{rrl.LimitRequests, e.lc.network(client)}] > 0 {
		found, n = causeRequests, n+1
	}
	kind := rrl.LimitIPv4RequestPrefixes + rrl.LimitKind(fam)
	for i, p := range e.lc.prefixes[fam] {
		if p.Rate <= 0 {
			continue
		}
		net, _ := client.Prefix(p.Bits)
		if ep.live[episodeKey{kind, net}] > 0 {
			found, n = causePrefix4+cause(fam*rrl.MaxRequestPrefixes+i), n+1
		}
	}
	return found, n == 1
}

// episodes follows the request accounts in a limiting episode, from the
// limiter's events: an episode's start names the account's network, and
// its stop, or the account's eviction, the account. It holds no more
// than the limiter's table holds.
type episodes struct {
	byAccount map[uint64]episodeKey
	live      map[episodeKey]int // accounts in an episode, by kind and network
}

type episodeKey struct {
	kind    rrl.LimitKind
	network netip.Prefix
}

func (ep *episodes) observe(ev rrl.Event) {
	switch ev.LimitKind {
	case rrl.LimitRequests, rrl.LimitIPv4RequestPrefixes, rrl.LimitIPv6RequestPrefixes:
	default:
		return
	}
	if k, ok := ep.byAccount[ev.Account]; ok {
		delete(ep.byAccount, ev.Account)
		if ep.live[k]--; ep.live[k] <= 0 {
			delete(ep.live, k)
		}
	}
	if ev.Started {
		k := episodeKey{ev.LimitKind, ev.Network}
		ep.byAccount[ev.Account] = k
		ep.live[k]++
	}
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
