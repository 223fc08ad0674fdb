#!/usr/bin/env bash
# Issue 9: ranks of different tensor parallelism and pipeline stages, one
# process per rank (tests/rxe/ranks_driver: prefill ranks on DEV0, decode
# ranks on DEV1, host memory, every byte checked against the global tensor):
#   tp2to1    prefill TP2 (heads 0..3, 4..7) -> decode TP1 (heads 0..7): one
#             fan-in room per request fed by both prefill ranks, each
#             writing its heads of every page
#   tp1to2    prefill TP1 (heads 0..7) -> decode TP2 (heads 0..3, 4..7): the
#             prefill's room a fan-out to both decode ranks, each sent its
#             heads only
#   stages    a 2-stage prefill (layers 0..15, 16..31), each stage rank 1 of
#             TP2 (heads 4..7) -> one decode TP1 of 32 layers: fan-in, paired
#             by global layer; every layer's heads 4..7 written by the stage
#             holding it, heads 0..3 (nobody's) checked untouched, so a
#             sender that wrote past its slice would show
#   mismatch  head_bytes 64 at the prefill, 128 at the decode: the
#             connection fails, both sides' logs name the buffer and field
#   bench     a figure: the same receiver bytes head-sliced (TP1 -> TP2
#             rank 1) and whole-block (TP2 rank 1 -> TP2 rank 1), same link,
#             same run: Gb/s and RDMA WRITEs per page (the prefill's
#             kvferry_work_requests_posted_total over pages x buffers); and
#             the same without geometry, which must post exactly the WRs of
#             equal geometry (the whole-block path, unchanged)
#   ranks.sh BUILD DEV0 ADDR0 DEV1 ADDR1 tp2to1|tp1to2|stages|mismatch|bench [ROOMS]
. "$(dirname "$0")/common.sh"
mode=${1:?tp2to1|tp1to2|stages|mismatch|bench}
rooms=${2:-16}
RANKS=$BIN/ranks_driver
[ -x "$RANKS" ] || fail "not built: $RANKS"
case $mode in tp2to1) port=18761 ;; tp1to2) port=18762 ;; stages) port=18763 ;;
mismatch) port=18764 ;; *) port=18765 ;; esac

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
		--linger-until "$W/$name.done" "${pargs[@]}" > "$W/$name.p.out" 2> "$W/$name.p.log" &
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
	touch "$W/$name.done" # the decode is done, the count read: the prefill may go
	wait "$ppid"
	prc=$?
	note "$name: decode: $(grep '^driver: role=decode rooms' "$W/$name.d.out")"
	[ $drc = 0 ] && [ $prc = 0 ] ||
		{ show "$W/$name.d.out" "$W/$name.d.log" "$W/$name.p.out" "$W/$name.p.log"; fail "$name: decode exit $drc, prefill exit $prc"; }
}

# ranks NAME NP RANK-ARGS -- RANK-ARGS -- ... : NP prefill ranks (each its
# own engine and port), then the decode ranks, each given --peer for every
# prefill rank (more than one: a fan-in room). Every rank must exit 0, and
# every decode rank land all rooms with no bad byte. Outputs in
# $W/NAME.{p,d}K.{out,log}; $BYTES: the bytes each decode rank checked.
ranks() {
	local name=$1 np=$2 args=() all=() pids=() names=() peers=() k=0 i n rc bad=0
	shift 2
	port=$((port + 10))
	while [ $# -gt 0 ]; do
		args=()
		while [ $# -gt 0 ] && [ "$1" != -- ]; do args+=("$1"); shift; done
		[ $# -gt 0 ] && shift
		if [ $k -lt "$np" ]; then
			n=p$k
			engine_conf "$W/$name.$n.conf" "prefill-$name-$k" prefill $((port + k))
			peers+=(--peer "$ADDR0:$((port + k))")
			rm -f "$W/$name.$n.ready"
			timeout -k 5 200 "$RANKS" --role prefill --config "$W/$name.$n.conf" \
				--ready-file "$W/$name.$n.ready" "${args[@]}" > "$W/$name.$n.out" 2> "$W/$name.$n.log" &
		else
			[ $k = "$np" ] && for ((i = 0; i < np; i++)); do
				wait_file "$W/$name.p$i.ready" 60 ||
					{ show "$W/$name.p$i.out" "$W/$name.p$i.log"; fail "$name: prefill rank $i not ready"; }
			done
			n=d$((k - np))
			engine_conf "$W/$name.$n.conf" "decode-$name-$((k - np))" decode $port
			timeout -k 5 200 "$RANKS" --role decode --config "$W/$name.$n.conf" "${peers[@]}" \
				"${args[@]}" > "$W/$name.$n.out" 2> "$W/$name.$n.log" &
		fi
		pids+=($!)
		CHILDREN+=($!)
		names+=("$n")
		all+=("$W/$name.$n.out" "$W/$name.$n.log")
		k=$((k + 1))
	done
	BYTES=
	for ((i = 0; i < ${#pids[@]}; i++)); do
		wait "${pids[$i]}"
		rc=$?
		n=${names[$i]}
		note "$name: $n: $(grep '^driver: role=.* rooms=' "$W/$name.$n.out")"
		[ $rc = 0 ] || { echo "$name: $n exit $rc"; bad=1; }
		case $n in d*)
			[ "$(summary "$W/$name.$n.out" ok)" = "$rooms" ] &&
				[ "$(summary "$W/$name.$n.out" bad_bytes)" = 0 ] || { echo "$name: $n: not every room landed right"; bad=1; }
			BYTES="$BYTES $(summary "$W/$name.$n.out" bytes)" ;;
		esac
	done
	[ $bad = 0 ] || { SHOW_LINES=12 show "${all[@]}"; fail "$name: not every rank as expected"; }
	BYTES=${BYTES# }
}

# small pages (16 tokens x 128 B a head), 4 layers: a page of all 8 heads
# is 16 KiB; a room moves 4 pages x 8 buffers
shape=(--rooms "$rooms" --pages 4 --window 4 --page-tokens 16 --head-bytes 128 --timeout 150)
full=$((rooms * 4 * 8 * 16 * 8 * 128)) # a decode rank of all 8 heads, every byte
case $mode in
tp2to1)
	ranks tp2to1 2 "${shape[@]}" --tp 2 --rank 0 --layers 0:4 -- "${shape[@]}" --tp 2 --rank 1 --layers 0:4 -- \
		"${shape[@]}" --tp 1 --layers 0:4 --src 2:0:0:4 --src 2:1:0:4
	[ "$BYTES" = $full ] || fail "the decode checked $BYTES bytes from the two ranks, not $full"
	pass "prefill TP2 -> decode TP1: $rooms fan-in rooms of 2 prefill ranks, each writing its 4 heads;" \
		"all $full bytes of the decode's pages as the global tensor says"
	;;
tp1to2)
	ranks tp1to2 1 "${shape[@]}" --tp 1 --layers 0:4 --receivers 2 -- \
		"${shape[@]}" --tp 2 --rank 0 --layers 0:4 --src 1:0:0:4 -- \
		"${shape[@]}" --tp 2 --rank 1 --layers 0:4 --src 1:0:0:4
	[ "$BYTES" = "$((full / 2)) $((full / 2))" ] || fail "the decode ranks checked $BYTES bytes, not $((full / 2)) each"
	pass "prefill TP1 -> decode TP2: $rooms fan-out rooms to 2 decode ranks, each sent its 4 heads;" \
		"$((full / 2)) bytes on each rank as the global tensor says"
	;;
stages)
	# 32 layers of 4 tokens x 16 B a head: small pages, many buffers
	st=(--rooms "$rooms" --pages 2 --window 4 --page-tokens 4 --head-bytes 16 --timeout 150)
	ranks stages 2 "${st[@]}" --tp 2 --rank 1 --layers 0:16 -- "${st[@]}" --tp 2 --rank 1 --layers 16:32 -- \
		"${st[@]}" --tp 1 --layers 0:32 --src 2:1:0:16 --src 2:1:16:32
	half=$((rooms * 2 * 64 * 4 * 4 * 16)) # rooms x pages x (32 layers x K, V) x heads 4..7
	[ "$BYTES" = $half ] || fail "the decode checked $BYTES landed bytes, not $half (heads 4..7 of 32 layers)"
	pass "2-stage prefill (layers 0..15, 16..31; heads 4..7) -> decode of 32 layers: $rooms fan-in rooms" \
		"paired by global layer, $half bytes as the global tensor says, heads 0..3 untouched"
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
