#!/usr/bin/env bash
# Issue 43: a ROOM_INFO the prefill will never serve is answered at once.
# A second authenticated decode (fake_peer --mode tombstone) sends ABORT for
# the room ids a good decode (kvf_driver --role decode) uses a moment later:
#   after-create   the prefill creates its rooms after the ABORTs: each one
#                  FAILED peer abort "before it was created here" and bound to
#                  the second peer (by design: docs/design.md "Who may fail a
#                  room"), held unreleased (--hold-failed); then the good
#                  decode asks for them
#   before-create  the good decode asks between the ABORTs and the prefill's
#                  rooms: its ROOM_INFOs are not parked (another connection's
#                  tombstone is kept for each id)
# Either way every good decode room must fail peer_abort naming "room
# refused", all within LIMIT s of the decode's start (not at its
# deadlines.receiver_waiting_s, 120 s here), before the prefill's rooms exist
# in before-create; the prefill's /metrics count
# kvferry_room_infos_refused_total = rooms; every prefill room FAILED peer
# abort from its tombstone.
#   refused.sh BUILD DEV0 ADDR0 DEV1 ADDR1 after-create|before-create
. "$(dirname "$0")/common.sh"
order=${1:?after-create|before-create}
case $order in after-create|before-create) ;; *) fail "unknown order $order" ;; esac
rooms=10 limit=10
port=$((18800 + $(cksum <<< "$order" | cut -c1-2) % 40))
mport=$((port + 1000))
engine_conf "$W/p.conf" prefill-r prefill $port
echo "metrics: { listen_port = $mport; interval_ms = 100; };" >> "$W/p.conf"
engine_conf "$W/d.conf" decode-r decode $port
shape=(--rooms $rooms --buffers 4 --block-size 16384 --blocks-per-room 4)
# the prefill creates its rooms after DELAY s: the ABORTs come first (both
# orders), and in before-create the good decode's ROOM_INFOs too
delay=$([ "$order" = after-create ] && echo 8 || echo 30)
bind=()
[ "$ADDR1" != "$ADDR0" ] && bind=(--bind "$ADDR1")
note "prefill on $DEV0 $ADDR0:$port creating $rooms rooms after $delay s; second peer (ABORTs) and good decode from $ADDR1"
timeout -k 5 150 "$DRIVER" --role prefill --config "$W/p.conf" "${shape[@]}" --timeout 60 \
	--start-delay $delay --hold-failed 40 --linger 30 --linger-until "$W/read" \
	--ready-file "$W/ready" > "$W/prefill.out" 2> "$W/prefill.log" &
CHILDREN+=("$!")
wait_file "$W/ready" 30 || { show "$W/prefill.out" "$W/prefill.log"; fail "prefill not ready in 30 s"; }
timeout -k 5 120 "$FAKE" --server "$ADDR0:$port" "${bind[@]}" --mode tombstone --token kvf-suite \
	"${shape[@]}" --hb-ms 500 --wait 60 --timeout 20 > "$W/fake.out" 2>&1 &
CHILDREN+=("$!")
wait_lines "$W/fake.out" 'tombstones acknowledged|RESULT' 1 30 ||
	{ show "$W/fake.out" "$W/prefill.log"; fail "the second peer's ABORTs not acknowledged in 30 s"; }
grep -q "tombstones acknowledged $rooms of $rooms" "$W/fake.out" ||
	{ show "$W/fake.out" "$W/prefill.log"; fail "second peer: $(grep -E 'acknowledged|RESULT' "$W/fake.out")"; }
if [ "$order" = after-create ]; then
	wait_lines "$W/prefill.out" '^room .* FAILED' $rooms 30 ||
		{ show "$W/prefill.out" "$W/prefill.log"; fail "the prefill's rooms did not fail at creation"; }
fi
t0=$(now)
timeout -k 5 60 "$DRIVER" --role decode --config "$W/d.conf" "${shape[@]}" --timeout 40 \
	> "$W/decode.out" 2> "$W/decode.log"
drc=$?
t1=$(now)
grep -E '^room ' "$W/decode.out" | head -n 3
[ $drc = 0 ] || { show "$W/decode.out" "$W/decode.log"; fail "decode driver exit $drc"; }
refused=$(grep -cE '^room .* FAILED reason=peer_abort .*room refused' "$W/decode.out")
[ "$refused" = $rooms ] ||
	{ show "$W/decode.out" "$W/prefill.log"; fail "$refused of $rooms decode rooms failed 'room refused'"; }
took=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
fgt "$took" $limit && fail "the decode took $took s (limit $limit s): refused late"
# the prefill's side: every room FAILED by its tombstone (and, in
# before-create, only after the decode had its answers)
wait_lines "$W/prefill.out" '^room .* FAILED' $rooms 60 ||
	{ show "$W/prefill.out" "$W/prefill.log"; fail "the prefill's rooms not all terminal"; }
tomb=$(grep -cE '^room .* FAILED reason=peer_abort .*before it was created here' "$W/prefill.out")
[ "$tomb" = $rooms ] || { show "$W/prefill.out"; fail "$tomb of $rooms prefill rooms failed by a tombstone"; }
if [ "$order" = before-create ]; then
	first=$(grep -E '^room ' "$W/prefill.out" | sed -n 's/.* t=\([0-9.]*\).*/\1/p' | sort -n | head -n1)
	fgt "$first" "$t1" || fail "the prefill created its rooms (t=$first) before the decode was done (t=$t1)"
fi
sleep 0.5 # the snapshot the endpoint serves is 100 ms old at most
n=$(timeout 10 bash -c "exec 3<>/dev/tcp/127.0.0.1/$mport && printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3 && cat <&3" 2> /dev/null |
	awk '$1 == "kvferry_room_infos_refused_total" { print $2 }')
touch "$W/read"
[ "$n" = $rooms ] || { show "$W/prefill.log"; fail "prefill /metrics kvferry_room_infos_refused_total ${n:-missing}, want $rooms"; }
grep -m1 'refused' "$W/prefill.log"
pass "$order: $rooms of $rooms good decode rooms FAILED peer abort 'room refused' in $took s (receiver_waiting_s 120); prefill: $tomb rooms failed by the second peer's tombstones, kvferry_room_infos_refused_total $n"
