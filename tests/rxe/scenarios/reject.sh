#!/usr/bin/env bash
# Issue 4: a wrong auth token between two real engines (kvf_driver both
# sides): the connect is accepted, the decode's proof of its token
# (docs/wire.md 4.4) is refused by the prefill, every decode room FAILED
# (connect failed), the reason is logged on both sides, and each side
# counted it (the decode: refused by the peer).
# (A wrong protocol version needs a peer that speaks another: fake_peer.sh
# bad-version.)
#   reject.sh BUILD DEV0 ADDR0 DEV1 ADDR1
. "$(dirname "$0")/common.sh"
TOKEN=right engine_conf "$W/p.conf" prefill-r prefill 18731
TOKEN=wrong engine_conf "$W/d.conf" decode-r decode 18731
shape=(--rooms 3 --buffers 2 --block-size 16384 --blocks-per-room 2 --timeout 30)
timeout -k 5 40 "$DRIVER" --role prefill --config "$W/p.conf" "${shape[@]}" --ready-file "$W/ready" \
	> "$W/prefill.out" 2> "$W/prefill.log" &
CHILDREN+=($!)
wait_file "$W/ready" 30 || fail "prefill not ready"
timeout -k 5 40 "$DRIVER" --role decode --config "$W/d.conf" "${shape[@]}" > "$W/decode.out" 2> "$W/decode.log"
drc=$?
sleep 0.5
stop_children
grep -E '^(room|driver)' "$W/decode.out"
pr=$(grep -m1 'refused connection' "$W/prefill.log")
dr=$(grep -m1 'rejected by' "$W/decode.log")
echo "prefill log: $pr"
echo "decode log:  $dr"
[ $drc = 0 ] || fail "decode driver exit $drc"
[ "$(summary "$W/decode.out" failed)" = 3 ] || fail "not every decode room failed"
[ "$(grep -c 'reason=connect_failed' "$W/decode.out")" = 3 ] || fail "decode rooms not FAILED (connect failed)"
[[ $pr == *"bad token"* ]] || { show "$W/prefill.log"; fail "the prefill log has no 'refused connection ... bad token'"; }
[[ $dr == *"bad token"* ]] || { show "$W/decode.log"; fail "the decode log has no 'rejected by ...: bad token'"; }
grep -q 'rejected by .*bad token' "$W/decode.out" || fail "the room failure detail does not carry the reason"
au=$(grep '^driver: auth ' "$W/decode.out")
note "decode $au"
[[ $au == *" refused:refused_by_the_peer="[1-9]* ]] || fail "the decode did not count the refusal of its proof"
[[ $au == *" ok=0 "* ]] || fail "the decode took a proof from a prefill with another token"
pass "refused, reason on both sides; 3 decode rooms FAILED (connect failed), the refusal counted"
