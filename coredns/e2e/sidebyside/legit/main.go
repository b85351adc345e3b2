// Command legit is the legitimate client of coredns/e2e/sidebyside.sh: from
// one loopback address it asks a list of names in turn, -rate a second for
// -for, each query over UDP from a port of its own, once, waiting -timeout
// for the reply; a truncated (TC) reply is asked again over TCP, as a stub
// resolver does. It prints one line: how many it asked, how many were
// answered, of those how many over TCP after a TC reply, and how many got
// nothing. It exits 1 when -min or more were not answered. It talks to
// loopback addresses only.
//
//	legit -server 127.0.0.1:1053 -src 127.0.60.1 -names n0.example.test,n1.example.test -rate 10 -for 6s
package main

import (
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsrrl/rrl/coredns/e2e/loopback"
)

func main() {
	server := flag.String("server", "127.0.0.1:1053", "DNS server, host:port, on loopback")
	src := flag.String("src", "127.0.60.1", "source address, on loopback")
	names := flag.String("names", "n0.example.test.", "names to ask for, type A, comma-separated, in turn")
	rate := flag.Int("rate", 10, "queries a second")
	dur := flag.Duration("for", 6*time.Second, "how long to ask, at most a minute")
	timeout := flag.Duration("timeout", 2*time.Second, "how long to wait for each reply")
	minimum := flag.Int("min", 0, "exit 1 unless at least this many are answered")
	flag.Parse()
	dst, err := loopback.Server("server", *server)
	if err != nil {
		fail(err)
	}
	from, err := loopback.Source("src", *src)
	if err != nil {
		fail(err)
	}
	if *rate < 1 || *rate > 1000 {
		fail(fmt.Errorf("-rate %d: want 1 to 1000", *rate))
	}
	if *dur <= 0 || *dur > time.Minute || *timeout <= 0 || *timeout > 10*time.Second {
		fail(fmt.Errorf("-for %v, -timeout %v: want at most a minute and 10 s", *dur, *timeout))
	}
	list := strings.Split(*names, ",")

	udp := &dns.Client{Net: "udp", Timeout: *timeout, Dialer: &net.Dialer{
		Timeout: *timeout, LocalAddr: net.UDPAddrFromAddrPort(netip.AddrPortFrom(from, 0))}}
	tcp := &dns.Client{Net: "tcp", Timeout: *timeout, Dialer: &net.Dialer{
		Timeout: *timeout, LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(from, 0))}}
	addr := dst.String()

	var answered, viaTCP atomic.Int64
	var wg sync.WaitGroup
	asked := 0
	n := int(dur.Seconds() * float64(*rate))
	every := time.Second / time.Duration(*rate)
	start := time.Now()
	for i := range n {
		time.Sleep(time.Until(start.Add(time.Duration(i) * every)))
		q := new(dns.Msg)
		q.SetQuestion(dns.Fqdn(list[i%len(list)]), dns.TypeA)
		q.RecursionDesired = false
		asked++
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, _, err := udp.Exchange(q, addr)
			if err != nil || r == nil {
				return
			}
			if r.Truncated {
				if r, _, err = tcp.Exchange(q, addr); err != nil || r == nil || r.Truncated {
					return
				}
				if answer(r) {
					viaTCP.Add(1)
					answered.Add(1)
				}
				return
			}
			if answer(r) {
				answered.Add(1)
			}
		}()
	}
	wg.Wait()
	a := int(answered.Load())
	fmt.Printf("asked %d answered %d tcp %d lost %d\n", asked, a, viaTCP.Load(), asked-a)
	if a < *minimum {
		os.Exit(1)
	}
}

// answer reports whether r answers the question: NOERROR with an answer.
func answer(r *dns.Msg) bool { return r.Rcode == dns.RcodeSuccess && len(r.Answer) > 0 }

func fail(err error) {
	fmt.Fprintln(os.Stderr, "legit:", err)
	os.Exit(2)
}
