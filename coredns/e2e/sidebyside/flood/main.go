// Command flood is the one-goroutine flood of coredns/e2e/sidebyside.sh:
// one goroutine sends the same query over UDP from one loopback address as
// fast as it can, for a fixed time, never reading the replies, and then
// prints one line: how many it sent, in how many seconds. It talks to
// loopback addresses only.
//
//	flood -server 127.0.0.1:1053 -src 127.0.50.1 -name txt.example.test -type TXT -for 6s
package main

import (
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsrrl/rrl/coredns/e2e/loopback"
)

func main() {
	server := flag.String("server", "127.0.0.1:1053", "DNS server, host:port, on loopback")
	src := flag.String("src", "127.0.50.1", "source address, on loopback")
	name := flag.String("name", "txt.example.test.", "name to ask for")
	qtype := flag.String("type", "TXT", "type to ask for")
	dur := flag.Duration("for", 6*time.Second, "how long to send, at most a minute")
	flag.Parse()
	dst, err := loopback.Server("server", *server)
	if err != nil {
		fail(err)
	}
	from, err := loopback.Source("src", *src)
	if err != nil {
		fail(err)
	}
	t, ok := dns.StringToType[*qtype]
	if !ok {
		fail(fmt.Errorf("-type %q: unknown", *qtype))
	}
	if *dur <= 0 || *dur > time.Minute {
		fail(fmt.Errorf("-for %v: want more than 0 and at most a minute", *dur))
	}
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(*name), t)
	q.RecursionDesired = false
	query, err := q.Pack()
	if err != nil {
		fail(err)
	}
	conn, err := net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(from, 0)), net.UDPAddrFromAddrPort(dst))
	if err != nil {
		fail(err)
	}
	defer conn.Close()

	// Sends that fail (a full buffer, an ICMP error from a moment when
	// nothing listened) are not counted; the time is read every 64 sends.
	var sent, failed int64
	start := time.Now()
	end := start.Add(*dur)
	for i := 0; ; i++ {
		if i%64 == 0 && !time.Now().Before(end) {
			break
		}
		if _, err := conn.Write(query); err != nil {
			failed++
			continue
		}
		sent++
	}
	secs := time.Since(start).Seconds()
	fmt.Printf("sent %d in %.2f s (%.0f q/s), %d sends failed\n", sent, secs, float64(sent)/secs, failed)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "flood:", err)
	os.Exit(2)
}
