package capgen

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// Mix describes traffic of many ordinary client networks, of two kinds,
// and attacks among them, for the tests of rrl-replay -suggest. Unlike
// Traffic, its ordinary networks are spread over the address space (a
// /20 rarely holds two of them), as an authoritative server's clients
// are, and each asks at its own rate, with gaps drawn at random.
type Mix struct {
	Seed     uint64
	Start    time.Time
	Duration time.Duration
	Zone     string // fully qualified, such as "example.org."

	Quiet    int     // networks of a few hosts asking now and then
	QuietQPS float64 // each quiet network's mean rate, in queries a second
	Busy     int     // busy resolvers, one address each
	BusyQPS  float64 // each busy resolver's mean rate, in queries a second
	Names    int     // distinct names the ordinary networks ask for, the first ones most
	IPv6     float64 // share of the ordinary networks that are IPv6
	// BusyTCP is the share of busy resolvers that sometimes ask over TCP
	// (a resolver that was sent a truncated reply, or a large answer).
	BusyTCP float64
	// BigShare is the share of ordinary queries for the large TXT record
	// that a reflection uses, which ordinary clients may ask for too.
	BigShare float64
	BigSize  int // the large record's answer, in bytes (0: a TXT of about 240)

	Attacks []Attack
}

// Kinds of Attack.
const (
	Reflection = iota // one large answer, again and again, to a victim network
	NXFlood           // NXDOMAIN for random names, from several /24s of one prefix
	Rotation          // many names of one size, asked in turn, to a victim network
)

// Attack is traffic aimed at, or spoofed from, one network or prefix.
type Attack struct {
	Kind     int
	Target   netip.Prefix  // the victim's /24 (Reflection, Rotation), or the prefix whose /24s flood (NXFlood)
	Networks int           // NXFlood: how many /24s of Target ask, each at QPS
	QPS      float64       // queries a second, per network
	Size     int           // bytes of each answer (Reflection, Rotation)
	Names    int           // Rotation: how many names, asked in turn
	From, To time.Duration // when it runs, from Mix.Start; To 0: to the end
}

// Exchanges generates the mix's exchanges in time order.
func (m *Mix) Exchanges() ([]Exchange, error) {
	if m.Duration <= 0 || m.Zone == "" {
		return nil, fmt.Errorf("capgen: a mix needs a duration and a zone")
	}
	g := &mixGen{m: m, rng: rand.New(rand.NewPCG(m.Seed, m.Seed^0x5851f42d4c957f2d)), cache: map[string][]byte{}}
	for i := range m.Quiet {
		g.ordinary(i, false)
	}
	for i := range m.Busy {
		g.ordinary(m.Quiet+i, true)
	}
	for _, a := range m.Attacks {
		if err := g.attack(a); err != nil {
			return nil, err
		}
	}
	slices.SortStableFunc(g.out, func(a, b Exchange) int { return a.At.Compare(b.At) })
	return g.out, nil
}

type mixGen struct {
	m     *Mix
	rng   *rand.Rand
	cache map[string][]byte // packed responses by question and kind, ID 0
	out   []Exchange
}

// ordinary adds the queries of ordinary network i: a busy resolver (one
// address, asking at BusyQPS) or a quiet network (up to four hosts, asking
// at QuietQPS together).
func (g *mixGen) ordinary(i int, busy bool) {
	m := g.m
	rate, hosts := m.QuietQPS, 1+g.rng.IntN(4)
	if busy {
		rate, hosts = m.BusyQPS, 1
	}
	v6 := g.rng.Float64() < m.IPv6
	tcp := busy && g.rng.Float64() < m.BusyTCP
	net := g.network(v6)
	for t := g.gap(rate); t < m.Duration; t += g.gap(rate) {
		client := hostIn(net, 1+g.rng.IntN(hosts), 1024+uint16(g.rng.IntN(60000)))
		name, qtype, kind, size := g.ordinaryQuestion()
		g.add(m.Start.Add(t), client, name, qtype, kind, size, tcp && g.rng.IntN(20) == 0)
	}
}

// network returns an ordinary network, a /24 or a /56 anywhere in the
// documentation-free space the tests use (10.0.0.0/8 is avoided, being
// where attacks are put by the tests).
func (g *mixGen) network(v6 bool) netip.Prefix {
	if v6 {
		var a [16]byte
		a[0], a[1], a[2], a[3] = 0x20, 0x01, 0x0d, 0xb8
		a[4], a[5], a[6] = byte(g.rng.IntN(256)), byte(g.rng.IntN(256)), byte(g.rng.IntN(256))
		return netip.PrefixFrom(netip.AddrFrom16(a), 56)
	}
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(100 + g.rng.IntN(120)), byte(g.rng.IntN(256)), byte(g.rng.IntN(256)), 0}), 24)
}

// hostIn returns host number h of network n at port.
func hostIn(n netip.Prefix, h int, port uint16) netip.AddrPort {
	a := n.Addr().AsSlice()
	a[len(a)-1] = byte(h)
	addr, _ := netip.AddrFromSlice(a)
	return netip.AddrPortFrom(addr, port)
}

// gap is the time to a network's next query at rate a second: drawn from
// the exponential distribution, as independent clients ask.
func (g *mixGen) gap(rate float64) time.Duration {
	return time.Duration(g.rng.ExpFloat64() / rate * float64(time.Second))
}

// ordinaryQuestion picks what an ordinary client asks, and the size of
// its answer when it is the large record: mostly answers for
// names of which the first are the most asked (name i with weight
// 1/(i+1)), then NODATA, NXDOMAIN, referrals and errors.
func (g *mixGen) ordinaryQuestion() (name string, qtype uint16, kind, size int) {
	m := g.m
	if g.rng.Float64() < m.BigShare {
		return "big." + m.Zone, dns.TypeTXT, Answer, m.BigSize
	}
	n := 1 + max(0, m.Names)
	i := int(float64(n)*g.rng.Float64()*g.rng.Float64()) % n // more weight on the first names
	name = fmt.Sprintf("h%d.%s", i, m.Zone)
	switch k := g.rng.IntN(20); {
	case k == 0:
		return "nope" + name, dns.TypeA, NXDomain, 0
	case k == 1:
		return name, dns.TypeAAAA, NoData, 0
	case k == 2:
		return "host.sub." + m.Zone, dns.TypeA, Referral, 0
	case k == 3:
		return name, dns.TypeMX, ServFail, 0
	}
	return name, dns.TypeA, Answer, 0
}

// attack adds an attack's queries, at its rate.
func (g *mixGen) attack(a Attack) error {
	if a.QPS <= 0 {
		return fmt.Errorf("capgen: attack of %v at %g queries a second", a.Target, a.QPS)
	}
	to := a.To
	if to == 0 || to > g.m.Duration {
		to = g.m.Duration
	}
	nets := []netip.Prefix{a.Target}
	if a.Kind == NXFlood {
		nets = nets[:0]
		base := a.Target.Masked().Addr()
		for i := range a.Networks {
			n := base.As4()
			n[2] += byte(i)
			nets = append(nets, netip.PrefixFrom(netip.AddrFrom4(n), 24))
		}
	}
	step := time.Duration(float64(time.Second) / a.QPS)
	for _, n := range nets {
		// One query in each step, at a random time within it: steady, but
		// not in lockstep with the other networks (nor with a limiter's
		// refill), as packets from many sources are not.
		for i, s := 0, a.From; s < to; i, s = i+1, s+step {
			t := s + time.Duration(g.rng.Int64N(int64(step)))
			client := hostIn(n, 1+g.rng.IntN(254), 1024+uint16(g.rng.IntN(60000)))
			switch a.Kind {
			case Reflection:
				g.add(g.m.Start.Add(t), client, "big."+g.m.Zone, dns.TypeTXT, Answer, a.Size, false)
			case Rotation:
				g.add(g.m.Start.Add(t), client, fmt.Sprintf("r%d.%s", i%max(1, a.Names), g.m.Zone), dns.TypeTXT, Answer, a.Size, false)
			case NXFlood:
				g.add(g.m.Start.Add(t), client, fmt.Sprintf("x%d.%s", g.rng.IntN(1<<24), g.m.Zone), dns.TypeA, NXDomain, 0, false)
			default:
				return fmt.Errorf("capgen: attack kind %d", a.Kind)
			}
		}
	}
	return nil
}

// add appends an exchange: the query and a response of the given kind, an
// answer of size bytes when size is set (a TXT record padded to it).
func (g *mixGen) add(at time.Time, client netip.AddrPort, name string, qtype uint16, kind, size int, tcp bool) {
	server := Server
	if client.Addr().Is6() {
		server = Server6
	}
	id := uint16(g.rng.Uint32())
	key := fmt.Sprint(name, qtype, kind, size)
	q := Query(id, name, qtype, "")
	resp, ok := g.cache[key]
	if !ok {
		resp = Response(q, kind, g.m.Zone)
		if size > 0 {
			resp = SizedAnswer(q, size)
		}
		resp[0], resp[1] = 0, 0
		if len(g.cache) < 4096 {
			g.cache[key] = resp
		}
	}
	resp = append([]byte(nil), resp...)
	resp[0], resp[1] = byte(id>>8), byte(id)
	g.out = append(g.out, Exchange{At: at, Client: client, Server: server, TCP: tcp, Query: q, Response: resp})
}

// SizedAnswer returns an answer to query of one TXT record, padded so that
// the response is size bytes long (or as short as it can be, if size is
// less).
func SizedAnswer(query []byte, size int) []byte {
	q := new(dns.Msg)
	if err := q.Unpack(query); err != nil {
		panic(err)
	}
	m := new(dns.Msg)
	m.SetReply(q)
	m.Authoritative = true
	txt := &dns.TXT{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 300}, Txt: []string{""}}
	m.Answer = []dns.RR{txt}
	room := size - len(pack(m)) + 1 // bytes of strings to put in the empty one's place; each costs its length and one
	txt.Txt = nil
	for room > 0 {
		n := min(255, room-1)
		txt.Txt = append(txt.Txt, strings.Repeat("x", n))
		room -= n + 1
	}
	if len(txt.Txt) == 0 {
		txt.Txt = []string{""}
	}
	return pack(m)
}
