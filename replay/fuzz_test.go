package replay

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/dnsrrl/rrl/replay/internal/capgen"
	"github.com/gopacket/gopacket/layers"
	"github.com/miekg/dns"
)

var fuzzLinks = []layers.LinkType{layers.LinkTypeEthernet, layers.LinkTypeLinuxSLL, layers.LinkTypeLinuxSLL2,
	layers.LinkTypeNull, layers.LinkTypeLoop, layers.LinkTypeRaw, layers.LinkTypeIPv4, layers.LinkTypeIPv6}

// FuzzDecode feeds arbitrary frames, in order, to the packet decoder and
// the replay: nothing panics, the report's counts add up, and the bytes
// held for reassembly are counted right.
func FuzzDecode(f *testing.F) {
	q := capgen.Query(1, "www.example.org.", dns.TypeA, "0102030405060708")
	for _, lt := range fuzzLinks {
		var buf bytes.Buffer
		w, _ := capgen.NewWriter(&buf, capgen.Link{Type: lt}, false)
		w.UDP(time.Unix(0, 0), capgen.Server, capgen.Server, q)
		w.TCP(time.Unix(0, 0), capgen.Server, capgen.Server, 7, capgen.SYN, nil)
		b := buf.Bytes()
		f.Add(byte(lt), b[24+16:]) // the frame after the file and record headers
	}
	f.Fuzz(func(t *testing.T, lt byte, frame []byte) {
		r, err := New(Options{Settings: []Setting{{Keyword: "responses-per-second", Value: "1"}, {Keyword: "requests-per-second", Value: "1"}}})
		if err != nil {
			t.Fatal(err)
		}
		frames, msgs := 0, 0
		dec := newPacketDecoder(53, r.skip, func(m *Message) { msgs++; r.Message(m) })
		link := fuzzLinks[int(lt)%len(fuzzLinks)]
		at := time.Unix(1, 0)
		for len(frame) > 0 && frames < 8 { // the input split into up to 8 frames
			n := min(len(frame), 1+int(frame[0])*2)
			dec.decode(link, frame[:n], at, false)
			frame = frame[n:]
			frames++
			at = at.Add(time.Millisecond)
		}
		rep := r.Reports()[0]
		if rep.Responses != rep.Sent+rep.Slipped+rep.Dropped {
			t.Fatalf("responses %d != %d + %d + %d", rep.Responses, rep.Sent, rep.Slipped, rep.Dropped)
		}
		// A response without its query counts as a query too.
		if rep.Queries-rep.Unmatched+rep.Responses > int64(msgs) {
			t.Fatalf("%d queries (%d of them with a response only) and %d responses from %d messages", rep.Queries, rep.Unmatched, rep.Responses, msgs)
		}
		if got := heldBytes(dec.tcp); got != dec.tcp.held {
			t.Fatalf("TCP flows hold %d bytes, counted %d", got, dec.tcp.held)
		}
		if got := fragmentBytes(dec.frag); got != dec.frag.held {
			t.Fatalf("fragments hold %d bytes, counted %d", got, dec.frag.held)
		}
	})
}

// FuzzRead reads arbitrary files: never a panic, and an error only for
// input that is not a capture.
func FuzzRead(f *testing.F) {
	var pcap, ng bytes.Buffer
	for _, c := range []struct {
		buf *bytes.Buffer
		ng  bool
	}{{&pcap, false}, {&ng, true}} {
		w, _ := capgen.NewWriter(c.buf, capgen.Link{Type: layers.LinkTypeEthernet}, c.ng)
		q := capgen.Query(1, "www.example.org.", dns.TypeA, "")
		w.UDP(time.Unix(0, 0), capgen.Server, capgen.Server, q)
		w.UDP(time.Unix(0, 0), capgen.Server, capgen.Server, capgen.Response(q, capgen.NXDomain, "example.org."))
		w.Flush()
		f.Add(c.buf.Bytes())
	}
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0x22, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, _ := New(Options{Settings: []Setting{{Keyword: "responses-per-second", Value: "1"}}})
		if err := r.Read(bytes.NewReader(b)); err != nil && !errors.Is(err, ErrNotCapture) {
			t.Fatalf("error %v, want nil or ErrNotCapture", err)
		}
		rep := r.Reports()[0]
		if rep.Responses != rep.Sent+rep.Slipped+rep.Dropped {
			t.Fatalf("responses %d != %d + %d + %d", rep.Responses, rep.Sent, rep.Slipped, rep.Dropped)
		}
	})
}

// FuzzReadQuery checks the wire reader against package dns: a message dns
// reads with one question has its name read the same, and nothing panics.
func FuzzReadQuery(f *testing.F) {
	f.Add(capgen.Query(1, "www.Example.org.", dns.TypeA, "0102030405060708"))
	f.Add(capgen.Response(capgen.Query(1, "a.example.org.", dns.TypeTXT, ""), capgen.Answer, "example.org."))
	f.Fuzz(func(t *testing.T, w []byte) {
		q, ok := readQuery(w)
		name, nameOK := appendName(nil, w, dnsHeaderLen)
		var m dns.Msg
		if m.Unpack(w) != nil || len(m.Question) == 0 {
			return
		}
		if !ok || !q.question || !nameOK {
			t.Fatalf("dns reads %v; readQuery ok %v, question %v, name ok %v", m.Question[0], ok, q.question, nameOK)
		}
		want := dns.CanonicalName(m.Question[0].Name)
		if !bytes.Contains([]byte(want), []byte("\\")) && string(name) != want {
			t.Fatalf("name %q, dns reads %q", name, want)
		}
	})
}
