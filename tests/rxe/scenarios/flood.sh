#!/usr/bin/env bash
# Issue 42, "a flood from one connection is bounded": frames from every
# peer land in the prefill's one shared receive queue, so a second
# authenticated decode (fake_peer --mode flood) sends HEARTBEATs back to
# back at it for 30 s while a good decode runs its rooms (the queue holds 64
# frames here). Every good room
# must SUCCESS, every byte right, all of them before the flood ends; the
# flooding connection is kept (its frames are legal).
#   flood.sh BUILD DEV0 ADDR0 DEV1 ADDR1
. "$(dirname "$0")/common.sh"
port=18781 rooms=40
engine_conf "$W/p.conf" prefill-flood prefill $port
engine_conf "$W/d.conf" decode-flood decode $port
shape=(--rooms $rooms --buffers 4 --block-size 16384 --blocks-per-room 4)
# --linger: the prefill stays up after its rooms, for the rest of the flood
timeout -k 5 100 "$DRIVER" --role prefill --config "$W/p.conf" "${shape[@]}" --timeout 90 \
	--linger 40 --linger-until "$W/flood.done" --ready-file "$W/ready" \
	> "$W/prefill.out" 2> "$W/prefill.log" &
CHILDREN+=("$!")
wait_file "$W/ready" 30 || { show "$W/prefill.out" "$W/prefill.log"; fail "prefill not ready in 30 s"; }
bind=()
[ "$ADDR1" != "$ADDR0" ] && bind=(--bind "$ADDR1")
timeout -k 5 60 "$FAKE" --server "$ADDR0:$port" "${bind[@]}" --mode flood --token kvf-suite \
	"${shape[@]}" --wait 30 --timeout 20 > "$W/fake.out" 2>&1 &
CHILDREN+=("$!")
fpid=$!
wait_lines "$W/fake.out" 'HELLO from' 1 30 || { show "$W/fake.out"; fail "the flooding peer did not connect"; }
sleep 1
timeout -k 5 60 "$DRIVER" --role decode --config "$W/d.conf" "${shape[@]}" --timeout 50 \
	> "$W/decode.out" 2> "$W/decode.log" || { show "$W/decode.out" "$W/decode.log"; fail "good decode failed"; }
t_done=$(now)
wait "$fpid"; frc=$?
touch "$W/flood.done"
grep -E 'flood|RESULT' "$W/fake.out"
[ "$frc" = 0 ] || { show "$W/fake.out" "$W/prefill.log"; fail "flooding peer: $(grep RESULT "$W/fake.out")"; }
[ "$(summary "$W/decode.out" ok)" = $rooms ] || { show "$W/decode.out"; fail "good decode: ok $(summary "$W/decode.out" ok) of $rooms"; }
[ "$(summary "$W/decode.out" bad_words)" = 0 ] || fail "good decode: wrong bytes"
n=$(grep -o 'flood [0-9]* HEARTBEATs' "$W/fake.out" | awk '{print $2}')
t_flood=$(grep -o 'HEARTBEATs in .* t=[0-9.]*' "$W/fake.out" | sed 's/.*t=//')
# more than the prefill's shared receive queue holds (rdma.rq_depth 64 in
# engine_conf): the queue was run dry at least once while the good decode
# ran. (On the guest's rxe, kernel 6.1, the flooding QP stalls for good
# after the first RNR NAK: about 80 frames. Its own sends only: the good
# decode's QPs on the same queue are served.)
fgt "$n" 64 || fail "only $n HEARTBEATs flooded: not more than the shared receive queue holds"
fgt "$t_flood" "$t_done" || fail "the good decode finished after the flood ended: it was not served during it"
note "good decode: $rooms rooms SUCCESS during a flood of $n HEARTBEATs; $(grep -c 'shared receive queue grown' "$W/prefill.log") SRQ growths on the prefill"
pass "$rooms good rooms SUCCESS while another peer flooded $n frames at the shared receive queue"
