package rrl_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/miekg/dns"

	"github.com/dnsrrl/rrl/miekgrrl"
)

// statusDoc is the document of the status endpoint.
type statusDoc struct {
	Blocks []struct {
		Zones      []string
		Servers    []string
		ReportOnly bool `json:"report_only"`
		Limited    []miekgrrl.LimitedJSON
	}
}

// getStatus reads the status endpoint with a real HTTP client.
func getStatus(t *testing.T, url string) statusDoc {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	var doc statusDoc
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return doc
}

const statusCorefile = `status.test.:%d {
    bind 127.0.0.1
    rrl {
        responses-per-second %d
        status 127.0.0.1:%d
        log-limited 1s 3
    }
    template IN A status.test {
        answer "{{ .Name }} 60 IN A 192.0.2.9"
    }
}
`

// TestIntegrationStatus floods a real CoreDNS over UDP and reads who is
// limited from the status endpoint and from the log-limited line; then
// reloads onto the same status port, and shuts down, which closes it.
func TestIntegrationStatus(t *testing.T) {
	startServer(t) // for the directive order
	logs := captureLogs(t)

	dnsPort, statusPort := freePort(t, "udp"), freePort(t, "tcp")
	inst, err := caddy.Start(input{[]byte(fmt.Sprintf(statusCorefile, dnsPort, 2, statusPort))})
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
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(dnsPort))
	statusURL := fmt.Sprintf("http://127.0.0.1:%d/rrl/limited", statusPort)

	if doc := getStatus(t, statusURL); len(doc.Blocks) != 1 || len(doc.Blocks[0].Limited) != 0 {
		t.Errorf("before any traffic: %+v, want one block and nothing limited", doc)
	}
	res := burstTo(t, addr, "127.0.51.1", repeat(20, func(int) *dns.Msg { return q("www.status.test.", dns.TypeA) }))
	burstTo(t, addr, "127.0.52.1", repeat(8, func(int) *dns.Msg { return q("other.status.test.", dns.TypeA) }))
	doc := getStatus(t, statusURL+"?order=refused&n=1")
	if len(doc.Blocks) != 1 || len(doc.Blocks[0].Limited) != 1 {
		t.Fatalf("after the floods: %+v, want one block with one account (n=1)", doc)
	}
	b := doc.Blocks[0]
	if strings.Join(b.Zones, " ") != "status.test." || b.ReportOnly {
		t.Errorf("block %v report-only %v, want status.test., enforcing", b.Zones, b.ReportOnly)
	}
	got := b.Limited[0]
	want := miekgrrl.LimitedJSON{Network: "127.0.51.0/24", Limit: "responses-per-second", Name: "www.status.test.",
		Type: "A", Class: "IN", Since: got.Since, DebtSeconds: got.DebtSeconds, Refused: int64(res.sent - res.answered)}
	if got != want || got.DebtSeconds <= 0 || time.Since(got.Since) > time.Minute {
		t.Errorf("most refused: %+v\nwant         %+v, in debt, since the flood (%v)", got, want, res)
	}
	if all := getStatus(t, statusURL).Blocks[0].Limited; len(all) != 2 {
		t.Errorf("by debt: %+v, want both flooded networks", all)
	}

	// log-limited: a line within a few periods naming both networks.
	var line string
	for deadline := time.Now().Add(10 * time.Second); line == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for l := range strings.SplitSeq(logs.String(), "\n") {
			if strings.Contains(l, "limited now in [status.test.]") {
				line = l
			}
		}
	}
	wantLine := fmt.Sprintf("limited now in [status.test.]: 2 networks, 2 accounts; 127.0.51.0/24 %d refused in ", res.sent-res.answered)
	if !strings.Contains(line, wantLine) || !strings.Contains(line, "127.0.52.0/24") ||
		!strings.Contains(line, "responses-per-second for www.status.test. IN A") {
		t.Errorf("log-limited line %q, want it to contain %q, the other network and the account", line, wantLine)
	}

	// A reload onto the same status address: the new block starts while
	// the old one still holds the listener, and takes it over.
	inst, err = inst.Restart(input{[]byte(fmt.Sprintf(statusCorefile, dnsPort, 3, statusPort))})
	if err != nil {
		t.Fatalf("reload onto the same status port: %v", err)
	}
	burstTo(t, addr, "127.0.53.1", repeat(10, func(int) *dns.Msg { return q("new.status.test.", dns.TypeA) }))
	doc = getStatus(t, statusURL+"?n=50")
	if len(doc.Blocks) != 1 {
		t.Fatalf("after reload: %d blocks, want the new one alone", len(doc.Blocks))
	}
	found := false
	for _, a := range doc.Blocks[0].Limited {
		found = found || a.Network == "127.0.53.0/24"
	}
	if !found {
		t.Errorf("after reload: %+v, want 127.0.53.0/24, flooded after it", doc.Blocks[0].Limited)
	}

	inst.Stop()
	inst.ShutdownCallbacks()
	stopped = true
	if _, err := http.Get(statusURL); err == nil {
		t.Error("the status endpoint still answers after shutdown")
	}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", statusPort))
	if err != nil {
		t.Errorf("the status port is still held after shutdown: %v", err)
	} else {
		ln.Close()
	}
}

// TestIntegrationStatusPortBusy: a status address that cannot be bound
// fails the start, naming it.
func TestIntegrationStatusPortBusy(t *testing.T) {
	startServer(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port
	inst, err := caddy.Start(input{[]byte(fmt.Sprintf(statusCorefile, freePort(t, "udp"), 2, busyPort))})
	if err == nil {
		inst.Stop()
		inst.ShutdownCallbacks()
		t.Fatal("started with a busy status port")
	}
	if want := fmt.Sprintf("status 127.0.0.1:%d", busyPort); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q, want it to name %q", err, want)
	}
}

// sendEvery sends the query from src to addr over UDP every pause, without
// waiting for answers, until stop is closed or max queries have gone.
func sendEvery(t *testing.T, addr, src string, m *dns.Msg, pause time.Duration, max int, stop <-chan struct{}) {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(src)})
	if err != nil {
		t.Errorf("bind %s: %v", src, err)
		return
	}
	defer conn.Close()
	dst, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		t.Error(err)
		return
	}
	wire, err := m.Pack()
	if err != nil {
		t.Error(err)
		return
	}
	for range max {
		select {
		case <-stop:
			return
		default:
		}
		conn.WriteToUDP(wire, dst)
		time.Sleep(pause)
	}
}

// TestIntegrationStatusTop floods a real CoreDNS over UDP from one network
// while another asks at half its allowance, and reads /rrl/top during the
// flood: the first request arms the count and waits for a whole second;
// the flooded account comes first, over its allowance and limited, the
// other below its allowance, not limited.
func TestIntegrationStatusTop(t *testing.T) {
	startServer(t) // for the directive order
	dnsPort, statusPort := freePort(t, "udp"), freePort(t, "tcp")
	inst, err := caddy.Start(input{[]byte(fmt.Sprintf(statusCorefile, dnsPort, 20, statusPort))})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		inst.Stop()
		inst.ShutdownCallbacks()
	}()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(dnsPort))
	stop := make(chan struct{})
	var traffic sync.WaitGroup
	traffic.Go(func() {
		sendEvery(t, addr, "127.0.61.1", q("www.status.test.", dns.TypeA), time.Millisecond, 30_000, stop)
	})
	traffic.Go(func() {
		sendEvery(t, addr, "127.0.62.1", q("mail.status.test.", dns.TypeA), 100*time.Millisecond, 300, stop)
	})
	defer func() {
		close(stop)
		traffic.Wait()
	}()

	url := fmt.Sprintf("http://127.0.0.1:%d/rrl/top?n=10", statusPort)
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Blocks []struct {
			Zones []string
			Top   []miekgrrl.TopJSON
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Blocks) != 1 || strings.Join(doc.Blocks[0].Zones, " ") != "status.test." {
		t.Fatalf("/rrl/top: %+v, want the one block", doc)
	}
	top := doc.Blocks[0].Top
	if len(top) < 2 {
		t.Fatalf("/rrl/top: %+v, want the flooded network and the other", top)
	}
	f := top[0]
	if f.Network != "127.0.61.0/24" || f.Limit != "responses-per-second" || f.Name != "www.status.test." || f.Share <= 1 || !f.Limited {
		t.Errorf("first: %+v, want 127.0.61.0/24 for www.status.test., over its allowance and limited", f)
	}
	for _, a := range top {
		if a.Network == "127.0.62.0/24" {
			if a.Share >= 1 || a.Limited || a.Rate < 1 {
				t.Errorf("the network at half its allowance: %+v, want below it, not limited", a)
			}
			return
		}
	}
	t.Errorf("/rrl/top: %+v, without 127.0.62.0/24", top)
}
