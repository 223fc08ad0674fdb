#!/usr/bin/env bash
# kvferry.vllm, the vLLM KV connector, under the installed vLLM release
# (vllm 0.31.0, tests/requirements.txt; issue 38): a prefill instance
# (kv_producer) on DEV0 and a decode instance (kv_consumer) on DEV1, each its
# own Python process whose connectors vLLM's KVConnectorFactory creates and
# whose steps vLLM's Scheduler and its model-runner connector mixin drive
# (tests/vllm/vllm_instance.py says what is vLLM's: all but the model), torch
# CPU tensors in vLLM's FlashAttention (or MLA) layout as the KV cache
# (tests/vllm/vllm_rxe.py). Each process imports vLLM once and runs every
# phase; the prefill is SIGKILLed at the end of the last.
#  shapes  prefill TP 2 -> decode TP 1 (fan-in, head slicing), TP 1 -> 2
#          (fan-out learned from the decode's ROOM_INFO), MLA TP 2 -> 1 (one
#          data rank, one dummy) and MLA TP 1 -> 2 (the same latent KV to
#          both): 8 requests each, every byte checked on every decode rank;
#          vLLM's AsyncScheduler (its default) on both sides.
#  full    TP 1 -> 1, vLLM's Scheduler: 30 requests of 1 to 192 tokens (every third with a
#          prefix computed at the decode first: vLLM's prefix cache hits it
#          and only the tail moves), every byte of every block, layer, K and
#          V checked when the load is reported, before the decode's forward;
#          a decode abort just after its ROOM_INFO (vLLM keeps the blocks
#          until the room is quiescent, then a canary takes them and must
#          stay intact), a decode abort before scheduling (the prefill's
#          blocks freed at once), a request no decode asks for (freed at
#          deadlines.bootstrap_s); then the prefill is SIGKILLed with 4 decode
#          rooms waiting: each "peer lost", reported with its blocks as
#          invalid_block_ids, recomputed by vLLM's scheduler.
#   vllm.sh BUILD DEV0 ADDR0 DEV1 ADDR1 [full|shapes|all]
. "$(dirname "$0")/common.sh"
what=${1:-all}
export PYTHONPATH=$BUILD/python
compgen -G "$BUILD/python/kvferry/_kvferry*.so" > /dev/null ||
	fail "not built: $BUILD/python/kvferry/_kvferry*.so (python3-dev, -Dpython)"
[ -f "$BUILD/python/kvferry/vllm/connector.py" ] || fail "not built: $BUILD/python/kvferry/vllm"
DRV=$(dirname "$0")/../../vllm/vllm_rxe.py
shapes="shape:2:1:0,shape:1:2:0,shape:2:1:1,shape:1:2:1"
case $what in
full) phases=full ;;
shapes) phases=$shapes ;;
all) phases=$shapes,full ;;
*) fail "what: full, shapes or all, not $what" ;;
esac
# one parent imports vLLM (minutes in a TCG guest) and forks both instances
limit=$((720 + 100 * $(tr "," "\n" <<< "$phases" | wc -l)))
limit=$((limit > 1170 ? 1170 : limit))
d=$W/run
mkdir -p "$d"
t0=$SECONDS
timeout -k 5 "$limit" "$PY" "$DRV" --phases "$phases" --dir "$d" --dev0 "$DEV0" --addr0 "$ADDR0" \
	--dev1 "$DEV1" --addr1 "$ADDR1" --timeout $((limit - 20)) > "$d/parent.out" 2> "$d/parent.log" &
ppid=$!
CHILDREN+=("$ppid")
logs=("$d/parent.out" "$d/prefill.out" "$d/decode.out" "$d/prefill.log" "$d/decode.log")
if [[ $phases == *full ]]; then
	while [ ! -e "$d/full/kill-ready" ] && kill -0 "$ppid" 2> /dev/null; do sleep 0.5; done
	[ -e "$d/full/kill-ready" ] || { show "${logs[@]}" "$d/parent.log"; fail "full: no kill phase (the instances ended first)"; }
	kill -KILL "$(cat "$d/prefill.pid")"
	note "full: SIGKILL to the prefill (pid $(cat "$d/prefill.pid")) with the decode's rooms k0..k3 waiting"
fi
wait "$ppid"
rc=$?
CHILDREN=()
grep -h '^vllm-rxe: ' "$d/parent.out"
grep -h '^vllm-rxe: role=\|UNEXPECTED\|exits' "$d/prefill.out" "$d/decode.out"
note "wall $((SECONDS - t0)) s"
[ $rc = 0 ] || { show "${logs[@]}"; fail "exit $rc (the decode's; the prefill's too without the kill)"; }
summ=()
for ph in ${phases//,/ }; do
	name=${ph//:/}
	p=$(grep "^vllm-rxe: role=prefill phase=$name " "$d/prefill.out")
	l=$(grep "^vllm-rxe: role=decode phase=$name " "$d/decode.out")
	[ -n "$p" ] && [ -n "$l" ] || { show "${logs[@]}"; fail "$name: a summary line is missing"; }
	[ "$(field "$p" unexpected)" = 0 ] || fail "$name prefill: $p"
	[ "$(field "$l" unexpected)" = 0 ] && [ "$(field "$l" wrong)" = 0 ] || fail "$name decode: $l"
	[ "$(field "$l" live)" = 0 ] && [ "$(field "$l" unquiescent)" = 0 ] || fail "$name decode rooms left: $l"
	[ "$(field "$l" ok)" = "$(field "$l" of)" ] || fail "$name: not every request moved: $l"
	if [ "$name" = full ]; then
		k=$(grep '^vllm-rxe: role=decode-kill ' "$d/decode.out")
		[ "$(field "$p" inflight)" = 0 ] && [ "$(field "$p" unquiescent)" = 0 ] || fail "full prefill rooms left: $p"
		[ "$(field "$l" canary_wrong)" = 0 ] || fail "full: the canary over the aborted blocks changed: $l"
		[ "$(field "$l" deferred)" -ge 1 ] || fail "full: no room waited for quiescence: $l"
		[ "$(field "$k" recomputed)" = 4 ] && [ "$(field "$k" peer_lost)" = 4 ] && [ "$(field "$k" live)" = 0 ] ||
			{ show "$d/decode.out" "$d/decode.log"; fail "full kill phase: $k"; }
		summ+=("full: $(field "$l" ok) requests ok ($(field "$l" tail_only) tail only), $(field "$l" bytes_checked) bytes checked, deferred=$(field "$l" deferred), canary intact; kill: 4 peer lost, recomputed")
	else
		summ+=("$(field "$l" tp) ($(field "$l" scheduler)): $(field "$l" ok) ok, $(field "$l" bytes_checked) bytes checked")
	fi
done
pass "$(IFS=';'; echo "${summ[*]}")"
