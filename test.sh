#!/usr/bin/env bash
# Runs every check of every module in the workspace: formatting, go vet,
# staticcheck, that the modules require the same version of each other, the
# tests with the race detector, each fuzz target for $FUZZTIME (5s by
# default), and the end-to-end script that drives the CoreDNS binary with
# dig or kdig. Exits non-zero on the first failure.
set -euo pipefail
cd "$(dirname "$0")"

packages=(./... ./miekgrrl/... ./coredns/... ./replay/... ./kerneldrop/...)

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt would change: $unformatted" >&2
	exit 1
fi

echo "== go vet"
go vet "${packages[@]}"

echo "== staticcheck"
# Where go install puts it: GOBIN, else the first directory of GOPATH.
gobin=$(go env GOBIN)
gobin=${gobin:-$(go env GOPATH | cut -d: -f1)/bin}
# Without an installed one, the pinned version is built and run from the
# module proxy, so that ./test.sh works on a fresh machine as it is.
staticcheck=$(command -v staticcheck || echo "$gobin/staticcheck")
if [ -x "$staticcheck" ]; then
	"$staticcheck" "${packages[@]}"
else
	go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 "${packages[@]}"
fi

echo "== the modules require one version of each other"
# Every require of a module of this repository (github.com/dnsrrl/rrl and
# the modules below it) names the same version; replace lines are left out.
versions=$(git ls-files '*go.mod' | xargs awk '
	$1 == "module" || /=>/ { next }
	{ for (i = 1; i < NF; i++) if ($i ~ /^github\.com\/dnsrrl\/rrl(\/[^ ]+)?$/) print FILENAME ": " $i " " $(i + 1) }')
if [ "$(awk '{print $3}' <<<"$versions" | sort -u | wc -l)" -gt 1 ]; then
	echo "the modules require different versions of each other (see RELEASING.md):" >&2
	echo "$versions" >&2
	exit 1
fi

echo "== go test -race"
# A generous timeout: the race detector on a busy 2-core machine is slow.
go test -race -count=1 -timeout 30m "${packages[@]}"

# fuzz PKG TARGET fuzzes one target for $FUZZTIME. Go 1.26's fuzzing
# coordinator can fail a run with "context deadline exceeded" as the time
# runs out, having found nothing (go.dev/issue/75804, fixed in Go 1.27):
# such a run, with no failing input written, is run once more.
fuzz() {
	local out
	if out=$(go test -run '^$' -fuzz "^$2\$" -fuzztime "${FUZZTIME:-5s}" "$1" 2>&1); then
		echo "$out"
		return
	fi
	echo "$out"
	if grep -q 'context deadline exceeded' <<<"$out" && ! grep -q 'Failing input written' <<<"$out"; then
		echo "-- the fuzzing coordinator's deadline race, not a failing input: once more"
		go test -run '^$' -fuzz "^$2\$" -fuzztime "${FUZZTIME:-5s}" "$1"
		return
	fi
	return 1
}

echo "== fuzz targets, ${FUZZTIME:-5s} each"
for pkg in $(go list "${packages[@]}"); do
	for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		echo "-- $pkg $target"
		fuzz "$pkg" "$target"
	done
done

if [ -f coredns/e2e/e2e.sh ]; then
	echo "== CoreDNS end to end"
	bash coredns/e2e/e2e.sh
fi
echo "== all checks passed"
