package rrl_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/miekg/dns"

	"github.com/dnsrrl/rrl/kerneldrop"
	"github.com/dnsrrl/rrl/kerneldrop/kdtest"
)

// getJSON decodes the JSON document at url into v.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
}

// needKernelDrop skips t unless this process may attach the kernel drop
// list's XDP program to lo, saying why not.
func needKernelDrop(t *testing.T) {
	t.Helper()
	kdtest.NeedRoot(t)
	l, err := kerneldrop.Open(kerneldrop.Config{Interfaces: []string{"lo"}})
	if err != nil {
		t.Skipf("the kernel refuses the kernel drop list on lo: %v", err)
	}
	l.Close()
}

// floodIntoKernel floods addr from src, paced, until the block whose
// metric labels are key lists one network in its kernel drop list (in
// report-only mode, would), at most 20,000 queries, and reports whether it
// did.
func floodIntoKernel(t *testing.T, addr, key, src string) bool {
	t.Helper()
	flooder := newUDPClient(t, src, addr)
	defer flooder.finish(0)
	for i := range 20000 {
		flooder.send(t, named("f", i, ""))
		if i%50 == 0 {
			time.Sleep(5 * time.Millisecond) // paces the flood; nothing is asserted on time
			if gathered(t, "coredns_rrl_kernel_networks")[key] == 1 {
				return true
			}
		}
	}
	return false
}

// droppedInKernel sends 100 queries from src to addr and checks that none
// is answered and that the kernel counted them for the block of key.
func droppedInKernel(t *testing.T, addr, key, src string) {
	t.Helper()
	before := gathered(t, "coredns_rrl_kernel_dropped_total")[key]
	c := newUDPClient(t, src, addr)
	for i := range 100 {
		c.send(t, named("d", i, ""))
	}
	if got := len(c.finish(100)); got != 0 {
		t.Errorf("%d replies to %s, in the kernel; want none", got, src)
	}
	if got := gathered(t, "coredns_rrl_kernel_dropped_total")[key] - before; got < 100 {
		t.Errorf("kernel_dropped_total{%s} +%v for the 100 queries of %s", key, got, src)
	}
}

// TestIntegrationKernelDrop: a network flooding over requests-per-second
// goes into the kernel after kernel-drop-after; its UDP packets are then
// dropped before they reach CoreDNS (counted by the kernel, listed with
// their time left), while a neighbour network and the flooded network's
// TCP are served; after kernel-drop-for it is answered again.
func TestIntegrationKernelDrop(t *testing.T) {
	needKernelDrop(t)
	up := startUpstream(t)
	status := "127.0.0.1:" + strconv.Itoa(freePort(t, "tcp"))
	addr, port := prefixBlock(t, up, "requests-per-second 20\n        kernel-drop lo\n        kernel-drop-after 300ms\n        kernel-drop-for 2s\n        status "+status)
	key := "server=dns://127.0.0.1:" + port + ",zone=req.test."

	if !floodIntoKernel(t, addr, key, "127.72.0.1") {
		t.Fatalf("the flooded network never went into the kernel: kernel_networks %v", gathered(t, "coredns_rrl_kernel_networks"))
	}
	var doc struct {
		Blocks []struct {
			Kernel []struct {
				Network     string  `json:"network"`
				LeftSeconds float64 `json:"left_seconds"`
			} `json:"kernel"`
		} `json:"blocks"`
	}
	getJSON(t, "http://"+status+"/rrl/limited", &doc)
	if len(doc.Blocks) != 1 || len(doc.Blocks[0].Kernel) != 1 || doc.Blocks[0].Kernel[0].Network != "127.72.0.0/24" ||
		doc.Blocks[0].Kernel[0].LeftSeconds <= 0 || doc.Blocks[0].Kernel[0].LeftSeconds > 2 {
		t.Errorf("/rrl/limited %+v, want 127.72.0.0/24 in the kernel with up to 2 s left", doc)
	}

	served := up.count('d')
	droppedInKernel(t, addr, key, "127.72.0.2") // the same /24
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
	if !floodIntoKernel(t, addr, key, "127.74.0.1") {
		t.Fatal("report-only: the flooded network was never listed")
	}
	if got := gathered(t, "coredns_rrl_kernel_dropped_total")[key]; got != 0 {
		t.Errorf("report-only: kernel_dropped_total %v, want 0", got)
	}
	if m, _ := exchangeUDP(t, "127.74.0.2", addr, named("r", 0, "")); len(m.Answer) != 1 {
		t.Errorf("report-only: the listed network is still served; got %v", m)
	}
}

// xdpProgram returns the id of the XDP program attached to lo, as ip(8)
// shows it, or "" when none is.
func xdpProgram(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("ip", "link", "show", "lo").CombinedOutput()
	if err != nil {
		t.Skipf("ip link show lo: %v %s", err, out)
	}
	if m := regexp.MustCompile(`prog/xdp id (\d+)`).FindSubmatch(out); m != nil {
		return string(m[1])
	}
	return ""
}

// TestIntegrationKernelDropReload: a reload hands the XDP program to the
// new configuration without detaching it (the same program stays on lo),
// and the network in the kernel stays there, dropped by the new block;
// the last shutdown detaches the program.
func TestIntegrationKernelDropReload(t *testing.T) {
	needKernelDrop(t)
	startServer(t) // for the directive order
	up := startUpstream(t)
	port := freePort(t, "udp")
	corefile := func(rate int) string {
		return fmt.Sprintf(`req.test.:%d {
    bind 127.0.0.1
    rrl {
        requests-per-second %d
        kernel-drop lo
        kernel-drop-after 300ms
        kernel-drop-for 1m
    }
    forward . %s
}
`, port, rate, up.addr)
	}
	inst, err := caddy.Start(input{[]byte(corefile(20))})
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	key := "server=dns://127.0.0.1:" + strconv.Itoa(port) + ",zone=req.test."
	before := xdpProgram(t)
	if before == "" || !floodIntoKernel(t, addr, key, "127.75.0.1") {
		inst.Stop()
		inst.ShutdownCallbacks()
		t.Fatalf("after start: XDP program %q; the flooded network never went into the kernel", before)
	}
	if inst, err = inst.Restart(input{[]byte(corefile(30))}); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if after := xdpProgram(t); after != before {
		t.Errorf("XDP program on lo %q before the reload, %q after: it was detached", before, after)
	}
	if got := gathered(t, "coredns_rrl_kernel_networks")[key]; got != 1 {
		t.Errorf("after the reload kernel_networks %v: the network in the kernel was let go", got)
	}
	droppedInKernel(t, addr, key, "127.75.0.2")
	inst.Stop()
	inst.ShutdownCallbacks()
	if got := xdpProgram(t); got != "" {
		t.Errorf("XDP program %s still on lo after the last shutdown", got)
	}
}

// TestIntegrationKernelDropBlocksShare: server blocks on lo share the one
// XDP program, each on its own port dropping the networks its own limit
// refuses; and blocks on the same address share one kernel drop list, so
// that a network either of them keeps refusing is dropped there (the
// first block's metrics report it).
func TestIntegrationKernelDropBlocksShare(t *testing.T) {
	needKernelDrop(t)
	up := startUpstream(t)
	lines := "requests-per-second 20\n        kernel-drop lo\n        kernel-drop-after 300ms"
	addrA, portA := prefixBlock(t, up, lines)
	addrB, portB := prefixBlock(t, up, lines)
	for _, b := range []struct{ addr, port, src string }{{addrA, portA, "127.76.0.1"}, {addrB, portB, "127.77.0.1"}} {
		key := "server=dns://127.0.0.1:" + b.port + ",zone=req.test."
		if !floodIntoKernel(t, b.addr, key, b.src) {
			t.Fatalf("the block on port %s never put its flooding network into the kernel", b.port)
		}
		droppedInKernel(t, b.addr, key, strings.TrimSuffix(b.src, ".1")+".2")
	}

	p := freePort(t, "udp")
	block := func(zone string) string {
		return fmt.Sprintf("%s:%d {\n    bind 127.0.0.1\n    rrl {\n        %s\n    }\n    forward . %s\n}\n", zone, p, lines, up.addr)
	}
	startCorefile(t, block("first.test.")+block("req.test."))
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	key := "server=dns://127.0.0.1:" + strconv.Itoa(p) + ",zone=first.test." // the first block reports the list
	if !floodIntoKernel(t, addr, key, "127.83.0.1") {                        // req.test. queries: the second block refuses them
		t.Fatal("the network the second block refused never went into the shared list")
	}
	droppedInKernel(t, addr, key, "127.83.0.2")
}

// TestKernelDropBlocksMustAgree: blocks that share an address share one
// kernel drop list, so a configuration whose blocks share only some of
// their addresses, or differ in its settings, is refused, naming them.
func TestKernelDropBlocksMustAgree(t *testing.T) {
	startServer(t) // for the directive order
	p, q := freePort(t, "udp"), freePort(t, "udp")
	block := func(zone, keys, extra string) string {
		return fmt.Sprintf("%s {\n    bind 127.0.0.1\n    rrl %s {\n        requests-per-second 20\n        kernel-drop lo\n%s    }\n}\n", keys, zone, extra)
	}
	for _, tc := range []struct{ corefile, want string }{
		{block("a.test.", fmt.Sprintf("a.test.:%d", p), "") + block("b.test.", fmt.Sprintf("b.test.:%d b.test.:%d", p, q), ""), "share 127.0.0.1:"},
		{block("a.test.", fmt.Sprintf("a.test.:%d", p), "") + block("b.test.", fmt.Sprintf("b.test.:%d", p), "        kernel-drop-for 30s\n"), "need the same addresses"},
		{block("a.test.", fmt.Sprintf("tls://a.test.:%d", p), ""), "serves no plain DNS"},
	} {
		inst, err := caddy.Start(input{[]byte(tc.corefile)})
		if err == nil {
			inst.Stop()
			inst.ShutdownCallbacks()
			t.Errorf("started:\n%s", tc.corefile)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want it to say %q", err, tc.want)
		}
	}
}

// TestIntegrationKernelDropSparesExempt: a network that holds a client of
// exempt-clients never goes into the kernel, however long it floods, and
// the exempt client is answered throughout.
func TestIntegrationKernelDropSparesExempt(t *testing.T) {
	needKernelDrop(t)
	up := startUpstream(t)
	addr, port := prefixBlock(t, up, "requests-per-second 20\n        exempt-clients 127.82.0.9\n        kernel-drop lo\n        kernel-drop-after 200ms")
	key := "server=dns://127.0.0.1:" + port + ",zone=req.test."
	flooder := newUDPClient(t, "127.82.0.1", addr)
	deadline := time.Now().Add(time.Second) // five times kernel-drop-after
	for i := 0; time.Now().Before(deadline); i++ {
		flooder.send(t, named("f", i, ""))
		if i%50 == 0 {
			time.Sleep(5 * time.Millisecond) // paces the flood; nothing is asserted on time
		}
	}
	flooder.finish(0)
	if got := gathered(t, "coredns_rrl_kernel_networks")[key]; got != 0 {
		t.Errorf("kernel_networks %v: the network of an exempt client went into the kernel", got)
	}
	if m, _ := exchangeUDP(t, "127.82.0.9", addr, named("e", 0, "")); len(m.Answer) != 1 {
		t.Errorf("the exempt client: %v", m)
	}
}
