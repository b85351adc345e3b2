# Sourced by e2e.sh and dnsperf.sh: the repository's root, a temporary
# folder removed on exit (after stopping the CoreDNS started there, whose
# process id the caller keeps in pid), and a function that builds the
# binary into it.

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d)
pid=
cleanup() {
	if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
		kill "$pid"
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

# build_coredns builds $tmp/coredns: with the workspace (go.work) if it
# builds, else this module alone with its replace directives.
build_coredns() {
	(cd "$repo/coredns" && { go build -o "$tmp/coredns" ./cmd/coredns ||
		GOWORK=off go build -o "$tmp/coredns" ./cmd/coredns; })
}
