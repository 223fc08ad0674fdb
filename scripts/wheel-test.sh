#!/usr/bin/env bash
# The wheel as a user gets it (issue 40):
#
#   scripts/wheel-test.sh [--rxe]
#
# 1. builds the wheel with pyenv's CPython X.Y (`python -m build --wheel`:
#    meson-python in an isolated environment, pyproject.toml's pins), where
#    X.Y is Debian's python3's version;
# 2. `auditwheel repair`s it to the manylinux tag its symbols allow, leaving
#    out libibverbs and librdmacm (the host's rdma-core, as every RDMA wheel
#    does) and bundling the rest (libconfig, libmicrohttpd and what that
#    pulls in, libcrypto); prints `auditwheel show` and the wheel's size;
# 3. makes a fresh virtual environment of Debian's python3 (not the
#    interpreter that built the wheel) and, with only that environment's bin
#    on PATH (no compiler) and from outside the tree, `pip install`s the
#    wheel (binary packages only), imports it under -I (no source on
#    sys.path), checks kvferry.__version__ against meson.build, the SGLang
#    plugin's entry point and that the bundled libraries resolve, and opens
#    an engine from overrides;
# 4. --rxe: the real transfer, tests/rxe/run.sh -k kvf_wheel in a soft-RoCE
#    guest (scripts/rxe-vm.sh --devices 2). Without it, the RDMA suite runs
#    kvf_wheel on the environment this script left (scripts/test.sh).
#
# Everything goes under KVF_WHEEL_DIR (default build-wheel in the repo: the
# guest sees the repository, so it sees the environment): tools/ (build,
# auditwheel), dist/ (the built wheel), wheelhouse/ (the repaired one),
# venv/ (the user's environment, made anew each run). Ends with
# "wheel: ok" (exit 0) or "wheel: FAILED: reason" (exit 1).
set -uo pipefail
KVF_PROG=wheel-test
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$KVF_REPO" || exit 1

rxe=0
case ${1:-} in --rxe) rxe=1 ;; '') ;; *) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;; esac
D=${KVF_WHEEL_DIR:-$KVF_REPO/build-wheel}
fail() { echo "wheel: FAILED: $*"; exit 1; }
kvf_need_pkgs "${KVF_PKGS_BUILD[@]}" "${KVF_PKGS_PKG[@]}" || fail "packages"
# The pins this script installs with (the build's own are pyproject.toml's).
BUILD_PIN=build==1.2.2.post1
AUDITWHEEL_PIN=auditwheel==6.1.0
NUMPY_PIN=$(grep -E '^numpy==' tests/requirements.txt) || fail "no numpy pin in tests/requirements.txt"
version=$(sed -n "s/^ *version: *'\([^']*\)'.*/\1/p" meson.build | head -n1)
[ -n "$version" ] || fail "no version: line in meson.build"

# ---- the two interpreters -------------------------------------------------------
user_py=/usr/bin/python3 # Debian's: what the user's environment is made from
[ -x "$user_py" ] || fail "no $user_py"
xy=$("$user_py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
build_py=
for p in "$HOME"/.pyenv/versions/"$xy".*/bin/python"$xy" /opt/*/bin/python"$xy"; do
	[ -x "$p" ] && [ "$(readlink -f "$p")" != "$(readlink -f "$user_py")" ] && { build_py=$p; break; }
done
[ -n "$build_py" ] || fail "no CPython $xy other than $user_py to build with (pyenv: ~/.pyenv/versions/$xy.*)"
echo "wheel: built by $build_py ($("$build_py" -V 2>&1)), installed into a venv of $user_py ($("$user_py" -V 2>&1))"

# ---- 1. build -------------------------------------------------------------------
mkdir -p "$D"
if [ ! -x "$D/tools/bin/auditwheel" ]; then
	"$build_py" -m venv "$D/tools" || fail "venv $D/tools"
	"$D/tools/bin/python" -m pip install -q --disable-pip-version-check "$BUILD_PIN" "$AUDITWHEEL_PIN" ||
		fail "pip install $BUILD_PIN $AUDITWHEEL_PIN"
fi
command -v patchelf > /dev/null || fail "no patchelf (auditwheel needs it: apt-get install patchelf)"
rm -rf "$D/dist" "$D/wheelhouse"
t0=$(kvf_now)
"$D/tools/bin/python" -m build --wheel --outdir "$D/dist" . > "$D/build.log" 2>&1 ||
	{ tail -n 30 "$D/build.log"; fail "python -m build --wheel (log: $D/build.log)"; }
raw=$(ls "$D"/dist/kvferry-"$version"-*.whl 2> /dev/null | head -n1)
[ -n "$raw" ] || fail "no $D/dist/kvferry-$version-*.whl"
echo "wheel: built $(basename "$raw") in $(kvf_elapsed "$t0") s"
grep -A5 '^ *Features' "$D/build.log" | sed 's/^/wheel:   /'

# ---- 2. repair --------------------------------------------------------------------
# The tag: the oldest manylinux this machine's glibc symbols allow (a wheel
# built here is manylinux_2_34 on Debian 12; an older one needs an older
# build host, e.g. a manylinux container).
plat=$("$D/tools/bin/auditwheel" show "$raw" 2>&1 | tr '\n' ' ' | sed -n 's/.*constrains the platform tag to "\([^"]*\)".*/\1/p')
[ -n "$plat" ] || fail "auditwheel show named no platform tag"
"$D/tools/bin/auditwheel" repair --plat "$plat" --exclude libibverbs.so.1 --exclude librdmacm.so.1 \
	-w "$D/wheelhouse" "$raw" > "$D/repair.log" 2>&1 || { cat "$D/repair.log"; fail "auditwheel repair"; }
whl=$(ls "$D"/wheelhouse/kvferry-"$version"-*manylinux*.whl 2> /dev/null | head -n1)
[ -n "$whl" ] || fail "no repaired wheel in $D/wheelhouse"
"$D/tools/bin/auditwheel" show "$whl" | sed 's/^/wheel: show: /'
echo "wheel: $(basename "$whl"): $(stat -c %s "$whl") bytes; bundled:" \
	"$(python3 -c 'import sys, zipfile; print(" ".join(n.split("/")[-1] for n in zipfile.ZipFile(sys.argv[1]).namelist() if n.startswith("kvferry.libs/") and not n.endswith("/")))' "$whl")"

# ---- 3. install into a fresh environment of the other Python ------------------------
rm -rf "$D/venv"
"$user_py" -m venv "$D/venv" || fail "$user_py -m venv (Debian 12: python3.11-venv)"
# Only the environment's bin on PATH: no gcc, cc or ld, so nothing can be
# compiled; from / so no tree is in the current directory.
ux=(env -i HOME="$D" PATH="$D/venv/bin" LANG=C.UTF-8)
(cd / && "${ux[@]}" /bin/sh -c '! command -v gcc && ! command -v cc && ! command -v ld') > /dev/null ||
	fail "a compiler is on the test PATH"
(cd / && "${ux[@]}" "$D/venv/bin/python" -m pip install -q --disable-pip-version-check --only-binary :all: \
	"$whl" "$NUMPY_PIN") || fail "pip install $(basename "$whl") $NUMPY_PIN"
(cd / && "${ux[@]}" "$D/venv/bin/python" -I - "$version" "$D/venv" <<'PY'
import importlib.metadata as md
import os
import subprocess
import sys

import kvferry

want, venv = sys.argv[1], sys.argv[2]
site = os.path.dirname(os.path.dirname(kvferry.__file__))
assert sys.prefix == venv and site.startswith(venv + "/"), (kvferry.__file__, sys.prefix)
assert not any("/python/kvferry" in p or p.endswith("/python") for p in sys.path), sys.path
assert kvferry.__version__ == want == md.version("kvferry"), (kvferry.__version__, want, md.version("kvferry"))
# The bundled libraries resolve from kvferry.libs; verbs from the system.
ext = kvferry._kvferry.__file__
out = subprocess.run(["/usr/bin/ldd", ext], capture_output=True, text=True, check=True).stdout
assert "not found" not in out, out
for lib in ("libconfig", "libmicrohttpd"):
    (line,) = [l for l in out.splitlines() if lib in l]
    assert "/kvferry.libs/" in line, line
for lib in ("libibverbs.so.1", "librdmacm.so.1"):
    (line,) = [l for l in out.splitlines() if lib in l]
    assert "/kvferry.libs/" not in line, line
(ep,) = [e for e in md.entry_points(group="sglang.srt.plugins") if e.name == "kvferry"]
assert ep.value == "kvferry.sglang.plugin:register", ep
import kvferry.sglang  # noqa: F401  (without SGLang: its own classes; kvferry.vllm needs vLLM, an extra)
eng = kvferry.Engine(overrides={"engine.id": "wheel-test", "log.level": "warn"})
eng.stats()
eng.close()
assert eng.closed
print(f"wheel: installed kvferry {kvferry.__version__} at {site}; engine opened from overrides and closed")
PY
) || fail "the installed package's checks"

# ---- 4. a real transfer on rxe ------------------------------------------------------
if [ $rxe = 1 ]; then
	echo "wheel: tests/rxe/run.sh -k kvf_wheel in a soft-RoCE guest"
	share=()
	case $D/ in "$KVF_REPO"/*) ;; *) share=(--share "$D") ;; esac
	KVF_WHEEL_VENV=$D/venv "$KVF_REPO/scripts/rxe-vm.sh" --devices 2 --timeout 600 "${share[@]+"${share[@]}"}" \
		-- tests/rxe/run.sh -k kvf_wheel ||
		fail "kvf_wheel on rxe"
fi
echo "wheel: ok"
