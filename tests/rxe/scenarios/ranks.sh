#!/usr/bin/env bash
# Issue 9: ranks of different tensor parallelism and pipeline stages, one
# sender per receiver room (tests/rxe/ranks_driver: prefill on DEV0, decode
# on DEV1, host memory, every byte checked against the global tensor):
#   slice     prefill TP1 (heads 0..7) -> decode rank 1 of TP2 (heads 4..7);
#             then prefill rank 1 of TP2 (heads 4..7) -> decode TP1 (0..7):
#             it writes only its half, the other half stays untouched
#   pipeline  a prefill stage holding layers 16..31 -> a decode of 32 layers
#             (its layers 0..15 untouched)
#   mismatch  head_bytes 64 at the prefill, 128 at the decode: the
#             connection fails, both sides' logs name the buffer and field
#   bench     a figure: the same receiver bytes head-sliced (TP1 -> TP2
#             rank 1) and whole-block (TP2 rank 1 -> TP2 rank 1), same link,
#             same run: Gb/s and RDMA WRITEs per page (the prefill's
#             kvferry_work_requests_posted_total over pages x buffers); and
#             the same without geometry, which must post exactly the WRs of
#             equal geometry (the whole-block path, unchanged)
#   ranks.sh BUILD DEV0 ADDR0 DEV1 ADDR1 slice|pipeline|mismatch|bench [ROOMS]
. "$(dirname "$0")/common.sh"
mode=${1:?slice|pipeline|mismatch|bench}
rooms=${2:-16}
RANKS=$BIN/ranks_driver
[ -x "$RANKS" ] || fail "not built: $RANKS"
case $mode in slice) port=18761 ;; pipeline) port=18763 ;; mismatch) port=18764 ;; *) port=18765 ;; esac

# metric PORT NAME : a counter from the engine's /metrics (bash's /dev/tcp)
metric() {
	local line
	exec 3<> "/dev/tcp/127.0.0.1/$1" || return 1
	printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3
	while IFS= read -r line <&3; do
		case $line in "$2 "*) echo "${line#* }" | tr -d '\r' ;; esac
	done
	exec 3>&-
}

# pair NAME PREFILL-ARGS... -- DECODE-ARGS... : one prefill, one decode;
# both must exit 0. Outputs in $W/NAME.{p,d}.{out,log}.
pair() {
	local name=$1 pargs=() dargs=() ppid dpid drc prc mport i
	shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do pargs+=("$1"); shift; done
	shift
	dargs=("$@")
	port=$((port + 10))
	engine_conf "$W/$name.p.conf" "prefill-$name" prefill $port
	engine_conf "$W/$name.d.conf" "decode-$name" decode $port
	# a port of its own per pair: the last prefill's may not be free yet
	mport=$((port + 1000))
	[ -n "${METRICS_PORT:-}" ] &&
		echo "metrics: { listen_port = $mport; interval_ms = 100; };" >> "$W/$name.p.conf"
	rm -f "$W/$name.ready"
	timeout -k 5 200 "$RANKS" --role prefill --config "$W/$name.p.conf" --ready-file "$W/$name.ready" \
		"${pargs[@]}" > "$W/$name.p.out" 2> "$W/$name.p.log" &
	ppid=$!
	CHILDREN+=("$ppid")
	wait_file "$W/$name.ready" 60 || { show "$W/$name.p.out" "$W/$name.p.log"; fail "$name: prefill not ready"; }
	timeout -k 5 200 "$RANKS" --role decode --config "$W/$name.d.conf" "${dargs[@]}" \
		> "$W/$name.d.out" 2> "$W/$name.d.log" &
	dpid=$!
	CHILDREN+=("$dpid")
	# the prefill's count, read while it lingers after its last room
	if [ -n "${METRICS_PORT:-}" ]; then
		WRS=
		wait_lines "$W/$name.p.out" '^driver: role=prefill rooms=' 1 190
		for ((i = 0; i < 5 && ${#WRS} == 0; i++)); do
			sleep 1
			WRS=$(metric "$mport" kvferry_work_requests_posted_total 2> /dev/null)
		done
	fi
	wait "$dpid"
	drc=$?
	wait "$ppid"
	prc=$?
	note "$name: decode: $(grep '^driver: role=decode rooms' "$W/$name.d.out")"
	[ $drc = 0 ] && [ $prc = 0 ] ||
		{ show "$W/$name.d.out" "$W/$name.d.log" "$W/$name.p.out" "$W/$name.p.log"; fail "$name: decode exit $drc, prefill exit $prc"; }
}

shape=(--rooms "$rooms" --pages 4 --window 8 --page-tokens 16 --head-bytes 128)
case $mode in
slice)
	pair tp1_to_tp2r1 "${shape[@]}" --tp 1 --layers 0:4 -- \
		"${shape[@]}" --tp 2 --rank 1 --layers 0:4 --src 1:0:0:4
	pair tp2r1_to_tp1 "${shape[@]}" --tp 2 --rank 1 --layers 0:4 -- \
		"${shape[@]}" --tp 1 --layers 0:4 --src 2:1:0:4
	for n in tp1_to_tp2r1 tp2r1_to_tp1; do
		[ "$(summary "$W/$n.d.out" ok)" = "$rooms" ] && [ "$(summary "$W/$n.d.out" bad_bytes)" = 0 ] ||
			fail "$n: not every room landed right"
	done
	# the half the prefill does not hold was checked untouched (0xdd) above;
	# the landed byte count says only the other half was expected
	[ "$(summary "$W/tp2r1_to_tp1.d.out" bytes)" = "$(summary "$W/tp1_to_tp2r1.d.out" bytes)" ] ||
		fail "TP2 rank 1 -> TP1 should land exactly what TP1 -> TP2 rank 1 does"
	pass "TP1 -> TP2 rank 1 and TP2 rank 1 -> TP1: $rooms rooms each, every byte as the global tensor says, the other half untouched"
	;;
pipeline)
	pair stage2 --rooms "$rooms" --pages 2 --window 8 --page-tokens 4 --head-bytes 16 --layers 16:32 -- \
		--rooms "$rooms" --pages 2 --window 8 --page-tokens 4 --head-bytes 16 --layers 0:32 --src 1:0:16:32
	[ "$(summary "$W/stage2.d.out" ok)" = "$rooms" ] && [ "$(summary "$W/stage2.d.out" bad_bytes)" = 0 ] ||
		fail "stage 2 of 2 -> decode: not every room landed right"
	pass "pipeline stage (layers 16..31) -> decode of 32 layers: $rooms rooms, layers 16..31 written, 0..15 untouched"
	;;
mismatch)
	BOOTSTRAP_S=30
	engine_conf "$W/m.p.conf" prefill-m prefill $port
	engine_conf "$W/m.d.conf" decode-m decode $port
	timeout -k 5 100 "$RANKS" --role prefill --config "$W/m.p.conf" --ready-file "$W/m.ready" \
		--head-bytes 64 --serve 30 > "$W/m.p.out" 2> "$W/m.p.log" &
	CHILDREN+=($!)
	wait_file "$W/m.ready" 60 || fail "prefill not ready"
	timeout -k 5 100 "$RANKS" --role decode --config "$W/m.d.conf" --rooms 2 --head-bytes 128 \
		--expect-fail > "$W/m.d.out" 2> "$W/m.d.log"
	rc=$?
	want="region 'kv': sender buffer 0 (layer 0 kind 0): head_bytes 64 at the sender, 128 at the receiver (its buffer 0)"
	cat "$W/m.d.out"
	[ $rc = 0 ] || { show "$W/m.d.log"; fail "decode exit $rc: its rooms did not all fail"; }
	grep -qF "$want" "$W/m.d.log" || { show "$W/m.d.log"; fail "the decode's log does not say: $want"; }
	for ((i = 0; i < 100; i++)); do grep -qF "$want" "$W/m.p.log" && break; sleep 0.1; done
	grep -qF "$want" "$W/m.p.log" || { show "$W/m.p.log"; fail "the prefill's log does not say: $want"; }
	note "decode: $(grep -F "$want" "$W/m.d.log" | head -n1)"
	note "prefill: $(grep -F "$want" "$W/m.p.log" | head -n1)"
	pass "head_bytes 64 vs 128: the connection failed, both sides name the buffer and the field"
	;;
bench)
	METRICS_PORT=19761
	# every room its own pages (window = rooms), checked after the timed part
	big=(--rooms "$rooms" --pages 4 --window "$rooms" --page-tokens 16 --head-bytes 128 --layers 0:4)
	pair sliced "${big[@]}" --tp 1 --linger 8 -- "${big[@]}" --tp 2 --rank 1 --src 1:0:0:4 --check-at-end
	wrs_s=$WRS
	pair whole "${big[@]}" --tp 2 --rank 1 --linger 8 -- "${big[@]}" --tp 2 --rank 1 --src 2:1:0:4 --check-at-end
	wrs_w=$WRS
	pair nogeom "${big[@]}" --tp 2 --rank 1 --no-geometry --linger 8 -- "${big[@]}" --tp 2 --rank 1 \
		--no-geometry --src 2:1:0:4 --check-at-end
	wrs_n=$WRS
	pages=$((rooms * 4 * 8)) # rooms x pages x (4 layers x K, V)
	gs=$(summary "$W/sliced.d.out" gbit) gw=$(summary "$W/whole.d.out" gbit)
	gn=$(summary "$W/nogeom.d.out" gbit)
	[ -n "$wrs_s" ] && [ -n "$wrs_w" ] && [ -n "$wrs_n" ] || fail "no work request count from /metrics"
	note "head-sliced (TP1 -> TP2 rank 1): $gs Gb/s, $(awk -v a="$wrs_s" -v b=$pages 'BEGIN { printf "%.2f", a / b }') WRs per page ($wrs_s for $pages pages)"
	note "whole-block (TP2 rank 1 -> TP2 rank 1, same bytes): $gw Gb/s, $(awk -v a="$wrs_w" -v b=$pages 'BEGIN { printf "%.2f", a / b }') WRs per page ($wrs_w for $pages pages)"
	note "no geometry (the same buffers by position): $gn Gb/s, $(awk -v a="$wrs_n" -v b=$pages 'BEGIN { printf "%.2f", a / b }') WRs per page"
	[ "$(summary "$W/sliced.d.out" bytes)" = "$(summary "$W/whole.d.out" bytes)" ] ||
		fail "the two layouts did not move the same bytes"
	[ "$wrs_w" = "$wrs_n" ] || fail "equal geometry posted $wrs_w WRs, no geometry $wrs_n: not the same path"
	pass "sliced $gs Gb/s vs whole-block $gw Gb/s on the same link, same run"
	;;
*) fail "unknown mode $mode" ;;
esac
