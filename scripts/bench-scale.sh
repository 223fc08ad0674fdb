#!/usr/bin/env bash
# Scale (issue 42): one prefill engine and N connections to it, in one
# boot of the soft-RoCE guest: up to 128 decode engines (several per
# process: tests/rxe/conns_driver), each a peer of its own with one room,
# every byte checked, and past 128 the same 128 engines with N / 128 QPs
# each (rdma.qps_per_peer; a prefill takes every QP as a connection of its
# own, so its cost per connection is the same, and 1,024 engines' threads
# do not fit two TCG vCPUs: they ran out of time connecting). The prefill runs at the library's defaults;
# each decode engine with small frames and queues (rdma.frame_size 4096,
# 16 receive and 16 send frames, sq_depth 16: a rank that registers one
# buffer), so that a thousand of them fit one guest. Per N: the prefill's
# pinned memory (VmPin) and RSS before the first connection and at the most
# connections, its frame memory (kvf_stats frame_bytes), the decodes' the
# same, and the time from the prefill's start to every room SUCCESS.
#
#   scripts/bench-scale.sh [--conns "1 16 128 1024"] [--window W|all] [--out DIR]
#
# --window: decode engines a process connects at once (4; "all": a storm,
# each process's engines all at once). Each decode engine's setup (its open
# to its room's SUCCESS) is reported, median and slowest.
#
# Writes DIR/raw/N.log, DIR/scale.json and DIR/scale.svg (memory and
# setup time against N). KVF_VM_MEM (MiB) defaults to 6144 here.
set -euo pipefail
KVF_PROG=bench-scale
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$KVF_REPO"

peers="1 16 128 1024" inner=0 window=4
out=${KVF_BUILD_DIR:-build}/bench-scale
while [ $# -gt 0 ]; do
	case $1 in
	--conns) peers=${2:?}; shift 2 ;;
	--out) out=${2:?}; shift 2 ;;
	--window) window=${2:?}; shift 2 ;;
	--inner) inner=1; shift ;;
	-h|--help) sed -n '2,/^set -euo/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "bench-scale: unknown argument $1" >&2; exit 2 ;;
	esac
done
build=${KVF_BUILD_DIR:-build}

# In the guest: each N in turn, its log kept.
if [ $inner = 1 ]; then
	mkdir -p "$out/raw"
	for n in $peers; do
		engines=$((n < 128 ? n : 128))
		qps=$((n / engines))
		procs=$((engines < 8 ? engines : 8))
		echo "== $n connections: $engines decode engines x $qps QPs, $procs decode processes"
		KVF_SCEN=scale-$n RDMA_P="" KB_ENGINE=2000 KB_CONN=600 WINDOW=$window \
			bash tests/rxe/scenarios/conns.sh "$build" "$KVF_RXE_DEV0" "$KVF_RXE_ADDR0" \
			"$KVF_RXE_DEV1" "$KVF_RXE_ADDR1" many "$engines" "$procs" "$qps" > "$out/raw/$n.log" 2>&1 || true
		grep -E '^(PASS|FAIL)|^scale:|per connection|frames:|setup|this guest' "$out/raw/$n.log" || true
	done
	exit 0
fi

rm -rf "$out"
mkdir -p "$out"
KVF_VM_MEM=${KVF_VM_MEM:-6144} scripts/rxe-vm.sh --devices 2 --rw --timeout "${KVF_VM_TIMEOUT:-2400}" -- \
	scripts/bench-scale.sh --inner --conns "$peers" --window "$window" --out "$out"
python3 scripts/bench_scale_report.py "$out"
