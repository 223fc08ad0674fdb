#!/usr/bin/env bash
# The RDMA suite: real verbs on an rxe (soft-RoCE) or hardware device.
# Runs inside the guest of scripts/rxe-vm.sh or on a host that has a device:
#
#   tests/rxe/run.sh [-k NAME-SUBSTRING]
#
# Device and addresses: KVF_RXE_DEV0/KVF_RXE_GID0/KVF_RXE_ADDR0 (set by
# rxe-vm.sh), else the first device under /sys/class/infiniband, its RoCE v2
# ::ffff:IPv4 GID and that IPv4 address. With KVF_RXE_DEV1 (rxe-vm.sh
# --devices 2) the clients run on the second device. Binaries come from
# ${KVF_BUILD_DIR:-build} (relative to the repo root).
#
# Prints "PASS name (T s)" or "FAIL name (reason)" per test, the logs of the
# failed ones, and last a line exactly "rxe: N passed, N failed". Exit 1 if
# any failed (or no test could run), 0 otherwise.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
repo=$(cd "$here/../.." && pwd -P)
KVF_PROG=rxe-suite
# shellcheck source=scripts/lib.sh
. "$repo/scripts/lib.sh"

filter=
while getopts k:h o; do
	case $o in
	k) filter=$OPTARG ;;
	*) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
	esac
done

build=${KVF_BUILD_DIR:-build}
case $build in /*) ;; *) build=$repo/$build ;; esac
BIN=$build/tests/rxe
logdir=${KVF_RXE_LOGDIR:-$(mktemp -d /tmp/kvf-rxe.XXXXXX)}
mkdir -p "$logdir"
passed=0 failed=0
failed_names=()

# ---- device, GID, address ---------------------------------------------------
ipv4_of_gid() { # dev gid_index -> IPv4 of a ::ffff: GID
	local g
	read -r g < "/sys/class/infiniband/$1/ports/1/gids/$2" 2>/dev/null || return 1
	case $g in 0000:0000:0000:0000:0000:ffff:*) ;; *) return 1 ;; esac
	g=${g#0000:0000:0000:0000:0000:ffff:}
	printf '%d.%d.%d.%d\n' "0x${g:0:2}" "0x${g:2:2}" "0x${g:5:2}" "0x${g:7:2}"
}
DEV0=${KVF_RXE_DEV0:-$(kvf_first_rdma_dev)}
DEV1=${KVF_RXE_DEV1:-$DEV0}
if [ -n "$DEV0" ]; then
	GID0=${KVF_RXE_GID0:-$(kvf_roce_gid_index "$DEV0")}
	GID1=${KVF_RXE_GID1:-${KVF_RXE_DEV1:+$(kvf_roce_gid_index "$DEV1")}}
	GID1=${GID1:-$GID0}
	ADDR0=${KVF_RXE_ADDR0:-$(ipv4_of_gid "$DEV0" "${GID0:-0}")}
	ADDR1=${KVF_RXE_ADDR1:-$ADDR0}
fi
# rail 1 of rxe-vm.sh --devices 4 (rxe2 prefill side, rxe3 decode side);
# empty without it
DEV2=${KVF_RXE_DEV2:-} DEV3=${KVF_RXE_DEV3:-}
GID2=${KVF_RXE_GID2:-} GID3=${KVF_RXE_GID3:-}
ADDR2=${KVF_RXE_ADDR2:-} ADDR3=${KVF_RXE_ADDR3:-}
# perftest: -x only on RoCE (GID known)
X0=${GID0:+-x $GID0}
X1=${GID1:+-x $GID1}

# ---- runners ----------------------------------------------------------------
result() { # name rc reason-if-failed start
	local t
	t=$(kvf_elapsed "$4")
	if [ "$2" = 0 ]; then
		echo "PASS $1 ($t s)"
		passed=$((passed + 1))
	else
		echo "FAIL $1 ($3)"
		failed=$((failed + 1))
		failed_names+=("$1")
	fi
}

why() { # exit code -> reason
	case $1 in
	124) echo "timed out" ;;
	125|126|127) echo "could not run (exit $1)" ;;
	*) if [ "$1" -gt 128 ]; then echo "killed by signal $(($1 - 128))"; else echo "exit $1"; fi ;;
	esac
}

selected() { [ -z "$filter" ] || [[ $1 == *"$filter"* ]]; }

# run_test NAME TIMEOUT_S CMD [ARG]... : one process, under timeout.
run_test() {
	local name=$1 to=$2 t0 rc
	shift 2
	selected "$name" || return 0
	t0=$(kvf_now)
	timeout -k 5 "$to" "$@" > "$logdir/$name.log" 2>&1 < /dev/null
	rc=$?
	result "$name" $rc "$(why $rc)" "$t0"
}

# wait_tcp_listen PORT SECONDS : until something listens on the TCP port
wait_tcp_listen() {
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		ss -Hltn "sport = :$1" 2>/dev/null | grep -q . && return 0
		sleep 0.1
	done
	return 1
}

# pair_test NAME TIMEOUT_S READY SERVER-CMD... -- CLIENT-CMD...
# Starts the server, waits until READY ("tcp:PORT" or "sleep:S"), runs the
# client; both under the timeout; passes when both exit 0.
pair_test() {
	local name=$1 to=$2 ready=$3 t0 srv=() spid rc src crc reason=
	shift 3
	while [ $# -gt 0 ] && [ "$1" != -- ]; do srv+=("$1"); shift; done
	shift
	selected "$name" || return 0
	t0=$(kvf_now)
	timeout -k 5 "$to" "${srv[@]}" > "$logdir/$name.server.log" 2>&1 < /dev/null &
	spid=$!
	case $ready in
	tcp:*) wait_tcp_listen "${ready#tcp:}" 15 ;;
	sleep:*) sleep "${ready#sleep:}" ;;
	esac
	timeout -k 5 "$to" "$@" > "$logdir/$name.log" 2>&1 < /dev/null
	crc=$?
	if [ $crc != 0 ]; then
		sleep 1
		kill "$spid" 2>/dev/null
	fi
	wait "$spid"
	src=$?
	rc=0
	if [ $crc != 0 ]; then rc=$crc; reason="client $(why $crc)"
	elif [ $src != 0 ]; then rc=$src; reason="server $(why $src)"
	fi
	{ echo "--- server:"; cat "$logdir/$name.server.log"; } >> "$logdir/$name.log"
	result "$name" $rc "$reason" "$t0"
}

# run_bg NAME TIMEOUT_S CMD [ARG]... : as run_test, started in the background
# and counted by bg_collect (a test that mostly waits out deadlines).
bg_names=() bg_pids=() bg_t0=()
run_bg() {
	local name=$1 to=$2
	shift 2
	selected "$name" || return 0
	bg_t0+=("$(kvf_now)")
	timeout -k 5 "$to" "$@" > "$logdir/$name.log" 2>&1 < /dev/null &
	bg_pids+=($!)
	bg_names+=("$name")
	echo "(started $name in the background)"
}
bg_collect() {
	local i rc
	for i in "${!bg_pids[@]}"; do
		wait "${bg_pids[i]}"
		rc=$?
		result "${bg_names[i]}" $rc "$(why $rc)" "${bg_t0[i]}"
	done
}

# rping's server listens over rdma_cm (no TCP port to wait for): the client
# retries a few times while the server comes up.
RETRY5=(sh -c 'for i in 1 2 3 4 5; do "$@" && exit 0; echo "(attempt $i failed)"; sleep 1; done; exit 1' retry)

# ---- the suite ----------------------------------------------------------------
# Single-binary tests: "NAME|TIMEOUT_S|COMMAND LINE". The command line is
# eval'd at run time, so it may use $BIN (build/tests/rxe), $DEV0 $GID0
# $ADDR0 $DEV1 $GID1 $ADDR1. Add kvferry's transport tests here, e.g.
#   "transport_loopback|120|\$BIN/test_transport -d \$DEV0 -a \$ADDR0"
# "&NAME|...": run in the background beside the tests after it, for a test
# that spends its time waiting for deadlines (its own ports, little load;
# what it asserts has windows of tens of seconds).
TESTS=(
	"verbs_smoke|60|\$BIN/verbs_smoke -d \$DEV0 \${GID0:+-g \$GID0}"
	# 120 s of it waits for two deadlines, its two engines idle (one of them
	# SIGSTOPped)
	"&kvf_metrics_stuck|330|\$repo/tests/rxe/scenarios/metrics.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 stuck"
	# kvferry transport (tests/rxe/scenarios/*.sh: BUILD DEV0 ADDR0 DEV1 ADDR1 ...)
	# 1,000 rooms of 16 buffers x 16 KiB (256 MiB, checked): at 64 buffers
	# (1 GiB) a loaded TCG guest (~0.03 Gb/s) ran past the 230 s limit;
	# kvf_throughput moves the 64-buffer layout. The variants (schedulers
	# that wait, one QP) move 500 rooms: the same paths, half the data
	"kvf_bench_one_process|270|\$repo/tests/rxe/scenarios/bench.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 one 1000 1 16"
	"kvf_bench_two_process|270|\$repo/tests/rxe/scenarios/bench.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 two 1000 1 16"
	"kvf_bench_one_process_wait|270|\$repo/tests/rxe/scenarios/bench.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 one 500 1 16 --wait"
	"kvf_bench_two_process_wait|270|\$repo/tests/rxe/scenarios/bench.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 two 500 1 16 --wait"
	# one QP per peer (rdma.qps_per_peer 1, the default before 2026-12-06)
	"kvf_bench_two_process_qp1|270|env 'KVF_SCEN_RDMA=qps_per_peer = 1;' \$repo/tests/rxe/scenarios/bench.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 two 500 1 16"
	"kvf_abort_prefill|200|\$repo/tests/rxe/scenarios/abort.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 prefill"
	"kvf_abort_decode|200|\$repo/tests/rxe/scenarios/abort.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 decode"
	"kvf_kill_decode|120|\$repo/tests/rxe/scenarios/kill.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 decode KILL"
	"kvf_kill_prefill|120|\$repo/tests/rxe/scenarios/kill.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 prefill KILL"
	"kvf_stop_prefill_heartbeat|120|\$repo/tests/rxe/scenarios/kill.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 prefill STOP"
	# issue 22: a scheduler away 3 x the detection time is not a lost peer
	# (the prefill's beside the tests after it: 15 s of its 20 idle, its own port)
	"&kvf_stall_prefill|240|\$repo/tests/rxe/scenarios/stall.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 prefill 100"
	"kvf_stall_decode|240|\$repo/tests/rxe/scenarios/stall.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 decode 100"
	"kvf_fake_peer_good|70|\$repo/tests/rxe/scenarios/fake_peer.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 good"
	"kvf_fake_peer_bad_rkey|70|\$repo/tests/rxe/scenarios/fake_peer.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 bad-rkey"
	"kvf_fake_peer_wc_detail|70|\$repo/tests/rxe/scenarios/fake_peer.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 wc-detail"
	"kvf_fake_peer_mr_overrun|70|\$repo/tests/rxe/scenarios/fake_peer.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 mr-overrun"
	"kvf_fake_peer_big_pool|70|\$repo/tests/rxe/scenarios/fake_peer.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 big-pool"
	"kvf_fake_peer_bad_block|70|\$repo/tests/rxe/scenarios/fake_peer.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 bad-block"
	"kvf_fake_peer_truncated|70|\$repo/tests/rxe/scenarios/fake_peer.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 truncated"
	"kvf_fake_peer_short|70|\$repo/tests/rxe/scenarios/fake_peer.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 short"
	"kvf_fake_peer_close_fast|70|\$repo/tests/rxe/scenarios/fake_peer.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 close-fast"
	"kvf_fake_peer_bad_layout|70|\$repo/tests/rxe/scenarios/fake_peer.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 bad-layout"
	"kvf_fake_peer_bad_version|70|\$repo/tests/rxe/scenarios/fake_peer.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 bad-version"
	"kvf_fake_peer_bad_token|70|\$repo/tests/rxe/scenarios/fake_peer.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 bad-token"
	# issue 22: the token's proof from the wrong side (docs/wire.md 4.4)
	"kvf_fake_peer_replay|90|\$repo/tests/rxe/scenarios/fake_peer.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 replay"
	"kvf_fake_peer_silent|90|\$repo/tests/rxe/scenarios/fake_peer.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 silent"
	"kvf_fake_peer_early|90|\$repo/tests/rxe/scenarios/fake_peer.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 early"
	# issue 41: examples/one_room as a user runs it (examples/README.md)
	"kvf_example|90|\$repo/tests/rxe/scenarios/example.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1"
	"kvf_ephemeral_port|180|\$repo/tests/rxe/scenarios/ephemeral.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 40"
	# issue 40: the wheel as installed by pip into a venv of another Python
	# (scripts/wheel-test.sh makes build-wheel/venv first)
	"kvf_wheel|240|\$repo/tests/rxe/scenarios/wheel.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 20"
	# issue 13: no reconnect storm against a peer that is gone; back when it is
	"kvf_reconnect_storm|150|\$repo/tests/rxe/scenarios/reconnect.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 storm"
	"kvf_reconnect_recover|150|\$repo/tests/rxe/scenarios/reconnect.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 recover"
	"kvf_conns_cap|120|\$repo/tests/rxe/scenarios/conns.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 cap"
	"kvf_conns_kill|150|\$repo/tests/rxe/scenarios/conns.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 kill"
	# 256 connections in the suite (beside its background tests; the 1,104 of
	# docs/performance.md need KVF_VM_MEM=6144 and KVF_CONNS_ENGINES=69)
	"kvf_conns_many|330|\$repo/tests/rxe/scenarios/conns.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 many \${KVF_CONNS_ENGINES:-16} 2 16"
	# issue 42: a storm, every decode engine connecting at once, the last
	# decode process of 10 SIGKILLs itself 300 ms into its connections' setup:
	# every other room SUCCESS, the prefill back to the survivors'
	# connections
	"kvf_conns_storm|300|env WINDOW=all KILL=1 \$repo/tests/rxe/scenarios/conns.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 many 40 10 2"
	"kvf_reject_token|150|\$repo/tests/rxe/scenarios/reject.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1"
	# issue 43: a second peer's ABORTs take room ids a good decode uses; the
	# good decode's ROOM_INFOs are refused at once (ABORT, room refused)
	"kvf_refused_after_create|150|\$repo/tests/rxe/scenarios/refused.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 after-create"
	"kvf_refused_before_create|150|\$repo/tests/rxe/scenarios/refused.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 before-create"
	"kvf_metrics_load|560|\$repo/tests/rxe/scenarios/metrics.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 load 1000"
	# issue 8: an SGLang-shaped stream (regions, chunks, user data), aborts
	# and a peer kill mid-chunking
	"kvf_sglang_stream|480|\$repo/tests/rxe/scenarios/sglang.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 stream 500"
	"kvf_sglang_abort|480|\$repo/tests/rxe/scenarios/sglang.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 abort 200"
	"kvf_sglang_kill|300|\$repo/tests/rxe/scenarios/sglang.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 kill 300"
	# the same stream with the prefill's kv region staged through host slots
	"kvf_stage_stream|420|\$repo/tests/rxe/scenarios/stage.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 stream 150"
	"kvf_stage_abort|420|\$repo/tests/rxe/scenarios/stage.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 abort 60"
	# issue 9: rooms across ranks, one process per rank: fan-out (MLA, one
	# dummy), fan-in (2 prefill ranks), a decode rank killed mid-transfer
	"kvf_fan_out|240|\$repo/tests/rxe/scenarios/fan.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 out 12"
	"kvf_fan_in|240|\$repo/tests/rxe/scenarios/fan.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 in 12"
	"kvf_fan_kill|240|\$repo/tests/rxe/scenarios/fan.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 kill"
	# kvferry.sglang driven as SGLang does, two Python processes (issue 10)
	"kvf_python_sglang|300|\$repo/tests/rxe/scenarios/python_sglang.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1"
	"kvf_python_sglang_shapes|600|\$repo/tests/rxe/scenarios/python_sglang_shapes.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1"
	# issues 21, 38: kvferry.vllm under vLLM 0.31.0's own scheduler, factory and
	# model-runner mixin (from PyPI): one process imports vLLM (minutes under
	# TCG) and forks the prefill and decode instances
	"kvf_vllm|1200|\$repo/tests/rxe/scenarios/vllm.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 all"
	# issues 24, 38: SGLang 0.5.18's own queue code (from PyPI) drives
	# kvferry.sglang, one process per side importing SGLang once (about 4
	# minutes under TCG), a fork per shape; the prefill through the plugin
	"kvf_sglang_real|1500|\$repo/tests/rxe/scenarios/sglang_real.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1"
	# issue 9: ranks of different TP and pipeline stages (geometry, head slicing)
	"kvf_ranks_tp2to1|240|\$repo/tests/rxe/scenarios/ranks.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 tp2to1 12"
	"kvf_ranks_tp1to2|240|\$repo/tests/rxe/scenarios/ranks.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 tp1to2 12"
	"kvf_ranks_stages|240|\$repo/tests/rxe/scenarios/ranks.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 stages 12"
	"kvf_ranks_mismatch|150|\$repo/tests/rxe/scenarios/ranks.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 mismatch"
	"kvf_ranks_bench|400|\$repo/tests/rxe/scenarios/ranks.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 bench 64"
	"kvf_rails_stream|300|\$repo/tests/rxe/scenarios/rails.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 stream 200"
	"kvf_rails_bench|420|\$repo/tests/rxe/scenarios/rails.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 bench 100"
	# down: once rail 1 is back, each probe room holds the driver's window
	# for a connect attempt (about 30 rooms a 10 s): 400 rooms leave ~100 for it
	"kvf_rails_down|300|\$repo/tests/rxe/scenarios/rails.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 down 400"
	"kvf_flood|150|\$repo/tests/rxe/scenarios/flood.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1"
	"kvf_idle|150|\$repo/tests/rxe/scenarios/idle.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1"
	"kvf_million|300|\$repo/tests/rxe/scenarios/million.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 contiguous"
	"kvf_throughput|300|\$repo/tests/rxe/scenarios/throughput.sh \$build \$DEV0 \$ADDR0 \$DEV1 \$ADDR1 150"
)

suite() {
	local entry name to cmd bg
	run_test ibv_devinfo 30 sh -c 'ibv_devinfo -d "$1" && ibv_devinfo -d "$1" | grep -q PORT_ACTIVE' sh "$DEV0"
	for entry in "${TESTS[@]}"; do
		IFS='|' read -r name to cmd <<< "$entry"
		bg=
		[ "${name:0:1}" = "&" ] && { bg=1; name=${name:1}; }
		eval "set -- $cmd"
		if [ ! -x "$1" ] && ! command -v "$1" > /dev/null; then
			selected "$name" || continue
			echo "FAIL $name (not built: $1; run meson compile -C $build)"
			failed=$((failed + 1)); failed_names+=("$name")
			continue
		fi
		if [ -n "$bg" ]; then run_bg "$name" "$to" "$@"; else run_test "$name" "$to" "$@"; fi
	done
	bg_collect
	# perftest and rping: one run each, server and client on the device(s)
	# -u 18: the same ACK timeout as kvferry's default rdma.qp_timeout (at
	# perftest's 14, a loaded soft-RoCE guest fails it with wc status 9)
	pair_test ib_write_bw 90 tcp:18621 \
		ib_write_bw -d "$DEV0" $X0 -u 18 -p 18621 -F --report_gbits -s 65536 -n 500 -- \
		ib_write_bw -d "$DEV1" $X1 -u 18 -p 18621 -F --report_gbits -s 65536 -n 500 "$ADDR0"
	pair_test ib_write_lat 90 tcp:18622 \
		ib_write_lat -d "$DEV0" $X0 -u 18 -p 18622 -F -n 1000 -- \
		ib_write_lat -d "$DEV1" $X1 -u 18 -p 18622 -F -n 1000 "$ADDR0"
	pair_test rping 60 sleep:1 \
		rping -s -a "$ADDR0" -p 18623 -C 3 -v -- \
		"${RETRY5[@]}" rping -c -a "$ADDR0" ${KVF_RXE_DEV1:+-I "$ADDR1"} -p 18623 -C 3 -v
}

# ---- main ---------------------------------------------------------------------
t_all=$(kvf_now)
if [ -z "${DEV0:-}" ]; then
	echo "FAIL setup (no RDMA device: /sys/class/infiniband is empty; use scripts/rxe-vm.sh or scripts/rxe-host.sh)"
	echo "rxe: 0 passed, 1 failed"
	exit 1
fi
if [ -z "${ADDR0:-}" ]; then
	echo "FAIL setup (no IPv4 address found for $DEV0 GID ${GID0:-?}; set KVF_RXE_ADDR0)"
	echo "rxe: 0 passed, 1 failed"
	exit 1
fi
if [ "$(ulimit -l)" != unlimited ]; then
	ulimit -l unlimited 2> /dev/null ||
		kvf_log "warning: memlock limit is $(ulimit -l) KiB and cannot be raised; registrations may fail (see README)"
fi
echo "rxe-suite: device $DEV0 gid ${GID0:--} addr $ADDR0" \
	"${KVF_RXE_DEV1:+| client device $DEV1 gid ${GID1:--} addr $ADDR1}| logs $logdir"
suite

# figures for later comparison (benchmarks): the client's result lines
bw=$(awk '/^--- server:/{exit} /^ *65536 +500 /{print $4}' "$logdir/ib_write_bw.log" 2>/dev/null | head -n1)
# ib_write_lat: the first finite average of either side (a TCG guest's
# client has printed inf, its cycle counter unread; the server's is as good)
lat=$(awk '/^ *2 +1000 / && $6 ~ /^[0-9.]+$/ {print $6}' "$logdir/ib_write_lat.log" 2>/dev/null | head -n1)
if selected ib_write_bw && [ -f "$logdir/ib_write_bw.log" ] && ! [[ ${failed_names[*]-} == *ib_write_bw* ]] &&
	! awk -v b="${bw:-0}" 'BEGIN { exit !(b + 0 > 0) }'; then
	# perftest exited 0 but reported no bandwidth: that is no transfer
	echo "FAIL ib_write_bw (no bandwidth figure in its output)"
	passed=$((passed - 1)); failed=$((failed + 1)); failed_names+=(ib_write_bw)
fi
[ -n "$bw" ] && echo "rxe-suite: ib_write_bw $bw Gb/s average (500 x 64 KiB RDMA writes, $DEV0 -> $DEV1)"
# kvferry's own figure against ib_write_bw, measured in the same scenario
grep -h '^throughput:' "$logdir/kvf_throughput.log" 2> /dev/null | sed 's/^/rxe-suite: /'
[ -n "$lat" ] && echo "rxe-suite: ib_write_lat ${lat} us average (2-byte writes)"
for n in "${failed_names[@]+"${failed_names[@]}"}"; do
	echo "----- log of $n ($logdir/$n.log), last 30 lines:"
	tail -n 30 "$logdir/$n.log" 2> /dev/null
done
echo "rxe-suite: total $(kvf_elapsed "$t_all") s"
if [ $((passed + failed)) = 0 ]; then
	echo "rxe: 0 passed, 1 failed"
	exit 1
fi
echo "rxe: $passed passed, $failed failed"
[ "$failed" = 0 ]
