#!/usr/bin/env bash
# Issue 8, "GPU memory without GPUDirect": the SGLang-shaped stream of
# sglang.sh with the prefill's kv region sent through host staging slots
# (KVF_TEST_STAGE_REGIONS=kv, the test hook: a host region takes the
# staging path with the memcpy copier, so slots, waits, writes posted after
# the copy, counting and aborts while staged all run on soft-RoCE without a
# GPU). The decode registers its kv region as usual (a receiver cannot be
# staged). Modes:
#   stream N  N requests, staging_pool_mb 2 (8 slots of 256 KiB, a chunk
#             takes up to 3, 16 requests at a time): every request SUCCESS on both sides, every
#             byte checked at the decode, staged bytes > 0 and equal to the
#             kv bytes the prefill handed over, chunks waited for slots,
#             every slot back at the end
#   abort N   staging_pool_mb 1 (4 slots); N requests, chunks 20 ms apart, aborts from both sides while
#             chunks wait for slots or their copy; then 4 N more with the
#             decode SIGKILLed after 15: every room ends in bounded time
#             (aborts / peer lost only), all released, every slot back
#   stage.sh BUILD DEV0 ADDR0 DEV1 ADDR1 MODE N
. "$(dirname "$0")/common.sh"
mode=${1:?stream|abort} n=${2:?requests}
SG=$BIN/sglang_driver
[ -x "$SG" ] || fail "not built: $SG"
HB_MS=1000 HB_MISSES=5
args=(--layers 16 --page-bytes 2048 --max-pages 12 --seed 88 --timeout 280)

# run_pair TAG PORT [DRIVER ARGS...]: both sides in the background; the
# prefill stages its kv region. Sets ppid, dpid.
run_pair() {
	local tag=$1 port=$2
	shift 2
	engine_conf "$W/$tag.p.conf" "prefill-$tag" prefill "$port" "staging_pool_mb = $STAGE_MB;"
	engine_conf "$W/$tag.d.conf" "decode-$tag" decode "$port"
	KVF_TEST_STAGE_REGIONS=kv timeout -k 5 300 "$SG" --role prefill \
		--config "$W/$tag.p.conf" "${args[@]}" "$@" --ready-file "$W/$tag.ready" \
		> "$W/$tag.prefill.out" 2> "$W/$tag.prefill.log" &
	ppid=$!
	CHILDREN+=("$ppid")
	wait_file "$W/$tag.ready" 60 ||
		{ show "$W/$tag.prefill.out" "$W/$tag.prefill.log"; fail "$tag: prefill not ready in 60 s"; }
	timeout -k 5 300 "$SG" --role decode --config "$W/$tag.d.conf" "${args[@]}" "$@" \
		> "$W/$tag.decode.out" 2> "$W/$tag.decode.log" &
	dpid=$!
	CHILDREN+=("$dpid")
}

stg() { field "$(grep '^driver: staging' "$1" | tail -n1)" "$2"; }

# staged_ok TAG: the prefill staged (log line, counters), every slot back
staged_ok() {
	local f=$W/$1.prefill.out
	grep -q "region 'kv': 32 of 32 buffers staged through registered host memory" \
		"$W/$1.prefill.log" || { show "$W/$1.prefill.log"; fail "$1: no staging log line"; }
	grep '^driver: staging' "$W/$1.prefill.out"
	[ "$(stg "$f" staged_chunks)" -gt 0 ] 2> /dev/null || fail "$1: nothing was staged"
	[ "$(stg "$f" slots_busy)" = 0 ] || fail "$1: $(stg "$f" slots_busy) staging slots not back"
}

# both_end TAG: both drivers exited 0, every room released on both sides
both_end() {
	local drc prc side killed=false
	case $1 in kill*) killed=true ;; esac # its decode was SIGKILLed
	wait "$dpid"; drc=$?
	wait "$ppid"; prc=$?
	CHILDREN=()
	grep '^driver: role=' "$W/$1.prefill.out" "$W/$1.decode.out"
	[ "$prc" = 0 ] || { show "$W/$1".*; fail "$1: prefill exit $prc"; }
	[ "$drc" = 0 ] || $killed ||
		{ show "$W/$1".*; fail "$1: decode exit $drc"; }
	for side in prefill decode; do
		$killed && [ $side = decode ] && continue
		f=$W/$1.$side.out
		[ "$(summary "$f" released)" = "$(summary "$f" created)" ] ||
			fail "$1 $side: $(summary "$f" released) of $(summary "$f" created) released"
		[ "$(summary "$f" bad_bytes)" = 0 ] || { grep ' bad=[1-9]' "$f" | head; fail "$1 $side: bad bytes"; }
	done
}

# kill_decode TAG PORT: a pair whose decode is SIGKILLed once it has 15
# rooms; every prefill room after the kill ends peer_lost within the
# detection time (or SUCCESS, or never bound). 1 when none was lost.
kill_decode() {
	local tag=$1 vchild tk bad
	run_pair "$tag" "$2" --rooms $((n * 4)) --window 16 --chunk-gap-ms 50 --stop-on-lost 8
	wait_lines "$W/$tag.decode.out" ' SUCCESS ' 15 90 ||
		{ show "$W/$tag.decode.out" "$W/$tag.decode.log"; fail "the decode did not get 15 rooms in 90 s"; }
	vchild=$(pgrep -P "$dpid" | head -n1)
	[ -n "$vchild" ] || fail "no decode process under pid $dpid"
	tk=$(now)
	kill -KILL "$vchild"
	note "$tag: SIGKILL to the decode at t=$tk, chunks staged or waiting for slots"
	both_end "$tag"
	limit=$(awk -v a=$HB_MS -v b=$HB_MISSES 'BEGIN { print a * b / 1000 + 3 }')
	bad=$(rooms_after_kill "$W/$tag.prefill.out" "$tk" "$limit")
	[ -z "$bad" ] || { echo "$bad" | head -n 20; fail "$(wc -l <<< "$bad") prefill rooms not as expected"; }
	grep -q 'reason=peer_lost' "$W/$tag.prefill.out"
}

case $mode in
stream)
	t0=$(now)
	STAGE_MB=2
	run_pair stream 18771 --rooms "$n" --window 16
	both_end stream
	for side in prefill decode; do
		[ "$(summary "$W/stream.$side.out" ok)" = "$n" ] ||
			{ grep FAILED "$W/stream.$side.out" | head; fail "$side: $(summary "$W/stream.$side.out" ok) of $n SUCCESS"; }
	done
	staged_ok stream
	f=$W/stream.prefill.out
	[ "$(stg "$f" staged_bytes)" = "$(stg "$f" kv_sent_bytes)" ] ||
		fail "staged $(stg "$f" staged_bytes) bytes, but the prefill handed over $(stg "$f" kv_sent_bytes) kv bytes"
	[ "$(stg "$f" stage_waits)" -gt 0 ] || fail "no chunk waited for slots (8 slots, window 16)"
	pass "$n requests SUCCESS on both sides in $(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }') s with kv staged: $(stg "$f" staged_bytes) bytes in $(stg "$f" staged_chunks) chunks (= the kv bytes sent), $(stg "$f" stage_waits) waits for slots, $(summary "$W/stream.decode.out" checked_bytes) bytes checked at the decode, 0 bad, all slots back" ;;
abort)
	t0=$(now)
	STAGE_MB=1
	run_pair abort 18772 --rooms "$n" --window 16 --chunk-gap-ms 20 --abort-every 7
	both_end abort
	other=$(grep -h FAILED "$W/abort.prefill.out" "$W/abort.decode.out" | grep -vE 'reason=(local_abort|peer_abort) ')
	[ -z "$other" ] || { echo "$other" | head; fail "abort: failures other than aborts"; }
	pa=$(grep -c 'reason=local_abort' "$W/abort.prefill.out")
	da=$(grep -c 'reason=local_abort' "$W/abort.decode.out")
	[ "$pa" -ge 1 ] && [ "$da" -ge 1 ] || fail "aborts did not happen (prefill $pa, decode $da)"
	staged_ok abort
	ta=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
	note "aborts: $(summary "$W/abort.decode.out" ok) SUCCESS, aborted by the prefill $pa, by the decode $da, in $ta s"

	# enough requests that the decode is still busy when 15 have ended. The
	# kill can miss: the decode's SUCCESS lines lag its prefill, which on a
	# loaded guest may have finished every room whose ROOM_INFO it had, its
	# live ones all BOOTSTRAPPING (nothing on the connection to lose). That
	# attempt checks everything else and is run again (3 at most); a wrong
	# outcome in any attempt fails at once.
	for try in 1 2 3; do
		kill_decode "kill$try" $((18773 + 10 * try)) && break
		[ $try = 3 ] && fail "no prefill room was lost with the decode in 3 attempts (none bound at the kill)"
		note "attempt $try: no prefill room was bound to the connection at the kill; again"
	done
	tag=kill$try
	lost=$(grep -c 'reason=peer_lost' "$W/$tag.prefill.out")
	staged_ok "$tag"
	pass "aborts ($n requests: prefill $pa, decode $da aborted, $ta s) and a decode kill (attempt $try: $lost prefill rooms peer lost within $limit s): every room ended and released, staged $(stg "$W/abort.prefill.out" staged_chunks) + $(stg "$W/$tag.prefill.out" staged_chunks) chunks, $(stg "$W/abort.prefill.out" stage_waits) + $(stg "$W/$tag.prefill.out" stage_waits) waits, all slots back" ;;
*) fail "mode: stream or abort" ;;
esac
