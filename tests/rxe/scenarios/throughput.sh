#!/usr/bin/env bash
# A figure, not a check: kvferry-bench (two processes, DEV1 -> DEV0, 64
# buffers x 2 blocks x 16 KiB per room; then 32 rooms more, untimed, with
# every byte checked) against
# ib_write_bw (64 KiB RDMA WRITEs) on the same devices in the same run. It
# passes when both ran; the last lines give both rates and their ratio.
#   throughput.sh BUILD DEV0 ADDR0 DEV1 ADDR1 [ROOMS]
. "$(dirname "$0")/common.sh"
rooms=${1:-300}
g0=$(gid "$DEV0") g1=$(gid "$DEV1")
timeout -k 5 60 ib_write_bw -d "$DEV0" ${g0:+-x $g0} -u 18 -p 18791 -F --report_gbits -s 65536 -n 2000 \
	> "$W/bw.server" 2>&1 &
CHILDREN+=($!)
for ((i = 0; i < 150; i++)); do ss -Hltn 'sport = :18791' | grep -q . && break; sleep 0.1; done
timeout -k 5 60 ib_write_bw -d "$DEV1" ${g1:+-x $g1} -u 18 -p 18791 -F --report_gbits -s 65536 -n 2000 "$ADDR0" \
	> "$W/bw.client" 2>&1
bw=$(awk '/^ *65536 +2000 /{print $4}' "$W/bw.client" | head -n1)
stop_children
[ -n "$bw" ] || { cat "$W/bw.client"; fail "ib_write_bw gave no figure"; }
engine_conf "$W/p.conf" prefill-t prefill 18792
engine_conf "$W/d.conf" decode-t decode 18792
shape=(--rooms "$rooms" --buffers 64 --block-size 16384 --blocks-per-room 2 --seed 9 --json --timeout 200
	--verify-rooms 32 --no-progress)
timeout -k 5 220 "$BENCH" --prefill-config "$W/p.conf" "${shape[@]}" > "$W/p.out" 2> "$W/p.err" &
CHILDREN+=($!)
sleep 2
timeout -k 5 220 "$BENCH" --decode-config "$W/d.conf" "${shape[@]}" > "$W/d.out" 2> "$W/d.err"
rc=$?
stop_children
out=$(grep '^{' "$W/d.out" | tail -n1)
kb=$(sed -n 's/.*"gbit_per_s": \([0-9.]*\).*/\1/p' <<< "$out")
[ $rc = 0 ] && [ -n "$kb" ] || { show "$W/d.err"; fail "kvferry-bench exit $rc: $out"; }
ratio=$(awk -v a="$kb" -v b="$bw" 'BEGIN { printf "%.2f", a / b }')
echo "throughput: ib_write_bw  $bw Gb/s (2000 x 64 KiB RDMA WRITEs, $DEV1 -> $DEV0)"
echo "throughput: kvferry-bench $kb Gb/s ($rooms rooms x 64 buffers x 2 x 16 KiB, then 32 checked, $DEV1 <- $DEV0)"
echo "throughput: kvferry-bench / ib_write_bw = $ratio"
pass "kvferry-bench $kb Gb/s, ib_write_bw $bw Gb/s, ratio $ratio"
