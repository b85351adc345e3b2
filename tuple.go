package rrl

// AllowanceCategory is the kind of a response, which decides both the
// allowance it is charged against and the shape of its account key.
//
//	category           rcode     answers  authority NS  keyword               account key
//	AllowanceAnswer    NOERROR   > 0                    responses-per-second  network, class, type, name
//	AllowanceReferral  NOERROR   0        > 0           referrals-per-second  network, class, name
//	AllowanceNoData    NOERROR   0        0             nodata-per-second     network, class, name
//	AllowanceNXDomain  NXDOMAIN                         nxdomains-per-second  network, name
//	AllowanceError     any other                        errors-per-second     network
type AllowanceCategory uint8

const (
	AllowanceAnswer AllowanceCategory = iota
	AllowanceReferral
	AllowanceNoData
	AllowanceNXDomain
	AllowanceError
	AllowanceLast // number of categories; not a category
)

var categoryNames = [...]string{"AllowanceAnswer", "AllowanceReferral", "AllowanceNoData", "AllowanceNXDomain", "AllowanceError", "AllowanceLast"}

// String returns the identifier of c, such as "AllowanceNoData".
func (c AllowanceCategory) String() string {
	return enumName(categoryNames[:], int(c), "AllowanceCategory")
}

// NewAllowanceCategory classifies a response from its rcode and the number of
// records in its answer section and of NS records in its authority section.
// Callers that count every authority record must not count the SOA of a
// NODATA response, or NODATA is taken for a referral.
func NewAllowanceCategory(rCode, answerCount, nsCount int) AllowanceCategory {
	switch {
	case rCode == 0 && answerCount > 0:
		return AllowanceAnswer
	case rCode == 0 && nsCount > 0:
		return AllowanceReferral
	case rCode == 0:
		return AllowanceNoData
	case rCode == 3:
		return AllowanceNXDomain
	}
	return AllowanceError
}

// ResponseTuple identifies a response for accounting. Which fields count
// depends on the category (see AllowanceCategory); the others are ignored.
//
// SalientName is:
//   - for an answer or NODATA: the query name, or the owner name of the
//     wildcard record (such as "*.example.com.") when the answer was
//     synthesised from it, so that one wildcard is one account however many
//     names it answers for;
//   - for a referral: the delegation point (owner of the NS records);
//   - for NXDOMAIN: the zone (owner of the SOA record in the authority section),
//     since every undefined name of a zone yields the same response;
//   - for an error: ignored.
//
// Names compare case-insensitively (ASCII) and with or without the trailing
// dot. Escaped presentation forms such as "\065" are not decoded.
//
// Size is the response's length in bytes as it would go on the wire, 0
// when unknown. all-bytes-per-second charges it (UnknownResponseSize when
// 0) and nocookie-udp-size compares it; the account keys ignore it.
type ResponseTuple struct {
	Class uint16
	Type  uint16
	AllowanceCategory
	SalientName string
	Size        int
}

// tupleKey returns the parts of a tuple that its account key holds: BIND
// compares class, type and name for answers; class and name for referrals
// and NODATA; the name (the zone) for NXDOMAIN; and nothing but the
// network for errors.
func tupleKey(t *ResponseTuple) (class, qtype uint16, name string) {
	switch t.AllowanceCategory {
	case AllowanceAnswer:
		return t.Class, t.Type, t.SalientName
	case AllowanceReferral, AllowanceNoData:
		return t.Class, 0, t.SalientName
	case AllowanceNXDomain:
		return 0, 0, t.SalientName
	}
	return 0, 0, ""
}
