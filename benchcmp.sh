#!/usr/bin/env bash
# Compares the core package's benchmarks at a git revision with the working
# tree: builds both test binaries, runs them in turn for many short rounds
# (alternating which runs first, so that a machine whose speed drifts
# favours neither) and summarises the two sets with benchstat.
#
#   ./benchcmp.sh REV [BENCH-REGEXP] [ROUNDS] [BENCHTIME]
#
# benchstat: go install golang.org/x/perf/cmd/benchstat@latest
set -euo pipefail
cd "$(dirname "$0")"

rev=${1:?usage: $0 REV [BENCH-REGEXP] [ROUNDS] [BENCHTIME]}
bench=${2:-'DebitHot$|AddrHot$|10k|Spray$|AllFeatures'}
rounds=${3:-10}
benchtime=${4:-1s}
benchstat=$(command -v benchstat || echo "$(go env GOPATH)/bin/benchstat")

source ./buildrev.sh

run() {
	"$work/$1.test" -test.run '^$' -test.bench "$bench" -test.benchmem \
		-test.benchtime "$benchtime" | grep '^Benchmark' >>"$work/$1.txt"
}
for i in $(seq "$rounds"); do
	if ((i % 2)); then run old; run new; else run new; run old; fi
done
"$benchstat" "old=$work/old.txt" "new=$work/new.txt"
