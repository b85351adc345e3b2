package rrl

import "github.com/dnsrrl/rrl/miekgrrl"

// keepCookie returns a copy of ck for the recorder of its request, or nil
// when the request has no COOKIE option: most requests, floods above all,
// have none, and their recorder stays small. The copies come from a batch
// (see batch), as recorders do.
func keepCookie(ck *miekgrrl.RequestCookie) *miekgrrl.RequestCookie {
	if ck.State() == miekgrrl.CookieNone {
		return nil
	}
	kept := cookies.next()
	*kept = *ck
	return kept
}

// cookies holds the request cookies kept for recorders.
var cookies batch[miekgrrl.RequestCookie]
