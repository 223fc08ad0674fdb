#!/usr/bin/env bash
# kvferry.sglang between ranks of different parallelism (issue 24): every
# rank its own Python process (tests/rxe/python_sglang_shapes.py), prefill
# ranks on DEV0, decode ranks on DEV1, SGLang's bootstrap routes served by
# kvferry's server in prefill rank 0. Shapes (prefill TP, decode TP, prefill
# PP, MLA): 2 1 1 0 (fan-in, head slicing), 1 2 1 0 (fan-out learned from the
# decode's ROOM_INFO, head slicing), 2 1 1 1 (MLA: one data rank, one dummy),
# 1 2 1 1 (MLA fan-out), 1 1 2 0 (two PP stages into one decode). Every byte
# of every page, layer, head and aux row checked at each decode rank.
#   python_sglang_shapes.sh BUILD DEV0 ADDR0 DEV1 ADDR1
. "$(dirname "$0")/common.sh"
DRV=$(dirname "$0")/../python_sglang_shapes.py
export PYTHONPATH=$BUILD/python
compgen -G "$BUILD/python/kvferry/_kvferry*.so" > /dev/null ||
	fail "not built: $BUILD/python/kvferry/_kvferry*.so (python3-dev, -Dpython)"
shape() { # PTP DTP PP MLA: every rank of one shape; 0 when all of them passed
	local ptp=$1 dtp=$2 pp=$3 mla=$4 i pids=() rc=0
	for ((i = 0; i < ptp * pp; i++)); do
		timeout -k 5 150 "$PY" "$DRV" P "$i" "$ptp" "$dtp" "$pp" "$mla" "$DEV0" "$ADDR0" \
			> "$W/s$ptp$dtp$pp$mla-p$i.out" 2>&1 &
		pids+=($!)
	done
	for ((i = 0; i < dtp; i++)); do
		timeout -k 5 150 "$PY" "$DRV" D "$i" "$ptp" "$dtp" "$pp" "$mla" "$DEV1" "$ADDR1" \
			> "$W/s$ptp$dtp$pp$mla-d$i.out" 2>&1 &
		pids+=($!)
	done
	CHILDREN=("${pids[@]}")
	for i in "${pids[@]}"; do wait "$i" || rc=1; done
	CHILDREN=()
	note "prefill TP $ptp PP $pp -> decode TP $dtp, mla=$mla:" \
		"$(grep -h '^[PD][0-9]*: ok=' "$W/s$ptp$dtp$pp$mla"-*.out | tr '\n' ' ')"
	[ $rc = 0 ] || show "$W/s$ptp$dtp$pp$mla"-*.out
	return $rc
}
failed=()
for s in "2 1 1 0" "1 2 1 0" "2 1 1 1" "1 2 1 1" "1 1 2 0"; do
	# shellcheck disable=SC2086
	shape $s || failed+=("$s")
done
[ ${#failed[@]} = 0 ] || fail "shapes that failed (prefill TP, decode TP, PP, MLA): ${failed[*]}"
pass "5 shapes, 6 rooms each, every byte of every page, layer, head and aux row checked"
