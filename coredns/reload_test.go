package rrl_test

import (
	"bytes"
	"fmt"
	stdlog "log"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/miekg/dns"

	rrl "github.com/dnsrrl/rrl/coredns"
)

// TestReloadKeepsServingAndMetrics restarts a CoreDNS instance with a new
// Corefile, as the reload plugin does: the new limits apply at once, and
// the table metrics describe the new block only.
func TestReloadKeepsServingAndMetrics(t *testing.T) {
	startServer(t) // for the directive order
	port := freePort(t, "udp")
	corefile := func(rate int) string {
		return fmt.Sprintf(`reload.test.:%d {
    bind 127.0.0.1
    rrl {
        errors-per-second %d
        max-table-size %d
    }
}
`, port, rate, 1000+rate)
	}
	inst, err := caddy.Start(input{[]byte(corefile(2))})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { inst.Stop(); inst.ShutdownCallbacks() }()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	count := func(src string) int {
		c := &dns.Client{Net: "udp", Timeout: 300 * time.Millisecond,
			Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(src)}}}
		answered := 0
		for range 10 {
			if m, _, err := c.Exchange(q("reload.test.", dns.TypeA), addr); err == nil && !m.Truncated {
				answered++
			}
		}
		return answered
	}
	if n := count("127.0.40.1"); n > 2+slack {
		t.Errorf("before reload: %d of 10 answered, want about 2", n)
	}
	inst, err = inst.Restart(input{[]byte(corefile(100))})
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	if n := count("127.0.40.1"); n != 10 {
		t.Errorf("after reload to 100/s: %d of 10 answered, want all", n)
	}
	page := scrape(t)
	series := 0
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, "coredns_rrl_table_max_size{") && strings.Contains(line, `zone="reload.test."`) {
			series++
			if !strings.HasSuffix(line, " 1100") {
				t.Errorf("stale table after reload: %s", line)
			}
		}
	}
	if series != 1 {
		t.Errorf("%d table series for the reloaded block, want 1", series)
	}
}

// TestIntegrationReloadKeepsAccounts floods a name from one network, then
// reloads CoreDNS with the same Corefile: the network's account is still in
// debt, so the reload second answers it nothing, where a fresh table would
// hand it a whole second's allowance again. A failed reload keeps the
// accounts too; a reload that changes the settings starts afresh and says so.
func TestIntegrationReloadKeepsAccounts(t *testing.T) {
	lb := captureLogs(t)
	startServer(t) // for the directive order
	port := freePort(t, "udp")
	const rate = 20 // errors-per-second; the default window of 15 s allows a debt of 300
	corefile := func(rate int, extra string) string {
		return fmt.Sprintf("keep.test.:%d {\n    bind 127.0.0.1\n    rrl {\n        errors-per-second %d\n    }\n}\n%s", port, rate, extra)
	}
	limitersBefore := rrl.KeptLimiters()
	inst, err := caddy.Start(input{[]byte(corefile(rate, ""))})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { inst.Stop(); inst.ShutdownCallbacks() }()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	const src = "127.0.43.1"
	flood := func() int {
		return burstTo(t, addr, src, repeat(200, func(int) *dns.Msg { return q("keep.test.", dns.TypeA) })).answered
	}
	if n := flood(); n < rate/2 || n > 2*rate {
		t.Fatalf("first flood: %d of 200 answered, want about %d", n, rate)
	}

	// The flood left the account 180 responses in debt; the second or two
	// that the reload and the next flood take repay 20 to 40 of them.
	for i := range 3 {
		if inst, err = inst.Restart(input{[]byte(corefile(rate, ""))}); err != nil {
			t.Fatalf("reload: %v", err)
		}
		if n := flood(); n > slack {
			t.Errorf("flood after reload %d: %d of 200 answered, want none (a second burst)", i+1, n)
		}
	}
	if !strings.Contains(lb.String(), "kept accounts for [keep.test.]") {
		t.Errorf("no log line says the accounts were kept:\n%s", lb)
	}
	if n := rrl.KeptLimiters(); n != limitersBefore+1 {
		t.Errorf("after 3 reloads the registry holds %d limiters, want %d", n, limitersBefore+1)
	}

	// A reload that fails after its blocks started (a port that cannot
	// be bound) leaves the old block serving with its accounts.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	broken := corefile(rate, fmt.Sprintf("busy.test.:%d {\n    bind 127.0.0.1\n}\n", busy.Addr().(*net.TCPAddr).Port))
	if _, err := inst.Restart(input{[]byte(broken)}); err == nil {
		t.Fatal("the reload onto a busy port worked: the test cannot check a failed reload")
	}
	if n := flood(); n > slack {
		t.Errorf("flood after a failed reload: %d of 200 answered, want none", n)
	}
	if inst, err = inst.Restart(input{[]byte(corefile(rate, ""))}); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if n := flood(); n > slack {
		t.Errorf("flood after a reload that followed a failed one: %d of 200 answered, want none", n)
	}

	// Other settings: a fresh table, as documented.
	if inst, err = inst.Restart(input{[]byte(corefile(rate+1, ""))}); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if n := flood(); n < rate/2 {
		t.Errorf("flood after a reload that changed the settings: %d of 200 answered, want about %d (a fresh table)", n, rate+1)
	}
	if !strings.Contains(lb.String(), "reset accounts for [keep.test.]") {
		t.Errorf("no log line says the accounts were reset:\n%s", lb)
	}
	if n := rrl.KeptLimiters(); n != limitersBefore+1 {
		t.Errorf("after a changed reload the registry holds %d limiters, want %d", n, limitersBefore+1)
	}
}

// TestIntegrationWarnsProvenWithoutUnproven: proven-requests-per-second
// alone leaves requests without a valid cookie unlimited, which CoreDNS says
// at startup; with requests-per-second as well, it says nothing.
func TestIntegrationWarnsProvenWithoutUnproven(t *testing.T) {
	lb := captureLogs(t)
	startServer(t)
	const warning = "proven-requests-per-second is set for [trap.test.] without requests-per-second"
	for _, tc := range []struct {
		settings string
		warn     bool
	}{
		{"proven-requests-per-second 50", true},
		{"requests-per-second 0\n        proven-requests-per-second 50", true},
		{"requests-per-second 5\n        proven-requests-per-second 50", false},
		{"requests-per-second 5", false},
		{"responses-per-second 5", false},
	} {
		lb.reset()
		port := freePort(t, "udp")
		inst, err := caddy.Start(input{[]byte(fmt.Sprintf("trap.test.:%d {\n    bind 127.0.0.1\n    rrl {\n        %s\n    }\n}\n", port, tc.settings))})
		if err != nil {
			t.Fatal(err)
		}
		inst.Stop()
		inst.ShutdownCallbacks()
		if got := strings.Contains(lb.String(), "[WARNING] plugin/rrl: "+warning); got != tc.warn {
			t.Errorf("%q: warned %v, want %v:\n%s", tc.settings, got, tc.warn, lb)
		}
	}
}

// logLines captures the standard logger, which CoreDNS's log writes to.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logLines) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Reset()
}

func captureLogs(t *testing.T) *logLines {
	t.Helper()
	l := new(logLines)
	old := stdlog.Writer()
	stdlog.SetOutput(l)
	t.Cleanup(func() { stdlog.SetOutput(old) })
	return l
}
