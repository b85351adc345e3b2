#!/usr/bin/env bash
# Runs every check of every module in the workspace: formatting, go vet,
# the tests with the race detector, each fuzz target for $FUZZTIME (5s by
# default), and the end-to-end script that drives the CoreDNS binary with
# dig or kdig. Exits non-zero on the first failure.
set -euo pipefail
cd "$(dirname "$0")"

packages=(./... ./miekgrrl/... ./coredns/... ./replay/...)

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt would change: $unformatted" >&2
	exit 1
fi

echo "== go vet"
go vet "${packages[@]}"

echo "== go test -race"
go test -race -count=1 "${packages[@]}"

echo "== fuzz targets, ${FUZZTIME:-5s} each"
for pkg in $(go list "${packages[@]}"); do
	for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		echo "-- $pkg $target"
		go test -run '^$' -fuzz "^${target}\$" -fuzztime "${FUZZTIME:-5s}" "$pkg"
	done
done

if [ -f coredns/e2e/e2e.sh ]; then
	echo "== CoreDNS end to end"
	bash coredns/e2e/e2e.sh
fi
echo "== all checks passed"
