#!/usr/bin/env bash
# End-to-end check of kernel-drop in the CoreDNS binary: under a
# one-goroutine UDP flood from one /24 for 6 s, against requests-per-second
# 20, the same binary runs twice, without and with `kernel-drop lo`, pinned
# to one core (the load on the other). With the kernel drop:
#   - CoreDNS spends at most a quarter of the CPU it spends without;
#   - a legitimate client in another /24, 10 queries a second, gets at
#     least 58 of its 60 answers;
#   - the flooded network is answered again within kernel-drop-for (10 s,
#     the default) and a few seconds after the flood stops;
# kernel-drop-after is 100ms, so that the flood reaches CoreDNS for a tenth
# of a second before the kernel drops it: in that time it fills the
# socket's buffer, and the legitimate client's query then is lost.
#   - coredns_rrl_kernel_dropped_total has counted.
# Exits non-zero on failure.
#
#   bash coredns/e2e/kerneldrop.sh
#
# With RRL_COREDNS set to a CoreDNS binary built with rrl (e2e.sh passes
# its own), that binary is used rather than one built here. It needs root
# (XDP on lo) and two cores; without either it skips, with a message and
# exit status 0. It holds the lock on lo's XDP that the Go tests take, so
# that it never runs beside them.
set -euo pipefail

script=kerneldrop
if (($(id -u) != 0)); then
	echo "kerneldrop: SKIP: attaching XDP to lo needs root"
	exit 0
fi
if (($(nproc) < 2)); then
	echo "kerneldrop: SKIP: needs two cores (CoreDNS on one, the load on the other)"
	exit 0
fi

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

coredns=${RRL_COREDNS:-}
if [[ -z $coredns ]]; then
	build_coredns || fail "building CoreDNS"
	coredns=$tmp/coredns
fi
build_in_module "$tmp/flood" ./e2e/sidebyside/flood || fail "building the flood"
build_in_module "$tmp/legit" ./e2e/sidebyside/legit || fail "building the legitimate client"

exec 9>"${TMPDIR:-/tmp}/rrl-xdp-lo.lock"
flock 9

flood_src=127.80.0.1 legit_src=127.81.0.1
names=$(printf 'n%d.example.test.,' 0 1 2 3 4 5 6 7 8 9)
names=${names%,}

# cputicks prints the CPU time, user and system, of the CoreDNS in pid, in
# clock ticks.
cputicks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }

# run NAME RRL-LINES starts CoreDNS with RRL-LINES in its rrl block, floods
# it while the legitimate client asks, and sets cpu (ticks spent during the
# flood), sent (the flood's queries) and answered (the client's answers).
# It leaves CoreDNS running, for the caller to look at.
run() {
	local name=$1 lines=$2
	dns_port=$(free_port 1057)
	metrics_port=$(free_port 9157)
	cat >"$tmp/Corefile" <<EOF
example.test.:$dns_port {
    bind 127.0.0.1
    prometheus 127.0.0.1:$metrics_port
    rrl {
        responses-per-second 5
        requests-per-second 20
$lines
    }
    file $repo/coredns/e2e/sidebyside/example.test.zone
}
EOF
	GOMAXPROCS=1 taskset -c 1 "$coredns" -conf "$tmp/Corefile" >"$tmp/coredns.log" 2>&1 &
	pid=$!
	wait_for "an answer ($name)" dig @127.0.0.1 -p "$dns_port" +tries=1 +time=1 +short n0.example.test A
	local before
	before=$(cputicks)
	taskset -c 0 "$tmp/legit" -server "127.0.0.1:$dns_port" -src "$legit_src" -names "$names" -rate 10 -for 6s >"$tmp/legit.out" &
	local legit=$!
	sent=$(taskset -c 0 "$tmp/flood" -server "127.0.0.1:$dns_port" -src "$flood_src" -name txt.example.test. -for 6s | awk '{print $2}')
	cpu=$(($(cputicks) - before))
	wait "$legit" || true
	answered=$(awk '{print $4}' "$tmp/legit.out")
	echo "kerneldrop: $name: flood of $sent queries, CoreDNS CPU $cpu ticks, legitimate client: $(cat "$tmp/legit.out")"
}

stop() {
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	pid=
}

run "without kernel-drop" ""
cpu_without=$cpu
stop

run "with kernel-drop" "        kernel-drop lo
        kernel-drop-after 100ms"
cpu_with=$cpu
grep -q "127.80.0.0/24 dropped in the kernel" "$tmp/coredns.log" || fail "the flooded network never went into the kernel"

# After the flood the network comes back within kernel-drop-for (10 s)
# and a few seconds: asked every half second, for at most 15 s.
flood_end=$(date +%s%N)
back=
while (($(date +%s%N) - flood_end < 15000000000)); do
	if dig @127.0.0.1 -p "$dns_port" -b 127.80.0.2 +tries=1 +time=1 +short n0.example.test A | grep -q 192.0.2.10; then
		back=$((($(date +%s%N) - flood_end) / 100000000)) # tenths of a second
		break
	fi
	sleep 0.5
done
[[ -n $back ]] || fail "the flooded network was not answered again within 15 s after the flood"
dropped=$(curl -s "http://127.0.0.1:$metrics_port/metrics" | awk '/^coredns_rrl_kernel_dropped_total/ { s += $2 } END { print s + 0 }')
stop

echo "kerneldrop: CoreDNS CPU under the flood: $cpu_with ticks with kernel-drop, $cpu_without without; legitimate client $answered/60 with it; the flooded network answered again $((back / 10)).$((back % 10)) s after the flood; kernel_dropped_total $dropped"
((cpu_with * 4 <= cpu_without)) || fail "with kernel-drop CoreDNS spent $cpu_with ticks, more than a quarter of the $cpu_without it spent without"
((answered >= 58)) || fail "the legitimate client got $answered of 60 answers with kernel-drop, want at least 58"
((dropped > 0)) || fail "coredns_rrl_kernel_dropped_total did not count"
echo "kerneldrop: PASS"
