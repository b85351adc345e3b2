package miekgrrl

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
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
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "only GET and HEAD", http.StatusMethodNotAllowed)
		return 0, 0, false
	}
	n, order, err := ParseLimitedQuery(req.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return 0, 0, false
	}
	return n, order, true
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
	DebtSeconds float64   `json:"debt_seconds"` // how long until it is out of debt if nothing more is charged
	Refused     int64     `json:"refused"`      // responses dropped or slipped, or requests refused, since
}

// NewLimitedJSON returns the JSON form of accounts; never nil, so that
// none is written as an empty list.
func NewLimitedJSON(accounts []rrl.LimitedAccount) []LimitedJSON {
	out := make([]LimitedJSON, len(accounts))
	for i, a := range accounts {
		j := LimitedJSON{
			Network: a.Network.String(), Limit: a.LimitKind.String(), Name: a.Tuple.SalientName,
			Since: a.Since, DebtSeconds: a.Debt.Seconds(), Refused: a.Refused,
		}
		if a.Tuple.Type != 0 {
			j.Type = dns.Type(a.Tuple.Type).String()
		}
		if a.Tuple.Class != 0 {
			j.Class = dns.Class(a.Tuple.Class).String()
		}
		out[i] = j
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
