package rrl_test

import (
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsrrl/rrl/kerneldrop"
)

// lockXDP holds, for the rest of t, the lock that the tests of every
// module take before they attach an XDP program to lo: an interface takes
// one program, and test binaries of several modules run at once.
func lockXDP(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "rrl-xdp-lo.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() }) // closing releases the lock
}

// needKernelDrop skips t unless this process may attach the kernel drop
// list's XDP program to lo, saying why not.
func needKernelDrop(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("kernel-drop needs root (or CAP_BPF and CAP_NET_ADMIN)")
	}
	lockXDP(t)
	l, err := kerneldrop.Open(kerneldrop.Config{Interfaces: []string{"lo"}})
	if err != nil {
		t.Skipf("the kernel refuses the kernel drop list on lo: %v", err)
	}
	l.Close()
}

// TestIntegrationKernelDrop: a network flooding over requests-per-second
// goes into the kernel after kernel-drop-after; its UDP packets are then
// dropped before they reach CoreDNS (counted by the kernel, listed with
// their time left), while a neighbour network and the flooded network's
// TCP are served; after kernel-drop-for it is answered again.
func TestIntegrationKernelDrop(t *testing.T) {
	needKernelDrop(t)
	up := startUpstream(t)
	addr, port := prefixBlock(t, up, "requests-per-second 20\n        kernel-drop lo\n        kernel-drop-after 300ms\n        kernel-drop-for 2s")
	key := "server=dns://127.0.0.1:" + port + ",zone=req.test."

	flooder := newUDPClient(t, "127.72.0.1", addr)
	in := false
	for i := 0; i < 20000 && !in; i++ { // until the network is in the kernel: some 300 ms of flood
		flooder.send(t, named("f", i, ""))
		if i%50 == 0 {
			time.Sleep(5 * time.Millisecond) // paces the flood; nothing is asserted on time
			in = gathered(t, "coredns_rrl_kernel_networks")[key] == 1
		}
	}
	flooder.finish(0)
	if !in {
		t.Fatalf("the flooded network never went into the kernel: kernel_networks %v", gathered(t, "coredns_rrl_kernel_networks"))
	}

	before, served := gathered(t, "coredns_rrl_kernel_dropped_total")[key], up.count('d')
	dropped := newUDPClient(t, "127.72.0.2", addr) // the same /24
	for i := range 100 {
		dropped.send(t, named("d", i, ""))
	}
	if got := len(dropped.finish(100)); got != 0 {
		t.Errorf("%d replies to the network in the kernel, want none", got)
	}
	if got := gathered(t, "coredns_rrl_kernel_dropped_total")[key] - before; got < 100 {
		t.Errorf("kernel_dropped_total +%v for 100 packets sent from the network in the kernel", got)
	}
	if got := up.count('d'); got != served {
		t.Errorf("the upstream saw %d of the queries dropped in the kernel", got-served)
	}

	for i := range 5 {
		if m, _ := exchangeUDP(t, "127.73.0.1", addr, named("n", i, "")); len(m.Answer) != 1 {
			t.Errorf("the neighbour network's query %d: %v", i, m)
		}
	}
	c := &dns.Client{Net: "tcp", Timeout: 2 * time.Second, Dialer: &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.72.0.3")}}}
	if m, _, err := c.Exchange(named("t", 0, ""), addr); err != nil || len(m.Answer) != 1 {
		t.Errorf("TCP from the network in the kernel: %v %v", m, err)
	}

	out := false
	for range 100 { // kernel-drop-for is 2s: wait for it, up to 10s
		if out = gathered(t, "coredns_rrl_kernel_networks")[key] == 0; out {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !out {
		t.Fatal("the network stayed in the kernel past kernel-drop-for")
	}
	if m, _ := exchangeUDP(t, "127.72.0.4", addr, named("a", 0, "")); len(m.Answer) != 1 {
		t.Errorf("after kernel-drop-for the network is served again; got %v", m)
	}
}

// TestIntegrationKernelDropReportOnly: in report-only mode the network is
// listed but nothing goes into the kernel: its queries still reach the
// server, and no privilege is needed.
func TestIntegrationKernelDropReportOnly(t *testing.T) {
	up := startUpstream(t)
	addr, port := prefixBlock(t, up, "requests-per-second 20\n        report-only\n        kernel-drop lo\n        kernel-drop-after 300ms")
	key := "server=dns://127.0.0.1:" + port + ",zone=req.test."
	flooder := newUDPClient(t, "127.74.0.1", addr)
	listed := false
	for i := 0; i < 20000 && !listed; i++ {
		flooder.send(t, named("f", i, ""))
		if i%50 == 0 {
			time.Sleep(5 * time.Millisecond) // paces the flood; nothing is asserted on time
			listed = gathered(t, "coredns_rrl_kernel_networks")[key] == 1
		}
	}
	flooder.finish(0)
	if !listed {
		t.Fatal("report-only: the flooded network was never listed")
	}
	if got := gathered(t, "coredns_rrl_kernel_dropped_total")[key]; got != 0 {
		t.Errorf("report-only: kernel_dropped_total %v, want 0", got)
	}
	if m, _ := exchangeUDP(t, "127.74.0.2", addr, named("r", 0, "")); len(m.Answer) != 1 {
		t.Errorf("report-only: the listed network is still served; got %v", m)
	}
}
