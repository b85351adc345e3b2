#!/usr/bin/env bash
# Counts the machine instructions one iteration of a core benchmark executes,
# at a git revision and in the working tree, with valgrind's callgrind: a
# count, unlike a time, is the same on every run whatever else the machine
# is doing. Each benchmark runs N and 2N times; the difference over N is the
# cost of one iteration, without the program's start and the benchmark's
# setup.
#
#   ./instrcmp.sh REV [BENCH-REGEXP] [N]
#
# valgrind: apt-get install valgrind
set -euo pipefail
cd "$(dirname "$0")"

rev=${1:?usage: $0 REV [BENCH-REGEXP] [N]}
bench=${2:-'DebitHot$|DebitAddrHot$|Debit10kAccounts$'}
n=${3:-200000}

source ./buildrev.sh

# instructions BINARY BENCHMARK ITERATIONS prints the instructions of a run.
# The runtime's preemption signals are off, and so is its use of RDTSCP
# (to time a contended lock), which valgrind does not know: callgrind can
# fail on either. Should valgrind still cut a run short, a run that did
# not finish its benchmark is made again, up to eight times.
instructions() {
	local out
	for _ in $(seq 8); do
		out=$(GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off valgrind --tool=callgrind --callgrind-out-file=/dev/null "$work/$1.test" \
			-test.run '^$' -test.bench "^$2\$" -test.benchtime "$3x" -test.cpu 1 2>&1) || true
		if grep -q '^PASS' <<<"$out"; then
			sed -n 's/.*Collected : //p' <<<"$out"
			return
		fi
	done
	echo "instrcmp.sh: $1 $2 was cut short eight times" >&2
	exit 1
}

printf '%-24s %12s %12s %8s\n' benchmark "$rev" "working tree" change
names=$("$work/new.test" -test.list "^Benchmark($bench)" | sed 's/^Benchmark//')
for name in $names; do
	if ! "$work/old.test" -test.list "^Benchmark$name\$" | grep -q .; then
		echo "$name: not at $rev, skipped"
		continue
	fi
	per=()
	for bin in old new; do
		one=$(instructions "$bin" "Benchmark$name" "$n")
		two=$(instructions "$bin" "Benchmark$name" $((2 * n)))
		per+=($(((two - one) / n)))
	done
	awk -v name="$name" -v old="${per[0]}" -v new="${per[1]}" \
		'BEGIN { printf "%-24s %12d %12d %+7.1f%%\n", name, old, new, 100 * (new - old) / old }'
done
