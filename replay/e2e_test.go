package replay_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dnsrrl/rrl/replay"
	"github.com/miekg/dns"
)

// The CoreDNS binary of this repository runs the rrl plugin in report-only
// mode with its dnstap plugin writing to a replay's socket. Clients in
// several networks flood it over UDP; the replay's counts, per category and
// action, equal the plugin's metrics for the same traffic and settings.
// One floods random names under a wildcard of the unsigned zone: the
// replay reads the zone file from the Corefile, so that it charges those
// answers to the wildcard, as the plugin does, though the traffic does not
// show that they were synthesised.
//
// The allowances are fractions of a response per second so that the
// decisions do not hang on the microseconds by which the server's clock and
// the dnstap timestamps differ.
func TestCoreDNSEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs CoreDNS")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool to build CoreDNS with")
	}
	dir := t.TempDir()
	coredns := filepath.Join(dir, "coredns")
	build := exec.Command(goTool, "build", "-o", coredns, "./cmd/coredns")
	build.Dir = "../coredns"
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building CoreDNS: %v\n%s", err, out)
	}
	zoneDir, err := filepath.Abs("../coredns/example")
	if err != nil {
		t.Fatal(err)
	}
	dnsPort, metricsPort := freePort(t), freePort(t)
	sock := filepath.Join(dir, "tap.sock")
	corefile := filepath.Join(dir, "Corefile")
	conf := fmt.Sprintf(`example.test.:%d {
    bind 127.0.0.1
    root %s
    prometheus 127.0.0.1:%d
    dnstap unix://%s full
    rrl {
        window 5
        responses-per-second 0.1
        nxdomains-per-second 0.1
        referrals-per-second 0.1
        nodata-per-second 0.1
        slip-ratio 3
        report-only
    }
    file db.example.test
}
`, dnsPort, zoneDir, metricsPort, sock)
	if err := os.WriteFile(corefile, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}

	cf, err := replay.ParseCorefile(corefile, strings.NewReader(conf))
	if err != nil {
		t.Fatal(err)
	}
	zoneData, err := cf.ReadZones()
	if err != nil {
		t.Fatal(err)
	}
	r, err := replay.New(replay.Options{Settings: cf.Settings, Zones: cf.Zones, CookieSecrets: cf.CookieSecrets, ZoneData: zoneData})
	if err != nil {
		t.Fatal(err)
	}
	l, err := replay.ListenOn("unix:" + sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	listening := make(chan error, 1)
	go func() { listening <- r.Listen(ctx, l) }()
	defer func() {
		cancel()
		<-listening
	}()

	cmd := exec.Command(coredns, "-conf", corefile)
	cmd.Dir = dir
	logFile, _ := os.Create(filepath.Join(dir, "coredns.log"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(dir, "coredns.log"))
			t.Logf("CoreDNS log:\n%s", log)
		}
	}()
	server := net.JoinHostPort("127.0.0.1", strconv.Itoa(dnsPort))
	waitFor(t, "CoreDNS to answer", func() bool {
		_, err := ask(server, "127.0.9.1", "ns1.example.test.", dns.TypeA, false)
		return err == nil
	})

	// The floods: each client network asks one thing over and over.
	floods := []struct {
		from, name string
		qtype      uint16
		n          int
		tcp        bool
	}{
		{"127.0.1.1", "www.example.test.", dns.TypeA, 40, false},      // answers
		{"127.0.2.1", "nope-%d.example.test.", dns.TypeA, 30, false},  // NXDOMAIN, one account for the zone
		{"127.0.3.1", "host.sub.example.test.", dns.TypeA, 20, false}, // referrals
		{"127.0.4.1", "www.example.test.", dns.TypeMX, 20, false},     // NODATA
		{"127.0.5.1", "www.example.test.", dns.TypeAAAA, 1, false},    // a client within its allowance
		{"127.0.6.1", "www.example.test.", dns.TypeA, 10, true},       // over TCP, never response-limited
		{"127.0.7.1", "r%x.wild.example.test.", dns.TypeA, 15, false}, // random names under a wildcard: one account
	}
	sent := 1 // the query that waited for CoreDNS
	for _, f := range floods {
		for i := 0; i < f.n; i++ {
			name := f.name
			switch {
			case strings.Contains(name, "%d"):
				name = fmt.Sprintf(name, i)
			case strings.Contains(name, "%x"):
				name = fmt.Sprintf(name, rand.Uint64())
			}
			if _, err := ask(server, f.from, name, f.qtype, f.tcp); err != nil {
				t.Fatalf("%s asking %s: %v", f.from, name, err)
			}
			sent++
		}
	}
	// dnstap is written asynchronously: wait until the replay has seen
	// every query and response.
	waitFor(t, "the replay to see all the traffic", func() bool {
		_, messages := r.Stats()
		return messages >= int64(2*sent)
	})
	cancel()
	if err := <-listening; err != nil {
		t.Fatal(err)
	}
	listening <- nil

	rep := r.Reports()[0]
	// The plugin counts a response over TCP after writing it: scrape until
	// every response the replay saw is counted (bounded).
	var metrics map[string]int64
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		metrics = scrape(t, metricsPort)
		var n int64
		for _, v := range metrics {
			n += v
		}
		if n >= rep.Responses || time.Now().After(deadline) {
			break // the comparison below says what differs
		}
	}
	for _, cat := range []string{"answer", "referral", "nodata", "nxdomain", "error"} {
		c := rep.Categories[cat]
		for action, got := range map[string]int64{"send": c.Sent, "slip": c.Slipped, "drop": c.Dropped} {
			if want := metrics[cat+"/"+action]; got != want {
				t.Errorf("%s %s: replay %d, plugin %d", cat, action, got, want)
			}
		}
	}
	if rep.Responses != int64(sent) || rep.Slipped == 0 || rep.Dropped == 0 || rep.LimitedNetworks != 5 || rep.Categories["answer"].Sent < 10 {
		t.Errorf("replay: %d responses of %d, %d slipped, %d dropped, %d networks limited", rep.Responses, sent, rep.Slipped, rep.Dropped, rep.LimitedNetworks)
	}
	var names []string
	for _, l := range rep.Limited {
		names = append(names, l.Name)
	}
	if !slices.Contains(names, "*.wild.example.test.") {
		t.Errorf("the wildcard is not among the limited responses: %v", names)
	}
	if len(rep.Skipped) != 0 {
		t.Errorf("skipped %v", rep.Skipped)
	}
}

// ask sends one query from the address from, over UDP or TCP, and returns
// the response.
func ask(server, from, name string, qtype uint16, tcp bool) (*dns.Msg, error) {
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second,
		Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(from)}, Timeout: 2 * time.Second}}
	if tcp {
		c.Net, c.Dialer.LocalAddr = "tcp", &net.TCPAddr{IP: net.ParseIP(from)}
	}
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	resp, _, err := c.Exchange(m, server)
	return resp, err
}

// freePort returns a port free for both UDP and TCP on 127.0.0.1 now.
func freePort(t *testing.T) int {
	t.Helper()
	for i := 0; i < 20; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		l.Close()
		if err == nil {
			u.Close()
			return port
		}
	}
	t.Fatal("no free port")
	return 0
}

// waitFor polls cond every 20 ms, for at most 20 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

var responsesTotal = regexp.MustCompile(`^coredns_rrl_responses_total\{([^}]*)\} (\S+)$`)

// scrape reads coredns_rrl_responses_total, summed by "category/action".
func scrape(t *testing.T, port int) map[string]int64 {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		m := responsesTotal.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		labels := map[string]string{}
		for _, kv := range strings.Split(m[1], ",") {
			k, v, _ := strings.Cut(kv, "=")
			labels[k] = strings.Trim(v, `"`)
		}
		n, _ := strconv.ParseFloat(m[2], 64)
		out[labels["category"]+"/"+labels["action"]] += int64(n)
	}
	return out
}
