#!/usr/bin/env bash
# Issue 8: an SGLang-shaped request stream between two processes
# (sglang_driver, prefill on DEV0, decode on DEV1): three regions (kv of
# 2 x 16 layer buffers with 2 KiB pages of 16 tokens, aux of three buffers of
# 16, 256 and 4096 bytes, state of two), requests of random length sent in
# 1-6 chunks, a random decode_prefix_len in the user data (those pages are
# not sent and must stay untouched at the decode), aux and state with the
# LAST chunk (for some requests with the chunk before it, and LAST is then
# the zero-length write-with-immediate alone). Modes:
#   stream N  N requests: every one SUCCESS on both sides, every byte of
#             every region checked at the decode, user data as planned
#   abort N   N requests, chunks 20 ms apart; the prefill aborts every 7th
#             after its first chunk, the decode every 7th (others) while the
#             chunks come: every room ends (SUCCESS, or FAILED as a local or
#             peer abort) and is released, the successes check
#   kill N    N requests, chunks 50 ms apart; the decode is SIGKILLed after
#             40 of them: every prefill room ends within the heartbeat
#             deadline as peer lost (or BOOTSTRAPPING, never bound), all
#             released
#   sglang.sh BUILD DEV0 ADDR0 DEV1 ADDR1 MODE N
. "$(dirname "$0")/common.sh"
mode=${1:?stream|abort|kill} n=${2:?requests}
SG=$BIN/sglang_driver
[ -x "$SG" ] || fail "not built: $SG"
case $mode in stream) port=18761 ;; abort) port=18762 ;; *) port=18763 ;; esac
HB_MS=1000 HB_MISSES=5
engine_conf "$W/p.conf" prefill-sg prefill $port
engine_conf "$W/d.conf" decode-sg decode $port
args=(--rooms "$n" --window 16 --layers 16 --page-bytes 2048 --max-pages 12 --seed 8 --timeout 400)
case $mode in
abort) args+=(--chunk-gap-ms 20 --abort-every 7) ;;
kill) args+=(--chunk-gap-ms 50) ;;
esac
popt=()
[ "$mode" = kill ] && popt=(--stop-on-lost 8)

note "prefill on $DEV0 $ADDR0, decode on $DEV1 $ADDR1; $mode, $n requests"
timeout -k 5 450 "$SG" --role prefill --config "$W/p.conf" "${args[@]}" "${popt[@]}" \
	--ready-file "$W/ready" > "$W/prefill.out" 2> "$W/prefill.log" &
ppid=$!
CHILDREN+=("$ppid")
wait_file "$W/ready" 60 || { show "$W/prefill.out" "$W/prefill.log"; fail "prefill not ready in 60 s"; }
timeout -k 5 450 "$SG" --role decode --config "$W/d.conf" "${args[@]}" \
	> "$W/decode.out" 2> "$W/decode.log" &
dpid=$!
CHILDREN+=("$dpid")

if [ "$mode" = kill ]; then
	wait_lines "$W/decode.out" ' SUCCESS ' 40 120 ||
		{ show "$W/decode.out" "$W/decode.log"; fail "the decode did not get 40 rooms in 120 s"; }
	vchild=$(pgrep -P "$dpid" | head -n1)
	[ -n "$vchild" ] || fail "no decode process under pid $dpid"
	tk=$(now)
	kill -KILL "$vchild"
	note "SIGKILL to the decode at t=$tk, mid-chunking"
	wait "$ppid"
	prc=$?
	wait "$dpid" 2> /dev/null
	CHILDREN=()
	grep '^driver:' "$W/prefill.out"
	[ "$prc" = 0 ] || { show "$W/prefill.out" "$W/prefill.log"; fail "prefill driver exit $prc"; }
	limit=$(awk -v a=$HB_MS -v b=$HB_MISSES 'BEGIN { print a * b / 1000 + 3 }')
	bad=$(rooms_after_kill "$W/prefill.out" "$tk" "$limit")
	mid=$(grep 'reason=peer_lost' "$W/prefill.out" | grep -cE 'from=(TRANSFERRING|WAITING_FOR_INPUT)')
	[ -z "$bad" ] || { echo "$bad" | head -n 20; fail "$(wc -l <<< "$bad") prefill rooms not as expected"; }
	[ "$mid" -ge 1 ] || fail "no prefill room was mid-transfer when the decode died"
	[ "$(summary "$W/prefill.out" released)" = "$(summary "$W/prefill.out" created)" ] ||
		fail "not every prefill room released"
	pass "decode killed mid-chunking: $(grep -c 'reason=peer_lost' "$W/prefill.out") prefill rooms FAILED (peer lost, $mid of them mid-transfer) within $limit s; all $(summary "$W/prefill.out" released) released"
fi

wait "$dpid"
drc=$?
wait "$ppid"
prc=$?
CHILDREN=()
grep '^driver:' "$W/prefill.out" "$W/decode.out"
[ "$drc" = 0 ] || { show "$W/decode.out" "$W/decode.log"; fail "decode driver exit $drc"; }
[ "$prc" = 0 ] || { show "$W/prefill.out" "$W/prefill.log"; fail "prefill driver exit $prc"; }
for side in prefill decode; do
	f=$W/$side.out
	[ "$(summary "$f" released)" = "$n" ] || fail "$side: $(summary "$f" released) of $n released"
	[ "$(summary "$f" bad_bytes)" = 0 ] || { grep ' bad=[1-9]' "$f" | head; fail "$side: bad bytes"; }
	[ "$(summary "$f" user_bad)" = 0 ] || fail "$side: user data or kv counts not as planned"
done
checked=$(summary "$W/decode.out" checked_bytes)
case $mode in
stream)
	for side in prefill decode; do
		[ "$(summary "$W/$side.out" ok)" = "$n" ] ||
			{ grep FAILED "$W/$side.out" | head; fail "$side: $(summary "$W/$side.out" ok) of $n SUCCESS"; }
	done
	# what the stream exercised, from the decode's lines
	shape=$(awk '/ SUCCESS / { for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		c[v["chunks"]]++; if (v["prefix"] > 0) p++; if (v["prefix"] == v["pages"]) a++
		if (v["last_pages"] == 0) l++; if (v["bare_last"] == 1) z++ }
		END { printf "chunks 1..6: %d %d %d %d %d %d; with a prefix %d, all prefix (no kv sent) %d, LAST without pages %d, LAST without any part (zero-length write-with-immediate) %d",
		      c[1], c[2], c[3], c[4], c[5], c[6], p, a, l, z }' "$W/decode.out")
	note "$shape"
	pass "$n requests SUCCESS on both sides in $(summary "$W/decode.out" seconds) s; $checked bytes checked at the decode, 0 bad ($shape)" ;;
abort)
	other=$(grep FAILED "$W/prefill.out" "$W/decode.out" | grep -vE 'reason=(local_abort|peer_abort) ')
	[ -z "$other" ] || { echo "$other" | head; fail "failures other than aborts"; }
	pa=$(grep -c 'reason=local_abort' "$W/prefill.out")
	da=$(grep -c 'reason=local_abort' "$W/decode.out")
	[ "$pa" -ge 1 ] && [ "$da" -ge 1 ] || fail "aborts did not happen (prefill $pa, decode $da)"
	pass "$n requests ended: $(summary "$W/decode.out" ok) SUCCESS at the decode ($checked bytes checked, 0 bad), aborted by the prefill $pa, by the decode $da; all released on both sides" ;;
esac
