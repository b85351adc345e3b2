#!/usr/bin/env bash
# End-to-end check of the protections beyond BIND in the CoreDNS binary,
# with dig: nocookie-udp-size turns a 1,000-byte answer into a TC reply of
# at most 512 bytes for a client without a valid server cookie (with a
# server cookie in it, and NOERROR, when the client sent a cookie), while
# the retry with that cookie and TCP get the whole answer; and
# ipv4-request-prefixes holds one heavy address to its /32 while its
# neighbour in the same /24 is served. Exits non-zero on failure.
#
#   bash coredns/e2e/protect.sh
#
# With RRL_COREDNS set to a CoreDNS binary built with rrl (e2e.sh passes
# its own), that binary is used rather than one built here.
#
# Needs go and dig (bind9-dnsutils); it skips, with a message and exit
# status 0, when dig is not installed.
set -euo pipefail

if ! command -v dig >/dev/null; then
	echo "protect: SKIP: dig (bind9-dnsutils) is not installed"
	exit 0
fi

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"


dns_port=$(free_port 1055)
metrics_port=$(free_port 9155)

s240=\"$(printf 'x%.0s' $(seq 240))\"
cat >"$tmp/db.big.test" <<EOF
@ 3600 IN SOA ns1 hostmaster 1 7200 3600 1209600 300
@ 3600 IN NS ns1
ns1 3600 IN A 127.0.0.1
www 3600 IN A 192.0.2.1
txt 3600 IN TXT $s240 $s240 $s240 $s240
EOF
cat >"$tmp/Corefile" <<EOF
big.test.:$dns_port {
    bind 127.0.0.1
    prometheus 127.0.0.1:$metrics_port
    rrl {
        nocookie-udp-size 512
        ipv4-request-prefixes 32:5 24:100
    }
    file $tmp/db.big.test big.test.
}
EOF

if [[ -n ${RRL_COREDNS:-} ]]; then
	cp "$RRL_COREDNS" "$tmp/coredns"
else
	echo "protect: building CoreDNS with rrl into $tmp"
	build_coredns
fi
"$tmp/coredns" -conf "$tmp/Corefile" >"$tmp/coredns.log" 2>&1 &
pid=$!

# ask [dig options...] NAME TYPE: one UDP query that neither retries nor
# falls back to TCP on TC, so that what the server sent is what we see.
ask() { dig +ignore +tries=1 +time=2 +bufsize=1232 @127.0.0.1 -p "$dns_port" "$@" 2>&1 || true; }
size() { grep -oE 'MSG SIZE +rcvd: [0-9]+' <<<"$1" | grep -oE '[0-9]+$' || echo 0; }
tc() { grep -qiE '^;; flags:[^;]* tc' <<<"$1"; }

for _ in $(seq 50); do
	grep -q 'status: NOERROR' <<<"$(ask -b 127.0.0.9 +nocookie www.big.test A)" && break
	kill -0 "$pid" 2>/dev/null || fail "coredns exited"
	sleep 0.2
done

echo "protect: a 1,000-byte answer without a cookie: a TC reply of at most 512 bytes"
out=$(ask +nocookie txt.big.test TXT)
grep -E '^;; flags|MSG SIZE' <<<"$out" || true
tc "$out" && (($(size "$out") > 0 && $(size "$out") <= 512)) || fail "want a TC reply of at most 512 bytes: $out"

echo "protect: with a client cookie: TC, NOERROR, and a server cookie to retry with"
out=$(ask +cookie txt.big.test TXT)
grep -E '^;; flags|status|COOKIE|MSG SIZE' <<<"$out" || true
tc "$out" && grep -q 'status: NOERROR' <<<"$out" && (($(size "$out") <= 512)) || fail "want a TC reply, NOERROR, at most 512 bytes: $out"
cookie=$(grep -oE 'COOKIE: [0-9a-f]{48}' <<<"$out" | cut -d' ' -f2 || true)
[[ -n $cookie ]] || fail "no server cookie in the TC reply: $out"

echo "protect: the retry with the server cookie gets the whole answer"
out=$(ask +cookie="$cookie" txt.big.test TXT)
grep -E '^;; flags|MSG SIZE' <<<"$out" || true
! tc "$out" && (($(size "$out") > 1000)) || fail "want the whole answer with the cookie: $out"

echo "protect: so does TCP"
out=$(dig +tcp +tries=1 +time=2 @127.0.0.1 -p "$dns_port" txt.big.test TXT 2>&1 || true)
(($(size "$out") > 1000)) || fail "want the whole answer over TCP: $out"

# dig starts slowly, so the 60 queries take a while to go out: the bound
# is the /32's allowance over the time they took (plus a second's burst
# and a second's margin), well under 60.
echo "protect: 60 queries at once from 127.0.0.1 (its /32 allows 5/s), 5 from 127.0.0.2 in its /24"
start=$(date +%s%N)
for i in $(seq 60); do ask -b 127.0.0.1 +nocookie "h$i.big.test" A >"$tmp/heavy.$i" & done
for i in $(seq 5); do ask -b 127.0.0.2 +nocookie "n$i.big.test" A >"$tmp/neighbour.$i" & done
spawned=$((($(date +%s%N) - start) / 1000000))
for j in $(jobs -p); do [[ $j == "$pid" ]] || wait "$j" || true; done
heavy=$(cat "$tmp"/heavy.* | grep -c 'status: NXDOMAIN' || true)
neighbour=$(cat "$tmp"/neighbour.* | grep -c 'status: NXDOMAIN' || true)
bound=$((5 * (2000 + spawned) / 1000 + 5))
echo "protect: heavy host $heavy of 60 answered (sent over ${spawned} ms: at most $bound), neighbour $neighbour of 5"
((heavy >= 1 && heavy <= bound && heavy < 60)) || fail "want the heavy host held to its /32's 5 a second, got $heavy of 60"
((neighbour == 5)) || fail "want the neighbour served in full, got $neighbour of 5"
grep -q 'plugin/rrl: limit requests from 127.0.0.1/32 (ipv4-request-prefixes)' "$tmp/coredns.log" ||
	fail "no log line naming 127.0.0.1/32"

echo "protect: metrics"
exec 4<>"/dev/tcp/127.0.0.1/$metrics_port"
printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&4
metrics=$(cat <&4)
exec 4<&-
grep -E '^coredns_rrl_(nocookie_truncated|request_prefix_exceeded)_total' <<<"$metrics" || true
truncated=$(awk '/^coredns_rrl_nocookie_truncated_total/ { s += $NF } END { print s + 0 }' <<<"$metrics")
refused=$(awk '/^coredns_rrl_request_prefix_exceeded_total\{.*prefix_length="32"/ { s += $NF } END { print s + 0 }' <<<"$metrics")
((truncated == 2)) || fail "nocookie_truncated_total is $truncated, want the 2 TC replies"
((refused == 60 - heavy)) || fail "request_prefix_exceeded_total{prefix_length=\"32\"} is $refused, want $((60 - heavy))"

echo "protect: PASS"
