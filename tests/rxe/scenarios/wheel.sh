#!/usr/bin/env bash
# Issue 40: a real transfer from the kvferry a user installs. The virtual
# environment scripts/wheel-test.sh made (Debian's python3, the repaired
# wheel installed with pip; KVF_WHEEL_VENV, default build-wheel/venv in the
# repo, which the guest sees) runs tests/rxe/wheel_transfer.py under -I with
# a bare environment (no PYTHONPATH, nothing of the tree on sys.path): two
# engines opened from overrides, prefill on DEV0, decode on DEV1, ROOMS rooms
# with every destination byte checked.
#   wheel.sh BUILD DEV0 ADDR0 DEV1 ADDR1 [ROOMS]
. "$(dirname "$0")/common.sh"
rooms=${1:-20}
repo=$(cd "$(dirname "$0")/../../.." && pwd -P)
venv=${KVF_WHEEL_VENV:-$repo/build-wheel/venv}
[ -x "$venv/bin/python" ] || fail "no wheel environment at $venv (scripts/wheel-test.sh makes it)"
note "python $("$venv/bin/python" -V 2>&1) of $venv"
timeout -k 5 200 env -i PATH="$venv/bin:/usr/bin:/bin" HOME="$W" LANG=C.UTF-8 \
	"$venv/bin/python" -I "$repo/tests/rxe/wheel_transfer.py" --dev0 "$DEV0" --addr0 "$ADDR0" \
	--dev1 "$DEV1" --addr1 "$ADDR1" --rooms "$rooms" --timeout 150 > "$W/wheel.out" 2> "$W/wheel.log"
rc=$?
cat "$W/wheel.out"
[ $rc = 0 ] || { show "$W/wheel.out" "$W/wheel.log"; fail "wheel_transfer.py exit $rc"; }
l=$(grep '^wheel: ok=' "$W/wheel.out") || fail "no summary line"
[ "$(field "$l" ok)" = "$rooms" ] && [ "$(field "$l" bad_bytes)" = 0 ] || fail "$l"
case $(field "$l" file) in "$venv"/*) ;; *) fail "kvferry not imported from $venv: $l" ;; esac
pass "$rooms rooms from the installed wheel (kvferry $(field "$l" version)), every byte checked"
