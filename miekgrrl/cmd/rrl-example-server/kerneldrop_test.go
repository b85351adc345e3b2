package main

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsrrl/rrl/kerneldrop"
	"github.com/dnsrrl/rrl/kerneldrop/kdtest"
)

// TestKernelDropFlags: -kernel-drop names the interfaces and needs a
// request limit; its durations must be above 0.
func TestKernelDropFlags(t *testing.T) {
	o, err := parseFlags([]string{"-requests", "20", "-kernel-drop", "lo,eth0", "-kernel-drop-after", "200ms", "-kernel-drop-for", "1m"})
	if err != nil || strings.Join(o.kernel.Interfaces, " ") != "lo eth0" || o.kernel.After != 200*time.Millisecond || o.kernel.For != time.Minute {
		t.Errorf("-kernel-drop: %+v %v", o.kernel, err)
	}
	if o, err := parseFlags(nil); err != nil || len(o.kernel.Interfaces) != 0 {
		t.Errorf("no -kernel-drop: %+v %v", o.kernel, err)
	}
	for _, args := range [][]string{
		{"-kernel-drop", "lo"},
		{"-requests", "20", "-kernel-drop", "lo", "-kernel-drop-after", "0s"},
		{"-requests", "20", "-kernel-drop", "lo", "-kernel-drop-for", "-1s"},
	} {
		if _, err := parseFlags(args); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

// TestKernelDrop: a network flooding over -requests goes into the kernel
// drop list, through miekgrrl.Options.RefusedNetwork, and its packets are
// then dropped before the server reads them, while another network is
// answered.
func TestKernelDrop(t *testing.T) {
	kdtest.NeedRoot(t)
	if l, err := kerneldrop.Open(kerneldrop.Config{Interfaces: []string{"lo"}, TickEvery: -1}); err != nil {
		t.Skipf("the kernel refuses the kernel drop list on lo: %v", err)
	} else {
		l.Close()
	}
	s, port, _ := startTestServer(t, func(o *options) {
		o.requests = "20"
		o.kernel.Interfaces, o.kernel.After, o.kernel.For = []string{"lo"}, 200*time.Millisecond, time.Minute
	})
	addr := net.JoinHostPort("127.0.0.1", port)
	flood, err := net.DialUDP("udp", &net.UDPAddr{IP: net.ParseIP("127.78.0.1")}, net.UDPAddrFromAddrPort(netip.MustParseAddrPort(addr)))
	if err != nil {
		t.Fatal(err)
	}
	defer flood.Close()
	q, _ := new(dns.Msg).SetQuestion("www.example.org.", dns.TypeA).Pack()
	in := false
	for i := 0; i < 20000 && !in; i++ { // until the network is in the kernel: some 200 ms of flood
		flood.Write(q)
		if i%50 == 0 {
			time.Sleep(5 * time.Millisecond) // paces the flood; nothing is asserted on time
			in = len(s.kernel.Networks()) == 1
		}
	}
	if !in {
		t.Fatal("the flooded network never went into the kernel")
	}
	if got := s.kernel.Networks()[0].Network.String(); got != "127.78.0.0/24" {
		t.Errorf("in the kernel: %s, want 127.78.0.0/24", got)
	}
	before := s.kernel.Dropped()
	c := &dns.Client{Net: "udp", Timeout: 300 * time.Millisecond, Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP("127.78.0.2")}}}
	if m, _, err := c.Exchange(new(dns.Msg).SetQuestion("www.example.org.", dns.TypeA), addr); err == nil {
		t.Errorf("a reply to the network in the kernel: %v", m)
	}
	if s.kernel.Dropped() <= before {
		t.Error("the kernel counted no drop")
	}
	c.Dialer = &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP("127.79.0.1")}}
	if _, _, err := c.Exchange(new(dns.Msg).SetQuestion("www.example.org.", dns.TypeA), addr); err != nil {
		t.Errorf("another network: %v", err)
	}
}
