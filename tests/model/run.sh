#!/usr/bin/env bash
# Checks the room protocol model (room.pml) with spin: the model must hold,
# and each mutant (one rule broken on purpose) must be caught.
# Prints "model: N passed, N failed".
set -u
here=$(cd "$(dirname "$0")" && pwd -P)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
command -v spin >/dev/null || { echo "model: spin not installed (apt-get install spin)"; echo "model: 0 passed, 1 failed"; exit 1; }

pass=0 fail=0
# check NAME EXPECT ["-DMACRO ..."]: EXPECT is "holds" or "violated"
check() {
	local name=$1 expect=$2 def=${3:-} out errors
	mkdir -p "$work/$name" && cd "$work/$name" || return
	if ! spin -a $def "$here/room.pml" >spin.log 2>&1 || ! cc -O2 -DSAFETY -o pan pan.c >cc.log 2>&1; then
		echo "FAIL $name (spin/cc: $(tail -n1 spin.log cc.log | tr '\n' ' '))"; fail=$((fail + 1)); return
	fi
	out=$(./pan -m100000 2>&1)
	errors=$(printf '%s\n' "$out" | sed -n 's/.*errors: \([0-9]*\).*/\1/p')
	states=$(printf '%s\n' "$out" | sed -n 's/^ *\([0-9]*\) states, stored.*/\1/p')
	if { [ "$expect" = holds ] && [ "$errors" = 0 ]; } ||
	   { [ "$expect" = violated ] && [ -n "$errors" ] && [ "$errors" != 0 ]; }; then
		echo "PASS $name ($expect; $states states, errors: $errors)"; pass=$((pass + 1))
	else
		echo "FAIL $name (expected $expect, spin says errors: ${errors:-?})"
		printf '%s\n' "$out" | grep -E 'assert|violated|invalid end' | head -3
		fail=$((fail + 1))
	fi
}

check protocol holds
check mutant_no_ack_wait violated -DMUTANT_NO_ACK_WAIT
check mutant_no_teardown violated -DMUTANT_NO_TEARDOWN
check mutant_early_ack_no_cancel violated "-DMUTANT_EARLY_ACK -DMUTANT_NO_CANCEL"
check mutant_release_undrained violated "-DMUTANT_RELEASE_UNDRAINED -DMUTANT_EARLY_ACK"
echo "model: $pass passed, $fail failed"
[ "$fail" = 0 ]
