#!/usr/bin/env bash
# Soak test of the rrl plugin: build the CoreDNS binary, run it for MINUTES
# minutes under a flood from one network, a spray from many networks
# (127.N.M.1, more /24s than the table holds) and a reload every 10 seconds
# (SIGUSR1, the Corefile unchanged), and print each minute the resident
# memory, the Go heap in use (go_memstats_heap_inuse_bytes from /metrics,
# which unlike the resident memory does not lag the garbage collector), the
# goroutines (go_goroutines), the reloads done and the answers each load got. Flat memory and goroutines show that nothing
# leaks. The flood asks far over its allowance, so its account stays in
# debt and it gets only its first second's answers, then TC slips: a reload
# that reset the accounts would show as another second's answers each time.
#
#   nice -n 10 bash coredns/e2e/soak.sh 10
#
# Needs go and curl. Loopback only. Not run by test.sh: it takes minutes.
set -euo pipefail

minutes=${1:-10}
[[ $minutes =~ ^[1-9][0-9]*$ ]] || { echo "usage: soak.sh MINUTES" >&2; exit 2; }
rate=10         # responses-per-second of the flooded network
table=10000     # max-table-size; the spray uses 25600 /24s
flood_qps=1000
spray_qps=500

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
reloader=
stop_reloader() { [[ -z $reloader ]] || kill "$reloader" 2>/dev/null || true; }
trap 'stop_reloader; cleanup' EXIT

fail() {
	echo "soak: FAIL: $*"
	[[ ! -f $tmp/coredns.log ]] || tail -20 "$tmp/coredns.log"
	exit 1
}

echo "soak: building CoreDNS with rrl and the load generator into $tmp"
build_coredns
build_in_module "$tmp/soakload" ./e2e/soakload

read -r dns_port metrics_port <<<"$(free_ports 2)"
cat >"$tmp/Corefile" <<CF
soak.test.:$dns_port {
    bind 127.0.0.1
    prometheus 127.0.0.1:$metrics_port
    rrl {
        responses-per-second $rate
        max-table-size $table
    }
    template IN A soak.test. {
        answer "{{ .Name }} 60 IN A 192.0.2.1"
    }
}
CF

"$tmp/coredns" -conf "$tmp/Corefile" >"$tmp/coredns.log" 2>&1 &
pid=$!
metrics=http://127.0.0.1:$metrics_port/metrics
wait_for "metrics at $metrics" curl -sf "$metrics"

# Reload every 10 seconds, the Corefile unchanged: the accounts must stay.
(while sleep 10; do kill -USR1 "$pid" 2>/dev/null || exit 0; done) &
reloader=$!

rss() { awk '/^VmRSS:/ {printf "%.1f", $2 / 1024}' "/proc/$pid/status"; }
metric() { curl -sf "$metrics" | awk -v m="$1" '$1 == m {print $2; exit}'; }

echo "soak: $minutes minutes against 127.0.0.1:$dns_port: flood of $flood_qps/s from 127.0.60.1 (allowance $rate/s: its first second's $rate answers, then none unless a reload resets it), spray of $spray_qps/s from 25600 /24s, a reload every 10 s"
heap() { metric go_memstats_heap_inuse_bytes | awk '{printf "%.1f", $1 / 1048576}'; }
printf '%-6s %8s %8s %10s %7s %28s %22s\n' minute rss_MB heap_MB goroutines reloads "flood sent/answered/TC" "spray sent/answered"
printf '%-6s %8s %8s %10s\n' start "$(rss)" "$(heap)" "$(metric go_goroutines)"
for m in $(seq "$minutes"); do
	before=$(grep -c 'Reloading complete' "$tmp/coredns.log" || true)
	line=$("$tmp/soakload" -server "127.0.0.1:$dns_port" -flood-qps "$flood_qps" -spray-qps "$spray_qps" -for 60s)
	kill -0 "$pid" 2>/dev/null || fail "CoreDNS exited"
	after=$(grep -c 'Reloading complete' "$tmp/coredns.log" || true)
	read -r _ _ fs _ fa _ ft _ _ ss _ sa <<<"${line//;/}"
	printf '%-6s %8s %8s %10s %7s %28s %22s\n' "$m" "$(rss)" "$(heap)" "$(metric go_goroutines)" "$((after - before))" "$fs/$fa/$ft" "$ss/$sa"
done
grep -q 'kept accounts for \[soak.test.\]' "$tmp/coredns.log" || fail "no reload kept the accounts"
! grep -q 'panic' "$tmp/coredns.log" || fail "CoreDNS panicked"
echo "soak: done; table size $(metric 'coredns_rrl_table_size{server="dns://127.0.0.1:'"$dns_port"'",zone="soak.test."}') of $table"
