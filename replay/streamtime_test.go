package replay_test

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/dnsrrl/rrl"
	"github.com/dnsrrl/rrl/replay"
	"github.com/dnsrrl/rrl/replay/internal/capgen"
	dnstap "github.com/dnstap/golang-dnstap"
	"github.com/miekg/dns"
)

// slowExchanges is n exchanges from client, every 25 ms from the start of
// 2026, over TCP or UDP, for names in example.org.
func slowExchanges(t *testing.T, n int, client string, tcp bool) []capgen.Exchange {
	t.Helper()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	out := make([]capgen.Exchange, n)
	for i := range out {
		q := new(dns.Msg).SetQuestion("www.example.org.", dns.TypeA)
		q.Id = uint16(i + 1)
		r := new(dns.Msg).SetReply(q)
		rr, _ := dns.NewRR("www.example.org. 60 IN A 192.0.2.1")
		r.Answer = []dns.RR{rr}
		qw, err := q.Pack()
		if err != nil {
			t.Fatal(err)
		}
		rw, err := r.Pack()
		if err != nil {
			t.Fatal(err)
		}
		out[i] = capgen.Exchange{At: start.Add(time.Duration(i) * 25 * time.Millisecond),
			Client: netip.AddrPortFrom(netip.MustParseAddr(client), uint16(10000+i)),
			Server: netip.MustParseAddrPort("192.0.2.53:53"), TCP: tcp, Query: qw, Response: rw}
	}
	return out
}

// tapSlow writes the exchanges as dnstap, each response 20 ms after its
// query (and carrying its query's time, as servers log it); without the
// queries when responsesOnly.
func tapSlow(t *testing.T, ex []capgen.Exchange, responsesOnly bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw, err := capgen.NewTapWriter(&buf, false)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ex {
		e := &ex[i]
		if !responsesOnly {
			if err := tw.Encode(e, dnstap.Message_CLIENT_QUERY, e.At, e.Query); err != nil {
				t.Fatal(err)
			}
		}
		if err := tw.Encode(e, dnstap.Message_CLIENT_RESPONSE, e.At.Add(20*time.Millisecond), e.Response); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// streamCut is the report's row of stream-time-per-second.
func streamCut(t *testing.T, rep *replay.Report) *replay.Cut {
	t.Helper()
	for _, c := range rep.Cuts {
		if c.Limit == "stream-time-per-second" {
			return c
		}
	}
	t.Fatalf("no stream-time-per-second row in the cuts: %+v", rep.Cuts)
	return nil
}

// A dnstap log of TCP queries that take the server 20 ms each, one every
// 25 ms for 3 seconds, replays with stream-time-per-second 100ms as the
// core decides when the server charges each response's time: the
// refusals are counted under stream-time-per-second. Logged without the
// queries, the responses' own query times give the time. Over UDP
// nothing is charged.
func TestReplayStreamTime(t *testing.T) {
	ex := slowExchanges(t, 120, "198.51.100.7", true)

	// What the core says, called as a server calls it.
	cfg := rrl.NewConfig()
	if err := cfg.SetValue("stream-time-per-second", "100ms"); err != nil {
		t.Fatal(err)
	}
	clock := rrl.NewManualClock(ex[0].At)
	cfg.SetClock(clock)
	lim := rrl.NewRRL(cfg)
	var refused int64
	for _, e := range ex {
		clock.Set(e.At)
		client := e.Client.Addr()
		if act, _, why := lim.DebitRequestLimit(client, false, false); act == rrl.Drop {
			if why.Limit != rrl.LimitStreamTime {
				t.Fatalf("refused by %v", why.Limit)
			}
			refused++
			continue
		}
		clock.Set(e.At.Add(20 * time.Millisecond))
		lim.DebitStreamTime(client, 20*time.Millisecond)
	}
	// 3 s of 100 ms a second and a 100 ms burst is 400 ms, 20 requests of
	// 20 ms, and one overshooting.
	if served := int64(len(ex)) - refused; served < 19 || served > 21 {
		t.Fatalf("the core served %d, want about 20", served)
	}

	t.Logf("the core refused %d of %d", refused, len(ex))
	opts := replay.Options{Settings: settings(t, "stream-time-per-second=100ms")}
	rep := replayBytes(t, opts, tapSlow(t, ex, false))
	if c := streamCut(t, rep); c.RequestsRefused != refused || rep.RequestsDropped != refused {
		t.Errorf("dnstap with queries: %d refused by stream-time-per-second (%d requests dropped), want %d", c.RequestsRefused, rep.RequestsDropped, refused)
	}
	rep = replayBytes(t, opts, tapSlow(t, ex, true))
	if c := streamCut(t, rep); c.RequestsRefused < refused-2 || c.RequestsRefused > refused+2 {
		t.Errorf("dnstap of responses alone: %d refused by stream-time-per-second, want about %d", c.RequestsRefused, refused)
	}
	rep = replayBytes(t, opts, tapSlow(t, slowExchanges(t, 120, "198.51.100.7", false), false))
	if c := streamCut(t, rep); c.RequestsRefused != 0 || rep.RequestsDropped != 0 {
		t.Errorf("over UDP: %d refused by stream-time-per-second, want none", c.RequestsRefused)
	}
}
