package miekgrrl

import (
	"encoding/hex"
	"net"
	"net/netip"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// repeatSource is a dns.PacketConnReader that hands out one packet from one
// source n times, then another from elsewhere.
type repeatSource struct {
	pkt, last  []byte
	from, away net.Addr
	n          int
}

func (r *repeatSource) ReadPacketConn(net.PacketConn, time.Duration) ([]byte, net.Addr, error) {
	if r.n > 0 {
		r.n--
		return r.pkt, r.from, nil
	}
	return r.last, r.away, nil
}
func (r *repeatSource) ReadTCP(net.Conn, time.Duration) ([]byte, error) { return nil, nil }
func (r *repeatSource) ReadUDP(*net.UDPConn, time.Duration) ([]byte, *dns.SessionUDP, error) {
	return nil, nil, nil
}

// packWriter packs what is written, as package dns does before sending it.
type packWriter struct{ discardWriter }

func (w *packWriter) WriteMsg(m *dns.Msg) error { _, err := m.Pack(); return err }

// BenchmarkReader measures, without sockets, what the server spends on a
// request read through DecorateReader: refused, the read loop and the debit
// (and, with a cookie, finding and checking it in the packet); served, also
// unpacking it, the Middleware, the handler and packing the answer. The
// Middleware alone refusing a request (the work a refusal cost before the
// reader: unpacking and the Middleware) is refused-by-middleware. Package
// dns's goroutine per packet and the system calls come on top (see
// BenchmarkLoopback).
func BenchmarkReader(b *testing.B) {
	clock := newTestClock()
	q := pack(b, query("www.example.org."))
	flood := &net.UDPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 5353}
	away := &net.UDPAddr{IP: net.IPv4(198, 51, 100, 1), Port: 5353}

	b.Run("refused", func(b *testing.B) {
		lim := newLimiter(b, clock, "requests-per-second", "1")
		lim.DebitRequestAddr(netip.MustParseAddr("192.0.2.1"), true, false) // spends the account
		r := DecorateReader(lim, Options{})(&repeatSource{pkt: q, last: q, from: flood, away: away, n: b.N}).(dns.PacketConnReader)
		b.ReportAllocs()
		b.ResetTimer()
		if _, from, _ := r.ReadPacketConn(nil, time.Second); from != away {
			b.Fatal("a refused packet let through")
		}
	})

	b.Run("refused-cookie", func(b *testing.B) {
		lim := newLimiter(b, clock, "requests-per-second", "1", "proven-requests-per-second", "1")
		lim.DebitRequestAddr(netip.MustParseAddr("192.0.2.1"), true, true)
		cookies := NewCookies([16]byte{1})
		sc := cookies.ServerCookie([]byte{1, 2, 3, 4, 5, 6, 7, 8}, netip.MustParseAddr("192.0.2.1"), clock.now())
		cq := pack(b, cookieQuery("www.example.org.", "0102030405060708"+hex.EncodeToString(sc[:])))
		var valid int
		opts := Options{Cookies: cookies, Now: clock.now, OnDecision: func(d Decision) {
			if d.Cookie == CookieValid {
				valid++
			}
		}}
		r := DecorateReader(lim, opts)(&repeatSource{pkt: cq, last: q, from: flood, away: away, n: b.N}).(dns.PacketConnReader)
		b.ReportAllocs()
		b.ResetTimer()
		if _, from, _ := r.ReadPacketConn(nil, time.Second); from != away || valid != b.N {
			b.Fatalf("%d of %d refused with a valid cookie", valid, b.N)
		}
	})

	b.Run("served", func(b *testing.B) {
		lim := newLimiter(b, clock, "requests-per-second", "1000000")
		h, _ := benchHandler(b)
		mw := Middleware(lim, h, Options{ChargedAtRead: true})
		src := &repeatSource{pkt: q, last: q, from: flood, away: flood}
		r := DecorateReader(lim, Options{})(src).(dns.PacketConnReader)
		w := &packWriter{discardWriter{remote: flood}}
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			// Over 256 networks, so that none runs out of its allowance.
			src.from = &net.UDPAddr{IP: net.IPv4(10, 0, byte(i), 1), Port: 5353}
			src.away = src.from
			m, from, _ := r.ReadPacketConn(nil, time.Second)
			req := new(dns.Msg)
			if err := req.Unpack(m); err != nil || from != src.from {
				b.Fatal(err)
			}
			mw.ServeDNS(w, req)
		}
	})

	b.Run("refused-by-middleware", func(b *testing.B) {
		lim := newLimiter(b, clock, "requests-per-second", "1")
		h, _ := benchHandler(b)
		var refused int
		mw := Middleware(lim, h, Options{OnDecision: func(d Decision) {
			if d.RequestDropped {
				refused++
			}
		}})
		w := &packWriter{discardWriter{remote: flood}}
		lim.DebitRequestAddr(netip.MustParseAddr("192.0.2.1"), true, false)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			req := new(dns.Msg)
			if err := req.Unpack(q); err != nil {
				b.Fatal(err)
			}
			mw.ServeDNS(w, req)
		}
		if refused != b.N {
			b.Fatalf("%d of %d refused", refused, b.N)
		}
	})
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Skipf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLoopback measures the CPU a request costs end to end: a client
// sends queries over loopback to a dns.Server, at most 64 unanswered at a
// time, and the process's CPU time (user and system, client included) is
// reported per query as cpu-ns/op. refused-at-read is a flood refused by
// DecorateReader; refused-by-middleware the same flood refused by the
// Middleware alone, after package dns has started a goroutine for each
// query and unpacked it; served is queries answered (the answers are not
// read: the kernel drops them); read-only is a bare socket that reads and
// discards, the least any server in user space can spend.
func BenchmarkLoopback(b *testing.B) {
	const window = 64
	q := pack(b, query("www.example.org."))
	send := func(b *testing.B, to string, done func() int64, notify chan struct{}) {
		conn, err := net.DialUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 7, 1)}, net.UDPAddrFromAddrPort(netip.MustParseAddrPort(to)))
		if err != nil {
			b.Skipf("cannot send from 127.0.7.1: %v", err)
		}
		defer conn.Close()
		start := done()
		b.ReportAllocs()
		b.ResetTimer()
		cpu := cpuTime(b)
		timeout := time.NewTimer(time.Minute)
		defer timeout.Stop()
		for i := range b.N {
			for int64(i)-(done()-start) >= window {
				select {
				case <-notify:
				case <-timeout.C:
					b.Fatalf("the server has done with %d of %d queries", done()-start, i)
				}
			}
			q[0], q[1] = byte(i>>8), byte(i)
			if _, err := conn.Write(q); err != nil {
				b.Fatal(err)
			}
		}
		for done()-start < int64(b.N) {
			select {
			case <-notify:
			case <-timeout.C:
				b.Fatalf("the server has done with %d of %d queries", done()-start, b.N)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
	}
	server := func(b *testing.B, rate string, decorate bool) *floodServer {
		lim := newLimiter(b, newTestClock(), "requests-per-second", rate)
		lim.DebitRequestAddr(netip.MustParseAddr("127.0.7.1"), true, false) // spends the account at rate 1
		return startFloodServer(b, lim, Options{}, decorate)
	}
	b.Run("refused-at-read", func(b *testing.B) {
		s := server(b, "1", true)
		send(b, s.udp, s.done.Load, s.notify)
		if s.accepts.Load() != 0 {
			b.Fatal("a refused query reached MsgAcceptFunc")
		}
	})
	b.Run("refused-by-middleware", func(b *testing.B) {
		s := server(b, "1", false)
		send(b, s.udp, s.done.Load, s.notify)
	})
	b.Run("served", func(b *testing.B) {
		s := server(b, "1000000", true)
		send(b, s.udp, s.done.Load, s.notify)
		if s.refused.Load() != 0 {
			b.Fatal("a query refused")
		}
	})
	b.Run("read-only", func(b *testing.B) {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			b.Skipf("no 127.0.0.1: %v", err)
		}
		defer pc.Close()
		pc.(*net.UDPConn).SetReadBuffer(1 << 20)
		var n atomic.Int64
		notify := make(chan struct{}, 1)
		go func() {
			buf := make([]byte, 512)
			for {
				if _, _, err := pc.ReadFrom(buf); err != nil {
					return
				}
				n.Add(1)
				select {
				case notify <- struct{}{}:
				default:
				}
			}
		}()
		send(b, pc.LocalAddr().String(), n.Load, notify)
	})
}
