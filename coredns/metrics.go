package rrl

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/coredns/coredns/plugin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	core "github.com/dnsrrl/rrl"
)

// Every label here takes its values from the Corefile or from fixed lists:
// a client address never becomes a label, so a flood from many networks
// cannot grow the metrics.
var (
	responsesTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "responses_total",
		Help:      "Responses charged to a client network, by category and by what rrl decided (in report-only mode, what it would have done).",
	}, []string{"server", "zone", "category", "action"})

	responsesExceeded = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "responses_exceeded_total",
		Help:      "Responses over their allowance, all-per-second or all-bytes-per-second, which were dropped or slipped (or would have been, in report-only mode).",
	}, []string{"server", "zone", "category"})

	allBytesExceeded = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "all_bytes_exceeded_total",
		Help:      "UDP responses dropped because the client network was over all-bytes-per-second (or that would have been, in report-only mode).",
	}, []string{"server", "zone"})

	noCookieTruncated = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "nocookie_truncated_total",
		Help:      "UDP responses longer than nocookie-udp-size, to a request without a valid server cookie, sent as a truncated reply instead (or that would have been, in report-only mode).",
	}, []string{"server", "zone"})

	requestsExceeded = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "requests_exceeded_total",
		Help:      "Requests over requests-per-second (source unproven) or proven-requests-per-second (source proven: TCP and the other connection transports, or a valid server cookie), refused before any plugin below rrl saw them (or that would have been, in report-only mode).",
	}, []string{"server", "zone", "source"})

	streamTimeExceeded = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "stream_time_exceeded_total",
		Help:      "Requests not over UDP (TCP, TLS, HTTPS, QUIC, gRPC) refused before any plugin below rrl saw them because their client network had spent its stream-time-per-second budget of handling time (or that would have been, in report-only mode).",
	}, []string{"server", "zone"})

	cookieExemptTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "cookie_exempt_total",
		Help:      "Responses sent without limiting because the request carried a valid server cookie.",
	}, []string{"server", "zone"})

	// The table metrics are per server block: zone is the block's first
	// rrl zone, which tells apart blocks that share a listener.
	tableSizeDesc = prometheus.NewDesc(
		prometheus.BuildFQName(plugin.Namespace, pluginName, "table_size"),
		"Accounts held in the server block's rrl table.",
		[]string{"server", "zone"}, nil)

	tableMaxDesc = prometheus.NewDesc(
		prometheus.BuildFQName(plugin.Namespace, pluginName, "table_max_size"),
		"The server block's max-table-size.",
		[]string{"server", "zone"}, nil)

	evictionsDesc = prometheus.NewDesc(
		prometheus.BuildFQName(plugin.Namespace, pluginName, "table_evictions_total"),
		"Accounts recycled because their set of five in the table was full.",
		[]string{"server", "zone"}, nil)

	limitedDesc = prometheus.NewDesc(
		prometheus.BuildFQName(plugin.Namespace, pluginName, "limited_accounts"),
		"Accounts being limited now: started minus stopped limiting episodes.",
		[]string{"server", "zone"}, nil)

	// The label prefix_length is a length from the Corefile, never a
	// prefix: the refusals of every /18 add up in one series.
	requestPrefixDesc = prometheus.NewDesc(
		prometheus.BuildFQName(plugin.Namespace, pluginName, "request_prefix_exceeded_total"),
		"Unproven requests refused because a prefix of their source was over its allowance in ipv4-request-prefixes or ipv6-request-prefixes (among requests_exceeded_total with source unproven), by the prefix's configured length.",
		[]string{"server", "zone", "family", "prefix_length"}, nil)

	kernelDroppedDesc = prometheus.NewDesc(
		prometheus.BuildFQName(plugin.Namespace, pluginName, "kernel_dropped_total"),
		"UDP packets that kernel-drop's XDP program dropped before they reached the server: packets to the block's listeners from networks in its kernel drop list, as the kernel counted them.",
		[]string{"server", "zone"}, nil)

	kernelNetworksDesc = prometheus.NewDesc(
		prometheus.BuildFQName(plugin.Namespace, pluginName, "kernel_networks"),
		"Networks in the server block's kernel drop list now (in report-only mode, those that would be).",
		[]string{"server", "zone"}, nil)
)

func init() { prometheus.MustRegister(liveInstances) }

var categoryLabels = [core.AllowanceLast]string{
	core.AllowanceAnswer:   "answer",
	core.AllowanceReferral: "referral",
	core.AllowanceNoData:   "nodata",
	core.AllowanceNXDomain: "nxdomain",
	core.AllowanceError:    "error",
}

// sourceLabels name whether a request's source address is proven.
var sourceLabels = [2]string{"unproven", "proven"}

var actionLabels = [core.ActionLast]string{
	core.Send: "send",
	core.Drop: "drop",
	core.Slip: "slip",
}

// serverCounters are the counters of one server and one server block,
// resolved once: a CounterVec lookup hashes its labels, which would cost
// more than all the rest of the plugin's work on a query.
type serverCounters struct {
	server    string
	responses [][core.AllowanceLast][core.ActionLast]prometheus.Counter // by zone index
	exceeded  [][core.AllowanceLast]prometheus.Counter
	requests  [][2]prometheus.Counter // by zone index, then unproven, proven
	cookies   []prometheus.Counter
	allBytes  []prometheus.Counter
	tooLarge  []prometheus.Counter
	stream    []prometheus.Counter // stream-time-per-second
}

func newServerCounters(server string, zones []string) *serverCounters {
	sc := &serverCounters{
		server:    server,
		responses: make([][core.AllowanceLast][core.ActionLast]prometheus.Counter, len(zones)),
		exceeded:  make([][core.AllowanceLast]prometheus.Counter, len(zones)),
		requests:  make([][2]prometheus.Counter, len(zones)),
		cookies:   make([]prometheus.Counter, len(zones)),
		allBytes:  make([]prometheus.Counter, len(zones)),
		tooLarge:  make([]prometheus.Counter, len(zones)),
		stream:    make([]prometheus.Counter, len(zones)),
	}
	for z, zone := range zones {
		for c, cat := range categoryLabels {
			for a, act := range actionLabels {
				sc.responses[z][c][a] = responsesTotal.WithLabelValues(server, zone, cat, act)
			}
			sc.exceeded[z][c] = responsesExceeded.WithLabelValues(server, zone, cat)
		}
		for p, source := range sourceLabels {
			sc.requests[z][p] = requestsExceeded.WithLabelValues(server, zone, source)
		}
		sc.cookies[z] = cookieExemptTotal.WithLabelValues(server, zone)
		sc.allBytes[z] = allBytesExceeded.WithLabelValues(server, zone)
		sc.tooLarge[z] = noCookieTruncated.WithLabelValues(server, zone)
		sc.stream[z] = streamTimeExceeded.WithLabelValues(server, zone)
		seriesRefs.hold(server, zone)
	}
	return sc
}

// instanceStats is the metrics and logging side of one server block.
type instanceStats struct {
	seq          uint64 // order of creation: of two blocks with the same labels, the newer reports
	zones        []string
	reportOnly   bool
	maxTableSize int
	limiter      *core.RRL
	prefixes     [2][]core.RequestPrefix           // ipv4-request-prefixes, ipv6-request-prefixes
	kernel       *kernelDrop                       // kernel-drop, nil when off
	servers      atomic.Pointer[[]*serverCounters] // copied on write, under serversMu
	serversMu    sync.Mutex
	limited      limitedCount
	logs         logLimiter // start lines
	stopLogs     logLimiter // stop and eviction lines, so that a flood of starts cannot hide them
	episodes     episodes
	released     atomic.Bool
}

var instanceSeq atomic.Uint64

func newInstanceStats(zones []string, reportOnly bool) *instanceStats {
	return &instanceStats{seq: instanceSeq.Add(1), zones: zones, reportOnly: reportOnly}
}

// addServer makes the counters of a server ahead of traffic, so that every
// series exists, at zero, from the start.
func (s *instanceStats) addServer(server string) { s.forServer(server) }

// forServer returns the counters of a server. A block has a server per
// listener, nearly always one or two, so they are found by comparing names
// (usually the very same string, which compares at once) in a list that is
// only copied when a server is added: neither alternating between servers
// nor looking one up allocates or writes anything shared.
func (s *instanceStats) forServer(server string) *serverCounters {
	if l := s.servers.Load(); l != nil {
		for _, sc := range *l {
			if sc.server == server {
				return sc
			}
		}
	}
	s.serversMu.Lock()
	defer s.serversMu.Unlock()
	var list []*serverCounters
	if l := s.servers.Load(); l != nil {
		list = *l
	}
	for _, sc := range list {
		if sc.server == server {
			return sc
		}
	}
	sc := newServerCounters(server, s.zones)
	list = append(list[:len(list):len(list)], sc)
	s.servers.Store(&list)
	return sc
}

// serverList returns the servers seen so far.
func (s *instanceStats) serverList() []*serverCounters {
	if l := s.servers.Load(); l != nil {
		return *l
	}
	return nil
}

// release gives up the block's metric series: those that no other block
// (in particular the one a reload put in its place) has are deleted, so
// that a zone or server removed by a reload does not linger at its last
// value. It is safe to call more than once.
func (s *instanceStats) release() {
	if !s.released.CompareAndSwap(false, true) {
		return
	}
	for _, sc := range s.serverList() {
		for _, zone := range s.zones {
			seriesRefs.drop(sc.server, zone)
		}
	}
}

// refs counts the blocks that have the counter series of a (server, zone):
// blocks of the old and the new configuration overlap during a reload, so a
// series goes only when the last block that has it is released.
type refs struct {
	mu sync.Mutex
	n  map[[2]string]int
}

var seriesRefs = &refs{n: map[[2]string]int{}}

func (r *refs) hold(server, zone string) {
	r.mu.Lock()
	r.n[[2]string{server, zone}]++
	r.mu.Unlock()
}

func (r *refs) drop(server, zone string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := [2]string{server, zone}
	if r.n[k]--; r.n[k] > 0 {
		return
	}
	delete(r.n, k)
	l := prometheus.Labels{"server": server, "zone": zone}
	responsesTotal.DeletePartialMatch(l)
	responsesExceeded.DeletePartialMatch(l)
	requestsExceeded.DeletePartialMatch(l)
	cookieExemptTotal.DeletePartialMatch(l)
	allBytesExceeded.DeletePartialMatch(l)
	noCookieTruncated.DeletePartialMatch(l)
	streamTimeExceeded.DeletePartialMatch(l)
}

// count records one decision of the limiter on a response.
func (s *instanceStats) count(server string, zone int, cat core.AllowanceCategory, act core.Action, rtr core.RTReason) {
	if cat >= core.AllowanceLast || act >= core.ActionLast {
		return
	}
	sc := s.forServer(server)
	sc.responses[zone][cat][act].Inc()
	switch rtr {
	case core.RTRateLimit, core.RTAllLimit:
		sc.exceeded[zone][cat].Inc()
	case core.RTAllBytesLimit:
		sc.exceeded[zone][cat].Inc()
		sc.allBytes[zone].Inc()
	case core.RTTooLarge:
		sc.tooLarge[zone].Inc()
	}
}

// requestRefused records a request over its request limit.
func (s *instanceStats) requestRefused(server string, zone int, proven bool) {
	p := 0
	if proven {
		p = 1
	}
	s.forServer(server).requests[zone][p].Inc()
}

// streamTimeRefused records a stream request refused because its network
// was over stream-time-per-second.
func (s *instanceStats) streamTimeRefused(server string, zone int) {
	s.forServer(server).stream[zone].Inc()
}

// cookieExempt records a response sent unlimited for its server cookie.
func (s *instanceStats) cookieExempt(server string, zone int) {
	s.forServer(server).cookies[zone].Inc()
}

// instances is the set of running server blocks, which the table metrics
// read at scrape time: the tables are only summed when someone asks.
type instances struct {
	mu  sync.Mutex
	set map[*instanceStats]bool
}

var liveInstances = &instances{set: map[*instanceStats]bool{}}

func (in *instances) add(s *instanceStats) {
	in.mu.Lock()
	in.set[s] = true
	in.mu.Unlock()
}

func (in *instances) remove(s *instanceStats) {
	in.mu.Lock()
	delete(in.set, s)
	in.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (in *instances) Describe(ch chan<- *prometheus.Desc) {
	ch <- tableSizeDesc
	ch <- tableMaxDesc
	ch <- evictionsDesc
	ch <- limitedDesc
	ch <- requestPrefixDesc
	ch <- kernelDroppedDesc
	ch <- kernelNetworksDesc
}

// Collect implements prometheus.Collector. A block that listens on several
// addresses reports its one table under each. Two blocks can have the same
// labels (server, first zone) for a while: on reload the new configuration
// starts before the old one shuts down. A registry refuses duplicate series
// (the whole scrape fails), so only the newest block reports.
func (in *instances) Collect(ch chan<- prometheus.Metric) {
	in.mu.Lock()
	defer in.mu.Unlock()
	newest := map[[2]string]*instanceStats{}
	for s := range in.set {
		zone := s.zones[0]
		for _, sc := range s.serverList() {
			key := [2]string{sc.server, zone}
			if o := newest[key]; o == nil || o.seq < s.seq {
				newest[key] = s
			}
		}
	}
	for key, s := range newest {
		st := s.limiter.GetStats(false)
		server, zone := key[0], key[1]
		ch <- prometheus.MustNewConstMetric(tableSizeDesc, prometheus.GaugeValue, float64(st.CacheLength), server, zone)
		ch <- prometheus.MustNewConstMetric(tableMaxDesc, prometheus.GaugeValue, float64(s.maxTableSize), server, zone)
		ch <- prometheus.MustNewConstMetric(evictionsDesc, prometheus.CounterValue, float64(st.Evictions), server, zone)
		ch <- prometheus.MustNewConstMetric(limitedDesc, prometheus.GaugeValue, float64(s.limited.value()), server, zone)
		for fam, list := range s.prefixes {
			for i, p := range list {
				ch <- prometheus.MustNewConstMetric(requestPrefixDesc, prometheus.CounterValue, float64(st.RequestPrefixDrops[fam][i]),
					server, zone, familyLabels[fam], strconv.Itoa(p.Bits))
			}
		}
		if l := s.kernel.opened(); l != nil {
			ch <- prometheus.MustNewConstMetric(kernelDroppedDesc, prometheus.CounterValue, float64(l.Dropped()), server, zone)
			ch <- prometheus.MustNewConstMetric(kernelNetworksDesc, prometheus.GaugeValue, float64(len(l.Networks())), server, zone)
		}
	}
}

// familyLabels name the address families of core.Stats.RequestPrefixDrops.
var familyLabels = [2]string{"ipv4", "ipv6"}
