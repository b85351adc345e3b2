package replay_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dnsrrl/rrl"
	"github.com/dnsrrl/rrl/replay"
	"github.com/dnsrrl/rrl/replay/internal/capgen"
	"github.com/miekg/dns"
)

// cutOf returns the report's row for limit, failing the test without one.
func cutOf(t *testing.T, rep *replay.Report, limit string) replay.Cut {
	t.Helper()
	for _, c := range rep.Cuts {
		if c.Limit == limit {
			return *c
		}
	}
	t.Fatalf("no row %q in the cuts %s", limit, cutsString(rep))
	return replay.Cut{}
}

func cutsString(rep *replay.Report) string {
	b, _ := json.Marshal(rep.Cuts)
	return string(b)
}

// textOf returns the text report.
func textOf(t *testing.T, rep *replay.Report) string {
	t.Helper()
	var b bytes.Buffer
	if err := replay.WriteText(&b, []*replay.Report{rep}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// spreadFlood is a flood spread over 16 /24s of 10.1.0.0/18, each /24 at
// 8 queries a second (4 hosts at 2 a second) for 3 seconds: 384 queries,
// none over a /24's or a host's allowance, 128 a second over the /18.
func spreadFlood() []capgen.Exchange {
	var ex []capgen.Exchange
	for i := range 3 * 8 {
		at := start.Add(time.Duration(i) * time.Second / 8)
		for n := range 16 {
			host := netip.AddrFrom4([4]byte{10, 1, byte(n), byte(1 + i%4)})
			q := capgen.Query(uint16(i*16+n), fmt.Sprintf("h%d.example.org.", n), dns.TypeA, "")
			ex = append(ex, capgen.Exchange{At: at.Add(time.Duration(n) * time.Millisecond), Client: netip.AddrPortFrom(host, 5300),
				Server: capgen.Server, Query: q, Response: capgen.Response(q, capgen.Answer, "example.org.")})
		}
	}
	return ex
}

func TestCutByRequestPrefix(t *testing.T) {
	ex := spreadFlood()
	kv := []string{"requests-per-second=10", "ipv4-request-prefixes=32:5,18:40"}
	rep := replayBytes(t, replay.Options{Settings: settings(t, kv...)}, pcapOf(t, ethernet, false, ex))
	checkCounts(t, rep, decide(t, kv, ex, nil))

	// The /18 is allowed 40 a second, and a second's credit: 160 of the
	// 384 queries in 3 seconds at most.
	wide := cutOf(t, rep, "ipv4-request-prefixes /18")
	if rep.Queries != 384 || rep.RequestsDropped < 384-160 || wide.RequestsRefused != rep.RequestsDropped {
		t.Errorf("queries %d, refused %d, by the /18 %d; want the /18 to refuse at least %d, all that were refused",
			rep.Queries, rep.RequestsDropped, wide.RequestsRefused, 384-160)
	}
	if wide.Dropped != wide.RequestsRefused || wide.Slipped != 0 || wide.BytesCut < wide.Dropped*int64(len(ex[0].Response)) {
		t.Errorf("/18 row %+v: want the responses of its refused requests dropped, at least %d bytes each", wide, len(ex[0].Response))
	}
	for _, limit := range []string{"requests-per-second", "ipv4-request-prefixes /32"} {
		if c := cutOf(t, rep, limit); c != (replay.Cut{Limit: limit}) {
			t.Errorf("%s cut %+v, want nothing: no /24 and no host is over its allowance", limit, c)
		}
	}
	if rep.Bytes.Captured-rep.Bytes.Sent != wide.BytesCut {
		t.Errorf("bytes cut %d overall, %d by the /18", rep.Bytes.Captured-rep.Bytes.Sent, wide.BytesCut)
	}
	text := textOf(t, rep)
	row := fmt.Sprintf("ipv4-request-prefixes /18 %d %d 0 %d", wide.RequestsRefused, wide.Dropped, wide.BytesCut)
	if !strings.Contains(strings.Join(strings.Fields(text), " "), row) {
		t.Errorf("the text report has no row %q:\n%s", row, text)
	}

	// Without the prefixes, requests-per-second alone lets every query through.
	rep = replayBytes(t, replay.Options{Settings: settings(t, "requests-per-second=10")}, pcapOf(t, ethernet, false, ex))
	if rep.RequestsDropped != 0 {
		t.Errorf("requests-per-second alone refused %d of the spread flood, want 0", rep.RequestsDropped)
	}
}

// largeAnswer returns a response to query with a TXT answer of about
// size bytes, and the truncated reply that goes in its place: header,
// question and the OPT record of the response.
func largeAnswer(t *testing.T, query []byte, size int) (resp, tc []byte) {
	t.Helper()
	var q, m dns.Msg
	if err := q.Unpack(query); err != nil {
		t.Fatal(err)
	}
	m.SetReply(&q)
	m.Authoritative = true
	var txt []string
	for n := 0; n < size; n += 200 {
		txt = append(txt, strings.Repeat("x", 199))
	}
	m.Answer = []dns.RR{&dns.TXT{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 300}, Txt: txt}}
	if opt := q.IsEdns0(); opt != nil {
		m.Extra = []dns.RR{opt}
	}
	resp, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	m.Answer, m.Truncated = nil, true
	tc, err = m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return resp, tc
}

func TestCutByNoCookieUDPSize(t *testing.T) {
	// 100 queries for a 1,000-byte answer from unproven clients, half of
	// them with a client cookie; 20 with a server cookie (assumed valid:
	// no secret is given) and 20 over TCP, which go whole.
	var ex []capgen.Exchange
	var size, tcSize int
	var want int64 // bytes cut: each unproven UDP answer less its truncated reply
	for i := range 140 {
		cookie := ""
		if i%2 == 1 || i >= 100 && i < 120 {
			cookie = "0102030405060708"
		}
		if i >= 100 && i < 120 {
			cookie += "1112131415161718191a1b1c1d1e1f20"
		}
		q := capgen.Query(uint16(i), fmt.Sprintf("big%d.example.org.", i%7), dns.TypeTXT, cookie)
		resp, tc := largeAnswer(t, q, 1000)
		if cookie == "" {
			size, tcSize = len(resp), len(tc)
		}
		if i < 100 {
			want += int64(len(resp) - len(tc))
		}
		client := netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 51, byte(i % 3), byte(i)}), 5300)
		ex = append(ex, capgen.Exchange{At: start.Add(time.Duration(i) * 10 * time.Millisecond), Client: client,
			Server: capgen.Server, TCP: i >= 120, Query: q, Response: resp})
	}
	if size < 1000 || size > 1100 || tcSize > 512 {
		t.Fatalf("answer of %d bytes, truncated reply of %d; want about 1,000 and at most 512", size, tcSize)
	}
	rep := replayBytes(t, replay.Options{Settings: settings(t, "nocookie-udp-size=512")}, pcapOf(t, ethernet, false, ex))
	c := cutOf(t, rep, "nocookie-udp-size")
	if c.Slipped != 100 || c.Dropped != 0 || c.RequestsRefused != 0 {
		t.Errorf("nocookie-udp-size cut %+v, want the 100 unproven UDP responses slipped", c)
	}
	if c.BytesCut != want || want != 100*int64(size-tcSize) {
		t.Errorf("bytes cut %d, want 100 × (%d − %d) = %d", c.BytesCut, size, tcSize, want)
	}
	if rep.Slipped != 100 || rep.Sent != 40 || rep.CookieExempt != 20 {
		t.Errorf("slipped %d, sent %d (cookie exempt %d); want the server cookies and TCP whole", rep.Slipped, rep.Sent, rep.CookieExempt)
	}
	if sent := rep.Bytes.Sent; sent != rep.Bytes.Captured-c.BytesCut {
		t.Errorf("bytes sent %d, captured %d, cut %d", sent, rep.Bytes.Captured, c.BytesCut)
	}
	if text := textOf(t, rep); !strings.Contains(strings.Join(strings.Fields(text), " "), fmt.Sprintf("nocookie-udp-size 0 0 100 %d", c.BytesCut)) {
		t.Errorf("the text report does not show the nocookie-udp-size row:\n%s", text)
	}
}

func TestCutByAllBytesPerSecond(t *testing.T) {
	// A burst of 60 names with 260-byte answers to one network within
	// 60 ms; each name has its own allowance, which it stays within.
	var ex []capgen.Exchange
	size := 0
	for i := range 60 {
		q := capgen.Query(uint16(i), fmt.Sprintf("n%d.example.org.", i), dns.TypeTXT, "")
		resp, _ := largeAnswer(t, q, 150)
		size = max(size, len(resp))
		ex = append(ex, capgen.Exchange{At: start.Add(time.Duration(i) * time.Millisecond), Client: addrPort("203.0.113.9:5300"),
			Server: capgen.Server, Query: q, Response: resp})
	}
	const budget = 3000
	kv := []string{"responses-per-second=5", fmt.Sprintf("all-bytes-per-second=%d", budget)}
	rep := replayBytes(t, replay.Options{Settings: settings(t, kv...)}, pcapOf(t, ethernet, false, ex))
	c := cutOf(t, rep, "all-bytes-per-second")
	if rep.Bytes.Sent > budget+int64(size) || rep.Bytes.Sent < budget-int64(size) {
		t.Errorf("%d bytes sent to the network, want its budget %d, give or take an answer (%d bytes)", rep.Bytes.Sent, budget, size)
	}
	if c.Dropped != rep.Dropped || c.Dropped < 40 || c.BytesCut != rep.Bytes.Captured-rep.Bytes.Sent {
		t.Errorf("all-bytes-per-second cut %+v; the report dropped %d, cut %d bytes", c, rep.Dropped, rep.Bytes.Captured-rep.Bytes.Sent)
	}
	if r := cutOf(t, rep, "responses-per-second"); r.Dropped+r.Slipped != 0 {
		t.Errorf("responses-per-second cut %+v, want nothing: each name is asked once", r)
	}
	var out bytes.Buffer
	if err := replay.WriteHTML(&out, []*replay.Report{rep}); err != nil {
		t.Fatal(err)
	}
	if row := fmt.Sprintf("<tr><td>all-bytes-per-second</td><td>0</td><td>%d</td><td>0</td><td>%d</td></tr>", c.Dropped, c.BytesCut); !strings.Contains(out.String(), row) {
		t.Errorf("the HTML report has no row %s", row)
	}
	js, _ := json.Marshal(rep)
	if !strings.Contains(string(js), fmt.Sprintf(`{"limit":"all-bytes-per-second","requests_refused":0,"dropped":%d,"slipped":0,"bytes_cut":%d}`, c.Dropped, c.BytesCut)) {
		t.Errorf("the JSON report has no all-bytes-per-second row: %s", cutsString(rep))
	}
}

func TestRequestPrefixSettings(t *testing.T) {
	set, err := replay.ParseSetting("ipv4-request-prefixes=32:5,20:400")
	if err != nil || set.Value != "32:5,20:400" {
		t.Fatalf("-set of two pairs: %+v, %v", set, err)
	}
	if _, err := replay.ParseSetting("ipv4-request-prefixes=32:5,33:400"); err == nil || !strings.Contains(err.Error(), "ipv4-request-prefixes") {
		t.Errorf("a length out of range: %v", err)
	}
	cf, err := replay.ParseCorefile("Corefile", strings.NewReader(". {\n rrl {\n  ipv4-request-prefixes 32:5 20:400\n  ipv6-request-prefixes 128:5,48:800\n  nocookie-udp-size 512\n  all-bytes-per-second 20000\n }\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range cf.Settings {
		got = append(got, s.String())
	}
	if want := "ipv4-request-prefixes 32:5 20:400; ipv6-request-prefixes 128:5,48:800; nocookie-udp-size 512; all-bytes-per-second 20000"; strings.Join(got, "; ") != want {
		t.Errorf("Corefile settings %q, want %q", strings.Join(got, "; "), want)
	}
	if _, err := replay.ParseCorefile("Corefile", strings.NewReader(". {\n rrl {\n  ipv4-request-prefixes\n }\n}\n")); err == nil || !strings.Contains(err.Error(), "LENGTH:ALLOWANCE") {
		t.Errorf("request prefixes without a pair: %v", err)
	}

	// A sweep's values are separated by commas, the pairs of one value
	// by spaces.
	sw, err := replay.ParseSweep("ipv4-request-prefixes=32:5 18:20,32:5 18:40,32:5 18:1000")
	if err != nil || len(sw.Values) != 3 {
		t.Fatalf("sweep: %+v, %v", sw, err)
	}
	r, err := replay.New(replay.Options{Sweep: sw})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Read(bytes.NewReader(pcapOf(t, ethernet, false, spreadFlood()))); err != nil {
		t.Fatal(err)
	}
	reps := r.Reports()
	var refused []int64
	for _, rep := range reps {
		refused = append(refused, cutOf(t, rep, "ipv4-request-prefixes /18").RequestsRefused)
	}
	if !(refused[0] > refused[1] && refused[1] > refused[2] && refused[2] == 0) {
		t.Errorf("refused by the /18 at 20, 40, 1000 a second: %v, want fewer as the allowance grows", refused)
	}
}

func TestCutByIPv6RequestPrefix(t *testing.T) {
	// One heavy host at 20 queries a second for 2 seconds, over UDP and
	// (one in four) over TCP, and a neighbour in its /56 at 2 a second.
	heavy, neighbour := addrPort("[2001:db8:1::7]:5300"), addrPort("[2001:db8:1::8]:5300")
	var ex []capgen.Exchange
	for i := range 40 {
		for _, c := range []netip.AddrPort{heavy, neighbour} {
			if c == neighbour && i%10 != 0 {
				continue
			}
			q := capgen.Query(uint16(i), "www.example.org.", dns.TypeA, "")
			ex = append(ex, capgen.Exchange{At: start.Add(time.Duration(i) * 50 * time.Millisecond), Client: c,
				Server: capgen.Server6, TCP: c == heavy && i%4 == 3, Query: q, Response: capgen.Response(q, capgen.Answer, "example.org.")})
		}
	}
	kv := []string{"ipv6-request-prefixes=128:5,32:1000"}
	rep := replayBytes(t, replay.Options{Settings: settings(t, kv...)}, pcapOf(t, ethernet, false, ex))
	checkCounts(t, rep, decide(t, kv, ex, nil))
	host := cutOf(t, rep, "ipv6-request-prefixes /128")
	// 30 over UDP in 2 seconds against 5 a second and a second's credit.
	if host.RequestsRefused < 30-15 || host.RequestsRefused != rep.RequestsDropped || host.Dropped != host.RequestsRefused {
		t.Errorf("the /128 refused %+v of %d refused, want at least 15 of the heavy host's 30 UDP queries", host, rep.RequestsDropped)
	}
	if c := cutOf(t, rep, "ipv6-request-prefixes /32"); c.RequestsRefused != 0 {
		t.Errorf("the /32 refused %d", c.RequestsRefused)
	}
	for _, n := range rep.Networks {
		if n.Network != "2001:db8:1::/56" {
			t.Errorf("network %s limited", n.Network)
		}
	}
	for _, c := range rep.Cuts {
		if c.Limit == "requests-per-second" {
			t.Errorf("a row for requests-per-second, which is off: %+v", c)
		}
	}
	// Everything not refused was sent: the neighbour's 4 and the TCP 10.
	if rep.Sent != int64(len(ex))-host.RequestsRefused {
		t.Errorf("sent %d of %d, refused %d", rep.Sent, len(ex), host.RequestsRefused)
	}
}

func TestCutAttribution(t *testing.T) {
	// The spread flood, with a heavy host and a busy /24 inside it, under
	// limits that are in episodes at once: each refusal must be told to
	// the limit that made it, as the core's statistics tell it.
	ex := spreadFlood()
	for i := range 60 {
		at := start.Add(time.Duration(i) * 50 * time.Millisecond)
		for j, c := range []netip.AddrPort{addrPort("10.1.3.9:5300"), netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, 40, byte(i % 5)}), 5300)} {
			q := capgen.Query(uint16(1000+2*i+j), "www.example.org.", dns.TypeA, "")
			ex = append(ex, capgen.Exchange{At: at.Add(time.Duration(j) * 7 * time.Millisecond), Client: c, Server: capgen.Server,
				Query: q, Response: capgen.Response(q, capgen.Answer, "example.org.")})
		}
	}
	slices.SortStableFunc(ex, func(a, b capgen.Exchange) int { return a.At.Compare(b.At) })
	kv := []string{"requests-per-second=12", "ipv4-request-prefixes=32:6,18:60"}

	// What the core says: each refusal is of requests-per-second unless a
	// request prefix's count of refusals went up.
	cfg := rrl.NewConfig()
	for _, s := range settings(t, kv...) {
		if err := cfg.SetValue(s.Keyword, s.Value); err != nil {
			t.Fatal(err)
		}
	}
	now := start
	cfg.SetNowFunc(func() time.Time { return now })
	lim := rrl.NewRRL(cfg)
	want := map[string]*replay.Cut{}
	var before [rrl.MaxRequestPrefixes]int64
	for _, e := range ex {
		now = e.At
		if act, _ := lim.DebitRequestAddr(e.Client.Addr(), true, false); act != rrl.Drop {
			continue
		}
		limit := "requests-per-second"
		drops := lim.GetStats(false).RequestPrefixDrops[0]
		for i, label := range []string{"ipv4-request-prefixes /32", "ipv4-request-prefixes /18"} {
			if drops[i] != before[i] {
				limit = label
			}
		}
		before = drops
		c := want[limit]
		if c == nil {
			c = &replay.Cut{Limit: limit}
			want[limit] = c
		}
		c.RequestsRefused++
		c.Dropped++
		c.BytesCut += int64(len(e.Response))
	}
	if len(want) != 3 {
		t.Fatalf("the traffic is refused by %d limits, want all 3", len(want))
	}
	rep := replayBytes(t, replay.Options{Settings: settings(t, kv...)}, pcapOf(t, ethernet, false, ex))
	for limit, w := range want {
		if got := cutOf(t, rep, limit); got != *w {
			t.Errorf("%s: replay %+v, core %+v", limit, got, *w)
		}
	}
}

func TestCutByProvenRequests(t *testing.T) {
	// One host at 10 queries a second over TCP for 2 seconds: proven, so
	// past the request prefixes and charged to proven-requests-per-second.
	var ex []capgen.Exchange
	for i := range 20 {
		q := capgen.Query(uint16(i), "www.example.org.", dns.TypeA, "")
		ex = append(ex, capgen.Exchange{At: start.Add(time.Duration(i) * 100 * time.Millisecond), Client: addrPort("192.0.2.77:5300"),
			Server: capgen.Server, TCP: true, Query: q, Response: capgen.Response(q, capgen.Answer, "example.org.")})
	}
	kv := []string{"requests-per-second=20", "proven-requests-per-second=3", "ipv4-request-prefixes=32:1"}
	rep := replayBytes(t, replay.Options{Settings: settings(t, kv...)}, pcapOf(t, ethernet, false, ex))
	checkCounts(t, rep, decide(t, kv, ex, nil))
	proven := cutOf(t, rep, "proven-requests-per-second")
	if proven.RequestsRefused == 0 || proven.RequestsRefused != rep.RequestsDropped {
		t.Errorf("proven-requests-per-second refused %d of %d refused", proven.RequestsRefused, rep.RequestsDropped)
	}
	if c := cutOf(t, rep, "ipv4-request-prefixes /32"); c.RequestsRefused != 0 {
		t.Errorf("the /32 refused %d proven requests", c.RequestsRefused)
	}
}
