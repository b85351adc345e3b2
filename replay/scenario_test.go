package replay_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dnsrrl/rrl/replay"
	"github.com/dnsrrl/rrl/replay/internal/capgen"
	"github.com/miekg/dns"
)

// A flood at one network among ordinary clients: that network alone is
// limited, its tuple is named, and the counts are the core's.
func TestFloodAmongClients(t *testing.T) {
	ex := traffic(t, 20, 100, 0.4, 0)
	kv := []string{"responses-per-second=5"}
	rep := replayBytes(t, replay.Options{Settings: settings(t, kv...)}, pcapOf(t, ethernet, false, ex))
	checkCounts(t, rep, decide(t, kv, ex, nil))
	if rep.LimitedNetworks != 1 || len(rep.Networks) != 1 || rep.Networks[0].Network != "198.51.100.0/24" {
		t.Fatalf("limited networks %d %+v, want 198.51.100.0/24 alone", rep.LimitedNetworks, rep.Networks)
	}
	l := rep.Limited[0]
	if l.Network != "198.51.100.0/24" || l.Category != "answer" || l.Name != "example.org." || l.Type != "TXT" {
		t.Errorf("limited tuple %+v", l)
	}
	if !l.First.After(start.Add(5*time.Second)) || l.Last.Before(l.First) || l.Slipped == 0 || l.Dropped == 0 {
		t.Errorf("limited from %v to %v, %d slipped, %d dropped", l.First, l.Last, l.Slipped, l.Dropped)
	}
	if rep.Bytes.Sent >= rep.Bytes.Captured || rep.Bytes.Sent <= 0 {
		t.Errorf("bytes sent %d of %d captured", rep.Bytes.Sent, rep.Bytes.Captured)
	}
}

// A spray from spoofed random networks with a tiny table: the table
// recycles accounts, the report's tables stay within max-table-size, and
// the counts are still the core's.
func TestSpoofedSpray(t *testing.T) {
	ex := traffic(t, 10, 400, 0, 0.9)
	kv := []string{"responses-per-second=1", "max-table-size=50", "window=5"}
	rep := replayBytes(t, replay.Options{Settings: settings(t, kv...), Top: -1}, pcapOf(t, ethernet, false, ex))
	checkCounts(t, rep, decide(t, kv, ex, nil))
	if len(rep.Networks) > 50 || len(rep.Limited) > 50 || rep.LimitedNetworks > 50 {
		t.Errorf("report tables hold %d networks and %d tuples, beyond max-table-size 50", len(rep.Networks), len(rep.Limited))
	}
}

// Packets that are not DNS, cut short, or garbage are counted and
// skipped; the DNS among them is replayed.
func TestGarbageSkipped(t *testing.T) {
	var buf bytes.Buffer
	w, err := capgen.NewWriter(&buf, ethernet, false)
	if err != nil {
		t.Fatal(err)
	}
	c := addrPort("203.0.113.5:3333")
	q := capgen.Query(5, "www.example.org.", dns.TypeA, "")
	at := start
	next := func() time.Time { at = at.Add(time.Millisecond); return at }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.UDP(next(), c, capgen.Server, q))                                       // a query
	must(w.UDP(next(), c, capgen.Server, []byte("hello")))                         // too short for DNS
	must(w.UDP(next(), c, addrPort("192.0.2.53:80"), q))                           // not port 53
	must(w.Frame(next(), []byte{1, 2, 3}))                                         // a runt frame
	must(w.Frame(next(), append(make([]byte, 12), 0x08, 0x06, 1, 2, 3, 4)))        // ARP
	must(w.Frame(next(), append(make([]byte, 12), 0x08, 0x00, 0x45, 0, 0, 200)))   // IPv4 cut short
	must(w.UDP(next(), capgen.Server, c, []byte{0, 5, 0x80, 0, 0, 1, 0, 0, 0, 0})) // a response too short
	w.Snap = 60
	must(w.UDP(next(), c, capgen.Server, q)) // cut by the snap length
	rep := replayBytes(t, replay.Options{}, buf.Bytes())
	if rep.Queries != 1 {
		t.Errorf("queries %d, want 1", rep.Queries)
	}
	want := map[string]int64{
		replay.SkipNotDNS:     2,
		replay.SkipNotDNSPort: 1,
		replay.SkipTruncated:  3,
		replay.SkipNotIP:      1,
	}
	for k, v := range want {
		if rep.Skipped[k] != v {
			t.Errorf("skipped %q: %d, want %d (all: %v)", k, rep.Skipped[k], v, rep.Skipped)
		}
	}
}

// A file that is not a capture is one error naming the file; a capture
// cut in the middle of a record replays what it has and counts the rest.
func TestNotACapture(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "notes.txt")
	os.WriteFile(junk, []byte("this is not a capture\n"), 0o644)
	empty := filepath.Join(dir, "empty.pcap")
	os.WriteFile(empty, nil, 0o644)
	for _, f := range []string{junk, empty} {
		r, _ := replay.New(replay.Options{})
		err := r.ReadFile(f)
		if !errors.Is(err, replay.ErrNotCapture) || !strings.HasPrefix(err.Error(), f+": ") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v", f, err)
		}
	}

	capture := pcapOf(t, ethernet, false, traffic(t, 1, 100, 0, 0))
	cut := filepath.Join(dir, "cut.pcap")
	os.WriteFile(cut, capture[:len(capture)-30], 0o644)
	r, _ := replay.New(replay.Options{})
	if err := r.ReadFile(cut); err != nil {
		t.Fatal(err)
	}
	rep := r.Reports()[0]
	if rep.Skipped[replay.SkipBadRecord] != 1 || rep.Queries != 100 || rep.Responses != 99 {
		t.Errorf("cut capture: %d queries, %d responses, skipped %v", rep.Queries, rep.Responses, rep.Skipped)
	}
}

// The same input gives the same report, to the byte.
func TestDeterministic(t *testing.T) {
	capture := pcapOf(t, ethernet, false, traffic(t, 10, 200, 0.3, 0.2))
	opts := replay.Options{Settings: settings(t, "responses-per-second=3", "requests-per-second=20")}
	var out [2]bytes.Buffer
	for i := range out {
		r, _ := replay.New(opts)
		r.Read(bytes.NewReader(capture))
		replay.WriteText(&out[i], r.Reports())
	}
	if out[0].String() != out[1].String() {
		t.Errorf("two replays differ:\n%s\n%s", out[0].String(), out[1].String())
	}
}

// The sample capture and dnstap log are the ones gencapture makes with its
// defaults, so anyone can make them again; and they replay to the same
// report but for the count of packets.
func TestSampleCapture(t *testing.T) {
	for _, c := range []struct {
		file string
		make func(io.Writer) error
	}{
		{"testdata/sample.pcap", func(w io.Writer) error {
			cw, err := capgen.NewWriter(w, ethernet, false)
			if err != nil {
				return err
			}
			return capgen.Traffic(1, capgen.Start, 20*time.Second, 50, 0.5, 0.1, cw.Write)
		}},
		{"testdata/sample.dnstap", func(w io.Writer) error {
			tw, err := capgen.NewTapWriter(w, false)
			if err != nil {
				return err
			}
			if err := capgen.Traffic(1, capgen.Start, 20*time.Second, 50, 0.5, 0.1, tw.Write); err != nil {
				return err
			}
			return tw.Close()
		}},
	} {
		want, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := c.make(&buf); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), want) {
			t.Errorf("%s is not what go run ./internal/gencapture makes", c.file)
		}
	}
	opts := replay.Options{Settings: settings(t, "responses-per-second=5", "requests-per-second=20")}
	var reports [2][]byte
	for i, f := range []string{"testdata/sample.pcap", "testdata/sample.dnstap"} {
		r, _ := replay.New(opts)
		if err := r.ReadFile(f); err != nil {
			t.Fatal(err)
		}
		rep := r.Reports()[0]
		rep.Packets = 0
		reports[i], _ = json.Marshal(rep)
	}
	if !bytes.Equal(reports[0], reports[1]) {
		t.Errorf("the pcap and the dnstap log replay differently:\n%s\n%s", reports[0], reports[1])
	}
}

// Two captures of the same hour replayed one after the other: the second
// starts where the first ended, as one stream, rather than with its clock
// stepped back (which the core would take as no time at all, and then
// every message of the second as charged at the first's end).
func TestFilesInSequence(t *testing.T) {
	ex := traffic(t, 5, 100, 0.4, 0)
	capture := pcapOf(t, ethernet, false, ex)
	dir := t.TempDir()
	path := filepath.Join(dir, "a.pcap")
	os.WriteFile(path, capture, 0o644)
	kv := []string{"responses-per-second=2"}
	r, _ := replay.New(replay.Options{Settings: settings(t, kv...)})
	for i := 0; i < 2; i++ {
		if err := r.ReadFile(path); err != nil {
			t.Fatal(err)
		}
	}
	// The second copy shifted to begin where the first's last packet was.
	last := ex[len(ex)-1].At.Add(capgen.ResponseDelay)
	both := append([]capgen.Exchange(nil), ex...)
	for _, e := range ex {
		e.At = e.At.Add(last.Sub(ex[0].At))
		both = append(both, e)
	}
	checkCounts(t, r.Reports()[0], decide(t, kv, both, nil))
}

// Messages up to a second out of order (another server's, on the same
// socket) are charged at the latest time seen: the clock never runs back
// and forth, which would make it run fast.
func TestSlightDisorder(t *testing.T) {
	ex := traffic(t, 5, 100, 0.4, 0)
	// Swap neighbours: every other exchange comes 10 ms late.
	for i := 0; i+1 < len(ex); i += 2 {
		ex[i].At, ex[i+1].At = ex[i+1].At, ex[i].At
	}
	kv := []string{"responses-per-second=2"}
	rep := replayBytes(t, replay.Options{Settings: settings(t, kv...)}, pcapOf(t, ethernet, false, ex))
	// What the core decides with each exchange charged no earlier than the one before.
	inOrder := append([]capgen.Exchange(nil), ex...)
	for i := 1; i < len(inOrder); i++ {
		if inOrder[i].At.Before(inOrder[i-1].At) {
			inOrder[i].At = inOrder[i-1].At.Add(capgen.ResponseDelay)
		}
	}
	checkCounts(t, rep, decide(t, kv, inOrder, nil))
}

// A gzipped capture replays as the capture itself; a file of gzipped
// garbage is not a capture.
func TestGzip(t *testing.T) {
	capture := pcapOf(t, ethernet, true, traffic(t, 2, 100, 0.3, 0))
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(capture)
	zw.Close()
	plain := replayBytes(t, replay.Options{}, capture)
	zipped := replayBytes(t, replay.Options{}, z.Bytes())
	if plain.Queries == 0 || plain.Queries != zipped.Queries || plain.Responses != zipped.Responses {
		t.Errorf("plain %d queries, %d responses; gzipped %d, %d", plain.Queries, plain.Responses, zipped.Queries, zipped.Responses)
	}
	z.Reset()
	zw = gzip.NewWriter(&z)
	zw.Write([]byte("not a capture"))
	zw.Close()
	r, _ := replay.New(replay.Options{})
	if err := r.Read(bytes.NewReader(z.Bytes())); !errors.Is(err, replay.ErrNotCapture) {
		t.Errorf("gzipped text: %v", err)
	}
	var zz bytes.Buffer
	zw = gzip.NewWriter(&zz)
	zw.Write(gzipped(t, capture))
	zw.Close()
	r, _ = replay.New(replay.Options{})
	if err := r.Read(&zz); !errors.Is(err, replay.ErrNotCapture) {
		t.Errorf("a capture gzipped twice: %v, want %v", err, replay.ErrNotCapture)
	}
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return z.Bytes()
}

// Stop ends the reading at the next packet: here, called by the input
// itself once it has given half the capture.
func TestStop(t *testing.T) {
	capture := pcapOf(t, ethernet, false, traffic(t, 10, 100, 0, 0))
	r, _ := replay.New(replay.Options{})
	in := &stoppingReader{data: capture, at: len(capture) / 2, stop: r.Stop}
	if err := r.Read(in); err != nil {
		t.Fatal(err)
	}
	rep := r.Reports()[0]
	if rep.Packets == 0 || rep.Packets >= 2000 || len(rep.Skipped) != 0 {
		t.Errorf("%d packets read of 2000, skipped %v; want some but not all, none skipped", rep.Packets, rep.Skipped)
	}
}

// stoppingReader reads data a kilobyte at a time and calls stop once it
// has given at bytes.
type stoppingReader struct {
	data []byte
	off  int
	at   int
	stop func()
}

func (s *stoppingReader) Read(p []byte) (int, error) {
	if s.off >= len(s.data) {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), 1024)], s.data[s.off:])
	s.off += n
	if s.off >= s.at {
		s.stop()
	}
	return n, nil
}

// Stats and Stop may be called from other goroutines while a replay reads
// (the progress line and the interrupt handler do): run with -race. Every
// packet of this traffic carries at most one message, so a reading never
// counts more messages than packets, as Stats promises.
func TestConcurrentStatsAndStop(t *testing.T) {
	capture := pcapOf(t, ethernet, false, traffic(t, 20, 200, 0.3, 0.1))
	r, _ := replay.New(replay.Options{Settings: settings(t, "responses-per-second=5")})
	done := make(chan struct{})
	var watchers sync.WaitGroup
	for range 8 {
		watchers.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-done:
					return
				default:
				}
				if p, m := r.Stats(); m > p {
					t.Errorf("%d messages from %d packets", m, p)
					return
				}
				if n == 1000 {
					r.Stop()
				}
				runtime.Gosched()
			}
		})
	}
	err := r.Read(bytes.NewReader(capture))
	close(done)
	watchers.Wait()
	if err != nil {
		t.Fatal(err)
	}
}

// Queries without a response in the capture (as from a server that already
// drops them, or packets the capture lost) are counted: over UDP and TCP,
// a query repeated under the same ID and port before its answer, and one
// still waiting when the capture ends; answered ones, and the later
// messages of a TCP answer, are not.
func TestQueriesWithoutResponse(t *testing.T) {
	var ex []capgen.Exchange
	for i := 0; i < 12; i++ {
		q := capgen.Query(uint16(i), "www.example.org.", dns.TypeA, "")
		e := capgen.Exchange{At: start.Add(time.Duration(i) * 2 * time.Second), Client: addrPort(fmt.Sprintf("203.0.113.%d:4000", i)),
			Server: capgen.Server, TCP: i%3 == 0, Query: q}
		if i%2 == 0 {
			e.Response = capgen.Response(q, capgen.Answer, "example.org.")
		}
		ex = append(ex, e)
	}
	// The last client asks again, under the same ID and port, and is answered once.
	again := ex[11]
	again.At = again.At.Add(time.Second)
	again.Response = capgen.Response(again.Query, capgen.Answer, "example.org.")
	ex = append(ex, again)
	rep := replayBytes(t, replay.Options{}, pcapOf(t, ethernet, false, ex))
	if rep.Queries != 13 || rep.Responses != 7 || rep.Unmatched != 0 {
		t.Fatalf("%d queries, %d responses, %d without a query; want 13, 7, 0", rep.Queries, rep.Responses, rep.Unmatched)
	}
	if rep.Unanswered != 6 {
		t.Errorf("%d queries without a response, want 6", rep.Unanswered)
	}
}

// When more networks are limited than the report's table holds, the less
// limited are evicted: a flood that begins after a spray of networks
// limited once each filled the table still heads the report, with its
// counts whole, and the table stays within its bound.
func TestReportTableKeepsHeavyHitters(t *testing.T) {
	var ex []capgen.Exchange
	at := start
	ask := func(client string) {
		q := capgen.Query(uint16(len(ex)), "www.example.org.", dns.TypeA, "")
		ex = append(ex, capgen.Exchange{At: at, Client: addrPort(client), Server: capgen.Server, Query: q,
			Response: capgen.Response(q, capgen.Answer, "example.org.")})
		at = at.Add(time.Millisecond)
	}
	for i := 0; i < 200; i++ { // two at once from each: the second is limited
		ask(fmt.Sprintf("10.%d.%d.1:4000", i/250, i%250))
		ask(fmt.Sprintf("10.%d.%d.1:4001", i/250, i%250))
	}
	for i := 0; i < 100; i++ {
		ask("198.51.100.7:5000")
	}
	kv := []string{"responses-per-second=1", "max-table-size=50"}
	exp := decide(t, kv, ex, nil)
	rep := replayBytes(t, replay.Options{Settings: settings(t, kv...), Top: -1}, pcapOf(t, ethernet, false, ex))
	checkCounts(t, rep, exp)
	if len(rep.Networks) > 50 || len(rep.Limited) > 50 {
		t.Errorf("report tables hold %d networks and %d tuples, beyond 50", len(rep.Networks), len(rep.Limited))
	}
	if rep.EvictedNetworks == 0 || rep.LimitedNetworks != 201 {
		t.Errorf("%d networks evicted, %d limited; want some, and 201", rep.EvictedNetworks, rep.LimitedNetworks)
	}
	victim := rep.Networks[0]
	if victim.Network != "198.51.100.0/24" || victim.Slipped+victim.Dropped < 90 || victim.Sent+victim.Slipped+victim.Dropped != 100-1 {
		t.Errorf("the most limited network: %+v; want 198.51.100.0/24 with its 99 responses from its first limited on", victim)
	}
	if top := rep.Limited[0]; top.Network != "198.51.100.0/24" || top.Slipped+top.Dropped != victim.Slipped+victim.Dropped {
		t.Errorf("the most limited tuple: %+v", top)
	}
}

// Two floods of one name and type from one network, in classes IN and
// CHAOS: the limiter keeps an account for each, and so does the report,
// which names the class.
func TestTuplesApartByClass(t *testing.T) {
	var ex []capgen.Exchange
	client, server := addrPort("198.51.100.7:5300"), addrPort("192.0.2.53:53")
	for i := range 40 {
		class := uint16(dns.ClassINET)
		if i%2 == 1 {
			class = dns.ClassCHAOS
		}
		var q dns.Msg
		if err := q.Unpack(capgen.Query(uint16(i), "version.example.org.", dns.TypeTXT, "")); err != nil {
			t.Fatal(err)
		}
		q.Question[0].Qclass = class
		query, err := q.Pack()
		if err != nil {
			t.Fatal(err)
		}
		at := start.Add(time.Duration(i) * 25 * time.Millisecond)
		ex = append(ex, capgen.Exchange{At: at, Client: client, Server: server, Query: query,
			Response: capgen.Response(query, capgen.Answer, "example.org.")})
	}
	kv := []string{"responses-per-second=5"}
	rep := replayBytes(t, replay.Options{Settings: settings(t, kv...)}, pcapOf(t, ethernet, false, ex))
	checkCounts(t, rep, decide(t, kv, ex, nil))
	classes := map[string]int64{}
	for _, l := range rep.Limited {
		if l.Name != "version.example.org." || l.Type != "TXT" {
			t.Errorf("limited tuple %+v", l)
		}
		classes[l.Class] += l.Slipped + l.Dropped
	}
	// Each class: 20 responses, 5 of credit and 1 more earned in the second.
	if len(classes) != 2 || classes["IN"] != 14 || classes["CH"] != 14 {
		t.Errorf("limited responses by class %v, want 14 each of IN and CH", classes)
	}
	var text bytes.Buffer
	if err := replay.WriteText(&text, []*replay.Report{rep}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), " CH TXT ") || strings.Contains(text.String(), "IN TXT") {
		t.Errorf("text report shows the class other than as dig does, CH before the type and IN not at all:\n%s", text.String())
	}
	var page bytes.Buffer
	if err := replay.WriteHTML(&page, []*replay.Report{rep}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), "<td>CH TXT</td>") || !strings.Contains(page.String(), "<td>TXT</td>") {
		t.Error("HTML report lacks the cells CH TXT and TXT")
	}
}
