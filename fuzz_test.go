package rrl

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzSetValue checks that SetValue never panics, that a refusal names the
// keyword and leaves the Config as it was, and that an accepted value reads
// back through Value and gives a Config that an RRL can be made from and
// debited through.
func FuzzSetValue(f *testing.F) {
	for _, k := range Keywords() {
		f.Add(k, "1")
		f.Add(k, "0")
		f.Add(k, "-1")
	}
	f.Add("responses-per-second", "NaN")
	f.Add("exempt-clients", "192.0.2.0/24, 2001:db8::/33")
	f.Add("window", "3600")
	f.Add("ipv4-request-prefixes", "32:5 20:400,18:1200")
	f.Add("ipv6-request-prefixes", "128:5 64:50 56:0.5 48:800")
	f.Add("ipv6-request-prefixes", "")
	f.Add("ipv4-request-prefixes", "24:1 24:2")
	f.Add("all-bytes-per-second", "512")
	f.Add("nocookie-udp-size", "65535")
	f.Add("stream-time-per-second", "100ms")
	f.Add("stream-time-instant", "1m30.5s")
	f.Add("stream-time-per-second", "1.0000000001s")
	f.Fuzz(func(t *testing.T, keyword, value string) {
		c := NewConfig()
		before := c.String()
		if err := c.SetValue(keyword, value); err != nil {
			if !strings.Contains(err.Error(), keyword) && !strings.Contains(err.Error(), strconv.Quote(keyword)) {
				t.Errorf("error %q does not name the keyword %q", err, keyword)
			}
			if c.String() != before {
				t.Errorf("a refused SetValue(%q, %q) changed the Config", keyword, value)
			}
			return
		}
		// Value reads the setting back in a form SetValue takes again.
		v, err := c.Value(keyword)
		if err != nil {
			t.Fatalf("Value(%q) after SetValue(%q, %q): %v", keyword, keyword, value, err)
		}
		d := NewConfig()
		if err := d.SetValue(keyword, v); err != nil {
			t.Fatalf("SetValue(%q, %q) refuses what Value returned: %v", keyword, v, err)
		}
		if again, _ := d.Value(keyword); again != v {
			t.Fatalf("%s: %q read back as %q", keyword, v, again)
		}
		r := NewRRL(c)
		for range 3 {
			if act, _, _ := r.Debit(udp("192.0.2.1"), answer("example.")); act >= ActionLast {
				t.Fatalf("action %v", act)
			}
		}
	})
}

// FuzzDebit drives Debit, DebitRequest, DebitResponse and DebitStreamTime with arbitrary
// sources, transports and tuples on a small table with every limit on; they
// must never panic, must return a valid verdict, and must never slip an
// error nor send a UDP response longer than nocookie-udp-size to a client
// that is not exempt; DebitResponse never applies the request limit. The
// tuple's Size is its class, so that sizes range over 0 to 65535.
func FuzzDebit(f *testing.F) {
	f.Add([]byte{192, 0, 2, 1}, true, uint16(1), uint16(1), uint8(0), "www.example.")
	f.Add([]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, false, uint16(3), uint16(28), uint8(3), "EXAMPLE")
	f.Add([]byte{}, true, uint16(0), uint16(0), uint8(200), "")
	f.Add([]byte{1, 2, 3}, true, uint16(1), uint16(255), uint8(4), strings.Repeat("a.", 600))
	c := NewConfig()
	for k, v := range map[string]string{
		"responses-per-second": "3", "errors-per-second": "1", "all-per-second": "20", "requests-per-second": "30",
		"proven-requests-per-second": "10",
		"qps-scale":                  "50", "max-table-size": "64", "slip-ratio": "1", "exempt-clients": "198.51.100.0/24",
		"ipv4-request-prefixes": "32:5 24:20 16:25", "ipv6-request-prefixes": "128:5 64:20 48:25 32:30",
		"all-bytes-per-second": "5000", "nocookie-udp-size": "512",
		"stream-time-per-second": "10ms", "stream-time-instant": "20ms",
	} {
		if err := c.SetValue(k, v); err != nil {
			f.Fatal(err)
		}
	}
	c.SetNowFunc(newTestClock().Now)
	r := NewRRL(c)
	r.Top(1) // armed, so that every charge goes through the watch too
	// plain has response limits only, so that Debit takes its short path
	// for a *net.UDPAddr, reading the network from the IP's bytes.
	plain := newTestRRL(f, newTestClock(), "responses-per-second", "3", "max-table-size", "64")
	f.Fuzz(func(t *testing.T, ip []byte, isUDP bool, class, qtype uint16, cat uint8, name string) {
		tuple := &ResponseTuple{Class: class, Type: qtype, AllowanceCategory: AllowanceCategory(cat), SalientName: name, Size: int(class)}
		addr, _ := netip.AddrFromSlice(ip)
		if got, want := plain.nets.networkOfIP(ip), plain.nets.networkOf(addr); got != want {
			t.Fatalf("IP % x: network %s from its bytes, %s through netip", ip, got.prefix(), want.prefix())
		}
		if act, _, rtr := plain.Debit(&net.UDPAddr{IP: ip}, tuple); act >= ActionLast || rtr >= RTLast {
			t.Fatalf("verdict out of range: %d %d", act, rtr)
		}
		var src net.Addr = &net.TCPAddr{IP: ip}
		if isUDP {
			src = &net.UDPAddr{IP: ip}
		}
		for range 4 {
			act, ipr, rtr := r.Debit(src, tuple)
			if act < 0 || act >= ActionLast || ipr < 0 || ipr >= IPLast || rtr < 0 || rtr >= RTLast {
				t.Fatalf("verdict out of range: %d %d %d", act, ipr, rtr)
			}
			if act == Slip && (cat >= uint8(AllowanceError)) && rtr != RTTooLarge {
				t.Fatalf("an error response slipped")
			}
			if act == Send && (isUDP || !addr.IsValid()) && tuple.Size > 512 && ipr != IPExempt {
				t.Fatalf("a UDP response of %d bytes was sent (%v %v)", tuple.Size, ipr, rtr)
			}
			// Over TCP only the request limit applies, unless the address
			// is unusable: then the source is taken as UDP, to be limited.
			if addr.IsValid() && act != Send && !isUDP && ipr != IPRateLimit {
				t.Fatalf("a TCP response was limited by %v %v", ipr, rtr)
			}
		}
		r.DebitAddr(addr, isUDP, tuple)
		// Any duration, however long or negative, charged after the work.
		r.DebitStreamTime(addr, time.Duration(int64(class)<<48|int64(qtype)<<16)*time.Duration(1-2*int64(cat%2)))
		// The two-call form: a request (with or without a valid cookie),
		// then its response.
		if act, ipr := r.DebitRequest(src, cat%2 == 0); act != Send && act != Drop || ipr < 0 || ipr >= IPLast {
			t.Fatalf("request verdict out of range: %d %d", act, ipr)
		}
		if act, ipr, rtr := r.DebitResponseAddr(addr, isUDP, tuple); act >= ActionLast || ipr == IPRateLimit || rtr >= RTLast {
			t.Fatalf("response verdict: %d %d %d", act, ipr, rtr)
		}
		if top, _ := r.Top(5); len(top) > 5 {
			t.Fatalf("Top(5) gave %d accounts", len(top))
		}
		st := r.GetStats(false)
		if n := st.CacheLength; n > 64 {
			t.Fatalf("table holds %d accounts", n)
		}
		var prefixDrops int64
		for _, f := range st.RequestPrefixDrops {
			for _, n := range f {
				prefixDrops += n
			}
		}
		if prefixDrops+st.StreamTimeDrops > st.IPReasons[IPRateLimit] || st.TooLarge != st.RTReasons[RTTooLarge] || st.AllBytesDrops != st.RTReasons[RTAllBytesLimit] {
			t.Fatalf("protection counts disagree: %v", st)
		}
	})
}
