#!/usr/bin/env bash
# Renews default.pgo, the CPU profile that `go build` of this command uses
# for profile-guided optimisation (-pgo=auto, the default, takes the
# default.pgo of the main package).
#
# It builds this CoreDNS without a profile (-pgo=off) and the load generator
# of the soak test (coredns/e2e/soakload), starts the server on loopback on
# the shipped example (coredns/example: the zone example.test. from
# db.example.test, the example's rrl block, metadata, prometheus, ready and
# errors) with the pprof plugin added, and sends it UDP queries for
# www.example.test.: a flood from one source, far over its allowance, and a
# spray from thousands of networks (127.N.M.1, each its own /24). While the
# load runs it takes a CPU profile of SECONDS seconds (default 30) from
# /debug/pprof/profile and writes it here as default.pgo. Everything listens
# and sends on loopback only; the server and the load are stopped on exit.
#
# Renew the profile after a change to the hot path (the core's debit, the
# plugin's ServeDNS) and before a release, then commit default.pgo:
#
#   nice -n 10 bash coredns/cmd/coredns/pgo.sh        # about a minute and a half
#
# Needs go and curl.
set -euo pipefail

seconds=${1:-30}
[[ $seconds =~ ^[1-9][0-9]*$ ]] || { echo "usage: pgo.sh [SECONDS]" >&2; exit 2; }
flood_qps=${FLOOD_QPS:-20000}
spray_qps=${SPRAY_QPS:-2000}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
module=$(cd "$here/../.." && pwd) # the coredns module
example=$module/example
tmp=$(mktemp -d)
pid=
load=
cleanup() {
	local p
	for p in $load $pid; do
		if kill -0 "$p" 2>/dev/null; then
			kill "$p" 2>/dev/null || true
			wait "$p" 2>/dev/null || true
		fi
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() {
	echo "pgo.sh: FAIL: $*" >&2
	[[ ! -f $tmp/coredns.log ]] || tail -20 "$tmp/coredns.log" >&2
	exit 1
}

# free_port prints a port that no TCP listener on 127.0.0.1 has, and that
# this script has not handed out already.
taken=" "
free_port() {
	local p
	for _ in $(seq 200); do
		p=$((20000 + RANDOM % 40000))
		[[ $taken != *" $p "* ]] || continue
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			taken+="$p "
			echo "$p"
			return
		fi
	done
	fail "no free port"
}

echo "pgo.sh: building CoreDNS (-pgo=off) and the load generator into $tmp"
# With the workspace (go.work) if it builds, else this module alone.
(cd "$module" && { go build -pgo=off -o "$tmp/coredns" ./cmd/coredns ||
	GOWORK=off go build -pgo=off -o "$tmp/coredns" ./cmd/coredns; }) || fail "build of CoreDNS"
(cd "$module" && { go build -o "$tmp/soakload" ./e2e/soakload ||
	GOWORK=off go build -o "$tmp/soakload" ./e2e/soakload; }) || fail "build of soakload"

# The example's Corefile on free ports, with the zone's folder as an
# absolute path and the pprof plugin added after bind.
dns_port=$(free_port)
metrics_port=$(free_port)
ready_port=$(free_port)
pprof_port=$(free_port)
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

"$tmp/coredns" -conf "$tmp/Corefile" >"$tmp/coredns.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
	curl -sf "http://127.0.0.1:$ready_port/ready" >/dev/null && break
	kill -0 "$pid" 2>/dev/null || fail "CoreDNS exited"
	sleep 0.2
done
curl -sf "http://127.0.0.1:$ready_port/ready" >/dev/null || fail "CoreDNS not ready"

# The load runs a few seconds longer than the profile on both sides.
echo "pgo.sh: load on 127.0.0.1:$dns_port: flood $flood_qps/s from 127.0.60.1, spray $spray_qps/s from 25600 /24s; profiling $seconds s"
"$tmp/soakload" -server "127.0.0.1:$dns_port" -name www.example.test. \
	-flood-qps "$flood_qps" -spray-qps "$spray_qps" -for "$((seconds + 5))s" >"$tmp/load.out" 2>&1 &
load=$!
sleep 2
curl -sf -o "$tmp/cpu.pprof" "http://127.0.0.1:$pprof_port/debug/pprof/profile?seconds=$seconds" ||
	fail "no profile from the pprof plugin"
wait "$load" || fail "soakload: $(cat "$tmp/load.out")"
load=
echo "pgo.sh: $(cat "$tmp/load.out")"
kill -0 "$pid" 2>/dev/null || fail "CoreDNS exited"
! grep -q panic "$tmp/coredns.log" || fail "CoreDNS panicked"
read -r _ _ _ _ answered _ _ _ _ _ _ spray_answered <<<"$(tr -d ';' <"$tmp/load.out")"
((answered > 0 && spray_answered > 0)) || fail "the server answered too little: $(cat "$tmp/load.out")"

# The profile must have seen the limiter at work, else it is no use.
go tool pprof -top -nodecount=100000 "$tmp/cpu.pprof" 2>/dev/null >"$tmp/top.txt" || fail "go tool pprof cannot read the profile"
grep -q 'github.com/dnsrrl/rrl.(\*RRL).DebitResponseAddr' "$tmp/top.txt" ||
	fail "the profile has no sample in the core's DebitResponseAddr"
# Written compacted (-proto merges the samples), then moved into place.
go tool pprof -proto "$tmp/cpu.pprof" >"$tmp/default.pgo" 2>/dev/null || fail "go tool pprof -proto"
mv "$tmp/default.pgo" "$here/default.pgo"
echo "pgo.sh: wrote $here/default.pgo ($(wc -c <"$here/default.pgo") bytes; $(sed -n 's/^Duration: .*Total samples = \(.*\)$/samples \1/p' "$tmp/top.txt"))"
