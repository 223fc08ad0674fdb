#!/usr/bin/env bash
# Issue 13: one scenario of the fault matrix (scripts/chaos.sh runs them all
# in one guest; docs/chaos.md). Two kvf_driver processes, prefill on DEV0,
# decode on DEV1, ROOMS rooms of 1 buffer x 1 block of 4 KiB, built with
# -Dfault_inject=true (KVF_FAULT chooses the faults per process). Prints
# one line per side:
#   chaos: scenario=S side=prefill|decode rooms=N created=N ok=N failed=N
#     reasons=R:N,... pinned=N worst_late=S bad_words=N leak_fds=N
#     leak_heap=N status=done|killed|timeout|noline faults=drop:N,...
# and ends with PASS (no pinned room, no wrong byte, no leak on any side
# that ran to its end) or FAIL.
#   chaos.sh BUILD DEV0 ADDR0 DEV1 ADDR1 SCENARIO [ROOMS] [SEED]
#   chaos.sh BUILD DEV0 ADDR0 DEV1 ADDR1 soak ROOMS [SEED]   (100,000 in the soak)
. "$(dirname "$0")/common.sh"
scen=${1:?scenario} rooms=${2:-1000} seed=${3:-1}
port=$((18800 + $(cksum <<< "$scen" | cut -d' ' -f1) % 100))
engine_conf "$W/p.conf" "prefill-$scen" prefill $port
engine_conf "$W/d.conf" "decode-$scen" decode $port
# Deadlines of every state a room passes: its bound is their sum (pinned:
# not terminal 1 s past it). Bootstrap 30 s: a TCG guest takes seconds to
# start the second driver. Heartbeat 1 s x 5.
DL=(--set deadlines.bootstrap_s=30 --set deadlines.receiver_waiting_s=5
	--set deadlines.inflight_s=5 --set deadlines.waiting_for_input_s=5
	--set deadlines.quiesce_s=5 --set engine.tombstone_ttl_s=10 --set rdma.poll_idle_us=200)
bound=45
window=32
P=() D=() PF= DF= scale=1 hog=0 starve=0
case $scen in
early_abort) # ABORTs (and ROOM_INFOs) reach the prefill before its rooms exist
	D=(--abort-every 2 --abort-at create) P=(--start-delay 2) window=64 ;;
lost_abort) # the decode aborts mid-transfer; half the ABORTs and ACKs are lost
	D=(--abort-every 3 --abort-at wait) PF=drop:ABORT:0.5 DF=drop:ABORT_ACK:0.5 ;;
dup_abort) # both sides abort; every ABORT and ACK arrives twice
	D=(--abort-every 3 --abort-at wait) P=(--abort-every 5 --abort-at wait)
	PF=dup:ABORT:1,dup:ABORT_ACK:1 DF=dup:ABORT:1,dup:ABORT_ACK:1 ;;
peer_kill) # the prefill is SIGKILLed after a third of the rooms
	P=(--kill-after $((rooms / 3))) ;;
qp_error) # the prefill's QP is moved to error every 400 send completions
	PF=qp_error:every:400 ;;
bad_rkey) # a prefill WRITE goes with a wrong rkey (remote access error)
	PF=bad_rkey:0.004 ;;
short_deadlines) # 50 ms deadlines (engine clock x20) under CPU load; bootstrap
	# 30 s (600 x 50 ms): the decode takes seconds to start in the guest
	scale=20 hog=2 bound=30.15
	DL=(--set deadlines.bootstrap_s=600 --set deadlines.receiver_waiting_s=1
		--set deadlines.inflight_s=1 --set deadlines.waiting_for_input_s=1
		--set deadlines.quiesce_s=20 --set engine.tombstone_ttl_s=60) ;;
stale_completions) # aborted rooms' blocks and slots reused at once, completions late
	D=(--abort-every 2 --abort-at wait) window=8
	DF=stall_cq:20ms:0.05 PF=delay:ABORT:0.2:30ms,stall_cq:20ms:0.05 ;;
ring_full) # a 64-entry event ring left undrained 50 ms at a time
	window=128 PF=ring_full:50ms:0.1 DF=ring_full:50ms:0.1
	DL+=(--set engine.ring_size=64) ;;
cpu_starve) # the decode is stopped 300 ms of every second
	starve=1 ;;
soak) # every fault kind, at low rates, for a long run: those that leave the
	# connection up, and the three whose designed response is a teardown
	# (corrupt, qp_error, bad_rkey; KVF_SOAK_TEARDOWNS=0 leaves them out),
	# with the decode's receiver-waiting deadline (45 s) above the prefill's
	# bootstrap (30 s)
	# so that after a teardown the drivers' windows can meet again, and the
	# prefill following the decode's requests (kvf_driver --follow: two
	# self-paced windows drift apart for good; docs/chaos.md, "The soak")
	D=(--abort-every 7 --abort-at wait --sample-every "${KVF_SOAK_SAMPLE_EVERY:-10000}")
	P=(--sample-every "${KVF_SOAK_SAMPLE_EVERY:-10000}")
	PF=drop:ABORT:0.01,dup:ROOM_INFO:0.005,delay:any:0.005:20ms,reorder:ABORT_ACK:0.01,stall_cq:20ms:0.0005,ring_full:20ms:0.0005
	DF=drop:ABORT_ACK:0.01,dup:ABORT:0.01,delay:any:0.005:20ms,reorder:ABORT:0.01,stall_cq:20ms:0.0005,ring_full:20ms:0.0005
	if [ "${KVF_SOAK_TEARDOWNS:-1}" = 1 ]; then
		PF+=,corrupt:ABORT:0.0005,qp_error:every:30000,bad_rkey:0.00005
		P+=(--follow 30) # the prefill creates what the decode asks for
		DL=("${DL[@]/deadlines.receiver_waiting_s=5/deadlines.receiver_waiting_s=45}")
		bound=60 # receiver_waiting 45 + inflight 5 + quiesce 5, and slack
	fi ;;
*) fail "unknown scenario '$scen'" ;;
esac
# every room's whole life at most; the drivers' own limit well above it
# (after a QP error the two windows fall out of step: prefill rooms wait
# out their 30 s bootstrap for ROOM_INFOs lost with the connection)
tmo=${KVF_CHAOS_TIMEOUT:-$((300 + rooms * 3 / 10))}
shape=(--rooms "$rooms" --buffers 1 --block-size 4096 --blocks-per-room 1 --window "$window"
	--timeout "$tmo" --deadline "$bound" --clock-scale "$scale" --leak-check "${DL[@]}")

hogs=()
for ((i = 0; i < hog; i++)); do
	(while :; do :; done) &
	hogs+=($!)
	CHILDREN+=($!)
done
note "$rooms rooms, window $window, bound ${bound} s, prefill KVF_FAULT=${PF:-none}, decode KVF_FAULT=${DF:-none} (script at ${SECONDS} s)"
# the shim names what stays allocated after close (tests/rxe/leak_shim.c);
# not in the soak, which checks its samples flat instead (a stack walk for
# every allocation would make 100,000 rooms take hours in a TCG guest)
SHIM=$BIN/libleak_shim.so
[ -f "$SHIM" ] || fail "not built: $SHIM"
[ "$scen" = soak ] && SHIM=
env LD_PRELOAD="$SHIM" KVF_FAULT="$PF" KVF_FAULT_SEED="$seed" timeout -k 5 $((tmo + 90)) "$DRIVER" --role prefill \
	--config "$W/p.conf" "${shape[@]}" "${P[@]}" --ready-file "$W/ready" \
	> "$W/prefill.out" 2> "$W/prefill.log" &
ppid=$!
CHILDREN+=("$ppid")
t_start=$SECONDS
wait_file "$W/ready" 60 || { show "$W/prefill.out" "$W/prefill.log"; fail "prefill not ready in 60 s"; }
env LD_PRELOAD="$SHIM" KVF_FAULT="$DF" KVF_FAULT_SEED="$((seed + 1))" timeout -k 5 $((tmo + 90)) "$DRIVER" --role decode \
	--config "$W/d.conf" "${shape[@]}" "${D[@]}" > "$W/decode.out" 2> "$W/decode.log" &
dpid=$!
CHILDREN+=("$dpid")
if [ "$scen" = soak ]; then # the samples as they come (a long run)
	tail --pid="$dpid" -n +1 -F "$W/prefill.out" "$W/decode.out" 2> /dev/null |
		grep --line-buffered '^driver: sample' &
	CHILDREN+=($!)
fi
if [ "$starve" = 1 ]; then
	dchild=$(pgrep -P "$dpid" | head -n1)
	while kill -0 "$dchild" 2> /dev/null; do
		kill -STOP "$dchild" 2> /dev/null
		sleep 0.3
		kill -CONT "$dchild" 2> /dev/null
		sleep 0.7
	done
fi
t_ready=$SECONDS
wait "$dpid"
drc=$?
t_dend=$SECONDS
wait "$ppid"
prc=$?
note "seconds from the prefill's start: ready $((t_ready - t_start)), decode done $((t_dend - t_start)), prefill done $((SECONDS - t_start))"
for h in "${hogs[@]+"${hogs[@]}"}"; do kill "$h" 2> /dev/null; wait "$h" 2> /dev/null; done

# Heap bytes an engine may leave after close without counting as a leak:
# the libraries' state made at a process's first connection (librdmacm's
# device setup; the warm-up engine makes none), measured 10-20 KiB. A leak
# of even 64 bytes a room is over it at 1,000 rooms; the soak catches less.
LEAK_SLACK=65536
# kv LINE : its key=value words into the array K (no process started:
# each costs a good part of a second in a loaded TCG guest)
declare -A K
kv() {
	local w
	K=()
	for w in $1; do
		[[ $w == *=* ]] && K[${w%%=*}]=${w#*=}
	done
}
# side_line SIDE RC : the result line of one side
bad=0
side_line() {
	local side=$1 rc=$2 out=$W/$1.out log=$W/$1.log line c= f= l= fl= lo= status=done
	local killed=0 timedout=0 reasons faults
	while IFS= read -r line; do
		case $line in
		'driver: chaos '*) c=$line ;;
		'driver: failures:'*) f=${line#driver: failures:} ;;
		'driver: leaks '*) l=$line ;;
		'driver: leak_objects '*) lo=${line#driver: leak_objects } ;;
		'driver: SIGKILL self'*) killed=1 ;;
		'driver: TIMEOUT'*) timedout=1 ;;
		'driver: sample '*) echo "chaos-sample: scenario=$scen side=$side ${line#driver: sample }" ;;
		*' PINNED '*) echo "$line" ;;
		esac
	done < "$out"
	while IFS= read -r line; do
		[[ $line == *'fault: injected:'* ]] && fl=${line#*fault: injected:}
	done < "$log"
	[ -n "$fl" ] && echo "chaos-faults: $scen $side $fl"
	fl=${fl%% (*} f=${f# }
	reasons=${f// /,} reasons=${reasons//=/:}
	faults=${fl# } faults=${faults// /,} faults=${faults//=/:}
	if [ $killed = 1 ]; then status=killed
	elif [ "$rc" = 2 ] || [ $timedout = 1 ]; then status=timeout
	elif [ -z "$c" ] || [ -z "$l" ]; then status=noline; fi
	local -A C L
	kv "$c"; for k in "${!K[@]}"; do C[$k]=${K[$k]}; done
	kv "$l"; for k in "${!K[@]}"; do L[$k]=${K[$k]}; done
	# the shim's account of what stayed allocated: kvf_driver's own bytes
	# (kvferry is linked into it) are a leak; the libraries' are named
	local -A O
	kv "$lo"; for k in "${!K[@]}"; do O[$k]=${K[$k]}; done
	local ours=${O[kvf_driver]-0/0} named=
	for k in "${!O[@]}"; do
		case $k in total|kvf_driver) ;; *) named+=${named:+,}$k:${O[$k]%/*} ;; esac
	done
	[ -n "$lo" ] || ours=
	[ -n "$SHIM" ] || ours=0 O[total]=0 # the soak: no shim
	printf 'chaos: scenario=%s side=%s rooms=%s created=%s ok=%s failed=%s reasons=%s pinned=%s worst_late=%s worst_life=%s bad_words=%s leak_fds=%s leak_heap=%s heap_run=%s leak_total=%s leak_ours=%s leak_named=%s status=%s rc=%s faults=%s\n' \
		"$scen" "$side" "$rooms" "${C[created]-}" "${C[ok]-}" "${C[failed]-}" "${reasons:--}" \
		"${C[pinned]-}" "${C[worst_late]-}" "${C[worst_life]-}" "${C[bad_words]-}" \
		"${L[fds]-}" "${L[heap_bytes]-}" "${L[heap_run]-}" "${O[total]-}" "${ours%/*}" \
		"${named:--}" "$status" "$rc" "${faults:--}"
	case $status in
	killed) [ "$side" = prefill ] && [ "$scen" = peer_kill ] && return 0
		bad=1 ;;
	done) [ "${C[pinned]}" = 0 ] && [ "${C[bad_words]}" = 0 ] && [ "${L[fds]}" = 0 ] &&
		[ "${L[heap_bytes]}" -le "$LEAK_SLACK" ] && [ "${ours%/*}" = 0 ] &&
		[ "${O[total]}" -le "$LEAK_SLACK" ] || bad=1 ;;
	*) bad=1 ;;
	esac
}
side_line prefill $prc
side_line decode $drc
if [ $bad != 0 ]; then
	SHOW_LINES=${KVF_CHAOS_SHOW:-15} show "$W/prefill.out" "$W/decode.out" "$W/prefill.log" "$W/decode.log"
	fail "$scen: a pinned room, a wrong byte, a leak or a side that did not finish (lines above)"
fi
note "results read at ${SECONDS} s"
pass "$scen: $rooms rooms, nothing pinned, no wrong byte, no leak"
