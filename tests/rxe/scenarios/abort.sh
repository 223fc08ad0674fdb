#!/usr/bin/env bash
# Issue 4: abort mid-transfer from either side (kvferry-bench --abort-every
# N --abort-side SIDE, one process so both sides' counts are printed).
# Both sides end every room terminal and released (kvferry-bench releases a
# room only when kvf_release says it is quiescent; it exits on its timeout
# otherwise), the failed counts are > 0 and equal on both sides,
# ok + failed = rooms on each side, no destination byte is wrong.
#   abort.sh BUILD DEV0 ADDR0 DEV1 ADDR1 prefill|decode [ROOMS] [EVERY]
. "$(dirname "$0")/common.sh"
side=${1:?prefill|decode} rooms=${2:-210} every=${3:-7}
DEV1=$DEV0 ADDR1=$ADDR0
engine_conf "$W/p.conf" prefill-a prefill 18711
engine_conf "$W/d.conf" decode-a decode 18711
note "one process on $DEV0: $rooms rooms of 8 x 8 x 16 KiB, abort every ${every}th on the $side side"
timeout -k 5 200 "$BENCH" --prefill-config "$W/p.conf" --decode-config "$W/d.conf" --rooms "$rooms" \
	--buffers 8 --blocks-per-room 8 --block-size 16384 --abort-every "$every" --abort-side "$side" --verify inline --no-progress \
	--timeout 150 > "$W/out" 2> "$W/err"
rc=$?
cat "$W/out"
pl=$(grep '^  prefill:' "$W/out") dl=$(grep '^  decode:' "$W/out")
pok=$(awk '{print $2}' <<< "$pl") pf=$(awk '{print $4}' <<< "$pl")
dok=$(awk '{print $2}' <<< "$dl") df=$(awk '{print $4}' <<< "$dl") bad=$(awk '{print $6}' <<< "$dl")
[ $rc = 0 ] || { show "$W/err"; fail "kvferry-bench exit $rc (timeout or a room that should not fail)"; }
[ -n "$pf" ] && [ -n "$df" ] || fail "no counts in the output"
[ "$pf" -gt 0 ] && [ "$df" -gt 0 ] || [ "$side" = prefill ] || fail "no room failed (aborts did not happen)"
[ "$pf" -gt 0 ] || fail "no room failed on the prefill side"
[ $((pok + pf)) = "$rooms" ] || fail "prefill ok $pok + failed $pf != $rooms"
[ $((dok + df)) = "$rooms" ] || fail "decode ok $dok + failed $df != $rooms"
[ "$bad" = 0 ] || fail "$bad destination words wrong"
# Every aborted room fails on the aborting side. The other side fails it
# too unless the room's data had already landed there: a prefill abort
# right after posting cannot recall the posted write-with-immediate, so
# the decode may see SUCCESS for it (with every byte right, checked above).
# A decode abort is seen by the prefill before it is done, so both agree.
want=$((rooms / every))
[ "$side" = prefill ] && { [ "$pf" = "$want" ] || fail "prefill failed $pf rooms, $want were aborted"; }
[ "$side" = decode ] && { [ "$df" = "$want" ] || fail "decode failed $df rooms, $want were aborted"; }
if [ "$side" = decode ] && [ "$pf" != "$df" ]; then
	show "$W/err"
	fail "the sides disagree: prefill $pf failed, decode $df failed"
fi
[ "$df" -le "$pf" ] || [ "$side" = decode ] || fail "decode failed $df rooms, more than the $pf the prefill aborted"
[ "$pf" = "$df" ] || note "prefill aborted $pf rooms; $((pf - df)) of them had already landed at the decode (SUCCESS there, bytes checked)"
lr=$(grep -c 'FAILED: local abort' "$W/err") pr=$(grep -c 'FAILED: peer abort' "$W/err")
note "rooms failed: local abort $lr, peer abort $pr (log lines)"
pass "$side aborts: prefill $pf failed / $pok ok, decode $df failed / $dok ok, every room released, 0 bad words"
