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
#   bad-version the connect is rejected; the peer prints the reject reason
#               from the private data and the prefill logs it too
# The token's proof (issue 22, docs/wire.md 4.4), each refused with its
# reason named on both sides and counted on the prefill's /metrics
# (kvferry_auth_refused_total{reason}); the peer checks that the prefill
# sent it nothing but the refusal (no MAC, no HELLO) and disconnected:
#   bad-token   the peer's proof is under another token: refused, bad token
#   replay      a right connection (every room SUCCESS), then its connect
#               private data and proof sent again on a new one, as a
#               sniffer would: refused, replayed proof
#   silent      the peer never sends its proof: refused and dropped within
#               rdma.auth_timeout_ms (2 s here) + 1.5 s; every room SUCCESS
#               on a right connection after it
#   early       the peer sends HELLO before its proof: refused, frame
#               before proof; every room SUCCESS on a right connection
#   fake_peer.sh BUILD DEV0 ADDR0 DEV1 ADDR1 MODE
. "$(dirname "$0")/common.sh"
mode=${1:?mode}
fmode=$mode
[ "$mode" = wc-detail ] && fmode="bad-rkey"
rooms=6 bad=2
case $fmode in bad-rkey|bad-layout) bad=0 ;; esac
port=$((18740 + $(cksum <<< "$mode" | cut -c1-2) % 50))
mport=$((port + 1000))
auth_ms=2000
engine_conf "$W/p.conf" prefill-f prefill $port "auth_timeout_ms = $auth_ms;"
echo "metrics: { listen_port = $mport; interval_ms = 100; };" >> "$W/p.conf"
shape=(--rooms $rooms --buffers 4 --block-size 16384 --blocks-per-room 4)
bind=() dargs=() fargs=()
# mr-overrun: the prefill's pool is larger than the block id used, so only
# the peer's registration can refuse it
[ $fmode = mr-overrun ] && dargs=(--pool-blocks 64) fargs=(--src-pool-blocks 64)
# replay: the replayed connection comes after every room is done, so the
# prefill must still listen then; and its /metrics are read after the peer
# is done, every room with it (then it stops lingering: the file below)
case $fmode in replay|silent|early) dargs=(--linger 8 --linger-until "$W/read") ;; esac
[ "$ADDR1" != "$ADDR0" ] && bind=(--bind "$ADDR1")
note "prefill driver on $DEV0 $ADDR0:$port; fake_peer ($fmode) from ${ADDR1}; $rooms rooms, bad room $bad"
timeout -k 5 60 "$DRIVER" --role prefill --config "$W/p.conf" "${shape[@]}" "${dargs[@]}" --timeout 45 \
	--ready-file "$W/ready" > "$W/prefill.out" 2> "$W/prefill.log" &
ppid=$!
CHILDREN+=("$ppid")
wait_file "$W/ready" 30 || { show "$W/prefill.out" "$W/prefill.log"; fail "prefill not ready in 30 s"; }
timeout -k 5 60 "$FAKE" --server "$ADDR0:$port" "${bind[@]}" --mode "$fmode" --token kvf-suite \
	"${shape[@]}" "${fargs[@]}" --bad-room $bad --hb-ms 500 --wait 2 --timeout 30 \
	--auth-ms $auth_ms > "$W/fake.out" 2>&1
frc=$?
cat "$W/fake.out"
# metric SERIES : its value on the prefill's /metrics now
metric() {
	local m
	m=$(timeout 10 bash -c "exec 3<>/dev/tcp/127.0.0.1/$mport && printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3 && cat <&3" 2> /dev/null)
	awk -v s="$1" '$1 == s { print $2 }' <<< "$m"
}
# auth_refused REASON WANT : the prefill counted WANT refusals for REASON
auth_refused() {
	local n
	sleep 0.5 # the snapshot the endpoint serves is 100 ms old at most
	n=$(metric "kvferry_auth_refused_total{reason=\"$1\"}")
	note "/metrics: kvferry_auth_refused_total{reason=\"$1\"} $n, kvferry_auth_ok_total $(metric kvferry_auth_ok_total)"
	[ "$n" = "$2" ] || fail "the prefill counted ${n:-no} refusals for $1, want $2"
}
case $fmode in
bad-version)
	sleep 1
	stop_children
	grep -E 'reject' "$W/prefill.log" | head -n 5
	[ $frc = 0 ] || fail "fake_peer: $(tail -n1 "$W/fake.out")"
	grep -q "REJECTED by the prefill: bad version" "$W/fake.out" ||
		fail "the peer's reject reason is not 'bad version': $(grep REJECTED "$W/fake.out")"
	grep -qE "rejected connection from $ADDR1:[0-9]+: bad version" "$W/prefill.log" ||
		{ show "$W/prefill.log"; fail "the prefill log does not say 'rejected connection from $ADDR1:PORT: bad version'"; }
	pass "rejected; reason on both sides: '$(grep -o "REJECTED by the prefill: .*" "$W/fake.out" | cut -d' ' -f5- )'"
	;;
bad-token|replay|silent|early)
	want=$(case $fmode in bad-token) echo "bad token" ;; replay) echo "replayed proof" ;;
		silent) echo "no proof in time" ;; early) echo "frame before proof" ;; esac)
	token=$(case $fmode in bad-token) echo bad_token ;; replay) echo replay ;;
		silent) echo timeout ;; early) echo early_frame ;; esac)
	grep -E 'refused connection|proved' "$W/prefill.log" | head -n 5
	[ $frc = 0 ] || { show "$W/prefill.log"; fail "fake_peer: $(tail -n1 "$W/fake.out")"; }
	grep -q "REFUSED by the prefill: $want" "$W/fake.out" ||
		fail "the peer's refusal reason is not '$want': $(grep REFUSED "$W/fake.out")"
	grep -qE "refused connection [0-9]+ from $ADDR1:[0-9]+: $want" "$W/prefill.log" ||
		{ show "$W/prefill.log"; fail "the prefill log does not say 'refused connection N from $ADDR1:PORT: $want'"; }
	auth_refused "$token" 1
	[ $fmode = bad-token ] && { stop_children; pass "refused; reason on both sides: '$want', counted; the peer got nothing but the refusal"; }
	;;
esac
touch "$W/read"
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
		[ $fmode != close-fast ] && [ $fmode != replay ] && [ $fmode != silent ] &&
		[ $fmode != early ]; then continue; fi
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
replay|silent|early)
	pass "$(sed -n 's/^fake_peer: RESULT ok //p' "$W/fake.out")" ;;
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
