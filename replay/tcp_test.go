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

func framed(m []byte) []byte { return append([]byte{byte(len(m) >> 8), byte(len(m))}, m...) }

// segment is a TCP segment to write: its direction, offset in its stream,
// flags and payload.
type segment struct {
	fromServer bool
	off        uint32
	flags      int
	data       []byte
}

func tcpCapture(t *testing.T, client string, segs []segment) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := capgen.NewWriter(&buf, ethernet, false)
	if err != nil {
		t.Fatal(err)
	}
	c, s := addrPort(client), capgen.Server
	if c.Addr().Is6() {
		s = capgen.Server6
	}
	const cISN, sISN = 100, 900
	at := start
	for _, g := range segs {
		at = at.Add(time.Millisecond)
		var err error
		if g.fromServer {
			err = w.TCP(at, s, c, sISN+g.off, g.flags|capgen.ACK, g.data)
		} else {
			err = w.TCP(at, c, s, cISN+g.off, g.flags|capgen.ACK, g.data)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// A message split over segments (even its length), several messages in
// one segment, a retransmission and a segment out of order all come out
// as the messages sent, over IPv4 and IPv6.
func TestTCPReassembly(t *testing.T) {
	q := [3][]byte{}
	r := [3][]byte{}
	for i := range q {
		q[i] = capgen.Query(uint16(10+i), "www.example.org.", dns.TypeA, "")
		r[i] = capgen.Response(q[i], capgen.Answer, "example.org.")
	}
	cs := append(append(framed(q[0]), framed(q[1])...), framed(q[2])...)
	ss := append(append(framed(r[0]), framed(r[1])...), framed(r[2])...)
	l0 := uint32(len(framed(q[0])))
	rl := uint32(len(framed(r[0])))
	segs := []segment{
		{false, 0, capgen.SYN, nil},
		{true, 0, capgen.SYN, nil},
		{false, 1, 0, cs[:1]},            // half of the length
		{false, 1 + 1, 0, cs[1:10]},      // the rest of the length and a little
		{false, 1 + 1, 0, cs[1:10]},      // retransmitted
		{false, 1 + 10, 0, cs[10:l0]},    // query 0 complete
		{false, 1 + l0, 0, cs[l0:]},      // queries 1 and 2 in one segment
		{true, 1 + rl + 5, 0, ss[rl+5:]}, // ahead of a gap: held
		{true, 1, 0, ss[:rl+5]},          // fills the gap: responses 0, 1, 2
		{false, 1 + uint32(len(cs)), capgen.FIN, nil},
	}
	for _, client := range []string{"203.0.113.9:4000", "[2001:db8:1::9]:4000"} {
		rep := replayBytes(t, replay.Options{Settings: settings(t, "requests-per-second=100")}, tcpCapture(t, client, segs))
		if rep.Queries != 3 || rep.Responses != 3 || rep.Categories["answer"].Sent != 3 || rep.Unmatched != 0 {
			t.Errorf("%s: queries %d, responses %d (%+v), without query %d; want 3, 3 answers sent, 0",
				client, rep.Queries, rep.Responses, *rep.Categories["answer"], rep.Unmatched)
		}
		if len(rep.Skipped) != 0 {
			t.Errorf("%s: skipped %v", client, rep.Skipped)
		}
	}
}

// A query in the SYN itself (TCP Fast Open) is read.
func TestTCPFastOpen(t *testing.T) {
	q := capgen.Query(1, "www.example.org.", dns.TypeA, "")
	r := capgen.Response(q, capgen.Answer, "example.org.")
	segs := []segment{
		{false, 0, capgen.SYN, framed(q)},
		{true, 0, capgen.SYN, nil},
		{true, 1, 0, framed(r)},
	}
	rep := replayBytes(t, replay.Options{}, tcpCapture(t, "203.0.113.9:4000", segs))
	if rep.Queries != 1 || rep.Responses != 1 || rep.Unmatched != 0 || len(rep.Skipped) != 0 {
		t.Errorf("%d queries, %d responses, %d without query, skipped %v", rep.Queries, rep.Responses, rep.Unmatched, rep.Skipped)
	}
}

// A stream that loses data is given up rather than read out of frame:
// no garbage message comes out of it, and the loss is counted.
func TestTCPLostSegment(t *testing.T) {
	q := capgen.Query(1, "www.example.org.", dns.TypeA, "")
	cs := append(framed(q), framed(q)...)
	n := uint32(len(framed(q)))
	segs := []segment{
		{false, 0, capgen.SYN, nil},
		{false, 1 + 4, 0, cs[4:n]}, // the first 4 bytes never come
	}
	for i := 0; i < 70; i++ { // more held segments than the reassembler keeps
		segs = append(segs, segment{false, 1 + n + uint32(i)*1000, 0, cs[n:]})
	}
	rep := replayBytes(t, replay.Options{}, tcpCapture(t, "203.0.113.9:4000", segs))
	if rep.Queries != 0 {
		t.Errorf("%d queries read from a broken stream", rep.Queries)
	}
	if rep.Skipped[replay.SkipTCPGap] != 1 {
		t.Errorf("skipped %v, want one %q", rep.Skipped, replay.SkipTCPGap)
	}
}

// A query answered by several messages over TCP (a zone transfer) is one
// request: its later messages are neither charged as requests again nor
// counted as responses without a query, as the servers charge them once.
func TestTCPSeveralMessagesToOneQuery(t *testing.T) {
	q := capgen.Query(7, "example.org.", dns.TypeAXFR, "")
	r := capgen.Response(q, capgen.Answer, "example.org.")
	var ss []byte
	for i := 0; i < 5; i++ {
		ss = append(ss, framed(r)...)
	}
	segs := []segment{
		{false, 0, capgen.SYN, nil},
		{true, 0, capgen.SYN, nil},
		{false, 1, 0, framed(q)},
		{true, 1, 0, ss},
		{false, 1 + uint32(len(framed(q))), capgen.FIN, nil},
	}
	rep := replayBytes(t, replay.Options{Settings: settings(t, "requests-per-second=1", "window=1")}, tcpCapture(t, "203.0.113.9:4000", segs))
	if rep.Queries != 1 || rep.RequestsDropped != 0 || rep.Responses != 5 || rep.Sent != 5 || rep.Unmatched != 0 {
		t.Errorf("%d queries (%d dropped), %d responses (%d sent), %d without query; want 1 (0), 5 (5), 0",
			rep.Queries, rep.RequestsDropped, rep.Responses, rep.Sent, rep.Unmatched)
	}
}

// A zone transfer whose query requests-per-second drops has every one of
// its messages dropped, as the first is.
func TestTCPDroppedQueryDropsAllItsMessages(t *testing.T) {
	var cs, ss []byte
	for id := uint16(7); id <= 8; id++ { // the second query is over the limit
		q := capgen.Query(id, "example.org.", dns.TypeAXFR, "")
		cs = append(cs, framed(q)...)
		for range 5 {
			ss = append(ss, framed(capgen.Response(q, capgen.Answer, "example.org."))...)
		}
	}
	segs := []segment{
		{false, 0, capgen.SYN, nil},
		{true, 0, capgen.SYN, nil},
		{false, 1, 0, cs},
		{true, 1, 0, ss},
	}
	rep := replayBytes(t, replay.Options{Settings: settings(t, "requests-per-second=1")}, tcpCapture(t, "203.0.113.9:4000", segs))
	if rep.Queries != 2 || rep.RequestsDropped != 1 || rep.Responses != 10 || rep.Sent != 5 || rep.Dropped != 5 || rep.Unmatched != 0 {
		t.Errorf("%d queries (%d dropped), %d responses (%d sent, %d dropped), %d without query; want 2 (1), 10 (5, 5), 0",
			rep.Queries, rep.RequestsDropped, rep.Responses, rep.Sent, rep.Dropped, rep.Unmatched)
	}
}

// A message that its connection or the input ends in the middle of is
// counted as cut off, once; a connection left open after whole messages
// is not.
func TestTCPMessageCutOff(t *testing.T) {
	q := capgen.Query(1, "www.example.org.", dns.TypeA, "")
	fq := framed(q)
	syn := segment{false, 0, capgen.SYN, nil}
	for _, c := range []struct {
		name    string
		segs    []segment
		skipped string // the one reason counted, once; "" for none
		queries int64
	}{
		{"input ends mid-message", []segment{syn, {false, 1, 0, fq[:10]}}, replay.SkipTCPCut, 0},
		{"FIN mid-message", []segment{syn, {false, 1, 0, fq[:10]}, {false, 11, capgen.FIN, nil}}, replay.SkipTCPCut, 0},
		{"a new connection on the same ports", []segment{syn, {false, 1, 0, fq[:10]}, {false, 5000, capgen.SYN, nil}, {false, 5001, 0, fq}}, replay.SkipTCPCut, 1},
		{"input ends before a gap is filled: data lost", []segment{syn, {false, 1 + 4, 0, fq[4:]}}, replay.SkipTCPGap, 0},
		{"open after whole messages", []segment{syn, {false, 1, 0, fq}}, "", 1},
		{"a whole message, its FIN captured twice", []segment{syn, {false, 1, capgen.FIN, fq}, {false, 1, capgen.FIN, fq}}, "", 1},
		{"no SYN captured: the framing is a guess", []segment{{false, 1, 0, fq[:10]}}, "", 0},
	} {
		rep := replayBytes(t, replay.Options{}, tcpCapture(t, "203.0.113.9:4000", c.segs))
		want := map[string]int64{}
		if c.skipped != "" {
			want[c.skipped] = 1
		}
		if fmt.Sprint(rep.Skipped) != fmt.Sprint(want) {
			t.Errorf("%s: skipped %v, want %v", c.name, rep.Skipped, want)
		}
		if rep.Queries != c.queries {
			t.Errorf("%s: %d queries, want %d", c.name, rep.Queries, c.queries)
		}
	}
}
