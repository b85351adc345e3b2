package miekgrrl

import (
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestFindOPT(t *testing.T) {
	var typedNil *dns.OPT
	opt := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	last := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	a := &dns.A{Hdr: dns.RR_Header{Name: "a.", Rrtype: dns.TypeA}}
	for _, tc := range []struct {
		name string
		m    *dns.Msg
		want *dns.OPT
	}{
		{"nil message", nil, nil},
		{"no additional records", new(dns.Msg), nil},
		{"nil record", &dns.Msg{Extra: []dns.RR{nil}}, nil},
		{"typed nil OPT", &dns.Msg{Extra: []dns.RR{typedNil}}, nil},
		{"after other records", &dns.Msg{Extra: []dns.RR{a, opt, nil}}, opt},
		{"the last of two, as IsEdns0", &dns.Msg{Extra: []dns.RR{opt, last}}, last},
	} {
		if got := findOPT(tc.m); got != tc.want {
			t.Errorf("%s: findOPT = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestUDPSize(t *testing.T) {
	for _, tc := range []struct {
		edns uint16 // 0: no OPT record
		want int
	}{{0, 512}, {100, 512}, {512, 512}, {1232, 1232}, {4096, 4096}} {
		m := query("a.")
		if tc.edns != 0 {
			m.SetEdns0(tc.edns, false)
		}
		if got := udpSize(m); got != tc.want {
			t.Errorf("EDNS size %d: udpSize = %d, want %d", tc.edns, got, tc.want)
		}
	}
	if got := udpSize(nil); got != 512 {
		t.Errorf("udpSize(nil) = %d", got)
	}
}

func TestNewOPT(t *testing.T) {
	do := query("a.").SetEdns0(4096, true).IsEdns0()
	plain := query("a.").SetEdns0(4096, false).IsEdns0()
	for _, tc := range []struct {
		name   string
		reqOPT *dns.OPT
		wantDo bool
	}{{"no OPT in the request", nil, false}, {"DO set", do, true}, {"DO clear", plain, false}} {
		opt := newOPT(tc.reqOPT)
		if opt.UDPSize() != defaultUDPSize || opt.Do() != tc.wantDo || len(opt.Option) != 0 || opt.Hdr.Name != "." {
			t.Errorf("%s: newOPT = %v", tc.name, &opt)
		}
	}
}

func TestWithCookie(t *testing.T) {
	nsid := &dns.EDNS0_NSID{Code: dns.EDNS0NSID}
	pad := &dns.EDNS0_PADDING{}
	old := &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"}
	c := &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "1112131415161718"}

	options := []dns.EDNS0{old, nsid, old, pad}
	var spare [2]dns.EDNS0
	got := withCookie(options, c, spare[:0])
	if len(got) != 3 || got[0] != nsid || got[1] != pad || got[2] != c {
		t.Fatalf("withCookie = %v, want NSID, padding, the new cookie", got)
	}
	if options[0] != old || options[2] != old {
		t.Errorf("the input array was written: %v", options)
	}
	if &got[0] == &spare[0] {
		t.Error("three options written into a spare array of two")
	}
	got = withCookie([]dns.EDNS0{old}, c, spare[:0])
	if len(got) != 1 || got[0] != c || &got[0] != &spare[0] {
		t.Errorf("one option: %v, not in the spare array", got)
	}
}

// attach copies what it changes: the handler's message, its additional
// section and its OPT record stay as they were.
func TestAttach(t *testing.T) {
	c := &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "1112131415161718"}
	a := &dns.A{Hdr: dns.RR_Header{Name: "a.", Rrtype: dns.TypeA, Class: dns.ClassINET}}
	tsig := &dns.TSIG{Hdr: dns.RR_Header{Name: "key.", Rrtype: dns.TypeTSIG, Class: dns.ClassANY}, Algorithm: dns.HmacSHA256}

	t.Run("new OPT before TSIG", func(t *testing.T) {
		req := query("a.").SetEdns0(4096, true)
		m := new(dns.Msg).SetReply(req)
		m.Extra = []dns.RR{a, tsig}
		extra := m.Extra
		out := new(cookieReply).attach(req, m, c)
		if len(out.Extra) != 3 || out.Extra[0] != a || out.Extra[2] != tsig {
			t.Fatalf("additional section %v: want A, OPT, TSIG", out.Extra)
		}
		opt := out.Extra[1].(*dns.OPT)
		if !opt.Do() || opt.UDPSize() != defaultUDPSize || len(opt.Option) != 1 || opt.Option[0] != c {
			t.Errorf("OPT %v", opt)
		}
		if len(m.Extra) != 2 || &m.Extra[0] != &extra[0] || m.Extra[1] != tsig {
			t.Errorf("the handler's message changed: %v", m.Extra)
		}
	})
	t.Run("copy of the handler's OPT", func(t *testing.T) {
		req := query("a.")
		m := new(dns.Msg).SetReply(req).SetEdns0(4096, false)
		own := m.IsEdns0()
		own.Option = []dns.EDNS0{&dns.EDNS0_NSID{Code: dns.EDNS0NSID}}
		for range 4 { // more records than the reply holds in place
			m.Extra = append([]dns.RR{a}, m.Extra...)
		}
		out := new(cookieReply).attach(req, m, c)
		opt := out.IsEdns0()
		if opt == own || len(out.Extra) != 5 || opt.UDPSize() != 4096 || len(opt.Option) != 2 || opt.Option[1] != c {
			t.Fatalf("reply's OPT %v in %v", opt, out.Extra)
		}
		if len(own.Option) != 1 || m.IsEdns0() != own {
			t.Errorf("the handler's OPT changed: %v", own)
		}
	})
}

func TestUncompressedLen(t *testing.T) {
	req := cookieQuery("www.example.org.", testClientCookie)
	resp := new(dns.Msg).SetReply(req)
	resp.Compress = true
	resp.Answer = rrs(t, "www.example.org. 300 IN A 192.0.2.1", "www.example.org. 300 IN A 192.0.2.2")
	r := new(cookieReply)
	c := NewCookies([16]byte{1}).freshCookie(&r.cookie, &r.text, &[clientCookieLen]byte{1}, netip.MustParseAddr("192.0.2.1"), time.Unix(1700000000, 0))
	out := r.attach(req, resp, c)
	out.Compress = false
	want := out.Len()
	out.Compress = true
	if got := uncompressedLen(out, &r.opt); got != want {
		t.Errorf("uncompressedLen = %d, want %d (Msg.Len without compression)", got, want)
	}
	if !out.Compress || len(r.opt.Option) != 1 {
		t.Errorf("uncompressedLen left Compress %v, options %v", out.Compress, r.opt.Option)
	}
}

func TestReplyWithOPT(t *testing.T) {
	req := query("a.").SetEdns0(4096, true)
	req.IsEdns0().Option = []dns.EDNS0{&dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: testClientCookie}}
	m := replyWithOPT(req, dns.RcodeFormatError)
	opt := m.IsEdns0()
	if m.Rcode != dns.RcodeFormatError || m.Id != req.Id || opt == nil || !opt.Do() || len(opt.Option) != 0 {
		t.Errorf("reply %v", m)
	}
	if m := replyWithOPT(query("a."), dns.RcodeSuccess); len(m.Extra) != 0 {
		t.Errorf("reply to a request without EDNS has %v", m.Extra)
	}
}
