#!/usr/bin/env bash
# Issue 10: kvferry.sglang driven as SGLang's event loops drive a transfer
# backend, two Python processes (tests/rxe/python_sglang.py; numpy host
# buffers stand in for GPU memory): prefill on DEV0 with its bootstrap
# server, decode on DEV1 finding it there. 30 requests of 1 to 12 pages in
# up to 3 chunks with every byte checked on pages that are reused, aborts
# from either side, clear() of a room not yet quiescent (its pages come back
# through the manager's hook), a prefill abort with writes in flight; then
# the prefill is SIGKILLed with 4 decode rooms waiting: each fails as
# "peer lost" and is released. At the end the prefill's inflight gauge is 0
# and the decode has no live room and every page back.
#   python_sglang.sh BUILD DEV0 ADDR0 DEV1 ADDR1
. "$(dirname "$0")/common.sh"
HB_MS=1000 HB_MISSES=5
BOOTSTRAP_S=240 # rooms are created before the other side is up (numpy imports)
port=18731 # the file's; the backend opens the prefill on an ephemeral port
engine_conf "$W/p.conf" prefill-sg prefill $port
engine_conf "$W/d.conf" decode-sg decode $port
export PYTHONPATH=$BUILD/python
# (an import check here would cost a numpy import: the drivers' logs say it)
compgen -G "$BUILD/python/kvferry/_kvferry*.so" > /dev/null ||
	fail "not built: $BUILD/python/kvferry/_kvferry*.so (python3-dev, -Dpython)"
DRV=("$PY" "$(dirname "$0")/../python_sglang.py" --dir "$W" --timeout 200)
# Both started at once: importing numpy takes tens of seconds in a loaded TCG
# guest; the decode waits for the prefill's bootstrap file itself.
timeout -k 5 230 "${DRV[@]}" --role prefill --config "$W/p.conf" > "$W/prefill.out" 2> "$W/prefill.log" &
ppid=$!
CHILDREN+=("$ppid")
timeout -k 5 230 "${DRV[@]}" --role decode --config "$W/d.conf" > "$W/decode.out" 2> "$W/decode.log" &
dpid=$!
CHILDREN+=("$dpid")
wait_file "$W/bootstrap" 120 || { show "$W/prefill.out" "$W/prefill.log"; fail "prefill bootstrap not up in 120 s"; }
note "prefill up, bootstrap server at $(cat "$W/bootstrap")"
wait_file "$W/kill-ready" 200 ||
	{ show "$W/prefill.out" "$W/decode.out" "$W/prefill.log" "$W/decode.log"; fail "no kill phase in 200 s"; }
vchild=$(pgrep -P "$ppid" | head -n1)
[ -n "$vchild" ] || fail "no prefill process under pid $ppid"
kill -KILL "$vchild"
note "SIGKILL to the prefill (pid $vchild) with the decode's rooms ${KILL_ROOMS:-2001-2004} waiting"
wait "$dpid"
drc=$?
wait "$ppid" 2> /dev/null
CHILDREN=()
grep '^py-sglang:' "$W/prefill.out" "$W/decode.out"
grep -h 'UNEXPECTED\|bytes wrong' "$W/prefill.out" "$W/decode.out"
[ $drc = 0 ] || { show "$W/decode.out" "$W/decode.log" "$W/prefill.log"; fail "decode driver exit $drc"; }
p=$(grep '^py-sglang: role=prefill ' "$W/prefill.out")
d=$(grep '^py-sglang: role=decode ' "$W/decode.out")
k=$(grep '^py-sglang: role=decode-kill ' "$W/decode.out")
[ -n "$p" ] && [ -n "$d" ] && [ -n "$k" ] || { show "$W/prefill.out" "$W/decode.out"; fail "a summary line is missing"; }
[ "$(field "$p" unexpected)" = 0 ] || fail "prefill: $p"
[ "$(field "$p" ok)" -ge 30 ] || fail "prefill: fewer than 30 ok: $p"
[ "$(field "$p" inflight)" = 0 ] || fail "prefill inflight gauge not 0: $p"
[ "$(field "$p" live)" = 0 ] || fail "prefill rooms still live: $p"
[ "$(field "$d" unexpected)" = 0 ] || fail "decode: $d"
[ "$(field "$d" ok)" -ge 30 ] || fail "decode: fewer than 30 ok: $d"
[ "$(field "$d" released_by_hook)" -ge 1 ] || fail "decode: no page given back by the hook: $d"
[ "$(field "$k" lost)" = 4 ] && [ "$(field "$k" unexpected)" = 0 ] && [ "$(field "$k" live)" = 0 ] ||
	{ show "$W/decode.out" "$W/decode.log"; fail "kill phase: $k"; }
pass "prefill ok=$(field "$p" ok) inflight=0; decode ok=$(field "$d" ok), every byte checked," \
	"deferred=$(field "$d" deferred) given back by the hook; 4 rooms peer lost after SIGKILL, released"
