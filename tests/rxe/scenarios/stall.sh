#!/usr/bin/env bash
# Issue 22: a busy scheduler is not a dead peer. Two processes (kvf_driver),
# prefill on DEV0, decode on DEV1, 100 rooms; once the STALLER has 40 rooms
# terminal its scheduler stops calling the engine (no progress, no poll) for
# 3 x the detection time (heartbeat 1000 ms x 5 = 5 s: a 15 s stall) with
# rooms in flight, while its peer runs on. The liveness of the link comes
# from the pollers (docs/design.md, "Liveness"), so:
#   - neither side declares the other lost (no "nothing heard", no peer_lost);
#   - every room of both sides succeeds, or fails only by its own deadline
#     (reason deadline: none is expected at 120 s);
#   - every byte landed right, every room released.
#   stall.sh BUILD DEV0 ADDR0 DEV1 ADDR1 prefill|decode [ROOMS]
. "$(dirname "$0")/common.sh"
staller=${1:?prefill|decode} rooms=${2:-100}
HB_MS=1000 HB_MISSES=5
detect_ms=$((HB_MS * HB_MISSES))
stall_ms=$((3 * detect_ms))
after=$((rooms * 2 / 5))
case $staller in prefill) port=18801 ;; decode) port=18802 ;; *) fail "prefill|decode, not $staller" ;; esac
engine_conf "$W/p.conf" prefill-s prefill $port
engine_conf "$W/d.conf" decode-s decode $port
shape=(--rooms "$rooms" --buffers 4 --block-size 16384 --blocks-per-room 4 --window 16 --timeout 150)
stall=(--stall-ms "$stall_ms" --stall-after "$after")
popt=() dopt=()
if [ "$staller" = prefill ]; then popt=("${stall[@]}"); peer=decode; else dopt=("${stall[@]}"); peer=prefill; fi

note "prefill on $DEV0 $ADDR0, decode on $DEV1 $ADDR1; $rooms rooms; the $staller's scheduler" \
	"stops for $stall_ms ms after $after rooms (3 x the detection time, heartbeat $HB_MS ms x $HB_MISSES)"
timeout -k 5 240 "$DRIVER" --role prefill --config "$W/p.conf" "${shape[@]}" "${popt[@]}" \
	--ready-file "$W/ready" > "$W/prefill.out" 2> "$W/prefill.log" &
ppid=$!
CHILDREN+=("$ppid")
wait_file "$W/ready" 30 || { show "$W/prefill.out" "$W/prefill.log"; fail "prefill not ready in 30 s"; }
timeout -k 5 240 "$DRIVER" --role decode --config "$W/d.conf" "${shape[@]}" "${dopt[@]}" \
	> "$W/decode.out" 2> "$W/decode.log" &
dpid=$!
CHILDREN+=("$dpid")
wait "$dpid"
drc=$?
wait "$ppid"
prc=$?
CHILDREN=()
sout=$W/$staller.out
grep '^driver: stall' "$sout"
for side in prefill decode; do grep '^driver: role=.* rooms=' "$W/$side.out"; done
# nothing heard, or a connection down before the first driver was done (the
# first to finish disconnects: the other logs that, after its own end)
done_t=$(for side in prefill decode; do summary "$W/$side.out" end; done | sort -n | head -n 1)
lost=$(awk -v end="${done_t:-0}" '/nothing heard/ { print; next }
	/down in|disconnected/ { t = $0; sub(/^\[ */, "", t); sub(/\].*/, "", t); if (t + 0 < end + 0) print }' \
	"$W/prefill.log" "$W/decode.log")
[ -z "$lost" ] || { echo "$lost" | head -n 5; fail "a connection was declared lost or went down during the run"; }
[ "$drc" = 0 ] && [ "$prc" = 0 ] || { show "$W/prefill.out" "$W/decode.out" "$W/prefill.log" "$W/decode.log"; fail "driver exit: prefill $prc, decode $drc"; }
b=$(grep '^driver: stall begin' "$sout") e=$(grep '^driver: stall end' "$sout")
[ -n "$b" ] && [ -n "$e" ] || fail "the $staller never stalled (fewer than $after rooms terminal?)"
inflight=$(( $(field "$b" created) - $(field "$b" terminal) ))
[ "$inflight" -gt 0 ] || fail "no room in flight when the $staller stalled: $b"
took=$(field "$e" ms)
fgt "$took" $((stall_ms - 1)) || fail "the stall lasted $took ms, not $stall_ms"
# the poller kept the link alive: about one HEARTBEAT a second meanwhile
# (half of them at least: a starved guest's poller may be late)
ka=$(field "$e" keepalives_sent) kl=$(field "$e" keepalives_late)
[ "${ka:-0}" -ge $((stall_ms / HB_MS / 2)) ] ||
	fail "the $staller's poller sent ${ka:-no} keepalives in the ${took} ms stall"
# every room: SUCCESS, or FAILED by its own deadline (with that reason)
for side in prefill decode; do
	others=$(grep '^room .* FAILED ' "$W/$side.out" | grep -v 'reason=deadline ')
	[ -z "$others" ] || { echo "$others" | head -n 10; fail "$side rooms failed other than by their deadline"; }
	[ "$(summary "$W/$side.out" released)" = "$rooms" ] || fail "$side: not every room released"
	[ "$(summary "$W/$side.out" bad_words)" = 0 ] || fail "$side: destination words wrong"
done
pok=$(summary "$W/prefill.out" ok) dok=$(summary "$W/decode.out" ok)
pf=$(summary "$W/prefill.out" failed) df=$(summary "$W/decode.out" failed)
grep -h '^driver: keepalives' "$W/prefill.out" "$W/decode.out"
pass "the $staller's scheduler away ${took} ms with $inflight rooms in flight, peer healthy:" \
	"prefill $pok ok / $pf failed (deadline), decode $dok ok / $df failed (deadline), no peer lost;" \
	"its poller sent $ka keepalives meanwhile ($kl late)"
