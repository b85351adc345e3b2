package replay

import (
	"net/netip"

	"github.com/dnsrrl/rrl"
)

// debitRequest charges a query as the servers do when it arrives: to the
// request limit (proven-requests-per-second for a valid cookie or a
// transport other than UDP) and to qps-scale.
func debitRequest(r *rrl.RRL, src netip.Addr, udp, validCookie bool) rrl.Action {
	act, _ := r.DebitRequestAddr(src, udp, validCookie)
	return act
}

// debitResponse charges the response to a query that debitRequest let
// through, and whose client had no valid server cookie.
func debitResponse(r *rrl.RRL, src netip.Addr, udp bool, t *rrl.ResponseTuple) rrl.Action {
	act, _, _ := r.DebitResponseAddr(src, udp, t)
	return act
}
