# Sourced by the scripts that run the CoreDNS binary (e2e.sh, protect.sh,
# dnsperf.sh, soak.sh, cmd/coredns/pgo.sh and the root's debitcost.sh):
# the repository's root, a temporary folder removed on exit (after
# stopping the CoreDNS started there, whose process id the caller keeps in
# pid, and the other processes listed in others), a function that builds
# the binary into it, fail, free_port and wait_for.

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d)
pid=
others=
cleanup() {
	local p
	for p in $others $pid; do
		if kill -0 "$p" 2>/dev/null; then
			kill "$p" 2>/dev/null || true
			wait "$p" 2>/dev/null || true
		fi
	done
	rm -rf "$tmp"
}
trap cleanup EXIT

# build_coredns [FLAG...] builds $tmp/coredns with go build's FLAGs: with
# the workspace (go.work) if it builds, else this module alone with its
# replace directives. build_in_module OUT PACKAGE [FLAG...] builds any
# package of the coredns module the same way.
build_coredns() { build_in_module "$tmp/coredns" ./cmd/coredns "$@"; }
build_in_module() {
	local out=$1 pkg=$2
	shift 2
	(cd "$repo/coredns" && { go build "$@" -o "$out" "$pkg" ||
		GOWORK=off go build "$@" -o "$out" "$pkg"; })
}

# wait_for WHAT COMMAND... runs COMMAND every 0.2 s until it succeeds, for
# at most 20 s, and fails naming WHAT if it never does or if the CoreDNS in
# pid exits meanwhile.
wait_for() {
	local what=$1
	shift
	for _ in $(seq 100); do
		"$@" >/dev/null 2>&1 && return
		kill -0 "$pid" 2>/dev/null || fail "CoreDNS exited before $what"
		sleep 0.2
	done
	fail "no $what after 20 s"
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

# CoreDNS sets SO_REUSEPORT, so a second server on a busy port would start
# and share the queries. free_port PORT gives PORT, or the first of
# PORT+10000, PORT+20000, ... not in use. free_ports N gives N distinct
# ports between 20000 and 59999 not in use, on one line.
in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
free_port() {
	local p=$1
	while in_use "$p"; do p=$((p + 10000)); done
	((p < 65536)) || fail "no free port near $1"
	echo "$p"
}
free_ports() {
	local p ports=" "
	for _ in $(seq 400); do
		p=$((20000 + RANDOM % 40000))
		if [[ $ports != *" $p "* ]] && ! in_use "$p"; then
			ports+="$p "
		fi
		if (($(wc -w <<<"$ports") == $1)); then
			echo $ports
			return
		fi
	done
	fail "no $1 free ports"
}
