#!/usr/bin/env bash
# examples/one_room as a user runs it (examples/README.md): one prefill and
# one decode engine in one process move one room, and the decode checks
# every byte. Run twice: the sides on their own devices (DEV0 <- DEV1, from
# ADDR1), then both on DEV0; each must exit 0 and print its SUCCESS line
# with 0 bytes wrong. A bad command line must print the usage and exit 2.
#   example.sh BUILD DEV0 ADDR0 DEV1 ADDR1
. "$(dirname "$0")/common.sh"
EX=$BUILD/examples/one_room
[ -x "$EX" ] || fail "not built: $EX (meson compile -C $BUILD)"
want='^one_room: room 42 SUCCESS: 4 pages x 2 buffers of 4096 B from [0-9.]+:[0-9]+, 0 bytes wrong$'

# run NAME ARGS...: one_room ARGS under a timeout; exit 0 and the line
run() {
	local name=$1 rc
	shift
	timeout -k 5 60 "$EX" "$@" > "$W/$name.out" 2> "$W/$name.log"
	rc=$?
	[ $rc = 0 ] || { show "$W/$name.out" "$W/$name.log"; fail "$name: one_room $* exit $rc"; }
	grep -qE "$want" "$W/$name.out" ||
		{ show "$W/$name.out" "$W/$name.log"; fail "$name: no line matching '$want'"; }
	note "$name: $(cat "$W/$name.out")"
}

timeout -k 5 10 "$EX" "$DEV0" > "$W/usage.out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q '^usage: one_room DEVICE ADDR' "$W/usage.out" ||
	{ show "$W/usage.out"; fail "one_room with one argument: exit $rc, no usage line"; }
run two-devices "$DEV0" "$ADDR0" "$DEV1" "$ADDR1"
run one-device "$DEV0" "$ADDR0"
pass "examples/one_room: one room on $DEV0 <- $DEV1 and on $DEV0 alone, every byte checked"
