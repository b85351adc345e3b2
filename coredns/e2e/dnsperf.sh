#!/usr/bin/env bash
# Throughput of CoreDNS with rrl on (limits too high to bite) and off, on
# loopback, with dnsperf. Rounds alternate on and off so that a change in
# the machine's load hits both alike; the medians are compared.
#
#   bash coredns/e2e/dnsperf.sh [ROUNDS] [SECONDS]
#
# It also runs each configuration at a fixed rate and reports the server's
# CPU time per query, which other load on the machine disturbs less than the
# maximum throughput. Needs go and dnsperf (Debian package dnsperf).
set -euo pipefail

rounds=${1:-5}
seconds=${2:-10}
port=1053

command -v dnsperf >/dev/null || { echo "dnsperf: SKIP: dnsperf is not installed"; exit 0; }

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

build_coredns
cp "$repo/coredns/example/db.example.test" "$tmp/"

corefile() { # corefile on|off
	local rrl=""
	if [[ $1 == on ]]; then
		rrl="rrl {
        responses-per-second 1000000
    }"
	fi
	cat <<EOF
example.test.:$port {
    bind 127.0.0.1
    metadata
    prometheus 127.0.0.1:9153
    errors
    $rrl
    file db.example.test
}
EOF
}
corefile on >"$tmp/Corefile.on"
corefile off >"$tmp/Corefile.off"

# Answers, a wildcard, NXDOMAIN, a referral and NODATA, as a real zone sees.
cat >"$tmp/queries" <<'EOF'
www.example.test A
www.example.test AAAA
ns1.example.test A
a.wild.example.test A
b.wild.example.test A
nope.example.test A
host.sub.example.test A
example.test SOA
www.example.test MX
EOF

start() {
	(cd "$tmp" && exec ./coredns -conf "Corefile.$1") >"$tmp/log.$1" 2>&1 &
	pid=$!
	for _ in $(seq 50); do
		dnsperf -s 127.0.0.1 -p "$port" -d "$tmp/queries" -n 1 >/dev/null 2>&1 && return
		sleep 0.1
	done
	echo "coredns did not start"; cat "$tmp/log.$1"; exit 1
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=; }

# cputicks: user and system time of the server so far, in clock ticks.
cputicks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }

declare -A qps cpu
for r in $(seq "$rounds"); do
	for mode in off on; do
		start "$mode"
		before=$(cputicks)
		out=$(dnsperf -s 127.0.0.1 -p "$port" -d "$tmp/queries" -l "$seconds" -c 8 -q 200 2>&1)
		after=$(cputicks)
		stop
		q=$(awk '/Queries per second/ {print $4}' <<<"$out")
		n=$(awk '/Queries completed/ {print $3}' <<<"$out")
		us=$(awk -v t=$((after - before)) -v hz="$(getconf CLK_TCK)" -v n="$n" 'BEGIN {printf "%.1f", t/hz*1e6/n}')
		qps[$mode]+="$q "
		cpu[$mode]+="$us "
		echo "round $r rrl $mode: $q queries/s, $us us of server CPU per query"
	done
done

median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
change() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%+.1f%%", (b-a)/a*100}'; }
off=$(median <<<"${qps[off]}")
on=$(median <<<"${qps[on]}")
echo "median queries/s: rrl off $off, rrl on $on, change $(change "$off" "$on")"
coff=$(median <<<"${cpu[off]}")
con=$(median <<<"${cpu[on]}")
echo "median server CPU per query: rrl off $coff us, rrl on $con us, change $(change "$coff" "$con")"

# CPU time per query at a fixed rate that the machine sustains either way.
rate=$(awk -v a="$off" 'BEGIN {printf "%d", a/2}')
hz=$(getconf CLK_TCK)
for mode in off on; do
	start "$mode"
	before=$(cputicks)
	sent=$(dnsperf -s 127.0.0.1 -p "$port" -d "$tmp/queries" -l "$seconds" -Q "$rate" 2>&1 |
		awk '/Queries completed/ {print $3}')
	after=$(cputicks)
	stop
	echo "rrl $mode at $rate queries/s: $(awk -v t=$((after - before)) -v hz="$hz" -v n="$sent" \
		'BEGIN {printf "%.1f", t/hz*1e6/n}') us of server CPU per query"
done
