package replay_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/dnsrrl/rrl/replay"
	"github.com/dnsrrl/rrl/replay/internal/capgen"
	dnstap "github.com/dnstap/golang-dnstap"
	framestream "github.com/farsightsec/golang-framestream"
	"github.com/miekg/dns"
)

// tapExchanges writes exchanges as a server's dnstap log: a CLIENT_QUERY
// and a CLIENT_RESPONSE each (AUTH_ ones when auth is set), with other
// kinds of message in between that the replay must skip.
func tapExchanges(t *testing.T, w io.Writer, bidirectional, auth bool, exchanges []capgen.Exchange) {
	t.Helper()
	tw, err := capgen.NewTapWriter(w, bidirectional)
	if err != nil {
		t.Error(err)
		return
	}
	qt, rt := dnstap.Message_CLIENT_QUERY, dnstap.Message_CLIENT_RESPONSE
	if auth {
		qt, rt = dnstap.Message_AUTH_QUERY, dnstap.Message_AUTH_RESPONSE
	}
	for i := range exchanges {
		e := &exchanges[i]
		if err := tw.Encode(e, qt, capgen.QueryTime(e), e.Query); err != nil {
			t.Error(err)
			return
		}
		if err := tw.Encode(e, rt, capgen.ResponseTime(e), e.Response); err != nil {
			t.Error(err)
			return
		}
		if i%100 == 0 { // a resolver's message, and a query logged without its wire form
			tw.Encode(e, dnstap.Message_RESOLVER_QUERY, e.At, e.Query)
			tw.Encode(e, qt, e.At, nil)
		}
	}
	if err := tw.Close(); err != nil {
		t.Error(err)
	}
}

func TestDnstapFile(t *testing.T) {
	ex := traffic(t, 10, 200, 0.3, 0.1)
	kv := []string{"responses-per-second=5", "nxdomains-per-second=2", "requests-per-second=30"}
	exp := decide(t, kv, ex, nil)
	for _, auth := range []bool{false, true} {
		var buf bytes.Buffer
		tapExchanges(t, &buf, false, auth, ex)
		rep := replayBytes(t, replay.Options{Settings: settings(t, kv...)}, buf.Bytes())
		checkCounts(t, rep, exp)
		others := int64((len(ex) + 99) / 100)
		if rep.Skipped[replay.SkipDnstapType] != others || rep.Skipped[replay.SkipDnstapIncomplete] != others {
			t.Errorf("skipped %v, want %d of each kind", rep.Skipped, others)
		}
	}
}

// A live socket, unix or TCP, takes many writers at once (servers, say):
// each floods from its own network, in a burst stamped with one instant,
// so that the core's decisions do not depend on how the writers' messages
// interleave, and the replay's counts are the sum of what the core decides
// for each flood.
func TestDnstapSocket(t *testing.T) {
	const writers = 16
	kv := []string{"responses-per-second=5", "nxdomains-per-second=1"}
	floods := make([][]capgen.Exchange, writers)
	want := expected{categories: map[string]replay.Counts{}}
	for w := range floods {
		client := netip.AddrFrom4([4]byte{198, 18, byte(w), 7})
		kind := []int{capgen.Answer, capgen.NXDomain}[w%2]
		for i := 0; i < 150; i++ {
			q := capgen.Query(uint16(i), fmt.Sprintf("n%d.example.org.", i%3), dns.TypeA, "")
			floods[w] = append(floods[w], capgen.Exchange{At: start,
				Client: netip.AddrPortFrom(client, 4000), Server: capgen.Server, Query: q, Response: capgen.Response(q, kind, "example.org.")})
		}
		for cat, c := range decide(t, kv, floods[w], nil).categories {
			sum := want.categories[cat]
			sum.Sent, sum.Slipped, sum.Dropped = sum.Sent+c.Sent, sum.Slipped+c.Slipped, sum.Dropped+c.Dropped
			want.categories[cat] = sum
		}
	}
	for _, addr := range []string{"unix:" + filepath.Join(t.TempDir(), "tap.sock"), "tcp:127.0.0.1:0"} {
		l, err := replay.ListenOn(addr)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := replay.New(replay.Options{Settings: settings(t, kv...)})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- r.Listen(ctx, l) }()
		var wg sync.WaitGroup
		for _, flood := range floods {
			c, err := net.Dial(l.Addr().Network(), l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() {
				defer c.Close()
				tapExchanges(t, c, true, false, flood) // returns once the reader has acknowledged the end
			})
		}
		wg.Wait()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		rep := r.Reports()[0]
		checkCounts(t, rep, want)
		if rep.LimitedNetworks != writers {
			t.Errorf("%s: %d networks limited, want %d", addr, rep.LimitedNetworks, writers)
		}
	}
}

// A dnstap message without its time is skipped as incomplete, rather than
// replayed in 1970: the report's times and decisions are the traffic's.
func TestDnstapWithoutTime(t *testing.T) {
	ex := traffic(t, 5, 100, 0.3, 0)
	kv := []string{"responses-per-second=5"}
	var buf bytes.Buffer
	tw, err := capgen.NewTapWriter(&buf, false)
	if err != nil {
		t.Fatal(err)
	}
	first := &ex[0]
	tw.Encode(first, dnstap.Message_CLIENT_QUERY, time.Time{}, first.Query)
	tw.Encode(first, dnstap.Message_CLIENT_RESPONSE, time.Time{}, first.Response)
	for i := range ex {
		if err := tw.Write(&ex[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	rep := replayBytes(t, replay.Options{Settings: settings(t, kv...)}, buf.Bytes())
	checkCounts(t, rep, decide(t, kv, ex, nil))
	if rep.Skipped[replay.SkipDnstapIncomplete] != 2 || !rep.First.Equal(capgen.QueryTime(first)) {
		t.Errorf("skipped %v, first %v; want 2 incomplete, first %v", rep.Skipped, rep.First, capgen.QueryTime(first))
	}
}

// -max-conns: a connection beyond the cap is not read (its handshake gets
// no answer) until one of those read closes; then it is read, and the
// report counts its messages, and a frame over MaxRecord as skipped.
func TestListenMaxConns(t *testing.T) {
	dial, stop := listenTap(t, replay.ListenOptions{MaxConns: 1, IdleTimeout: time.Hour})
	first := dial()
	if _, err := capgen.NewTapWriter(first, true); err != nil {
		t.Fatal(err)
	}
	over := dial()
	over.SetDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := capgen.NewTapWriter(over, true); err == nil {
		t.Error("a connection beyond -max-conns 1 was read")
	}
	over.Close()
	first.Close()

	c := dial()
	defer c.Close()
	tapExchanges(t, c, true, false, traffic(t, 1, 50, 0, 0))

	// A frame over MaxRecord is read through and counted.
	c = dial()
	defer c.Close()
	fw, err := framestream.NewWriter(c, &framestream.WriterOptions{ContentTypes: [][]byte{dnstap.FSContentType}, Bidirectional: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fw.WriteFrame(make([]byte, replay.MaxRecord+1)); err != nil {
		t.Fatal(err)
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}

	if rep := stop(); rep.Queries != 50 || rep.Responses != 50 || rep.Skipped[replay.SkipOversize] != 1 {
		t.Errorf("%d queries, %d responses, skipped %v; want 50 of each and one oversize frame", rep.Queries, rep.Responses, rep.Skipped)
	}
}

// -idle-timeout: a connection silent after its handshake is closed, which
// frees its place under -max-conns for the next, whose frames are
// replayed. The client's read waits far longer than the idle timeout, so
// that it ends by its own deadline, and the test fails, only if the
// server never closes the connection.
func TestListenIdleTimeout(t *testing.T) {
	dial, stop := listenTap(t, replay.ListenOptions{MaxConns: 1, IdleTimeout: 100 * time.Millisecond})
	silent := dial()
	defer silent.Close()
	if _, err := capgen.NewTapWriter(silent, true); err != nil { // the handshake, then nothing
		t.Fatal(err)
	}
	silent.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := silent.Read(make([]byte, 64)); errors.Is(err, os.ErrDeadlineExceeded) || err == nil {
		t.Fatalf("a connection silent after its handshake: read %d bytes, %v; want it closed by the server", n, err)
	}

	c := dial()
	defer c.Close()
	tapExchanges(t, c, true, false, traffic(t, 1, 50, 0, 0)) // blocks in its handshake while the silent one holds the only place

	if rep := stop(); rep.Queries != 50 || rep.Responses != 50 {
		t.Errorf("%d queries, %d responses after the silent connection closed; want 50 of each", rep.Queries, rep.Responses)
	}
}

// listenTap starts a replay listening with opts on a Unix socket in a
// temporary folder, and returns a dial of that socket and a stop, which
// ends the listening and returns the report.
func listenTap(t *testing.T, opts replay.ListenOptions) (dial func() net.Conn, stop func() *replay.Report) {
	t.Helper()
	l, err := replay.ListenOn("unix:" + filepath.Join(t.TempDir(), "tap.sock"))
	if err != nil {
		t.Fatal(err)
	}
	r, _ := replay.New(replay.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.ListenWith(ctx, l, opts) }()
	dial = func() net.Conn {
		c, err := net.Dial("unix", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	stop = func() *replay.Report {
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		return r.Reports()[0]
	}
	return dial, stop
}
