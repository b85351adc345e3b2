package replay_test

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/dnsrrl/rrl"
	"github.com/dnsrrl/rrl/miekgrrl"
	"github.com/dnsrrl/rrl/replay"
	"github.com/dnsrrl/rrl/replay/internal/capgen"
	"github.com/gopacket/gopacket/layers"
	"github.com/miekg/dns"
)

var start = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// traffic returns generated exchanges: seconds of qps exchanges per second
// with the given shares of flood and spray.
func traffic(t testing.TB, seconds, qps int, flood, spray float64) []capgen.Exchange {
	t.Helper()
	var out []capgen.Exchange
	err := capgen.Traffic(7, start, time.Duration(seconds)*time.Second, qps, flood, spray, func(e *capgen.Exchange) error {
		out = append(out, *e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// pcapOf writes exchanges as a capture with the given framing.
func pcapOf(t testing.TB, link capgen.Link, ng bool, exchanges []capgen.Exchange) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := capgen.NewWriter(&buf, link, ng)
	if err != nil {
		t.Fatal(err)
	}
	for i := range exchanges {
		if err := w.Write(&exchanges[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

var ethernet = capgen.Link{Type: layers.LinkTypeEthernet}

// settings parses keyword=value pairs.
func settings(t testing.TB, kv ...string) []replay.Setting {
	t.Helper()
	var out []replay.Setting
	for _, s := range kv {
		set, err := replay.ParseSetting(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, set)
	}
	return out
}

// replayBytes replays a capture held in memory and returns the report.
func replayBytes(t testing.TB, opts replay.Options, capture []byte) *replay.Report {
	t.Helper()
	r, err := replay.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Read(bytes.NewReader(capture)); err != nil {
		t.Fatal(err)
	}
	return r.Reports()[0]
}

// expected is what the core decides for the exchanges when called
// directly, as a server calls it: DebitRequestAddr for each query at its
// time, then DebitResponseAddr for its response unless validCookie says
// the query's cookie is valid, with the clock injected.
type expected struct {
	categories      map[string]replay.Counts
	requestsDropped int64
	cookieExempt    int64
}

func decide(t testing.TB, kv []string, exchanges []capgen.Exchange, validCookie func(*capgen.Exchange) bool) expected {
	t.Helper()
	cfg := rrl.NewConfig()
	for _, s := range settings(t, kv...) {
		if err := cfg.SetValue(s.Keyword, s.Value); err != nil {
			t.Fatal(err)
		}
	}
	now := exchanges[0].At
	cfg.SetNowFunc(func() time.Time { return now })
	r := rrl.NewRRL(cfg)
	names := []string{"answer", "referral", "nodata", "nxdomain", "error"}
	exp := expected{categories: map[string]replay.Counts{}}
	for i := range exchanges {
		e := &exchanges[i]
		client := e.Client.Addr()
		valid := validCookie != nil && validCookie(e)
		now = capgen.QueryTime(e)
		act, _ := r.DebitRequestAddr(client, !e.TCP, valid)
		if e.Response == nil {
			if act == rrl.Drop {
				exp.requestsDropped++
			}
			continue
		}
		var m dns.Msg
		if err := m.Unpack(e.Response); err != nil {
			t.Fatal(err)
		}
		tuple := miekgrrl.Tuple(nil, &m, "")
		now = capgen.ResponseTime(e)
		switch {
		case act == rrl.Drop:
			exp.requestsDropped++
		case valid:
			exp.cookieExempt++
		default:
			act, _, _ = r.DebitResponseAddr(client, !e.TCP, &tuple)
		}
		c := exp.categories[names[tuple.AllowanceCategory]]
		switch act {
		case rrl.Send:
			c.Sent++
		case rrl.Slip:
			c.Slipped++
		default:
			c.Dropped++
		}
		exp.categories[names[tuple.AllowanceCategory]] = c
	}
	return exp
}

// checkCounts compares a report with what the core decided.
func checkCounts(t *testing.T, rep *replay.Report, exp expected) {
	t.Helper()
	var sent, slipped, dropped int64
	for name, c := range rep.Categories {
		if *c != exp.categories[name] {
			t.Errorf("%s: replay %+v, core %+v", name, *c, exp.categories[name])
		}
		sent, slipped, dropped = sent+c.Sent, slipped+c.Slipped, dropped+c.Dropped
	}
	if rep.Sent != sent || rep.Slipped != slipped || rep.Dropped != dropped || rep.Responses != sent+slipped+dropped {
		t.Errorf("totals %d = %d sent + %d slipped + %d dropped; categories sum to %d, %d, %d", rep.Responses, rep.Sent, rep.Slipped, rep.Dropped, sent, slipped, dropped)
	}
	if rep.RequestsDropped != exp.requestsDropped {
		t.Errorf("requests dropped: replay %d, core %d", rep.RequestsDropped, exp.requestsDropped)
	}
	if rep.CookieExempt != exp.cookieExempt {
		t.Errorf("cookie exempt: replay %d, core %d", rep.CookieExempt, exp.cookieExempt)
	}
}

func addrPort(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
