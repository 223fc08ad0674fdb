#!/usr/bin/env bash
# Checks the spin models of tests/model: each must hold, and each mutant
# (one rule broken on purpose) must be caught.
#   room.pml    the room protocol, one room over one RC connection
#   queues.pml  the rail's shared receive queue (default) and a shared
#               send CQ (-DSEND_CQ)
#   idle.pml    idle close racing new rooms on the decode
# Prints "PASS name (...)" or "FAIL name (...)" per check, then
# "model: N passed, N failed" (scripts/test.sh reads that last line).
set -u
here=$(cd "$(dirname "$0")" && pwd -P)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
command -v spin >/dev/null || { echo "model: spin not installed (apt-get install spin)"; echo "model: 0 passed, 1 failed"; exit 1; }

# Every model is small: its whole state space fits well within these, in
# seconds. A search cut short by either would prove nothing, so it fails.
depth=100000   # pan -m: steps on one path
memlim=1024    # MiB pan may use (-DMEMLIM)

pass=0 fail=0
# check MODEL NAME EXPECT ["-DMACRO ..."]: EXPECT is "holds" or "violated"
check() {
	local model=$1 name=$2 expect=$3 def=${4:-} out errors states secs
	mkdir -p "$work/$name" && cd "$work/$name" || return
	if ! spin -a $def "$here/$model" >spin.log 2>&1 ||
	   ! cc -O2 -DSAFETY -DMEMLIM=$memlim -o pan pan.c >cc.log 2>&1; then
		echo "FAIL $name (spin/cc: $(tail -n1 spin.log cc.log | tr '\n' ' '))"; fail=$((fail + 1)); return
	fi
	out=$(./pan -m$depth 2>&1)
	errors=$(printf '%s\n' "$out" | sed -n 's/.*errors: \([0-9]*\).*/\1/p')
	states=$(printf '%s\n' "$out" | sed -n 's/^ *\([0-9]*\) states, stored.*/\1/p')
	secs=$(printf '%s\n' "$out" | sed -n 's/^pan: elapsed time \([0-9.e+-]*\) seconds.*/\1/p')
	if [ "$expect" = holds ] && printf '%s\n' "$out" | grep -qE 'max search depth too small|out of memory|memory limit'; then
		echo "FAIL $name (search cut short: $(printf '%s\n' "$out" | grep -m1 -E 'depth too small|memory'))"
		fail=$((fail + 1)); return
	fi
	if { [ "$expect" = holds ] && [ "$errors" = 0 ]; } ||
	   { [ "$expect" = violated ] && [ -n "$errors" ] && [ "$errors" != 0 ]; }; then
		echo "PASS $name ($model, $expect; $states states, errors: $errors, ${secs:-?} s)"; pass=$((pass + 1))
	else
		echo "FAIL $name ($model: expected $expect, spin says errors: ${errors:-?})"
		printf '%s\n' "$out" | grep -E 'assert|violated|invalid end' | head -3
		fail=$((fail + 1))
	fi
}

check room.pml protocol holds
check room.pml mutant_no_ack_wait violated -DMUTANT_NO_ACK_WAIT
check room.pml mutant_no_teardown violated -DMUTANT_NO_TEARDOWN
check room.pml mutant_early_ack_no_cancel violated "-DMUTANT_EARLY_ACK -DMUTANT_NO_CANCEL"
check room.pml mutant_release_undrained violated "-DMUTANT_RELEASE_UNDRAINED -DMUTANT_EARLY_ACK"
check queues.pml shared_rx holds
check queues.pml mutant_rx_cq_small violated -DMUTANT_RX_CQ_SMALL
check queues.pml shared_send_cq holds -DSEND_CQ
check queues.pml mutant_slot_early violated "-DSEND_CQ -DMUTANT_SLOT_EARLY"
check queues.pml mutant_no_sig_cap violated "-DSEND_CQ -DMUTANT_NO_SIG_CAP"
check idle.pml idle_close holds
check idle.pml mutant_take_closing violated -DMUTANT_TAKE_CLOSING
echo "model: $pass passed, $fail failed"
[ "$fail" = 0 ]
