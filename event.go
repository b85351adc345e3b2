package rrl

import "net/netip"

// Event reports that an account started or stopped being limited. An RRL
// with an observer (Config.SetObserver) reports each episode once: Started
// on the first response the account limits, and !Started on the first
// response it sends again afterwards, or when the account is recycled while
// still limited (Evicted; the account's tuple is unknown then).
type Event struct {
	Started bool
	Evicted bool

	// Limit names the allowance: one of the per-category keywords
	// ("responses-per-second", ...), "all-per-second" or "requests-per-second".
	Limit string

	// Network is the client network (the source masked to the prefix length).
	Network netip.Prefix

	// Tuple is the response that triggered the event, as passed to Debit.
	Tuple ResponseTuple
}
