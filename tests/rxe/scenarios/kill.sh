#!/usr/bin/env bash
# Issue 4: the peer killed mid-transfer. Two processes (kvf_driver), prefill
# on DEV0, decode on DEV1; once the decode has checked some rooms the VICTIM
# gets SIGNAL:
#   KILL: the kernel closes its rdma_cm ids (disconnect path);
#   STOP: it goes silent without disconnecting (heartbeat-miss path: the
#         kernel's rxe still acknowledges at the transport level).
# The survivor must fail every room it has with that peer as "peer lost"
# within the heartbeat deadline (interval_ms x misses = 1000 x 5 = 5 s, plus
# SLACK_S for a slow guest), release them all, and fail nothing else.
#   kill.sh BUILD DEV0 ADDR0 DEV1 ADDR1 decode|prefill KILL|STOP
. "$(dirname "$0")/common.sh"
victim=${1:?decode|prefill} sig=${2:?KILL|STOP}
# 1 s x 5: a loaded TCG guest can stall a connection for 2-3 s (no
# frame, no completion) while both processes are alive; detection is
# still checked against this deadline
HB_MS=1000 HB_MISSES=5
deadline=$(awk -v a=$HB_MS -v b=$HB_MISSES 'BEGIN { print a * b / 1000 }')
slack=${SLACK_S:-1.5}
limit=$(awk -v a="$deadline" -v b="$slack" 'BEGIN { print a + b }')
case $victim/$sig in decode/KILL) port=18721 ;; prefill/KILL) port=18722 ;; decode/STOP) port=18723 ;; *) port=18724 ;; esac
engine_conf "$W/p.conf" prefill-k prefill $port
engine_conf "$W/d.conf" decode-k decode $port
shape=(--rooms 2000 --buffers 8 --block-size 16384 --blocks-per-room 8 --window 8 --timeout 150)
if [ "$victim" = decode ]; then survivor=prefill; else survivor=decode; fi

note "prefill on $DEV0 $ADDR0, decode on $DEV1 $ADDR1; SIG$sig the $victim mid-transfer;" \
	"heartbeat $HB_MS ms x $HB_MISSES = ${deadline} s (+${slack} s slack)"
popt=() dopt=()
[ $survivor = prefill ] && popt=(--stop-on-lost 6)
[ $survivor = decode ] && dopt=(--stop-on-lost 6)
timeout -k 5 170 "$DRIVER" --role prefill --config "$W/p.conf" "${shape[@]}" "${popt[@]}" \
	--ready-file "$W/ready" > "$W/prefill.out" 2> "$W/prefill.log" &
ppid=$!
CHILDREN+=("$ppid")
note "prefill driver started (pid $ppid), waiting for it to be ready"
wait_file "$W/ready" 30 || { show "$W/prefill.out" "$W/prefill.log"; fail "prefill not ready in 30 s"; }
timeout -k 5 170 "$DRIVER" --role decode --config "$W/d.conf" "${shape[@]}" "${dopt[@]}" \
	> "$W/decode.out" 2> "$W/decode.log" &
dpid=$!
CHILDREN+=("$dpid")
note "decode driver started (pid $dpid), waiting for 40 rooms"
wait_lines "$W/decode.out" ' SUCCESS ' 40 60 ||
	{ show "$W/decode.out" "$W/decode.log" "$W/prefill.log"; fail "the decode did not get 40 rooms in 60 s"; }
if [ $victim = decode ]; then vpid=$dpid spid=$ppid sout=$W/prefill.out slog=$W/prefill.log
else vpid=$ppid spid=$dpid sout=$W/decode.out slog=$W/decode.log; fi
# the driver runs under timeout: signal the driver itself (timeout's child)
vchild=$(pgrep -P "$vpid" | head -n1)
[ -n "$vchild" ] || fail "no $victim process under pid $vpid"
tk=$(now) # before the signal: spawning "now" takes a while in a TCG guest
kill -"$sig" "$vchild"
note "SIG$sig sent to the $victim (pid $vchild) at t=$tk"
# the survivor stops by itself: --stop-on-lost 6 after the first peer loss
end=$((SECONDS + ${limit%.*} + 12))
while [ $SECONDS -lt $end ] && kill -0 "$spid" 2> /dev/null; do
	grep -q 'reason=peer_lost' "$sout" && ! kill -0 "$spid" 2> /dev/null && break
	if [ $SECONDS -ge $((end - 6)) ] && ! grep -q 'reason=peer_lost' "$sout"; then
		break # nothing lost well past the deadline: no need to wait more
	fi
	sleep 0.2
done
lost=$(grep -c 'reason=peer_lost' "$sout")
if kill -0 "$spid" 2> /dev/null && [ "$lost" = 0 ]; then
	# keep watching a while to say when (if ever) it notices
	end=$((SECONDS + 40))
	while [ $SECONDS -lt $end ] && ! grep -q 'reason=peer_lost' "$sout"; do sleep 0.5; done
	t1=$(grep 'reason=peer_lost' "$sout" | head -n1 | sed -n 's/.* t=\([0-9.]*\).*/\1/p')
	later=${t1:+first room failed (peer lost) $(awk -v a="$t1" -v b="$tk" 'BEGIN { printf "%.1f", a - b }') s after SIG$sig}
	show "$slog"
	grep -E 'nothing heard|down in|lost' "$slog" | tail -n 5
	fail "no room of the $survivor failed within $limit s of SIG$sig to the $victim (deadline ${deadline} s)${later:+; $later}${later:- ; none within 40 s}"
fi
wait "$spid"
src=$?
kill -CONT "$vchild" 2> /dev/null
kill "$vchild" 2> /dev/null
wait "$vpid" 2> /dev/null
CHILDREN=()
cat "$sout" | grep -v ' SUCCESS ' | tail -n 50
grep '^driver:' "$sout"
grep -E 'down in|connection .* lost' "$slog" | head -n 3
[ "$src" = 0 ] || fail "the $survivor driver exit $src (timeout: rooms neither terminal nor released)"
# every room failed after the kill is peer lost, within the limit; allowed
# otherwise: a decode room created after the connection was known dead
# (connect failed), a SUCCESS before the peer was declared lost (writes
# posted before the signal still land: the HCA is not the process)
fl=$(grep 'reason=peer_lost' "$sout" | head -n1 | sed -n 's/.* t=\([0-9.]*\).*/\1/p')
# the heartbeat deadline runs from the last thing heard: the later of the
# signal and the last SUCCESS before the loss (its write-with-immediate)
ref=$(awk -v tk="$tk" -v fl="${fl:-0}" '/^room .* SUCCESS / { for (i = 1; i <= NF; i++) if ($i ~ /^t=/) { t = substr($i, 3) + 0; if (t <= fl && t > m) m = t } }
	END { print (m > tk ? m : tk) }' "$sout")
problems=$(awk -v tk="$tk" -v ref="$ref" -v lim="$limit" -v fl="${fl:-0}" '
	/^room / {
		t = 0; c = 0; r = ""; from = ""
		for (i = 1; i <= NF; i++) {
			if ($i ~ /^t=/) t = substr($i, 3) + 0
			if ($i ~ /^created=/) c = substr($i, 9) + 0
			if ($i ~ /^reason=/) r = substr($i, 8)
			if ($i ~ /^from=/) from = substr($i, 6)
		}
		if ($0 ~ / STUCK /) {
			if ($0 !~ /state=BOOTSTRAPPING/) print "still live: " $0
			next
		}
		if (t < tk) next
		# data may still land after the signal (posted writes, the HCA
		# is in the kernel): fine until the peer is declared lost
		if ($4 == "SUCCESS") { if (t > fl) print "success after the peer loss: " $0; next }
		if (r == "peer_lost") { if (t - ref > lim) print "late (" t - ref " s after the last thing heard): " $0; next }
		if (r == "connect_failed" && c > tk) next
		print "other failure: " $0
	}' "$sout")
first=$(grep 'reason=peer_lost' "$sout" | head -n1 | sed -n 's/.* t=\([0-9.]*\).*/\1/p')
last=$(grep 'reason=peer_lost' "$sout" | tail -n1 | sed -n 's/.* t=\([0-9.]*\).*/\1/p')
lost=$(grep -c 'reason=peer_lost' "$sout")
heard=$(awk -v a="$ref" -v b="$tk" 'BEGIN { printf "%.2f", a - b }')
span="first $(awk -v a="$first" -v b="$tk" 'BEGIN { printf "%.2f", a - b }') s, last $(awk -v a="$last" -v b="$tk" 'BEGIN { printf "%.2f", a - b }') s after SIG$sig; last heard ${heard} s after it"
note "$lost rooms failed (peer lost): $span"
# STOP: what the survivor's transport said; its keepalives to the stopped
# process are ACKed by that host's kernel (rxe), which proves the host and
# the link, not the process (docs/design.md, "Liveness")
grep -h 'nothing heard' "$slog" | head -n 1
grep -h '^driver: keepalives' "$sout"
[ -z "$problems" ] || { echo "$problems" | head -n 20; fail "$(wc -l <<< "$problems") rooms not as expected ($span)"; }
[ "$(summary "$sout" released)" = "$(summary "$sout" created)" ] || fail "not every room released"
pass "$lost $survivor rooms FAILED (peer lost), $span (limit $limit s); all released"
