package rrl

// LimitKind names an allowance, and so the kind of account it limits: one
// per AllowanceCategory, with the same values, then the three limits kept
// per client network. Its String is the allowance's keyword.
type LimitKind uint8

const (
	LimitResponses      LimitKind = iota // responses-per-second (AllowanceAnswer)
	LimitReferrals                       // referrals-per-second (AllowanceReferral)
	LimitNoData                          // nodata-per-second (AllowanceNoData)
	LimitNXDomains                       // nxdomains-per-second (AllowanceNXDomain)
	LimitErrors                          // errors-per-second (AllowanceError)
	LimitRequests                        // requests-per-second, per client network
	LimitAll                             // all-per-second, per client network
	LimitProvenRequests                  // proven-requests-per-second, per client network
	LimitKindLast                        // number of kinds; not a kind
)

var limitKeywords = [...]string{
	LimitResponses:      "responses-per-second",
	LimitReferrals:      "referrals-per-second",
	LimitNoData:         "nodata-per-second",
	LimitNXDomains:      "nxdomains-per-second",
	LimitErrors:         "errors-per-second",
	LimitRequests:       "requests-per-second",
	LimitAll:            "all-per-second",
	LimitProvenRequests: "proven-requests-per-second",
	LimitKindLast:       "LimitKindLast",
}

// String returns the keyword of the allowance, such as
// "responses-per-second".
func (k LimitKind) String() string { return enumName(limitKeywords[:], int(k), "LimitKind") }

// request reports whether k limits requests rather than responses: such
// an account is charged when a request arrives, is never scaled by
// qps-scale, and sinks into no debt (a refused request is not charged).
func (k LimitKind) request() bool { return k == LimitRequests || k == LimitProvenRequests }
