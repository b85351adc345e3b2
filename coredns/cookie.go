package rrl

import (
	"sync"

	"github.com/dnsrrl/rrl/miekgrrl"
)

// keepCookie returns a copy of ck for the recorder of its request, or nil
// when the request has no COOKIE option: most requests, floods above all,
// have none, and their recorder stays small. The copies are allocated
// cookieBatch at a time and, like recorders (see newRecorder), never handed
// out twice, since the chain may keep a recorder past ServeDNS.
func keepCookie(ck *miekgrrl.RequestCookie) *miekgrrl.RequestCookie {
	if ck.State() == miekgrrl.CookieNone {
		return nil
	}
	b := cookieBatches.Get().(*cookieBatchCursor)
	if len(b.free) == 0 {
		b.free = make([]miekgrrl.RequestCookie, cookieBatch)
	}
	kept := &b.free[0]
	b.free = b.free[1:]
	cookieBatches.Put(b)
	*kept = *ck
	return kept
}

// cookieBatch is how many request cookies are allocated at once.
const cookieBatch = 32

// cookieBatchCursor holds the unused part of a batch; only the cursor is
// pooled.
type cookieBatchCursor struct{ free []miekgrrl.RequestCookie }

var cookieBatches = sync.Pool{New: func() any { return new(cookieBatchCursor) }}
