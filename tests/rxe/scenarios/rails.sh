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
#             link comes back, and rail 1 gets probe rooms one at a time
#             (at most one failed room per connect attempt); whether it
#             reconnects is reported (soft-RoCE's device may not receive
#             again after the bounce: see the end of this file).
#   bench N:  a figure: ib_write_bw on each rail alone, then kvferry-bench
#             (two processes, N rooms of 64 x 2 x 16 KiB, then 32 checked)
#             with --rails 1 and --rails 2 in the same run; the ratios.
#   rails.sh BUILD DEV0 ADDR0 DEV1 ADDR1 stream|down|bench N
. "$(dirname "$0")/common.sh"
mode=${1:?stream|down} rooms=${2:-200}
DEV2=${KVF_RXE_DEV2:-} DEV3=${KVF_RXE_DEV3:-} NET2=${KVF_RXE_NETDEV2:-}
# the link taken down: the prefill's end of rail 1 (KVF_RAILS_DOWN=decode: the decode's)
DOWN=$NET2
[ "${KVF_RAILS_DOWN:-}" = decode ] && DOWN=${KVF_RXE_NETDEV3:-}
[ -n "$DEV2" ] && [ -n "$DEV3" ] || fail "needs four devices (scripts/rxe-vm.sh --devices 4)"
case $mode in stream) port=18801 ;; down) port=18802 ;; *) port=18803 ;; esac
HB_MS=1000 HB_MISSES=5
# The drivers run rooms in order, a window at a time. When rail 1 fails, the
# prefill's rooms whose ROOM_INFO went down with it wait out their bootstrap,
# holding its window, while the decode's next rooms' ROOM_INFOs wait parked
# for it: a short bootstrap (down: 10 s) and a long parking (120 s) let the
# windows meet again, so that no room fails for the harness's order.
BOOT_S=120
[ "$mode" = down ] && BOOT_S=10

conf() { # FILE ID DEVICES RDMA-KEYS
	cat > "$1" <<CONF
log: { level = "info"; };
engine: { id = "$2"; max_blocks_per_room = 4096; summary_interval_s = 0; tombstone_ttl_s = 120; };
deadlines: { bootstrap_s = $BOOT_S; inflight_s = 120; receiver_waiting_s = 120; quiesce_s = 10; };
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
	ip link set "$DOWN" down || fail "ip link set $DOWN down"
	at=$(grep -c ' SUCCESS ' "$W/decode.out")
	note "$DOWN (rail 1) down after $at rooms"
	# rail 0 alone for 150 rooms, then rail 1 back for the rest
	wait_lines "$W/decode.out" ' SUCCESS ' $((at + 150)) 180 ||
		{ ip link set "$DOWN" up; show "$W/decode.out" "$W/decode.log"; fail "rail 0 did not carry 150 rooms in 180 s"; }
	ip link set "$DOWN" up || fail "ip link set $DOWN up"
	# The test bed's own wiring, lost with the link: both rails' addresses
	# are local to this one guest, so rdma_cm reaches the peer's address
	# only through the permanent neighbour entries rxe-vm.sh made, which a
	# link going down flushes (two hosts on a fabric resolve by ARP).
	NET3=${KVF_RXE_NETDEV3:?} A2=${KVF_RXE_ADDR2:?} A3=${KVF_RXE_ADDR3:?}
	ip neigh replace "$A3" lladdr "$(cat /sys/class/net/$NET3/address)" dev "$NET2" nud permanent &&
		ip neigh replace "$A2" lladdr "$(cat /sys/class/net/$NET2/address)" dev "$NET3" nud permanent ||
		fail "restoring the neighbour entries of rail 1"
	t_up=$("$DRIVER" --now)
	note "$DOWN up again after $(grep -c ' SUCCESS ' "$W/decode.out") rooms (t=$t_up)"
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
# back: the port is up again, and rooms go to rail 1 only as one probe at a
# time until a connection is up on it (rails.c): after the link came back,
# few rooms fail, whether rail 1 reconnects or not. On soft-RoCE it may
# not: a device whose netdev went down while it carried writes receives
# nothing after it comes back (its netdev counts the packets, rxe's
# rcvd_pkts stays; a fresh rping over that rail hangs too), which hardware
# does not do; so a new connection is reported, not required.
r1=$(grep '^driver: rail 1 ' "$W/decode.out")
[[ $r1 == *state=up* ]] || fail "rail 1's port is not up after $DOWN went up: $r1"
late=$(awk -v t="$t_up" '/ FAILED /{ for (i = 1; i <= NF; i++) if ($i ~ /^t=/) { split($i, a, "="); if (a[2] > t + 0.5) n++ } } END { print n + 0 }' "$W/decode.out")
# one probe a connect attempt (rdma.connect_timeout_ms 5 s, then the backoff):
# rooms piled onto the reconnecting rail would fail by the dozen instead
t_end=$(sed -n 's/.* end=\([0-9.]*\).*/\1/p' <<< "$sum")
most=$(awk -v a="$t_end" -v b="$t_up" 'BEGIN { printf "%d", (a - b) / 4 + 4 }')
[ "$late" -le "$most" ] ||
	fail "$late rooms failed in the $(awk -v a="$t_end" -v b="$t_up" 'BEGIN { printf "%.0f", a - b }') s after $DOWN came back (at most $most: one probe a connect): rooms piled onto the reconnecting rail"
if [ "$(val live " $r1")" -ge 1 ]; then back="rail 1 back (a new connection)"
else back="rail 1 not reconnected (the soft-RoCE device after its link bounce, see above)"; fi
pass "$ok rooms ok, $failed failed naming rail 1 ($late of them after the link came back, probes, at most $most), 0 wrong bytes; $back; rail 0 $b0 bytes, rail 1 $b1 bytes"
