package rrl

import "net/netip"

// Event reports that an account started or stopped being limited. An RRL
// with an observer (Config.SetObserver) reports each episode once: Started
// on the first response the account limits, and !Started on the first
// response it sends again afterwards, when EndQuietEpisodes finds it has
// been out of debt for a while, or when the account is recycled while still
// limited (Evicted). A request account (requests-per-second,
// proven-requests-per-second) never goes into debt, since a refused request
// is not charged: its episode stops on the first request it serves after
// holding full credit for an interval (a request's worth left unspent), so
// that a network asking too fast, served between refusals, is one episode.
// A start, and a stop on a response sent, carry the account's network and
// tuple; a stop that EndQuietEpisodes or an eviction finds does not.
// Account matches the stop to its start.
type Event struct {
	Started bool
	Evicted bool

	// Account identifies the account for as long as it lives: the same
	// value in the events that start and stop an episode. It is the
	// account's bucket in the table and its ident there, so no two
	// accounts held at one time have the same.
	Account uint64

	// Limit names the allowance: one of the per-category keywords
	// ("responses-per-second", ...), "all-per-second", "requests-per-second",
	// "proven-requests-per-second", "ipv4-request-prefixes",
	// "ipv6-request-prefixes" or "all-bytes-per-second".
	Limit string

	// LimitKind is the allowance that Limit names, for callers that
	// would rather compare a typed value than a keyword; its String is
	// Limit.
	LimitKind LimitKind

	// Network is the client network (the source masked to the prefix
	// length); for a request prefix, the source masked to that pair's
	// length, such as 10.1.0.0/18, which says which pair tripped. It is
	// zero for Evicted and in the stops that EndQuietEpisodes reports.
	Network netip.Prefix

	// Tuple is the response that triggered the event, as passed to Debit
	// (an error tuple stands in for a nil or out-of-range one). It is
	// zero for the per-network limits, for Evicted and in the stops that
	// EndQuietEpisodes reports. Where several
	// tuples share an account (NODATA of different types, errors), the
	// stop event carries the tuple that ended the episode.
	Tuple ResponseTuple
}
