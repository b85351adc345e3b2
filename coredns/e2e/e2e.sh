#!/usr/bin/env bash
# End-to-end check of the rrl plugin: build the CoreDNS binary, run it on
# coredns/example/Corefile, and show with dig (or kdig) that a client that
# asks too fast first gets answers, then truncated (TC) replies and silence,
# while TCP and other clients are still served; and, with dig, that a client
# presenting its server cookie is held to proven-requests-per-second, its
# refused queries getting nothing; then protect.sh on the same binary (the
# protections beyond BIND). Exits non-zero on failure.
#
#   bash coredns/e2e/e2e.sh
#
# Needs go, and dig (bind9-dnsutils) or kdig (knot-dnsutils); it skips, with
# a message and exit status 0, when neither client is installed.
set -euo pipefail

dns_port=1053
metrics_port=9153

if command -v dig >/dev/null; then
	client=dig
elif command -v kdig >/dev/null; then
	client=kdig
else
	echo "e2e: SKIP: neither dig (bind9-dnsutils) nor kdig (knot-dnsutils) is installed"
	exit 0
fi

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"


# ask [client options...] NAME TYPE: one query over UDP that neither retries
# nor falls back to TCP on TC, so that what the server sent is what we see.
# Cookies are off: a cookie-aware client answered with BADCOOKIE retries
# with the server cookie, and is then rightly exempt from limiting.
ask() {
	local opts=()
	case $client in
	dig) opts=(+nocookie +ignore +tries=1 +time=2) ;;
	kdig) opts=(+nocookie +ignoretc +retry=0 +timeout=2) ;;
	esac
	"$client" "${opts[@]}" @127.0.0.1 -p "$dns_port" "$@" 2>&1 || true
}

# outcome reads a client's output: answered, truncated or dropped.
outcome() {
	if grep -qiE '^;; flags:[^;]* tc' <<<"$1"; then
		echo truncated
	elif grep -qiE 'status: (NOERROR|NXDOMAIN)' <<<"$1"; then
		echo answered
	else
		echo dropped
	fi
}

# earned ALLOWANCE START END: the most a burst sent between START and END
# (seconds, from date +%s.%N) can have answered: the second's credit an
# account holds, what it earns while the shell starts the burst's clients
# (slow on a busy machine), and two more for clients the shell had started
# but the kernel had not yet run when the loop ended.
earned() { awk -v a="$1" -v s="$2" -v e="$3" 'BEGIN { x = a + a * (e - s) + 2; print int(x) + (x > int(x)) }'; }

echo "e2e: building CoreDNS with rrl into $tmp"
build_coredns

# The example listens on fixed ports. CoreDNS sets SO_REUSEPORT, so a second
# server on a busy port would start and share the queries; if a port is
# taken, run the example on another one instead.
dns_port=$(free_port 1053)
metrics_port=$(free_port 9153)
ready_port=$(free_port 8181)
sed -e "s/:1053 /:$dns_port /" -e "s/127.0.0.1:9153/127.0.0.1:$metrics_port/" \
	-e "s/127.0.0.1:8181/127.0.0.1:$ready_port/" "$repo/coredns/example/Corefile" >"$tmp/Corefile"
grep -q ":$dns_port " "$tmp/Corefile" || fail "could not set the port in the example Corefile"

echo "e2e: starting it on coredns/example/Corefile (DNS on 127.0.0.1:$dns_port)"
(cd "$repo" && exec "$tmp/coredns" -conf "$tmp/Corefile") >"$tmp/coredns.log" 2>&1 &
pid=$!
for _ in $(seq 50); do
	if [[ $(outcome "$(ask ns1.example.test A)") == answered ]]; then
		break
	fi
	kill -0 "$pid" 2>/dev/null || fail "coredns exited"
	sleep 0.2
done
# Start from a fresh account: the readiness probes above spent some of it.
sleep 6

echo "e2e: one query is answered"
first=$(ask www.example.test A)
echo "$first" | grep -iE '^;; flags|status|192\.0\.2\.1' || true
[[ $(outcome "$first") == answered ]] || fail "the first query was not answered"
grep -q '192\.0\.2\.1' <<<"$first" || fail "the first answer lacks 192.0.2.1"

# scrape prints the metrics page.
scrape() {
	exec 4<>"/dev/tcp/127.0.0.1/$metrics_port"
	printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&4
	cat <&4
	exec 4<&-
}

# answers ACTION PAGE: the responses_total of www's answers with ACTION
# (summed over servers and zones; 0 when the series is absent).
answers() {
	awk -v a="$1" '$0 ~ "^coredns_rrl_responses_total\\{action=\"" a "\",category=\"answer\"" { s += $NF } END { print s + 0 }' <<<"$2"
}

before=$(scrape)
echo "e2e: a burst of 20 queries at once from the same client (allowance 5/s)"
start=$(date +%s.%N)
for i in $(seq 20); do
	ask www.example.test A >"$tmp/burst.$i" &
done
started=$(date +%s.%N)
wait_jobs() { for j in $(jobs -p); do [[ $j == "$pid" ]] || wait "$j" || true; done; }
wait_jobs
answered=0 truncated=0 dropped=0
for i in $(seq 20); do
	o=$(outcome "$(cat "$tmp/burst.$i")")
	echo "  query $i: $o"
	case $o in
	answered) answered=$((answered + 1)) ;;
	truncated) truncated=$((truncated + 1)) ;;
	dropped) dropped=$((dropped + 1)) ;;
	esac
done
echo "e2e: answered $answered, truncated $truncated, dropped $dropped"
most=$(earned 5 "$start" "$started")
echo "e2e: at most $most could be answered: 5, and 5 a second while the burst started"
# The first query above spent one of www's five.
((answered >= 4 && answered <= most)) || fail "want 4 to $most answered, got $answered"
((truncated >= 1)) || fail "want TC replies (slip-ratio 2), got none"
((dropped >= 1)) || fail "want some responses dropped, got none"

echo "e2e: the limited client still gets its answer over TCP"
tcp=$("$client" +tcp @127.0.0.1 -p "$dns_port" www.example.test A 2>&1 || true)
grep -q '192\.0\.2\.1' <<<"$tcp" || fail "TCP query not answered: $tcp"

echo "e2e: an exempt client (127.0.99.1) is never limited"
for i in $(seq 20); do
	ask -b 127.0.99.1 www.example.test A >"$tmp/exempt.$i" &
done
wait_jobs
for i in $(seq 20); do
	[[ $(outcome "$(cat "$tmp/exempt.$i")") == answered ]] || fail "exempt client limited on query $i"
done

# The README's first loop, as a newcomer pastes it, holds to what the
# README promises: of twenty at once, at least five answered and at least
# one limited (how many more than five depends on how long the shell takes
# to start twenty digs); at least 15 of twenty sent one after another. The
# account is left to refill first (its debt is at most window 5 seconds).
if [[ $client == dig ]]; then
	loop=$(grep -m1 -F 'for i in $(seq 20); do dig @127.0.0.1 -p 1053' "$repo/README.md") ||
		fail "the README's first loop is gone"
	loop=${loop//-p 1053/-p $dns_port}
	sleep 6
	out=$(bash -c "$loop" 2>&1 || true)
	at_once=$(grep -c 'flags: qr aa;' <<<"$out" || true)
	limited=$(grep -cE 'flags:[^;]* tc|timed out' <<<"$out" || true)
	echo "e2e: the README's loop: $at_once of 20 answered at once, $limited limited (README: at least five answered, some limited)"
	((at_once >= 5 && limited >= 1)) || fail "the README's loop answered $at_once of 20 and limited $limited; it promises at least five answered and some limited"
	sleep 6
	one_by_one=$(bash -c "${loop/ & done; wait/; done}" 2>&1 | grep -c 'flags: qr aa;' || true)
	echo "e2e: the README's loop one by one: $one_by_one of 20 answered (README: at least 15)"
	((one_by_one >= 15)) || fail "one by one the README's loop answered $one_by_one of 20, it promises at least 15"
fi

echo "e2e: the log says when limiting started"
grep -q 'plugin/rrl: limit responses to 127.0.0.0/24 for www.example.test. IN A' "$tmp/coredns.log" ||
	fail "no 'limit responses' line in the log"

echo "e2e: metrics"
metrics=$(scrape)
grep -E '^coredns_rrl_responses_total\{action="(send|slip|drop)",category="answer"' <<<"$metrics" || fail "no coredns_rrl_responses_total"
grep -E '^coredns_rrl_table_size' <<<"$metrics" || fail "no coredns_rrl_table_size"
# The burst's slips and drops are counted: the counters moved by at least
# what the client saw (the exempt client and TCP only add sends).
slips=$(($(answers slip "$metrics") - $(answers slip "$before")))
drops=$(($(answers drop "$metrics") - $(answers drop "$before")))
echo "e2e: metrics count $slips more slips and $drops more drops (the client saw $truncated TC replies, $dropped silences)"
((slips >= truncated && slips >= 1)) || fail "slip counter rose by $slips, want at least $truncated"
((drops >= 1)) || fail "drop counter rose by $drops, want at least 1"
if grep -E '^coredns_rrl_' <<<"$metrics" | grep -qE '127\.0\.(0|99)\.[0-9]+[^:]'; then
	fail "an rrl metric carries a client address"
fi

# Request limits act before the work and hold clients with cookies too: a
# second server with requests-per-second 2, proven-requests-per-second 5
# and responses-per-second 1. A client that presents the server cookie it
# was given escapes the response limit but not the proven request
# allowance. dig is the client here: it takes a server cookie to send.
if [[ $client == dig ]]; then
	req_port=$(free_port $((dns_port + 1)))
	req_metrics=$(free_port $((metrics_port + 1)))
	cat >"$tmp/Corefile.requests" <<-EOF
		example.test.:$req_port {
		    bind 127.0.0.1
		    root $repo/coredns/example
		    prometheus 127.0.0.1:$req_metrics
		    rrl {
		        requests-per-second 2
		        proven-requests-per-second 5
		        responses-per-second 1
		    }
		    file db.example.test
		}
	EOF
	"$tmp/coredns" -conf "$tmp/Corefile.requests" >"$tmp/requests.log" 2>&1 &
	req_pid=$!
	trap 'kill "$req_pid" 2>/dev/null || true; cleanup' EXIT
	cookie=
	for _ in $(seq 50); do
		cookie=$(dig +tries=1 +time=1 @127.0.0.1 -p "$req_port" ns1.example.test A 2>/dev/null |
			grep -oE 'COOKIE: [0-9a-f]{48}' | cut -d' ' -f2 || true)
		[[ -n $cookie ]] && break
		sleep 0.2
	done
	[[ -n $cookie ]] || fail "no server cookie from the second server"
	echo "e2e: 30 queries at once with a valid server cookie (proven allowance 5/s, responses 1/s)"
	start=$(date +%s.%N)
	for i in $(seq 30); do
		dig +cookie="$cookie" +ignore +tries=1 +time=2 @127.0.0.1 -p "$req_port" www.example.test A >"$tmp/cookie.$i" 2>&1 &
	done
	started=$(date +%s.%N)
	for j in $(jobs -p); do [[ $j == "$pid" || $j == "$req_pid" ]] || wait "$j" || true; done
	# The probes sent only a client cookie: they spent the network's
	# unproven account, not the proven one these queries are charged to.
	answered=0 replied=0
	for i in $(seq 30); do
		out=$(cat "$tmp/cookie.$i")
		if grep -q BADCOOKIE <<<"$out"; then
			replied=$((replied + 1)) # a valid cookie is never answered BADCOOKIE, not even before a retry
		elif [[ $(outcome "$out") == answered ]]; then
			answered=$((answered + 1))
		elif grep -q '^;; ->>HEADER<<-' <<<"$out"; then
			replied=$((replied + 1)) # TC, REFUSED, SERVFAIL...: a refused query gets no reply at all
		fi
	done
	echo "e2e: $answered answered, $replied other replies, the rest refused"
	most=$(earned 5 "$start" "$started")
	((answered >= 2 && answered <= most)) || fail "want 2 to $most answered (the proven allowance, 5, and 5 a second while the queries started; above the response limit of 1), got $answered"
	((replied == 0)) || fail "refused requests got $replied replies, want none"
	exec 4<>"/dev/tcp/127.0.0.1/$req_metrics"
	printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&4
	refused=$(awk '/^coredns_rrl_requests_exceeded_total\{.*source="proven"/ { s += $NF } END { print s + 0 }' <&4)
	exec 4<&-
	echo "e2e: requests_exceeded_total{source=\"proven\"} = $refused"
	((refused == 30 - answered)) || fail "want the $((30 - answered)) refused queries counted as proven, got $refused"
fi

# The protections beyond BIND (nocookie-udp-size, the request prefixes)
# have a script of their own, which needs dig; it runs the binary built here.
if [[ $client == dig ]]; then
	RRL_COREDNS=$tmp/coredns bash "$repo/coredns/e2e/protect.sh" || fail "protect.sh failed"
	# kernel-drop under a flood, with and without; it needs root and skips
	# without.
	RRL_COREDNS=$tmp/coredns bash "$repo/coredns/e2e/kerneldrop.sh" || fail "kerneldrop.sh failed"
fi

echo "e2e: PASS"
