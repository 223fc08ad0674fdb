#!/usr/bin/env bash
# Issue 42, "no fixed cap on connections": one prefill engine on DEV0 and
# many decode engines on DEV1 (several per process, conns_driver), each
# decode engine its own peer connection of QPS queue pairs, one room each,
# every byte checked. Frames are per engine, not per connection (docs/
# design.md, "Frames: per rail, not per peer"): each decode engine here is a
# rank of its own, so its frames are made small (4 KiB, 16 receive and 16
# send: it registers one buffer), and its queues short (sq_depth 16), so
# that the guest holds them all. RDMA_P / RDMA_D replace the prefill's /
# the decodes' rdma keys (scripts/bench-scale.sh: the prefill at the
# defaults).
#   many ENGINES PROCS QPS: the prefill must hold ENGINES x QPS connections
#         at once (past the old fixed table of 1,024 when that is more),
#         every room SUCCESS on both sides, nothing refused; prints the
#         pinned memory (VmPin) and RSS per connection on both sides
#         WINDOW: engines a decode process connects at once (4; "all": a
#         storm, every engine at once); each decode reports its engines'
#         open-to-SUCCESS times (lat_p50_s, lat_max_s)
#         KILL=K: a storm with the last K decode processes (the last
#         started) SIGKILLing themselves KILL_MS (300) after their rooms
#         asked for their connections, mid-setup: every other
#         room SUCCESS, and the prefill's connections fall back to the
#         survivors' (the killed peers' torn down by their auth timeout or
#         heartbeat)
#   cap:  the prefill's rdma.max_conns = 6 and 4 decode engines of 2 QPs:
#         three get their connections and rooms, the fourth is refused
#         (-ENOSPC, counted in conns_over_max, the log line names the key)
#   conns.sh BUILD DEV0 ADDR0 DEV1 ADDR1 many ENGINES PROCS QPS | cap
. "$(dirname "$0")/common.sh"
mode=${1:?many|cap}
DRV=$BIN/conns_driver
[ -x "$DRV" ] || fail "not built: $DRV"
port=18761
# the least there is, where the test needs many engines or connections
small="sq_depth = 16; rq_depth = 16; signal_every = 16; frame_size = 4096; send_frames = 16;"

# conf FILE ROLE EXTRA-RDMA-KEYS
conf() {
	local side
	side=$(rdma_side "$2" "$port")
	cat > "$1" <<CONF
log: { level = "${LOG_LEVEL:-warn}"; };
engine: { max_blocks_per_room = 64; summary_interval_s = 0; ring_size = 1024;
          max_rooms = ${MAX_ROOMS:-64}; max_tombstones = 1024; };
deadlines: { bootstrap_s = 280; inflight_s = 280; receiver_waiting_s = 280; quiesce_s = 10; };
heartbeat: { interval_ms = 5000; misses = 6; };
rdma: { $side auth_token = "kvf-suite"; auth_timeout_ms = 30000; connect_timeout_ms = 30000;
        reconnect_backoff_ms = 0; $3 };
CONF
}

# run_decodes ENGINES PROCS QPS : PROCS processes, ENGINES engines in all
# (engines per process: decode_engines K ENGINES PROCS; the first of
# process K: decode_first K ENGINES PROCS)
decode_first() { echo $(($1 * $2 / $3)); }
decode_engines() { echo $((($1 + 1) * $2 / $3 - $1 * $2 / $3)); }
run_decodes() {
	local engines=$1 procs=$2 k per win info
	for ((k = 0; k < procs; k++)); do
		per=$(decode_engines "$k" "$engines" "$procs")
		win=${WINDOW:-4}
		[ "$win" = all ] && win=$per
		info=() # the processes to be killed
		[ "$k" -ge $((procs - ${KILL:-0})) ] && info=(--die-ms "${KILL_MS:-300}")
		timeout -k 5 300 "$DRV" --role decode --config "$W/d.conf" --engines "$per" \
			--index "$(decode_first "$k" "$engines" "$procs")" --window "$win" --timeout 290 \
			--done-file "$W/done" ${KILL:+--allow-fail} "${info[@]}" > "$W/d$k.out" 2> "$W/d$k.log" &
		CHILDREN+=("$!")
		eval "pid_d$k=$!"
	done
}

kb_per() { awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN { printf "%.0f", n ? (b - a) / n : 0 }'; }

case $mode in
many)
	engines=${2:?engines} procs=${3:?procs} qps=${4:?qps}
	# Both sides live in this guest: each decode engine costs its frames
	# and its engine (about KB_ENGINE KiB), each connection its QPs on both
	# sides (KB_CONN KiB), plus 400 MiB for the rest. A smaller guest runs
	# as many as it holds and says so.
	avail=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo)
	fit=$(((avail - 409600) / (${KB_ENGINE:-1200} + ${KB_CONN:-600} * qps)))
	if [ "$fit" -lt "$engines" ]; then
		note "this guest has $((avail / 1024)) MiB available: it holds $((fit * qps)) connections, not $((engines * qps)); running $fit engines (scripts/rxe-vm.sh with KVF_VM_MEM=6144 runs them all)"
		engines=$fit
	fi
	[ "$engines" -ge 1 ] || fail "no memory for one decode engine"
	kill=${KILL:-0}
	d0=$(decode_first $((procs - kill)) "$engines" "$procs") # the killed processes' first engine
	dk=$((engines - d0))
	want=$(((engines - dk) * qps))
	MAX_ROOMS=$((engines + 16)) conf "$W/p.conf" prefill "${RDMA_P-$small}"
	conf "$W/d.conf" decode "qps_per_peer = $qps; poll_idle_us = 0; ${RDMA_D-$small}"
	timeout -k 5 300 "$DRV" --role prefill --config "$W/p.conf" --rooms "$engines" \
		--timeout 290 --expect-conns "$want" --ready-file "$W/ready" --done-file "$W/done" \
		${KILL:+--doomed $d0:$engines} > "$W/p.out" 2> "$W/p.log" &
	CHILDREN+=("$!")
	pid_p=$!
	wait_file "$W/ready" 30 || { show "$W/p.out" "$W/p.log"; fail "prefill not ready in 30 s"; }
	note "prefill on $DEV0; $engines decode engines x $qps QPs in $procs processes on $DEV1," \
		"${WINDOW:-4} connecting at once per process: $((engines * qps)) connections"
	run_decodes "$engines" "$procs" "$qps"
	if [ "$kill" -gt 0 ]; then
		note "the last $kill decode processes ($dk engines) kill themselves ${KILL_MS:-300} ms" \
			"after their rooms asked for their connections"
	fi
	wait "$pid_p"; rc_p=$?
	sums=(0 0 0 0 0 0 0 0) lat_max=0 lat_p50=
	for ((k = 0; k < procs; k++)); do
		eval "wait \$pid_d$k"; rc=$?
		[ "$k" -ge $((procs - kill)) ] && continue
		out=$W/d$k.out
		grep '^driver: role=' "$out" | tail -n1
		[ "$rc" = 0 ] || { show "$out" "$W/d$k.log"; fail "decode process $k exit $rc"; }
		fgt "$(summary "$out" lat_max_s)" "$lat_max" && lat_max=$(summary "$out" lat_max_s)
		lat_p50+=" $(summary "$out" lat_p50_s)"
		sums[0]=$((sums[0] + $(summary "$out" ok)))
		sums[1]=$((sums[1] + $(summary "$out" bad_bytes)))
		sums[2]=$((sums[2] + $(summary "$out" checked_bytes)))
		sums[3]=$((sums[3] + $(summary "$out" conns_live_max)))
		sums[4]=$((sums[4] + $(summary "$out" pin0_kb)))
		sums[5]=$((sums[5] + $(summary "$out" pin_kb)))
		sums[6]=$((sums[6] + $(summary "$out" rss0_kb)))
		sums[7]=$((sums[7] + $(summary "$out" rss_kb)))
	done
	grep '^driver: role=' "$W/p.out" | tail -n1
	[ "$rc_p" = 0 ] || { show "$W/p.out" "$W/p.log"; fail "prefill exit $rc_p"; }
	pok=$(summary "$W/p.out" ok) cut=$(summary "$W/p.out" cut)
	[ "$(summary "$W/p.out" failed)" = 0 ] || { show "$W/p.out"; fail "prefill: rooms failed"; }
	[ $((pok + cut)) = "$engines" ] && [ "$cut" -le "$dk" ] ||
		fail "prefill: ok $pok, $cut of the killed peers' rooms cut, of $engines"
	[ "${sums[0]}" = $((engines - dk)) ] || fail "decodes: ok ${sums[0]} of $((engines - dk))"
	[ "${sums[1]}" = 0 ] || fail "decodes: ${sums[1]} bad bytes"
	[ "${sums[2]}" = $(((engines - dk) * 4 * 4096)) ] || fail "decodes: checked ${sums[2]} bytes"
	live=$(summary "$W/p.out" conns_live_max)
	lat_p50=$(printf '%s\n' $lat_p50 | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
	note "setup (a decode engine's open to its room's SUCCESS): median of the processes' medians" \
		"$lat_p50 s, the slowest $lat_max s"
	if [ "$kill" -gt 0 ]; then
		end=$(summary "$W/p.out" conns_end)
		[ "$end" = "$want" ] || { show "$W/p.log"; fail "prefill holds $end connections after the killed peers, not $want"; }
		note "killed peers: $cut of their $dk rooms cut on the prefill; its connections $live at most, $end after;" \
			"down in ESTABLISHED $(grep -c 'down in ESTABLISHED' "$W/p.log"), before it" \
			"$(grep 'down in ' "$W/p.log" | grep -vc 'down in ESTABLISHED')"
		pass "storm with $dk of $engines decode engines killed mid-setup: every other room SUCCESS" \
			"(${sums[2]} bytes checked), the prefill back to the survivors' $want connections," \
			"slowest setup $lat_max s"
	fi
	[ "$live" = "$want" ] || { show "$W/p.log"; fail "prefill held $live connections at most, not $want"; }
	[ "$(summary "$W/p.out" conns_over_max)" = 0 ] || fail "prefill refused connections"
	ppin=$(kb_per "$(summary "$W/p.out" pin0_kb)" "$(summary "$W/p.out" pin_kb)" "$live")
	prss=$(kb_per "$(summary "$W/p.out" rss0_kb)" "$(summary "$W/p.out" rss_kb)" "$live")
	dpin=$(kb_per "${sums[4]}" "${sums[5]}" "${sums[3]}")
	drss=$(kb_per "${sums[6]}" "${sums[7]}" "${sums[3]}")
	note "per connection: prefill pinned $ppin KiB, RSS $prss KiB; decode pinned $dpin KiB, RSS $drss KiB (engines included)"
	note "frames: prefill $(summary "$W/p.out" frame_kb) KiB (its engine, whatever the peers)"
	echo "scale: engines=$engines qps=$qps conns=$live prefill_pin0_kb=$(summary "$W/p.out" pin0_kb)" \
		"prefill_pin_kb=$(summary "$W/p.out" pin_kb) prefill_rss0_kb=$(summary "$W/p.out" rss0_kb)" \
		"prefill_rss_kb=$(summary "$W/p.out" rss_kb) prefill_frame_kb=$(summary "$W/p.out" frame_kb)" \
		"decode_pin0_kb=${sums[4]} decode_pin_kb=${sums[5]} decode_rss0_kb=${sums[6]}" \
		"decode_rss_kb=${sums[7]} setup_s=$(summary "$W/p.out" setup_s)" \
		"lat_p50_s=$lat_p50 lat_max_s=$lat_max window=${WINDOW:-4}"
	note "prefill: $live connections at once; every room SUCCESS after $(summary "$W/p.out" setup_s) s"
	pass "$live connections to one prefill at once ($engines decode engines x $qps QPs, $procs processes)," \
		"every room SUCCESS, ${sums[2]} bytes checked; pinned per connection: prefill $ppin KiB," \
		"decode $dpin KiB; RSS per connection: prefill $prss KiB, decode $drss KiB"
	;;
cap)
	LOG_LEVEL=info conf "$W/p.conf" prefill "max_conns = 6; $small"
	conf "$W/d.conf" decode "qps_per_peer = 2; $small"
	timeout -k 5 100 "$DRV" --role prefill --config "$W/p.conf" --rooms 4 --timeout 90 \
		--until-s 25 --allow-fail --ready-file "$W/ready" --done-file "$W/done" \
		> "$W/p.out" 2> "$W/p.log" &
	CHILDREN+=("$!")
	pid_p=$!
	wait_file "$W/ready" 30 || { show "$W/p.out" "$W/p.log"; fail "prefill not ready in 30 s"; }
	# one at a time: the first three take the six places
	for k in 0 1 2 3; do
		timeout -k 5 100 "$DRV" --role decode --config "$W/d.conf" --engines 1 --index $k \
			--timeout 90 --allow-fail --done-file "$W/done" > "$W/d$k.out" 2> "$W/d$k.log" &
		CHILDREN+=("$!")
		eval "pid_d$k=$!"
		[ $k = 3 ] || wait_lines "$W/p.log" "connection [0-9]+ from .* established" $((2 * k + 2)) 40 ||
			{ show "$W/p.log"; fail "decode $k not connected in 40 s"; }
	done
	wait "$pid_p"; rc_p=$?
	for k in 0 1 2 3; do eval "wait \$pid_d$k"; done
	grep '^driver: role=' "$W/p.out" | tail -n1
	[ "$rc_p" = 0 ] || { show "$W/p.out" "$W/p.log"; fail "prefill exit $rc_p"; }
	[ "$(summary "$W/p.out" ok)" = 3 ] || { show "$W/p.out" "$W/p.log"; fail "prefill: ok $(summary "$W/p.out" ok) of 3"; }
	over=$(summary "$W/p.out" conns_over_max)
	fgt "$over" 0 || { show "$W/p.log"; fail "nothing counted in conns_over_max"; }
	line=$(grep -m1 'rdma.max_conns = 6' "$W/p.log") || { show "$W/p.log"; fail "no log line naming rdma.max_conns"; }
	note "prefill log: $line"
	for k in 0 1 2; do [ "$(summary "$W/d$k.out" ok)" = 1 ] || fail "decode $k: its room did not succeed"; done
	[ "$(summary "$W/d3.out" failed)" = 1 ] || { show "$W/d3.out"; fail "decode 3: its room did not fail"; }
	note "decode 3: $(grep -m1 FAILED "$W/d3.out")"
	pass "rdma.max_conns = 6: three peers of 2 QPs served, the fourth refused (-ENOSPC," \
		"conns_over_max = $over, the log line names the key), its room failed"
	;;
kill)
	# the prefill SIGKILLed while decode engines are still connecting:
	# every decode process ends by itself (its rooms failed), no crash
	MAX_ROOMS=64 conf "$W/p.conf" prefill "$small"
	conf "$W/d.conf" decode "qps_per_peer = 4; poll_idle_us = 0; $small"
	timeout -k 5 100 "$DRV" --role prefill --config "$W/p.conf" --rooms 24 --timeout 90 \
		--ready-file "$W/ready" > "$W/p.out" 2> "$W/p.log" &
	CHILDREN+=("$!")
	pid_p=$!
	wait_file "$W/ready" 30 || { show "$W/p.out" "$W/p.log"; fail "prefill not ready in 30 s"; }
	for k in 0 1; do
		timeout -k 5 100 "$DRV" --role decode --config "$W/d.conf" --engines 12 \
			--index $((k * 12)) --window 3 --timeout 80 --allow-fail \
			> "$W/d$k.out" 2> "$W/d$k.log" &
		CHILDREN+=("$!")
		eval "pid_d$k=$!"
	done
	sleep "${KILL_AFTER_S:-8}"
	vchild=$(pgrep -P "$pid_p" | head -n1)
	[ -n "$vchild" ] && kill -KILL "$vchild"
	note "prefill SIGKILLed at $(now)"
	for k in 0 1; do
		eval "wait \$pid_d$k"; rc=$?
		grep '^driver: role=' "$W/d$k.out" | tail -n1
		grep -q 'Sanitizer' "$W/d$k.log" && { show "$W/d$k.log"; fail "decode $k: a sanitizer report"; }
		[ "$rc" -lt 124 ] || { show "$W/d$k.out" "$W/d$k.log"; fail "decode process $k exit $rc"; }
		grep -q '^driver: role=' "$W/d$k.out" || fail "decode $k: no summary"
	done
	pass "the prefill killed mid-setup: both decode processes ended by themselves, their rooms failed, nothing crashed"
	;;
*) fail "mode $mode" ;;
esac
