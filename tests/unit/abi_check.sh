#!/usr/bin/env bash
# The public API holds still (issue 25): the library's exports and ABI.
#
#   tests/unit/abi_check.sh SRCROOT LIBKVFERRY.SO [--update]
#
# 1. every KVF_API function of include/kvferry/kvferry.h is in
#    src/libkvferry.map and exported, and the library exports nothing else;
# 2. abidiff (abigail-tools) of abi/libkvferry-MAJOR.MINOR.abi, the ABI
#    recorded for this version, against the built library: an incompatible
#    change (a field removed or moved, a type changed, a symbol gone) fails;
#    additions pass and are shown. A break is declared by bumping the
#    project's version: that version has no recorded ABI until
#    `--update` writes it.
# Without abidiff: exit 77 (meson: skipped), a failure under CI=true.
set -uo pipefail
root=$1 so=$2
hdr=$root/include/kvferry
map=$root/src/libkvferry.map
fail() { echo "FAIL: $*"; exit 1; }

api=$(grep -hoE '^KVF_API [^(]*\(' "$hdr"/*.h | sed -E 's/.*[ *]([a-z_0-9]+)\($/\1/' | sort -u)
mapped=$(grep -oE '^\s+kvf_[a-z_0-9]+;' "$map" | tr -d ' \t;' | sort -u)
exported=$(nm -D --defined-only "$so" | awk '$2 == "T" { sub(/@.*/, "", $3); print $3 }' | sort -u)
[ -n "$api" ] || fail "no KVF_API function found in $hdr"
d=$(diff <(echo "$api") <(echo "$mapped")) ||
	fail "header (<) and src/libkvferry.map (>) differ: $(echo "$d" | grep '^[<>]' | tr '\n' ' ')"
d=$(diff <(echo "$mapped") <(echo "$exported")) ||
	fail "src/libkvferry.map (<) and the library's exports (>) differ: $(echo "$d" | grep '^[<>]' | tr '\n' ' ')"
echo "exports: $(echo "$api" | wc -l) functions, header = version script = library"

version=$(sed -nE "s/^ *version: '([0-9]+)\.([0-9]+)\..*/\1.\2/p" "$root/meson.build" | head -n1)
base=$root/abi/libkvferry-$version.abi
if ! command -v abidiff > /dev/null; then
	case ${CI:-} in true|1|yes) fail "no abidiff (Debian: abigail-tools)" ;; esac
	echo "not run: no abidiff (apt-get install abigail-tools)"
	exit 77
fi
if [ "${3:-}" = --update ]; then
	mkdir -p "$root/abi"
	abidw --headers-dir "$hdr" --drop-private-types --no-corpus-path --no-show-locs \
		--no-comp-dir-path --out-file "$base" "$so" || fail "abidw"
	echo "wrote $base"
	exit 0
fi
[ -f "$base" ] || fail "no recorded ABI for version $version ($base): a new version's ABI is recorded with $0 $root $so --update"
# What is not a break (abi/libkvferry.abignore: sized structs growing at
# their end; new functions) is left out; any change abidiff still reports is.
abidiff --headers-dir2 "$hdr" --drop-private-types --suppressions "$root/abi/libkvferry.abignore" \
	--no-added-syms "$base" "$so"
rc=$?
[ $((rc & 3)) = 0 ] || fail "abidiff could not compare (exit $rc)"
[ $rc = 0 ] || fail "the ABI changed against $base (above): a field removed, renamed, moved or retyped, a signature changed or a symbol gone is a break, which needs a version bump"
# renames: harmless to abidiff, a break for every program that names them
cur=$(mktemp /tmp/kvf-abi.XXXXXX)
trap 'rm -f "$cur"' EXIT
abidw --headers-dir "$hdr" --drop-private-types --no-corpus-path --no-show-locs \
	--no-comp-dir-path --out-file "$cur" "$so" || fail "abidw"
/usr/bin/python3 "$root/tests/unit/abi_fields.py" "$base" "$cur" ||
	fail "a public name recorded in $base is gone or moved: a break, which needs a version bump"
added=$(abidiff --headers-dir2 "$hdr" --drop-private-types "$base" "$so" | grep -cE '^ *\[A\] ')
echo "abi: no break against $base ($added symbols added since; recorded with --update at a release)"
exit 0
