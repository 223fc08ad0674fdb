#!/usr/bin/env bash
# Issue 42: a million-item request. One room whose KV list has ITEMS items
# (1,048,576 by default: a 1M-token prompt at SGLang's page size 1) in each
# of 2 buffers, the item scaled down to 16 bytes to fit the guest, at the
# engines' default engine.max_blocks_per_room; every byte checked.
#   million.sh BUILD DEV0 ADDR0 DEV1 ADDR1 contiguous|sglang [ITEMS] [ROOMS]
# contiguous: the list goes as one run per list, so the prefill must have
# received under 1 KiB of ROOM_INFO per room (docs/wire.md 5.4); sglang:
# half one run, half every other item (what runs cannot shorten), reported.
. "$(dirname "$0")/common.sh"
layout=${1:?contiguous|sglang} items=${2:-1048576} rooms=${3:-2}
DEV1=$DEV0 ADDR1=$ADDR0
engine_conf "$W/p.conf" prefill-m prefill 18741
engine_conf "$W/d.conf" decode-m decode 18741
# engine_conf's suite-wide 4096: back to the library's default for this one
for s in prefill decode; do
	sed -i 's/max_blocks_per_room = 4096; //' "$W/${s:0:1}.conf"
done
note "one process on $DEV0: $rooms rooms of 2 x $items items x 16 B, layout $layout"
timeout -k 5 300 "$BENCH" --prefill-config "$W/p.conf" --decode-config "$W/d.conf" --rooms "$rooms" \
	--window 1 --buffers 2 --blocks-per-room "$items" --block-size 16 --layout "$layout" \
	--verify inline --no-progress --timeout 280 --json > "$W/out" 2> "$W/err"
rc=$?
cat "$W/out"
[ $rc = 0 ] || { show "$W/err"; fail "kvferry-bench exit $rc"; }
# The three figures, read by name (the line is JSON, but a figure with no
# sample would print as nan).
fig() { grep -o "\"$1\": [-0-9.]*" "$W/out" | head -n1 | awk '{print int($2)}'; }
ok=$(fig ok) bad=$(fig bad_words) info=$(grep -o '"prefill_per_room": {[^}]*}' "$W/out" |
	grep -o '"room_info_bytes": [-0-9.]*' | awk '{print int($2)}')
[ -n "$ok" ] && [ -n "$bad" ] && [ -n "$info" ] || { show "$W/out" "$W/err"; fail "no figures in the output"; }
[ "$ok" = "$rooms" ] || fail "$ok of $rooms rooms SUCCESS"
[ "$bad" = 0 ] || fail "$bad destination words wrong"
if [ "$layout" = contiguous ] && [ "$info" -ge 1024 ]; then
	fail "ROOM_INFO of $info bytes per room for a contiguous list (runs: under 1 KiB)"
fi
pass "$rooms rooms of $items items each SUCCESS, every byte right, ROOM_INFO $info bytes a room"
