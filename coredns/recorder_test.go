package rrl

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/metadata"
	"github.com/coredns/coredns/plugin/test"
	"github.com/coredns/coredns/request"
	"github.com/miekg/dns"
)

// lockedCapture is a capture that several goroutines may write to.
type lockedCapture struct {
	test.ResponseWriter
	mu   sync.Mutex
	msgs []*dns.Msg
}

func (c *lockedCapture) WriteMsg(m *dns.Msg) error {
	c.mu.Lock()
	c.msgs = append(c.msgs, m)
	c.mu.Unlock()
	return nil
}

// TestConcurrentRequestsKeepTheirOwnState runs requests in parallel through
// the pooled recorders: each must get its own answer, and the wildcard
// metadata of one request must never show in another.
func TestConcurrentRequestsKeepTheirOwnState(t *testing.T) {
	next := plugin.HandlerFunc(func(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
		if f := metadata.ValueFunc(ctx, wildcardLabel); f != nil {
			t.Errorf("wildcard metadata %q leaked into %s", f(), r.Question[0].Name)
		}
		return zoneNext(ctx, w, r)
	})
	h := testHandler(t, "{\n responses-per-second 1000000\n}", next, nil)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 300 {
				name := "h" + strconv.Itoa(g) + "-" + strconv.Itoa(i) + ".example.org."
				if i%2 == 0 {
					name = "h" + strconv.Itoa(g) + "-" + strconv.Itoa(i) + ".wild.example.org."
				}
				w := &lockedCapture{ResponseWriter: test.ResponseWriter{RemoteIP: "127.0." + strconv.Itoa(g) + ".1"}}
				r := query(name, dns.TypeA)
				r.Id = uint16(i)
				h.ServeDNS(context.Background(), w, r)
				if len(w.msgs) != 1 || w.msgs[0].Id != r.Id || w.msgs[0].Question[0].Name != name {
					t.Errorf("request %s got %v", name, w.msgs)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestUndecodableWritePassesThrough: bytes that are not a DNS message are
// written as they are, since nothing can be said about them.
func TestUndecodableWritePassesThrough(t *testing.T) {
	var wrote []byte
	h := testHandler(t, "{\n responses-per-second 1\n}", plugin.HandlerFunc(func(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
		w.Write([]byte{1, 2, 3})
		return dns.RcodeSuccess, nil
	}), newClock())
	for range 5 {
		w := &rawCapture{onWrite: func(b []byte) { wrote = append(wrote, b...) }}
		if _, err := h.ServeDNS(context.Background(), w, query("www.example.org.", dns.TypeA)); err != nil {
			t.Fatal(err)
		}
	}
	if len(wrote) != 15 {
		t.Errorf("wrote %d bytes, want the 5 writes of 3 bytes passed through", len(wrote))
	}
}

type rawCapture struct {
	test.ResponseWriter
	onWrite func([]byte)
}

func (c *rawCapture) Write(b []byte) (int, error) { c.onWrite(b); return len(b), nil }

// TestTCPStreamsEveryMessage: over TCP every message a plugin writes (a
// zone transfer writes many) goes out at once and in order.
func TestTCPStreamsEveryMessage(t *testing.T) {
	h := testHandler(t, "{\n responses-per-second 1\n}", streamNext, newClock())
	w := &capture{ResponseWriter: test.ResponseWriter{RemoteIP: "127.0.1.1", TCP: true}}
	h.ServeDNS(context.Background(), w, query("www.example.org.", dns.TypeAXFR))
	if len(w.msgs) != 3 {
		t.Fatalf("%d messages over TCP, want 3", len(w.msgs))
	}
	for i, m := range w.msgs {
		if got := m.Answer[0].(*dns.A).A.String(); got != "192.0.2."+strconv.Itoa(i+1) {
			t.Errorf("message %d carries %s", i, got)
		}
	}
}

// TestRecorderStates walks the recorder through its states: over UDP a
// message is held (the last of several wins) and nothing is written; over
// TCP each message is written at once and the first is kept for
// accounting; bytes that do not decode pass through from any state.
func TestRecorderStates(t *testing.T) {
	r := query("www.example.org.", dns.TypeA)
	reply := func(ip string) *dns.Msg {
		m := new(dns.Msg).SetReply(r)
		m.Answer = []dns.RR{test.A("www.example.org. 300 IN A " + ip)}
		return m
	}
	packed := func(m *dns.Msg) []byte { b, _ := m.Pack(); return b }

	w := &capture{}
	rec := newRecorder(w, nil, true)
	if rec.state != holding || !rec.state.wroteNothing() {
		t.Fatalf("a UDP recorder starts in %v", rec.state)
	}
	first, second := reply("192.0.2.1"), reply("192.0.2.2")
	rec.WriteMsg(first)
	rec.Write(packed(second))
	if rec.state != held || len(w.msgs) != 0 || rec.msg.Answer[0].(*dns.A).A.String() != "192.0.2.2" {
		t.Errorf("UDP: state %v, %d written, holding %v; want the last message held, none written", rec.state, len(w.msgs), rec.msg)
	}
	rec.Write([]byte{1, 2, 3})
	if rec.state != passedThrough || rec.msg != nil {
		t.Errorf("UDP, undecodable bytes after a held message: state %v, keeping %v; want passedThrough, nothing to charge (the held message is replaced, never sent)", rec.state, rec.msg)
	}

	w = &capture{}
	rec = newRecorder(w, nil, false)
	if rec.state != streaming || !rec.state.wroteNothing() {
		t.Fatalf("a TCP recorder starts in %v", rec.state)
	}
	rec.WriteMsg(first)
	rec.WriteMsg(second)
	if rec.state != streamed || len(w.msgs) != 2 || rec.msg != first || rec.state.wroteNothing() {
		t.Errorf("TCP: state %v, %d written, kept %v; want both written and the first kept", rec.state, len(w.msgs), rec.msg)
	}
	rec.Write([]byte{1, 2, 3})
	if rec.state != passedThrough || rec.msg != first {
		t.Errorf("TCP, undecodable bytes: state %v, keeping %v; want passedThrough, the first message still kept", rec.state, rec.msg)
	}
}

// TestCapBuffer: the request's buffer is lowered to the size asked, never
// below 512 nor raised, and restored as it came.
func TestCapBuffer(t *testing.T) {
	for _, tc := range []struct{ advertised, size, capped int }{
		{1232, 512, 512}, {1232, 300, 512}, {4096, 1232, 1232}, {512, 600, 512}, {400, 300, 400},
	} {
		r := new(dns.Msg).SetQuestion("a.example.", dns.TypeTXT)
		r.SetEdns0(uint16(tc.advertised), false)
		was := capBuffer(r, tc.size)
		if got := int(r.IsEdns0().UDPSize()); got != tc.capped {
			t.Errorf("advertised %d, capped at %d: %d, want %d", tc.advertised, tc.size, got, tc.capped)
		}
		restoreBuffer(r, was)
		if got := int(r.IsEdns0().UDPSize()); got != tc.advertised {
			t.Errorf("advertised %d: restored to %d", tc.advertised, got)
		}
	}
	r := new(dns.Msg).SetQuestion("a.example.", dns.TypeTXT) // no EDNS: 512 bytes, nothing to lower
	restoreBuffer(r, capBuffer(r, 300))
	if r.IsEdns0() != nil {
		t.Error("an OPT record added to a request without one")
	}
}

// TestOnWire: the length onWire gives is that of the message the server's
// writer sends: with and without EDNS, with the request's options, cut to
// the buffer, compressed past 1220 bytes.
func TestOnWire(t *testing.T) {
	for _, tc := range []struct {
		name   string
		edns   int  // the request's buffer, 0 without EDNS
		nsid   bool // the request carries an NSID option
		txt    int  // bytes of TXT in the answer
		answer bool // the reply has an OPT record of its own
	}{
		{"small, no EDNS", 0, false, 100, false},
		{"small, EDNS", 1232, false, 100, false},
		{"small, EDNS and NSID", 1232, true, 100, false},
		{"small, the reply's own OPT", 1232, false, 100, true},
		{"cut to 512", 0, false, 900, false},
		{"cut to the buffer", 1232, false, 2000, false},
		{"past 1220", 4096, false, 1300, false},
		{"compressed past 1480", 4096, false, 1600, false},
	} {
		r := new(dns.Msg).SetQuestion("www.example.org.", dns.TypeTXT)
		if tc.edns > 0 {
			r.SetEdns0(uint16(tc.edns), false)
			if tc.nsid {
				r.IsEdns0().Option = append(r.IsEdns0().Option, &dns.EDNS0_NSID{Code: dns.EDNS0NSID})
			}
		}
		m := new(dns.Msg).SetReply(r)
		for i := 0; i < tc.txt; i += 200 {
			m.Answer = append(m.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: "www.example.org.", Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60},
				Txt: []string{strings.Repeat("x", min(200, tc.txt-i))}})
		}
		if tc.answer {
			m.SetEdns0(1232, false)
		}
		w := &test.ResponseWriter{}
		got := onWire(request.Request{Req: r, W: w}, m)
		sent := m.Copy()
		state := request.Request{Req: r.Copy(), W: w}
		state.SizeAndDo(sent)
		state.Scrub(sent)
		packed, err := sent.Pack()
		if err != nil {
			t.Fatal(err)
		}
		if got != len(packed) {
			t.Errorf("%s: onWire %d, the server writes %d bytes", tc.name, got, len(packed))
		}
	}
}
