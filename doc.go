// Package rrl implements DNS Response Rate Limiting (RRL) as ISC devised it
// for BIND 9, for authoritative servers written in Go.
//
// A DNS server answering over UDP can be made to send large responses to a
// spoofed source: a reflection attack. RRL notices that one client network
// keeps receiving the same response and stops sending it, or sends a small
// truncated reply instead ("slips") so that a real client can retry over
// TCP, where sources cannot be spoofed.
//
// # Use
//
// Build one RRL from a Config (NewConfig, then SetValue with BIND's keywords,
// see Config), and call Debit for every response before sending it, with the
// client's address and the response's ResponseTuple. Debit answers Send,
// Drop (send nothing) or Slip (send a reply with TC=1 and only the question,
// or BADCOOKIE to a client that sent a DNS cookie). Responses to clients that
// presented a valid server cookie need no Debit: their source is proven.
// The module github.com/dnsrrl/rrl/miekgrrl does all of this for servers
// built on github.com/miekg/dns.
//
// Debit charges the request with its response, after the work of answering
// it. A server that limits requests (requests-per-second) and wants a
// request over the limit to cost it nothing calls DebitRequest when the
// request arrives, serves it only on Send, and then calls DebitResponse in
// place of Debit. Requests with a valid server cookie are charged by
// DebitRequest too, to the proven allowance (proven-requests-per-second,
// which defaults to requests-per-second): a cookie lifts the response
// limits, which protect spoofed victims, never the request limits, which
// protect the server.
//
// # Accounts
//
// Responses are accounted per client network (the source address masked to
// ipv4-prefix-length or ipv6-prefix-length bits; an IPv4-mapped IPv6 address
// counts as IPv4) and per response tuple, whose shape depends on the kind of
// response (AllowanceCategory):
//
//	answer     class, type and name       responses-per-second
//	referral   class and delegation point referrals-per-second
//	NODATA     class and name             nodata-per-second
//	NXDOMAIN   zone                       nxdomains-per-second
//	error      nothing (network only)     errors-per-second
//
// Which name to pass as SalientName is up to the caller, who knows how the
// response was made: the query name for answers and NODATA; the owner
// name of the wildcard record (such as "*.example.com.") for answers
// synthesised from it, so that one wildcard is one account however many
// names are asked; the delegation point (owner of the
// NS records) for referrals; the zone (owner of the SOA record) for
// NXDOMAIN. Names compare without regard to ASCII case or a trailing dot.
//
// # Algorithm
//
// Each account earns its allowance continuously: at r responses per second,
// one response's worth of credit every 1/r seconds. It holds at most one
// second's worth (at least one response), so a quiet client can send a
// burst of r responses. Every response costs one, sent or not, and an
// account may sink at most window seconds into debt (or one response's
// worth, for rates below one per window): a flood keeps it there (the
// penalty box), and window seconds of silence free it. While the
// account is in debt its responses are limited: the first limited response
// slips, then every slip-ratio-th, and the others are dropped. Errors are
// never slipped. An account that earns back full credit starts counting
// slips afresh. These are BIND's rules; BIND counts whole seconds where
// this package counts time to the millisecond.
//
// Besides the response accounts, requests-per-second limits every request
// from a client network, over any transport (proven-requests-per-second,
// once set, gives the requests of proven sources an account of their own),
// and all-per-second limits all UDP responses to a client network
// together; either one, exceeded, drops the response (all-per-second never
// slips). qps-scale shrinks the allowances while the server as a whole
// sends more than qps-scale responses per second. Only responses over UDP
// are response-limited: over TCP a client's address is proven.
//
// # Time
//
// By default Debit reads a process-wide clock that a goroutine advances
// every millisecond while any RRL is in use, because reading the system
// clock costs more than the rest of a Debit. The goroutine starts with the
// first Debit and exits about a second after the last one; tests that check
// for leaked goroutines wait for it with WaitClockIdle, or give their RRLs
// an injected clock, which starts none. The clock is monotonic: steps
// of the wall clock change nothing. Config.SetNowFunc injects another clock
// for tests; steps back are then ignored and steps forward count for at
// most a day, so no clock can lock a client out or overflow the arithmetic.
// An injected clock is read under a lock that all Debits share.
//
// # Memory
//
// The table holds at most max-table-size accounts of 28 bytes each and an
// index of 8-byte slots, at most three quarters full: about 43 bytes per
// account in a full table, the allocator's rounding included. Both grow as
// the table fills, doubling, so that a table holding few accounts stays
// small and in the processor's caches. When it is full, a new account takes
// the place of an account that has paid off its debt, else of the least
// recently used account in credit, else of the least recently used one; so
// a flood from spoofed sources cannot push out the account of the network
// it attacks, and a new client is never refused. The table is split into
// shards (up to 64, or more for tables over a million accounts, so that a
// shard holds at most 16,384), each with its own lock, its own share of
// max-table-size and its own least-recently-used order, so recycling begins
// when a shard is full, a little before the table as a whole is. Accounts
// are found by a 64-bit hash keyed by random secrets drawn for each RRL, so
// sources and names cannot be chosen to collide. No step scans the table;
// the only copying is a shard's growth, of at most one shard's accounts or
// index.
//
// # Concurrency
//
// An RRL is safe for concurrent use. A Debit locks only the shards holding
// its accounts, one at a time, and counts its outcome in one shard's
// statistics; GetStats adds them up.
package rrl
