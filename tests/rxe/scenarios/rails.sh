#!/usr/bin/env bash
# Issue 23: an engine on two devices (rails). Needs rxe-vm.sh --devices 4:
# rail 0 is DEV0 (prefill) <-> DEV1 (decode), rail 1 is DEV2 <-> DEV3. The
# prefill listens on both rails (rdma.devices, listen_addr 0.0.0.0) and
# publishes its endpoint "ADDR0:P,ADDR2:P"; the decode takes it as its peer.
#   stream N: N rooms; every byte checked; both rails carried writes
#             (kvf_engine_rails), none in error, nothing pinned.
#   down N:   the same, and once some rooms are done, rail 1's prefill-side
#             link goes down (ip link set DEV2's netdev down): the rooms on
#             rail 1 fail, each naming "rail 1", the others succeed, new
#             rooms go to rail 0, every room ends (nothing pinned), and no
#             byte is wrong in a room that succeeded; 150 rooms later the
#             link comes back, and rail 1 takes rooms again (a new
#             connection on it by the end).
#   bench N:  a figure: ib_write_bw on each rail alone, then kvferry-bench
#             (two processes, N rooms of 64 x 2 x 16 KiB, then 32 checked)
#             with --rails 1 and --rails 2 in the same run; the ratios.
#   rails.sh BUILD DEV0 ADDR0 DEV1 ADDR1 stream|down|bench N
. "$(dirname "$0")/common.sh"
mode=${1:?stream|down} rooms=${2:-200}
DEV2=${KVF_RXE_DEV2:-} DEV3=${KVF_RXE_DEV3:-} NET2=${KVF_RXE_NETDEV2:-}
[ -n "$DEV2" ] && [ -n "$DEV3" ] || fail "needs four devices (scripts/rxe-vm.sh --devices 4)"
case $mode in stream) port=18801 ;; down) port=18802 ;; *) port=18803 ;; esac
HB_MS=1000 HB_MISSES=5

conf() { # FILE ID DEVICES RDMA-KEYS
	cat > "$1" <<CONF
log: { level = "info"; };
engine: { id = "$2"; max_blocks_per_room = 4096; summary_interval_s = 0; };
deadlines: { bootstrap_s = 120; inflight_s = 120; receiver_waiting_s = 120; quiesce_s = 10; };
heartbeat: { interval_ms = $HB_MS; misses = $HB_MISSES; };
rdma: { devices = $3; $4 auth_token = "kvf-suite"; sq_depth = 256; rq_depth = 64; signal_every = 16;
        ${KVF_SCEN_RDMA:-} };
CONF
}
[ "$mode" = bench ] && . "$(dirname "$0")/rails_bench.sh" # exits
conf "$W/p.conf" prefill-r "[\"$DEV0\", \"$DEV2\"]" "listen_addr = \"0.0.0.0\"; listen_port = $port;"
shape=(--rooms "$rooms" --buffers 8 --block-size 16384 --blocks-per-room 4 --window 16 --timeout 240)
note "prefill on $DEV0+$DEV2, decode on $DEV1+$DEV3: $mode, $rooms rooms"
timeout -k 5 280 "$DRIVER" --role prefill --config "$W/p.conf" "${shape[@]}" --print-listen \
	--ready-file "$W/ready" > "$W/prefill.out" 2> "$W/prefill.log" &
CHILDREN+=($!)
wait_file "$W/ready" 40 || { show "$W/prefill.out" "$W/prefill.log"; fail "prefill not ready in 40 s"; }
ep=$(head -n1 "$W/ready")
note "prefill endpoint: $ep"
case $ep in *,*) ;; *) show "$W/prefill.log"; fail "the endpoint names one rail: '$ep'" ;; esac
conf "$W/d.conf" decode-r "[\"$DEV1\", \"$DEV3\"]" "peer = \"$ep\";"
timeout -k 5 280 "$DRIVER" --role decode --config "$W/d.conf" "${shape[@]}" \
	> "$W/decode.out" 2> "$W/decode.log" &
dpid=$!
CHILDREN+=("$dpid")
if [ "$mode" = down ]; then
	wait_lines "$W/decode.out" ' SUCCESS ' 30 120 ||
		{ show "$W/decode.out" "$W/decode.log"; fail "the decode did not get 30 rooms in 120 s"; }
	ip link set "$NET2" down || fail "ip link set $NET2 down"
	at=$(grep -c ' SUCCESS ' "$W/decode.out")
	note "$NET2 ($DEV2, rail 1 of the prefill) down after $at rooms"
	# rail 0 alone for 150 rooms, then rail 1 back for the rest
	wait_lines "$W/decode.out" ' SUCCESS ' $((at + 150)) 180 ||
		{ ip link set "$NET2" up; show "$W/decode.out" "$W/decode.log"; fail "rail 0 did not carry 150 rooms in 180 s"; }
	ip link set "$NET2" up || fail "ip link set $NET2 up"
	note "$NET2 up again after $(grep -c ' SUCCESS ' "$W/decode.out") rooms"
fi
wait "$dpid"
drc=$?
wait "${CHILDREN[0]}" 2> /dev/null
CHILDREN=()
grep '^driver:' "$W/decode.out"
grep '^driver: rail' "$W/prefill.out" | sed 's/^/prefill /'
sum=$(grep '^driver: role=' "$W/decode.out")
[ -n "$sum" ] || { show "$W/decode.out" "$W/decode.log"; fail "the decode gave no summary (exit $drc)"; }
val() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" <<< "$2" | head -n1; }
ok=$(val ok "$sum") failed=$(val failed "$sum") bad=$(val bad_words "$sum")
[ "$bad" = 0 ] || fail "$bad wrong words in rooms that succeeded"
[ $((ok + failed)) = "$rooms" ] || { show "$W/decode.log"; fail "$ok ok + $failed failed of $rooms: rooms left unfinished"; }
rail_bytes() { sed -n "s/^driver: rail $1 .* bytes=\([0-9]*\).*/\1/p" "$W/prefill.out"; }
b0=$(rail_bytes 0) b1=$(rail_bytes 1)
[ "${b0:-0}" -gt 0 ] && [ "${b1:-0}" -gt 0 ] || fail "writes on rail 0: ${b0:-none} bytes, rail 1: ${b1:-none}: both must carry rooms"
if [ "$mode" = stream ]; then
	[ "$failed" = 0 ] || { grep ' FAILED ' "$W/decode.out" | head; fail "$failed rooms failed"; }
	grep -q 'wr_errors=[1-9]' "$W/prefill.out" && fail "work completions in error on a healthy rail"
	pass "$ok rooms over 2 rails, every byte checked; prefill rail 0 $b0 bytes, rail 1 $b1 bytes"
fi
# down: every failure is rail 1's, and named so
other=$(grep ' FAILED ' "$W/decode.out" | grep -vc 'rail 1')
[ "$other" = 0 ] || { grep ' FAILED ' "$W/decode.out" | grep -v 'rail 1' | head -n 5; fail "$other rooms failed without naming rail 1"; }
[ "$failed" -gt 0 ] || note "no room was on rail 1 when it went down (all moved or done)"
[ "$ok" -gt 180 ] || fail "only $ok rooms succeeded: rail 0 did not carry on"
# back: rail 1 lost its connection and has a new one (made only by a room
# sent on it after the port came back), its port up
r1=$(grep '^driver: rail 1 ' "$W/decode.out")
[ "$(val lost " $r1")" -ge 1 ] && [ "$(val live " $r1")" -ge 1 ] && [[ $r1 == *state=up* ]] ||
	fail "rail 1 did not come back after $NET2 went up: $r1"
pass "$ok rooms ok, $failed failed naming rail 1 while $NET2 was down, 0 wrong bytes; rail 1 back (new connection); rail 0 $b0 bytes, rail 1 $b1 bytes"
