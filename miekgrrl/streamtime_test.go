package miekgrrl

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dnsrrl/rrl"
	"github.com/miekg/dns"
)

// The middleware times each request over TCP until its handler returns
// and charges the time to the client's network (stream-time-per-second),
// which is then refused before the handler: here over real loopback TCP,
// with a handler that takes 40 ms and a budget of 100 ms, on a limiter
// clock that stands still so that no budget is earned back. Requests are
// charged at least their 40 ms each, so the network is served at least
// one and at most four: two in credit (80 ms), the third overshooting,
// and a fourth that may arrive between the third's response, which the
// handler writes, and its charge, once the handler returns (the overshoot
// DebitStreamTime documents). Then it is refused, the refusal named
// LimitStreamTime; UDP from the same network is served all the same.
func TestIntegrationStreamTimeTimesTheHandler(t *testing.T) {
	lim := newLimiter(t, newTestClock(), "stream-time-per-second", "100ms")
	var calls atomic.Int32
	slow := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		calls.Add(1)
		time.Sleep(40 * time.Millisecond) // the handler's work
		answerHandler(w, r)
	})
	var mu sync.Mutex
	var refusals []rrl.RequestRefusal
	opts := Options{OnDecision: func(d Decision) {
		if d.RequestDropped {
			mu.Lock()
			refusals = append(refusals, d.RequestLimit)
			mu.Unlock()
		}
	}}
	h := Middleware(lim, slow, opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	activate(t, &dns.Server{Listener: ln, Net: "tcp", Handler: h})
	udpAddr := startUDPLoopback(t, &dns.Server{Handler: h})

	c := &dns.Client{Net: "tcp", Timeout: 5 * time.Second,
		Dialer: &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.5.1")}}}
	served := 0
	for range 10 {
		if r, _, err := c.Exchange(query("www.example.org."), ln.Addr().String()); err == nil && len(r.Answer) == 1 {
			served++
		}
	}
	if served < 1 || served > 4 || int(calls.Load()) != served {
		t.Errorf("served %d of 10 TCP requests of 40 ms (handler called %d times), want 1 to 4 against 100 ms", served, calls.Load())
	}
	mu.Lock()
	if len(refusals) != 10-served {
		t.Errorf("%d refusals reported, want %d", len(refusals), 10-served)
	}
	for _, why := range refusals {
		if why.Limit != rrl.LimitStreamTime {
			t.Errorf("refused by %v, want stream-time-per-second", why.Limit)
		}
	}
	mu.Unlock()
	if got := lim.GetStats(false).StreamTimeDrops; got != int64(10-served) {
		t.Errorf("StreamTimeDrops %d, want %d", got, 10-served)
	}

	u := &dns.Client{Net: "udp", Timeout: 5 * time.Second,
		Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP("127.0.5.2")}}}
	for i := range 3 {
		if r, _, err := u.Exchange(query("www.example.org."), udpAddr); err != nil || len(r.Answer) != 1 {
			t.Errorf("UDP request %d from the network over its stream budget: %v %v, want an answer", i, r, err)
		}
	}
}

// Off, a TCP request is not timed: a handler however slow is never
// refused for it.
func TestStreamTimeOffNotTimed(t *testing.T) {
	lim := newLimiter(t, newTestClock(), "responses-per-second", "100")
	h := Middleware(lim, dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		time.Sleep(5 * time.Millisecond)
		answerHandler(w, r)
	}), Options{})
	for i := range 50 {
		w := tcpFrom("192.0.2.1")
		h.ServeDNS(w, query("www.example.org."))
		if w.wrote() != 1 {
			t.Fatalf("TCP request %d not answered with stream-time-per-second off", i)
		}
	}
}
