#!/usr/bin/env bash
# Issue 4, "Tests on rxe": kvferry-bench moves ROOMS rooms with rotated
# block lists over BUFFERS buffers (default 64, a realistic layout) of
# 16 KiB blocks and checks every destination byte (its exit status and
# --json say so).
#   bench.sh BUILD DEV0 ADDR0 DEV1 ADDR1 one|two [ROOMS] [BLOCKS_PER_ROOM] [BUFFERS] [BENCH-OPT]...
# one: one process, both engines on DEV0. two: two processes, prefill on
# DEV0/ADDR0, decode on DEV1/ADDR1 (rdma.source_addr) over the veth pair
# when the VM has two devices (--devices 2), else both on DEV0. BENCH-OPTs
# go to every kvferry-bench (--wait: the schedulers sleep in kvf_engine_wait).
. "$(dirname "$0")/common.sh"
mode=${1:?one|two} rooms=${2:-1000} bpr=${3:-2} nbufs=${4:-64}
shape=(--rooms "$rooms" --buffers "$nbufs" --block-size 16384 --blocks-per-room "$bpr" --seed 7 --json
	--verify inline --no-progress "${@:5}")
if [ "$mode" = one ]; then
	DEV1=$DEV0 ADDR1=$ADDR0
	engine_conf "$W/p.conf" prefill-1 prefill 18701
	engine_conf "$W/d.conf" decode-1 decode 18701
	note "one process, $rooms rooms of $nbufs x $bpr x 16 KiB on $DEV0"
	timeout -k 5 250 "$BENCH" --prefill-config "$W/p.conf" --decode-config "$W/d.conf" \
		"${shape[@]}" --timeout 230 > "$W/bench.out" 2> "$W/bench.err"
	rc=$?
	out=$(grep '^{' "$W/bench.out" | tail -n1)
	[ $rc = 0 ] || { show "$W/bench.err" "$W/bench.out"; fail "kvferry-bench exit $rc: $out"; }
else
	engine_conf "$W/p.conf" prefill-2 prefill 18702
	engine_conf "$W/d.conf" decode-2 decode 18702
	note "two processes, $rooms rooms of $nbufs x $bpr x 16 KiB: prefill $DEV0 $ADDR0 <- decode $DEV1 $ADDR1"
	timeout -k 5 250 "$BENCH" --prefill-config "$W/p.conf" "${shape[@]}" --timeout 230 \
		> "$W/p.out" 2> "$W/p.err" &
	ppid=$!
	CHILDREN+=("$ppid")
	sleep 2 # the prefill listens once its pool is registered
	timeout -k 5 250 "$BENCH" --decode-config "$W/d.conf" "${shape[@]}" --timeout 230 \
		> "$W/bench.out" 2> "$W/bench.err"
	rc=$?
	wait "$ppid"
	prc=$?
	CHILDREN=()
	out=$(grep '^{' "$W/bench.out" | tail -n1)
	pout=$(grep '^{' "$W/p.out" | tail -n1)
	note "prefill: $pout"
	if [ $rc != 0 ]; then
		show "$W/bench.err" "$W/p.err"
		echo "connection events:"
		grep -hE 'down in|connection [0-9]+ lost|rejected' "$W/p.err" "$W/bench.err" | head -n 12
		fail "decode kvferry-bench exit $rc: $out"
	fi
	[ $prc = 0 ] || { show "$W/p.err"; fail "prefill kvferry-bench exit $prc: $pout"; }
	# the decode connected with the QPs its config asks for (default 2)
	qps=$(conf_qps "$W/d.conf")
	line=$(grep -m1 'connecting to' "$W/bench.err")
	note "${line#*: }"
	if [ "$qps" = 1 ]; then
		[[ $line == *"(connection "* ]] || fail "qps_per_peer 1, but the decode said: $line"
	else
		[[ $line == *"$qps queue pairs"* ]] || fail "qps_per_peer $qps, but the decode said: $line"
	fi
fi
note "decode: $out"
ok=$(sed -n 's/.*"ok": \([0-9]*\).*/\1/p' <<< "$out")
failed=$(sed -n 's/.*"failed": \([0-9]*\).*/\1/p' <<< "$out")
bad=$(sed -n 's/.*"bad_words": \([0-9]*\).*/\1/p' <<< "$out")
gbps=$(sed -n 's/.*"gbit_per_s": \([0-9.]*\).*/\1/p' <<< "$out")
secs=$(sed -n 's/.*"seconds": \([0-9.]*\).*/\1/p' <<< "$out")
[ "$ok" = "$rooms" ] && [ "$failed" = 0 ] && [ "$bad" = 0 ] ||
	fail "decode: ok=$ok failed=$failed bad_words=$bad of $rooms rooms"
echo "kvferry-bench $mode: $rooms rooms, every byte checked, ${gbps} Gb/s in ${secs} s"
pass "$rooms rooms ok, 0 failed, 0 bad words, ${gbps} Gb/s"
