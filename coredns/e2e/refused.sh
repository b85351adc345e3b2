#!/usr/bin/env bash
# What a refused request costs the server, against an answered one, in one
# run of one CoreDNS process on loopback, with dnsperf: the server's CPU
# time per query (user + system, from /proc) while dnsperf sends at a fixed
# rate, for queries
#
#   zone:      answered from a zone file (file), under rrl;
#   forwarded: answered by forward from an upstream (a second CoreDNS, whose
#              CPU time is not counted), under rrl;
#   refused:   over requests-per-second, refused by rrl before the work.
#
# Phases alternate for ROUNDS rounds, so that a change in the machine's load
# hits each alike, and the medians are compared.
#
#   bash coredns/e2e/refused.sh [ROUNDS] [SECONDS] [RATE]
#
# Needs go and dnsperf (Debian package dnsperf).
set -euo pipefail

rounds=${1:-3}
seconds=${2:-5}
rate=${3:-4000}

command -v dnsperf >/dev/null || { echo "refused: SKIP: dnsperf is not installed"; exit 0; }

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

build_coredns
cp "$repo/coredns/example/db.example.test" "$tmp/"
sed 's/example\.test\./limited.test./g' "$tmp/db.example.test" >"$tmp/db.limited.test"

# The ports: any free ones near these.
in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
free_port() {
	local p=$1
	while in_use "$p"; do p=$((p + 1)); done
	echo "$p"
}
port=$(free_port 11053)
upport=$(free_port $((port + 1)))

cat >"$tmp/Corefile.up" <<EOF
fwd.test.:$upport {
    bind 127.0.0.1
    template IN A fwd.test {
        answer "{{ .Name }} 60 IN A 192.0.2.1"
    }
}
EOF
# Each block charges every request to requests-per-second; only limited.test.
# has an allowance small enough to refuse nearly all of them.
cat >"$tmp/Corefile" <<EOF
example.test.:$port {
    bind 127.0.0.1
    errors
    rrl {
        requests-per-second 1000000
        responses-per-second 1000000
    }
    file db.example.test
}
fwd.test.:$port {
    bind 127.0.0.1
    errors
    rrl {
        requests-per-second 1000000
        responses-per-second 1000000
    }
    forward . 127.0.0.1:$upport
}
limited.test.:$port {
    bind 127.0.0.1
    errors
    rrl {
        requests-per-second 1
        responses-per-second 1000000
    }
    file db.limited.test
}
EOF
printf 'www.example.test A\n' >"$tmp/q.zone"
printf 'www.fwd.test A\n' >"$tmp/q.forwarded"
printf 'www.limited.test A\n' >"$tmp/q.refused"

(cd "$tmp" && exec ./coredns -conf Corefile.up) >"$tmp/log.up" 2>&1 &
uppid=$!
(cd "$tmp" && exec ./coredns -conf Corefile) >"$tmp/log" 2>&1 &
pid=$!
trap 'kill $uppid 2>/dev/null || true; cleanup' EXIT
for _ in $(seq 50); do
	dnsperf -s 127.0.0.1 -p "$port" -d "$tmp/q.forwarded" -n 1 2>/dev/null | grep -q 'Queries completed: *1 ' && break
	kill -0 "$pid" 2>/dev/null || { cat "$tmp/log"; exit 1; }
	sleep 0.2
done

cputicks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
hz=$(getconf CLK_TCK)

declare -A cost
for r in $(seq "$rounds"); do
	for phase in zone forwarded refused; do
		before=$(cputicks)
		out=$(dnsperf -s 127.0.0.1 -p "$port" -d "$tmp/q.$phase" -l "$seconds" -Q "$rate" -q 65535 -t 1 2>&1)
		after=$(cputicks)
		sent=$(awk '/Queries sent/ {print $3}' <<<"$out")
		done_=$(awk '/Queries completed/ {print $3}' <<<"$out")
		us=$(awk -v t=$((after - before)) -v hz="$hz" -v n="$sent" 'BEGIN {printf "%.1f", t/hz*1e6/n}')
		cost[$phase]+="$us "
		echo "round $r $phase: $sent sent, $done_ answered, $us us of server CPU per query"
	done
	sleep 1 # let the refused queries' timeouts pass before the next round
done

median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
z=$(median <<<"${cost[zone]}")
f=$(median <<<"${cost[forwarded]}")
x=$(median <<<"${cost[refused]}")
echo "median server CPU per query at $rate queries/s: zone $z us, forwarded $f us, refused $x us"
awk -v z="$z" -v f="$f" -v x="$x" 'BEGIN {printf "refused/zone %.2f (target <= 0.5), refused/forwarded %.2f (target <= 0.2)\n", x/z, x/f}'
