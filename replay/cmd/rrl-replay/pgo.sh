#!/usr/bin/env bash
# Renews default.pgo, the CPU profile that `go build` of this command uses
# for profile-guided optimisation (-pgo=auto, the default, takes the
# default.pgo of the main package).
#
# The profile is that of this package's BenchmarkCommand (pgo_test.go),
# built without a profile (-pgo=off): the command's own run function, as an
# operator runs it, over a minute of generated traffic to an authoritative
# server (ordinary clients, a reflection flood, a spray of NXDOMAIN queries;
# 1,012,194 packets in a pcap file), once with responses-per-second alone
# and once with requests-per-second too (the core debits the two
# differently), each writing its text report; ITERATIONS times (default 15,
# about 30 s). The command has no profiling flag, and a benchmark of it
# profiles the same functions as the binary runs, from flag parsing to the
# report, with nothing of a server's network work to weigh (it reads
# files). (The command's own functions are named by the package's path in
# the test binary, not main as in the command, so only their calls into the
# library packages, where the time goes, guide the build.) The samples of writing the capture, which the benchmark does
# first, are left out. The capture is written under a temporary folder,
# removed on exit.
#
# Renew the profile after a change to the hot path (the core's debit, the
# replay's reading and classifying) and before a release, then commit
# default.pgo:
#
#   nice -n 10 bash replay/cmd/rrl-replay/pgo.sh      # about a minute
#
# Needs go.
set -euo pipefail

iterations=${1:-15}
[[ $iterations =~ ^[1-9][0-9]*$ ]] || { echo "usage: pgo.sh [ITERATIONS]" >&2; exit 2; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

fail() {
	echo "pgo.sh: FAIL: $*" >&2
	exit 1
}

echo "pgo.sh: profiling BenchmarkCommand, $iterations iterations (-pgo=off)"
# With the workspace (go.work) if it builds, else this module alone.
bench() {
	(cd "$here" && TMPDIR=$tmp go test -pgo=off -run '^$' -bench '^BenchmarkCommand$' \
		-benchtime "${iterations}x" -count 1 -cpuprofile "$tmp/cpu.pprof" -o "$tmp/rrl-replay.test" .)
}
bench >"$tmp/bench.out" 2>&1 || GOWORK=off bench >"$tmp/bench.out" 2>&1 ||
	fail "the benchmark: $(cat "$tmp/bench.out")"
grep '^BenchmarkCommand' "$tmp/bench.out" || fail "no benchmark result: $(cat "$tmp/bench.out")"

# The profile must have seen the limiter at work, else it is no use.
go tool pprof -top -nodecount=100000 "$tmp/rrl-replay.test" "$tmp/cpu.pprof" 2>/dev/null >"$tmp/top.txt" ||
	fail "go tool pprof cannot read the profile"
grep -q ' github\.com/dnsrrl/rrl\.' "$tmp/top.txt" || fail "the profile has no sample in the core"
# Without the capture's writing, compacted (-proto merges the samples),
# then moved into place.
go tool pprof -proto -ignore 'replay/internal/capgen' "$tmp/rrl-replay.test" "$tmp/cpu.pprof" \
	>"$tmp/default.pgo" 2>/dev/null || fail "go tool pprof -proto"
mv "$tmp/default.pgo" "$here/default.pgo"
echo "pgo.sh: wrote $here/default.pgo ($(wc -c <"$here/default.pgo") bytes; $(sed -n 's/^Duration: .*Total samples = \(.*\)$/samples \1/p' "$tmp/top.txt"))"
