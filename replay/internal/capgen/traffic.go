package capgen

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/miekg/dns"
)

// Exchange is a query and its response (nil for none).
type Exchange struct {
	At       time.Time // the query's time; the response follows ResponseDelay later
	Client   netip.AddrPort
	Server   netip.AddrPort
	TCP      bool
	Query    []byte
	Response []byte
}

// ResponseDelay is how long after its query a response is captured.
const ResponseDelay = 40 * time.Microsecond

// Write writes the exchange's packets: over UDP the query and the response;
// over TCP a whole connection (handshake, query, response, close).
func (w *Writer) Write(e *Exchange) error {
	if !e.TCP {
		if err := w.UDP(e.At, e.Client, e.Server, e.Query); err != nil {
			return err
		}
		if e.Response == nil {
			return nil
		}
		return w.UDP(e.At.Add(ResponseDelay), e.Server, e.Client, e.Response)
	}
	const cISN, sISN = 1000, 5000
	t := e.At
	step := ResponseDelay / 8
	steps := []func() error{
		func() error { return w.TCP(t, e.Client, e.Server, cISN, SYN, nil) },
		func() error { return w.TCP(t, e.Server, e.Client, sISN, SYN|ACK, nil) },
		func() error { return w.TCP(t, e.Client, e.Server, cISN+1, PSH|ACK, framed(e.Query)) },
	}
	if e.Response != nil {
		steps = append(steps, func() error { return w.TCP(t, e.Server, e.Client, sISN+1, PSH|ACK, framed(e.Response)) })
	}
	steps = append(steps, func() error {
		return w.TCP(t, e.Client, e.Server, cISN+1+uint32(2+len(e.Query)), FIN|ACK, nil)
	})
	for _, s := range steps {
		if err := s(); err != nil {
			return err
		}
		t = t.Add(step)
	}
	return nil
}

// framed prefixes a DNS message with its length, as over TCP.
func framed(m []byte) []byte {
	return append([]byte{byte(len(m) >> 8), byte(len(m))}, m...)
}

// Query returns a query for name and type with the given ID; cookie, if
// not "", is the hex of a COOKIE option.
func Query(id uint16, name string, qtype uint16, cookie string) []byte {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	m.Id = id
	m.RecursionDesired = false
	if cookie != "" {
		m.SetEdns0(1232, false)
		opt := m.IsEdns0()
		opt.Option = append(opt.Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: cookie})
	}
	return pack(m)
}

// Kinds of response that Response makes.
const (
	Answer = iota
	Referral
	NoData
	NXDomain
	ServFail
)

// Response returns the response of the given kind to query, for zone.
func Response(query []byte, kind int, zone string) []byte {
	q := new(dns.Msg)
	if err := q.Unpack(query); err != nil {
		panic(err)
	}
	m := new(dns.Msg)
	m.SetReply(q)
	m.Authoritative = true
	name := q.Question[0].Name
	soa := mustRR(fmt.Sprintf("%s 3600 IN SOA ns1.%s hostmaster.%s 1 7200 3600 1209600 3600", zone, zone, zone))
	switch kind {
	case Answer:
		m.Answer = []dns.RR{mustRR(name + " 300 IN A 192.0.2.80")}
		if q.Question[0].Qtype == dns.TypeTXT {
			m.Answer = []dns.RR{mustRR(name + ` 300 IN TXT "v=spf1 ip4:192.0.2.0/24 ip4:198.51.100.0/24 ip4:203.0.113.0/24 include:_spf.example.net ~all" "a large record that a reflection attack would like to have sent many times over to its victim"`)}
		}
	case Referral:
		m.Authoritative = false
		m.Ns = []dns.RR{mustRR("sub." + zone + " 3600 IN NS ns.sub." + zone)}
	case NoData:
		m.Ns = []dns.RR{soa}
	case NXDomain:
		m.Rcode = dns.RcodeNameError
		m.Ns = []dns.RR{soa}
	case ServFail:
		m.Rcode = dns.RcodeServerFailure
		m.Authoritative = false
	}
	return pack(m)
}

func mustRR(s string) dns.RR {
	rr, err := dns.NewRR(s)
	if err != nil {
		panic(err)
	}
	return rr
}

func pack(m *dns.Msg) []byte {
	b, err := m.Pack()
	if err != nil {
		panic(err)
	}
	return b
}

// Start is the time of the first packet of gencapture's captures.
var Start = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// Server and Server6 are where the generated traffic goes, over IPv4 and IPv6.
var (
	Server  = netip.MustParseAddrPort("192.0.2.53:53")
	Server6 = netip.MustParseAddrPort("[2001:db8::53]:53")
)

// Victim is the network that the reflection flood of Traffic is aimed at.
var Victim = netip.MustParsePrefix("198.51.100.0/24")

// Traffic generates exchanges with zone example.org from a deterministic
// seed, starting at start, for the given duration at qps exchanges per
// second: mostly ordinary clients (a thousand hosts in 250 networks, over
// IPv4 and IPv6, a few over TCP), a reflection flood of large TXT answers
// aimed at one victim network from the fifth second on (the share flood
// of the traffic), and a spray of NXDOMAIN queries from spoofed random
// networks (the share spray).
func Traffic(seed uint64, start time.Time, duration time.Duration, qps int, flood, spray float64, emit func(*Exchange) error) error {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	n := int(duration.Seconds() * float64(qps))
	gap := time.Duration(int64(time.Second) / int64(qps))
	if gap <= ResponseDelay {
		return fmt.Errorf("capgen: %d exchanges per second leave no room for the response delay", qps)
	}
	names := []string{"www", "mail", "api", "cdn", "ns1", "ftp", "vpn", "shop"}
	queries := map[string][]byte{} // a cache of packed queries and responses by content
	responses := map[string][]byte{}
	var e Exchange
	for i := 0; i < n; i++ {
		at := start.Add(time.Duration(i) * gap)
		e = Exchange{At: at, Server: Server}
		id := uint16(rng.Uint32())
		var name string
		var qtype uint16 = dns.TypeA
		kind := Answer
		r := rng.Float64()
		switch {
		case r < flood && at.Sub(start) >= 5*time.Second:
			v := Victim.Addr().As4()
			v[3] = byte(1 + rng.IntN(254))
			e.Client = netip.AddrPortFrom(netip.AddrFrom4(v), 1024+uint16(rng.IntN(60000)))
			name, qtype = "example.org.", dns.TypeTXT
		case r < flood+spray:
			e.Client = netip.AddrPortFrom(netip.AddrFrom4([4]byte{byte(11 + rng.IntN(200)), byte(rng.IntN(256)), byte(rng.IntN(256)), byte(1 + rng.IntN(254))}), 1024+uint16(rng.IntN(60000)))
			name, kind = fmt.Sprintf("x%d.example.org.", rng.IntN(1<<20)), NXDomain
		default:
			h := rng.IntN(1000)
			if h%5 == 0 {
				e.Client = netip.AddrPortFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, byte(h % 50), 0, 0, 0, 0, 0, 0, 0, 0, byte(h >> 8), byte(h)}), 1024+uint16(rng.IntN(60000)))
			} else {
				e.Client = netip.AddrPortFrom(netip.AddrFrom4([4]byte{203, 0, byte(h % 200), byte(1 + h%250)}), 1024+uint16(rng.IntN(60000)))
			}
			e.TCP = h%50 == 7
			name = names[rng.IntN(len(names))] + ".example.org."
			switch k := rng.IntN(20); {
			case k == 0:
				kind = NXDomain
				name = "nope." + name
			case k == 1:
				kind, qtype = NoData, dns.TypeAAAA
			case k == 2:
				kind, name = Referral, "host.sub.example.org."
			case k == 3:
				kind = ServFail
			}
		}
		if e.Client.Addr().Is6() {
			e.Server = Server6
		}
		key := fmt.Sprint(name, qtype)
		q, ok := queries[key]
		if !ok {
			q = Query(0, name, qtype, "")
			if len(queries) < 4096 {
				queries[key] = q
			}
		}
		q = append([]byte(nil), q...)
		q[0], q[1] = byte(id>>8), byte(id)
		rkey := fmt.Sprint(key, kind)
		resp, ok := responses[rkey]
		if !ok {
			resp = Response(q, kind, "example.org.")
			if len(responses) < 4096 {
				responses[rkey] = resp
			}
		}
		resp = append([]byte(nil), resp...)
		resp[0], resp[1] = byte(id>>8), byte(id)
		e.Query, e.Response = q, resp
		if err := emit(&e); err != nil {
			return err
		}
	}
	return nil
}
