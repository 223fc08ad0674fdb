#!/usr/bin/env bash
# kvferry against the raw verbs (perftest) and UCX (ucx_perftest) on the
# same two RDMA devices, in one boot of the soft-RoCE guest when this host
# has no RDMA device (issues 11 and 26). Then the figures of the issue's goals,
# their ratios, JSON and two plots.
#
#   scripts/bench-compare.sh [--quick] [--spin]
#       [--only perftest,ucx,uct,sweep,five,goals,python,policy,wait,idle,peers] [--out DIR]
#
# In the guest (two rxe devices on a veth pair), at 64 B, 2 KiB, 16 KiB,
# 64 KiB and 1 MiB: ib_write_bw and ib_write_lat (RoCE v2, -u 18, DEV1 ->
# DEV0), at 64 B ib_send_lat too (the latency anchor, issue 26),
# ucx_perftest ucp_put_bw and ucp_put_lat over RC verbs
# (UCX_TLS=rc: rc_verbs, and ud_verbs that its wireup needs;
# UCX_NET_DEVICES=<dev>:1; on rxe they fail: kept as the record), kvferry-bench
# at the same block sizes, then kvferry-bench for each goal; kvferry-bench
# runs as two processes, prefill on DEV0, decode on DEV1. uct: at 16 and
# 64 KiB, ucx_perftest put_bw at the UCT level (rc_verbs, no UD wire-up),
# ib_write_bw and kvferry-bench, all three DEV0 -> DEV0 (the path UCT's
# server allows). five: the 16 KiB goal five times, each after its own
# ib_write_bw. On the host afterwards (python) scripts/bench_python.py:
# poll_many and changed() against single poll() calls. Then
# scripts/bench_compare_report.py prints every raw figure and the ratios,
# writes DIR/results.json and draws DIR/bandwidth.svg and DIR/latency.svg
# (gnuplot). --quick: fewer iterations and rooms (a smoke run, not figures);
# --only: those parts only (policy: ib_write_bw at 16 KiB, then the 16 KiB
# goal with the default poller and with rdma.poll_idle_us 0; not in the
# default run, whose goals include both; wait: ib_write_lat and
# ib_send_lat 64 B and ib_write_bw 16 KiB, then the 64 B latency goal and the 16 KiB goal each
# spinning and with --wait, with the default poller and rdma.poll_idle_us 0;
# idle: the 64 B goal with rdma.poll_idle_us set per side, see idle_part;
# peers: kvferry against Mooncake's transfer engine and NIXL, issue 39, see
# peers_part; not in the default run: it needs .venv-peers, which
# scripts/bench_peers_venv.sh makes from bench/requirements-peers.txt).
# The goals run with kvferry-bench --wait (the schedulers sleep in
# kvf_engine_wait instead of spinning: better on each, docs/performance.md);
# lat64-spin and sglang-spin are the latency and SGLang goals spinning.
# --spin: every goal spins.
#
# Every command's log in DIR/raw starts with the command ("$ ...").
#
# Environment: KVF_BUILD_DIR (default build; its python/ is the extension
# the python step imports), KVF_VM_TIMEOUT (default 1500).
# Needs the packages of KVF_PKGS_BENCH (scripts/lib.sh) besides perftest.
set -euo pipefail
KVF_PROG=bench-compare
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$KVF_REPO"

quick=0 inner=0 only='' gwait=(--wait)
out=${KVF_BUILD_DIR:-build}/bench-compare
while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1; shift ;;
	--out) out=${2:?}; shift 2 ;;
	--only) only=${2:?}; shift 2 ;;
	--inner) inner=1; shift ;;
	--spin) gwait=(); shift ;;
	-h|--help) sed -n '2,/^set -euo/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) kvf_die "unknown argument: $1 (see --help)" ;;
	esac
done
case $out in /*) ;; *) out=$KVF_REPO/$out ;; esac
build=${KVF_BUILD_DIR:-build}
case $build in /*) ;; *) build=$KVF_REPO/$build ;; esac
SIZES=(64 2048 16384 65536 1048576)

# iterations of perftest / ucx_perftest at a size (TCG guests are slow)
iters() {
	local n
	case $1 in 64|2048) n=5000 ;; 16384) n=2000 ;; 65536) n=1000 ;; *) n=100 ;; esac
	[ $quick = 1 ] && n=$((n / 10))
	echo $n
}
lat_iters() { if [ "$1" = 1048576 ] || [ $quick = 1 ]; then echo 100; else echo 1000; fi; }

port=18900
listen_wait() {
	local i
	for ((i = 0; i < 300; i++)); do
		ss -Hltn "sport = :$1" 2> /dev/null | grep -q . && return 0
		sleep 0.1
	done
	return 1
}

# run_logged LOG CMD...: CMD with its output in LOG, after a line with
# CMD itself, so that raw/ says what was run and not only what it printed
run_logged() {
	local log=$1
	shift
	printf '$ %s\n' "$*" > "$log"
	"$@" >> "$log" 2>&1
}

# perftest [--loop] TOOL SIZE ITERS [ARGS]: server on DEV0, client on DEV1
# (the client writes); the client's output in raw/TOOL-SIZE.log. --loop:
# the client on DEV0 too (rxe loopback, the only path UCT's put_bw takes,
# see uct), in raw/TOOL-loop-SIZE.log
perftest() {
	local cdev=$DEV1 cx=$X1 tag=
	if [ "$1" = --loop ]; then cdev=$DEV0 cx=$X0 tag=-loop; shift; fi
	local tool=$1 s=$2 n=$3 log=$out/raw/$1$tag${PT_TAG:-}-$2.log
	shift 3
	port=$((port + 1))
	# each side's CPU seconds (user, sys) in LOG.cpu / LOG.server.cpu: the
	# report's CPU per GB against kvferry's
	# shellcheck disable=SC2086
	run_logged "$log.server" /usr/bin/time -f 'cpu_s user=%U sys=%S' -o "$log.server.cpu" \
		timeout -k 5 180 "$tool" -d "$DEV0" $X0 -u 18 -p $port -F -s "$s" -n "$n" "$@" &
	listen_wait $port || kvf_log "$tool server on port $port did not listen"
	# shellcheck disable=SC2086
	run_logged "$log" /usr/bin/time -f 'cpu_s user=%U sys=%S' -o "$log.cpu" \
		timeout -k 5 180 "$tool" -d "$cdev" $cx -u 18 -p $port -F -s "$s" -n "$n" "$@" \
		"$ADDR0" || kvf_log "$tool -s $s failed (raw/${log##*/})"
	wait || true
}

# ucx TEST SIZE ITERS: ucx_perftest over RC verbs, same direction. The
# transports to try, in order, until one gives a figure (then that one for
# the rest; one that failed is not tried again): rc (rc_verbs, with
# ud_verbs for its wireup) on the RoCE v2 GID perftest uses; rc_verbs with
# tcp for the wireup. Each attempt's output is kept (raw/ucx-TEST-SIZE.log.N).
UCX_CONFIGS=("UCX_TLS=rc" "UCX_TLS=rc_verbs,tcp")
ucx_ok='' ucx_bad=,
ucx() {
	local t=$1 s=$2 n=$3 log=$out/raw/ucx-$1-$2.log k cfgs
	cfgs=("${UCX_CONFIGS[@]}")
	[ -n "$ucx_ok" ] && cfgs=("$ucx_ok")
	for k in "${!cfgs[@]}"; do
		[[ $ucx_bad == *,${cfgs[$k]},* ]] && continue
		port=$((port + 1))
		# shellcheck disable=SC2086
		run_logged "$log.$k.server" env ${cfgs[$k]} UCX_IB_GID_INDEX=${KVF_RXE_GID0:-auto} \
			UCX_NET_DEVICES=$DEV0:1 timeout -k 5 90 ucx_perftest -p $port &
		listen_wait $port || kvf_log "ucx_perftest server on port $port did not listen"
		# shellcheck disable=SC2086
		run_logged "$log.$k" env ${cfgs[$k]} UCX_IB_GID_INDEX=${KVF_RXE_GID1:-auto} \
			UCX_NET_DEVICES=$DEV1:1 timeout -k 5 90 ucx_perftest "$ADDR0" -p $port -t "$t" \
			-s "$s" -n "$n" || kvf_log "ucx_perftest $t -s $s (${cfgs[$k]}) failed"
		wait || true
		if grep -q '^Final:' "$log.$k"; then
			ucx_ok=${cfgs[$k]}
			{ echo "config: $ucx_ok"; cat "$log.$k"; } > "$log"
			return 0
		fi
		ucx_bad+=${cfgs[$k]},
	done
	cat "$log".* > "$log" 2> /dev/null || echo "no UCX transport left to try" > "$log"
}

# uct SIZE ITERS: ucx_perftest at the UCT level, put_bw over rc_verbs,
# which needs no UD wire-up (UCP's does, and aborts on rxe: ucx). The
# server takes the test, transport and device from the client (no -t/-d
# there) and opens the client's device, so the traffic is DEV0 -> DEV0.
# -D zcopy: rc_verbs on rxe puts short <= 80 B and bcopy <= 8256 B
# (ucx_info -d; the default, short, fails at 16 KiB with "Message size
# (16384) is larger than max supported (80)"), and zero copy is what
# kvferry's writes are. -w: a tenth of -n warm-up (the default 10,000 is
# minutes under TCG). Server log raw/uct-put_bw-SIZE.log.server.
uct() {
	local s=$1 n=$2 log=$out/raw/uct-put_bw-$1.log
	port=$((port + 1))
	run_logged "$log.server" env UCX_IB_GID_INDEX="${KVF_RXE_GID0:-auto}" \
		timeout -k 5 180 ucx_perftest -p $port &
	listen_wait $port || kvf_log "ucx_perftest (UCT) server on port $port did not listen"
	run_logged "$log" env UCX_IB_GID_INDEX="${KVF_RXE_GID0:-auto}" timeout -k 5 180 \
		ucx_perftest "$ADDR0" -p $port -t put_bw -x rc_verbs -d "$DEV0:1" -D zcopy \
		-s "$s" -n "$n" -w $((n / 10)) || kvf_log "ucx_perftest put_bw -s $s failed (raw/${log##*/})"
	wait || true
}

conf() { # FILE prefill|decode PORT DECODE_DEV DECODE_ADDR
	local side
	if [ "$2" = prefill ]; then
		side="device = \"$DEV0\"; listen_addr = \"$ADDR0\"; listen_port = $3;"
	else
		side="device = \"$4\"; peer = \"$ADDR0:$3\"; source_addr = \"$5\";"
	fi
	cat > "$1" <<CONF
log: { level = "info"; };
engine: { id = "bench-$2"; max_blocks_per_room = 4096; summary_interval_s = 0; };
deadlines: { bootstrap_s = 120; inflight_s = 120; receiver_waiting_s = 120; quiesce_s = 10; };
rdma: { $side sq_depth = 256; rq_depth = 64; signal_every = 16; };
CONF
}

# kvf NAME [--loop] ARGS: kvferry-bench, two processes; the decode's JSON in
# raw/kvf-NAME.json, its per-room latencies in raw/kvf-NAME.lat. --loop:
# the decode on DEV0 too (UCT's path, see uct)
kvf() {
	local name=$1 r=$out/raw/kvf-$1 stamps=/tmp/kvf-stamps-$1 i pa=() da=()
	local ddev=$DEV1 daddr=$ADDR1
	shift
	# --prefill-set to the prefill only, --decode-set to the decode only
	# (either opens that side in the process it is given to)
	while [ $# -gt 0 ]; do
		case $1 in
		--prefill-set) pa+=("$1" "$2"); shift 2 ;;
		--decode-set) da+=("$1" "$2"); shift 2 ;;
		--loop) ddev=$DEV0 daddr=$ADDR0; shift ;;
		*) pa+=("$1"); da+=("$1"); shift ;;
		esac
	done
	port=$((port + 1))
	conf "$r.p.conf" prefill $port "$ddev" "$daddr"
	conf "$r.d.conf" decode $port "$ddev" "$daddr"
	timeout -k 5 600 "$build/tools/kvferry-bench" --prefill-config "$r.p.conf" --json \
		--stamps "$stamps" --timeout 580 "${pa[@]}" > "$r.prefill.json" 2> "$r.prefill.err" &
	# rdma_cm listens in the RDMA port space (ss does not show it): the
	# prefill says when it listens
	for ((i = 0; i < 600; i++)); do
		grep -q 'listening on' "$r.prefill.err" 2> /dev/null && break
		sleep 0.1
	done
	timeout -k 5 600 "$build/tools/kvferry-bench" --decode-config "$r.d.conf" --json \
		--stamps "$stamps" --latencies "$r.lat" --timeout 580 "${da[@]}" > "$r.json" 2> "$r.err" ||
		kvf_log "kvferry-bench $name failed: $(tail -n 3 "$r.err")"
	wait || kvf_log "kvferry-bench prefill ($name) failed: $(tail -n 3 "$r.prefill.err")"
	rm -f "$stamps"
	kvf_log "kvferry $name: $(cat "$r.json")"
}

# rooms for a sweep point: about 64 MiB (16 MiB quick) of 8 blocks a room,
# 500 at most
sweep_rooms() {
	local r=$(((quick ? 16 : 64) * 1048576 / (8 * $1)))
	[ $r -lt 16 ] && r=16
	[ $r -gt 500 ] && r=500
	echo $r
}

# rooms of the uct step's kvferry run at a block size: about 64 MiB
# (16 MiB quick) of 64 blocks a room, 4 at least (UCT's put_bw moves
# iters' count: 32 and 64 MiB, quick 3.2 and 6.4 MiB)
uct_rooms() {
	local r=$(((quick ? 16 : 64) * 1048576 / (64 * $1)))
	[ $r -lt 4 ] && r=4
	echo $r
}

# step NAME: whether --only (default: all) names it
step() { [ -z "$only" ] || [[ ,$only, == *,$1,* ]]; }
# guest_steps: whether a step that runs in the guest is on (python alone
# needs no boot)
guest_steps() { [ -z "$only" ] || [[ ,$only, =~ ,(perftest|ucx|uct|sweep|five|goals|policy|wait|idle|peers), ]]; }

inner_run() {
	local s r n
	DEV0=$KVF_RXE_DEV0 DEV1=${KVF_RXE_DEV1:?bench-compare needs --devices 2}
	ADDR0=$KVF_RXE_ADDR0 ADDR1=$KVF_RXE_ADDR1
	X0=${KVF_RXE_GID0:+-x $KVF_RXE_GID0} X1=${KVF_RXE_GID1:+-x $KVF_RXE_GID1}
	mkdir -p "$out/raw"
	ulimit -l unlimited 2> /dev/null || true
	{
		echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ)"
		echo "devices $DEV0 $ADDR0 $DEV1 $ADDR1"
		echo "kernel $(uname -r) cpus $(nproc)"
		echo "quick $quick"
	} > "$out/raw/env.txt"
	for s in "${SIZES[@]}"; do
		step perftest || continue
		kvf_log "size $s: ib_write_bw, ib_write_lat"
		perftest ib_write_bw "$s" "$(iters "$s")" --report_gbits
		perftest ib_write_lat "$s" "$(lat_iters "$s")"
		if [ "$s" = 64 ]; then send_lat; fi
	done
	for s in "${SIZES[@]}"; do
		step ucx || continue
		kvf_log "size $s: ucx_perftest put bandwidth and latency"
		ucx ucp_put_bw "$s" "$(iters "$s")"
		ucx ucp_put_lat "$s" "$(lat_iters "$s")"
	done
	if step uct; then uct_part; fi
	for s in "${SIZES[@]}"; do
		step sweep || continue
		r=$(sweep_rooms "$s")
		kvf "sweep-$s" --rooms "$r" --buffers 8 --blocks-per-room 1 --window 16 \
			--block-size "$s" --layout contiguous --verify-rooms 8 --seed 3
	done
	if [[ ,$only, == *,policy,* ]]; then
		perftest ib_write_bw 16384 "$(iters 16384)" --report_gbits
		kvf goal-16k --rooms 80 --buffers 64 --blocks-per-room 2 --block-size 16384 \
			--layout rotated --verify-rooms 8 --seed 5
		policy_16k 80
	fi
	[[ ,$only, == *,wait,* ]] && wait_part
	[[ ,$only, == *,idle,* ]] && idle_part
	[[ ,$only, == *,peers,* ]] && peers_part
	if step five; then five_16k; fi
	step goals || return 0
	n=$((quick ? 30 : 80))
	kvf goal-16k --rooms $n --buffers 64 --blocks-per-room 2 --block-size 16384 \
		--layout rotated --verify-rooms 8 --seed 5 "${gwait[@]+"${gwait[@]}"}"
	kvf goal-sglang --rooms $n --buffers 64 --blocks-per-room 16 --block-size 2048 \
		--layout sglang --verify-rooms 8 --seed 6 "${gwait[@]+"${gwait[@]}"}"
	kvf goal-sglang-qp1 --rooms $n --buffers 64 --blocks-per-room 16 --block-size 2048 \
		--layout sglang --verify-rooms 8 --seed 6 "${gwait[@]+"${gwait[@]}"}" \
		--decode-set rdma.qps_per_peer=1
	kvf sglang-spin --rooms $n --buffers 64 --blocks-per-room 16 --block-size 2048 \
		--layout sglang --verify-rooms 8 --seed 6
	kvf goal-lat64 --rooms $((quick ? 200 : 1000)) --buffers 1 --blocks-per-room 1 \
		--block-size 64 --window 1 --verify-rooms 20 --seed 7 "${gwait[@]+"${gwait[@]}"}"
	kvf lat64-spin --rooms $((quick ? 200 : 1000)) --buffers 1 --blocks-per-room 1 \
		--block-size 64 --window 1 --verify-rooms 20 --seed 7
	# who gets the cores: the same rooms with pollers that sleep at once
	# (rdma.poll_idle_us 0), then with the bench's loop yielding when idle
	kvf lat64-sleep --rooms $((quick ? 200 : 1000)) --buffers 1 --blocks-per-room 1 \
		--block-size 64 --window 1 --verify-rooms 20 --seed 8 \
		--prefill-set rdma.poll_idle_us=0 --decode-set rdma.poll_idle_us=0
	kvf lat64-yield --rooms $((quick ? 200 : 1000)) --buffers 1 --blocks-per-room 1 \
		--block-size 64 --window 1 --verify-rooms 20 --seed 9 --idle-yield
	kvf 16k-yield --rooms $n --buffers 64 --blocks-per-room 2 --block-size 16384 \
		--layout rotated --verify-rooms 8 --seed 5 --idle-yield
	policy_16k "$n"
}

# --only idle: the 64 B goal (waiting, as goal-lat64) with the pollers'
# spin before they sleep (rdma.poll_idle_us) set per side, prefill/decode:
# 1000/1000 (the default), 0/1000, 0/200, 0/50, 0/0, beside ib_send_lat
# spinning and sleeping (-e), in raw/kvf-lat64-idle-P-D.json. On two vCPUs
# every spinning poller is a thread the others wait behind.
idle_part() {
	local m=$((quick ? 200 : 1000)) pd
	local lat=(--buffers 1 --blocks-per-room 1 --block-size 64 --window 1 --verify-rooms 20 --seed 7)
	send_lat
	for pd in 1000/1000 0/1000 0/200 0/50 0/0; do
		kvf "lat64-idle-${pd%/*}-${pd#*/}" --rooms $m "${lat[@]}" --wait \
			--prefill-set rdma.poll_idle_us="${pd%/*}" --decode-set rdma.poll_idle_us="${pd#*/}"
	done
}

# --only wait: spinning against waiting (kvferry-bench --wait), with the
# default poller and with pollers that sleep at once, on the 64 B latency
# goal and the 16 KiB goal, with their perftest references in this boot.
wait_part() {
	local n=$((quick ? 30 : 80)) m=$((quick ? 200 : 500))
	local lat=(--buffers 1 --blocks-per-room 1 --block-size 64 --window 1 --verify-rooms 20 --seed 7)
	local bw=(--buffers 64 --blocks-per-room 2 --block-size 16384 --layout rotated --verify-rooms 8 --seed 5)
	local sleep0=(--prefill-set rdma.poll_idle_us=0 --decode-set rdma.poll_idle_us=0)
	perftest ib_write_lat 64 "$(lat_iters 64)"
	send_lat
	perftest ib_write_bw 16384 "$(iters 16384)" --report_gbits
	kvf goal-lat64 --rooms $m "${lat[@]}"
	kvf lat64-wait --rooms $m "${lat[@]}" --wait
	kvf lat64-sleep --rooms $m "${lat[@]}" "${sleep0[@]}"
	kvf lat64-sleep-wait --rooms $m "${lat[@]}" "${sleep0[@]}" --wait
	kvf goal-16k --rooms $n "${bw[@]}"
	kvf 16k-wait --rooms $n "${bw[@]}" --wait
	kvf 16k-sleep --rooms $n "${bw[@]}" "${sleep0[@]}"
	kvf 16k-sleep-wait --rooms $n "${bw[@]}" "${sleep0[@]}" --wait
}

# send_lat: the 64 B latency anchor, ib_send_lat DEV1 -> DEV0 (raw/
# ib_send_lat-64.log). A kvferry room ends with a receive completion for
# the immediate; ib_write_lat polls the landing memory instead, ib_send_lat
# takes a receive completion per message (perftest 4.5 has no
# --write_with_imm). -I 0: kvferry posts nothing inline (src/rdma sets no
# IBV_SEND_INLINE, asks no max_inline_data), so neither does the anchor
# (perftest turns inline off on rxe by itself, not on hardware).
# Then the same with -e (raw/ib_send_lat-events-64.log): perftest sleeping
# on CQ events, as a waiting kvferry room's poller does; shown beside the
# goal (the goal's anchor stays the spinning one), for what one sleeping
# wakeup costs on this machine.
send_lat() {
	perftest ib_send_lat 64 "$(lat_iters 64)" -I 0
	PT_TAG=-events perftest ib_send_lat 64 "$(lat_iters 64)" -I 0 -e
}

# uct step: at 16 and 64 KiB, UCT put_bw, ib_write_bw and kvferry-bench on
# one path, DEV0 -> DEV0 (the only one UCT's server allows, see uct), for
# the ratio kvferry / UCX with perftest beside it. kvferry: contiguous
# blocks, 8 buffers x 8 blocks a room, waiting like the goals (--spin:
# spinning).
uct_part() {
	local s
	for s in 16384 65536; do
		kvf_log "size $s, $DEV0 -> $DEV0: ucx_perftest put_bw (UCT), ib_write_bw, kvferry"
		uct "$s" "$(iters "$s")"
		perftest --loop ib_write_bw "$s" "$(iters "$s")" --report_gbits
		kvf "uct-$s" --loop --rooms "$(uct_rooms "$s")" --buffers 8 --blocks-per-room 8 \
			--window 8 --block-size "$s" --layout contiguous --verify-rooms 4 --seed 11 \
			"${gwait[@]+"${gwait[@]}"}"
		# and with one QP (see five_16k)
		kvf "uct-$s-qp1" --loop --rooms "$(uct_rooms "$s")" --buffers 8 --blocks-per-room 8 \
			--window 8 --block-size "$s" --layout contiguous --verify-rooms 4 --seed 11 \
			"${gwait[@]+"${gwait[@]}"}" --decode-set rdma.qps_per_peer=1
	done
}

# python_part (host, after the guest, not under qemu's load): poll_many
# over 1,000 rooms and changed() over 1,000 watched rooms, against 1,000
# single poll() calls (scripts/bench_python.py) with the extension in
# $build/python, built here (that target only: the build log in
# raw/python.build); its figures in raw/python.log, its JSON line in
# raw/python.json, its stderr in raw/python.err
python_part() {
	local ext log=$out/raw/python cmd
	mkdir -p "$out/raw"
	ext=_kvferry$("$KVF_PY" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
	meson compile -C "$build" "${ext%.so}" > "$log.build" 2>&1 ||
		{ kvf_log "building the Python extension failed (raw/python.build)"; return 0; }
	cmd=(env PYTHONPATH="$build/python" "$KVF_PY" "$KVF_REPO/scripts/bench_python.py")
	printf '$ %s\n' "${cmd[*]}" > "$log.log"
	"${cmd[@]}" >> "$log.log" 2> "$log.err" ||
		kvf_log "bench_python.py failed: $(tail -n 2 "$log.err")"
	grep '^{' "$log.log" | tail -n 1 > "$log.json" || true
}

# five: the 16 KiB goal five times, each right after its own ib_write_bw
# 16 KiB (issue 26 asks for the goal in five runs of five: ib_write_bw
# itself swings 0.18-0.32 Gb/s between runs here, so each ratio is against
# the reference taken just before it), with two QPs per peer (the default
# rdma.qps_per_peer) and, beside it, with one (rdma.qps_per_peer 1, the
# default before 2026-12-06), in raw/ib_write_bw-runN-16384.log,
# raw/kvf-goal-16k-runN.json and raw/kvf-goal-16k-qp1-runN.json.
five_16k() {
	local i n=$((quick ? 30 : 80))
	local bw=(--rooms "$n" --buffers 64 --blocks-per-room 2 --block-size 16384 --layout rotated
		--verify-rooms 8 "${gwait[@]+"${gwait[@]}"}")
	for i in 1 2 3 4 5; do
		kvf_log "16 KiB goal, run $i of 5"
		PT_TAG=-run$i perftest ib_write_bw 16384 "$(iters 16384)" --report_gbits
		kvf "goal-16k-run$i" "${bw[@]}" --seed $((10 + i))
		kvf "goal-16k-qp1-run$i" "${bw[@]}" --seed $((10 + i)) --decode-set rdma.qps_per_peer=1
	done
}

# --only peers (issue 39): kvferry, Mooncake's transfer engine and NIXL (UCX
# backend, host memory), each as two processes, prefill on DEV0 writing into
# the decode on DEV1, moving the same rooms (scripts/bench_peers.py drives
# the peers the way SGLang 0.5.18's backends do, and takes kvferry-bench's
# block lists). Layouts (PEER_LAYOUTS): c64k contiguous 64 KiB blocks, 8
# buffers x 8 blocks a room; r16k 16 KiB blocks, 8 x 8, rotated (five rounds
# of the three, interleaved); sgl1 and sgl16 SGLang's fragmented layout at
# page size 1 (2 KiB pages, 64 a request) and 16 (32 KiB pages, 4 a request),
# 16 buffers, the same bytes a room; lat64 one 64 B block a room, one room
# in flight (latency). kvferry waits like the goals (--wait). Logs and JSON in
# raw/peer-PEER-LAYOUT[-runN].{json,prefill.json,decode.log,prefill.log}
# and raw/kvf-peers-LAYOUT[-runN].json. NIXL's UCX settings: the first of
# PEER_UCX that gives a figure is kept (raw/peer-nixl-ucx.txt).
# KVF_PEERS_LAYOUTS=a,b: those layouts only; KVF_PEERS_TIMEOUT: each peer
# process's limit (default 300 s).
PEER_LAYOUTS=(
	"c64k --buffers 8 --blocks-per-room 8 --block-size 65536 --layout contiguous --window 8"
	"r16k --buffers 8 --blocks-per-room 8 --block-size 16384 --layout rotated --window 8"
	"sgl1 --buffers 16 --blocks-per-room 64 --block-size 2048 --layout sglang --window 8"
	"sgl16 --buffers 16 --blocks-per-room 4 --block-size 32768 --layout sglang --window 8"
	"lat64 --buffers 1 --blocks-per-room 1 --block-size 64 --layout contiguous --window 1"
)
PEER_UCX=("UCX_TLS=rc" "UCX_TLS=rc_verbs,ud_verbs" "UCX_TLS=tcp")
peer_ucx=''
# peer_rooms LAYOUT: about 64 MiB a bandwidth run (16 MiB quick), 500
# rooms at 64 B (100 quick)
peer_rooms() {
	local mib=$((quick ? 16 : 64))
	case $1 in
	c64k) echo $((mib / 4)) ;;
	r16k) echo $((mib)) ;;
	sgl1|sgl16) echo $((mib / 2)) ;;
	lat64) echo $((quick ? 100 : 500)) ;;
	esac
}

# peer PEER TAG ARGS: bench_peers.py, decode on DEV1 then prefill on DEV0;
# returns nonzero when the decode wrote no JSON
peer() {
	local p=$1 r=$out/raw/peer-$1-$2 e0=() e1=() py=${KVF_PEERS_PY:?}
	shift 2
	port=$((port + 1))
	if [ "$p" = mooncake ]; then
		e0=(MC_GID_INDEX="${KVF_RXE_GID0:-0}") e1=(MC_GID_INDEX="${KVF_RXE_GID1:-0}")
		# peer_xenv: a variant's settings (mooncake's environment)
		# shellcheck disable=SC2206
		e0+=(${peer_xenv:-}) e1+=(${peer_xenv:-})
	else
		# shellcheck disable=SC2206
		e0=($peer_ucx UCX_NET_DEVICES="$DEV0:1" UCX_IB_GID_INDEX="${KVF_RXE_GID0:-auto}")
		# shellcheck disable=SC2206
		e1=($peer_ucx UCX_NET_DEVICES="$DEV1:1" UCX_IB_GID_INDEX="${KVF_RXE_GID1:-auto}")
		[[ $peer_ucx == *tcp* ]] && e0=("$peer_ucx") e1=("$peer_ucx")
	fi
	rm -f "$r.json" "$r.prefill.json"
	run_logged "$r.decode.log" /usr/bin/time -f 'cpu_s user=%U sys=%S' -o "$r.decode.cpu" \
		env "${e1[@]}" timeout -k 5 "${KVF_PEERS_TIMEOUT:-300}" "$py" "$KVF_REPO/scripts/bench_peers.py" --peer "$p" \
		--role decode --dev "$DEV1" --addr "$ADDR1" --ctrl $port --out "$r.json" "$@" &
	run_logged "$r.prefill.log" /usr/bin/time -f 'cpu_s user=%U sys=%S' -o "$r.prefill.cpu" \
		env "${e0[@]}" timeout -k 5 "${KVF_PEERS_TIMEOUT:-300}" "$py" "$KVF_REPO/scripts/bench_peers.py" --peer "$p" \
		--role prefill --dev "$DEV0" --addr "$ADDR0" --ctrl $port --out "$r.prefill.json" "$@" ||
		kvf_log "$p prefill ($r) failed: $(tail -n 2 "$r.prefill.log")"
	wait || kvf_log "$p decode ($r) failed: $(tail -n 2 "$r.decode.log")"
	kvf_log "$p ${r##*/}: $(cat "$r.json" 2> /dev/null || echo no figure)"
	[ -s "$r.json" ]
}

# nixl_peer TAG ARGS: NIXL with the kept UCX setting, or the first of
# PEER_UCX that gives a figure (each try's logs kept as TAG.tryN)
nixl_peer() {
	local tag=$1 k f
	shift
	if [ -n "$peer_ucx" ]; then peer nixl "$tag" "$@" || true; return 0; fi
	for k in "${!PEER_UCX[@]}"; do
		peer_ucx=${PEER_UCX[$k]}
		if peer nixl "$tag" "$@"; then
			echo "$peer_ucx" > "$out/raw/peer-nixl-ucx.txt"
			return 0
		fi
		for f in "$out/raw/peer-nixl-$tag".*.log; do cp "$f" "${f%.log}.try$k.log"; done
	done
	peer_ucx=${PEER_UCX[0]}
	echo "none of: ${PEER_UCX[*]}" > "$out/raw/peer-nixl-ucx.txt"
}

peers_part() {
	local l name args i seed=20 rounds
	for l in "${PEER_LAYOUTS[@]}"; do
		name=${l%% *} args=${l#* } rounds=1
		# KVF_PEERS_LAYOUTS: some layouts only (a comma list of names)
		[ -n "${KVF_PEERS_LAYOUTS:-}" ] && [[ ,$KVF_PEERS_LAYOUTS, != *,$name,* ]] && continue
		[ "$name" = r16k ] && rounds=5
		for ((i = 1; i <= rounds; i++)); do
			local tag=$name
			[ $rounds -gt 1 ] && tag=$name-run$i
			seed=$((seed + 1))
			kvf_log "peers: $tag ($args), round $i of $rounds"
			# shellcheck disable=SC2086
			kvf "peers-$tag" --rooms "$(peer_rooms "$name")" $args --verify-rooms 4 \
				--seed $seed "${gwait[@]+"${gwait[@]}"}"
			# shellcheck disable=SC2086
			peer mooncake "$tag" --rooms "$(peer_rooms "$name")" $args --seed $seed || true
			# shellcheck disable=SC2086
			nixl_peer "$tag" --rooms "$(peer_rooms "$name")" $args --seed $seed
		done
	done
	peer_variants
}

# Beside the race, not judged: the peers with less of their threads
# spinning (on two vCPUs a spinning thread takes the CPU that rxe's copies
# need): Mooncake with one worker thread per device context instead of its
# default (MC_WORKERS_PER_CTX=1), NIXL without its progress thread (the
# driver's calls progress UCX), and at 64 B NIXL's decode polling without
# sleeping between polls and kvferry spinning; on r16k (one round) and
# lat64, in raw/peer-PEER-LAYOUT-VARIANT.* and raw/kvf-peers-lat64-spin.*
peer_variants() {
	local l name args
	for l in "${PEER_LAYOUTS[@]}"; do
		name=${l%% *} args=${l#* }
		[ -n "${KVF_PEERS_LAYOUTS:-}" ] && [[ ,$KVF_PEERS_LAYOUTS, != *,$name,* ]] && continue
		case $name in r16k|lat64) ;; *) continue ;; esac
		kvf_log "peers: $name, the peers' variants"
		# shellcheck disable=SC2086
		peer_xenv=MC_WORKERS_PER_CTX=1 peer mooncake "$name-w1" --rooms "$(peer_rooms "$name")" \
			$args --seed 40 || true
		# shellcheck disable=SC2086
		nixl_peer "$name-noprog" --rooms "$(peer_rooms "$name")" $args --seed 41 --no-prog-thread
		# shellcheck disable=SC2086
		[ "$name" = lat64 ] || continue
		# shellcheck disable=SC2086
		nixl_peer "$name-spin" --rooms "$(peer_rooms "$name")" $args --seed 42 --poll-us 0
		# and kvferry spinning (no --wait: the scheduler never sleeps, so
		# no wakeup between the poller and the scheduler)
		# shellcheck disable=SC2086
		kvf "peers-$name-spin" --rooms "$(peer_rooms "$name")" $args --verify-rooms 4 --seed 43
	done
	return 0
}

# The 16 KiB goal with pollers that sleep at once (rdma.poll_idle_us 0);
# --only policy: with ib_write_bw at 16 KiB and the default first.
policy_16k() {
	kvf 16k-sleep --rooms "$1" --buffers 64 --blocks-per-room 2 --block-size 16384 \
		--layout rotated --verify-rooms 8 --seed 5 \
		--prefill-set rdma.poll_idle_us=0 --decode-set rdma.poll_idle_us=0
}

if [ $inner = 1 ]; then
	inner_run
	exit 0
fi

# ---- host side -------------------------------------------------------------
kvf_need_pkgs "${KVF_PKGS_BUILD[@]}" "${KVF_PKGS_RDMA[@]}" "${KVF_PKGS_BENCH[@]}"
[ -f "$build/build.ninja" ] || meson setup "$build" > /dev/null || kvf_die "meson setup $build failed"
meson compile -C "$build" kvferry-bench > /dev/null || kvf_die "building kvferry-bench failed"
case $out/ in "$KVF_REPO"/*) ;; *) kvf_die "--out must be inside the repository (the guest writes it)" ;; esac
rm -rf "$out"
mkdir -p "$out"
if kvf_host_has_rdma; then
	kvf_die "a host RDMA device: run the inner part yourself (KVF_RXE_DEV0/1, ADDR0/1, GID0/1; --inner)"
fi
share=() qarg=()
[ $quick = 1 ] && qarg=(--quick)
[ -n "$only" ] && qarg+=(--only "$only")
[ ${#gwait[@]} = 0 ] && qarg+=(--spin)
case $build/ in "$KVF_REPO"/*) ;; *) share=(--share "$build") ;; esac
if [[ ,$only, == *,peers,* ]]; then
	KVF_PEERS_PY=$("$KVF_REPO/scripts/bench_peers_venv.sh") || kvf_die "the peers' venv failed"
	case $KVF_PEERS_PY in "$KVF_REPO"/*) ;; *) kvf_die "KVF_PEERS_VENV must be inside the repository (the guest sees it there)" ;; esac
	export KVF_PEERS_PY
	"$KVF_PEERS_PY" -m pip list --format=freeze 2> /dev/null > "$out/peers-freeze.txt" || true
fi
if guest_steps; then
	"$KVF_REPO/scripts/rxe-vm.sh" --devices 2 --rw --timeout "${KVF_VM_TIMEOUT:-1500}" \
		"${share[@]+"${share[@]}"}" -- scripts/bench-compare.sh --inner --out "$out" \
		"${qarg[@]+"${qarg[@]}"}" || kvf_die "the guest run failed"
fi
if step python; then python_part; fi
"$KVF_PY" "$KVF_REPO/scripts/bench_compare_report.py" "$out"
