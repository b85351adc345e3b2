package rrl

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// TestSpreadFloodHeldByWiderPrefix: 16 /24s of one /18, each asking
// within requests-per-second, are held together to the /18's allowance:
// one second's credit, then its allowance a second.
func TestSpreadFloodHeldByWiderPrefix(t *testing.T) {
	clock := newTestClock()
	r := newTestRRL(t, clock, "requests-per-second", "10", "ipv4-request-prefixes", "32:5 20:400 18:40")
	served := 0
	const seconds = 3
	for j := range seconds * 8 { // 8 requests a second from each /24, each from an address of its own
		for i := range 16 {
			if act, _ := r.DebitRequest(udp(fmt.Sprintf("10.1.%d.%d", i, j+1)), false); act == Send {
				served++
			}
		}
		clock.Advance(time.Second / 8)
	}
	if max := 40*seconds + 40; served > max || served < 40*seconds {
		t.Errorf("%d of %d requests served, want from %d to %d (the /18's allowance)", served, seconds*8*16, 40*seconds, max)
	}
	s := r.GetStats(false)
	if s.RequestPrefixDrops[0][2] == 0 || s.RequestPrefixDrops[0][0] != 0 || s.RequestPrefixDrops[0][1] != 0 {
		t.Errorf("drops by prefix %v, want all by the third pair, /18", s.RequestPrefixDrops[0])
	}
	if s.IPReasons[IPRateLimit] != s.RequestPrefixDrops[0][2] {
		t.Errorf("IPRateLimit %d, prefix drops %d", s.IPReasons[IPRateLimit], s.RequestPrefixDrops[0][2])
	}
}

// TestHeavyHostHeldToItsAddress: one address asking fast is held to its
// /32 allowance while a neighbour in its /24 is served.
func TestHeavyHostHeldToItsAddress(t *testing.T) {
	clock := newTestClock()
	r := newTestRRL(t, clock, "requests-per-second", "100", "ipv4-request-prefixes", "32:5")
	checkBursts(t, r,
		burst{"a heavy host: its /32's second of credit", udp("192.0.2.1"), false, "SSSSSDDDDDDDDDD"},
		burst{"its neighbour in the /24", udp("192.0.2.2"), false, "SSSSS"},
	)
	clock.Advance(time.Second / 5)
	checkBursts(t, r, burst{"the heavy host, a fifth of a second later", udp("192.0.2.1"), false, "SD"})
}

// TestIPv6Levels: the levels of ipv6-request-prefixes hold an IPv6 flood
// at each length, and leave IPv4 alone.
func TestIPv6Levels(t *testing.T) {
	clock := newTestClock()
	r := newTestRRL(t, clock, "ipv6-request-prefixes", "128:2, 64:3,48:4")
	checkBursts(t, r,
		burst{"one address: its /128", udp("2001:db8:1:1::1"), false, "SSD"},
		burst{"a second address in the /64: the /64's third", udp("2001:db8:1:1::2"), false, "SD"},
		burst{"another /64 of the /48: the /48's fourth", udp("2001:db8:1:2::1"), false, "SD"},
		burst{"another /48", udp("2001:db8:2::1"), false, "SSD"},
		burst{"IPv4 has no levels", udp("192.0.2.1"), false, "SSSSSSSSSS"},
	)
	s := r.GetStats(false)
	if want := [MaxRequestPrefixes]int64{2, 1, 1}; s.RequestPrefixDrops[1] != want {
		t.Errorf("IPv6 drops by prefix %v, want %v", s.RequestPrefixDrops[1], want)
	}
	if a, ipr := r.DebitRequest(udp("2001:db8:1:1::1"), false); a != Drop || ipr != IPRateLimit {
		t.Errorf("%v %v, want Drop IPRateLimit", a, ipr)
	}
}

// TestRefusedRequestsUncharged: a request that one account refuses is
// charged to none of the others, the network's requests-per-second
// account and the prefixes before it, in a large table and in a table of
// one page, whose one set a lookup searches whole.
func TestRefusedRequestsUncharged(t *testing.T) {
	for _, size := range []string{"100000", "64"} {
		t.Run(size, func(t *testing.T) {
			clock := newTestClock()
			r := newTestRRL(t, clock, "max-table-size", size, "ipv4-request-prefixes", "32:2 24:3")
			checkBursts(t, r,
				burst{"host A: its /32", udp("10.9.1.1"), false, "SSD"},
				burst{"host B: the /24's third, then refused by the /24", udp("10.9.1.2"), false, "SDDDDDDDDD"},
			)
			clock.Advance(time.Second / 3) // the /24 earns one request, B's /32 two thirds
			// B holds 1 2/3 requests in its /32 if its refused requests were
			// refunded, 2/3 if not.
			checkBursts(t, r, burst{"host B a third of a second later", udp("10.9.1.2"), false, "SD"})

			n := newTestRRL(t, clock, "max-table-size", size, "ipv4-prefix-length", "16", "requests-per-second", "4",
				"ipv4-request-prefixes", "24:2")
			checkBursts(t, n,
				burst{"a /24 of the network", udp("10.9.1.1"), false, "SSDDDDDDDD"},
				// The network's account was charged and refunded at every
				// refusal: two left.
				burst{"another /24 of the network", udp("10.9.2.1"), false, "SSD"},
			)
		})
	}
}

// TestProvenRequestsPastLevels: requests over TCP or with a valid cookie
// are not charged to the levels, and keep proven-requests-per-second.
func TestProvenRequestsPastLevels(t *testing.T) {
	clock := newTestClock()
	r := newTestRRL(t, clock, "ipv4-request-prefixes", "32:2 24:2")
	checkBursts(t, r,
		burst{"over TCP, no request limit applies", tcp("192.0.2.1"), false, "SSSSSSSSSS"},
		burst{"with a valid cookie", udp("192.0.2.1"), true, "SSSSSSSSSS"},
		burst{"unproven: the levels, uncharged by the proven ones", udp("192.0.2.1"), false, "SSD"},
	)
	if a, ipr := r.DebitRequest(tcp("192.0.2.1"), false); a != Send || ipr != IPNotConfigured {
		t.Errorf("proven with no proven limit: %v %v, want Send IPNotConfigured", a, ipr)
	}
	p := newTestRRL(t, clock, "proven-requests-per-second", "3", "ipv4-request-prefixes", "32:1")
	checkBursts(t, p,
		burst{"proven: proven-requests-per-second only", udp("192.0.2.1"), true, "SSSD"},
		burst{"unproven: its /32", udp("192.0.2.1"), false, "SD"},
	)
	// Debit, the one call, takes a TCP response as proven too.
	if a, ipr, _ := r.Debit(tcp("198.51.100.1"), answer("a.")); a != Send || ipr != IPNotConfigured {
		t.Errorf("Debit over TCP: %v %v", a, ipr)
	}
}

// TestExemptChargedNowhere: an exempt client is charged to no level.
func TestExemptChargedNowhere(t *testing.T) {
	r := newTestRRL(t, newTestClock(), "ipv4-request-prefixes", "24:2", "exempt-clients", "192.0.2.1")
	checkBursts(t, r,
		burst{"exempt", udp("192.0.2.1"), false, "SSSSS"},
		burst{"its neighbour has the /24's credit whole", udp("192.0.2.2"), false, "SSD"},
	)
	if a, ipr := r.DebitRequest(udp("192.0.2.1"), false); a != Send || ipr != IPExempt {
		t.Errorf("exempt: %v %v", a, ipr)
	}
}

// TestPrefixEventNamesThePrefix: the observer hears which prefix tripped,
// with the network of that level.
func TestPrefixEventNamesThePrefix(t *testing.T) {
	var events []Event
	r := observedRRL(t, newTestClock(), &events, "ipv4-request-prefixes", "32:100 18:2")
	requests(r, udp("10.1.7.9"), false, 3)
	if len(events) != 1 {
		t.Fatalf("events %v, want one start", events)
	}
	e := events[0]
	if !e.Started || e.LimitKind != LimitIPv4RequestPrefixes || e.Limit != "ipv4-request-prefixes" ||
		e.Network != netip.MustParsePrefix("10.1.0.0/18") {
		t.Errorf("event %+v, want a start of ipv4-request-prefixes for 10.1.0.0/18", e)
	}
	var ev6 []Event
	r6 := observedRRL(t, newTestClock(), &ev6, "ipv6-request-prefixes", "56:1")
	requests(r6, udp("2001:db8:0:1ff::1"), false, 2)
	if len(ev6) != 1 || ev6[0].Network != netip.MustParsePrefix("2001:db8:0:100::/56") || ev6[0].LimitKind != LimitIPv6RequestPrefixes {
		t.Errorf("IPv6 events %+v, want a start for 2001:db8:0:100::/56", ev6)
	}
}

// TestQPSScaleScalesLevels: under qps-scale, the levels shrink with the
// load as the response allowances do.
func TestQPSScaleScalesLevels(t *testing.T) {
	clock := newTestClock()
	r := newTestRRL(t, clock, "qps-scale", "10", "ipv4-request-prefixes", "32:20")
	for i := range 100 { // 100 requests in a second from many networks: factor 1/10
		r.DebitRequest(udp(fmt.Sprintf("198.51.%d.1", i)), false)
	}
	clock.Advance(time.Second)
	r.DebitRequest(udp("203.0.113.9"), false) // the second turns: the factor is set
	if got := requests(r, udp("192.0.2.1"), false, 5); got != "SSDDD" {
		t.Errorf("scaled to 2 a second: %s, want SSDDD", got)
	}
}

// TestSprayKeepsTableBounded: unique sources, each charged to four levels
// and its network, never hold more than max-table-size accounts.
func TestSprayKeepsTableBounded(t *testing.T) {
	r := newTestRRL(t, newTestClock(), "max-table-size", "1000", "requests-per-second", "10",
		"ipv4-request-prefixes", "32:5 24:50 20:400 18:1200", "ipv6-request-prefixes", "128:5 64:50 56:100 48:800")
	for i := range 20000 {
		r.DebitRequest(udp(netip.AddrFrom4([4]byte{byte(i >> 16), byte(i >> 8), byte(i), 1}).String()), false)
		r.DebitRequest(udp(netip.AddrFrom16([16]byte{0x20, 1, byte(i >> 8), byte(i), 5: 1, 15: 1}).String()), false)
	}
	if n := r.GetStats(false).CacheLength; n > 1000 || n < 900 {
		t.Errorf("the table holds %d accounts, want up to max-table-size 1000 (and near it)", n)
	}
}

// TestAllBytesPerSecond: a network is sent its budget of bytes a second,
// over every name, then dropped; a response of unknown size costs 512;
// TCP is not counted.
func TestAllBytesPerSecond(t *testing.T) {
	clock := newTestClock()
	var events []Event
	r := observedRRL(t, clock, &events, "all-bytes-per-second", "3000")
	sent := 0
	for i := range 60 {
		tu := answer(fmt.Sprintf("n%d.example.", i))
		tu.Size = 300
		if a, _, rtr := r.Debit(udp("192.0.2.1"), tu); a == Send {
			sent++
		} else if a != Drop || rtr != RTAllBytesLimit {
			t.Fatalf("over the budget: %v %v, want Drop RTAllBytesLimit", a, rtr)
		}
	}
	if sent != 10 {
		t.Errorf("%d answers of 300 bytes sent, want 10 (3000 bytes)", sent)
	}
	if len(events) != 1 || events[0].LimitKind != LimitAllBytes || events[0].Network != netip.MustParsePrefix("192.0.2.0/24") {
		t.Errorf("events %+v, want one start of all-bytes-per-second for 192.0.2.0/24", events)
	}
	unknown := answer("u.example.") // Size 0: 512 bytes
	if got := actions(r, udp("198.51.100.1"), unknown, 7); got != "SSSSSDD" {
		t.Errorf("unknown sizes: %s, want 5 of 512 bytes", got)
	}
	big := answer("big.example.")
	big.Size = 5000 // more than a second's budget: it goes when the account holds full credit
	if got := actions(r, udp("203.0.113.1"), big, 2); got != "SD" {
		t.Errorf("one answer over the budget: %s, want SD", got)
	}
	if got := actions(r, tcp("192.0.2.1"), big, 3); got != "SSS" {
		t.Errorf("over TCP: %s", got)
	}
	s := r.GetStats(false)
	if s.AllBytesDrops != 50+2+1 || s.RTReasons[RTAllBytesLimit] != s.AllBytesDrops {
		t.Errorf("AllBytesDrops %d (RTAllBytesLimit %d), want 53", s.AllBytesDrops, s.RTReasons[RTAllBytesLimit])
	}
	clock.Advance(time.Second / 10) // 300 bytes earned, the debt of the drops aside
	tu := answer("later.example.")
	tu.Size = 300
	if a, _, _ := r.Debit(udp("192.0.2.1"), tu); a != Drop {
		t.Errorf("a network that went on asking stays in debt, as under all-per-second: %v", a)
	}
}

// TestAllBytesWithTupleLimits: over all-bytes-per-second a response is
// dropped even where its tuple's allowance would slip it, and the tuple is
// still charged, as under all-per-second.
func TestAllBytesWithTupleLimits(t *testing.T) {
	r := newTestRRL(t, newTestClock(), "responses-per-second", "100", "all-bytes-per-second", "1000")
	tu := answer("a.example.")
	tu.Size = 400
	if got := actions(r, udp("192.0.2.1"), tu, 4); got != "SSDD" {
		t.Errorf("got %s, want SSDD", got)
	}
	if s := r.GetStats(false); s.RTReasons[RTAllBytesLimit] != 2 || s.RPS[AllowanceAnswer] != 4 {
		t.Errorf("stats %v", s)
	}
}

// TestNoCookieUDPSize: a UDP response longer than nocookie-udp-size slips
// with RTTooLarge; shorter ones and TCP go; the keyword acts alone.
func TestNoCookieUDPSize(t *testing.T) {
	c := testConfig(t, newTestClock(), "nocookie-udp-size", "512")
	if !c.IsActive() || c.NoCookieUDPSize() != 512 {
		t.Fatalf("nocookie-udp-size alone: active %v, size %d", c.IsActive(), c.NoCookieUDPSize())
	}
	r := NewRRL(c)
	if r.NoCookieUDPSize() != 512 || !r.NeedsResponseSize() {
		t.Errorf("RRL.NoCookieUDPSize %d, NeedsResponseSize %v", r.NoCookieUDPSize(), r.NeedsResponseSize())
	}
	if newTestRRL(t, nil, "responses-per-second", "5").NeedsResponseSize() || !newTestRRL(t, nil, "all-bytes-per-second", "600").NeedsResponseSize() {
		t.Error("NeedsResponseSize follows nocookie-udp-size and all-bytes-per-second alone")
	}
	for _, tc := range []struct {
		src  net.Addr
		size int
		act  Action
		rtr  RTReason
	}{
		{udp("192.0.2.1"), 1000, Slip, RTTooLarge},
		{udp("192.0.2.1"), 513, Slip, RTTooLarge},
		{udp("192.0.2.1"), 512, Send, RTNotConfigured},
		{udp("192.0.2.1"), 0, Send, RTNotConfigured},
		{tcp("192.0.2.1"), 1000, Send, RTNotUDP},
	} {
		tu := answer("txt.example.")
		tu.Size = tc.size
		if a, _, rtr := r.Debit(tc.src, tu); a != tc.act || rtr != tc.rtr {
			t.Errorf("%s, %d bytes: %v %v, want %v %v", tc.src.Network(), tc.size, a, rtr, tc.act, tc.rtr)
		}
		if a, _, rtr := r.DebitResponse(tc.src, tu); a != tc.act || rtr != tc.rtr {
			t.Errorf("DebitResponse %s, %d bytes: %v %v, want %v %v", tc.src.Network(), tc.size, a, rtr, tc.act, tc.rtr)
		}
	}
	if s := r.GetStats(false); s.TooLarge != 4 || s.RTReasons[RTTooLarge] != 4 {
		t.Errorf("TooLarge %d, want 4", s.TooLarge)
	}
	// With a response limit, a limited response keeps its verdict; one
	// sent that is too long slips.
	l := newTestRRL(t, newTestClock(), "responses-per-second", "1", "slip-ratio", "2", "nocookie-udp-size", "512")
	tu := answer("txt.example.")
	tu.Size = 1000
	var got []string
	for range 3 {
		a, _, rtr := l.Debit(udp("192.0.2.1"), tu)
		got = append(got, a.String()+" "+rtr.String())
	}
	if want := "Slip RTTooLarge, Slip RTRateLimit, Drop RTRateLimit"; strings.Join(got, ", ") != want {
		t.Errorf("got %s, want %s", strings.Join(got, ", "), want)
	}
}

// TestProtectionValues: good values are read back; bad ones are refused
// with the keyword, the value and the range.
func TestProtectionValues(t *testing.T) {
	c := NewConfig()
	for kw, v := range map[string]string{"ipv4-request-prefixes": "32:5,20:400 18:1200.5", "ipv6-request-prefixes": "128:5 64:50 56:0.5 48:800",
		"all-bytes-per-second": "20000", "nocookie-udp-size": "1232"} {
		if err := c.SetValue(kw, v); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.RequestPrefixes(false); fmt.Sprint(got) != "[{32 5} {20 400} {18 1200.5}]" {
		t.Errorf("RequestPrefixes(false) = %v", got)
	}
	if v, _ := c.Value("ipv6-request-prefixes"); v != "128:5 64:50 56:0.5 48:800" {
		t.Errorf("ipv6-request-prefixes reads back %q", v)
	}
	if c.AllBytesPerSecond() != 20000 || c.NoCookieUDPSize() != 1232 {
		t.Errorf("getters %v %v", c.AllBytesPerSecond(), c.NoCookieUDPSize())
	}
	if err := c.SetValue("ipv4-request-prefixes", "24:9"); err != nil || fmt.Sprint(c.RequestPrefixes(false)) != "[{24 9}]" {
		t.Errorf("a second SetValue replaces the list: %v %v", c.RequestPrefixes(false), err)
	}
	if err := c.SetValue("ipv4-request-prefixes", ""); err != nil || c.RequestPrefixes(false) != nil {
		t.Errorf("an empty value clears the list: %v %v", c.RequestPrefixes(false), err)
	}
	if !strings.Contains(c.String(), "ipv6-request-prefixes 128:5 64:50 56:0.5 48:800") || strings.Contains(c.String(), "ipv4-request-prefixes") {
		t.Errorf("String %s", c.String())
	}
	for _, tc := range []struct{ kw, v, want string }{
		{"ipv4-request-prefixes", "33:5", "from 1 to 32"},
		{"ipv4-request-prefixes", "0:5", "from 1 to 32"},
		{"ipv6-request-prefixes", "129:5", "from 1 to 128"},
		{"ipv4-request-prefixes", "24:5 24:6", "given twice"},
		{"ipv4-request-prefixes", "32:1 30:1 28:1 26:1 24:1", "up to 4 pairs"},
		{"ipv4-request-prefixes", "24", "LENGTH:ALLOWANCE"},
		{"ipv4-request-prefixes", "24:", "from 0.01 to 1000000"},
		{"ipv4-request-prefixes", "24:1e3", "from 0.01 to 1000000"},
		{"ipv4-request-prefixes", "24:-1", "from 0.01 to 1000000"},
		{"ipv4-request-prefixes", "24:0.001", "from 0.01 to 1000000"},
		{"ipv4-request-prefixes", "+24:1", "from 1 to 32"},
		{"ipv4-request-prefixes", "24:1:2", "from 0.01 to 1000000"},
		{"all-bytes-per-second", "511", "from 512 to 1000000000"},
		{"all-bytes-per-second", "1000000001", "from 512 to 1000000000"},
		{"all-bytes-per-second", "NaN", "from 512 to 1000000000"},
		{"nocookie-udp-size", "127", "from 128 to 65535"},
		{"nocookie-udp-size", "65536", "from 128 to 65535"},
		{"nocookie-udp-size", "512.5", "from 128 to 65535"},
	} {
		d := NewConfig()
		before := d.String()
		err := d.SetValue(tc.kw, tc.v)
		if err == nil || !strings.Contains(err.Error(), tc.kw) || !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.v)) ||
			!strings.Contains(err.Error(), tc.want) {
			t.Errorf("SetValue(%q, %q) = %v, want an error naming both and %q", tc.kw, tc.v, err, tc.want)
		}
		if d.String() != before || d.IsSet(tc.kw) {
			t.Errorf("a refused %s changed the Config", tc.kw)
		}
	}
	for _, v := range []string{"0", "512", "1000000000", "0.5"} {
		err := NewConfig().SetValue("all-bytes-per-second", v)
		if (err == nil) != (v != "0.5") {
			t.Errorf("all-bytes-per-second %s: %v", v, err)
		}
	}
	if NewConfig().SetValue("nocookie-udp-size", "0") != nil || NewConfig().SetValue("nocookie-udp-size", "128") != nil {
		t.Error("nocookie-udp-size 0 or 128 refused")
	}
}

// TestUnsanitizedProtection: a Config with values out of range, not made
// through SetValue, gives an RRL with those protections off.
func TestUnsanitizedProtection(t *testing.T) {
	c := &Config{noCookieUDPSize: 5, prefixCount: [2]int{9, -1}}
	c.rates[LimitAllBytes] = 3
	c.prefixes[0][0] = RequestPrefix{Bits: 40, Rate: 1}
	r := NewRRL(c)
	if r.checked || r.NoCookieUDPSize() != 0 {
		t.Errorf("protections out of range are on")
	}
}

// BenchmarkRequestLevels is a request debit (DebitRequestAddr, unproven)
// with requests-per-second alone, and with one or four request prefixes
// too, from 4,096 sources spread over 256 /18s, every request served.
func BenchmarkRequestLevels(b *testing.B) {
	for _, c := range []struct{ name, levels string }{
		{"none", ""},
		{"1level", "24:1000000"},
		{"4levels", "32:1000000 24:1000000 20:1000000 18:1000000"},
	} {
		name, levels := c.name, c.levels
		b.Run(name, func(b *testing.B) {
			r := newTestRRL(b, nil, "requests-per-second", "1000000", "ipv4-request-prefixes", levels)
			var srcs [benchSources]netip.Addr
			for i := range srcs {
				srcs[i] = netip.AddrFrom4([4]byte{10, byte(i), byte(i >> 8), byte(i * 7)})
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if a, _ := r.DebitRequestAddr(srcs[i%len(srcs)], true, false); a != Send {
					b.Fatal("refused")
				}
			}
		})
	}
}

const benchSources = 4096

// TestStripeIsWholeLines: a stripe, grown by the counters of the
// protections, still fills a whole number of cache lines.
func TestStripeIsWholeLines(t *testing.T) {
	if n := unsafe.Sizeof(stripe{}); n%64 != 0 {
		t.Errorf("a stripe is %d bytes, not a whole number of 64-byte lines", n)
	}
}

// TestLimitedRecordsPrefixRefusals: the record of limited accounts lists a
// request prefix under its own prefix, with every refusal counted, the
// network's request account too.
func TestLimitedRecordsPrefixRefusals(t *testing.T) {
	clock := newTestClock()
	r := recordingRRL(t, clock, "requests-per-second", "3", "ipv4-request-prefixes", "32:2")
	if got := requests(r, udp("192.0.2.9"), false, 10); got != "SSDDDDDDDD" {
		t.Fatalf("host: %s", got)
	}
	if got := requests(r, udp("192.0.2.10"), false, 5); got != "SDDDD" {
		t.Fatalf("neighbour: %s", got)
	}
	var host, network LimitedAccount
	for _, a := range r.Limited(10, ByRefused) {
		switch a.LimitKind {
		case LimitIPv4RequestPrefixes:
			host = a
		case LimitRequests:
			network = a
		}
	}
	if host.Network != netip.MustParsePrefix("192.0.2.9/32") || host.Refused != 8 {
		t.Errorf("the /32: %+v, want 192.0.2.9/32 refused 8 times", host)
	}
	if network.Network != netip.MustParsePrefix("192.0.2.0/24") || network.Refused != 4 {
		t.Errorf("the network: %+v, want 192.0.2.0/24 refused 4 times", network)
	}
}

// TestLevelMasksAreMasked: the masks and key word a level has ready give
// every length of either family the key of the address masked to it.
func TestLevelMasksAreMasked(t *testing.T) {
	var k hashKey
	for i := range k {
		k[i] = uint64(i+1) * 0x9e3779b97f4a7c15
	}
	for _, s := range []string{"203.0.113.255", "255.255.255.255", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"} {
		whole := wholeNetwork(netip.MustParseAddr(s))
		fam, kind, most := 0, LimitIPv4RequestPrefixes, 32
		if !whole.v4 {
			fam, kind, most = 1, LimitIPv6RequestPrefixes, 128
		}
		for bits := 1; bits <= most; bits++ {
			le := levelOf(fam, uint8(bits), 0, 1e9)
			got := k.prefixOf(whole.hi&le.hiMask, whole.lo&le.loMask, le.meta)
			m := whole.masked(uint8(bits))
			if want := k.prefixOf(m.hi, m.lo, prefixMeta(kind, m.bits)); got != want {
				t.Errorf("%s/%d: key %#x, want %#x", s, bits, got, want)
			}
		}
	}
}

// TestPairOffKeepsItsPlace: a pair with allowance 0 is off, and the drops
// of the pairs after it are counted in their own places of
// RequestPrefixDrops, as configured, not in the order of the pairs on.
func TestPairOffKeepsItsPlace(t *testing.T) {
	r := newTestRRL(t, newTestClock(), "ipv4-request-prefixes", "16:0 24:1")
	checkBursts(t, r, burst{"the /24 allows one", udp("192.0.2.1"), false, "SDD"})
	if want := [MaxRequestPrefixes]int64{0, 2}; r.GetStats(false).RequestPrefixDrops[0] != want {
		t.Errorf("IPv4 drops by pair %v, want %v", r.GetStats(false).RequestPrefixDrops[0], want)
	}
}

// TestAllBytesOrder: a response over both all-per-second and
// all-bytes-per-second is dropped for all-per-second, checked first; and a
// response that goes truncated for nocookie-udp-size is charged to
// all-bytes-per-second the bytes that go out in its place, not its own.
func TestAllBytesOrder(t *testing.T) {
	for _, c := range []struct {
		name     string
		settings []string
		size     int
		want     []RTReason
	}{
		{"all-per-second first", []string{"all-per-second", "1", "all-bytes-per-second", "512"}, 512,
			[]RTReason{RTOk, RTAllLimit, RTAllLimit}},
		{"truncated, charged 512 bytes", []string{"nocookie-udp-size", "512", "all-bytes-per-second", "1024"}, 1000,
			[]RTReason{RTTooLarge, RTTooLarge, RTAllBytesLimit}},
	} {
		r := newTestRRL(t, newTestClock(), append([]string{"responses-per-second", "100"}, c.settings...)...)
		tu := answer("a.example.")
		tu.Size = c.size
		for i, want := range c.want {
			if _, _, rtr := r.Debit(udp("192.0.2.1"), tu); rtr != want {
				t.Errorf("%s: response %d of %d bytes: %v, want %v", c.name, i, c.size, rtr, want)
			}
		}
	}
}

// TestDebitRequestLimit: DebitRequestLimit names the account that refused
// a request: the request prefix, by its place in its family's list, the
// network's requests-per-second account, or proven-requests-per-second's
// for a proven request; a request served names none.
func TestDebitRequestLimit(t *testing.T) {
	for _, c := range []struct {
		name     string
		kv       []string
		src      string
		udp      bool
		cookie   bool
		refusals string // the actions of successive requests
		want     RequestRefusal
	}{
		{"an IPv4 prefix, the second pair", []string{"requests-per-second", "5", "ipv4-request-prefixes", "32:100 24:2 16:100"},
			"192.0.2.1", true, false, "SSD", RequestRefusal{LimitIPv4RequestPrefixes, 1}},
		{"an IPv6 prefix, the third pair", []string{"requests-per-second", "5", "ipv6-request-prefixes", "128:100 64:100 48:3"},
			"2001:db8::1", true, false, "SSSD", RequestRefusal{LimitIPv6RequestPrefixes, 2}},
		{"requests-per-second before the prefixes", []string{"requests-per-second", "2", "ipv4-request-prefixes", "32:100"},
			"192.0.2.1", true, false, "SSD", RequestRefusal{LimitRequests, 0}},
		{"requests-per-second without prefixes, over TCP", []string{"requests-per-second", "2"},
			"192.0.2.1", false, false, "SSD", RequestRefusal{LimitRequests, 0}},
		{"proven-requests-per-second, never a prefix", []string{"requests-per-second", "100", "proven-requests-per-second", "2", "ipv4-request-prefixes", "32:1"},
			"192.0.2.1", true, true, "SSD", RequestRefusal{LimitProvenRequests, 0}},
	} {
		r := newTestRRL(t, newTestClock(), c.kv...)
		src := netip.MustParseAddr(c.src)
		for i, want := range c.refusals {
			act, ipr, why := r.DebitRequestLimit(src, c.udp, c.cookie)
			wantWhy, wantIPR := RequestRefusal{}, IPOk
			if want == 'D' {
				wantWhy, wantIPR = c.want, IPRateLimit
			}
			if act.String()[0] != byte(want) || ipr != wantIPR || why != wantWhy {
				t.Errorf("%s: request %d: %v %v %+v, want %c %v %+v", c.name, i+1, act, ipr, why, want, wantIPR, wantWhy)
			}
		}
	}
	var r *RRL
	if act, ipr, why := r.DebitRequestLimit(netip.MustParseAddr("192.0.2.1"), true, false); act != Send || ipr != IPNotConfigured || why != (RequestRefusal{}) {
		t.Errorf("nil RRL: %v %v %+v", act, ipr, why)
	}
}
