#!/usr/bin/env bash
# Counts the machine instructions of the core's hot debit inside the two
# binaries that ship it, as they ship (built with their default.pgo) and,
# for comparison, without the profile:
#
# - CoreDNS serves the example zone while soakload floods one name from one
#   loopback source;
# - rrl-replay replays a capture of a reflection flood at one network (20 s
#   of it, 40,000 responses of one name; gencapture -flood-only).
#
# Either way nearly every debit is of one account, held and limited (the
# hot debit of BenchmarkDebitAddrHot, without the benchmark's loop).
# Callgrind counts the instructions of (*rrl.RRL).debitAddr, where both
# enter the core, with everything it calls, and the calls; their quotient
# is one debit. (A debit of a new account, a handful in the run, costs
# more; the figure is the average.)
#
#   bash debitcost.sh            # about a minute
#
# Needs valgrind (apt-get install valgrind) and dig. Listens and sends on
# loopback only; the servers are stopped on exit.
set -euo pipefail

script=debitcost.sh
source "$(dirname "${BASH_SOURCE[0]}")/coredns/e2e/lib.sh" # repo, tmp, pid, builds, fail, free_ports
trap 'exit 130' INT TERM
command -v valgrind >/dev/null || fail "valgrind is not installed"
command -v dig >/dev/null || fail "dig is not installed"

port=$(free_ports 1)
cat >"$tmp/Corefile" <<EOF
example.test:$port {
    bind 127.0.0.1
    rrl {
        responses-per-second 5
    }
    file $repo/coredns/example/db.example.test
}
EOF

build_in_module "$tmp/coredns-pgo" ./cmd/coredns || fail "build"
build_in_module "$tmp/coredns-off" ./cmd/coredns -pgo=off || fail "build"
build_in_module "$tmp/soakload" ./e2e/soakload || fail "build"
(cd "$repo/replay" && go build -o "$tmp/replay-pgo" ./cmd/rrl-replay &&
	go build -pgo=off -o "$tmp/replay-off" ./cmd/rrl-replay &&
	go run ./internal/gencapture -flood-only -flood 1 -duration 25s -qps 2000 -o "$tmp/flood.pcap") ||
	fail "build"

# count RUN BINARY prints the instructions per debit of BINARY under RUN
# (serve or replay). A run that counted no debits is made again, up to 3
# times.
count() {
	local out
	for _ in 1 2 3; do
		rm -f "$tmp"/cg*
		"$1" "$2"
		out=$(per_debit "$tmp/cg")
		if [[ $out != none ]]; then
			echo "$out"
			return
		fi
	done
	fail "$2: no debits counted in 3 runs"
}

# callgrind runs a Go program under callgrind, writing $tmp/cg. Valgrind
# knows no RDTSCP, which the runtime uses to time a contended lock (and
# would die of), nor the signals of asynchronous preemption: both are off.
# (golang.org/x/sys/cpu, in CoreDNS, warns that it knows no rdtscp.)
callgrind=(env GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off valgrind --tool=callgrind --callgrind-out-file="$tmp/cg")

# serve BINARY runs CoreDNS under callgrind through a 10 s flood, then has
# callgrind write what it counted ($tmp/cg.1) and kills the server
# (callgrind can fail on the signal that would stop it gently).
serve() {
	"${callgrind[@]}" "$1" -conf "$tmp/Corefile" >"$tmp/log" 2>&1 &
	pid=$!
	for _ in $(seq 120); do
		if dig +short +tries=1 +time=1 @127.0.0.1 -p "$port" www.example.test A >/dev/null 2>&1; then
			break
		fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.5
	done
	if kill -0 "$pid" 2>/dev/null; then
		"$tmp/soakload" -server "127.0.0.1:$port" -name www.example.test. -flood-src 127.0.60.1 \
			-flood-qps 2000 -spray-qps 1 -spray-nets 1 -for 10s >/dev/null || true
		callgrind_control -d "$pid" >/dev/null 2>&1 || true
		mv "$tmp/cg.1" "$tmp/cg" 2>/dev/null || true
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || true
	pid=
}

# replay BINARY runs rrl-replay under callgrind over the flood.
replay() {
	"${callgrind[@]}" "$1" -q -set responses-per-second=5 "$tmp/flood.pcap" >"$tmp/log" 2>&1 || true
}

# per_debit CALLGRIND-OUT prints the inclusive cost of debitAddr (its own
# instructions, then those of every call it makes) over the calls made to
# it (its callers' lines, which come just before its own), or none.
per_debit() {
	callgrind_annotate --tree=both "$1" 2>/dev/null | awk '
		/^ *[0-9,]+ \([ 0-9.%]+\)  < / { n = 0; if (match($0, /\(([0-9,]+)x\)/)) { n = substr($0, RSTART + 1, RLENGTH - 3); gsub(",", "", n) }; pending += n; next }
		/\* .*github.com\/dnsrrl\/rrl\.\(\*RRL\)\.debitAddr \[/ { v = $1; gsub(",", "", v); total += v; calls += pending; inside = 1; next }
		inside && />   / { v = $1; gsub(",", "", v); total += v; next }
		{ inside = 0; pending = 0 }
		END { if (calls > 100) printf "%d instructions per debit, over %d debits\n", total / calls, calls; else print "none" }'
}

echo "CoreDNS with default.pgo:     $(count serve "$tmp/coredns-pgo")"
echo "CoreDNS with -pgo=off:        $(count serve "$tmp/coredns-off")"
echo "rrl-replay with default.pgo:  $(count replay "$tmp/replay-pgo")"
echo "rrl-replay with -pgo=off:     $(count replay "$tmp/replay-off")"
