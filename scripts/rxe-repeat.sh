#!/usr/bin/env bash
# Flake hunting: run rxe scenarios N times while HOGS busy loops load the
# CPUs, and count the runs that failed. Run it where the rxe devices are
# (in the guest: scripts/rxe-vm.sh --devices 2 --rw -- scripts/rxe-repeat.sh ...).
#
#   scripts/rxe-repeat.sh N HOGS [FILTER]
#
# FILTER is tests/rxe/run.sh's -k (a substring of the scenario names; none:
# the whole suite). A failed run's log tail is printed; the last line is
# "repeat: FILTER xN hogs=HOGS: passed P failed F". Exit 1 if any failed.
set -uo pipefail
n=${1:?N runs} hogs=${2:?HOGS busy loops} filter=${3-}
cd "$(dirname "$0")/.." || exit 2
pids=()
for ((h = 0; h < hogs; h++)); do
	(while :; do :; done) &
	pids+=($!)
done
trap 'kill "${pids[@]}" 2> /dev/null' EXIT
pass=0 fail=0 log=$(mktemp)
for ((i = 0; i < n; i++)); do
	if tests/rxe/run.sh ${filter:+-k "$filter"} > "$log" 2>&1; then
		pass=$((pass + 1))
	else
		fail=$((fail + 1))
		echo "---- run $((i + 1)) failed:"
		grep -E '^(FAIL|rxe:)' "$log"
		tail -n 30 "$log"
	fi
done
rm -f "$log"
echo "repeat: ${filter:-all} x$n hogs=$hogs: passed $pass failed $fail"
[ "$fail" = 0 ]
