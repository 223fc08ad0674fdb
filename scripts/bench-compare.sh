#!/usr/bin/env bash
# kvferry against the raw verbs (perftest) and UCX (ucx_perftest) on the
# same two RDMA devices, in one boot of the soft-RoCE guest when this host
# has no RDMA device (issue 11). Then the figures of the issue's goals,
# their ratios, JSON and two plots.
#
#   scripts/bench-compare.sh [--quick] [--spin] [--only perftest,ucx,sweep,goals,policy,wait]
#                            [--out DIR]
#
# In the guest (two rxe devices on a veth pair), at 64 B, 2 KiB, 16 KiB,
# 64 KiB and 1 MiB: ib_write_bw and ib_write_lat (RoCE v2, -u 18, DEV1 ->
# DEV0), ucx_perftest ucp_put_bw and ucp_put_lat over RC verbs
# (UCX_TLS=rc: rc_verbs, and ud_verbs that its wireup needs;
# UCX_NET_DEVICES=<dev>:1), kvferry-bench at the same block sizes, then
# kvferry-bench for each goal; kvferry-bench always runs as two processes,
# prefill on DEV0, decode on DEV1. On the host afterwards
# scripts/bench_compare_report.py prints every raw figure and the ratios,
# writes DIR/results.json and draws DIR/bandwidth.svg and DIR/latency.svg
# (gnuplot). --quick: fewer iterations and rooms (a smoke run, not figures);
# --only: those parts only (policy: ib_write_bw at 16 KiB, then the 16 KiB
# goal with the default poller and with rdma.poll_idle_us 0; not in the
# default run, whose goals include both; wait: ib_write_lat 64 B and
# ib_write_bw 16 KiB, then the 64 B latency goal and the 16 KiB goal each
# spinning and with --wait, with the default poller and rdma.poll_idle_us 0).
# The goals run with kvferry-bench --wait (the schedulers sleep in
# kvf_engine_wait instead of spinning: better on each, docs/performance.md);
# lat64-spin and sglang-spin are the latency and SGLang goals spinning.
# --spin: every goal spins.
#
# Environment: KVF_BUILD_DIR (default build), KVF_VM_TIMEOUT (default 1500).
# Needs the packages of KVF_PKGS_BENCH (scripts/lib.sh) besides perftest.
set -euo pipefail
KVF_PROG=bench-compare
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$KVF_REPO"

quick=0 inner=0 only= gwait=(--wait)
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

# perftest TOOL SIZE ITERS [ARGS]: server on DEV0, client on DEV1 (the
# client writes); the client's output in raw/TOOL-SIZE.log
perftest() {
	local tool=$1 s=$2 n=$3 log=$out/raw/$1-$2.log
	shift 3
	port=$((port + 1))
	# shellcheck disable=SC2086
	timeout -k 5 180 "$tool" -d "$DEV0" $X0 -u 18 -p $port -F -s "$s" -n "$n" "$@" \
		> "$log.server" 2>&1 &
	listen_wait $port || kvf_log "$tool server on port $port did not listen"
	# shellcheck disable=SC2086
	timeout -k 5 180 "$tool" -d "$DEV1" $X1 -u 18 -p $port -F -s "$s" -n "$n" "$@" "$ADDR0" \
		> "$log" 2>&1 || kvf_log "$tool -s $s failed (raw/${log##*/})"
	wait || true
}

# ucx TEST SIZE ITERS: ucx_perftest over RC verbs, same direction. The
# transports to try, in order, until one gives a figure (then that one for
# the rest; one that failed is not tried again): rc (rc_verbs, with
# ud_verbs for its wireup) on the RoCE v2 GID perftest uses; rc_verbs with
# tcp for the wireup. Each attempt's output is kept (raw/ucx-TEST-SIZE.log.N).
UCX_CONFIGS=("UCX_TLS=rc" "UCX_TLS=rc_verbs,tcp")
ucx_ok= ucx_bad=,
ucx() {
	local t=$1 s=$2 n=$3 log=$out/raw/ucx-$1-$2.log k cfgs
	cfgs=("${UCX_CONFIGS[@]}")
	[ -n "$ucx_ok" ] && cfgs=("$ucx_ok")
	for k in "${!cfgs[@]}"; do
		[[ $ucx_bad == *,${cfgs[$k]},* ]] && continue
		port=$((port + 1))
		# shellcheck disable=SC2086
		env ${cfgs[$k]} UCX_IB_GID_INDEX=${KVF_RXE_GID0:-auto} UCX_NET_DEVICES=$DEV0:1 \
			timeout -k 5 90 ucx_perftest -p $port > "$log.$k.server" 2>&1 &
		listen_wait $port || kvf_log "ucx_perftest server on port $port did not listen"
		# shellcheck disable=SC2086
		env ${cfgs[$k]} UCX_IB_GID_INDEX=${KVF_RXE_GID1:-auto} UCX_NET_DEVICES=$DEV1:1 \
			timeout -k 5 90 ucx_perftest "$ADDR0" -p $port -t "$t" -s "$s" -n "$n" \
			> "$log.$k" 2>&1 || kvf_log "ucx_perftest $t -s $s (${cfgs[$k]}) failed"
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

conf() { # FILE prefill|decode PORT
	local side
	if [ "$2" = prefill ]; then
		side="device = \"$DEV0\"; listen_addr = \"$ADDR0\"; listen_port = $3;"
	else
		side="device = \"$DEV1\"; peer = \"$ADDR0:$3\"; source_addr = \"$ADDR1\";"
	fi
	cat > "$1" <<CONF
log: { level = "info"; };
engine: { id = "bench-$2"; max_blocks_per_room = 4096; summary_interval_s = 0; };
deadlines: { bootstrap_s = 120; inflight_s = 120; receiver_waiting_s = 120; quiesce_s = 10; };
rdma: { $side sq_depth = 256; rq_depth = 64; signal_every = 16; };
CONF
}

# kvf NAME ARGS: kvferry-bench, two processes; the decode's JSON in
# raw/kvf-NAME.json, its per-room latencies in raw/kvf-NAME.lat
kvf() {
	local name=$1 r=$out/raw/kvf-$1 stamps=/tmp/kvf-stamps-$1 i pa=() da=()
	shift
	# --prefill-set to the prefill only, --decode-set to the decode only
	# (either opens that side in the process it is given to)
	while [ $# -gt 0 ]; do
		case $1 in
		--prefill-set) pa+=("$1" "$2"); shift 2 ;;
		--decode-set) da+=("$1" "$2"); shift 2 ;;
		*) pa+=("$1"); da+=("$1"); shift ;;
		esac
	done
	port=$((port + 1))
	conf "$r.p.conf" prefill $port
	conf "$r.d.conf" decode $port
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

# step NAME: whether --only (default: all) names it
step() { [ -z "$only" ] || [[ ,$only, == *,$1,* ]]; }

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
	done
	for s in "${SIZES[@]}"; do
		step ucx || continue
		kvf_log "size $s: ucx_perftest put bandwidth and latency"
		ucx ucp_put_bw "$s" "$(iters "$s")"
		ucx ucp_put_lat "$s" "$(lat_iters "$s")"
	done
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
	step goals || return 0
	n=$((quick ? 30 : 80))
	kvf goal-16k --rooms $n --buffers 64 --blocks-per-room 2 --block-size 16384 \
		--layout rotated --verify-rooms 8 --seed 5 "${gwait[@]+"${gwait[@]}"}"
	kvf goal-sglang --rooms $n --buffers 64 --blocks-per-room 16 --block-size 2048 \
		--layout sglang --verify-rooms 8 --seed 6 "${gwait[@]+"${gwait[@]}"}"
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

# --only wait: spinning against waiting (kvferry-bench --wait), with the
# default poller and with pollers that sleep at once, on the 64 B latency
# goal and the 16 KiB goal, with their perftest references in this boot.
wait_part() {
	local n=$((quick ? 30 : 80)) m=$((quick ? 200 : 500)) w poll
	local lat=(--buffers 1 --blocks-per-room 1 --block-size 64 --window 1 --verify-rooms 20 --seed 7)
	local bw=(--buffers 64 --blocks-per-room 2 --block-size 16384 --layout rotated --verify-rooms 8 --seed 5)
	local sleep0=(--prefill-set rdma.poll_idle_us=0 --decode-set rdma.poll_idle_us=0)
	perftest ib_write_lat 64 "$(lat_iters 64)"
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
"$KVF_REPO/scripts/rxe-vm.sh" --devices 2 --rw --timeout "${KVF_VM_TIMEOUT:-1500}" \
	"${share[@]+"${share[@]}"}" -- scripts/bench-compare.sh --inner --out "$out" \
	"${qarg[@]+"${qarg[@]}"}" || kvf_die "the guest run failed"
"$KVF_PY" "$KVF_REPO/scripts/bench_compare_report.py" "$out"
