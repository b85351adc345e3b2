package replay

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/dnsrrl/rrl"
	"github.com/dnsrrl/rrl/miekgrrl"
	"github.com/miekg/dns"
)

// Options configure a Replay.
type Options struct {
	// Settings are applied in order with the core's Config.SetValue.
	Settings []Setting
	// Sweep, if set, replays the traffic once per value of its keyword
	// (applied after Settings), in the same pass over the input.
	Sweep *Sweep
	// Zones limits the replay to queries for names in these zones, as the
	// CoreDNS plugin limits only its zones; empty means every name. A
	// network ("192.0.2.0/24") stands for its reverse zones, as in a
	// Corefile.
	Zones []string
	// CookieSecrets validate the server cookies of queries (current secret
	// first); without them a query's server cookie is assumed valid.
	CookieSecrets [][16]byte
	// ZoneData, if set, is what the server's file plugin serves (see
	// Corefile.ReadZones): a response it synthesised from a wildcard is
	// charged to the wildcard, as the plugin charges it. Without it, only
	// a signed wildcard answer is known as one.
	ZoneData *ZoneData
	// ServerPort tells the server's side of a packet; 0 means 53.
	ServerPort uint16
	// Top is how many networks and tuples the report lists; 0 means 10,
	// negative means all.
	Top int
}

// Replay runs DNS traffic through one limiter per configuration, as the
// servers would have: each query is charged with DebitRequest when it
// arrives, and its response with DebitResponse unless the query carried a
// valid server cookie, the response's tuple carrying its captured length
// (for all-bytes-per-second and nocookie-udp-size). Time is the traffic's own: the limiters' clock reads
// the timestamp of the message being replayed, so a replay is
// deterministic and as fast as the input can be read.
//
// A Replay is not safe for concurrent use. Its memory is bounded whatever
// the input's size: by the limiters' max-table-size, and by fixed bounds
// on the queries awaiting their response, TCP streams and timelines.
type Replay struct {
	opts     Options
	engines  []*engine
	now      time.Time
	clock    *rrl.ManualClock // the limiters' clock, set to now
	pending  *pendingTable
	cookies  *miekgrrl.Cookies
	zones    []string
	skipped  map[string]int64
	packets  atomic.Int64 // frames or dnstap messages read
	messages atomic.Int64
	nameBuf  []byte
	msg      dns.Msg
	memo     *tupleMemo
	// tap, if set, is told of each request and response as the first
	// configuration charged it, and what it decided: -suggest reads the
	// traffic's peaks, and checks its suggestion, through it.
	tap tap

	stopped atomic.Bool // Stop was called
}

// engine is one configuration under replay: its limiter and its report.
type engine struct {
	label   string
	lc      *limiterConfig
	limiter *rrl.RRL
	report  *reportBuilder
}

// New checks the configuration and returns a Replay ready for input.
func New(opts Options) (*Replay, error) {
	if opts.ServerPort == 0 {
		opts.ServerPort = 53
	}
	if opts.Top == 0 {
		opts.Top = 10
	}
	r := &Replay{opts: opts, pending: newPendingTable(), skipped: make(map[string]int64), memo: newTupleMemo()}
	// The clock starts at the zero time; the first message moves it, before
	// start makes the limiters.
	r.clock = rrl.NewManualClock(r.now)
	for _, z := range opts.Zones {
		zones, err := zonesOf(z)
		if err != nil {
			return nil, err
		}
		r.zones = append(r.zones, zones...)
	}
	if len(opts.CookieSecrets) > 0 {
		r.cookies = miekgrrl.NewCookies(opts.CookieSecrets[0])
		if len(opts.CookieSecrets) > 1 {
			r.cookies.SetPrevious(opts.CookieSecrets[1])
		}
	}
	variants := [][]Setting{opts.Settings}
	labels := []string{""}
	if sw := opts.Sweep; sw != nil {
		if len(sw.Values) == 0 || len(sw.Values) > maxSweep {
			return nil, fmt.Errorf("sweep of %s: want 1 to %d values, got %d", sw.Keyword, maxSweep, len(sw.Values))
		}
		variants, labels = nil, nil
		for _, v := range sw.Values {
			s := append(append([]Setting(nil), opts.Settings...), Setting{Keyword: sw.Keyword, Value: v, Origin: "-sweep"})
			variants = append(variants, s)
			labels = append(labels, sw.Keyword+"="+v)
		}
	}
	for i, v := range variants {
		lc, err := newLimiterConfig(v)
		if err != nil {
			return nil, err
		}
		lc.cfg.SetClock(r.clock)
		e := &engine{label: labels[i], lc: lc, report: newReportBuilder(min(lc.maxTableSize, maxTrackedEntries))}
		e.report.cuts.label(lc.cutRows())
		r.engines = append(r.engines, e)
	}
	return r, nil
}

// maxTrackedEntries bounds the networks and tuples a report keeps.
const maxTrackedEntries = 100000

// Message replays one message. Its Wire is not kept.
func (r *Replay) Message(m *Message) {
	r.messages.Add(1)
	r.advance(m.Time)
	r.pending.expire(r.now)
	if r.engines[0].limiter == nil {
		r.start()
	}
	if len(m.Wire) < dnsHeaderLen || (m.Wire[2]&0x80 != 0) != m.Response {
		r.skip(SkipNotDNS)
		return
	}
	if m.Response {
		r.response(m)
	} else {
		r.query(m)
	}
}

// maxDisorder is how far back in time a message may come and still be
// charged at the latest time seen, as one that came a little out of order
// (from another server writing to the same socket, or another interface of
// a capture). A message further back starts a new stretch of time, such as
// the next file of several: the limiters count the step back as no time.
const maxDisorder = time.Second

// advance sets the clock for a message stamped at.
func (r *Replay) advance(at time.Time) {
	if at.After(r.now) || r.now.Sub(at) > maxDisorder {
		r.now = at
		r.clock.Set(at)
	}
}

// start makes the limiters once the first message has set the clock.
func (r *Replay) start() {
	for _, e := range r.engines {
		e.limiter = rrl.NewRRL(e.lc.cfg)
		e.report.rep.First = r.now
	}
}

func (r *Replay) skip(reason string) { r.skipped[reason]++ }

func (r *Replay) query(m *Message) {
	q, ok := r.limitedQuestion(m.Wire)
	if !ok {
		return
	}
	client := m.Client.Addr().Unmap()
	valid := r.validCookie(q.cookie, m, client)
	p := pendingQuery{at: m.Time, valid: valid}
	for i, e := range r.engines {
		p.refuse(i, len(r.engines), e.request(m.Time, client, m.UDP, valid))
	}
	if r.tap != nil {
		r.tap.request(m.Time, client, m.UDP, valid, p.causes.of(0) != causeNone)
	}
	r.pending.put(pendingKey{m.Client, q.id, m.UDP}, p)
}

// request charges a request from client to the engine's limiter, counts
// it in the report, and returns the limit that refused it, or causeNone.
func (e *engine) request(at time.Time, client netip.Addr, udp, valid bool) cause {
	act, _, why := e.limiter.DebitRequestLimit(client, udp, valid)
	k := causeNone
	if act == rrl.Drop {
		k = requestCause(why)
	}
	e.report.query(at, e.lc.network(client), k)
	return k
}

// chargeStreamTime charges the first response not over UDP to a query the
// engine served with the time the server took over it, as the servers
// charge stream-time-per-second: the time the input gives (Message.Took),
// or else the time from the query's capture to the response's. A response
// whose query was not seen, and that says nothing of its time, is charged
// nothing. Later responses of a zone transfer are not charged: the
// capture does not tell the time the server spent on each.
func (e *engine) chargeStreamTime(client netip.Addr, m *Message, p pendingQuery, matched bool) {
	took := m.Took
	if took <= 0 && matched {
		took = m.Time.Sub(p.at)
	}
	e.limiter.DebitStreamTime(client, took) // nothing when off, or for nothing
}

// refuse notes that configuration i of n refused the query, for cause k
// (causeNone: it did not).
func (p *pendingQuery) refuse(i, n int, k cause) {
	if k == causeNone {
		return
	}
	p.causes.set(i, n, k)
}

// limitedQuestion reads the header and question of the message in w and
// reports whether the servers would limit it: a readable message with a
// question in the replay's zones. Otherwise it counts why it is skipped.
func (r *Replay) limitedQuestion(w []byte) (queryInfo, bool) {
	q, ok := readQuery(w)
	switch {
	case !ok:
		r.skip(SkipNotDNS)
	case !q.question:
		r.skip(SkipNoQuestion)
	case !r.inZones(w):
		r.skip(SkipOutOfZone)
	default:
		return q, true
	}
	return q, false
}

// validCookie judges a query's cookie: a server cookie is checked with the
// secret when there is one, else assumed valid.
func (r *Replay) validCookie(cookie int, m *Message, client netip.Addr) bool {
	if cookie != cookieServer {
		return false
	}
	if r.cookies == nil {
		return true
	}
	var req dns.Msg
	if req.Unpack(m.Wire) != nil {
		return false
	}
	return r.cookies.Check(&req, client, m.Time) == miekgrrl.CookieValid
}

func (r *Replay) response(m *Message) {
	key := pendingKey{m.Client, binary.BigEndian.Uint16(m.Wire), m.UDP}
	var p pendingQuery
	var matched bool
	if m.UDP {
		p, matched = r.pending.take(key)
	} else {
		// A query over TCP may have several responses (a zone transfer):
		// the servers charge its request once, and send or drop the later
		// responses as they did the first.
		p, matched = r.pending.answer(key, m.Time)
	}
	if !matched {
		// The query was not seen (a capture of responses only, or one
		// that began after it): charge it now, with the response.
		if _, ok := r.limitedQuestion(m.Wire); !ok {
			return
		}
	}
	t, ok := r.tuple(m.Wire)
	if !ok {
		r.skip(SkipNotDNS)
		return
	}
	client := m.Client.Addr().Unmap()
	size, slip := len(m.Wire), -1
	t.Size = size // the captured message's length, which all-bytes-per-second charges
	var act0 rrl.Action
	for i, e := range r.engines {
		n := e.lc.network(client)
		if !matched {
			e.report.rep.Unmatched++
			p.refuse(i, len(r.engines), e.request(m.Time, client, m.UDP, false))
			if i == 0 && r.tap != nil {
				r.tap.request(m.Time, client, m.UDP, false, p.causes.of(0) != causeNone)
			}
		}
		var act rrl.Action
		k := p.causes.of(i)
		refused := k != causeNone
		switch {
		case k != causeNone:
			act = rrl.Drop
		case p.answered:
			act = rrl.Send // over TCP: a response limit never keeps it
		case p.valid:
			act = rrl.Send
			e.report.rep.CookieExempt++
		default:
			var rtr rrl.RTReason
			act, _, rtr = e.limiter.DebitResponseAddr(client, m.UDP, &t)
			k = responseCause(rtr, t.AllowanceCategory)
		}
		if act == rrl.Slip && slip < 0 {
			slip = slipSize(m.Wire)
		}
		if i == 0 {
			act0 = act
		}
		if !m.UDP && !refused && !p.answered {
			e.chargeStreamTime(client, m, p, matched)
		}
		e.report.response(m.Time, n, &t, act, refused, size, slip)
		e.report.cuts.response(k, act, size, slip)
	}
	if r.tap != nil {
		sent := 0
		switch act0 {
		case rrl.Send:
			sent = size
		case rrl.Slip:
			sent = slip
		}
		// Only a UDP response to an unproven query is charged to the
		// response accounts; the others are counted all the same.
		r.tap.response(m.Time, client, m.UDP && !p.valid && !p.answered, &t, act0, sent)
	}
}

// tap is told of the traffic as the first configuration charged it (see
// Replay.tap). unproven is whether a response would be charged to the
// response accounts: a UDP response to a query without a valid server
// cookie; sent is the bytes that would have gone (0 when dropped, the
// truncated reply's when slipped).
type tap interface {
	request(at time.Time, client netip.Addr, udp, valid, refused bool)
	response(at time.Time, client netip.Addr, unproven bool, t *rrl.ResponseTuple, act rrl.Action, sent int)
}

// tuple classifies a response with miekgrrl.Tuple, as the servers do, with
// the wildcard origin the zone data tells, as the file plugin tells it to
// the CoreDNS plugin.
func (r *Replay) tuple(wire []byte) (rrl.ResponseTuple, bool) {
	if t, ok := r.memo.get(wire); ok {
		return t, true
	}
	if err := r.msg.Unpack(wire); err != nil {
		return rrl.ResponseTuple{}, false
	}
	origin := ""
	if r.opts.ZoneData != nil && r.msg.Rcode == dns.RcodeSuccess && len(r.msg.Question) > 0 {
		q := r.msg.Question[0]
		origin = r.opts.ZoneData.WildcardOrigin(q.Name, q.Qtype)
	}
	t := miekgrrl.Tuple(nil, &r.msg, origin)
	r.memo.put(wire, t)
	return t, true
}

// slipSize is the size of the reply a slip sends in place of a response:
// its header, question and OPT record. It is the size of the truncated
// reply that nocookie-udp-size sends too, whose OPT record carries the
// cookies the response carried.
func slipSize(resp []byte) int {
	info, _ := readQuery(resp)
	n := dnsHeaderLen
	if info.question {
		n = info.nameEnd + 4
	}
	return n + info.optLen
}

// inZones reports whether the question of the message in w is for a name
// in the replay's zones.
func (r *Replay) inZones(w []byte) bool {
	if len(r.zones) == 0 {
		return true
	}
	name, ok := appendName(r.nameBuf[:0], w, dnsHeaderLen)
	r.nameBuf = name
	if !ok {
		return false
	}
	for _, z := range r.zones {
		if inZone(name, z) {
			return true
		}
	}
	return false
}

// inZone reports whether name is zone or below it; both lower case and
// fully qualified.
func inZone(name []byte, zone string) bool {
	if zone == "." {
		return true
	}
	tail := len(name) - len(zone)
	return tail >= 0 && string(name[tail:]) == zone && (tail == 0 || name[tail-1] == '.')
}

// network returns the client network of addr under this configuration's
// prefix lengths.
func (lc *limiterConfig) network(addr netip.Addr) netip.Prefix {
	bits := lc.ipv6Bits
	if addr.Is4() {
		bits = lc.ipv4Bits
	}
	p, _ := addr.WithZone("").Prefix(bits)
	return p
}

// Reports returns the report of each configuration, in the order of the
// sweep's values (one report without a sweep).
func (r *Replay) Reports() []*Report {
	var out []*Report
	unanswered := r.pending.unansweredNow()
	for _, e := range r.engines {
		rep := e.report.report(r.opts.Top)
		rep.Setting = e.label
		for _, s := range e.lc.settings {
			rep.Settings = append(rep.Settings, s.String())
		}
		if rep.Settings == nil {
			rep.Settings = []string{}
		}
		rep.Last = r.now
		rep.Packets = r.packets.Load()
		rep.Unanswered = unanswered
		rep.Zones = r.zones
		rep.Skipped = make(map[string]int64, len(r.skipped))
		for k, v := range r.skipped {
			rep.Skipped[k] = v
		}
		rep.Cookies = "server cookies assumed valid (no cookie secret given)"
		if r.cookies != nil {
			rep.Cookies = "server cookies validated with the cookie secret"
		}
		out = append(out, rep)
	}
	return out
}

// Stop makes ReadFile and Read return at the next packet, as if the input
// ended there, so that a replay interrupted by its user still reports. It
// is safe to call from any goroutine.
func (r *Replay) Stop() { r.stopped.Store(true) }

// Stats returns the packets (or dnstap frames) and messages read so far.
// It may be called while a replay runs: the messages are read first, so
// that none of them is from a packet not yet counted.
func (r *Replay) Stats() (packets, messages int64) {
	messages = r.messages.Load()
	return r.packets.Load(), messages
}
