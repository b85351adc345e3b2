// Package miekgrrl puts Response Rate Limiting (package
// github.com/dnsrrl/rrl) in front of an authoritative server built on
// github.com/miekg/dns, the way BIND 9 does it, with DNS COOKIE support so
// that clients that prove their address are never limited.
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
// are configured (the client retries with the cookie and is then exempt), or
// else an empty TC=1 reply that sends the client to TCP. A slip reply to a
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
// from crypto/rand instead.
//
// # Middleware
//
// Middleware wraps any dns.Handler:
//
//	cfg := rrl.NewConfig()
//	cfg.SetValue("responses-per-second", "10")
//	limiter := rrl.NewRRL(cfg)
//	var secret [16]byte
//	rand.Read(secret[:]) // crypto/rand, or the secret shared by an anycast set
//	cookies := miekgrrl.NewCookies(secret)
//	dns.Handle(".", miekgrrl.Middleware(limiter, zoneHandler, miekgrrl.Options{Cookies: cookies}))
//
// It lets a request with a valid server cookie through unlimited (adding a
// server cookie to the response), and otherwise captures the response the
// handler writes, debits it, and sends it (with a server cookie if the
// request had a client cookie), drops it or slips it. A handler that writes
// nothing gets nothing written for it. TCP responses are debited (the
// request limit applies) but never limited. Options.ReportOnly sends
// everything and only reports; Options.OnDecision sees every decision. A
// handler serving wildcards can say so with SetWildcardOrigin(w, origin)
// before writing. A nil limiter limits nothing: only cookies are served.
//
// The middleware never changes the handler's message: a server cookie goes
// into a copy, with its own additional section and OPT record (placed before
// a TSIG record), truncated over UDP to the size the client advertised. A
// message the handler packed itself (Write) gets a cookie only if it is not
// signed with TSIG, whose MAC the cookie would break. With cookies on, a
// request with a malformed COOKIE option gets FORMERR (RFC 7873 section
// 5.2.2); a request without a question (accepted by AcceptCookieOnly) gets
// NOERROR and a server cookie if it is a query with a client cookie, else
// FORMERR. Neither reaches the handler. A ResponseWriter the handler keeps
// past its return (without Hijack) is dead: writes fail with ErrWriterDone.
//
// Per query the middleware adds a few hundred nanoseconds (about half of
// it the core's Debit) and one 16-byte allocation (the writer the handler
// gets) to the handler's cost; a response with a server cookie costs one
// more allocation, for its copy (see README.md).
//
// To take cookie-only queries (no question) at all, serve with
// dns.Server{MsgAcceptFunc: miekgrrl.AcceptCookieOnly}.
package miekgrrl
