package rrl_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	"github.com/miekg/dns"

	rrl "github.com/dnsrrl/rrl/coredns"
)

// BenchmarkRequestCost compares the server's CPU time for a request that
// requests-per-second refuses with that for one answered from a zone file
// (file) and one answered by forward from an upstream in another process,
// in a real CoreDNS configuration: each operation unpacks the query, runs
// the chain from rrl down, and packs and sends the response over a UDP
// socket on loopback, as the server does. What the server does before
// the chain (reading the packet, starting its goroutine) is the same for
// all three; the +read figures add a loopback send and read of each query.
// cpu-ns/op is the process's user and
// system time per operation (getrusage), so forward's waiting for the
// upstream does not count, and the upstream's work is in its own process.
//
//	go test -run '^$' -bench RequestCost -count 6 ./coredns/
func BenchmarkRequestCost(b *testing.B) {
	chains := costChains(b)
	for _, read := range []bool{false, true} {
		for _, kind := range []string{"zone", "forwarded", "refused"} {
			name := kind
			if read {
				name += "+read"
			}
			b.Run(name, func(b *testing.B) { runRequestCost(b, chains[kind+".test."], kind, read) })
		}
	}
}

// runRequestCost runs one kind of request through h. With read, each
// query first travels over a loopback UDP socket, so that the figure also
// has the server's read and the client's send (which does the loopback
// delivery): an upper bound of what the whole server spends.
func runRequestCost(b *testing.B, h plugin.Handler, kind string, read bool) {
	query := costQuery(b, "www."+kind+".test.")
	w := newSendingWriter(b)
	var client, server *net.UDPConn
	if read {
		client, server = udpPair(b)
	}
	buf := make([]byte, 512)
	ctx := context.Background()
	answered := 0
	b.ReportAllocs()
	before := cpuTime()
	for b.Loop() {
		in := query
		if read {
			if _, err := client.Write(query); err != nil {
				b.Fatal(err)
			}
			n, err := server.Read(buf)
			if err != nil {
				b.Fatal(err)
			}
			in = buf[:n]
		}
		m := new(dns.Msg)
		if err := m.Unpack(in); err != nil {
			b.Fatal(err)
		}
		w.wrote = false
		h.ServeDNS(ctx, w, m)
		if w.wrote {
			answered++
		}
	}
	b.ReportMetric(float64(cpuTime()-before)/float64(b.N), "cpu-ns/op")
	if kind == "refused" && answered > 2 || kind != "refused" && answered != b.N {
		b.Fatalf("%s: %d of %d answered", kind, answered, b.N)
	}
}

// udpPair returns a client socket connected to a server socket on loopback.
func udpPair(b *testing.B) (client, server *net.UDPConn) {
	server, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	client, err = net.DialUDP("udp", nil, server.LocalAddr().(*net.UDPAddr))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// cpuTime is the process's user and system time so far, in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func costQuery(b *testing.B, name string) []byte {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	buf, err := m.Pack()
	if err != nil {
		b.Fatal(err)
	}
	return buf
}

// costUpstreamEnv makes the test binary, started again with it set to an
// address, a DNS server for forward to ask, in a process of its own.
const costUpstreamEnv = "RRL_COST_UPSTREAM"

func init() {
	addr := os.Getenv(costUpstreamEnv)
	if addr == "" {
		return
	}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		rr, _ := dns.NewRR(r.Question[0].Name + " 60 IN A 192.0.2.1")
		m.Answer = []dns.RR{rr}
		w.WriteMsg(m)
	})
	go func() {
		// The parent closes our standard input when it is done.
		os.Stdin.Read(make([]byte, 1))
		os.Exit(0)
	}()
	err := (&dns.Server{Addr: addr, Net: "udp", Handler: h}).ListenAndServe()
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

var (
	probeOnce sync.Once
	probed    = map[string]*dnsserver.Config{}
	probedMu  sync.Mutex
)

// costChains starts the upstream and a CoreDNS with three blocks, and
// returns the rrl handler (the chain from rrl down) of each, by zone.
func costChains(b *testing.B) map[string]plugin.Handler {
	b.Helper()
	probeOnce.Do(func() {
		plugin.Register("costprobe", func(c *caddy.Controller) error {
			cfg := dnsserver.GetConfig(c)
			probedMu.Lock()
			probed[cfg.Zone] = cfg
			probedMu.Unlock()
			return nil
		})
		dnsserver.Directives = append(dnsserver.Directives, "costprobe")
	})
	upAddr := "127.0.0.1:" + strconv.Itoa(freePortB(b))
	up := exec.Command(os.Args[0], "-test.run=^$")
	up.Env = append(os.Environ(), costUpstreamEnv+"="+upAddr)
	stdin, err := up.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := up.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stdin.Close(); up.Wait() })
	c := &dns.Client{Timeout: 200 * time.Millisecond}
	for i := 0; ; i++ {
		if _, _, err := c.Exchange(q("up.forwarded.test.", dns.TypeA), upAddr); err == nil {
			break
		} else if i == 100 {
			b.Fatalf("upstream: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // bounded polling while it starts
	}

	dir := b.TempDir()
	for _, z := range []string{"zone", "refused"} {
		zone := fmt.Sprintf("$ORIGIN %s.test.\n@ 3600 IN SOA ns1 hostmaster 1 7200 3600 1209600 300\n@ 3600 IN NS ns1\nns1 3600 IN A 127.0.0.1\nwww 3600 IN A 192.0.2.1\n", z)
		if err := os.WriteFile(filepath.Join(dir, "db."+z), []byte(zone), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	port := freePortB(b)
	block := func(zone, limit, backend string) string {
		return fmt.Sprintf("%s:%d {\n    bind 127.0.0.1\n    costprobe\n    rrl {\n        requests-per-second %s\n        responses-per-second 1000000\n    }\n    %s\n}\n", zone, port, limit, backend)
	}
	corefile := block("zone.test.", "1000000", "file "+filepath.Join(dir, "db.zone")) +
		block("forwarded.test.", "1000000", "forward . "+upAddr) +
		block("refused.test.", "1", "file "+filepath.Join(dir, "db.refused"))
	dnsserver.Directives = rrl.InsertDirective(dnsserver.Directives)
	inst, err := caddy.Start(input{[]byte(corefile)})
	if err != nil {
		b.Fatalf("start: %v", err)
	}
	b.Cleanup(func() { inst.Stop(); inst.ShutdownCallbacks() })
	chains := map[string]plugin.Handler{}
	probedMu.Lock()
	defer probedMu.Unlock()
	for _, z := range []string{"zone.test.", "forwarded.test.", "refused.test."} {
		cfg := probed[z]
		if cfg == nil || cfg.Handler("rrl") == nil {
			b.Fatalf("no rrl chain for %s", z)
		}
		chains[z] = cfg.Handler("rrl")
	}
	return chains
}

func freePortB(b *testing.B) int {
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

// sendingWriter is a ResponseWriter of a UDP client on 127.0.60.1 that
// packs what is written and sends it to a socket that nobody reads, as the
// server's writer packs and sends.
type sendingWriter struct {
	conn  *net.UDPConn
	wrote bool
}

func newSendingWriter(b *testing.B) *sendingWriter {
	sink, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 60, 1)})
	if err != nil {
		b.Fatal(err)
	}
	conn, err := net.DialUDP("udp", nil, sink.LocalAddr().(*net.UDPAddr))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close(); sink.Close() })
	return &sendingWriter{conn: conn}
}

func (w *sendingWriter) LocalAddr() net.Addr {
	return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53}
}
func (w *sendingWriter) RemoteAddr() net.Addr {
	return &net.UDPAddr{IP: net.IPv4(127, 0, 60, 1), Port: 40000}
}
func (w *sendingWriter) WriteMsg(m *dns.Msg) error {
	buf, err := m.Pack()
	if err != nil {
		return err
	}
	_, err = w.Write(buf)
	return err
}
func (w *sendingWriter) Write(b []byte) (int, error) { w.wrote = true; return w.conn.Write(b) }
func (w *sendingWriter) Close() error                { return nil }
func (w *sendingWriter) TsigStatus() error           { return nil }
func (w *sendingWriter) TsigTimersOnly(bool)         {}
func (w *sendingWriter) Hijack()                     {}
