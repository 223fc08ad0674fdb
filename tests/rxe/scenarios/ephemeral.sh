#!/usr/bin/env bash
# Per-rank setup from code: a prefill opened from its file plus the
# override rdma.listen_port=0 listens on a port the kernel picks
# (kvf_engine_listen_addr reads it back, the driver's --print-listen writes
# it into its ready file); a decode opened from overrides alone (no file)
# takes that "host:port" as rdma.peer, and ROOMS rooms move with every
# destination byte checked. Also: a bad override stops the driver with the
# library's message naming the override and the key.
#   ephemeral.sh BUILD DEV0 ADDR0 DEV1 ADDR1 [ROOMS]
. "$(dirname "$0")/common.sh"
rooms=${1:-40}
fileport=18741
engine_conf "$W/p.conf" prefill-e prefill $fileport
shape=(--rooms "$rooms" --buffers 4 --block-size 16384 --blocks-per-room 4 --window 8 --timeout 120)

# A bad override is refused before any device is touched, with its index and key.
timeout -k 5 30 "$DRIVER" --role decode --set rdma.device="$DEV1" --set rdma.listen_port=70000 "${shape[@]}" \
	> "$W/bad.out" 2> "$W/bad.log"
brc=$?
want="override 1: rdma.listen_port: expected an integer in [0, 65535], got 70000"
[ $brc = 1 ] && grep -qF "$want" "$W/bad.out" ||
	{ show "$W/bad.out" "$W/bad.log"; fail "a bad override: exit $brc, no '$want'"; }
note "bad override refused: $want"

note "prefill on $DEV0 $ADDR0: its file says listen_port = $fileport, --set rdma.listen_port=0"
timeout -k 5 150 "$DRIVER" --role prefill --config "$W/p.conf" --set rdma.listen_port=0 \
	--print-listen "${shape[@]}" --ready-file "$W/ready" > "$W/prefill.out" 2> "$W/prefill.log" &
ppid=$!
CHILDREN+=("$ppid")
wait_file "$W/ready" 30 || { show "$W/prefill.out" "$W/prefill.log"; fail "prefill not ready in 30 s"; }
# the ready file is created, then written
wait_lines "$W/ready" ':' 1 5 || { show "$W/prefill.out"; fail "no host:port in the ready file"; }
hp=$(head -n1 "$W/ready")
host=${hp%:*} port=${hp##*:}
note "prefill listens on '$hp' (from its ready file)"
[ "$host" = "$ADDR0" ] || fail "listen host '$host' is not rdma.listen_addr $ADDR0"
[[ $port =~ ^[0-9]+$ ]] && [ "$port" -gt 0 ] && [ "$port" -le 65535 ] || fail "listen port '$port' is not a port"
[ "$port" != "$fileport" ] || fail "port $port is the file's: the override did not apply"
grep -q "listening on $ADDR0:$port (rdma.listen_port 0: ephemeral)" "$W/prefill.log" ||
	{ show "$W/prefill.log"; fail "the prefill log does not say it listens on $ADDR0:$port (ephemeral)"; }

# The decode: overrides only, no file.
dset=(--set engine.id=decode-e --set rdma.device="$DEV1" --set rdma.peer="$hp"
	--set rdma.auth_token="${TOKEN:-kvf-suite}" --set log.level=info)
[ "$ADDR1" != "$ADDR0" ] && dset+=(--set rdma.source_addr="$ADDR1")
note "decode on $DEV1 from overrides alone: ${dset[*]}"
timeout -k 5 150 "$DRIVER" --role decode "${dset[@]}" "${shape[@]}" > "$W/decode.out" 2> "$W/decode.log"
drc=$?
wait "$ppid"
prc=$?
CHILDREN=()
grep '^driver: role=.* rooms=' "$W/decode.out" "$W/prefill.out"
[ $drc = 0 ] || { show "$W/decode.out" "$W/decode.log" "$W/prefill.log"; fail "decode driver exit $drc"; }
[ $prc = 0 ] || { show "$W/prefill.out" "$W/prefill.log"; fail "prefill driver exit $prc"; }
for side in decode prefill; do
	ok=$(summary "$W/$side.out" ok) failed=$(summary "$W/$side.out" failed)
	[ "$ok" = "$rooms" ] && [ "$failed" = 0 ] || fail "$side: ok=$ok failed=$failed of $rooms rooms"
done
bad=$(summary "$W/decode.out" bad_words)
[ "$bad" = 0 ] || fail "$bad destination words wrong"
pass "prefill on ephemeral port $port (file said $fileport), decode from overrides alone: $rooms rooms ok, every byte checked"
