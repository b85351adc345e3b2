#!/usr/bin/env bash
# Renews default.pgo, the CPU profile that `go build` of this command uses
# for profile-guided optimisation (-pgo=auto, the default, takes the
# default.pgo of the main package).
#
# It builds this CoreDNS without a profile (-pgo=off) and the load generator
# of the soak test (coredns/e2e/soakload), and starts the server on loopback
# with two server blocks for the shipped example zone (example.test. from
# coredns/example/db.example.test): the example's own (coredns/example/
# Corefile: its rrl block, with exempt-clients, and metadata, prometheus,
# ready and errors) with the pprof plugin added, and one with the plainest
# rrl block, responses-per-second alone. The core debits the two
# differently (the second takes its shortest path), and a server runs one
# or the other. Each block gets UDP queries for www.example.test. from a
# soakload of its own: a flood from one source, far over its allowance, and
# a spray from thousands of networks (127.N.M.1, each its own /24). While
# the load runs the script takes a CPU profile of SECONDS seconds (default
# 30) from /debug/pprof/profile.
#
# In that profile the core's debit has under 1% of the samples (the
# network's system calls, the runtime, the file plugin and the metrics
# take the rest), too few for the compiler to count all of its calls as
# hot (when this was written, it took the core's BenchmarkDebitHot from
# 548 instructions to 536 alone). So the profile of the plugin's
# BenchmarkRRL (coredns/bench_test.go: ServeDNS through rrl and the core's
# debit for each query, without the network; 10 s) is merged in: it
# weighs the per-response path more than a server does, and the server's
# own hot paths stay in the profile (the merge took the same benchmark to
# 520). The merge is written here as default.pgo; the figures it gives now
# are in coredns/README.md. Everything listens and sends on loopback only;
# the server and the load are stopped on exit.
#
# Renew the profile after a change to the hot path (the core's debit, the
# plugin's ServeDNS) and before a release, then commit default.pgo:
#
#   nice -n 10 bash coredns/cmd/coredns/pgo.sh        # about two minutes
#
# Needs go and curl.
set -euo pipefail

seconds=${1:-30}
[[ $seconds =~ ^[1-9][0-9]*$ ]] || { echo "usage: pgo.sh [SECONDS]" >&2; exit 2; }
flood_qps=${FLOOD_QPS:-10000} # of each block
spray_qps=${SPRAY_QPS:-1000}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
script=pgo.sh
source "$here/../../e2e/lib.sh" # repo, tmp, pid, others (the loads), build, fail, free_ports, wait_for
trap 'exit 130' INT TERM
example=$repo/coredns/example

echo "pgo.sh: building CoreDNS (-pgo=off) and the load generator into $tmp"
build_coredns -pgo=off || fail "build of CoreDNS"
build_in_module "$tmp/soakload" ./e2e/soakload || fail "build of soakload"

# The example's Corefile on free ports, with the zone's folder as an
# absolute path and the pprof plugin added after bind, then the plain block.
read -r dns_port plain_port metrics_port ready_port pprof_port <<<"$(free_ports 5)"
sed -e "s|^example\.test\.:1053 {|example.test.:$dns_port {|" \
	-e "s|^\( *\)root coredns/example\$|\1root $example|" \
	-e "s|prometheus 127\.0\.0\.1:9153|prometheus 127.0.0.1:$metrics_port|" \
	-e "s|ready 127\.0\.0\.1:8181|ready 127.0.0.1:$ready_port|" \
	-e "s|^\( *\)bind 127\.0\.0\.1\$|&\n\1pprof 127.0.0.1:$pprof_port|" \
	"$example/Corefile" >"$tmp/Corefile"
for want in "example.test.:$dns_port {" "root $example" "prometheus 127.0.0.1:$metrics_port" \
	"ready 127.0.0.1:$ready_port" "pprof 127.0.0.1:$pprof_port" "rrl {" "file db.example.test"; do
	grep -qF "$want" "$tmp/Corefile" || fail "coredns/example/Corefile changed: no '$want' in the profiling Corefile; mend this script"
done
cat >>"$tmp/Corefile" <<CF
example.test.:$plain_port {
    bind 127.0.0.1
    root $example
    prometheus 127.0.0.1:$metrics_port
    errors
    rrl {
        responses-per-second 5
    }
    file db.example.test
}
CF

"$tmp/coredns" -conf "$tmp/Corefile" >"$tmp/coredns.log" 2>&1 &
pid=$!
wait_for "readiness" curl -sf "http://127.0.0.1:$ready_port/ready"

# The load runs a few seconds longer than the profile on both sides.
echo "pgo.sh: load on 127.0.0.1:$dns_port (the example) and :$plain_port (responses-per-second alone), each a flood of $flood_qps/s from one source and a spray of $spray_qps/s from 25600 /24s; profiling $seconds s"
start_load() { # port, flood source, output
	"$tmp/soakload" -server "127.0.0.1:$1" -name www.example.test. -flood-src "$2" \
		-flood-qps "$flood_qps" -spray-qps "$spray_qps" -for "$((seconds + 5))s" >"$3" 2>&1 &
	others+=" $!"
}
start_load "$dns_port" 127.0.60.1 "$tmp/load.example"
start_load "$plain_port" 127.0.61.1 "$tmp/load.plain"
sleep 2
curl -sf -o "$tmp/cpu.pprof" "http://127.0.0.1:$pprof_port/debug/pprof/profile?seconds=$seconds" ||
	fail "no profile from the pprof plugin"
for p in $others; do
	wait "$p" || fail "soakload: $(cat "$tmp"/load.*)"
done
others=
for f in "$tmp/load.example" "$tmp/load.plain"; do
	echo "pgo.sh: ${f##*.}: $(cat "$f")"
	read -r _ _ _ _ answered _ _ _ _ _ _ spray_answered <<<"$(tr -d ';' <"$f")"
	((answered > 0 && spray_answered > 0)) || fail "the server answered too little: $(cat "$f")"
done
kill -0 "$pid" 2>/dev/null || fail "CoreDNS exited"
! grep -q panic "$tmp/coredns.log" || fail "CoreDNS panicked"

# The profile must have seen the limiter at work, else it is no use.
go tool pprof -top -nodecount=100000 "$tmp/cpu.pprof" 2>/dev/null >"$tmp/top.txt" || fail "go tool pprof cannot read the profile"
grep -q 'github\.com/dnsrrl/rrl/coredns\.(\*RRL)\.ServeDNS' "$tmp/top.txt" ||
	fail "the profile has no sample in the plugin's ServeDNS"
grep -q ' github\.com/dnsrrl/rrl\.' "$tmp/top.txt" || fail "the profile has no sample in the core"
kill "$pid" && wait "$pid" 2>/dev/null || true
pid=

echo "pgo.sh: profiling the plugin's BenchmarkRRL for 10 s (-pgo=off)"
bench() {
	(cd "$repo/coredns" && go test -pgo=off -run '^$' -bench '^BenchmarkRRL$' -benchtime 10s -count 1 \
		-cpuprofile "$tmp/bench.pprof" -o "$tmp/rrl.test" .)
}
bench >"$tmp/bench.out" 2>&1 || GOWORK=off bench >"$tmp/bench.out" 2>&1 ||
	fail "the benchmark: $(cat "$tmp/bench.out")"
grep '^BenchmarkRRL' "$tmp/bench.out" || fail "no benchmark result: $(cat "$tmp/bench.out")"

# Merged and compacted (-proto), then moved into place.
go tool pprof -proto "$tmp/cpu.pprof" "$tmp/rrl.test" "$tmp/bench.pprof" >"$tmp/default.pgo" 2>/dev/null ||
	fail "go tool pprof -proto"
mv "$tmp/default.pgo" "$here/default.pgo"
echo "pgo.sh: wrote $here/default.pgo ($(wc -c <"$here/default.pgo") bytes; server $(sed -n 's/^Duration: .*Total samples = \(.*\)$/samples \1/p' "$tmp/top.txt"))"
