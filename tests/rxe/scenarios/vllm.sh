#!/usr/bin/env bash
# Issue 21: kvferry.vllm, the vLLM KV connector, driven in the call order of
# vLLM commit 00f4240 (tests/vllm/vllm_harness.py lists every step with its
# file:function): a prefill instance (kv_producer) on DEV0 and a decode
# instance (kv_consumer) on DEV1, each its own Python process, numpy float16
# arrays in vLLM's FlashAttention layout as the KV cache
# (tests/vllm/vllm_rxe.py).
#  full    TP 1 -> 1: 30 requests of 1 to 192 tokens (every third with a
#          prefix cached at the decode: only the tail moves), every byte of
#          every block, layer, K and V checked before the decode's forward;
#          a decode abort just after its ROOM_INFO (the blocks stay with vLLM
#          until the room is quiescent, then a canary reuses them and must
#          stay intact), a decode abort before scheduling (the prefill's
#          blocks freed at once), a request no decode asks for (freed at
#          deadlines.bootstrap_s); then the prefill is SIGKILLed with 4 decode
#          rooms waiting: each "peer lost", reported with its blocks as load
#          errors, recomputed by vLLM's scheduler.
#  shapes  prefill TP 2 -> decode TP 1 (fan-in, head slicing), TP 1 -> 2
#          (fan-out learned from the decode's ROOM_INFO), MLA TP 2 -> 1 (one
#          data rank, one dummy) and MLA TP 1 -> 2 (the same latent KV to
#          both): 8 requests each, every byte checked on every decode rank.
#   vllm.sh BUILD DEV0 ADDR0 DEV1 ADDR1 [full|shapes|all]
. "$(dirname "$0")/common.sh"
what=${1:-all}
export PYTHONPATH=$BUILD/python
compgen -G "$BUILD/python/kvferry/_kvferry*.so" > /dev/null ||
	fail "not built: $BUILD/python/kvferry/_kvferry*.so (python3-dev, -Dpython)"
[ -f "$BUILD/python/kvferry/vllm/connector.py" ] || fail "not built: $BUILD/python/kvferry/vllm"
DRV=$(dirname "$0")/../../vllm/vllm_rxe.py
summ=()

full() {
	local d=$W/full ppid dpid vchild drc p d_ k
	mkdir -p "$d"
	# both at once: a numpy import takes tens of seconds in a loaded TCG guest
	timeout -k 5 300 "$PY" "$DRV" --role prefill --dir "$d" --dev "$DEV0" --addr "$ADDR0" \
		--timeout 280 > "$d/prefill.out" 2> "$d/prefill.log" &
	ppid=$!
	CHILDREN+=("$ppid")
	timeout -k 5 300 "$PY" "$DRV" --role decode --dir "$d" --dev "$DEV1" --addr "$ADDR1" \
		--peer-addr "$ADDR0" --timeout 280 > "$d/decode.out" 2> "$d/decode.log" &
	dpid=$!
	CHILDREN+=("$dpid")
	wait_file "$d/kill-ready" 290 ||
		{ show "$d/prefill.out" "$d/decode.out" "$d/prefill.log" "$d/decode.log"; fail "full: no kill phase in 290 s"; }
	vchild=$(pgrep -P "$ppid" | head -n1)
	[ -n "$vchild" ] || fail "full: no prefill process under pid $ppid"
	kill -KILL "$vchild"
	note "full: SIGKILL to the prefill (pid $vchild) with the decode's rooms k0..k3 waiting"
	wait "$dpid"
	drc=$?
	wait "$ppid" 2> /dev/null
	CHILDREN=()
	grep -h '^vllm-rxe: role=\|UNEXPECTED' "$d/prefill.out" "$d/decode.out"
	p=$(grep '^vllm-rxe: role=prefill ' "$d/prefill.out")
	d_=$(grep '^vllm-rxe: role=decode ' "$d/decode.out")
	k=$(grep '^vllm-rxe: role=decode-kill ' "$d/decode.out")
	[ -n "$p" ] && [ -n "$d_" ] && [ -n "$k" ] ||
		{ show "$d/prefill.out" "$d/decode.out" "$d/prefill.log" "$d/decode.log"; fail "full: a summary line is missing"; }
	[ $drc = 0 ] || { show "$d/decode.out" "$d/decode.log" "$d/prefill.log"; fail "full: decode exit $drc"; }
	[ "$(field "$p" unexpected)" = 0 ] || fail "full prefill: $p"
	[ "$(field "$p" inflight)" = 0 ] || fail "full: the prefill's inflight gauge is not 0: $p"
	[ "$(field "$p" unquiescent)" = 0 ] || fail "full: the prefill has unquiescent rooms: $p"
	[ "$(field "$d_" unexpected)" = 0 ] && [ "$(field "$d_" wrong)" = 0 ] || fail "full decode: $d_"
	[ "$(field "$d_" canary_wrong)" = 0 ] || fail "full: the canary over the aborted blocks changed: $d_"
	[ "$(field "$d_" deferred)" -ge 1 ] || fail "full: no room waited for quiescence: $d_"
	[ "$(field "$d_" live)" = 0 ] && [ "$(field "$d_" unquiescent)" = 0 ] || fail "full decode rooms left: $d_"
	[ "$(field "$k" recomputed)" = 4 ] && [ "$(field "$k" peer_lost)" = 4 ] && [ "$(field "$k" live)" = 0 ] ||
		{ show "$d/decode.out" "$d/decode.log"; fail "full kill phase: $k"; }
	summ+=("full: $(field "$d_" ok) requests ok, $(field "$d_" bytes_checked) bytes checked, deferred=$(field "$d_" deferred), canary intact; kill: 4 peer lost, recomputed")
}

shape() { # PTP DTP MLA(0|1)
	local ptp=$1 dtp=$2 mla=$3 d=$W/s$1$2$3 f=() pid1 pid2 rc=0 l
	mkdir -p "$d"
	[ "$mla" = 1 ] && f=(--mla)
	timeout -k 5 200 "$PY" "$DRV" --role prefill --phase shape --prefill-tp "$ptp" --decode-tp "$dtp" \
		"${f[@]}" --dir "$d" --dev "$DEV0" --addr "$ADDR0" --timeout 180 > "$d/prefill.out" 2> "$d/prefill.log" &
	pid1=$!
	timeout -k 5 200 "$PY" "$DRV" --role decode --phase shape --prefill-tp "$ptp" --decode-tp "$dtp" \
		"${f[@]}" --dir "$d" --dev "$DEV1" --addr "$ADDR1" --peer-addr "$ADDR0" --timeout 180 \
		> "$d/decode.out" 2> "$d/decode.log" &
	pid2=$!
	CHILDREN=("$pid1" "$pid2")
	wait "$pid1" || rc=1
	wait "$pid2" || rc=1
	CHILDREN=()
	l=$(grep -h '^vllm-rxe: role=decode ' "$d/decode.out")
	note "shape prefill TP $ptp -> decode TP $dtp mla=$mla: ${l:-no summary}"
	[ $rc = 0 ] && [ "$(field "$l" wrong)" = 0 ] && [ "$(field "$l" unexpected)" = 0 ] ||
		{ show "$d/prefill.out" "$d/decode.out" "$d/prefill.log" "$d/decode.log"; return 1; }
	local lab="${ptp}x${dtp}"
	[ "$mla" = 1 ] && lab+=" mla"
	summ+=("$lab: $(field "$l" ok) ok, $(field "$l" bytes_checked) bytes checked")
}

case $what in full | all) full ;; esac
if [ "$what" = shapes ] || [ "$what" = all ]; then
	failed=()
	for s in "2 1 0" "1 2 0" "2 1 1" "1 2 1"; do
		# shellcheck disable=SC2086
		shape $s || failed+=("$s")
	done
	[ ${#failed[@]} = 0 ] || fail "shapes that failed (prefill TP, decode TP, MLA): ${failed[*]}"
fi
pass "$(IFS=';'; echo "${summ[*]}")"
