package miekgrrl

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/dnsrrl/rrl"
)

// The query of a request for the busiest accounts: how many.
const (
	DefaultTopN = 20
	MaxTopN     = rrl.MaxTop
)

// TopHandler returns an http.Handler that serves the accounts of l nearest
// their allowance over the last whole second (rrl.RRL.Top), limited or
// not, as JSON: {"top": [TopJSON, ...]}. The query may set n (1 to
// MaxTopN, default DefaultTopN); a bad value is answered with status 400.
// Only GET and HEAD are served.
//
// l counts only while someone asks: the first request arms its watch and
// waits for a whole second to be counted (one to two seconds) before it
// answers; later ones answer at once, until no one has asked for a
// minute. Unasked, a Debit pays nothing for it.
func TopHandler(l *rrl.RRL) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		n, ok := topQuery(w, req)
		if !ok {
			return
		}
		tops, err := WaitTop(req.Context(), n, l)
		if err != nil {
			return // the client went away
		}
		writeJSON(w, struct {
			Top []TopJSON `json:"top"`
		}{NewTopJSON(tops[0])})
	})
}

// topQuery reads n from req's query. If the method is not GET or HEAD, or
// n is bad, it writes the error to w and returns false.
func topQuery(w http.ResponseWriter, req *http.Request) (int, bool) {
	if !ReadOnlyRequest(w, req) {
		return 0, false
	}
	n, err := ParseTopQuery(req.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return 0, false
	}
	return n, true
}

// ParseTopQuery reads n from a query (see TopHandler).
func ParseTopQuery(q url.Values) (int, error) {
	v := q.Get("n")
	if v == "" {
		return DefaultTopN, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > MaxTopN {
		return 0, fmt.Errorf("n %q: want a whole number from 1 to %d", v, MaxTopN)
	}
	return n, nil
}

// WaitTop returns the busiest n accounts of each limiter (rrl.RRL.Top),
// first waiting, if need be, until every one has counted a whole second
// since its watch was armed: the first call arms them all, then waits
// once, for the longest. It returns ctx's error if ctx ends first.
func WaitTop(ctx context.Context, n int, limiters ...*rrl.RRL) ([][]rrl.TopAccount, error) {
	out := make([][]rrl.TopAccount, len(limiters))
	for range 3 { // a wait is at most two seconds; a clock that moves slower may need another
		var longest time.Duration
		for i, l := range limiters {
			var wait time.Duration
			out[i], wait = l.Top(n)
			longest = max(longest, wait)
		}
		if longest == 0 {
			break
		}
		t := time.NewTimer(longest)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
	return out, nil
}

// TopJSON is a busy account as TopHandler writes it: named as LimitedJSON
// names an account, with its share of its allowance over the last whole
// second.
type TopJSON struct {
	Network     string  `json:"network"`        // "192.0.2.0/24"
	Limit       string  `json:"limit"`          // the allowance's keyword: "responses-per-second", "requests-per-second"...
	Name        string  `json:"name,omitempty"` // "www.example.org."
	Type        string  `json:"type,omitempty"` // "A"
	Class       string  `json:"class,omitempty"`
	Share       float64 `json:"share"`        // charged over the last whole second, as a share of the allowance: 1 is at it
	Rate        float64 `json:"rate"`         // the same per second, in the allowance's unit (responses, requests, bytes)
	Limited     bool    `json:"limited"`      // in debt now
	DebtSeconds float64 `json:"debt_seconds"` // how long until it admits again; 0 when not limited
}

// NewTopJSON returns the JSON form of accounts; never nil, so that none is
// written as an empty list.
func NewTopJSON(accounts []rrl.TopAccount) []TopJSON {
	out := make([]TopJSON, len(accounts))
	for i, a := range accounts {
		typ, class := typeAndClass(a.Tuple)
		out[i] = TopJSON{
			Network: a.Network.String(), Limit: a.LimitKind.String(), Name: a.Tuple.SalientName, Type: typ, Class: class,
			Share: a.Share, Rate: a.Rate, Limited: a.Debt > 0, DebtSeconds: a.Debt.Seconds(),
		}
	}
	return out
}
