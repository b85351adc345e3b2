package miekgrrl

import (
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func secretFromHex(t testing.TB, s string) [16]byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 16 {
		t.Fatalf("bad secret %q", s)
	}
	var k [16]byte
	copy(k[:], b)
	return k
}

// cookieQuery returns a query for name carrying the hex cookie (client
// cookie, optionally followed by a server cookie).
func cookieQuery(name, cookie string) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	m.SetEdns0(4096, false)
	if cookie != "" {
		opt := m.IsEdns0()
		opt.Option = append(opt.Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: cookie})
	}
	return m
}

// respCookie returns the hex text of the first COOKIE option of m, or "".
func respCookie(m *dns.Msg) string {
	if o, n := cookieOptions(m); n > 0 {
		return o.Cookie
	}
	return ""
}

// testClientCookie is the client cookie the tests send.
const testClientCookie = "0102030405060708"

// issuedCookie returns the whole cookie, client and server part, that a
// client sends back after c gave it a server cookie at issued.
func issuedCookie(c *Cookies, client netip.Addr, issued time.Time) string {
	m := new(dns.Msg)
	c.AddServerCookie(cookieQuery("a.", testClientCookie), m, client, issued)
	return respCookie(m)
}

// The test vectors of RFC 9018 appendix A. Each is checked both ways: the
// server cookie this package makes for the reply is the RFC's, byte for byte,
// and the cookie the client sends in the query is classified as the RFC says.
func TestRFC9018Vectors(t *testing.T) {
	for _, tc := range []struct {
		name           string
		secret         string // the secret that made the query's server cookie
		newSecret      string // if set, the server's current secret (rollover)
		client         string
		query          string // cookie sent by the client
		queryStamp     int64  // timestamp of the query's server cookie
		replyAt        int64  // time the reply is made
		reply          string // cookie the server returns
		stateAtReplyAt CookieState
	}{
		{
			name:           "A.1 learning a new server cookie",
			secret:         "e5e973e5a6b2a43f48e7dc849e37bfcf",
			client:         "198.51.100.100",
			query:          "2464c4abcf10c957",
			replyAt:        1559731985,
			reply:          "2464c4abcf10c957010000005cf79f111f8130c3eee29480",
			stateAtReplyAt: CookieClientOnly,
		},
		{
			name:           "A.2 the same client learning a renewed server cookie",
			secret:         "e5e973e5a6b2a43f48e7dc849e37bfcf",
			client:         "198.51.100.100",
			query:          "2464c4abcf10c957010000005cf79f111f8130c3eee29480",
			queryStamp:     1559731985,
			replyAt:        1559734385,
			reply:          "2464c4abcf10c957010000005cf7a871d4a564a1442aca77",
			stateAtReplyAt: CookieValid,
		},
		{
			// The query's cookie has reserved bytes set and is 1h52m old
			// when the reply is made: past MaxCookieAge, so Bad then, though
			// it validates at the time it was made.
			name:           "A.3 another client learning a renewed server cookie",
			secret:         "e5e973e5a6b2a43f48e7dc849e37bfcf",
			client:         "203.0.113.203",
			query:          "fc93fc62807ddb8601abcdef5cf78f71a314227b6679ebf5",
			queryStamp:     1559727985,
			replyAt:        1559734700,
			reply:          "fc93fc62807ddb86010000005cf7a9acf73a7810aca2381e",
			stateAtReplyAt: CookieBad,
		},
		{
			name:           "A.4 IPv6 query with rolled over secret",
			secret:         "dd3bdf9344b678b185a6f5cb60fca715",
			newSecret:      "445536bcd2513298075a5d379663c962",
			client:         "2001:db8:220:1:59de:d0f4:8769:82b8",
			query:          "22681ab97d52c298010000005cf7c57926556bd0934c72f8",
			queryStamp:     1559741817,
			replyAt:        1559741961,
			reply:          "22681ab97d52c298010000005cf7c609a6bb79d16625507a",
			stateAtReplyAt: CookieValid,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := netip.MustParseAddr(tc.client)
			c := NewCookies(secretFromHex(t, tc.secret))
			if tc.newSecret != "" {
				c = NewCookies(secretFromHex(t, tc.newSecret))
				c.SetPrevious(secretFromHex(t, tc.secret))
			}
			req := cookieQuery("example.com.", tc.query)
			at := time.Unix(tc.replyAt, 0)

			if got := c.Check(req, client, at); got != tc.stateAtReplyAt {
				t.Errorf("Check at reply time = %v, want %v", got, tc.stateAtReplyAt)
			}
			if tc.queryStamp != 0 {
				if got := c.Check(req, client, time.Unix(tc.queryStamp, 0)); got != CookieValid {
					t.Errorf("Check at the cookie's own timestamp = %v, want CookieValid", got)
				}
			}

			resp := new(dns.Msg).SetReply(req)
			c.AddServerCookie(req, resp, client, at)
			if got := respCookie(resp); got != tc.reply {
				t.Errorf("reply cookie\n got %s\nwant %s", got, tc.reply)
			}
		})
	}
}

// A4: once the previous secret is forgotten, the old cookie no longer
// validates; without SetPrevious it never did.
func TestCookieRollover(t *testing.T) {
	old := secretFromHex(t, "dd3bdf9344b678b185a6f5cb60fca715")
	cur := secretFromHex(t, "445536bcd2513298075a5d379663c962")
	client := netip.MustParseAddr("2001:db8:220:1:59de:d0f4:8769:82b8")
	req := cookieQuery("example.net.", "22681ab97d52c298010000005cf7c57926556bd0934c72f8")
	at := time.Unix(1559741961, 0)

	c := NewCookies(cur)
	if got := c.Check(req, client, at); got != CookieBad {
		t.Errorf("without previous secret: %v, want CookieBad", got)
	}
	c.SetPrevious(old)
	if got := c.Check(req, client, at); got != CookieValid {
		t.Errorf("with previous secret: %v, want CookieValid", got)
	}
	c.ForgetPrevious()
	if got := c.Check(req, client, at); got != CookieBad {
		t.Errorf("after ForgetPrevious: %v, want CookieBad", got)
	}

	// Rotate: cookies of the old current secret keep validating, new ones
	// are made with the new secret.
	c = NewCookies(old)
	c.Rotate(cur)
	if got := c.Check(req, client, at); got != CookieValid {
		t.Errorf("after Rotate: %v, want CookieValid", got)
	}
	resp := new(dns.Msg).SetReply(req)
	c.AddServerCookie(req, resp, client, at)
	if got, want := respCookie(resp), "22681ab97d52c298010000005cf7c609a6bb79d16625507a"; got != want {
		t.Errorf("after Rotate, new cookie %s, want %s", got, want)
	}
}

func TestCookieAgeLimits(t *testing.T) {
	c := NewCookies(secretFromHex(t, "e5e973e5a6b2a43f48e7dc849e37bfcf"))
	client := netip.MustParseAddr("192.0.2.1")
	issued := time.Unix(1700000000, 0)
	cookie := issuedCookie(c, client, issued)
	req := cookieQuery("a.", cookie)

	for _, tc := range []struct {
		at   time.Duration // relative to issued
		want CookieState
	}{
		{0, CookieValid},
		{MaxCookieAge, CookieValid},
		{MaxCookieAge + time.Second, CookieBad},
		{-MaxCookieFuture, CookieValid},
		{-MaxCookieFuture - time.Second, CookieBad},
		{-24 * time.Hour, CookieBad},
		{100 * 24 * time.Hour, CookieBad},
	} {
		if got := c.Check(req, client, issued.Add(tc.at)); got != tc.want {
			t.Errorf("at issued%+v: %v, want %v", tc.at, got, tc.want)
		}
	}
	// Another address, another client cookie, another secret: all Bad.
	if got := c.Check(req, netip.MustParseAddr("192.0.2.2"), issued); got != CookieBad {
		t.Errorf("other client address: %v", got)
	}
	other := cookieQuery("a.", "ff"+cookie[2:])
	if got := c.Check(other, client, issued); got != CookieBad {
		t.Errorf("other client cookie: %v", got)
	}
	if got := NewCookies([16]byte{1}).Check(req, client, issued); got != CookieBad {
		t.Errorf("other secret: %v", got)
	}
	// An IPv4-mapped client is the IPv4 client.
	if got := c.Check(req, netip.MustParseAddr("::ffff:192.0.2.1"), issued); got != CookieValid {
		t.Errorf("IPv4-mapped client: %v", got)
	}
}

// Timestamps are compared in serial number arithmetic, so cookies keep
// working across the 2106 wrap of the 32-bit timestamp.
func TestCookieTimestampWraps(t *testing.T) {
	c := NewCookies([16]byte{7})
	client := netip.MustParseAddr("192.0.2.1")
	issued := time.Unix(1<<32-60, 0)
	req := cookieQuery("a.", issuedCookie(c, client, issued))
	if got := c.Check(req, client, issued.Add(2*time.Minute)); got != CookieValid {
		t.Errorf("across the wrap: %v, want CookieValid", got)
	}
}

func TestCookieCheckMalformed(t *testing.T) {
	c := NewCookies([16]byte{1})
	client := netip.MustParseAddr("192.0.2.1")
	now := time.Unix(1700000000, 0)
	good := issuedCookie(c, client, now)

	noOPT := new(dns.Msg).SetQuestion("a.", dns.TypeA)
	optNoCookie := new(dns.Msg).SetQuestion("a.", dns.TypeA).SetEdns0(1232, false)
	for _, tc := range []struct {
		name string
		req  *dns.Msg
		want CookieState
	}{
		{"nil message", nil, CookieNone},
		{"no OPT", noOPT, CookieNone},
		{"OPT without cookie", optNoCookie, CookieNone},
	} {
		if got := c.Check(tc.req, client, now); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	for _, tc := range []struct {
		cookie string
		want   CookieState
	}{
		{"", CookieBad},
		{"01", CookieBad},
		{"01020304050607", CookieBad},                              // 7 bytes
		{"0102030405060708", CookieClientOnly},                     // 8 bytes
		{"010203040506070809", CookieBad},                          // 9 bytes
		{"0102030405060708" + strings.Repeat("00", 7), CookieBad},  // 15 bytes
		{"0102030405060708" + strings.Repeat("00", 8), CookieBad},  // 16 bytes: foreign server cookie
		{"0102030405060708" + strings.Repeat("00", 32), CookieBad}, // 40 bytes
		{"0102030405060708" + strings.Repeat("00", 33), CookieBad}, // 41 bytes
		{"010203040506070", CookieBad},                             // odd hex
		{"01020304050607zz", CookieBad},                            // not hex
		{good, CookieValid},
		{strings.ToUpper(good), CookieValid},
		{good[:16] + "02" + good[18:], CookieBad},       // version 2
		{good[:len(good)-2] + "00", CookieBad},          // hash altered
		{good[:18] + "ffffff" + good[24:], CookieBad},   // reserved bytes altered
		{good[:24] + "00000000" + good[32:], CookieBad}, // timestamp altered
	} {
		req := cookieQuery("a.", "")
		req.IsEdns0().Option = append(req.IsEdns0().Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: tc.cookie})
		if got := c.Check(req, client, now); got != tc.want {
			t.Errorf("cookie %q: %v, want %v", tc.cookie, got, tc.want)
		}
	}
	// A nil *Cookies still classifies, but never validates.
	var nilC *Cookies
	if got := nilC.Check(cookieQuery("a.", good), client, now); got != CookieBad {
		t.Errorf("nil Cookies, valid cookie: %v, want CookieBad", got)
	}
	if got := c.Check(cookieQuery("a.", good), netip.Addr{}, now); got != CookieBad {
		t.Errorf("no client address: %v, want CookieBad", got)
	}
}

func TestAddServerCookie(t *testing.T) {
	c := NewCookies([16]byte{1})
	client := netip.MustParseAddr("192.0.2.1")
	now := time.Unix(1700000000, 0)

	t.Run("no OPT in response", func(t *testing.T) {
		req := cookieQuery("a.", "0102030405060708")
		resp := new(dns.Msg).SetReply(req)
		c.AddServerCookie(req, resp, client, now)
		opt := resp.IsEdns0()
		if opt == nil || opt.UDPSize() != defaultUDPSize {
			t.Fatalf("OPT = %v", opt)
		}
		if got := c.Check(cookieQuery("a.", respCookie(resp)), client, now); got != CookieValid {
			t.Errorf("the cookie added does not validate: %v", got)
		}
	})
	t.Run("always a fresh cookie, even for a young one", func(t *testing.T) {
		young := cookieQuery("a.", "0102030405060708")
		resp := new(dns.Msg).SetReply(young)
		c.AddServerCookie(young, resp, client, now.Add(-time.Minute))
		sent := respCookie(resp) // a valid server cookie, a minute old
		req := cookieQuery("a.", sent)
		resp = new(dns.Msg).SetReply(req)
		c.AddServerCookie(req, resp, client, now)
		if got := respCookie(resp); got == sent {
			t.Errorf("the young cookie %s came back as it was, want a fresh one", sent)
		}
	})
	t.Run("replaces the handler's cookie", func(t *testing.T) {
		req := cookieQuery("a.", "0102030405060708")
		resp := new(dns.Msg).SetReply(req)
		resp.SetEdns0(4096, true)
		resp.IsEdns0().Option = append(resp.IsEdns0().Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "aaaaaaaaaaaaaaaa"})
		c.AddServerCookie(req, resp, client, now)
		opt := resp.IsEdns0()
		if len(opt.Option) != 1 || opt.UDPSize() != 4096 || !opt.Do() {
			t.Fatalf("OPT = %v", opt)
		}
		if got := respCookie(resp); !strings.HasPrefix(got, "0102030405060708") || len(got) != 48 {
			t.Errorf("cookie = %s", got)
		}
	})
	t.Run("OPT shared with the request", func(t *testing.T) {
		req := cookieQuery("a.", "0102030405060708")
		resp := new(dns.Msg).SetReply(req)
		resp.Extra = append(resp.Extra, req.IsEdns0())
		c.AddServerCookie(req, resp, client, now)
		if got := respCookie(req); got != "0102030405060708" {
			t.Errorf("request's cookie changed to %s", got)
		}
		if got := respCookie(resp); len(got) != 48 {
			t.Errorf("response cookie %s", got)
		}
	})
	t.Run("nothing to echo", func(t *testing.T) {
		for _, req := range []*dns.Msg{nil, new(dns.Msg), cookieQuery("a.", ""), cookieQuery("a.", "0102")} {
			resp := new(dns.Msg)
			c.AddServerCookie(req, resp, client, now)
			if len(resp.Extra) != 0 {
				t.Errorf("request %v: response got %v", req, resp.Extra)
			}
		}
		var nilC *Cookies
		nilC.AddServerCookie(cookieQuery("a.", "0102030405060708"), new(dns.Msg), client, now)
		c.AddServerCookie(cookieQuery("a.", "0102030405060708"), nil, client, now)
	})
}

func TestCookieStateString(t *testing.T) {
	if CookieValid.String() != "CookieValid" || CookieState(9).String() != "CookieState(?)" {
		t.Error(CookieValid.String(), CookieState(9).String())
	}
}

func TestAcceptCookieOnly(t *testing.T) {
	cookieOnly := dns.Header{Qdcount: 0, Arcount: 1}
	if AcceptCookieOnly(cookieOnly) != dns.MsgAccept {
		t.Error("cookie-only query rejected")
	}
	if dns.DefaultMsgAcceptFunc(cookieOnly) == dns.MsgAccept {
		t.Error("the default accepts it too: the test shows nothing")
	}
	if AcceptCookieOnly(dns.Header{Qdcount: 0}) == dns.MsgAccept {
		t.Error("query with neither question nor OPT accepted")
	}
	if AcceptCookieOnly(dns.Header{Qdcount: 1, Arcount: 1}) != dns.MsgAccept {
		t.Error("ordinary query rejected")
	}
	if AcceptCookieOnly(dns.Header{Bits: 1 << 15, Arcount: 1}) == dns.MsgAccept {
		t.Error("response accepted")
	}
}

func BenchmarkCookieCheck(b *testing.B) {
	c := NewCookies([16]byte{1})
	client := netip.MustParseAddr("192.0.2.1")
	now := time.Unix(1700000000, 0)
	req := cookieQuery("a.", issuedCookie(c, client, now))
	b.ReportAllocs()
	for b.Loop() {
		if c.Check(req, client, now) != CookieValid {
			b.Fatal("invalid")
		}
	}
}

// zeroKeyCookie returns the cookie (client and server) that an all-zero
// secret makes for client cookie 0102030405060708, client and now.
func zeroKeyCookie(client netip.Addr, now time.Time) string {
	cc := [clientCookieLen]byte{1, 2, 3, 4, 5, 6, 7, 8}
	var s [serverCookieLen]byte
	s[0] = cookieVersion
	binary.BigEndian.PutUint32(s[4:8], uint32(now.Unix()))
	var h [8]byte
	hashCookie(&h, [2]uint64{}, cc[:], s[:8], client)
	copy(s[8:], h[:])
	return hex.EncodeToString(cc[:]) + hex.EncodeToString(s[:])
}

// An all-zero secret is never used: the zero value and NewCookies with a
// zero secret draw random ones, so a cookie anyone can compute with the
// zero key never validates, and the zero value still works.
func TestCookiesZeroValue(t *testing.T) {
	client := netip.MustParseAddr("192.0.2.1")
	now := time.Unix(1700000000, 0)
	forged := cookieQuery("a.", zeroKeyCookie(client, now))

	var zero Cookies
	rotated := NewCookies([16]byte{1})
	rotated.Rotate([16]byte{})
	previous := NewCookies([16]byte{1})
	previous.SetPrevious([16]byte{})
	for name, c := range map[string]*Cookies{
		"zero value":                &zero,
		"NewCookies(zero secret)":   NewCookies([16]byte{}),
		"Rotate(zero secret)":       rotated,
		"SetPrevious(zero secret)":  previous,
		"zero value after rollover": new(Cookies),
	} {
		if name == "zero value after rollover" {
			c.SetPrevious([16]byte{})
			c.ForgetPrevious()
		}
		if got := c.Check(forged, client, now); got != CookieBad {
			t.Errorf("%s: a cookie made with the zero key is %v", name, got)
		}
		// It still makes cookies it accepts.
		if got := c.Check(cookieQuery("a.", issuedCookie(c, client, now)), client, now); got != CookieValid {
			t.Errorf("%s: its own cookie is %v", name, got)
		}
	}
	// Two zero values have different secrets.
	var other Cookies
	if got := zero.Check(cookieQuery("a.", issuedCookie(&other, client, now)), client, now); got != CookieBad {
		t.Errorf("one zero value accepts another's cookie: %v", got)
	}
}

// The response's cookie never lands in the request, whatever the handler
// shared between the two.
func TestAddServerCookieLeavesRequestAlone(t *testing.T) {
	c := NewCookies([16]byte{1})
	client := netip.MustParseAddr("192.0.2.1")
	now := time.Unix(1700000000, 0)
	nsid := &dns.EDNS0_NSID{Code: dns.EDNS0NSID, Nsid: "6869"}
	for name, share := range map[string]func(req, resp *dns.Msg){
		"same OPT record": func(req, resp *dns.Msg) { resp.Extra = append(resp.Extra, req.IsEdns0()) },
		"same option array": func(req, resp *dns.Msg) {
			resp.SetEdns0(1232, false)
			resp.IsEdns0().Option = req.IsEdns0().Option
		},
	} {
		req := cookieQuery("a.", "0102030405060708")
		req.IsEdns0().Option = append(req.IsEdns0().Option, nsid)
		resp := new(dns.Msg).SetReply(req)
		share(req, resp)
		c.AddServerCookie(req, resp, client, now)
		if got := respCookie(req); got != "0102030405060708" || len(req.IsEdns0().Option) != 2 {
			t.Errorf("%s: request's options now %v", name, req.IsEdns0().Option)
		}
		opt := resp.IsEdns0()
		if len(respCookie(resp)) != 48 || len(opt.Option) != 2 || opt.Option[0] != nsid {
			t.Errorf("%s: response's options %v", name, opt.Option)
		}
	}
}

// Rollover while serving, for the race detector: checks during rollovers
// neither race nor panic, and the secrets end as the last calls left them.
func TestCookieRolloverConcurrent(t *testing.T) {
	c := NewCookies([16]byte{1})
	client := netip.MustParseAddr("192.0.2.1")
	now := time.Unix(1700000000, 0)
	req := cookieQuery("a.", issuedCookie(c, client, now))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			c.Rotate([16]byte{byte(i + 2)})
			c.SetPrevious([16]byte{1}) // the cookie's secret stays valid throughout
		}
	}()
	for range 2000 {
		if st := c.Check(req, client, now); st != CookieValid && st != CookieBad {
			t.Fatalf("state %v", st)
		}
	}
	<-done
	if st := c.Check(req, client, now); st != CookieValid {
		t.Errorf("after the rollovers: %v", st)
	}
}

func TestServerCookieClientCookieLength(t *testing.T) {
	c := NewCookies([16]byte{1})
	client := netip.MustParseAddr("192.0.2.1")
	now := time.Unix(1700000000, 0)
	want := c.ServerCookie([]byte{1, 2, 3, 4, 5, 6, 7, 8}, client, now)
	if got := c.ServerCookie([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9}, client, now); got != want {
		t.Error("a long client cookie is not cut to 8 bytes")
	}
	if got := c.ServerCookie([]byte{1, 2, 3, 4, 5, 6, 7}, client, now); got != c.ServerCookie([]byte{1, 2, 3, 4, 5, 6, 7, 0}, client, now) {
		t.Error("a short client cookie is not padded")
	}
}

func TestParseSecret(t *testing.T) {
	s, err := ParseSecret("000102030405060708090a0B0c0d0e0f")
	if err != nil || s != [16]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15} {
		t.Errorf("ParseSecret: %x, %v", s, err)
	}
	for in, want := range map[string]string{
		"0011":                             "got 4 characters",
		"000102030405060708090a0b0c0d0e0g": "0-9, a-f",
		"00000000000000000000000000000000": "all zeros",
	} {
		if _, err := ParseSecret(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSecret(%q): %v, want an error saying %q", in, err, want)
		}
	}
}

func TestParseSecrets(t *testing.T) {
	const cur, prev = "000102030405060708090a0b0c0d0e0f", "0f0e0d0c0b0a09080706050403020100"
	if s, err := ParseSecrets([]string{cur, prev}); err != nil || len(s) != 2 || s[0][1] != 1 || s[1][0] != 15 {
		t.Errorf("ParseSecrets: %x, %v", s, err)
	}
	for _, vals := range [][]string{nil, {cur, prev, cur}, {cur, cur}, {cur, "00"}} {
		if _, err := ParseSecrets(vals); err == nil {
			t.Errorf("ParseSecrets(%q) accepted", vals)
		}
	}
}
