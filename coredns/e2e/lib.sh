# Sourced by e2e.sh, protect.sh and dnsperf.sh: the repository's root, a
# temporary folder removed on exit (after stopping the CoreDNS started
# there, whose process id the caller keeps in pid), a function that builds
# the binary into it, fail, and free_port.

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

# fail prints why the script (named by $script, or its file) failed, with
# the log of the CoreDNS it started, and exits 1.
script=${script:-$(basename "$0" .sh)}
fail() {
	echo "$script: FAIL: $*"
	if [[ -f $tmp/coredns.log ]]; then
		echo "--- coredns log"
		cat "$tmp/coredns.log"
	fi
	exit 1
}

# The scripts listen on fixed ports. CoreDNS sets SO_REUSEPORT, so a second
# server on a busy port would start and share the queries: free_port
# PORT gives PORT, or the first of PORT+10000, PORT+20000, ... not in use.
in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
free_port() {
	local p=$1
	while in_use "$p"; do p=$((p + 10000)); done
	((p < 65536)) || fail "no free port near $1"
	echo "$p"
}
