package rrl_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	rrl "github.com/dnsrrl/rrl/coredns"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/template"
)

// startCorefile starts a CoreDNS instance of its own, stopped with the test.
func startCorefile(t *testing.T, corefile string) *caddy.Instance {
	t.Helper()
	startServer(t) // for the directive order
	inst, err := caddy.Start(input{[]byte(corefile)})
	if err != nil {
		t.Fatalf("start: %v\n%s", err, corefile)
	}
	t.Cleanup(func() {
		if !strings.Contains(corefile, "grpc://") {
			// CoreDNS's gRPC server sets its server in Serve, in a
			// goroutine, and reads it in Stop without synchronisation
			// (core/dnsserver/server_grpc.go), which the race detector
			// reports: such an instance keeps its listeners until the
			// test binary exits.
			inst.Stop()
		}
		inst.ShutdownCallbacks()
	})
	return inst
}

// gathered returns the value of each series of a metric family in the
// default registry, keyed by its labels, and fails if the scrape does.
func gathered(t *testing.T, name string) map[string]float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			out[strings.Join(labels, ",")] = v
		}
	}
	return out
}

// TestIntegrationCachePrefetchThroughForward runs cache with prefetch over
// forward to a second CoreDNS: prefetch keeps the request's context and
// writer in a goroutine after ServeDNS returned, which a pooled recorder
// turned into a data race and a nil dereference.
func TestIntegrationCachePrefetchThroughForward(t *testing.T) {
	upPort, port := freePort(t, "udp"), freePort(t, "udp")
	startCorefile(t, fmt.Sprintf(`pf.test.:%d {
    bind 127.0.0.1
    template IN A pf.test {
        answer "{{ .Name }} 3 IN A 192.0.2.1"
    }
}
`, upPort))
	startCorefile(t, fmt.Sprintf(`pf.test.:%d {
    bind 127.0.0.1
    rrl {
        responses-per-second 100000
    }
    cache 30 {
        prefetch 1 1m 90%%
    }
    forward . 127.0.0.1:%d
}
`, port, upPort))
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	prefetches := func() float64 {
		sum := 0.0
		for _, v := range gathered(t, "coredns_cache_prefetch_total") {
			sum += v
		}
		return sum
	}
	before := prefetches()
	c := &dns.Client{Timeout: 2 * time.Second}
	extra := 10 // rounds after the first prefetch, while prefetches run
	for round := 0; round < 100 && extra > 0; round++ {
		for i := range 5 {
			m, _, err := c.Exchange(q(fmt.Sprintf("n%d.pf.test.", i), dns.TypeA), addr)
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			if len(m.Answer) != 1 || m.Truncated {
				t.Fatalf("round %d: %v", round, m)
			}
		}
		if prefetches() > before {
			extra--
		}
		time.Sleep(50 * time.Millisecond) // let the TTL run down; polling only
	}
	if prefetches() == before {
		t.Fatal("cache never prefetched: the test did not exercise what it is for")
	}
}

// TestIntegrationStreamKeyFirstOrLast: a block whose keys are a gRPC and a
// plain DNS listener limits UDP on the DNS one whatever the keys' order
// (CoreDNS copies the block's chain to every key).
func TestIntegrationStreamKeyFirstOrLast(t *testing.T) {
	for _, grpcFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("grpcFirst=%v", grpcFirst), func(t *testing.T) {
			grpcPort, dnsPort := freePort(t, "tcp"), freePort(t, "udp")
			keys := fmt.Sprintf("grpc://bt.test:%d bt.test:%d", grpcPort, dnsPort)
			if !grpcFirst {
				keys = fmt.Sprintf("bt.test:%d grpc://bt.test:%d", dnsPort, grpcPort)
			}
			startCorefile(t, keys+` {
    bind 127.0.0.1
    rrl {
        errors-per-second 1
        slip-ratio 0
    }
    acl {
        block
    }
}
`)
			addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(dnsPort))
			res := burstTo(t, addr, "127.0.77.1", repeat(30, func(int) *dns.Msg { return q("bt.test.", dns.TypeA) }))
			if res.answered == 0 || res.answered > 1+slack || res.dropped() == 0 {
				t.Errorf("plain DNS over UDP on %s: %v; want about 1 answered, the rest dropped", keys, res)
			}
		})
	}
}

// TestIntegrationFailedReloadLeavesNothing: a reload that fails after the
// new blocks started (here: a listener that cannot be bound) must not leave
// them behind: no table series of theirs, no ticker; a reload that works
// and the final shutdown leave no ticker either.
func TestIntegrationFailedReloadLeavesNothing(t *testing.T) {
	startServer(t)
	base := rrl.RunningTickers()
	port := freePort(t, "udp")
	block := func(zone string, port int) string {
		return fmt.Sprintf("%s:%d {\n    bind 127.0.0.1\n    rrl {\n        errors-per-second 5\n    }\n}\n", zone, port)
	}
	inst, err := caddy.Start(input{[]byte(block("fr.test.", port))})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			inst.Stop()
			inst.ShutdownCallbacks()
		}
	}()
	if n := rrl.WaitTickers(base + 1); n != base+1 {
		t.Fatalf("%d tickers after start, want %d", n, base+1)
	}

	// A port held by a socket without SO_REUSEPORT cannot be bound.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port
	if _, err := inst.Restart(input{[]byte(block("fr.test.", port) + block("fr-new.test.", busyPort))}); err == nil {
		t.Fatal("the reload onto a busy port worked: the test cannot check a failed reload")
	}
	for k := range gathered(t, "coredns_rrl_table_max_size") {
		if strings.Contains(k, "fr-new.test.") {
			t.Errorf("the failed reload's block is still reported: %s", k)
		}
	}
	if n := rrl.WaitTickers(base + 1); n != base+1 {
		t.Errorf("%d tickers after the failed reload, want %d", n, base+1)
	}

	inst, err = inst.Restart(input{[]byte(block("fr.test.", port))})
	if err != nil {
		t.Fatalf("reload: %v", err)
	}
	if n := rrl.WaitTickers(base + 1); n != base+1 {
		t.Errorf("%d tickers after a reload, want %d", n, base+1)
	}
	inst.Stop()
	inst.ShutdownCallbacks()
	stopped = true
	if n := rrl.WaitTickers(base); n != base {
		t.Errorf("%d tickers after shutdown, want %d", n, base)
	}
	for k := range gathered(t, "coredns_rrl_table_max_size") {
		if strings.Contains(k, "fr.test.") {
			t.Errorf("a block that shut down is still reported: %s", k)
		}
	}
	for k := range gathered(t, "coredns_rrl_responses_total") {
		if strings.Contains(k, "zone=fr.test.") || strings.Contains(k, "zone=fr-new.test.") {
			t.Errorf("a series of a zone no block has is left: %s", k)
		}
	}
}

// TestIntegrationIPv6AndWildcardWithoutMetadata: over real IPv6 sockets
// (::1), without the metadata plugin, the names under a wildcard served by
// the file plugin share one account; TCP over IPv6 is still answered.
func TestIntegrationIPv6AndWildcardWithoutMetadata(t *testing.T) {
	c, err := net.ListenPacket("udp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	port := c.LocalAddr().(*net.UDPAddr).Port
	c.Close()
	zf := filepath.Join(t.TempDir(), "db.example.test")
	if err := os.WriteFile(zf, []byte(zoneFile), 0o644); err != nil {
		t.Fatal(err)
	}
	startCorefile(t, fmt.Sprintf(`example.test.:%d {
    bind ::1
    rrl {
        responses-per-second 5
        window 5
        slip-ratio 2
    }
    file %s
}
`, port, zf))
	addr := net.JoinHostPort("::1", strconv.Itoa(port))
	res := burstTo(t, addr, "::1", repeat(40, func(i int) *dns.Msg {
		return q("v6host"+strconv.Itoa(i)+".wild.example.test.", dns.TypeA)
	}))
	if res.answered == 0 || res.answered > allowance+slack || res.dropped() == 0 || res.truncated == 0 {
		t.Errorf("40 names under one wildcard from ::1: %v; want one account limited at %d, with slips and drops", res, allowance)
	}
	tc := &dns.Client{Net: "tcp", Timeout: 2 * time.Second}
	m, _, err := tc.Exchange(q("v6host0.wild.example.test.", dns.TypeA), addr)
	if err != nil || len(m.Answer) != 1 {
		t.Errorf("TCP over IPv6 after the flood: %v %v", m, err)
	}
}
