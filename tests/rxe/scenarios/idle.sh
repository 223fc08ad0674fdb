#!/usr/bin/env bash
# Issue 42, "idle connections closed": a decode's peer connection that no
# room has used for rdma.idle_close_s is closed, cleanly (no room fails),
# and the next room opens a new one.
#   idle.sh BUILD DEV0 ADDR0 DEV1 ADDR1
# 1. three rooms 4 s apart, idle_close_s 1: each room after the first finds
#    its connection closed (the decode logs it; a new connection each time),
#    every room SUCCESS on both sides, every byte checked;
# 2. the race: twelve rooms 1.15 s apart with idle_close_s 1, so rooms are
#    created around the moment a connection closes: every room SUCCESS.
. "$(dirname "$0")/common.sh"
port=18771
engine_conf "$W/p.conf" prefill-idle prefill $port
engine_conf "$W/d.conf" decode-idle decode $port
shape=(--buffers 2 --block-size 4096 --blocks-per-room 2)

# phase NAME ROOMS PACE_MS: both sides, rooms paced on the decode
phase() {
	local name=$1 n=$2 pace=$3
	timeout -k 5 100 "$DRIVER" --role prefill --config "$W/p.conf" "${shape[@]}" --rooms "$n" \
		--window 1 --timeout 90 --first-id $((0x1000 + ${4:-0})) --ready-file "$W/$name.ready" \
		> "$W/$name-p.out" 2> "$W/$name-p.log" &
	CHILDREN+=($!)
	local ppid=$!
	wait_file "$W/$name.ready" 30 || fail "$name: prefill not ready in 30 s"
	timeout -k 5 100 "$DRIVER" --role decode --config "$W/d.conf" "${shape[@]}" --rooms "$n" \
		--window 1 --pace-ms "$pace" --timeout 90 --first-id $((0x1000 + ${4:-0})) \
		--set rdma.idle_close_s=1 > "$W/$name-d.out" 2> "$W/$name-d.log" ||
		{ show "$W/$name-d.out" "$W/$name-d.log"; fail "$name: decode driver failed"; }
	wait "$ppid" || { show "$W/$name-p.out" "$W/$name-p.log"; fail "$name: prefill driver failed"; }
	[ "$(summary "$W/$name-d.out" ok)" = "$n" ] || { show "$W/$name-d.out"; fail "$name: decode ok $(summary "$W/$name-d.out" ok) of $n"; }
	[ "$(summary "$W/$name-p.out" ok)" = "$n" ] || { show "$W/$name-p.out"; fail "$name: prefill ok $(summary "$W/$name-p.out" ok) of $n"; }
	[ "$(summary "$W/$name-d.out" bad_words)" = 0 ] || fail "$name: wrong bytes at the decode"
}

phase spaced 3 4000
closed=$(grep -c 'closed: idle: no room for 1 s (rdma.idle_close_s)' "$W/spaced-d.log")
conns=$(field "$(grep '^driver: conns' "$W/spaced-d.out")" connects)
note "spaced: 3 rooms 4 s apart: $closed idle closes, $conns connections started"
[ "$closed" -ge 2 ] || { show "$W/spaced-d.log"; fail "spaced: $closed idle closes (at least 2: after rooms 1 and 2)"; }
[ "$conns" -ge 3 ] || fail "spaced: $conns connections started (a new one per room after a close)"
grep -q 'down in ESTABLISHED: peer disconnected' "$W/spaced-p.log" ||
	{ show "$W/spaced-p.log"; fail "spaced: the prefill did not see the decode close"; }

phase race 12 1150 64
closed2=$(grep -c 'closed: idle' "$W/race-d.log")
note "race: 12 rooms 1.15 s apart: $closed2 idle closes, every room SUCCESS"
pass "idle close: $closed closes between spaced rooms, $closed2 in the race; every room SUCCESS on both sides"
