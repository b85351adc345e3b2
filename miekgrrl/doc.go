// Package miekgrrl puts Response Rate Limiting (package
// github.com/dnsrrl/rrl) in front of an authoritative server built on
// github.com/miekg/dns, the way BIND 9 does it, with request limits that
// refuse a request before any work is done for it, and DNS COOKIE support,
// so that clients that prove their address are exempt from the response
// limits.
//
// # Classification
//
// Tuple turns a response into the rrl.ResponseTuple the limiter accounts it
// under. Class and type come from the question.
//
//	response                                    category            name
//	NOERROR, answers                            AllowanceAnswer     query name; DNAME owner if from a DNAME; *.<origin> if from a wildcard
//	NOERROR, no answers, NS and no SOA in auth  AllowanceReferral   owner of the NS records (the delegation point)
//	NOERROR, no answers otherwise               AllowanceNoData     query name, or *.<origin> if from a wildcard
//	NXDOMAIN                                    AllowanceNXDomain   owner of the SOA in auth (the zone); else of an NS; else "."
//	any other rcode                             AllowanceError      none
//	no question at all (cookie-only exchange)   by the rules above  "." in place of the query name
//
// An answer synthesised from a DNAME (the answer section holds a DNAME owned
// by an ancestor of the query name) is accounted under the DNAME's owner,
// the name the server found, as BIND does. A wildcard answer is recognised
// from the RRSIG over it (Labels below the
// owner's label count), a wildcard NODATA from an NSEC owned by the wildcard,
// and otherwise from the wildcard origin the caller passes. Naming such
// responses after the wildcard makes one wildcard one account, however many
// names an attacker makes up below it. Tuple allocates nothing for
// non-wildcard responses, and wildcard names are built once per origin.
//
// # Slipping
//
// When the limiter says Slip, SlipReply builds what is sent instead: BADCOOKIE
// with a fresh server cookie if the request had a client cookie and cookies
// are configured (the client retries with the cookie and is then exempt
// from the response limits), or
// else an empty TC=1 reply that sends the client to TCP. A response longer
// than nocookie-udp-size (rrl.RTTooLarge) goes as TooLargeReply: TC=1 with
// a fresh server cookie for a client that sent a cookie, never BADCOOKIE,
// so that its retry with the cookie gets the whole answer. A slip reply to a
// request signed with TSIG ends with a TSIG record for the same key, which
// a dns.Server holding the key (TsigSecret) signs as it writes the reply.
//
// # Cookies
//
// Cookies implements interoperable server cookies (RFC 7873, RFC 9018):
// version 1, a timestamp, and SipHash-2-4 over the client cookie, the header
// of the server cookie and the client address, keyed by a 16-byte secret
// shared by every server of an anycast set. A cookie is accepted for one hour
// after its timestamp and five minutes before it; a previous secret keeps
// validating after a rollover (SetPrevious, Rotate) until ForgetPrevious.
// A cookie made with the current secret less than half an hour ago is sent
// back as it came (RFC 9018 section 4.3), older ones are renewed. An
// all-zero secret is never used, since anyone could make cookies with it:
// NewCookies and Rotate given one, and the zero value, draw a random secret
// from crypto/rand instead. A server that does not use Middleware decodes a
// request's COOKIE option once with Cookies.Request, as Middleware and the
// CoreDNS plugin do: the RequestCookie it returns gives the option's state
// (State, Malformed), the response with a server cookie (Reply: the
// request's own while it is young, else a fresh one) and the slip replies
// (SlipReply, TooLargeReply). A malformed COOKIE option is answered with
// MalformedCookieReply. Check, MalformedCookie, AddServerCookie (always a
// fresh cookie) and SlipReply do one of these each, decoding the option
// again; like Tuple they take the request first and the response second.
// ParseSecret and ParseSecrets read secrets as a configuration writes them.
//
// # Middleware
//
// Middleware wraps any dns.Handler:
//
//	cfg := rrl.NewConfig()
//	cfg.SetValue("responses-per-second", "10")
//	cfg.SetValue("requests-per-second", "20")         // every request of a network
//	cfg.SetValue("proven-requests-per-second", "100") // over TCP or with a valid cookie
//	limiter := rrl.NewRRL(cfg)
//	var secret [16]byte
//	rand.Read(secret[:]) // crypto/rand, or the secret shared by an anycast set
//	cookies := miekgrrl.NewCookies(secret)
//	dns.Handle(".", miekgrrl.Middleware(limiter, zoneHandler, miekgrrl.Options{Cookies: cookies}))
//
// It charges each request as it arrives (rrl.RRL.DebitRequest), before the
// handler runs. A request over its request limit never reaches the handler:
// over UDP nothing is sent, and a connection (TCP, TLS) is closed. The request
// limits are requests-per-second, for every request of a client network,
// and proven-requests-per-second, for the requests of proven sources (over
// TCP, or over UDP with a valid server cookie): once set, it gives them an
// account and an allowance of their own, so that honest resolvers that use
// cookies may ask more than unproven sources, and spoofed requests cannot
// spend their allowance; until then they share requests-per-second's.
//
// A request let through is served by the handler, whose response the
// middleware captures, debits (rrl.RRL.DebitResponse), and sends (with a
// server cookie if the request had a client cookie), drops or slips. The
// response to a request with a valid server cookie is not debited: its
// source is proven, so it cannot be the victim of a reflection, and only
// the request limit holds it. A handler that writes nothing gets nothing
// written for it. TCP responses are debited but never response-limited.
// Options.ReportOnly serves and sends everything and only reports;
// Options.OnDecision sees every decision, including the requests refused
// before the handler (Decision.RequestDropped). A handler serving wildcards
// can say so with SetWildcardOrigin(w, origin) before writing. A nil
// limiter limits nothing: only cookies are served.
//
// The middleware never changes the handler's message: a server cookie goes
// into a copy, with its own additional section and OPT record (placed before
// a TSIG record), truncated over UDP to the size the client advertised. A
// message the handler packed itself (Write) gets a cookie only if it is not
// signed with TSIG, whose MAC the cookie would break. With cookies on, a
// request with a malformed COOKIE option gets FORMERR (RFC 7873 section
// 5.2.2); a request without a question (accepted by AcceptCookieOnly) gets
// NOERROR and a server cookie if it is a query with a client cookie, else
// FORMERR. Neither reaches the handler; both are held to the request limit
// first. A ResponseWriter the handler keeps past its return (without
// Hijack) is dead: writes fail with ErrWriterDone.
//
// Per query the middleware adds a few hundred nanoseconds (about half of
// it the core's DebitRequest and DebitResponse) and one 16-byte allocation
// (the writer the handler gets) to the handler's cost; a response with a
// server cookie costs one more allocation, for its copy, and with
// nocookie-udp-size or all-bytes-per-second set, measuring a response to be
// compressed costs package dns's compression map. A request refused
// by its request limit costs no allocation and less than the handler
// would (see README.md).
//
// # Refusing as the server reads
//
// DecorateReader makes a dns.DecorateReader that charges each request to
// its request limit as the server reads it, and refuses one over its limit
// before package dns unpacks it, starts a goroutine for it or asks
// MsgAcceptFunc about it; a valid server cookie is read from the packet's
// OPT record without unpacking the message. Give the middleware the same
// Options with ChargedAtRead set, so that it charges no request again:
//
//	opts := miekgrrl.Options{Cookies: cookies}
//	decorate := miekgrrl.DecorateReader(limiter, opts)
//	opts.ChargedAtRead = true
//	h := miekgrrl.Middleware(limiter, zoneHandler, opts)
//	srv := &dns.Server{PacketConn: pc, Handler: h, DecorateReader: decorate}
//
// A refused UDP request then costs a read and a debit, about what reading
// and discarding the packet costs (see README.md).
//
// To take cookie-only queries (no question) at all, serve with
// dns.Server{MsgAcceptFunc: miekgrrl.AcceptCookieOnly}.
package miekgrrl
