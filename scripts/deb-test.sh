#!/usr/bin/env bash
# The Debian packages (issue 40):
#
#   scripts/deb-test.sh
#
# 1. copies the working tree (tracked and untracked files git does not
#    ignore) to KVF_DEB_DIR/kvferry-VERSION (default build-deb/ in the repo),
#    so the build's outputs never land in the tree;
# 2. `dpkg-buildpackage -us -uc -b` there with Debian's own tools first on
#    PATH (Debian's meson and python3, not pyenv's);
# 3. lintian on the four .debs: an error fails, the warnings are printed
#    (each one is justified in docs/install.md);
# 4. checks each package's contents (`dpkg -c`) against what it must ship;
# 5. extracts the packages into a directory and runs from there the tools
#    (usage, a refused connection, no GPU), the man pages (no groff warning;
#    kvferry.conf(5) names every key of docs/config.md), the Python package
#    (version, an engine from overrides) and a C program built against the
#    -dev package's .pc and run on libkvferry.so.0.
# Ends with "deb: ok" (exit 0) or "deb: FAILED: reason" (exit 1).
set -uo pipefail
KVF_PROG=deb-test
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$KVF_REPO" || exit 1

fail() { echo "deb: FAILED: $*"; exit 1; }
kvf_need_pkgs "${KVF_PKGS_BUILD[@]}" "${KVF_PKGS_PKG[@]}" || fail "packages"
D=${KVF_DEB_DIR:-$KVF_REPO/build-deb}
version=$(sed -n "s/^ *version: *'\([^']*\)'.*/\1/p" meson.build | head -n1)
debver=$(dpkg-parsechangelog -l debian/changelog -S Version)
[ "${debver%-*}" = "$version" ] ||
	fail "debian/changelog's version $debver is not meson.build's $version (add a changelog entry: dch -v $version-1)"
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)

# ---- 1, 2. build ------------------------------------------------------------------------
rm -rf "$D"
src=$D/kvferry-$version
mkdir -p "$src"
# (not a virtual environment someone left untracked: .venv*)
git ls-files -z -c -o --exclude-standard -- . ':!:.venv*' | while IFS= read -r -d '' f; do
	[ -e "$f" ] && printf '%s\0' "$f" # a tracked file deleted in the tree is left out
done | cpio -0 -pdm --quiet "$src" || fail "copying the tree to $src"
t0=$(kvf_now)
(cd "$src" && env PATH=/usr/sbin:/usr/bin:/sbin:/bin dpkg-buildpackage -us -uc -b) > "$D/build.log" 2>&1 ||
	{ tail -n 40 "$D/build.log"; fail "dpkg-buildpackage -us -uc -b (log: $D/build.log)"; }
grep -E '^dpkg-gensymbols: warning' "$D/build.log" && fail "dpkg-gensymbols warned (the symbols file and the library disagree)"
echo "deb: dpkg-buildpackage -us -uc -b: $(kvf_elapsed "$t0") s"
debs=()
for p in libkvferry0 libkvferry-dev kvferry-tools python3-kvferry; do
	f=$D/${p}_${debver}_$arch.deb
	[ -f "$f" ] || fail "no $f"
	debs+=("$f")
	echo "deb: $(basename "$f"): $(stat -c %s "$f") bytes"
done

# ---- 3. lintian -------------------------------------------------------------------------
lintian --tag-display-limit 0 "${debs[@]}" > "$D/lintian.log" 2>&1
sed 's/^/deb: lintian: /' "$D/lintian.log"
grep -q '^E: ' "$D/lintian.log" && fail "lintian reports errors"
echo "deb: lintian: $(grep -c '^E: ' "$D/lintian.log") errors, $(grep -c '^W: ' "$D/lintian.log") warnings"

# ---- 4. contents ----------------------------------------------------------------------
# has DEB PATH-REGEX... : every regex matches a line of dpkg -c DEB
has() {
	local deb=$1 re
	shift
	dpkg -c "$deb" > "$D/contents.txt" || fail "dpkg -c $deb"
	for re in "$@"; do
		grep -qE " \./$re( ->.*)?$" "$D/contents.txt" || { cat "$D/contents.txt"; fail "$(basename "$deb") has no $re"; }
	done
}
L=usr/lib/$multiarch
has "${debs[0]}" "$L/libkvferry\.so\.0 -> libkvferry\.so\.$version" "$L/libkvferry\.so\.$version" \
	usr/share/doc/libkvferry0/copyright
has "${debs[1]}" usr/include/kvferry/kvferry.h usr/include/kvferry/fan.h usr/include/kvferry/rails.h \
	usr/include/kvferry/stats.h "$L/libkvferry\.so -> libkvferry\.so\.0" "$L/libkvferry\.a" \
	"$L/pkgconfig/kvferry\.pc"
has "${debs[2]}" usr/bin/kvferry-bench usr/bin/kvferry-stat usr/bin/kvferry-gpu-check \
	usr/libexec/kvferry/gpu_check usr/share/kvferry/kvferry.conf \
	'usr/share/man/man1/kvferry-bench\.1\.gz' 'usr/share/man/man1/kvferry-stat\.1\.gz' \
	'usr/share/man/man1/kvferry-gpu-check\.1\.gz' 'usr/share/man/man5/kvferry\.conf\.5\.gz'
has "${debs[3]}" usr/lib/python3/dist-packages/kvferry/__init__.py usr/lib/python3/dist-packages/kvferry/_version.py \
	'usr/lib/python3/dist-packages/kvferry/_kvferry\.cpython-[0-9]+-[^/]*\.so' \
	usr/lib/python3/dist-packages/kvferry/sglang/plugin.py usr/lib/python3/dist-packages/kvferry/vllm/connector.py
# nothing of the build or the tests in any package
for deb in "${debs[@]}"; do
	dpkg -c "$deb" | grep -E '\.pyc$|/tests?/|fake_peer|kvf_driver|\.o$' && fail "$(basename "$deb") ships build or test files"
done
echo "deb: contents: every expected path, no build or test files"

# ---- 5. run from an extracted tree ------------------------------------------------------
R=$D/root
for deb in "${debs[@]}"; do dpkg-deb -x "$deb" "$R" || fail "dpkg-deb -x $deb"; done
"$R/usr/bin/kvferry-bench" > "$D/bench.out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q '^usage: kvferry-bench' "$D/bench.out" || { cat "$D/bench.out"; fail "kvferry-bench with no config: exit $rc, no usage"; }
"$R/usr/bin/kvferry-stat" --help | grep -q -- '--url' || fail "kvferry-stat --help"
"$R/usr/bin/kvferry-stat" --url http://127.0.0.1:1 > "$D/stat.out" 2>&1
rc=$?
[ $rc = 1 ] && grep -q 'refused' "$D/stat.out" || { cat "$D/stat.out"; fail "kvferry-stat against a closed port: exit $rc"; }
# the symlink resolves inside the extracted tree (relative) to the real tool;
# this machine has no GPU: exit 3, said on the first line
[ "$(readlink -f "$R/usr/bin/kvferry-gpu-check")" = "$R/usr/libexec/kvferry/gpu_check" ] ||
	fail "usr/bin/kvferry-gpu-check -> $(readlink "$R/usr/bin/kvferry-gpu-check")"
"$R/usr/bin/kvferry-gpu-check" --items 1 > "$D/gpu.out" 2>&1
rc=$?
if [ $rc = 3 ]; then echo "deb: kvferry-gpu-check: $(head -n1 "$D/gpu.out") (exit 3)"
elif [ $rc = 0 ] || [ $rc = 2 ]; then echo "deb: kvferry-gpu-check: exit $rc: $(head -n1 "$D/gpu.out")"
else cat "$D/gpu.out"; fail "kvferry-gpu-check: exit $rc"; fi
for m in "$R"/usr/share/man/man1/*.1.gz "$R"/usr/share/man/man5/*.5.gz; do
	w=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$m" 2>&1 > /dev/null)
	[ -z "$w" ] || fail "man $(basename "$m"): $w"
done
man -l "$R/usr/share/man/man5/kvferry.conf.5.gz" 2> /dev/null | col -b > "$D/conf.5.txt"
n=0
for key in $(sed -n 's/^| `\([a-z_]*\.[a-z_]*\)` |.*/\1/p' docs/config.md); do
	grep -qE "^ +$key\$" "$D/conf.5.txt" || fail "kvferry.conf(5) does not list $key"
	n=$((n + 1))
done
[ $n -ge 10 ] || fail "only $n keys read from docs/config.md"
echo "deb: man pages: no warnings; kvferry.conf(5) lists all $n keys of docs/config.md"
# The Python package, Debian's python3, the extracted dist-packages first
(cd / && /usr/bin/python3 - "$R/usr/lib/python3/dist-packages" "$version" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import kvferry
assert kvferry.__file__.startswith(sys.argv[1] + "/"), kvferry.__file__
assert kvferry.__version__ == sys.argv[2], kvferry.__version__
import kvferry.sglang  # noqa: F401
eng = kvferry.Engine(overrides={"engine.id": "deb-test", "log.level": "warn"})
eng.close()
print(f"deb: python3-kvferry {kvferry.__version__}: imported from the package, engine opened from overrides")
PY
) || fail "python3-kvferry"
# A C program against libkvferry-dev's kvferry.pc, run on libkvferry0's library
cat > "$D/use.c" <<'C'
#include <kvferry/kvferry.h>
#include <stdio.h>
int main(void)
{
	const char *ov[] = { "engine.id=deb-test" };
	char err[256];
	kvf_engine *e;
	int rc = kvf_engine_open_with(NULL, ov, 1, err, sizeof err, &e);
	if (rc) { fprintf(stderr, "open: %d %s\n", rc, err); return 1; }
	kvf_engine_close(e);
	printf("%s\n", kvf_poll_str(KVF_SUCCESS));
	return 0;
}
C
pc=(env PKG_CONFIG_PATH="$R/$L/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$R" pkg-config)
pcver=$("${pc[@]}" --modversion kvferry) || fail "pkg-config kvferry"
[ "$pcver" = "$version" ] || fail "kvferry.pc says $pcver, meson.build $version"
# shellcheck disable=SC2046
gcc -o "$D/use" "$D/use.c" $("${pc[@]}" --cflags --libs kvferry) || fail "building against kvferry.pc"
objdump -p "$D/use" | grep -q 'NEEDED *libkvferry.so.0' || fail "the program does not link libkvferry.so.0"
out=$(LD_LIBRARY_PATH="$R/$L" "$D/use") || fail "the program against libkvferry.so.0: $out"
echo "deb: a C program built with pkg-config kvferry ($pcver) ran on libkvferry.so.0: $out"
echo "deb: ok"
