// Command gencapture writes a pcap of generated DNS traffic to an
// authoritative server for example.org: ordinary clients, a reflection
// flood at one victim network and a spray of NXDOMAIN queries from spoofed
// networks. It makes the sample capture of the README and the captures of
// the benchmark:
//
//	go run ./internal/gencapture -o testdata/sample.pcap
//	go run ./internal/gencapture -dnstap -o testdata/sample.dnstap
//	go run ./internal/gencapture -duration 60s -qps 8334 -o /tmp/big.pcap   # 1,000,080 packets
//	go run ./internal/gencapture -flood-only -flood 1 -o /tmp/flood.pcap     # one account, for debitcost.sh
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/dnsrrl/rrl/replay/internal/capgen"
	"github.com/gopacket/gopacket/layers"
)

func main() {
	out := flag.String("o", "", "write the capture to this `file`")
	duration := flag.Duration("duration", 20*time.Second, "capture length")
	qps := flag.Int("qps", 50, "exchanges (query and response) per second")
	flood := flag.Float64("flood", 0.5, "share of the exchanges in the reflection flood (from the fifth second)")
	spray := flag.Float64("spray", 0.1, "share of the exchanges in the spoofed NXDOMAIN spray")
	seed := flag.Uint64("seed", 1, "random seed")
	ng := flag.Bool("ng", false, "write pcapng rather than pcap")
	tap := flag.Bool("dnstap", false, "write a dnstap log (frame streams) rather than a packet capture")
	floodOnly := flag.Bool("flood-only", false, "write the reflection flood's exchanges alone: one account debited again and again")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "gencapture: -o FILE is required")
		os.Exit(2)
	}
	if err := write(*out, *duration, *qps, *flood, *spray, *seed, *ng, *tap, *floodOnly); err != nil {
		fmt.Fprintln(os.Stderr, "gencapture:", err)
		os.Exit(1)
	}
}

func write(path string, duration time.Duration, qps int, flood, spray float64, seed uint64, ng, tap, floodOnly bool) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close() // on an error; the Close at the end is the one checked
	bw := bufio.NewWriterSize(f, 1<<20)
	// The exchanges go to a dnstap log or a packet capture, which finish
	// differently.
	var put func(*capgen.Exchange) error
	var finish func() error
	if tap {
		tw, err := capgen.NewTapWriter(bw, false)
		if err != nil {
			return err
		}
		put, finish = tw.Write, tw.Close
	} else {
		w, err := capgen.NewWriter(bw, capgen.Link{Type: layers.LinkTypeEthernet}, ng)
		if err != nil {
			return err
		}
		put, finish = w.Write, w.Flush
	}
	if floodOnly {
		all := put
		put = func(e *capgen.Exchange) error {
			if !capgen.Victim.Contains(e.Client.Addr()) {
				return nil
			}
			return all(e)
		}
	}
	if err := capgen.Traffic(seed, capgen.Start, duration, qps, flood, spray, put); err != nil {
		return err
	}
	if err := finish(); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return f.Close()
}
