#!/usr/bin/env bash
# Side by side: BIND 9, Knot DNS and the CoreDNS binary with rrl, each
# serving the zone sidebyside/example.test.zone on 127.0.0.1 and limiting
# responses to 5 a second per /24, under a flood of one TXT name from one
# /24, while a legitimate client in another /24 asks 10 distinct names a
# second. It prints, for each server, configuration and flood, the server's
# CPU time per flood query and its share of one core, and how many of the
# legitimate client's queries were answered.
#
#   bash coredns/e2e/sidebyside.sh            # about 3 minutes
#   QUICK=1 bash coredns/e2e/sidebyside.sh    # shorter floods: a smoke run
#
# Run it as root on a quiet machine with at least 2 cores: each server runs
# on core 1 (GOMAXPROCS=1 for CoreDNS, named -n 1 -U 1, Knot with one UDP,
# one TCP and one background worker), the load on core 0. Other load on the
# machine shows in the numbers. It is not run by ./test.sh or CI: it is
# slow, installs packages, and needs the machine to itself.
#
# The floods, each from 127.0.50.1 (127.0.50.0/24): dnsperf at 20,000 and
# 50,000 queries a second, and sidebyside/flood, one goroutine sending as
# fast as it can without reading the replies. The legitimate client,
# sidebyside/legit, asks from 127.0.60.1 (127.0.60.0/24) over UDP, once,
# waiting 2 s; a TC reply is asked again over TCP, and counts as answered
# (the table says how many were). The server's CPU time is read from
# /proc/PID/stat (utime + stime) before and after the flood, and divided by
# the queries the flood sent, also those the kernel dropped because the
# server's socket buffer was full: the table counts those too (the drops
# column of /proc/net/udp for the server's port).
#
# The configurations of CoreDNS: responses-per-second 5 alone, with
# requests-per-second 20, and with requests-per-second 20 and kernel-drop lo
# (an XDP program on lo drops the flood once its network has been refused
# for kernel-drop-after 100ms); that row is skipped, with CoreDNS's message, when the
# binary does not know kernel-drop or cannot attach to lo (not root, or
# another XDP program on lo).
#
# What it needs, installed with apt-get when missing (as root): bind9
# (named), knot (knotd) and dnsperf; and go and taskset. Where the packages
# start their services (systemd), BIND and Knot then also run on port 53;
# this script starts its own on other ports and leaves those alone. Traffic
# goes to 127.0.0.0/8 only; every server it started is stopped on exit.
set -euo pipefail

script=sidebyside
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
dir=$repo/coredns/e2e/sidebyside

# lo takes one XDP program: hold the lock that the tests and kerneldrop.sh
# take before they attach theirs.
exec 9>"${TMPDIR:-/tmp}/rrl-xdp-lo.lock"
flock 9

if [[ -n ${QUICK:-} ]]; then
	legit_secs=2
else
	legit_secs=6
fi
# The flood starts 1 s before the legitimate client and lasts until its last
# query has had its 2 s to be answered.
flood_secs=$((1 + legit_secs + 2))
flood_src=127.0.50.1
legit_src=127.0.60.1
probe_src=127.0.9.1
hz=$(getconf CLK_TCK)

say() { echo "$script: $*"; }

# Setup.
(($(nproc) >= 2)) || fail "needs at least 2 cores (the server on core 1, the load on core 0), have $(nproc)"
command -v taskset >/dev/null || fail "taskset (util-linux) is not installed"
command -v go >/dev/null || fail "go is not installed"
missing=()
command -v named >/dev/null || missing+=(bind9)
command -v knotd >/dev/null || missing+=(knot)
command -v dnsperf >/dev/null || missing+=(dnsperf)
if ((${#missing[@]})); then
	((EUID == 0)) || fail "${missing[*]} not installed, and installing needs root: apt-get install bind9 knot dnsperf"
	command -v apt-get >/dev/null || fail "${missing[*]} not installed, and there is no apt-get"
	say "installing ${missing[*]} with apt-get"
	timeout 600 apt-get update -qq >"$tmp/apt.log" 2>&1 || { cat "$tmp/apt.log"; fail "apt-get update failed"; }
	DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq --no-install-recommends bind9 knot dnsperf >>"$tmp/apt.log" 2>&1 ||
		{ tail -n 20 "$tmp/apt.log"; fail "apt-get install bind9 knot dnsperf failed"; }
	for c in named knotd dnsperf; do
		command -v "$c" >/dev/null || fail "$c is still missing after apt-get install"
	done
fi

say "building CoreDNS with rrl, the flood and the legitimate client into $tmp"
build_coredns || fail "could not build CoreDNS"
build_in_module "$tmp/flood" ./e2e/sidebyside/flood || fail "could not build sidebyside/flood"
build_in_module "$tmp/legit" ./e2e/sidebyside/legit || fail "could not build sidebyside/legit"

ports=$(free_ports 4) || { echo "$ports"; exit 1; }
read -r knot_port bind_port coredns_port metrics_port <<<"$ports"
cp "$dir/example.test.zone" "$tmp/"
fill() { sed -e "s|{{DIR}}|$tmp|g" -e "s|{{PORT}}|$2|g" -e "s|{{METRICS}}|$metrics_port|g" "$dir/$1"; }
fill named.conf "$bind_port" >"$tmp/named.conf"
fill knot.conf "$knot_port" >"$tmp/knot.conf"
# corefile NAME LINES: the Corefile with LINES added to the rrl block.
corefile() {
	local c
	c=$(fill Corefile "$coredns_port")
	echo "${c//'{{RRL}}'/$2}" >"$tmp/Corefile.$1"
}
corefile rps5 ""
corefile req20 "        requests-per-second 20"
corefile kdrop "        requests-per-second 20
        kernel-drop lo
        kernel-drop-after 100ms"
printf 'txt.example.test TXT\n' >"$tmp/flood.queries"
names=$(printf 'n%d.example.test,' $(seq 0 9))
names=${names%,}

say "named $(named -v | awk '{print $2}'), knotd $(knotd --version | awk '{print $NF}'), $(dnsperf -h 2>&1 | grep -m1 Version), $(go version | awk '{print $3}'), $(nproc) cores"
say "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

# Servers. start SERVER CONFIG starts one on core 1 into pid, its log in
# $tmp/SERVER.log, and waits until it answers (a query from probe_src, a
# /24 of its own); it returns 1 when the server exits first.
server_port() {
	case $1 in
	knot) echo "$knot_port" ;;
	bind) echo "$bind_port" ;;
	coredns) echo "$coredns_port" ;;
	esac
}
start() {
	local log=$tmp/$1.log
	case $1 in
	knot) taskset -c 1 knotd -c "$tmp/knot.conf" >"$log" 2>&1 & ;;
	bind) taskset -c 1 named -f -n 1 -U 1 -c "$tmp/named.conf" >"$log" 2>&1 & ;;
	coredns) GOMAXPROCS=1 taskset -c 1 "$tmp/coredns" -conf "$tmp/Corefile.$2" >"$log" 2>&1 & ;;
	esac
	pid=$!
	for _ in $(seq 100); do
		"$tmp/legit" -server "127.0.0.1:$(server_port "$1")" -src "$probe_src" -names n0.example.test \
			-rate 10 -for 100ms -timeout 500ms -min 1 >/dev/null 2>&1 && return 0
		kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; pid=; return 1; }
		sleep 0.2
	done
	fail_log "$1 ($2) did not answer within 20 s" "$log"
}
# stop stops the server in pid: TERM, and KILL after 10 s.
stop() {
	[[ -n $pid ]] || return 0
	kill "$pid" 2>/dev/null || true
	for _ in $(seq 50); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.2
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "$script: $pid did not stop within 10 s: KILL"
		kill -9 "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || true
	pid=
}
fail_log() {
	echo "$script: FAIL: $1"
	echo "--- $2"
	tail -n 40 "$2"
	exit 1
}
cputicks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
# sockdrops PORT: the packets the kernel dropped so far because the receive
# buffers of the UDP sockets on 127.0.0.1:PORT were full (the last column
# of /proc/net/udp).
sockdrops() { awk -v a="$(printf '0100007F:%04X' "$1")" '$2 == a { s += $NF } END { print s + 0 }' /proc/net/udp; }

# scrape prints CoreDNS's metrics page.
scrape() {
	exec 4<>"/dev/tcp/127.0.0.1/$metrics_port"
	printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&4
	cat <&4
	exec 4<&-
}

rows=()
notes=()
declare -A pcts uss answers
kdrop_skip=

# measure SERVER CONFIG LABEL FLOOD: one row. FLOOD is a rate for dnsperf
# or "goroutine".
measure() {
	local server=$1 config=$2 label=$3 flood=$4 port floodname
	port=$(server_port "$server")
	if [[ $flood == goroutine ]]; then floodname="1 goroutine"; else floodname="dnsperf $((flood / 1000))k/s"; fi
	if [[ $config == kdrop && -n $kdrop_skip ]]; then
		rows+=("| $label | $floodname | skipped | | | | |")
		return
	fi
	if ! start "$server" "$config"; then
		if [[ $config == kdrop ]] && grep -qiE 'kernel-drop|xdp|bpf' "$tmp/$server.log"; then
			kdrop_skip=$(grep -m1 -iE 'kernel-drop|xdp|bpf' "$tmp/$server.log" | sed 's/;.*//')
			say "SKIP $label: CoreDNS does not start with it: $kdrop_skip"
			notes+=("$label skipped: CoreDNS does not start with it: $kdrop_skip")
			rows+=("| $label | $floodname | skipped | | | | |")
			return
		fi
		fail_log "$server ($label) exited before answering" "$tmp/$server.log"
	fi
	sleep 0.5
	local before t0 fpid drops0
	before=$(cputicks)
	drops0=$(sockdrops "$port")
	t0=$(date +%s.%N)
	if [[ $flood == goroutine ]]; then
		timeout $((flood_secs + 10)) taskset -c 0 "$tmp/flood" -server "127.0.0.1:$port" -src "$flood_src" \
			-name txt.example.test -type TXT -for "${flood_secs}s" >"$tmp/flood.out" 2>&1 &
	else
		timeout $((flood_secs + 10)) taskset -c 0 dnsperf -s 127.0.0.1 -p "$port" -a "$flood_src" \
			-d "$tmp/flood.queries" -c 1 -T 1 -Q "$flood" -l "$flood_secs" -q 65535 -t 1 >"$tmp/flood.out" 2>&1 &
	fi
	fpid=$!
	others=$fpid
	sleep 1
	local legit=
	legit=$(timeout $((legit_secs + 10)) taskset -c 0 "$tmp/legit" -server "127.0.0.1:$port" -src "$legit_src" \
		-names "$names" -rate 10 -for "${legit_secs}s" -timeout 2s) || true
	wait "$fpid" || true
	others=
	local after t1 drops
	after=$(cputicks)
	t1=$(date +%s.%N)
	drops=$(($(sockdrops "$port") - drops0))
	local sent
	if [[ $flood == goroutine ]]; then
		sent=$(awk '/^sent/ {print $2}' "$tmp/flood.out")
	else
		sent=$(awk '/Queries sent:/ {print $3}' "$tmp/flood.out")
	fi
	[[ -n $sent && $sent -gt 0 ]] || fail_log "the flood ($floodname) against $label sent nothing" "$tmp/flood.out"
	[[ $legit == asked* ]] || fail_log "the legitimate client failed against $label: $legit" "$tmp/$server.log"
	local asked answered tcp
	read -r asked answered tcp <<<"$(awk '{print $2, $4, $6}' <<<"$legit")"
	local rate us pct
	read -r rate us pct <<<"$(awk -v t=$((after - before)) -v hz="$hz" -v n="$sent" -v s="$t0" -v e="$t1" -v f="$flood_secs" 'BEGIN {
		printf "%.0fk %.1f %.0f%%", n / f / 1000, t / hz * 1e6 / n, t / hz / (e - s) * 100 }')"
	local got="$answered/$asked"
	((tcp == 0)) || got+=" ($tcp over TCP after TC)"
	rows+=("| $label | $floodname | $rate | $us | $pct | $drops | $got |")
	pcts[$server/$config/$flood]=${pct%\%}
	uss[$server/$config/$flood]=$us
	answers[$server/$config/$flood]="$answered $asked"
	say "$label, $floodname: sent $sent ($rate q/s); server CPU $us µs per flood query, $pct of a core; $drops dropped at its socket; legitimate answered $got"
	if [[ $config == kdrop ]]; then
		local kd
		kd=$( (scrape 2>/dev/null || true) | awk '/^coredns_rrl_kernel_dropped_total/ { s += $NF } END { print s + 0 }')
		notes+=("$label, $floodname: coredns_rrl_kernel_dropped_total $kd")
	fi
	stop
}

floods=(20000 50000 goroutine)
for f in "${floods[@]}"; do measure knot - "Knot $(knotd --version | awk '{print $NF}'), mod-rrl rate-limit 5" "$f"; done
for f in "${floods[@]}"; do measure bind - "BIND $(named -v | awk '{print $2}' | cut -d- -f1), responses-per-second 5" "$f"; done
for f in "${floods[@]}"; do measure coredns rps5 "ours, responses-per-second 5" "$f"; done
for f in "${floods[@]}"; do measure coredns req20 "ours, + requests-per-second 20" "$f"; done
for f in "${floods[@]}"; do measure coredns kdrop "ours, + requests-per-second 20, kernel-drop lo (after 100ms)" "$f"; done

say "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "Floods of ${flood_secs} s from one /24; the legitimate client asked 10 names a second for ${legit_secs} s from another."
echo "CPU per flood query divides by the queries sent, also those the kernel dropped at the server's full socket."
echo
echo "| server, configuration | flood | flood sent (q/s) | server CPU per flood query (µs) | server CPU (% of one core) | dropped at the server's socket | legitimate answered |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
# With the kernel drop, does the legitimate client get every answer, and
# does the server spend the least CPU on each flood of the three servers,
# per flood query and in all (the floods' rates differ when core 0 is busy)?
# least KEY: yes when the kernel drop's value is below Knot's and BIND's.
least() {
	local -n v=$1
	awk -v k="${v[coredns/kdrop/$f]}" -v a="${v[knot/-/$f]}" -v b="${v[bind/-/$f]}" \
		'BEGIN { print (k < a && k < b) ? "least" : "not least" }'
}
for f in "${floods[@]}"; do
	[[ -n ${pcts[coredns/kdrop/$f]:-} ]] || continue
	read -r a n <<<"${answers[coredns/kdrop/$f]}"
	if [[ $f == goroutine ]]; then fn="1 goroutine"; else fn="dnsperf $((f / 1000))k/s"; fi
	notes+=("kernel-drop lo, $fn: the legitimate client got $a/$n ($( ((a == n)) && echo all || echo "not all")); server CPU per flood query ${uss[coredns/kdrop/$f]} µs against Knot's ${uss[knot/-/$f]} and BIND's ${uss[bind/-/$f]} ($(least uss)), ${pcts[coredns/kdrop/$f]}% of a core against ${pcts[knot/-/$f]}% and ${pcts[bind/-/$f]}% ($(least pcts))")
done
if ((${#notes[@]})); then
	echo
	printf -- '- %s\n' "${notes[@]}"
fi
