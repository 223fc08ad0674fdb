#!/usr/bin/env bash
# Issue 9: rooms across ranks, processes standing in for ranks (fan_driver),
# prefill ranks on DEV0, decode ranks on DEV1, host memory, every byte
# checked against the pattern both sides derive (pattern.h).
#   out:  an MLA fan-out: one prefill -> 3 decode ranks, one of them a dummy
#         (asks for no data, gets only the final write; its pool must stay
#         untouched); every room SUCCESS on all four
#   in:   fan-in: 2 prefill ranks -> one decode, each writing its half of
#         every request's pages
#   kill: the out shape with bigger rooms, one (non-dummy) decode rank
#         SIGKILLed mid-transfer: the prefill and the two other decode ranks
#         must fail their live rooms in bounded time, printed. A room the
#         dead rank had joined fails with its connection (heartbeat 1 s x 5,
#         or at once on the disconnect) and the others are told; a room it
#         had not joined yet waits for it until the prefill's bootstrap
#         deadline (20 s here: "(2 of 3 joined)"), which bounds that case.
#         The limit is the larger of the two plus slack.
#   fan.sh BUILD DEV0 ADDR0 DEV1 ADDR1 out|in|kill [ROOMS]
. "$(dirname "$0")/common.sh"
mode=${1:?out|in|kill} rooms=${2:-20}
FAN=$BIN/fan_driver
[ -x "$FAN" ] || fail "not built: $FAN"
HB_MS=1000 HB_MISSES=5 KILL_BOOTSTRAP_S=20
slack=${SLACK_S:-10}
limit=$(awk -v a=$HB_MS -v b=$HB_MISSES -v c=$KILL_BOOTSTRAP_S -v s="$slack" \
	'BEGIN { d = a * b / 1000; print (d > c ? d : c) + s }')
case $mode in out) port=18741 ;; in) port=18742 ;; *) port=18743 ;; esac
shape=(--rooms "$rooms" --window 4 --buffers 4 --pages 8 --page-bytes 16384 --timeout 150)
# parked ROOM_INFOs of ids a stopping prefill never creates expire soon
sets=(--set engine.tombstone_ttl_s=15)

# start NAME CONF ARGS... : a rank in the background, output in $W/NAME.out
start() {
	local name=$1 conf=$2
	shift 2
	timeout -k 5 165 "$FAN" --config "$conf" "${sets[@]}" "${shape[@]}" "$@" \
		> "$W/$name.out" 2> "$W/$name.log" &
	CHILDREN+=("$!")
	eval "pid_$name=$!"
}

# finish NAME : wait for the rank, its exit code in rc_NAME
finish() {
	local p
	eval "p=\$pid_$1"
	wait "$p"
	eval "rc_$1=$?"
}

# expect_ok NAME CHECKED : every room SUCCESS and released, no bad byte,
# CHECKED bytes checked (a decode)
expect_ok() {
	local out=$W/$1.out rc
	eval "rc=\$rc_$1"
	grep '^driver: role=.* rooms=' "$out" | tail -n1
	[ "$rc" = 0 ] || { show "$out" "$W/$1.log"; fail "$1 exit $rc"; }
	[ "$(summary "$out" ok)" = "$rooms" ] || { show "$out" "$W/$1.log"; fail "$1: ok $(summary "$out" ok) of $rooms"; }
	[ "$(summary "$out" released)" = "$rooms" ] || fail "$1: released $(summary "$out" released) of $rooms"
	[ "$(summary "$out" bad_bytes)" = 0 ] || fail "$1: $(summary "$out" bad_bytes) bad bytes"
	[ -z "${2:-}" ] || [ "$(summary "$out" checked_bytes)" = "$2" ] ||
		fail "$1: checked $(summary "$out" checked_bytes) bytes, expected $2"
}

page_bytes_all=$((rooms * 8 * 4 * 16384)) # rooms x pages x buffers x bytes
case $mode in
out|kill)
	[ "$mode" = kill ] && BOOTSTRAP_S=$KILL_BOOTSTRAP_S engine_conf "$W/p.conf" fan-p prefill $port
	[ "$mode" = kill ] || engine_conf "$W/p.conf" fan-p prefill $port
	for k in 0 1 2; do engine_conf "$W/d$k.conf" "fan-d$k" decode $port; done
	popt=() dopt=()
	[ "$mode" = kill ] && popt=(--stop-on-fail) dopt=(--stop-on-fail)
	# 2 MiB a rank a room: a TCG guest spends most of its time mid-transfer
	[ "$mode" = kill ] && shape=(--rooms 400 --window 4 --buffers 4 --pages 32 --page-bytes 16384 --timeout 150)
	start p "$W/p.conf" --role prefill --receivers 3 --ready-file "$W/ready" "${popt[@]}"
	wait_file "$W/ready" 30 || { show "$W/p.out" "$W/p.log"; fail "prefill not ready in 30 s"; }
	start d0 "$W/d0.conf" --role decode "${dopt[@]}"
	start d1 "$W/d1.conf" --role decode "${dopt[@]}"
	start d2 "$W/d2.conf" --role decode --dummy "${dopt[@]}"
	note "prefill (fan-out to 3) on $DEV0, decode ranks d0 d1 d2 (dummy) on $DEV1"
	if [ "$mode" = out ]; then
		for n in p d0 d1 d2; do finish $n; done
		expect_ok p
		expect_ok d0 "$page_bytes_all"
		expect_ok d1 "$page_bytes_all"
		expect_ok d2
		pass "$rooms rooms fanned out to 3 decode ranks (one dummy): every room SUCCESS on all" \
			"four, $((page_bytes_all * 2)) bytes checked on the two data ranks, the dummy's pool untouched"
	fi
	wait_lines "$W/d1.out" ' SUCCESS ' 10 60 ||
		{ show "$W/d1.out" "$W/p.out" "$W/p.log"; fail "d1 did not get 10 rooms in 60 s"; }
	vchild=$(pgrep -P "$pid_d1" | head -n1)
	if [ -z "$vchild" ]; then
		kill -0 "$pid_d1" 2> /dev/null && alive=alive || alive=gone
		SHOW_LINES=8 show "$W/d1.out" "$W/d1.log" "$W/p.out"
		fail "no d1 process under pid $pid_d1 (timeout process $alive)"
	fi
	tk=$(now)
	kill -KILL "$vchild"
	note "SIGKILL to decode rank d1 (pid $vchild) at t=$tk"
	for n in p d0 d2; do finish $n; done
	for n in p d0 d2; do
		out=$W/$n.out
		eval "rc=\$rc_$n"
		grep '^driver: role=.* rooms=' "$out" | tail -n1
		[ "$rc" = 0 ] || { show "$out" "$W/$n.log"; fail "$n exit $rc (rooms left live)"; }
		ff=$(summary "$out" first_fail)
		fgt "$ff" 0 || { show "$out"; fail "$n: no room failed after the kill"; }
		# every room that failed, failed within the limit of the kill
		late=$(awk -v tk="$tk" -v lim="$limit" '/ FAILED / { for (i = 1; i <= NF; i++)
			if ($i ~ /^t=/) { t = substr($i, 3) + 0; if (t - tk > lim) print } }' "$out")
		[ -z "$late" ] || { echo "$late" | head -n 5; fail "$n: rooms failed later than $limit s after the kill"; }
		[ "$(summary "$out" bad_bytes)" = 0 ] || fail "$n: bad bytes"
		[ "$(summary "$out" released)" = "$(($(summary "$out" ok) + $(summary "$out" failed)))" ] ||
			fail "$n: not every room released"
		t=$(awk -v a="$ff" -v b="$tk" 'BEGIN { printf "%.2f", a - b }')
		last=$(awk -v tk="$tk" '/ FAILED / { for (i = 1; i <= NF; i++) if ($i ~ /^t=/) t = substr($i, 3) } END { printf "%.2f", t - tk }' "$out")
		reasons=$(grep -o 'reason=[a-z_]*' "$out" | sort | uniq -c | tr -s ' ' | tr '\n' ' ')
		note "$n: first room failed $t s after SIGKILL, last $last s; $reasons"
		times+=("$n $t..$last s")
	done
	grep -E -m1 ' FAILED reason=(peer_lost|deadline)' "$W/p.out" ||
		fail "the prefill did not see the lost rank (no peer_lost, no deadline)"
	grep -q 'reason=peer_abort' "$W/d0.out" || fail "d0 was not told (no peer_abort)"
	grep -q 'reason=peer_abort' "$W/d2.out" || fail "the dummy d2 was not told (no peer_abort)"
	pass "SIGKILL to decode rank d1 mid-transfer: rooms failed on every other rank within" \
		"$limit s (${times[*]}); all released, no bad byte"
	;;
in)
	engine_conf "$W/p0.conf" fan-p0 prefill $port
	engine_conf "$W/p1.conf" fan-p1 prefill $((port + 100))
	engine_conf "$W/d.conf" fan-d decode $port
	start p0 "$W/p0.conf" --role prefill --part 0 --parts 2 --ready-file "$W/ready0"
	start p1 "$W/p1.conf" --role prefill --part 1 --parts 2 --ready-file "$W/ready1"
	wait_file "$W/ready0" 30 && wait_file "$W/ready1" 30 ||
		{ show "$W/p0.out" "$W/p1.out"; fail "prefill ranks not ready in 30 s"; }
	start d "$W/d.conf" --role decode --peers "$ADDR0:$port,$ADDR0:$((port + 100))"
	note "prefill ranks p0 (half 0), p1 (half 1) on $DEV0, one fan-in decode on $DEV1"
	for n in p0 p1 d; do finish $n; done
	expect_ok p0
	expect_ok p1
	expect_ok d "$page_bytes_all"
	pass "$rooms rooms fanned in from 2 prefill ranks, each writing its half: every room" \
		"SUCCESS on all three, $page_bytes_all bytes checked"
	;;
*) fail "mode $mode: out, in or kill" ;;
esac
