package replay_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/dnsrrl/rrl/replay"
	"github.com/dnsrrl/rrl/replay/internal/capgen"
	"github.com/miekg/dns"
)

// bigResponse answers query with enough TXT records to need fragments.
func bigResponse(t *testing.T, query []byte) []byte {
	t.Helper()
	var q, m dns.Msg
	if err := q.Unpack(query); err != nil {
		t.Fatal(err)
	}
	m.SetReply(&q)
	for i := 0; i < 30; i++ {
		rr, err := dns.NewRR(fmt.Sprintf(`%s 300 IN TXT "record %d of a response too large for one packet, as amplification attacks like them"`, q.Question[0].Name, i))
		if err != nil {
			t.Fatal(err)
		}
		m.Answer = append(m.Answer, rr)
	}
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Responses sent in IP fragments, in order and reversed, over IPv4 and
// IPv6, are reassembled and charged whole; fragments of a datagram that
// never completes are counted as skipped.
func TestFragments(t *testing.T) {
	for _, client := range []string{"198.51.100.9:5353", "[2001:db8:bad::9]:5353"} {
		c := addrPort(client)
		server := capgen.Server
		if c.Addr().Is6() {
			server = capgen.Server6
		}
		var buf bytes.Buffer
		w, err := capgen.NewWriter(&buf, ethernet, false)
		if err != nil {
			t.Fatal(err)
		}
		var ex []capgen.Exchange
		for i := 0; i < 40; i++ {
			at := start.Add(time.Duration(i) * 20 * time.Millisecond)
			q := capgen.Query(uint16(i), "big.example.org.", dns.TypeTXT, "")
			e := capgen.Exchange{At: at, Client: c, Server: server, Query: q, Response: bigResponse(t, q)}
			ex = append(ex, e)
			if err := w.UDP(at, c, server, q); err != nil {
				t.Fatal(err)
			}
			if err := w.UDPFragments(at.Add(capgen.ResponseDelay), server, c, e.Response, 1400, i%2 == 1); err != nil {
				t.Fatal(err)
			}
		}
		// The first two fragments of a datagram whose last never comes.
		var partial bytes.Buffer
		pw, _ := capgen.NewWriter(&partial, ethernet, false)
		pw.UDPFragments(start.Add(time.Second), server, c, ex[0].Response, 1400, false)
		rest := partial.Bytes()[24:]
		for n := 0; n < 2; n++ {
			l := int(rest[8]) | int(rest[9])<<8 | int(rest[10])<<16
			buf.Write(rest[:16+l])
			rest = rest[16+l:]
		}

		kv := []string{"responses-per-second=10", "slip-ratio=3"}
		rep := replayBytes(t, replay.Options{Settings: settings(t, kv...)}, buf.Bytes())
		checkCounts(t, rep, decide(t, kv, ex, nil))
		if rep.Responses != 40 || rep.Bytes.Captured != int64(40*len(ex[0].Response)) {
			t.Errorf("%s: %d responses, %d bytes; want 40 of %d bytes", client, rep.Responses, rep.Bytes.Captured, len(ex[0].Response))
		}
		if len(ex[0].Response) < 3000 {
			t.Fatalf("the response is only %d bytes", len(ex[0].Response))
		}
		if rep.Skipped[replay.SkipFragment] != 2 || len(rep.Skipped) != 1 {
			t.Errorf("%s: skipped %v, want the 2 fragments of the incomplete datagram", client, rep.Skipped)
		}
	}
}
