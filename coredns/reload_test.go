package rrl_test

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/miekg/dns"
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
