// Command soakload is the load of coredns/e2e/soak.sh: for a given time it
// floods one name from one loopback source, and sprays the same name from
// many loopback sources (127.N.M.1, each its own /24), each at a steady
// rate, and then prints one line of what was sent and what came back. It
// talks to loopback addresses only.
//
//	soakload -server 127.0.0.1:1053 -for 60s
package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsrrl/rrl/coredns/e2e/loopback"
)

func main() {
	server := flag.String("server", "127.0.0.1:1053", "DNS server, host:port, on loopback")
	name := flag.String("name", "soak.test.", "name to ask for, type A")
	floodSrc := flag.String("flood-src", "127.0.60.1", "source address of the flood")
	floodQPS := flag.Int("flood-qps", 1000, "queries per second of the flood")
	sprayQPS := flag.Int("spray-qps", 500, "queries per second of the spray, one per source")
	sprayNets := flag.Int("spray-nets", 25600, "distinct /24s of the spray, from 127.100.0.0/24 up")
	dur := flag.Duration("for", time.Minute, "how long to send")
	flag.Parse()
	dst, err := loopback.Server("server", *server)
	if err != nil {
		fail(err)
	}
	src, err := loopback.Source("flood-src", *floodSrc)
	if err != nil {
		fail(err)
	}
	if *sprayNets < 1 || *sprayNets > 100*256 {
		fail(fmt.Errorf("-spray-nets %d: want 1 to %d", *sprayNets, 100*256))
	}
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(*name), dns.TypeA)
	query, err := q.Pack()
	if err != nil {
		fail(err)
	}
	var f floodCount
	var s sprayCount
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); flood(src, dst, query, *floodQPS, *dur, &f) }()
	go func() { defer wg.Done(); spray(dst, query, *sprayQPS, *sprayNets, *dur, &s) }()
	wg.Wait()
	fmt.Printf("flood sent %d answered %d truncated %d; spray sent %d answered %d\n",
		f.sent.Load(), f.answered.Load(), f.truncated.Load(), s.sent.Load(), s.answered.Load())
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "soakload:", err)
	os.Exit(2)
}

type floodCount struct{ sent, answered, truncated atomic.Int64 }

type sprayCount struct{ sent, answered atomic.Int64 }

// pace calls send qps times a second, in batches every 10 ms, for dur.
func pace(qps int, dur time.Duration, send func()) {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	start := time.Now()
	done := 0
	for now := range t.C {
		elapsed := now.Sub(start)
		if elapsed >= dur {
			return
		}
		due := int(float64(qps) * elapsed.Seconds())
		for ; done < due; done++ {
			send()
		}
	}
}

// flood sends from one socket and reads the replies on it until a moment
// after the last query.
func flood(src netip.Addr, dst netip.AddrPort, query []byte, qps int, dur time.Duration, c *floodCount) {
	conn, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, 0)))
	if err != nil {
		fail(err)
	}
	defer conn.Close()
	to := net.UDPAddrFromAddrPort(dst)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		m := new(dns.Msg)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					return
				}
				continue
			}
			if m.Unpack(buf[:n]) != nil {
				continue
			}
			if m.Truncated {
				c.truncated.Add(1)
			} else {
				c.answered.Add(1)
			}
		}
	}()
	var id uint16
	pace(qps, dur, func() {
		id++
		query[0], query[1] = byte(id>>8), byte(id)
		if _, err := conn.WriteToUDP(query, to); err == nil {
			c.sent.Add(1)
		}
	})
	conn.SetReadDeadline(time.Now().Add(time.Second))
	<-done
}

// spray asks once from each of many sources in turn, each on a socket of
// its own that waits a short while for the reply.
func spray(dst netip.AddrPort, query []byte, qps, nets int, dur time.Duration, c *sprayCount) {
	to := net.UDPAddrFromAddrPort(dst)
	jobs := make(chan netip.Addr, 256)
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 4096)
			q := append([]byte(nil), query...)
			for src := range jobs {
				conn, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, 0)))
				if err != nil {
					continue
				}
				if _, err := conn.WriteToUDP(q, to); err == nil {
					c.sent.Add(1)
					conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
					if _, err := conn.Read(buf); err == nil {
						c.answered.Add(1)
					}
				}
				conn.Close()
			}
		}()
	}
	i := 0
	pace(qps, dur, func() {
		n := i % nets
		i++
		select {
		case jobs <- netip.AddrFrom4([4]byte{127, byte(100 + n/256), byte(n % 256), 1}):
		default: // the workers are behind: skip rather than queue
		}
	})
	close(jobs)
	wg.Wait()
}
