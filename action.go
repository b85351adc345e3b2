package rrl

// Action is what Debit recommends doing with the response.
type Action int

const (
	Send       Action = iota // send the response as planned
	Drop                     // send nothing
	Slip                     // send a truncated (TC=1) reply, or BADCOOKIE to a client that sent a cookie
	ActionLast               // number of actions; not an action
)

var actionNames = [...]string{"Send", "Drop", "Slip", "ActionLast"}

// String returns the identifier of a, such as "Slip".
func (a Action) String() string { return enumName(actionNames[:], int(a), "Action") }

// IPReason tells how the request limits (requests-per-second, the request
// prefixes) and the exempt-clients list shaped the Action. It is for
// statistics and logs.
type IPReason int

const (
	IPOk            IPReason = iota // the client network is within requests-per-second
	IPNotConfigured                 // requests-per-second is 0
	IPNotReached                    // Debit decided before the request limit was consulted (reserved)
	IPRateLimit                     // the client network exceeded requests-per-second, or a request prefix its allowance: Drop
	IPCacheFull                     // never returned: a full table recycles an account instead
	IPExempt                        // the client is in exempt-clients: Send
	IPLast                          // number of reasons; not a reason
)

var ipReasonNames = [...]string{"IPOk", "IPNotConfigured", "IPNotReached", "IPRateLimit", "IPCacheFull", "IPExempt", "IPLast"}

// String returns the identifier of r, such as "IPRateLimit".
func (r IPReason) String() string { return enumName(ipReasonNames[:], int(r), "IPReason") }

// RTReason tells how the response tuple's account (and all-per-second) shaped
// the Action. It is for statistics and logs.
type RTReason int

const (
	RTOk            RTReason = iota // the account is in credit: Send
	RTNotConfigured                 // the tuple's allowance is 0: Send
	RTNotReached                    // an earlier check decided (exempt client, request limit)
	RTRateLimit                     // the account is in debt: Drop or Slip
	RTNotUDP                        // not UDP, so not response-limited: Send
	RTCacheFull                     // never returned: a full table recycles an account instead
	RTAllLimit                      // the client network exceeded all-per-second: Drop
	RTAllBytesLimit                 // the client network exceeded all-bytes-per-second: Drop
	RTTooLarge                      // longer than nocookie-udp-size, to an unproven source: Slip (a truncated reply)
	RTLast                          // number of reasons; not a reason
)

var rtReasonNames = [...]string{"RTOk", "RTNotConfigured", "RTNotReached", "RTRateLimit", "RTNotUDP", "RTCacheFull", "RTAllLimit", "RTAllBytesLimit", "RTTooLarge", "RTLast"}

// String returns the identifier of r, such as "RTNotUDP".
func (r RTReason) String() string { return enumName(rtReasonNames[:], int(r), "RTReason") }

// enumName returns names[i], or "Type(i)" for a value out of range.
func enumName(names []string, i int, typ string) string {
	if i >= 0 && i < len(names) {
		return names[i]
	}
	return typ + "(" + itoa(i) + ")"
}

// itoa formats i without importing strconv into every file that needs it.
func itoa(i int) string {
	var b [20]byte
	n := len(b)
	neg := i < 0
	u := uint64(i)
	if neg {
		u = uint64(-i)
	}
	for {
		n--
		b[n] = byte('0' + u%10)
		u /= 10
		if u == 0 {
			break
		}
	}
	if neg {
		n--
		b[n] = '-'
	}
	return string(b[n:])
}
