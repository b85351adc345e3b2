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
// or BADCOOKIE to a client that sent a DNS cookie). The module
// github.com/dnsrrl/rrl/miekgrrl does all of this for servers built on
// github.com/miekg/dns.
//
// Debit charges the request with its response, after the work of answering
// it. A server that limits requests (requests-per-second) and wants a
// request over the limit to cost it nothing calls DebitRequest when the
// request arrives, serves it only on Send, and then calls DebitResponse in
// place of Debit. A response to a client that presented a valid server
// cookie needs no DebitResponse, since its source is proven; its request
// is charged by DebitRequest all the same, to the proven allowance
// (proven-requests-per-second, which defaults to requests-per-second): a
// cookie lifts the response limits, which protect spoofed victims, never
// the request limits, which protect the server.
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
// once set, gives the requests of proven sources an account of their own;
// set requests-per-second with it, or unproven requests are not limited and
// a client escapes the proven limit by dropping its cookie),
// and all-per-second limits all UDP responses to a client network
// together; either one, exceeded, drops the response (all-per-second never
// slips). A request account sinks into no debt: a refused request is not
// charged, so a network asking faster than its allowance is still served
// its allowance every second. The request limits are about the server's
// load, and a client asking too fast should get its share, where a
// response account's debt is the penalty box that keeps a reflection's
// victim quiet for as long as the flood lasts. qps-scale shrinks the
// allowances while the server as a whole receives more than qps-scale
// requests per second. Only responses over UDP are response-limited: over
// TCP a client's address is proven.
//
// Three keywords go beyond BIND (see prefixes.go). ipv4-request-prefixes
// and ipv6-request-prefixes give each unproven request an account per
// configured prefix length beside its network's, and refuse it when any
// is out of credit, refunding the others: a flood spread over many
// networks is held by a wider prefix, one heavy host by its own address.
// all-bytes-per-second is all-per-second counted in bytes
// (ResponseTuple.Size). nocookie-udp-size, BIND's option, makes Debit
// answer Slip with RTTooLarge for a UDP response longer than it, so that a
// truncated reply goes to a source not proven by a server cookie.
//
// # Time
//
// By default Debit reads a process-wide clock that a goroutine advances
// every millisecond while any RRL is in use, because reading the system
// clock costs more than the rest of a Debit. The goroutine starts with the
// first Debit and exits about a second after the last one; tests that check
// for leaked goroutines wait for it with WaitClockIdle, or give their RRLs
// an injected clock, which starts none. The clock is monotonic: steps
// of the wall clock change nothing. Another clock can be injected: a
// function (Config.SetNowFunc), read under a lock that all Debits share,
// or a ManualClock (Config.SetClock) that its owner sets, as a replay of
// captured traffic does, read with one atomic load. Steps back are then
// ignored and steps forward count for at most a day, so no clock can lock
// a client out or overflow the arithmetic.
//
// An account keeps the time at which its balance is zero in 56 bits,
// modulo 2^56 nanoseconds (834 days), and reads it relative to now: a live
// account's lies within an hour of now, so it reads right across the
// wrap; one from more than 417 days ago reads as long past. Only an
// account idle for a multiple of 834 days give or take an hour could read
// as recent, and EndQuietEpisodes moves the time of accounts idle for over
// 208 days forward (still long past), so a server whose calls sweep the
// whole table at least every 200 days never meets that case: one call a
// day does for any table up to 32 million accounts (each call sweeps
// 163,840), one call every 200 days for a table up to 163,840.
//
// # Memory
//
// The table of accounts is an array of buckets, each one 64-byte cache
// line holding five accounts in 12 bytes each: a 4-byte ident (27 bits of
// the account's key as a tag, and its 4-bit kind) and an 8-byte balance
// (the time at which it is zero, the slip counter and the episode flag).
// The keyed hash of an account picks two buckets, as in Knot DNS's table:
// its first, where it goes while that has room and where it is sought
// first, and its second, where it goes otherwise; its tag tells it apart
// from the others there. A full table takes 12.8 bytes per account, 13.1
// per account held as measured (TestTableHoldsMaxTableSize, all
// included), against BIND's 40 to 80. The array is allocated in pages of
// 64 buckets as accounts arrive, so an empty table costs 8 bytes for every
// 320 accounts of max-table-size and a table holding few accounts costs at
// most 4 KB for each.
//
// A new account is never refused. It takes an empty place in its first
// bucket, else in its second. While the table has places never filled, a
// new account whose two buckets are full makes room by moving an account
// of theirs to its other bucket (up to three moves in a chain, as a cuckoo
// hash table does): so max-table-size distinct accounts are 99% held, where
// one bucket each held 82%. Once the table is full, a new account takes an
// empty place of its two buckets while the table has one, else the place
// of the one of lowest rank of its first bucket: any account in credit goes
// before one in debt, the one with the most credit first, and of accounts
// in debt the one least in debt goes first. Recycling in the first bucket
// alone lets the accounts that went to their second buckets while the
// table filled leave them as it turns over; each bucket counts those of
// its accounts that are in their second, and a search reads the second
// bucket only while that count is not 0, so that an account held in its
// first bucket, or a new one, costs one cache line. So the account of
// a network under a flood, deep in debt, keeps its place through a spray
// of spoofed sources, even sources whose own accounts run into debt; among
// accounts in credit the one least recently debited goes, as in BIND. A
// request account never goes into debt (a refused request is not charged):
// it ranks as a second further in debt than its balance says, the second's
// credit that a new account in its place would give its network, so the
// account of a network asking faster than its allowance ranks behind
// every account in credit, and a spray of sources that ask once cannot
// recycle it and hand it a fresh allowance; a spray so heavy that it
// recycles every account of the table between two requests of the network
// still can (tables of 1,000 accounts under 30,000 new sources a second
// hold it). Where BIND chooses among all its accounts by their order of
// use, this table chooses among the five of a bucket by their balances.
// No step scans the table and nothing is ever copied. A table of at most
// 320 accounts (one page) is one set of places instead: the account of
// lowest rank in the whole table is recycled, so a small table decides the
// same in every RRL, whatever the secrets of its hash.
//
// Accounts are told apart by their two buckets and a 27-bit tag taken from
// bits of the key that do not choose the first bucket, beside their kind.
// An account sought and not held is taken for one of the ten of its two
// buckets of the same kind with a chance of at most 10 in 2^27 (1 in 13
// million); filling a table of the default size with 100,000 distinct
// accounts merges two of them with a chance of about 1 in 270, and a
// table of 1,000 accounts about 1 in 27,000. A table of at most 320
// accounts is one set, so a new account there is compared with all of
// them: filling a table of 320 merges two with a chance of about 1 in
// 2,600, one of 50 about 1 in 110,000. Two merged accounts share one
// balance until one of them is recycled. Sources and names cannot be
// chosen to collide, since the hash is keyed by secrets drawn for each
// RRL.
//
// # Concurrency
//
// An RRL is safe for concurrent use, and a Debit takes no lock (but with an
// injected clock, which tests use). It reads the account's bucket, works
// out the new balance and writes it with one compare-and-swap, again if
// another Debit changed it in between; a new account moves into its place
// with a compare-and-swap of the ident and is written already debited.
// Every account that takes a place, and every account claimed for a move
// to its other bucket, puts the place's balance in a new generation, so
// that a Debit that read it before fails and looks again; a Debit whose
// swap lands anyway (the place's three generation bits came round, eight
// accounts through one place while it stood between its read and its
// write) checks the ident after the swap, finds another account there,
// and takes its swap back. A search reads an account's two buckets one
// after the other, and counts the moves into them before and after, so
// that an account moving between them is never missed (the rules and
// their tests are in table.go). The only wait is that of a Debit
// that seeks an account another is adding at that instant: it yields
// until the account is there, at most a hundred times, and then adds it
// itself (the second copy is recycled in time, with the debits made to
// it). Two Debits that add the same new account at the same instant, each
// before it sees the other's, may likewise add it twice, losing a debit or
// two. Statistics are counted in stripes, one per goroutine stack among
// many, so that processors counting at once rarely write the same memory;
// GetStats adds them up. EndQuietEpisodes sweeps at most 32,768 buckets per
// call (the whole of a table of the default size), resuming where the last
// call stopped.
//
// # Layers
//
// The package's files are layers, each calling only those below it (the
// order is checked by TestLayers, with go/types):
//
//	vocabulary  action.go tuple.go limitkind.go event.go clock.go key.go
//	            the types of the API, the clock, the client network and
//	            the keyed hash of an account
//	settings    values.go suggest.go config.go stats.go
//	            parsing and checking the keywords; the Config; the Stats
//	store       table.go
//	            a concurrent map from an entry's ident to a 64-bit word:
//	            buckets, two choices, moves and their rules, recycling by
//	            a rank the caller gives; it knows nothing of balances
//	arithmetic  balance.go
//	            the rate arithmetic as pure functions on a balance: charge,
//	            debt, slip or drop, the request charge and its refund, the
//	            sweep's quieting, the rank
//	accounts    stripes.go accounts.go
//	            the two joined: debit an account, look one up, refund,
//	            sweep; the counting of outcomes
//	allowances  allowances.go qps.go record.go watch.go
//	            the settings in the accounts' units and their scaling by
//	            qps-scale; the record of accounts being limited; the
//	            watch of the busiest accounts, armed by Top
//	features    rrl.go charge.go prefixes.go sent.go streamtime.go
//	            limited.go top.go debit.go
//	            the RRL, the charges of its accounts with their events,
//	            the protections beyond BIND, Limited and Top, the entry
//	            points
//
// No file above the accounts reads the bits of a balance or a bucket's
// places.

package rrl
