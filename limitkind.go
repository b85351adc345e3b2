package rrl

// LimitKind names an allowance, and so the kind of account it limits: one
// per AllowanceCategory, with the same values, then the limits kept per
// client network. Its String is the allowance's keyword. Kinds fit in four
// bits, which is what the table keeps of an account's kind.
type LimitKind uint8

const (
	LimitResponses           LimitKind = iota // responses-per-second (AllowanceAnswer)
	LimitReferrals                            // referrals-per-second (AllowanceReferral)
	LimitNoData                               // nodata-per-second (AllowanceNoData)
	LimitNXDomains                            // nxdomains-per-second (AllowanceNXDomain)
	LimitErrors                               // errors-per-second (AllowanceError)
	LimitRequests                             // requests-per-second, per client network
	LimitAll                                  // all-per-second, per client network
	LimitProvenRequests                       // proven-requests-per-second, per client network
	LimitIPv4RequestPrefixes                  // ipv4-request-prefixes, one account per prefix length and prefix
	LimitIPv6RequestPrefixes                  // ipv6-request-prefixes, one account per prefix length and prefix
	LimitAllBytes                             // all-bytes-per-second, per client network
	LimitStreamTime                           // stream-time-per-second, per client network
	LimitKindLast                             // number of kinds; not a kind
)

var limitKeywords = [...]string{
	LimitResponses:           "responses-per-second",
	LimitReferrals:           "referrals-per-second",
	LimitNoData:              "nodata-per-second",
	LimitNXDomains:           "nxdomains-per-second",
	LimitErrors:              "errors-per-second",
	LimitRequests:            "requests-per-second",
	LimitAll:                 "all-per-second",
	LimitProvenRequests:      "proven-requests-per-second",
	LimitIPv4RequestPrefixes: "ipv4-request-prefixes",
	LimitIPv6RequestPrefixes: "ipv6-request-prefixes",
	LimitAllBytes:            "all-bytes-per-second",
	LimitStreamTime:          "stream-time-per-second",
	LimitKindLast:            "LimitKindLast",
}

// String returns the keyword of the allowance, such as
// "responses-per-second".
func (k LimitKind) String() string { return enumName(limitKeywords[:], int(k), "LimitKind") }

// Request reports whether k limits requests rather than responses:
// requests-per-second, proven-requests-per-second and the request
// prefixes. Such an account is charged when a request arrives and sinks
// into no debt (a refused request is not charged).
func (k LimitKind) Request() bool { return requestKinds>>k&1 != 0 }

// requestKinds has bit k set for each kind k that limits requests.
const requestKinds = 1<<LimitRequests | 1<<LimitProvenRequests | 1<<LimitIPv4RequestPrefixes | 1<<LimitIPv6RequestPrefixes

// plainRate reports whether k's keyword takes one rate in the grammar and
// range of responses-per-second (the request prefixes take a list,
// all-bytes-per-second counts bytes and stream-time-per-second time).
func (k LimitKind) plainRate() bool {
	return k < LimitIPv4RequestPrefixes
}

// The table keeps four bits of an account's kind.
var _ [16 - LimitKindLast]struct{}

// RequestRefusal names the request limit that refused a request: Limit is
// LimitRequests, LimitProvenRequests, LimitIPv4RequestPrefixes,
// LimitIPv6RequestPrefixes or LimitStreamTime (a stream request of a
// network over its time budget), and Prefix, for a request prefix, the pair's
// place (from 0) in the Config's list of the family (RequestPrefixes),
// else 0. It is the zero value for a request that was not refused.
type RequestRefusal struct {
	Limit  LimitKind
	Prefix int
}
