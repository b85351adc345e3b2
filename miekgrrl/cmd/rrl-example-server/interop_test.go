package main

import (
	"net"
	"net/netip"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dnsrrl/rrl"
	"github.com/dnsrrl/rrl/miekgrrl"
	"github.com/miekg/dns"
)

// recorder keeps the middleware's decisions.
type recorder struct {
	mu   sync.Mutex
	list []miekgrrl.Decision
}

func (r *recorder) record(d miekgrrl.Decision) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d.Request, d.Response = nil, nil // not ours to keep
	r.list = append(r.list, d)
}

func (r *recorder) since(n int) []miekgrrl.Decision {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]miekgrrl.Decision(nil), r.list[n:]...)
}

func (r *recorder) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.list)
}

// startTestServer runs the example server on a free loopback port with one
// response per second allowed, every limited response slipped, no request
// limit, and the limiter's clock stopped, so that what is limited does not
// depend on how fast the test runs. more, if given, changes the options.
func startTestServer(t *testing.T, more ...func(*options)) (*server, string, *recorder) {
	t.Helper()
	frozen := time.Now()
	rec := new(recorder)
	o := options{addr: "127.0.0.1:0", rate: "1", slip: "1", window: "15",
		secret: [16]byte{1, 2, 3}, now: func() time.Time { return frozen }, onDecision: rec.record}
	for _, f := range more {
		f(&o)
	}
	s, err := start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.shutdown)
	_, port, _ := net.SplitHostPort(s.udp.PacketConn.LocalAddr().String())
	return s, port, rec
}

// tool describes how to drive one command-line client.
type tool struct {
	name  string
	flags []string // common flags: no recursion, one try, short wait
	notc  string   // do not retry over TCP on TC
}

var tools = []tool{
	{name: "dig", flags: []string{"+norec", "+tries=1", "+time=2"}, notc: "+ignore"},
	{name: "kdig", flags: []string{"+norec", "+retry=0", "+timeout=2"}, notc: "+ignore"},
}

var (
	statusRE = regexp.MustCompile(`status: ([A-Z]+)`)
	cookieRE = regexp.MustCompile(`COOKIE: ([0-9A-Fa-f]+)`)
	flagsRE  = regexp.MustCompile(`(?i)flags: ([a-z ]*)[;]`)
)

// run runs the tool against the server and returns its output.
func (tl tool) run(t *testing.T, port string, extra ...string) string {
	t.Helper()
	out, err := tl.try(port, extra...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", tl.name, strings.Join(extra, " "), err, out)
	}
	return out
}

// try runs the tool against the server and returns its output and how it
// ended.
func (tl tool) try(port string, extra ...string) (string, error) {
	args := append([]string{"@127.0.0.1", "-p", port}, tl.flags...)
	args = append(args, extra...)
	args = append(args, "www.example.org.", "A")
	out, err := exec.Command(tl.name, args...).CombinedOutput()
	return string(out), err
}

// last returns the last submatch of re in out, or "".
func last(re *regexp.Regexp, out string) string {
	m := re.FindAllStringSubmatch(out, -1)
	if len(m) == 0 {
		return ""
	}
	return m[len(m)-1][1]
}

// TestInteroperability drives the example server with dig and kdig: the
// server cookies they learn validate when they send them back, a request
// with one is exempt from the response limits but held to
// proven-requests-per-second, BADCOOKIE makes them retry with the server
// cookie, and a client without cookies gets TC.
func TestInteroperability(t *testing.T) {
	for _, tl := range tools {
		t.Run(tl.name, func(t *testing.T) {
			if _, err := exec.LookPath(tl.name); err != nil {
				t.Skipf("%s is not installed", tl.name)
			}
			// Three requests a second from proven sources; the others
			// have no request limit.
			s, port, rec := startTestServer(t, func(o *options) { o.proven = "3" })
			client := netip.MustParseAddr("127.0.0.1")

			// 1. A first query with a client cookie is answered, with a
			// server cookie that this server accepts from this client.
			out := tl.run(t, port, "+cookie")
			if st := last(statusRE, out); st != "NOERROR" {
				t.Fatalf("first query: status %q\n%s", st, out)
			}
			full := strings.ToLower(last(cookieRE, out))
			if len(full) != 48 {
				t.Fatalf("first query: cookie %q\n%s", full, out)
			}
			q := new(dns.Msg).SetQuestion("www.example.org.", dns.TypeA)
			q.SetEdns0(1232, false)
			q.IsEdns0().Option = append(q.IsEdns0().Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: full})
			if st := s.cookies.Check(q, client, time.Now()); st != miekgrrl.CookieValid {
				t.Fatalf("the cookie %s learnt is %v", tl.name, st)
			}

			// 2. The allowance (1) is spent. Sending the learnt cookie back,
			// the tool is still answered: the server validated its cookie.
			n := rec.len()
			out = tl.run(t, port, "+cookie="+full)
			if st := last(statusRE, out); st != "NOERROR" || !strings.Contains(out, "192.0.2.1") {
				t.Fatalf("with the server cookie: status %q\n%s", st, out)
			}
			if d := rec.since(n); len(d) != 1 || d[0].Cookie != miekgrrl.CookieValid || d[0].Limited {
				t.Fatalf("with the server cookie: decisions %+v", d)
			}

			// 3. A fresh client cookie while limited: BADCOOKIE, and the
			// tool retries with the server cookie and is answered.
			n = rec.len()
			out = tl.run(t, port, "+cookie", "+badcookie")
			if st := last(statusRE, out); st != "NOERROR" || !strings.Contains(out, "192.0.2.1") {
				t.Fatalf("after BADCOOKIE: status %q\n%s", st, out)
			}
			d := rec.since(n)
			if len(d) != 2 || d[0].Action != rrl.Slip || d[0].Cookie != miekgrrl.CookieClientOnly ||
				d[1].Action != rrl.Send || d[1].Cookie != miekgrrl.CookieValid {
				t.Fatalf("BADCOOKIE exchange: decisions %+v\n%s", d, out)
			}

			// 4. Without cookies a limited client gets TC.
			out = tl.run(t, port, "+nocookie", tl.notc)
			if f := strings.ToLower(last(flagsRE, out)); !strings.Contains(f, "tc") {
				t.Fatalf("without cookie: flags %q, want tc\n%s", f, out)
			}

			// 5. Requests with the cookie are held to
			// proven-requests-per-second (3): steps 2 and 3 spent two, the
			// third is answered, the fourth never reaches the zone and
			// gets no reply at all: the reader refuses it as it reads it.
			// The middleware, which leaves the request limits to the
			// readers, reports the third's IPReason as IPNotReached.
			n = rec.len()
			out = tl.run(t, port, "+cookie="+full)
			if st := last(statusRE, out); st != "NOERROR" || !strings.Contains(out, "192.0.2.1") {
				t.Fatalf("third proven request: status %q\n%s", st, out)
			}
			out, err := tl.try(port, "+cookie="+full)
			if err == nil || strings.Contains(out, "192.0.2.1") {
				t.Fatalf("fourth proven request answered (%v)\n%s", err, out)
			}
			d = rec.since(n)
			if len(d) != 2 || d[0].RequestDropped || d[0].IPReason != rrl.IPNotReached ||
				!d[1].RequestDropped || !d[1].AtRead || d[1].IPReason != rrl.IPRateLimit || d[1].Cookie != miekgrrl.CookieValid {
				t.Fatalf("proven requests: decisions %+v\n%s", d, out)
			}
		})
	}
}
