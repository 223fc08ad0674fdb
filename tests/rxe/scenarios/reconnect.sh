#!/usr/bin/env bash
# Issue 13: a decode whose prefill is gone backs off instead of storming it
# with connection attempts (rdma.reconnect_backoff_ms), and connects again
# once the prefill is back.
#   reconnect.sh BUILD DEV0 ADDR0 DEV1 ADDR1 storm|recover
# storm: nothing listens on the port; the decode runs 2,000 rooms, one every
#   3 ms, window 32. Each room must fail connect_failed; connections started
#   stay within the backoff's schedule (100 ms doubling to 5 s); at most two
#   attempts hold buffers at once (each rdma.qps_per_peer QPs: conns_held
#   counts QPs); the rooms failed without an attempt
#   say why. Then the same without backoff (rdma.reconnect_backoff_ms = 0),
#   which must start many more: the figures of both are printed.
# recover: the decode starts first (a room every 20 ms); the prefill comes up
#   2.5 s later. The decode's rooms succeed again within the longest backoff
#   (5 s) of the prefill being ready, and every room after the first success
#   succeeds, every byte checked.
. "$(dirname "$0")/common.sh"
mode=${1:?storm|recover}
port=18761
engine_conf "$W/p.conf" prefill-rc prefill $port
engine_conf "$W/d.conf" decode-rc decode $port
shape=(--buffers 1 --block-size 4096 --blocks-per-room 1 --pool-blocks 400)

# decode_alone OUT ROOMS [--set ...]: the decode against a port nobody serves
decode_alone() {
	local out=$1 rooms=$2
	shift 2
	timeout -k 5 150 "$DRIVER" --role decode --config "$W/d.conf" "${shape[@]}" --rooms "$rooms" \
		--window 32 --pace-ms 3 --timeout 120 --leak-check "$@" > "$out" 2> "${out%.out}.log"
}

conns() { field "$(grep '^driver: conns' "$1")" "$2"; }

storm() {
	local n=2000 secs conn back held bound conn0 held0 qps
	decode_alone "$W/backoff.out" $n || { show "$W/backoff.out" "$W/backoff.log"; fail "decode driver failed"; }
	secs=$(summary "$W/backoff.out" seconds)
	conn=$(conns "$W/backoff.out" connects) back=$(conns "$W/backoff.out" backoffs)
	held=$(conns "$W/backoff.out" held_max)
	note "backoff 100 ms..5 s: $n rooms in $secs s: connects=$conn backoffs=$back held_max=$held; $(grep '^driver: leaks' "$W/backoff.out" | cut -d' ' -f2-4)"
	[ "$(summary "$W/backoff.out" failed)" = $n ] || fail "not every room failed"
	[ "$(grep -c 'reason=connect_failed' "$W/backoff.out")" = $n ] || fail "rooms failed for another reason than connect_failed"
	# attempts at 0, 0.1, 0.3, 0.7, 1.5, 3.1, 6.3 s, then one per 5 s (each
	# attempt's own time only makes them fewer)
	bound=$(awk -v s="$secs" 'BEGIN { print 8 + int(s / 5) }')
	[ "$conn" -le "$bound" ] || fail "$conn connections started in $secs s (the backoff allows $bound)"
	[ "$conn" -ge 2 ] || fail "only $conn connection started: no retry after the backoff"
	[ "$back" -ge $((n - 32 * conn)) ] || fail "backoffs=$back: rooms failed neither by an attempt nor by the backoff"
	qps=$(conf_qps "$W/d.conf") # the decode's QPs per attempt
	[ "$held" -le $((2 * qps)) ] || fail "$held QPs held buffers at once (two attempts of $qps QPs at most)"
	grep -q 'detail="not connecting to .* (rdma.reconnect_backoff_ms): .* the last: rejected by' "$W/backoff.out" ||
		{ grep -m3 FAILED "$W/backoff.out"; fail "no room failure names the backoff and the last failure"; }
	grep -q 'no new attempt for' "$W/backoff.log" || fail "the decode log does not say it backs off"

	decode_alone "$W/none.out" 600 --set rdma.reconnect_backoff_ms=0 --set rdma.reconnect_backoff_max_ms=0 ||
		{ show "$W/none.out" "$W/none.log"; fail "decode driver (no backoff) failed"; }
	conn0=$(conns "$W/none.out" connects) held0=$(conns "$W/none.out" held_max)
	note "no backoff: 600 rooms in $(summary "$W/none.out" seconds) s: connects=$conn0 backoffs=$(conns "$W/none.out" backoffs) held_max=$held0"
	[ "$conn0" -gt $((conn * 3)) ] || fail "without backoff only $conn0 connections were started (with it: $conn): the test shows nothing"
	pass "$n rooms to a port nobody serves: $conn connections started in $secs s (without backoff: $conn0 for 600 rooms), held at once <= $held"
}

recover() {
	local n=400 ready first lat after
	timeout -k 5 150 "$DRIVER" --role decode --config "$W/d.conf" "${shape[@]}" --rooms $n \
		--window 4 --pace-ms 20 --timeout 120 > "$W/decode.out" 2> "$W/decode.log" &
	CHILDREN+=($!)
	local dpid=$!
	sleep 2.5
	# bootstrap 30 s: rooms whose ROOM_INFO never came (their decode room
	# failed before the prefill was up) end by then
	timeout -k 5 150 "$DRIVER" --role prefill --config "$W/p.conf" "${shape[@]}" --rooms $n \
		--window $n --timeout 120 --set deadlines.bootstrap_s=30 --ready-file "$W/ready" \
		> "$W/prefill.out" 2> "$W/prefill.log" &
	CHILDREN+=($!)
	wait_file "$W/ready" 60 || fail "prefill not ready in 60 s"
	ready=$(now)
	wait "$dpid" || { show "$W/decode.out" "$W/decode.log"; fail "decode driver failed"; }
	first=$(grep -m1 ' SUCCESS ' "$W/decode.out")
	[ -n "$first" ] || { show "$W/decode.out" "$W/decode.log"; fail "no decode room succeeded after the prefill came up"; }
	lat=$(awk -v a="$(field "$first" t)" -v b="$ready" 'BEGIN { printf "%.2f", a - b }')
	after=$(sed -n "/$(field "$first" id) SUCCESS/,\$p" "$W/decode.out" | grep -c ' FAILED ')
	note "first SUCCESS $lat s after the prefill was ready; $(summary "$W/decode.out" ok) ok, $(summary "$W/decode.out" failed) failed (connect_failed $(grep -c 'reason=connect_failed' "$W/decode.out")); $(grep '^driver: conns' "$W/decode.out")"
	fgt 7 "$lat" || fail "the decode took $lat s to succeed again (the longest backoff is 5 s)"
	[ "$after" = 0 ] || { grep -m5 FAILED "$W/decode.out"; fail "$after rooms failed after the first success"; }
	[ "$(summary "$W/decode.out" bad_words)" = 0 ] || fail "wrong bytes at the decode"
	pass "reconnected $lat s after the prefill came up; every room after that succeeded"
}

case $mode in
storm) storm ;;
recover) recover ;;
*) fail "unknown mode $mode" ;;
esac
