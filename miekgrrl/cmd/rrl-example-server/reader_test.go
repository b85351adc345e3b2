package main

import (
	"net"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/dnsrrl/rrl"
	"github.com/miekg/dns"
)

// The example server refuses a request over its request limit as it reads
// it (Decision.AtRead), and charges each request once: requests-per-second
// 2 with the clock stopped answers 2 queries, not 1. With
// -refuse-at-read=false the middleware refuses it.
func TestRefusedAtRead(t *testing.T) {
	for _, middleware := range []bool{false, true} {
		s, port, rec := startTestServer(t, func(o *options) {
			o.rate, o.requests, o.noReadRefusal = "100", "2", middleware
		})
		c := &dns.Client{Net: "udp", Timeout: 200e6}
		q := new(dns.Msg).SetQuestion("www.example.org.", dns.TypeA)
		answered := 0
		for range 4 {
			if r, _, err := c.Exchange(q, "127.0.0.1:"+port); err == nil && len(r.Answer) > 0 {
				answered++
			}
		}
		if answered != 2 {
			t.Errorf("middleware %v: %d of 4 answered, want 2", middleware, answered)
		}
		var atRead, dropped int
		for _, d := range rec.since(0) {
			if d.RequestDropped {
				dropped++
				if d.AtRead {
					atRead++
				}
			}
		}
		want := 2
		if middleware {
			want = 0
		}
		if dropped != 2 || atRead != want {
			t.Errorf("middleware %v: %d refusals, %d at read; want 2, %d", middleware, dropped, atRead, want)
		}
		if st := s.limiter.GetStats(false); st.Actions[rrl.Drop] != 2 {
			t.Errorf("middleware %v: stats %v, want 2 drops", middleware, st)
		}
		s.shutdown()
	}
}

// -udp-rcvbuf sizes the UDP socket's receive buffer and reads back what
// the kernel granted: twice what was asked, under net.core.rmem_max or
// past it for root (SO_RCVBUFFORCE).
func TestUDPRcvBuf(t *testing.T) {
	if _, err := parseFlags([]string{"-udp-rcvbuf", "-1"}); err == nil {
		t.Error("a negative -udp-rcvbuf accepted")
	}
	if _, err := parseFlags([]string{"-udp-rcvbuf", "2000000000"}); err == nil {
		t.Error("-udp-rcvbuf past 1 GiB accepted")
	}
	if o, err := parseFlags([]string{"-udp-rcvbuf", "1048576"}); err != nil || o.udpRcvBuf != 1<<20 {
		t.Fatalf("-udp-rcvbuf 1048576: %+v, %v", o, err)
	}
	capped := rcvBuf{asked: 8 << 20, granted: 2 * 4194304, max: 4194304}.String()
	if !strings.Contains(capped, "capped by net.core.rmem_max (4194304): raise it (sysctl -w net.core.rmem_max=8388608)") {
		t.Errorf("capped: log line %q", capped)
	}
	if runtime.GOOS != "linux" {
		t.Skip("SO_RCVBUF is read back on Linux only")
	}
	const asked = 256 << 10
	s, _, _ := startTestServer(t, func(o *options) { o.udpRcvBuf = asked })
	got := sockRcvBuf(t, s.udp.PacketConn.(*net.UDPConn))
	if s.rcvbuf.granted != got || got < asked {
		t.Errorf("granted %d, the socket has %d, want at least %d", s.rcvbuf.granted, got, asked)
	}
	if s.rcvbuf.max >= asked && (got != 2*asked || s.rcvbuf.forced) {
		t.Errorf("under rmem_max %d: granted %d (forced %v), want %d", s.rcvbuf.max, got, s.rcvbuf.forced, 2*asked)
	}
	if !strings.Contains(s.rcvbuf.String(), "granted") {
		t.Errorf("log line %q", s.rcvbuf)
	}

	// Past net.core.rmem_max: capped, or forced past it when privileged.
	big := s.rcvbuf.max + 1<<20
	if s.rcvbuf.max == 0 || big > maxRcvBuf {
		return
	}
	s2, _, _ := startTestServer(t, func(o *options) { o.udpRcvBuf = big })
	got = sockRcvBuf(t, s2.udp.PacketConn.(*net.UDPConn))
	if s2.rcvbuf.forced {
		if got != 2*big {
			t.Errorf("forced: granted %d, want %d", got, 2*big)
		}
	} else if got != 2*s2.rcvbuf.max || !strings.Contains(s2.rcvbuf.String(), "capped") {
		t.Errorf("capped: granted %d, want %d; log line %q", got, 2*s2.rcvbuf.max, s2.rcvbuf)
	}
	t.Log(s2.rcvbuf)
}

func sockRcvBuf(t *testing.T, c *net.UDPConn) int {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var gerr error
	raw.Control(func(fd uintptr) { v, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF) })
	if gerr != nil {
		t.Fatal(gerr)
	}
	return v
}
