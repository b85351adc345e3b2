package rrl

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"

	core "github.com/dnsrrl/rrl"
	"github.com/dnsrrl/rrl/miekgrrl"
)

func TestParseStatusAndLogLimited(t *testing.T) {
	h, err := parseString("rrl {\n responses-per-second 5\n status 127.0.0.1:9154\n log-limited 30s 7\n}")
	if err != nil {
		t.Fatal(err)
	}
	if h.ops == nil || h.ops.opts != (opsOptions{status: "127.0.0.1:9154", logEvery: 30 * time.Second, logN: 7}) {
		t.Errorf("ops %+v", h.ops)
	}
	if h, _ := parseString("rrl {\n responses-per-second 5\n log-limited 1m\n}"); h.ops.opts.logN != defaultLogLimited || h.ops.opts.status != "" {
		t.Errorf("log-limited 1m: %+v, want N %d and no status", h.ops.opts, defaultLogLimited)
	}
	if h, _ := parseString("rrl {\n responses-per-second 5\n status :9154\n}"); h.ops.opts.status != ":9154" {
		t.Errorf("status :9154: %+v", h.ops.opts)
	}
	if h, _ := parseString("rrl {\n responses-per-second 5\n}"); h.ops != nil {
		t.Errorf("neither set: ops %+v, want none", h.ops)
	}
	for input, want := range map[string]string{
		"status":                          "status takes exactly one HOST:PORT, got 0",
		"status 127.0.0.1":                `status "127.0.0.1": want HOST:PORT`,
		"status 127.0.0.1:http":           `port "http": want a number from 1 to 65535`,
		"status 127.0.0.1:0":              `port "0"`,
		"status :70000":                   `port "70000"`,
		"status a:1 b:2":                  "got 2 values",
		"log-limited":                     "log-limited takes DURATION and an optional N, got 0",
		"log-limited 10":                  `log-limited duration "10": want a duration from 1s to 24h0m0s`,
		"log-limited 500ms":               `duration "500ms"`,
		"log-limited 25h":                 `duration "25h"`,
		"log-limited 1m 0":                `log-limited N "0": want a whole number from 1 to 100`,
		"log-limited 1m 101":              `N "101"`,
		"log-limited 1m 5 6":              "got 3 values",
		"status :1\n status :2":           "status given more than once",
		"log-limited 1m\n log-limited 2m": "log-limited given more than once",
	} {
		_, err := parseString("rrl {\n responses-per-second 5\n " + input + "\n}")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", input, err, want)
		}
	}
}

func TestSummarize(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	acct := func(network string, kind core.LimitKind, name string, refused int64, ago time.Duration) core.LimitedAccount {
		a := core.LimitedAccount{Network: netip.MustParsePrefix(network), LimitKind: kind, Refused: refused, Since: now.Add(-ago)}
		if name != "" {
			a.Tuple = core.ResponseTuple{AllowanceCategory: core.AllowanceCategory(kind), SalientName: name}
		}
		if kind == core.LimitResponses {
			a.Tuple.Class, a.Tuple.Type = 1, 1
		}
		return a
	}
	accounts := []core.LimitedAccount{ // by refusals, as Limited gives them
		acct("192.0.2.0/24", core.LimitResponses, "www.example.org.", 100, time.Minute),
		acct("198.51.100.0/24", core.LimitRequests, "", 80, 10*time.Second),
		acct("192.0.2.0/24", core.LimitAll, "", 50, 2*time.Minute),
		acct("203.0.113.0/24", core.LimitNXDomains, "example.org.", 5, time.Second),
	}
	got := summarize(accounts, 2, []string{"example.org."}, false, now)
	want := "limited now in [example.org.]: 3 networks, 4 accounts; " +
		"192.0.2.0/24 150 refused in 2m0s by 2 accounts, most by responses-per-second for www.example.org. IN A; " +
		"198.51.100.0/24 80 refused in 10s by requests-per-second; and 1 more network"
	if got != want {
		t.Errorf("summary\n%q\nwant\n%q", got, want)
	}
	if got := summarize(accounts[3:], 5, []string{"example.org."}, true, now); !strings.HasPrefix(got, "would be limited now") ||
		!strings.HasSuffix(got, "203.0.113.0/24 5 refused in 1s by nxdomains-per-second for example.org.") {
		t.Errorf("report-only summary %q", got)
	}
	if got := summarize(nil, 5, nil, false, now); got != "" {
		t.Errorf("nothing limited: %q, want no line", got)
	}
}

// TestOpsStopIsIdempotent: stop before start, twice, and start after stop
// open nothing.
func TestOpsStopIsIdempotent(t *testing.T) {
	h, err := parseString("rrl {\n responses-per-second 5\n status 127.0.0.1:1\n log-limited 1s\n}")
	if err != nil {
		t.Fatal(err)
	}
	h.ops.stop()
	h.ops.stop()
	if err := h.ops.start(h); err != nil || h.ops.listed || h.ops.stopLog != nil {
		t.Errorf("start after stop: %v, listed %v, logging %v", err, h.ops.listed, h.ops.stopLog != nil)
	}
	var none *ops
	none.stop()
	if err := none.start(h); err != nil {
		t.Error(err)
	}
}

// TestStatusServesNewestBlock: during a reload the old block and its
// replacement (same zones, same servers) share the status listener; only
// the newer is served, and blocks come in the order of their zones.
func TestStatusServesNewestBlock(t *testing.T) {
	s := &statusListener{blocks: map[*ops]statusBlock{
		new(ops): {seq: 1, zones: []string{"b.test."}, servers: []string{"dns://:53"}},
		new(ops): {seq: 2, zones: []string{"b.test."}, servers: []string{"dns://:53"}},
		new(ops): {seq: 1, zones: []string{"a.test."}, servers: []string{"dns://:53"}},
	}}
	got := s.current()
	if len(got) != 2 || got[0].zones[0] != "a.test." || got[1].zones[0] != "b.test." || got[1].seq != 2 {
		t.Errorf("current() = %+v, want a.test. then b.test. of seq 2", got)
	}
}

// openStatus opens a status listener at addr within lim, serving one block
// with nothing limited, until the test ends.
func openStatus(t *testing.T, addr string, lim miekgrrl.StatusLimits) *statusListener {
	t.Helper()
	old := statusLimits
	statusLimits = lim
	t.Cleanup(func() { statusLimits = old })
	o := new(ops)
	if err := statusListeners.add(addr, o, statusBlock{zones: []string{"example.org."}, limiter: core.NewRRL(nil)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { statusListeners.remove(addr, o) })
	statusListeners.mu.Lock()
	defer statusListeners.mu.Unlock()
	return statusListeners.m[addr]
}

// halfRequest opens a connection to s and sends a request's first line
// and no more.
func halfRequest(t *testing.T, s *statusListener) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", s.bound.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, "GET "+statusPath+" HTTP/1.1\r\n"); err != nil {
		t.Fatal(err)
	}
	return c
}

// fullRequest opens a connection to s and sends a whole request, with the
// given Connection header; the answer is read from the reader returned.
func fullRequest(t *testing.T, s *statusListener, connection string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", s.bound.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, "GET "+statusPath+" HTTP/1.1\r\nHost: status\r\nConnection: "+connection+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	return c, bufio.NewReader(c)
}

// wantOK reads a whole answer from r, within 10 seconds of c, and checks
// that it is 200 OK.
func wantOK(t *testing.T, c net.Conn, r *bufio.Reader, when string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("%s: no answer: %v", when, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("%s: status %s, want 200 OK", when, resp.Status)
	}
}

// TestStatusListenerCapsConnections: with two connections held open by
// half-sent requests, a third complete request is not answered; once one
// of the two closes, it is.
func TestStatusListenerCapsConnections(t *testing.T) {
	s := openStatus(t, "127.0.0.1:0", miekgrrl.StatusLimits{MaxConns: 2, ReadTimeout: time.Minute})
	held := []net.Conn{halfRequest(t, s), halfRequest(t, s)}
	c, r := fullRequest(t, s, "close") // the kernel completes it; the server does not take it
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := r.Peek(1); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a third connection beyond the cap of 2 was answered (read: %v)", err)
	}
	held[0].Close()
	wantOK(t, c, r, "once a slot was free")
}

// TestStatusListenerClosesHalfSentRequests: a connection that sends half a
// request is closed after the read timeout, which frees its slot.
func TestStatusListenerClosesHalfSentRequests(t *testing.T) {
	s := openStatus(t, "127.0.0.1:0", miekgrrl.StatusLimits{MaxConns: 1, ReadTimeout: 100 * time.Millisecond})
	c := halfRequest(t, s)
	c.SetReadDeadline(time.Now().Add(5 * time.Second)) // far beyond the timeout: only the server's close ends the read
	if _, err := io.ReadAll(c); err != nil {
		t.Fatalf("the half-sent request's connection was not closed by the server: %v", err)
	}
	// Its slot is free again: the one slot serves a complete request.
	c, r := fullRequest(t, s, "close")
	wantOK(t, c, r, "after the timeout")
}

// TestStatusWarnsBeyondLoopback: a status listener bound to every
// interface is logged with a warning, one on loopback is not.
func TestStatusWarnsBeyondLoopback(t *testing.T) {
	lb := captureLog(t)
	openStatus(t, "127.0.0.1:0", miekgrrl.DefaultStatusLimits)
	if strings.Contains(lb.String(), "[WARNING]") {
		t.Errorf("a loopback listener was warned of: %s", lb)
	}
	openStatus(t, ":0", miekgrrl.DefaultStatusLimits) // every interface; nothing is sent to it
	if out := lb.String(); !strings.Contains(out, "[WARNING] plugin/rrl: status :0 listens on ") ||
		!strings.Contains(out, "not a loopback address") {
		t.Errorf("no warning for a listener on every interface; the log:\n%s", out)
	}
}

// TestStatusListenerClosesIdleConnections: a kept-alive connection that
// asks nothing more is closed after the idle timeout.
func TestStatusListenerClosesIdleConnections(t *testing.T) {
	s := openStatus(t, "127.0.0.1:0", miekgrrl.StatusLimits{MaxConns: 1, ReadTimeout: time.Minute, IdleTimeout: 100 * time.Millisecond})
	c, r := fullRequest(t, s, "keep-alive")
	wantOK(t, c, r, "the first request")
	c.SetReadDeadline(time.Now().Add(5 * time.Second)) // far beyond the timeout: only the server's close ends the read
	if _, err := r.ReadByte(); err != io.EOF {
		t.Errorf("the idle connection was not closed by the server: %v", err)
	}
}

// TestRefusalCountsAgree floods one network under two accounts at once,
// responses-per-second for two names and all-per-second, and reads the
// refusals every way an operator can: /rrl/limited, the log-limited line,
// the metrics and the core's Stats. Each must count every response
// refused once, as the client saw it: the network's refusals add up to
// the queries left unanswered or truncated, never more.
func TestRefusalCountsAgree(t *testing.T) {
	clk := newClock()
	const zone = "counts.example.org."
	h := testHandler(t, "counts.example.org {\n responses-per-second 5\n all-per-second 8\n log-limited 1m\n}", zoneNext, clk)
	exceeded := responsesExceeded.WithLabelValues("", zone, "answer")
	before := testutil.ToFloat64(exceeded)
	names := []string{"a.counts.example.org.", "b.counts.example.org."}
	refused := 0
	do := func(name string) {
		if o, _ := ask(t, h, "127.0.1.1", false, query(name, dns.TypeA)); o != sent {
			refused++
		}
	}
	for range 14 { // 2 s of one name at 7/s: over its allowance only
		do(names[0])
		clk.advance(time.Second / 7)
	}
	for i := range 100 { // then both at once: over all-per-second too
		do(names[i%2])
	}

	st := h.limiter.GetStats(false)
	limited := h.limiter.Limited(miekgrrl.MaxLimitedN, core.ByRefused)
	var fromLimited int64
	for _, a := range limited {
		fromLimited += a.Refused
	}
	if fromLimited != int64(refused) || st.Actions[core.Drop]+st.Actions[core.Slip] != int64(refused) {
		t.Errorf("%d queries refused; Limited sums %d, Stats %d", refused, fromLimited, st.Actions[core.Drop]+st.Actions[core.Slip])
	}
	if got := int(testutil.ToFloat64(exceeded) - before); got != refused {
		t.Errorf("responses_exceeded_total rose by %d, want %d", got, refused)
	}

	// /rrl/limited: the network's entries sum to the same.
	s := &statusListener{blocks: map[*ops]statusBlock{new(ops): {zones: h.Zones, limiter: h.limiter}}}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, statusPath+"?n=50", nil))
	var doc statusJSON
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil || len(doc.Blocks) != 1 {
		t.Fatalf("status document %s: %v", rec.Body, err)
	}
	var fromJSON int64
	for _, a := range doc.Blocks[0].Limited {
		fromJSON += a.Refused
		if a.Network != "127.0.1.0/24" || a.DebtSeconds <= 0 {
			t.Errorf("entry %+v: want 127.0.1.0/24 in debt", a)
		}
	}
	if fromJSON != int64(refused) {
		t.Errorf("/rrl/limited sums %d refusals, want %d: %s", fromJSON, refused, rec.Body)
	}

	// log-limited: the network's line says the same.
	line := summarize(limited, 5, h.Zones, false, clk.now())
	m := regexp.MustCompile(`127\.0\.1\.0/24 (\d+) refused`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("log-limited line %q names no refusals of 127.0.1.0/24", line)
	}
	if n, _ := strconv.Atoi(m[1]); n != refused {
		t.Errorf("log-limited line %q: %d refused, want %d", line, n, refused)
	}
	if want := fmt.Sprintf("by %d accounts", len(limited)); len(limited) > 1 && !strings.Contains(line, want) {
		t.Errorf("log-limited line %q, want %q", line, want)
	}
}
