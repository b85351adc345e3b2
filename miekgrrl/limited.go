package miekgrrl

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dnsrrl/rrl"
	"github.com/miekg/dns"
)

// The query of a request for the accounts being limited: how many, and in
// which order.
const (
	DefaultLimitedN = 20   // n when the query leaves it out
	MaxLimitedN     = 2048 // the most accounts the core's record holds
)

// LimitedHandler returns an http.Handler that serves the accounts l is
// limiting now (rrl.RRL.Limited) as JSON, so that an operator sees who is
// limited without reading logs: {"limited": [LimitedJSON, ...]}. The query
// may set n (1 to MaxLimitedN, default DefaultLimitedN) and order (debt,
// the default, or refused); a bad value is answered with status 400 and
// its error. l must keep the record (rrl.Config.SetRecordLimited), or the
// list is always empty. Only GET and HEAD are served. The handler reads
// the record on each request, and the record is at most MaxLimitedN
// accounts, so a request costs the same whatever the size of the table.
func LimitedHandler(l *rrl.RRL) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		n, order, ok := limitedQuery(w, req)
		if !ok {
			return
		}
		writeJSON(w, struct {
			Limited []LimitedJSON `json:"limited"`
		}{NewLimitedJSON(l.Limited(n, order))})
	})
}

// limitedQuery reads n and order from req's query. If the method is not GET or HEAD, or a value is bad, it
// writes the error to w and returns false.
func limitedQuery(w http.ResponseWriter, req *http.Request) (int, rrl.LimitedOrder, bool) {
	if !ReadOnlyRequest(w, req) {
		return 0, 0, false
	}
	n, order, err := ParseLimitedQuery(req.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return 0, 0, false
	}
	return n, order, true
}

// ReadOnlyRequest reports whether req is a GET or a HEAD, the methods a
// status endpoint serves; if not, it answers 405 with the methods allowed.
// It is there for a server that serves LimitedJSON or TopJSON its own way.
func ReadOnlyRequest(w http.ResponseWriter, req *http.Request) bool {
	if req.Method == http.MethodGet || req.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	http.Error(w, "only GET and HEAD", http.StatusMethodNotAllowed)
	return false
}

// ParseLimitedQuery reads n and order from a query (see LimitedHandler).
func ParseLimitedQuery(q url.Values) (int, rrl.LimitedOrder, error) {
	n := DefaultLimitedN
	if v := q.Get("n"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > MaxLimitedN {
			return 0, 0, fmt.Errorf("n %q: want a whole number from 1 to %d", v, MaxLimitedN)
		}
	}
	switch v := q.Get("order"); v {
	case "", "debt":
		return n, rrl.ByDebt, nil
	case "refused":
		return n, rrl.ByRefused, nil
	default:
		return 0, 0, fmt.Errorf("order %q: want debt or refused", v)
	}
}

// LimitedJSON is an account being limited as LimitedHandler writes it.
// Name, type and class are those the account is kept for (see
// rrl.LimitedAccount.Tuple), and absent where it is kept for none.
type LimitedJSON struct {
	Network     string    `json:"network"`        // "192.0.2.0/24"
	Limit       string    `json:"limit"`          // the allowance's keyword: "responses-per-second", "requests-per-second"...
	Name        string    `json:"name,omitempty"` // "www.example.org."
	Type        string    `json:"type,omitempty"` // "A"
	Class       string    `json:"class,omitempty"`
	Since       time.Time `json:"since"`        // when the episode started
	DebtSeconds float64   `json:"debt_seconds"` // how long until it admits again if nothing more is charged (rrl.LimitedAccount.Debt): above 0
	Refused     int64     `json:"refused"`      // responses dropped or slipped, or requests refused, since; each counted at the one limit that decided it
}

// NewLimitedJSON returns the JSON form of accounts; never nil, so that
// none is written as an empty list.
func NewLimitedJSON(accounts []rrl.LimitedAccount) []LimitedJSON {
	out := make([]LimitedJSON, len(accounts))
	for i, a := range accounts {
		typ, class := typeAndClass(a.Tuple)
		out[i] = LimitedJSON{
			Network: a.Network.String(), Limit: a.LimitKind.String(), Name: a.Tuple.SalientName, Type: typ, Class: class,
			Since: a.Since, DebtSeconds: a.Debt.Seconds(), Refused: a.Refused,
		}
	}
	return out
}

// typeAndClass returns the mnemonics of the type and class an account is
// kept for, "" where it is kept for none.
func typeAndClass(t rrl.ResponseTuple) (typ, class string) {
	if t.Type != 0 {
		typ = dns.Type(t.Type).String()
	}
	if t.Class != 0 {
		class = dns.Class(t.Class).String()
	}
	return typ, class
}

// writeJSON writes v as indented JSON, uncached.
func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v) // an error is the client's going away
}

// A status endpoint names the clients being limited, and its server must
// not become a way to exhaust the DNS server's descriptors and memory: a
// client that opens connections and sends half a request would otherwise
// hold a descriptor and a goroutine each for as long as it likes.
// ServeStatus bounds both.

// StatusLimits bounds a status endpoint's server (see ServeStatus).
type StatusLimits struct {
	// MaxConns is how many connections it serves at once. Further
	// connections wait in the kernel's listen queue, unaccepted, until one
	// closes.
	MaxConns int
	// ReadTimeout is how long a connection may take to send a request,
	// headers and body, and WriteTimeout how long the answer may take to
	// be written: a half-sent request is closed after ReadTimeout.
	ReadTimeout, WriteTimeout time.Duration
	// IdleTimeout is how long a kept-alive connection may wait for its
	// next request.
	IdleTimeout time.Duration
}

// DefaultStatusLimits is what the CoreDNS plugin's status listener uses: a
// few operators' tools at a time, each request read within 5 seconds.
var DefaultStatusLimits = StatusLimits{MaxConns: 16, ReadTimeout: 5 * time.Second, WriteTimeout: 10 * time.Second, IdleTimeout: 30 * time.Second}

// ServeStatus serves h on ln, within lim, in a goroutine, and returns the
// server; its Close closes ln and every connection. A limit of 0 takes
// DefaultStatusLimits' value.
func ServeStatus(ln net.Listener, h http.Handler, lim StatusLimits) *http.Server {
	d := DefaultStatusLimits
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cmpOr(lim.ReadTimeout, d.ReadTimeout),
		ReadTimeout:       cmpOr(lim.ReadTimeout, d.ReadTimeout),
		WriteTimeout:      cmpOr(lim.WriteTimeout, d.WriteTimeout),
		IdleTimeout:       cmpOr(lim.IdleTimeout, d.IdleTimeout),
		MaxHeaderBytes:    16 << 10, // a GET with a short query needs far less
	}
	go srv.Serve(newCappedListener(ln, cmpOr(lim.MaxConns, d.MaxConns)))
	return srv
}

// cmpOr returns v, or def when v is 0 or less.
func cmpOr[T int | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// StatusExposed reports whether a listener bound to addr can be reached
// from beyond this host: any address but a loopback one (127.0.0.0/8,
// ::1), the unspecified addresses (":9154", "0.0.0.0:9154") included. A
// server logs a warning for it, since the endpoint names clients.
func StatusExposed(addr net.Addr) bool {
	if strings.HasPrefix(addr.Network(), "unix") {
		return false
	}
	ap, err := netip.ParseAddrPort(addr.String())
	return err != nil || !ap.Addr().Unmap().IsLoopback()
}

// cappedListener accepts at most cap(slots) connections at once: Accept
// waits for a slot before it takes a connection from the kernel, and a
// connection gives its slot back when closed.
type cappedListener struct {
	net.Listener
	slots  chan struct{}
	closed chan struct{}
	once   sync.Once
}

func newCappedListener(ln net.Listener, n int) *cappedListener {
	return &cappedListener{Listener: ln, slots: make(chan struct{}, n), closed: make(chan struct{})}
}

// Accept waits for a free slot, then for a connection.
func (l *cappedListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.closed:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &cappedConn{Conn: c, slots: l.slots}, nil
}

// Close closes the listener, and ends an Accept waiting for a slot.
func (l *cappedListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// cappedConn is a connection that holds a slot of its listener until
// closed.
type cappedConn struct {
	net.Conn
	slots chan struct{}
	once  sync.Once
}

func (c *cappedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { <-c.slots })
	return err
}
