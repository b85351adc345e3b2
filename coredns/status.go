package rrl

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coredns/caddy"

	core "github.com/dnsrrl/rrl"
	"github.com/dnsrrl/rrl/miekgrrl"
)

// An operator sees who is limited now in two ways, both read from the
// core's record of limited accounts (core.RRL.Limited), which either
// option turns on:
//
//	status HOST:PORT          serves JSON at http://HOST:PORT/rrl/limited, and the
//	                          busiest accounts at /rrl/top
//	log-limited DURATION [N]  logs the N networks with the most refusals every DURATION
//
// Neither names a client in a metric label: the record is bounded, and the
// endpoint and the log line are read only when asked for or once a period.
//
// Both list the accounts in debt now (core.RRL.Limited), each with the
// refusals its limit decided, so that a network's counts add up to what it
// was refused. The start and stop lines (log.go) follow episodes instead,
// which end only after 60 quiet seconds (quietPeriod): a network is out of
// the status and the summary as soon as it is back in credit, and logged
// as no longer limited up to a minute later.
//
// The listener is for an operator's tools, and bounded so that it cannot
// be turned against the server (statusLimits): a few connections at a
// time, each request read within a few seconds. Bound to an address
// beyond loopback (":9154" binds every interface), it is logged with a
// warning, since it names clients.

// statusPath is where the status endpoint serves the limited accounts,
// and topPath where it serves the busiest accounts (core.RRL.Top), those
// nearest their allowance over the last whole second, limited or not.
const (
	statusPath = "/rrl/limited"
	topPath    = "/rrl/top"
)

// statusLimits bounds every status listener (a variable for the tests).
var statusLimits = miekgrrl.DefaultStatusLimits

// log-limited's bounds: the period, and how many networks a line names.
const (
	minLogLimited     = time.Second
	maxLogLimited     = 24 * time.Hour
	defaultLogLimited = 5
	maxLogLimitedN    = 100
)

// opsOptions are the block's status and log-limited settings.
type opsOptions struct {
	status   string        // host:port of the status endpoint; "" for none
	logEvery time.Duration // 0 for no log-limited
	logN     int
}

// parseStatus reads "status HOST:PORT". HOST may be empty (every address);
// the port must be given, as a number.
func parseStatus(c *caddy.Controller, cfg *core.Config, opts *opsOptions, args []string) error {
	if len(args) != 1 {
		return c.Errf("status takes exactly one HOST:PORT, got %d values", len(args))
	}
	_, port, err := net.SplitHostPort(args[0])
	if err != nil {
		return c.Errf("status %q: want HOST:PORT, such as 127.0.0.1:9154", args[0])
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return c.Errf("status %q: port %q: want a number from 1 to 65535", args[0], port)
	}
	opts.status = args[0]
	cfg.SetRecordLimited(true)
	return nil
}

// parseLogLimited reads "log-limited DURATION [N]".
func parseLogLimited(c *caddy.Controller, cfg *core.Config, opts *opsOptions, args []string) error {
	if len(args) < 1 || len(args) > 2 {
		return c.Errf("log-limited takes DURATION and an optional N, got %d values", len(args))
	}
	d, err := time.ParseDuration(args[0])
	if err != nil || d < minLogLimited || d > maxLogLimited {
		return c.Errf("log-limited duration %q: want a duration from %v to %v, such as 1m", args[0], minLogLimited, maxLogLimited)
	}
	n := defaultLogLimited
	if len(args) == 2 {
		if n, err = strconv.Atoi(args[1]); err != nil || n < 1 || n > maxLogLimitedN {
			return c.Errf("log-limited N %q: want a whole number from 1 to %d", args[1], maxLogLimitedN)
		}
	}
	opts.logEvery, opts.logN = d, n
	cfg.SetRecordLimited(true)
	return nil
}

// ops is the running side of a block's status and log-limited settings.
type ops struct {
	opts opsOptions

	mu       sync.Mutex
	listed   bool          // the block is served by its status listener
	stopLog  chan struct{} // closed to stop the log loop; nil when not running
	logDone  chan struct{}
	finished bool
}

// newOps returns the ops of a block, nil when it sets neither option.
func newOps(opts opsOptions) *ops {
	if opts.status == "" && opts.logEvery == 0 {
		return nil
	}
	return &ops{opts: opts}
}

// start puts the block on its status listener, opening it unless a block
// of this or the previous configuration has it open already (a reload
// starts the new blocks before the old ones stop), and starts the log
// loop. It fails if the listener cannot be opened.
func (o *ops) start(h *RRL) error {
	if o == nil {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.finished || o.listed || o.stopLog != nil {
		return nil
	}
	block := statusBlock{seq: h.stats.seq, zones: h.Zones, servers: h.listeners, reportOnly: h.reportOnly, limiter: h.limiter, kernel: h.kernel}
	if o.opts.status != "" {
		if err := statusListeners.add(o.opts.status, o, block); err != nil {
			return err
		}
		o.listed = true
	}
	if o.opts.logEvery > 0 {
		o.stopLog, o.logDone = make(chan struct{}), make(chan struct{})
		go o.logLoop(block, o.stopLog, o.logDone)
	}
	return nil
}

// stop takes the block off its status listener, closing the listener if
// no other block has it, and stops the log loop. It is safe to call more
// than once, and before start.
func (o *ops) stop() {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.finished = true
	if o.listed {
		statusListeners.remove(o.opts.status, o)
		o.listed = false
	}
	if o.stopLog != nil {
		close(o.stopLog)
		<-o.logDone
		o.stopLog = nil
	}
}

// logLoop logs the summary of the block's limited networks every period
// while any is limited, until stop is closed.
func (o *ops) logLoop(b statusBlock, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(o.opts.logEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			if line := summarize(b.limiter.Limited(miekgrrl.MaxLimitedN, core.ByRefused), o.opts.logN, b.zones, b.reportOnly, now); line != "" {
				log.Info(line)
			}
		}
	}
}

// networkSummary is what log-limited says of one network.
type networkSummary struct {
	network  string
	refused  int64
	accounts int
	since    time.Time
	heaviest core.LimitedAccount
}

// summarize renders the log-limited line: the n networks with the most
// refusals, summed over their accounts, such as
//
//	limited now in [example.org.]: 2 networks, 3 accounts; 192.0.2.0/24 1234 refused in 2m5s by 2 accounts, most by responses-per-second for www.example.org. IN A; 198.51.100.0/24 56 refused in 10s by requests-per-second
//
// and "" when none is limited.
func summarize(accounts []core.LimitedAccount, n int, zones []string, reportOnly bool, now time.Time) string {
	if len(accounts) == 0 {
		return ""
	}
	byNet := map[string]*networkSummary{}
	var nets []*networkSummary
	for _, a := range accounts { // most refused first: the first of a network is its heaviest
		key := a.Network.String()
		s := byNet[key]
		if s == nil {
			s = &networkSummary{network: key, since: a.Since, heaviest: a}
			byNet[key] = s
			nets = append(nets, s)
		}
		s.refused += a.Refused
		s.accounts++
		if a.Since.Before(s.since) {
			s.since = a.Since
		}
	}
	slices.SortStableFunc(nets, func(a, b *networkSummary) int { return cmp.Compare(b.refused, a.refused) })
	var b strings.Builder
	if reportOnly {
		b.WriteString("would be ")
	}
	fmt.Fprintf(&b, "limited now in %v: %s, %s", zones, plural(len(nets), "network"), plural(len(accounts), "account"))
	for _, s := range nets[:min(n, len(nets))] {
		fmt.Fprintf(&b, "; %s %d refused in %v by ", s.network, s.refused, now.Sub(s.since).Round(time.Second))
		if s.accounts > 1 {
			fmt.Fprintf(&b, "%d accounts, most by ", s.accounts)
		}
		b.WriteString(accountName(s.heaviest))
	}
	if len(nets) > n {
		b.WriteString("; and " + plural(len(nets)-n, "more network"))
	}
	return b.String()
}

// plural returns "1 network", "2 networks".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// accountName names an account by its allowance and what it is kept for:
// "responses-per-second for www.example.org. IN A".
func accountName(a core.LimitedAccount) string {
	j := miekgrrl.NewLimitedJSON([]core.LimitedAccount{a})[0]
	s := j.Limit
	if j.Name != "" {
		s += " for " + j.Name
	}
	if j.Class != "" && j.Type != "" {
		s += " " + j.Class + " " + j.Type
	}
	return s
}

// statusBlock is what the status endpoint serves of one block.
type statusBlock struct {
	seq        uint64
	zones      []string
	servers    []string
	reportOnly bool
	limiter    *core.RRL
	kernel     *kernelDrop // nil without kernel-drop
}

// listeners is the process's status listeners, by address as the
// Corefile gives it, each shared by the blocks that name it: of this
// configuration, and during a reload of the previous one too.
type listeners struct {
	mu sync.Mutex
	m  map[string]*statusListener
}

var statusListeners = &listeners{m: map[string]*statusListener{}}

// statusListener is one status endpoint and the blocks it serves.
type statusListener struct {
	srv    *http.Server
	bound  net.Addr // the address listened on, its port chosen if :0
	mu     sync.Mutex
	blocks map[*ops]statusBlock
}

// add serves b, of the block o, at addr, opening the listener if need be.
func (l *listeners) add(addr string, o *ops, b statusBlock) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.m[addr]
	if s == nil {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("status %s: %v", addr, err)
		}
		if miekgrrl.StatusExposed(ln.Addr()) {
			log.Warningf("status %s listens on %s, which is not a loopback address: the endpoint names the clients being limited, "+
				"so anyone who can reach it learns them; give a loopback or management address, such as 127.0.0.1:PORT", addr, ln.Addr())
		}
		s = &statusListener{bound: ln.Addr(), blocks: map[*ops]statusBlock{}}
		mux := http.NewServeMux()
		mux.Handle(statusPath, s)
		mux.HandleFunc(topPath, s.serveTop)
		s.srv = miekgrrl.ServeStatus(ln, mux, statusLimits)
		l.m[addr] = s
	}
	s.mu.Lock()
	s.blocks[o] = b
	s.mu.Unlock()
	return nil
}

// remove stops serving the block o at addr, and closes the listener when
// it serves no block.
func (l *listeners) remove(addr string, o *ops) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.m[addr]
	if s == nil {
		return
	}
	s.mu.Lock()
	delete(s.blocks, o)
	empty := len(s.blocks) == 0
	s.mu.Unlock()
	if empty {
		s.srv.Close()
		delete(l.m, addr)
	}
}

// statusJSON is the document the status endpoint serves.
type statusJSON struct {
	Blocks []blockJSON `json:"blocks"`
}

type blockJSON struct {
	Zones      []string               `json:"zones"`
	Servers    []string               `json:"servers"`
	ReportOnly bool                   `json:"report_only"`
	Limited    []miekgrrl.LimitedJSON `json:"limited"`
	Kernel     []kernelJSON           `json:"kernel,omitempty"` // with kernel-drop: the networks in the kernel
}

// ServeHTTP serves the limited accounts of every block on the listener,
// as miekgrrl.LimitedHandler does for one: query n and order. Of two
// blocks with the same zones and servers (the old and the new one, during
// a reload) the newer is served.
func (s *statusListener) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if !miekgrrl.ReadOnlyRequest(w, req) {
		return
	}
	n, order, err := miekgrrl.ParseLimitedQuery(req.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	doc := statusJSON{Blocks: []blockJSON{}}
	for _, b := range s.current() {
		doc.Blocks = append(doc.Blocks, blockJSON{Zones: b.zones, Servers: b.servers, ReportOnly: b.reportOnly,
			Limited: miekgrrl.NewLimitedJSON(b.limiter.Limited(n, order)), Kernel: newKernelJSON(b.kernel.opened())})
	}
	writeJSON(w, doc)
}

// topJSON is the document the status endpoint serves at topPath.
type topJSON struct {
	Blocks []blockTopJSON `json:"blocks"`
}

type blockTopJSON struct {
	Zones      []string           `json:"zones"`
	Servers    []string           `json:"servers"`
	ReportOnly bool               `json:"report_only"`
	Top        []miekgrrl.TopJSON `json:"top"`
}

// serveTop serves the busiest accounts of every block on the listener, as
// miekgrrl.TopHandler does for one: query n. The blocks count only while
// someone asks (see core.RRL.Top): the first request arms them all and
// waits a second or two, until each has counted a whole second.
func (s *statusListener) serveTop(w http.ResponseWriter, req *http.Request) {
	if !miekgrrl.ReadOnlyRequest(w, req) {
		return
	}
	n, err := miekgrrl.ParseTopQuery(req.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	blocks := s.current()
	limiters := make([]*core.RRL, len(blocks))
	for i, b := range blocks {
		limiters[i] = b.limiter
	}
	tops, err := miekgrrl.WaitTop(req.Context(), n, limiters...)
	if err != nil {
		return // the client went away
	}
	doc := topJSON{Blocks: []blockTopJSON{}}
	for i, b := range blocks {
		doc.Blocks = append(doc.Blocks, blockTopJSON{Zones: b.zones, Servers: b.servers, ReportOnly: b.reportOnly, Top: miekgrrl.NewTopJSON(tops[i])})
	}
	writeJSON(w, doc)
}

// current returns the blocks served, the newest of each (zones, servers),
// in the order of their zones.
func (s *statusListener) current() []statusBlock {
	s.mu.Lock()
	newest := map[string]statusBlock{}
	for _, b := range s.blocks {
		key := strings.Join(b.zones, " ") + "|" + strings.Join(b.servers, " ")
		if o, ok := newest[key]; !ok || o.seq < b.seq {
			newest[key] = b
		}
	}
	s.mu.Unlock()
	keys := slices.Sorted(maps.Keys(newest))
	out := make([]statusBlock, len(keys))
	for i, k := range keys {
		out[i] = newest[k]
	}
	return out
}

// writeJSON writes v as indented JSON, uncached.
func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v) // an error is the client's going away
}
