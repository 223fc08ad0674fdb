# shellcheck shell=bash
# Sourced by rails.sh for its bench mode (conf, W, DEV0..3, rooms set there):
# ib_write_bw on each rail alone, kvferry-bench on 1 and 2 rails. Exits.
bw_one() { # SERVER-DEV CLIENT-DEV SERVER-ADDR PORT -> Gb/s
	local gs gc out
	gs=$(gid "$1") gc=$(gid "$2")
	timeout -k 5 90 ib_write_bw -d "$1" ${gs:+-x $gs} -u 18 -p "$4" -F --report_gbits -s 65536 -n 2000 \
		> "$W/bw.$1.server" 2>&1 &
	CHILDREN+=($!)
	for ((i = 0; i < 150; i++)); do ss -Hltn "sport = :$4" | grep -q . && break; sleep 0.1; done
	timeout -k 5 90 ib_write_bw -d "$2" ${gc:+-x $gc} -u 18 -p "$4" -F --report_gbits -s 65536 -n 2000 "$3" \
		> "$W/bw.$1.client" 2>&1
	stop_children
	awk '/^ *65536 +2000 /{print $4}' "$W/bw.$1.client" | head -n1
}
kv_bench() { # RAILS PORT -> Gb/s (decode's figure); the JSON into $W/bench.RAILS
	local n=$1 p=$2
	conf "$W/bp.conf" prefill-b "[\"$DEV0\", \"$DEV2\"]" "listen_addr = \"0.0.0.0\"; listen_port = $p;"
	conf "$W/bd.conf" decode-b "[\"$DEV1\", \"$DEV3\"]" "peer = \"$ADDR0:$p,${KVF_RXE_ADDR2:?}:$p\";"
	local shape=(--rooms "$rooms" --buffers 64 --block-size 16384 --blocks-per-room 2 --seed 9 --json
		--timeout 200 --verify-rooms 32 --no-progress --rails "$n")
	timeout -k 5 220 "$BENCH" --prefill-config "$W/bp.conf" "${shape[@]}" > "$W/bench.$n.p" 2> "$W/bench.$n.perr" &
	CHILDREN+=($!)
	sleep 2
	timeout -k 5 220 "$BENCH" --decode-config "$W/bd.conf" "${shape[@]}" > "$W/bench.$n.d" 2> "$W/bench.$n.derr"
	local rc=$?
	wait "${CHILDREN[0]}" 2> /dev/null
	CHILDREN=()
	[ $rc = 0 ] || { show "$W/bench.$n.derr" "$W/bench.$n.perr" >&2; return 1; }
	grep '^{' "$W/bench.$n.d" | tail -n1 | sed -n 's/.*"gbit_per_s": \([0-9.]*\).*/\1/p'
}
bw0=$(bw_one "$DEV0" "$DEV1" "$ADDR0" 18811) bw1=$(bw_one "$DEV2" "$DEV3" "$KVF_RXE_ADDR2" 18812)
[ -n "$bw0" ] && [ -n "$bw1" ] || fail "ib_write_bw gave no figure (rail 0: '${bw0}', rail 1: '${bw1}')"
k1=$(kv_bench 1 18813) || fail "kvferry-bench --rails 1 failed"
k2=$(kv_bench 2 18814) || fail "kvferry-bench --rails 2 failed"
[ -n "$k1" ] && [ -n "$k2" ] || fail "kvferry-bench gave no figure (1 rail: '$k1', 2 rails: '$k2')"
for n in 1 2; do
	grep '^{' "$W/bench.$n.p" | tail -n1 | grep -o '"rails": \[[^]]*\]' | sed "s/^/rails $n (prefill): /"
	bad=$(grep '^{' "$W/bench.$n.d" | tail -n1 | sed -n 's/.*"bad_words": \([0-9]*\).*/\1/p')
	[ "$bad" = 0 ] || fail "kvferry-bench --rails $n: ${bad:-no} bad_words figure"
done
r=$(awk -v a="$k2" -v b="$k1" 'BEGIN { printf "%.2f", a / b }')
echo "rails: ib_write_bw rail 0 ($DEV1 -> $DEV0) $bw0 Gb/s, rail 1 ($DEV3 -> $DEV2) $bw1 Gb/s"
echo "rails: kvferry-bench --rails 1 $k1 Gb/s, --rails 2 $k2 Gb/s; 2 rails / 1 rail = $r"
echo "rails: kvferry-bench / ib_write_bw of its rails: 1 rail $(awk -v a="$k1" -v b="$bw0" 'BEGIN { printf "%.2f", a / b }'), 2 rails $(awk -v a="$k2" -v b="$bw0" -v c="$bw1" 'BEGIN { printf "%.2f", a / (b + c) }')"
pass "1 rail $k1 Gb/s, 2 rails $k2 Gb/s (x$r); ib_write_bw $bw0 and $bw1 Gb/s"
