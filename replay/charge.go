package replay

import (
	"net/netip"

	"github.com/dnsrrl/rrl"
)

// debitRequest charges a query as the servers do when it arrives.
func debitRequest(r *rrl.RRL, src netip.Addr, udp, validCookie bool) rrl.Action {
	return rrl.Send
}

// debitResponse charges a response to a query that debitRequest let through.
func debitResponse(r *rrl.RRL, src netip.Addr, udp bool, t *rrl.ResponseTuple) rrl.Action {
	act, _, _ := r.DebitAddr(src, udp, t)
	return act
}
