// Command rrl-example-server is a small authoritative DNS server for the
// zone example.org., built on github.com/miekg/dns, that answers from behind
// the miekgrrl middleware: Response Rate Limiting with DNS COOKIE support.
// It is a demonstration; see ../../README.md for dig commands to try.
//
// Usage:
//
//	rrl-example-server [-port 5300] [-rate 5] [-slip 2] [-window 15] [-requests 0] [-proven-requests r]
//	                   [-secret hex] [-report-only] [-status host:port] [-v]
//	                   [-refuse-at-read=true] [-udp-rcvbuf bytes]
//	                   [-kernel-drop iface,...] [-kernel-drop-after 1s] [-kernel-drop-for 10s]
//
// A request over its request limit is refused as the server reads it,
// before it is unpacked (miekgrrl.DecorateReader); with
// -refuse-at-read=false the middleware refuses it, after package dns has
// unpacked it. -udp-rcvbuf sizes the UDP socket's receive buffer, and the
// server logs what the kernel granted (see ../../README.md, "Receive
// buffers").
//
// With -kernel-drop (and -requests), a network that the request limit
// keeps refusing goes into a kernel drop list for a while: an XDP program on
// the named interfaces drops its UDP packets to the server before the
// socket sees them (github.com/dnsrrl/rrl/kerneldrop, fed through
// miekgrrl.Options.RefusedNetwork). It needs root, or CAP_BPF and
// CAP_NET_ADMIN.
//
// With -status, it serves the accounts being limited now as JSON at
// http://host:port/rrl/limited (miekgrrl.LimitedHandler): query n (how
// many) and order (debt or refused); and the accounts nearest their
// allowance over the last whole second, limited or not, at
// http://host:port/rrl/top (miekgrrl.TopHandler): query n. The limiter
// counts for /rrl/top only while someone asks, from the first request
// (which waits a second or two for a whole second counted) to a minute
// after the last.
package main

import (
	"crypto"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dnsrrl/rrl"
	"github.com/dnsrrl/rrl/kerneldrop"
	"github.com/dnsrrl/rrl/miekgrrl"
	"github.com/miekg/dns"
)

// options are the settings of one server.
type options struct {
	addr       string // host:port, UDP and TCP
	rate       string // responses-per-second
	slip       string // slip-ratio
	window     string
	requests   string // requests-per-second
	proven     string // proven-requests-per-second; "" to leave it at requests-per-second
	secret     [16]byte
	reportOnly bool
	status     string // host:port of the HTTP status endpoint; "" for none
	verbose    bool
	// noReadRefusal leaves the request limits to the middleware rather
	// than to the servers' readers (-refuse-at-read=false).
	noReadRefusal bool
	udpRcvBuf     int               // bytes asked for the UDP receive buffer; 0 for the kernel's default
	kernel        kerneldrop.Config // -kernel-drop: Interfaces empty for none
	now           func() time.Time  // the limiter's clock; nil for the real one
	onDecision    func(miekgrrl.Decision)
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	s, err := start(o)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("serving example.org. on %s (udp, tcp): %s", s.udp.PacketConn.LocalAddr(), s.settings)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	s.shutdown()
}

func parseFlags(args []string) (options, error) {
	fs := flag.NewFlagSet("rrl-example-server", flag.ContinueOnError)
	port := fs.Int("port", 5300, "port to listen on, UDP and TCP, at 127.0.0.1")
	// The limiter's settings are passed to it as written, so that they
	// follow its one value grammar and a bad one gets its error.
	rate := fs.String("rate", "5", "responses-per-second allowed to each client network")
	slip := fs.String("slip", "2", "slip-ratio: 1 in this many limited responses is slipped (0: none)")
	window := fs.String("window", "15", "window in seconds")
	requests := fs.String("requests", "0", "requests-per-second allowed to each client network (0: no limit)")
	proven := fs.String("proven-requests", "", "proven-requests-per-second: requests over TCP or with a valid server cookie (default: -requests)")
	secret := fs.String("secret", "", "cookie secret, 32 hex digits (default: random)")
	reportOnly := fs.Bool("report-only", false, "send every response; only log what would be limited")
	status := fs.String("status", "", "serve the accounts being limited now as JSON at http://`host:port`/rrl/limited, and the busiest at /rrl/top")
	verbose := fs.Bool("v", false, "log every decision")
	atRead := fs.Bool("refuse-at-read", true, "refuse a request over its request limit as it is read, before it is unpacked (false: in the middleware)")
	rcvbuf := fs.Int("udp-rcvbuf", 0, "receive buffer of the UDP socket in `bytes` (0: the kernel's default, net.core.rmem_default)")
	kernelDrop := fs.String("kernel-drop", "", "drop in the kernel, on these `interfaces` (comma-separated, such as lo), the UDP packets of networks the request limit keeps refusing (needs -requests and root)")
	kernelAfter := fs.Duration("kernel-drop-after", kerneldrop.DefaultAfter, "how long a network is refused without a pause before its packets are dropped in the kernel")
	kernelFor := fs.Duration("kernel-drop-for", kerneldrop.DefaultFor, "how long its packets are dropped in the kernel")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if *kernelAfter <= 0 || *kernelFor <= 0 {
		return options{}, fmt.Errorf("-kernel-drop-after %v, -kernel-drop-for %v: want durations above 0", *kernelAfter, *kernelFor)
	}
	if *rcvbuf < 0 || *rcvbuf > maxRcvBuf {
		return options{}, fmt.Errorf("-udp-rcvbuf: want 0 to %d bytes, got %d", maxRcvBuf, *rcvbuf)
	}
	o := options{
		addr:       net.JoinHostPort("127.0.0.1", strconv.Itoa(*port)),
		rate:       *rate,
		slip:       *slip,
		window:     *window,
		requests:   *requests,
		proven:     *proven,
		reportOnly: *reportOnly,
		status:     *status,
		verbose:    *verbose,

		noReadRefusal: !*atRead,
		udpRcvBuf:     *rcvbuf,
		kernel:        kerneldrop.Config{After: *kernelAfter, For: *kernelFor, ReportOnly: *reportOnly, Logf: log.Printf},
	}
	if *kernelDrop != "" {
		o.kernel.Interfaces = strings.Split(*kernelDrop, ",")
		if *requests == "0" {
			return o, errors.New("-kernel-drop needs -requests: it drops networks that the request limit keeps refusing")
		}
	}
	if _, err := o.config(); err != nil {
		return o, err
	}
	if *secret == "" {
		rand.Read(o.secret[:])
		return o, nil
	}
	var err error
	if o.secret, err = miekgrrl.ParseSecret(*secret); err != nil {
		return o, fmt.Errorf("-secret: %v", err)
	}
	return o, nil
}

// flagKeywords are the limiter's settings that flags set, in the order
// config takes their values.
var flagKeywords = []string{"responses-per-second", "slip-ratio", "window", "requests-per-second", "proven-requests-per-second"}

// config returns the limiter's Config for o, or the limiter's error for
// the first setting it refuses.
func (o options) config() (*rrl.Config, error) {
	cfg := rrl.NewConfig()
	for i, v := range []string{o.rate, o.slip, o.window, o.requests, o.proven} {
		if v == "" {
			continue // left at its default
		}
		if err := cfg.SetValue(flagKeywords[i], v); err != nil {
			return nil, err
		}
	}
	if o.now != nil {
		cfg.SetNowFunc(o.now)
	}
	cfg.SetRecordLimited(o.status != "")
	return cfg, nil
}

// server is a running example server.
type server struct {
	udp, tcp *dns.Server
	status   *http.Server // nil without -status
	statusLn net.Listener
	limiter  *rrl.RRL
	cookies  *miekgrrl.Cookies
	settings string           // the limiter's settings that the flags set, as it holds them
	rcvbuf   rcvBuf           // the UDP receive buffer, with -udp-rcvbuf
	kernel   *kerneldrop.List // with -kernel-drop
}

// start loads and signs the zone and serves it on o.addr until shutdown.
// With port 0 the kernel picks the UDP port and TCP uses the same one.
func start(o options) (*server, error) {
	z, err := loadZone(zoneText, "example.org.")
	if err != nil {
		return nil, err
	}
	key := &dns.DNSKEY{Hdr: dns.RR_Header{Name: "example.org.", Rrtype: dns.TypeDNSKEY, Class: dns.ClassINET, Ttl: 300},
		Flags: 257, Protocol: 3, Algorithm: dns.ECDSAP256SHA256}
	priv, err := key.Generate(256)
	if err != nil {
		return nil, err
	}
	if err := z.sign(key, priv.(crypto.Signer)); err != nil {
		return nil, err
	}

	cfg, err := o.config()
	if err != nil {
		return nil, err
	}
	s := &server{limiter: rrl.NewRRL(cfg), cookies: miekgrrl.NewCookies(o.secret), settings: flagSettings(cfg)}
	opts := miekgrrl.Options{ReportOnly: o.reportOnly, Cookies: s.cookies, OnDecision: o.onDecision}
	if o.verbose {
		opts.OnDecision = logDecision(o.onDecision)
	}
	// The readers refuse the requests over their limits before package dns
	// unpacks them; the middleware, told so, charges none again.
	var decorate dns.DecorateReader
	opts.ChargedAtRead = !o.noReadRefusal
	pc, err := net.ListenPacket("udp", o.addr)
	if err != nil {
		return nil, err
	}
	if len(o.kernel.Interfaces) > 0 {
		if s.kernel, err = openKernelDrop(o.kernel, pc.LocalAddr()); err != nil {
			pc.Close()
			return nil, err
		}
		opts.RefusedNetwork = s.kernel.Refused
	}
	if !o.noReadRefusal {
		decorate = miekgrrl.DecorateReader(s.limiter, opts)
	}
	h := miekgrrl.Middleware(s.limiter, zoneHandler(z), opts)
	if o.udpRcvBuf > 0 {
		if s.rcvbuf, err = setReadBuffer(pc.(*net.UDPConn), o.udpRcvBuf); err != nil {
			s.kernel.Close()
			pc.Close()
			return nil, fmt.Errorf("-udp-rcvbuf: %v", err)
		}
		log.Print(s.rcvbuf)
	}
	ln, err := net.Listen("tcp", pc.LocalAddr().String())
	if err != nil {
		s.kernel.Close()
		pc.Close()
		return nil, err
	}
	s.udp = &dns.Server{PacketConn: pc, Handler: h, MsgAcceptFunc: miekgrrl.AcceptCookieOnly, DecorateReader: decorate}
	s.tcp = &dns.Server{Listener: ln, Handler: h, MsgAcceptFunc: miekgrrl.AcceptCookieOnly, DecorateReader: decorate}
	for _, srv := range []*dns.Server{s.udp, s.tcp} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go func() {
			if err := srv.ActivateAndServe(); err != nil {
				log.Print(err)
			}
		}()
		<-started
	}
	if o.status != "" {
		if err := s.serveStatus(o.status); err != nil {
			s.shutdown()
			return nil, err
		}
	}
	return s, nil
}

// openKernelDrop opens the kernel drop list of -kernel-drop for the
// server's UDP address.
func openKernelDrop(cfg kerneldrop.Config, addr net.Addr) (*kerneldrop.List, error) {
	l, err := kerneldrop.Open(cfg)
	if err != nil {
		return nil, fmt.Errorf("-kernel-drop: %v", err)
	}
	ap, err := netip.ParseAddrPort(addr.String())
	if err == nil {
		err = l.AddListener(ap)
	}
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("-kernel-drop: %v", err)
	}
	return l, nil
}

// serveStatus serves the limited accounts and the busiest over HTTP at addr.
func (s *server) serveStatus(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("-status: %v", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/rrl/limited", miekgrrl.LimitedHandler(s.limiter))
	mux.Handle("/rrl/top", miekgrrl.TopHandler(s.limiter))
	// Bounded in connections and time: a status endpoint must not become
	// a way to exhaust the DNS server's descriptors.
	s.status, s.statusLn = miekgrrl.ServeStatus(ln, mux, miekgrrl.DefaultStatusLimits), ln
	log.Printf("serving the accounts being limited at http://%s/rrl/limited, and the busiest at /rrl/top", ln.Addr())
	if miekgrrl.StatusExposed(ln.Addr()) {
		log.Printf("warning: -status %s listens beyond loopback: anyone who reaches it sees the networks being limited", addr)
	}
	return nil
}

// flagSettings lists the settings of cfg that the flags set, read back
// from cfg: a default shows as the value it takes. Until
// proven-requests-per-second is set, proven requests share the unproven
// ones' account, which the value alone does not show.
func flagSettings(cfg *rrl.Config) string {
	var s []string
	for _, k := range flagKeywords {
		v, err := cfg.Value(k)
		if err != nil {
			v = err.Error()
		}
		if k == "proven-requests-per-second" && !cfg.IsSet(k) {
			v += " (the requests-per-second account, shared)"
		}
		s = append(s, k+" "+v)
	}
	return strings.Join(s, ", ")
}

// statusAddr is the address the status endpoint listens on.
func (s *server) statusAddr() string { return s.statusLn.Addr().String() }

func (s *server) shutdown() {
	s.udp.Shutdown()
	s.tcp.Shutdown()
	s.kernel.Close() // a nil List does nothing
	if s.status != nil {
		s.status.Close()
	}
}

// logDecision logs each decision, then passes it on to next if set.
func logDecision(next func(miekgrrl.Decision)) func(miekgrrl.Decision) {
	return func(d miekgrrl.Decision) {
		transport := "tcp"
		if d.UDP {
			transport = "udp"
		}
		report := ""
		if d.ReportOnly && d.Action != rrl.Send {
			report = " (report only: sent)"
		}
		switch {
		case d.RequestDropped:
			q := "no question"
			switch {
			case d.Request == nil:
				q = "not unpacked" // refused as it was read
			case len(d.Request.Question) > 0:
				q = fmt.Sprintf("%s %q", dns.TypeToString[d.Request.Question[0].Qtype], d.Request.Question[0].Name)
			}
			log.Printf("%s %s request %s: %v%s [%v %v]", d.Client, transport, q, d.Action, report, d.IPReason, d.Cookie)
		case !d.Limited:
			log.Printf("%s %s %v %s %q: valid server cookie, response not limited [%v]", d.Client, transport,
				d.Tuple.AllowanceCategory, dns.TypeToString[d.Tuple.Type], d.Tuple.SalientName, d.IPReason)
		default:
			log.Printf("%s %s %v %s %q: %v%s [%v %v %v]", d.Client, transport, d.Tuple.AllowanceCategory,
				dns.TypeToString[d.Tuple.Type], d.Tuple.SalientName, d.Action, report, d.IPReason, d.RTReason, d.Cookie)
		}
		if next != nil {
			next(d)
		}
	}
}

// zoneHandler answers from z, telling the middleware when an answer came
// from a wildcard.
func zoneHandler(z *zone) dns.Handler {
	return dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg).SetReply(r)
		if opt := r.IsEdns0(); opt != nil {
			m.SetEdns0(1232, opt.Do())
		}
		// The middleware answers requests without a question itself (a
		// cookie-only query, RFC 7873 section 5.4, or FORMERR).
		q := r.Question[0]
		if q.Qclass != dns.ClassINET {
			m.Rcode = dns.RcodeRefused
			w.WriteMsg(m)
			return
		}
		dnssec := r.IsEdns0() != nil && r.IsEdns0().Do()
		a := z.lookup(q.Name, q.Qtype, dnssec)
		m.Rcode, m.Authoritative = a.rcode, a.aa
		m.Answer, m.Ns = a.answer, a.ns
		m.Extra = append(a.extra, m.Extra...)
		if a.wildcardOrigin != "" {
			miekgrrl.SetWildcardOrigin(w, a.wildcardOrigin)
		}
		w.WriteMsg(m)
	})
}
