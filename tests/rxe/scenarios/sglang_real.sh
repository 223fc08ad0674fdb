#!/usr/bin/env bash
# Issues 24, 38: SGLang's own disaggregation queue code (its pinned release,
# installed in KVF_PY's environment from tests/requirements.txt) drives kvferry.sglang on
# soft-RoCE: a prefill process on DEV0 and a decode process on DEV1, each
# building SGLang's PrefillBootstrapQueue / inflight queue or
# DecodePreallocQueue / DecodeTransferQueue with SGLang's KVArgs, pools,
# MetadataBuffers and Reqs (tests/sglang/harness.py). The prefill runs SGLang
# unpatched, kvferry listed by its plugin (the sglang.srt.plugins entry point,
# through SGLang's load_plugins()); the decode with docs/sglang-backend.patch
# applied to a scratch copy of the files it touches (TransferBackend.KVFERRY,
# the decode's deferred release and head geometry). Each process imports torch and SGLang once
# (about a minute under TCG) and forks a child per shape, in two lanes: the
# shapes that mostly wait (abort timeout busy) and kill beside the others
# (tests/sglang/sglang_rxe.py, which describes each):
#   tp1 tp2to1 tp1to2 mla pp hybrid prefix   deployment shapes, every page,
#         metadata row and state slot checked at the decode
#   abort timeout busy inject kill        failures: aborts from either side,
#         bootstrap/waiting deadlines, a scheduler stalled 3x the heartbeat
#         detection time, SGLang's own failure injection, the prefill
#         SIGKILLed mid-request then restarted on the same address
# Every shape ends with SGLang's queues empty, every KV slot, request slot,
# metadata row and state slot back, and kvferry's gauges (live rooms,
# inflight, unquiescent, parked) at 0; no failed request's pages are freed
# while a write could still land in them.
#   sglang_real.sh BUILD DEV0 ADDR0 DEV1 ADDR1 [SHAPES]
. "$(dirname "$0")/common.sh"
SHAPES=${1:-tp1,tp2to1,tp1to2,mla,pp,hybrid,prefix,abort,timeout,busy,inject,kill}
HB_MS=1000 HB_MISSES=5
BOOTSTRAP_S=180 # a loaded guest (a shape sets SGLang's own timeouts where it tests them)
repo=$(cd "$(dirname "$0")/../../.." && pwd -P)
"$PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); import harness; w = harness.missing_reason(); w and sys.exit(w)' \
	"$repo/tests/sglang" || fail "SGLang's pinned release is not installed for $PY"
export KVF_SGLANG_PATCH=$repo/docs/sglang-backend.patch
port=18741 # the file's; the backend opens the prefill on an ephemeral port
engine_conf "$W/p.conf" prefill-sgr prefill $port
engine_conf "$W/d.conf" decode-sgr decode $port
export PYTHONPATH=$BUILD/python
compgen -G "$BUILD/python/kvferry/_kvferry*.so" > /dev/null ||
	fail "not built: $BUILD/python/kvferry/_kvferry*.so (python3-dev, -Dpython)"
DRV=("$PY" "$repo/tests/sglang/sglang_rxe.py" --dir "$W" --shapes "$SHAPES" --timeout "${KVF_SGR_TIMEOUT:-180}")
limit=${KVF_SGR_LIMIT:-1440} # (a hang is an error since the PP fix; this bounds a starved guest)

t0=$SECONDS
# the prefill unpatched, kvferry listed by its sglang.srt.plugins entry point;
# the decode with the patch (its deferred release of a failed room's pages)
(unset KVF_SGLANG_PATCH; export KVF_SGLANG_ROUTE=plugin; KVFERRY_CONFIG=$W/p.conf \
	exec timeout -k 5 "$limit" "${DRV[@]}" --role prefill) > "$W/prefill.out" 2> "$W/prefill.log" &
ppid=$!
CHILDREN+=("$ppid")
KVFERRY_CONFIG=$W/d.conf timeout -k 5 "$limit" "${DRV[@]}" --role decode > "$W/decode.out" 2> "$W/decode.log" &
dpid=$!
CHILDREN+=("$dpid")
wait "$dpid"; drc=$?
wait "$ppid"; prc=$?
CHILDREN=()
grep -h '^sglang-real:' "$W/prefill.out" "$W/decode.out"
note "wall $((SECONDS - t0)) s"
if [ $drc != 0 ] || [ $prc != 0 ]; then
	SHOW_LINES=40 show "$W/decode.out" "$W/prefill.out" "$W/decode.log" "$W/prefill.log"
	fail "decode exit $drc, prefill exit $prc"
fi
grep -q '^sglang-real: role=prefill route=plugin ' "$W/prefill.out" || fail "the prefill did not take the plugin route"
grep -q '^sglang-real: role=decode route=patch ' "$W/decode.out" || fail "the decode did not take the patch route"
n=0
for s in ${SHAPES//,/ }; do
	grep -q "^sglang-real: shape=$s role=decode PASS" "$W/decode.out" || fail "shape $s: no decode PASS"
	n=$((n + 1))
done
pass "$n shapes with SGLang $("$PY" -c 'from importlib.metadata import version; print(version("sglang"))')'s own queues (prefill: plugin, decode: patch): $(grep -h '^sglang-real: shape=.* role=decode PASS' "$W/decode.out" |
	sed 's/^sglang-real: //' | tr '\n' ';')"
