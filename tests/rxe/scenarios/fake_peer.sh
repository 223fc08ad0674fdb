#!/usr/bin/env bash
# Issue 4: a misbehaving decode peer (tests/rxe/fake_peer, raw rdma_cm, the
# protocol as docs/wire.md defines it) against a real prefill engine
# (kvf_driver --role prefill, which prints each room's outcome and failure).
# Per MODE:
#   good        every room SUCCESS, every byte checked by the peer
#   bad-rkey    room 0 FAILED "work completion error" with wc_status 10
#               (IBV_WC_REM_ACCESS_ERR); the other rooms, asked on a new
#               connection, SUCCESS
#   wc-detail   as bad-rkey, and room 0's failure detail names the status
#               as ibv_wc_status_str() does ("remote access error"), as
#               issue 4 says an error completion fails its room
#   mr-overrun  a block id inside the announced pool but past the peer's
#               registration: that room FAILED with the remote access
#               error, the others SUCCESS
#   bad-block   a ROOM_INFO block id outside the peer's pool: that room
#               FAILED "bad frame from peer" naming the block; the others on
#               the same connection SUCCESS; the prefill logs the peer's
#               address
#   truncated   a ROOM_INFO body shorter than its block count: that room
#               FAILED "bad frame from peer"; the others SUCCESS
#   short       a ROOM_INFO cut short of its header's length (header
#               unsound: the connection goes, no room is blamed); every room
#               SUCCESS in the end (the cut one asked again on a new
#               connection)
#   big-pool    the peer's pool has twice the prefill's blocks and every
#               destination block id is past the prefill's own count: every
#               room SUCCESS (pools of the two sides may differ in size)
#   close-fast  as good, but the peer disconnects the moment the last
#               room's data has landed: every room still SUCCESS at the
#               prefill (its writes completed)
#   bad-layout  the peer's HELLO has another item size for region "kv": the
#               prefill tears that connection down naming the region and the
#               field, that room FAILED with a reason that is not "device
#               fatal"; others SUCCESS
#   bad-version / bad-token
#               the connect is rejected; the peer prints the reject reason
#               from the private data and the prefill logs it too
#   fake_peer.sh BUILD DEV0 ADDR0 DEV1 ADDR1 MODE
. "$(dirname "$0")/common.sh"
mode=${1:?mode}
fmode=$mode
[ "$mode" = wc-detail ] && fmode="bad-rkey"
rooms=6 bad=2
case $fmode in bad-rkey|bad-layout) bad=0 ;; esac
port=$((18740 + $(cksum <<< "$mode" | cut -c1-2) % 50))
engine_conf "$W/p.conf" prefill-f prefill $port
shape=(--rooms $rooms --buffers 4 --block-size 16384 --blocks-per-room 4)
bind=() dargs=() fargs=()
# mr-overrun: the prefill's pool is larger than the block id used, so only
# the peer's registration can refuse it
[ $fmode = mr-overrun ] && dargs=(--pool-blocks 64) fargs=(--src-pool-blocks 64)
[ "$ADDR1" != "$ADDR0" ] && bind=(--bind "$ADDR1")
note "prefill driver on $DEV0 $ADDR0:$port; fake_peer ($fmode) from ${ADDR1}; $rooms rooms, bad room $bad"
timeout -k 5 60 "$DRIVER" --role prefill --config "$W/p.conf" "${shape[@]}" "${dargs[@]}" --timeout 45 \
	--ready-file "$W/ready" > "$W/prefill.out" 2> "$W/prefill.log" &
ppid=$!
CHILDREN+=("$ppid")
wait_file "$W/ready" 30 || { show "$W/prefill.out" "$W/prefill.log"; fail "prefill not ready in 30 s"; }
timeout -k 5 60 "$FAKE" --server "$ADDR0:$port" "${bind[@]}" --mode "$fmode" --token kvf-suite \
	"${shape[@]}" "${fargs[@]}" --bad-room $bad --hb-ms 500 --wait 2 --timeout 30 > "$W/fake.out" 2>&1
frc=$?
cat "$W/fake.out"
case $fmode in
bad-version|bad-token)
	sleep 1
	stop_children
	cat "$W/prefill.log" | grep -E 'reject' | head -n 5
	[ $frc = 0 ] || fail "fake_peer: $(tail -n1 "$W/fake.out")"
	want=$([ $fmode = bad-version ] && echo "bad version" || echo "bad token")
	grep -q "REJECTED by the prefill: $want" "$W/fake.out" ||
		fail "the peer's reject reason is not '$want': $(grep REJECTED "$W/fake.out")"
	grep -qE "rejected connection from $ADDR1:[0-9]+: $want" "$W/prefill.log" ||
		{ show "$W/prefill.log"; fail "the prefill log does not say 'rejected connection from $ADDR1:PORT: $want'"; }
	pass "rejected; reason on both sides: '$(grep -o "REJECTED by the prefill: .*" "$W/fake.out" | cut -d' ' -f5- )'"
	;;
esac
wait "$ppid"
prc=$?
CHILDREN=()
grep -E '^(room|driver)' "$W/prefill.out"
grep -E 'bad frame|down in|FAILED' "$W/prefill.log" | head -n 6
room_line() { grep "^room $1 " "$W/prefill.out"; }
# every room but the bad one SUCCESS
for ((i = 0; i < rooms; i++)); do
	l=$(room_line $i)
	if [ $i = $bad ] && [ $fmode != good ] && [ $fmode != short ] && [ $fmode != big-pool ] &&
		[ $fmode != close-fast ]; then continue; fi
	if [[ $l != *" SUCCESS "* ]]; then
		[ $fmode = close-fast ] && [[ $l == *reason=peer_lost* ]] &&
			fail "BUG: room $i's data landed (the peer checked it) but the prefill failed it as peer lost: the DISCONNECTED event was applied before the write's successful completion: $l"
		[ $fmode = big-pool ] && [[ $l == *"outside the pool"* ]] &&
			fail "BUG: room $i: a destination block id valid in the peer's pool is checked against the prefill's own pool (room.c kvf_room_peer_info uses eng->pool_nblocks): $l"
		fail "room $i is not SUCCESS: $l"
	fi
done
[ $prc = 0 ] || { show "$W/prefill.log"; fail "prefill driver exit $prc (rooms not terminal or not released)"; }
bl=$(room_line $bad)
[ $frc = 0 ] || [ $mode = bad-layout ] || fail "fake_peer: $(tail -n1 "$W/fake.out")"
case $mode in
close-fast)
	pass "all $rooms rooms SUCCESS though the peer disconnected right after the last one landed" ;;
good|short|big-pool)
	[ $mode = short ] && { grep -q 'length mismatch' "$W/prefill.log" ||
		fail "the prefill did not log the cut frame (length mismatch)"; }
	pass "all $rooms rooms SUCCESS ($mode)" ;;
bad-rkey|mr-overrun)
	[[ $bl == *" FAILED reason=work_completion_error wc_status=10 "* ]] ||
		fail "room $bad: want FAILED work completion error, wc_status 10 (remote access error): $bl"
	pass "room $bad FAILED (work completion error, wc_status 10), the other $((rooms - 1)) SUCCESS" ;;
wc-detail)
	[[ $bl == *" FAILED reason=work_completion_error "* ]] || fail "room $bad: $bl"
	[[ $bl == *"remote access error"* ]] ||
		fail "BUG: room $bad's failure detail does not name the status as ibv_wc_status_str does ('remote access error'): $(sed 's/.*detail=//' <<< "$bl")"
	pass "room $bad detail: $(sed 's/.*detail=//' <<< "$bl")" ;;
bad-block|truncated)
	want=$([ $mode = bad-block ] && echo "outside its" || echo "runs past the info")
	[[ $bl == *" FAILED reason=bad_frame_from_peer "* ]] || fail "room $bad: want FAILED bad frame from peer: $bl"
	[[ $bl == *"$want"* ]] || fail "room $bad's detail does not say '$want': $bl"
	grep -qE "bad frame from $ADDR1:[0-9]+" "$W/prefill.log" ||
		fail "the prefill log does not name the peer's address ($ADDR1:PORT) with the bad frame"
	pass "room $bad FAILED (bad frame: $want), the other $((rooms - 1)) SUCCESS on the same connection" ;;
bad-layout)
	[[ $bl == *" FAILED "* ]] || fail "room $bad: $bl"
	[[ $bl == *"reason=device_fatal"* ]] &&
		fail "BUG: a peer region layout mismatch fails the room as 'device fatal' (post_failed maps -EPROTO to KVF_FAIL_DEVICE): $bl"
	# Regions are matched when the HELLO is in: the prefill tears the
	# connection down naming the region and the field (docs/wire.md 5.3).
	grep -q "region layouts differ: region 'kv': buffer 0 item size" "$W/prefill.log" ||
		fail "the prefill log does not name the region and the field of the mismatch"
	pass "room $bad FAILED ($(field "$bl" reason)), the connection torn down naming region 'kv' and the item size; the other $((rooms - 1)) SUCCESS" ;;
esac
