#!/usr/bin/env bash
# The in-guest part of scripts/stress.sh: the transfer scenarios repeated
# ROUNDS times while HOGS busy loops load the guest's CPUs.
#
#   tests/rxe/stress.sh [ROUNDS] [HOGS]     (defaults 5 and 2)
#
# Runs inside scripts/rxe-vm.sh --devices 2 (KVF_RXE_DEV0/ADDR0/DEV1/ADDR1).
# Prints one line per scenario and round (PASS/FAIL, rooms ok/failed), the
# log tail of each failure, a closing table, then exactly
# "stress: N passed, N failed" and the rooms that failed where none were
# meant to. The abort scenarios fail rooms on purpose: their rooms are shown
# but not counted; their own PASS/FAIL says whether the failures were the
# intended ones. Exit 1 on any failed scenario.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
repo=$(cd "$here/../.." && pwd -P)
KVF_PROG=stress
# shellcheck source=scripts/lib.sh
. "$repo/scripts/lib.sh"

rounds=${1:-5} hogs=${2:-2}
for v in "$rounds" "$hogs"; do
	case $v in '' | *[!0-9]*) kvf_die "ROUNDS and HOGS must be whole numbers, got '$v'" ;; esac
done
[ "$rounds" -ge 1 ] || kvf_die "ROUNDS must be at least 1"
build=${KVF_BUILD_DIR:-build}
case $build in /*) ;; *) build=$repo/$build ;; esac
DEV0=${KVF_RXE_DEV0:?no KVF_RXE_DEV0: run under scripts/rxe-vm.sh --devices 2}
ADDR0=${KVF_RXE_ADDR0:?no KVF_RXE_ADDR0: run under scripts/rxe-vm.sh --devices 2}
DEV1=${KVF_RXE_DEV1:-$DEV0} ADDR1=${KVF_RXE_ADDR1:-$ADDR0}
logdir=$(mktemp -d /tmp/kvf-stress.XXXXXX)
ulimit -l unlimited 2> /dev/null || true

# "NAME|TIMEOUT_S|SCRIPT ARGS|KIND": the run.sh TESTS entries that move data.
# KIND: bench (JSON "ok"/"failed"), driver ("driver: role=... ok= failed="),
# abort (rooms fail on purpose; "  prefill: N ok, N failed").
SCENARIOS=(
	"bench_two|270|bench.sh two 1000 1 16|bench"
	"bench_one|270|bench.sh one 1000 1 16|bench"
	"fake_peer_good|70|fake_peer.sh good|driver"
	"abort_prefill|200|abort.sh prefill|abort"
	"abort_decode|200|abort.sh decode|abort"
)

# ---- CPU load: busy loops, killed by pid on exit -----------------------------
HOG_PIDS=()
stop_hogs() {
	local p
	for p in "${HOG_PIDS[@]+"${HOG_PIDS[@]}"}"; do kill "$p" 2> /dev/null; done
	for p in "${HOG_PIDS[@]+"${HOG_PIDS[@]}"}"; do wait "$p" 2> /dev/null; done
	HOG_PIDS=()
}
trap stop_hogs EXIT
trap 'exit 130' INT TERM
for ((i = 0; i < hogs; i++)); do
	sh -c 'while :; do :; done' &
	HOG_PIDS+=($!)
done

# ---- one scenario run ----------------------------------------------------------
# rooms KIND LOG -> "OK FAILED UNEXPECTED CELL..." ('?' where the log has no
# count); CELL is the table's ok/failed, per side for abort
rooms() {
	local kind=$1 log=$2 l ok failed
	case $kind in
	bench)
		l=$(grep -h 'decode: {' "$log" | tail -n1)
		ok=$(sed -n 's/.*"ok": \([0-9]*\).*/\1/p' <<< "$l")
		failed=$(sed -n 's/.*"failed": \([0-9]*\).*/\1/p' <<< "$l")
		echo "${ok:-?} ${failed:-?} ${failed:-?} ${ok:-?}/${failed:-?}" ;;
	driver)
		l=$(grep -h '^driver: role=.* rooms=' "$log" | tail -n1)
		ok=$(sed -n 's/.* ok=\([0-9]*\).*/\1/p' <<< "$l")
		failed=$(sed -n 's/.* failed=\([0-9]*\).*/\1/p' <<< "$l")
		echo "${ok:-?} ${failed:-?} ${failed:-?} ${ok:-?}/${failed:-?}" ;;
	abort) # both sides' counts; their failures are intended
		l=$(awk '/^  (prefill|decode):/ { printf "%s%s%s/%s", s, substr($1, 1, 1), $2, $4; s = "," }' "$log")
		ok=$(awk '/^  (prefill|decode):/ { sub(":", "", $1); printf "%s%s=%s", s, $1, $2; s = "," }' "$log")
		failed=$(awk '/^  (prefill|decode):/ { sub(":", "", $1); printf "%s%s=%s", s, $1, $4; s = "," }' "$log")
		echo "${ok:-?} ${failed:-?} 0 ${l:-?}" ;;
	esac
}

# results[name,round]="PASS|FAIL ok failed"; unexpected rooms summed per name
declare -A results unexpected
passed=0 failed=0 unexpected_total=0 unknown=0
run_one() { # round entry
	local r=$1 name to args kind log t0 rc verdict ok fr un cell intended=
	IFS='|' read -r name to args kind <<< "$2"
	log=$logdir/$name.r$r.log
	t0=$(kvf_now)
	# shellcheck disable=SC2086 # args is a word list
	timeout -k 5 "$to" "$here/scenarios/${args%% *}" "$build" "$DEV0" "$ADDR0" "$DEV1" "$ADDR1" \
		${args#* } > "$log" 2>&1 < /dev/null
	rc=$?
	verdict=FAIL
	[ $rc = 0 ] && grep -q '^PASS: ' "$log" && verdict=PASS
	read -r ok fr un cell <<< "$(rooms "$kind" "$log")"
	[ "$kind" = abort ] && intended=" (intended)"
	echo "round $r $name $verdict ($(kvf_elapsed "$t0") s, exit $rc) rooms ok=$ok failed=$fr$intended"
	if [ $verdict = PASS ]; then passed=$((passed + 1)); else
		failed=$((failed + 1))
		echo "----- $log, last 30 lines:"
		tail -n 30 "$log"
		echo "-----"
	fi
	results[$name,$r]="$verdict $cell"
	if [ "$un" = '?' ]; then unknown=$((unknown + 1)); un=0; fi
	unexpected[$name]=$(( ${unexpected[$name]:-0} + un ))
	unexpected_total=$((unexpected_total + un))
}

# ---- main ------------------------------------------------------------------------
t_all=$(kvf_now)
echo "stress: $rounds rounds, $hogs CPU hogs (pids ${HOG_PIDS[*]-none}) on $(nproc) CPUs;" \
	"prefill $DEV0 $ADDR0, decode $DEV1 $ADDR1; rdma extra keys '${KVF_SCEN_RDMA:-}'; logs $logdir"
for ((r = 1; r <= rounds; r++)); do
	for entry in "${SCENARIOS[@]}"; do run_one "$r" "$entry"; done
done
stop_hogs

echo "stress: table (verdict ok/failed rooms per round; abort rows p=prefill d=decode, failures intended)"
printf '%-15s' scenario
for ((r = 1; r <= rounds; r++)); do printf ' | %-21s' "round $r"; done
printf ' | %s\n' "unexpected failed rooms"
for entry in "${SCENARIOS[@]}"; do
	IFS='|' read -r name _ _ kind <<< "$entry"
	printf '%-15s' "$name"
	for ((r = 1; r <= rounds; r++)); do printf ' | %-21s' "${results[$name,$r]}"; done
	printf ' | %s\n' "$( [ "$kind" = abort ] && echo "- (own verdict)" || echo "${unexpected[$name]}")"
done
echo "stress: total $(kvf_elapsed "$t_all") s"
echo "stress: $passed passed, $failed failed"
unknown_note=
[ "$unknown" -gt 0 ] && unknown_note=" ($unknown runs printed no room count)"
echo "stress: $unexpected_total rooms failed where none were meant to$unknown_note"
[ "$failed" = 0 ]
