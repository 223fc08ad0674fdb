#!/usr/bin/env bash
# Issue 4: a wrong auth token between two real engines (kvf_driver both
# sides): the connect is accepted, the decode's proof of its token
# (docs/wire.md 4.4) is refused by the prefill, every decode room FAILED
# (connect failed), the reason is logged on both sides, and each side
# counted it (the decode: refused by the peer).
# Six rounds, a wrong and an empty token in turn (ROUNDS to change), each a
# decode process of its own against the one prefill.
# (A wrong protocol version needs a peer that speaks another: fake_peer.sh
# bad-version.)
#   reject.sh BUILD DEV0 ADDR0 DEV1 ADDR1
. "$(dirname "$0")/common.sh"
TOKEN=right engine_conf "$W/p.conf" prefill-r prefill 18731
shape=(--rooms 3 --buffers 2 --block-size 16384 --blocks-per-room 2 --timeout 30)
timeout -k 5 $((40 * ${ROUNDS:-6})) "$DRIVER" --role prefill --config "$W/p.conf" "${shape[@]}" \
	--timeout $((40 * ${ROUNDS:-6})) --set deadlines.bootstrap_s=600 --ready-file "$W/ready" \
	> "$W/prefill.out" 2> "$W/prefill.log" &
CHILDREN+=($!)
wait_file "$W/ready" 30 || fail "prefill not ready"

# round K TOKEN: a decode of that token, its 3 rooms; every one must fail
# connect_failed with a detail that names the refusal, whichever came
# first at the decode, the prefill's refusal frame or its disconnect
# (issue 43: the disconnect used to win one run in three, "peer lost").
round() {
	local k=$1 out=$W/decode$1.out log=$W/decode$1.log drc n
	TOKEN=$2 engine_conf "$W/d$k.conf" decode-r$k decode 18731
	timeout -k 5 40 "$DRIVER" --role decode --config "$W/d$k.conf" "${shape[@]}" > "$out" 2> "$log"
	drc=$?
	[ $drc = 0 ] || { show "$out" "$log"; fail "round $k: decode driver exit $drc"; }
	[ "$(summary "$out" failed)" = 3 ] || fail "round $k: not every decode room failed"
	[ "$(grep -c 'reason=connect_failed' "$out")" = 3 ] || { grep -E '^room' "$out"; fail "round $k: decode rooms not FAILED (connect failed)"; }
	n=$(grep -cE 'rejected by .*(bad token|rdma\.auth_token differs)' "$out")
	[ "$n" = 3 ] || { grep -E '^room' "$out"; fail "round $k (token '$2'): $n of 3 room failures name the refusal"; }
	grep -q 'rejected by .*bad token' "$out" && frames=$((frames + 1)) || closes=$((closes + 1))
	au=$(grep '^driver: auth ' "$out")
	[[ $au == *" refused:refused_by_the_peer="[1-9]* ]] || fail "round $k: the decode did not count the refusal of its proof ($au)"
	[[ $au == *" ok=0 "* ]] || fail "round $k: the decode took a proof from a prefill with another token"
}
frames=0 closes=0
for ((k = 0; k < ${ROUNDS:-6}; k++)); do
	if ((k % 2)); then round $k ""; else round $k wrong; fi
done
stop_children
grep -E '^(room|driver)' "$W/decode0.out"
pr=$(grep -m1 'refused connection' "$W/prefill.log")
dr=$(grep -m1 'rejected by' "$W/decode0.log")
echo "prefill log: $pr"
echo "decode log:  $dr"
[[ $pr == *"bad token"* ]] || { show "$W/prefill.log"; fail "the prefill log has no 'refused connection ... bad token'"; }
[[ $dr == *"rejected by"* ]] || { show "$W/decode0.log"; fail "the decode log has no 'rejected by'"; }
note "${ROUNDS:-6} rounds (wrong and empty token): the refusal frame read first in $frames, the disconnect in $closes"
pass "refused every round, the reason on both sides; every decode room FAILED (connect failed) naming the refusal, counted"
