#!/usr/bin/env bash
# Every kvferry test: the one command README names.
#
#   scripts/test.sh
#
# 1. installs the Debian packages that are missing (apt-get update first,
#    only when something is missing);
# 2. configures (once) and builds in ${KVF_BUILD_DIR:-build};
# 3. runs the unit suite: meson test --suite unit --print-errorlogs;
# 1a. makes the tests' virtual environment (KVF_VENV, default .venv; KVF_PY
#    its python): CPython 3.11 with tests/requirements.txt from PyPI, SGLang's
#    and vLLM's pinned releases among them (several GB the first time, then
#    only when the file changes);
# 3a. runs the Python package's tests (pytest tests/python), SGLang's own
#    disaggregation queues on its FAKE backend (pytest tests/sglang: the
#    installed SGLang release), kvferry.vllm under vLLM's own scheduler
#    (pytest tests/vllm, no RDMA), all with KVF_PY, and installs the package
#    with pip into a scratch dir;
# 3b. checks the room protocol model with spin (tests/model/run.sh);
# 3c. builds the wheel and tests it installed into a fresh venv of another
#    Python (scripts/wheel-test.sh), and the Debian packages (scripts/deb-test.sh);
# 4. runs the RDMA suite tests/rxe/run.sh: on this host's RDMA device when it
#    has one (ibv_devices lists one), else inside a qemu guest with soft-RoCE
#    (scripts/rxe-vm.sh);
# 5. ends with the runners' own summary lines (meson's "Ok: / Fail: ..." and
#    "rxe: N passed, N failed") and exits nonzero if anything failed.
#
# Environment:
#   KVF_BUILD_DIR=DIR   build directory (default build, relative to the repo)
#   KVF_WERROR=1        configure with -Dwerror=true
#   KVF_RXE=auto|host|vm|skip  where the RDMA suite runs (default auto)
#   KVF_VENV=DIR        the tests' virtual environment (default .venv in the repo)
#   KVF_RXE_DEVICES=1|2|4 rxe devices in the VM (default 4: prefill and decode on
#                       their own, two rails each for the rails scenarios)
#   KVF_VM_TIMEOUT=S    limit for the whole VM run (default 2700: every test
#                       has its own limit; this one only catches a hung guest)
#   CI=true             a suite that cannot run is a failure, never a skip
set -uo pipefail
KVF_PROG=test.sh
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$KVF_REPO" || exit 1

ci=0
case ${CI:-} in true|1|yes) ci=1 ;; esac
build=${KVF_BUILD_DIR:-build}
case $build in /*) ;; *) build=$KVF_REPO/$build ;; esac
export KVF_BUILD_DIR=$build
rxe_mode=${KVF_RXE:-auto}
status=0
summary=()
log=$(mktemp /tmp/kvf-test.XXXXXX)
trap 'rm -f "$log"' EXIT

t_all=$(kvf_now)
section() { printf '\n==== %s ====\n' "$*"; t_sec=$(kvf_now); }
section_end() { printf '==== %s: %s (%s s)\n' "$1" "$2" "$(kvf_elapsed "$t_sec")"; }
problem() { # a suite that could not run: skip, or fail under CI
	if [ $ci = 1 ]; then
		summary+=("$1: FAILED (could not run: $2)")
		status=1
	else
		summary+=("$1: SKIPPED ($2; CI=true makes this a failure)")
	fi
}

# summarized NAME PREFIX REGEX CMD...: runs CMD (output shown), keeps its last
# line matching REGEX in the summary (after PREFIX) as $l; rc: CMD's exit.
summarized() {
	local name=$1 prefix=$2 re=$3
	shift 3
	"$@" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	if l=$(grep -E "$re" "$log" | tail -n1); then
		summary+=("$prefix${l//=/}")
	else
		problem "$name" "no summary line (exit $rc)"
	fi
	[ "$rc" = 0 ] || status=1
}

# ---- 1. packages --------------------------------------------------------------
section "packages"
kvf_need_pkgs "${KVF_PKGS_BUILD[@]}" "${KVF_PKGS_RDMA[@]}" || exit 1
section_end packages ok

# ---- 1a. the tests' Python ------------------------------------------------------
section "python environment ($KVF_VENV)"
kvf_venv || exit 1
export KVF_PY # the scenarios in the guest run it too (rxe-vm.sh passes KVF_*)
section_end "python environment" "$("$KVF_PY" -c 'import sys; print(sys.version.split()[0])'), $(grep -cv '^#' "$KVF_REQUIREMENTS") pinned packages"

# ---- 2. configure and build ---------------------------------------------------
section "build ($build)"
werror=false
[ "${KVF_WERROR:-0}" = 1 ] && werror=true
built=1
if [ -f "$build/build.ninja" ]; then
	meson configure "$build" -Dwerror=$werror -Dpython_exe="$KVF_PY" > /dev/null || built=0
else
	meson setup "$build" -Dwerror=$werror -Dpython_exe="$KVF_PY" || built=0
fi
if [ $built = 1 ]; then
	meson compile -C "$build" || built=0
fi
if [ $built = 1 ]; then
	section_end build ok
else
	section_end build FAILED
	summary+=("build: FAILED (see the compiler output above)")
	status=1
fi

# ---- 3. unit suite ------------------------------------------------------------
section "unit suite"
if [ $built = 1 ]; then
	n_unit=$(meson test -C "$build" --suite unit --list 2> /dev/null | grep -c . || true)
	if [ "${n_unit:-0}" = 0 ]; then
		problem unit "no tests in suite unit"
	else
		meson test -C "$build" --suite unit --print-errorlogs 2>&1 | tee "$log"
		rc=${PIPESTATUS[0]}
		# meson's own summary block
		summary+=("unit suite (meson test):")
		while IFS= read -r l; do summary+=("$l"); done < <(
			grep -E '^(Ok|Expected Fail|Fail|Unexpected Pass|Skipped|Timeout): ' "$log")
		[ "$rc" = 0 ] || status=1
	fi
	section_end "unit suite" "exit ${rc:-n/a}"
else
	problem unit "the build failed"
	section_end "unit suite" "not run"
fi

# ---- 3a. python package ---------------------------------------------------------
# The binding and kvferry.sglang from the build dir (tests/python: pytest,
# no RDMA), then the wheel: pip install . into a scratch dir, imported there.
section "python package (pytest, pip)"
if [ $built = 1 ] && compgen -G "$build/python/kvferry/_kvferry*.so" > /dev/null; then
	summarized python 'python (pytest): ' '^=* ?[0-9]+ (passed|failed)' \
		env PYTHONPATH="$build/python" "$KVF_PY" -m pytest -q -p no:cacheprovider "$KVF_REPO/tests/python"
	rc_py=$rc
	# a process of its own: SGLang's import (torch and 2,600 modules) would
	# change what tests/python's leak checks measure
	summarized sglang 'sglang queues (pytest): ' '^=* ?[0-9]+ (passed|failed|skipped)' \
		env PYTHONPATH="$build/python" "$KVF_PY" -m pytest -q -p no:cacheprovider -rs "$KVF_REPO/tests/sglang"
	if [ $ci = 0 ] && grep -q 'not run: ' "$log"; then
		summary+=("sglang queues: SKIPPED ($(grep -o 'not run: .*' "$log" | head -n1); CI=true makes this a failure)")
	fi
	rc_sg=$rc
	# kvferry.vllm under vLLM's own scheduler, no RDMA (its own process too)
	summarized vllm 'vllm connector (pytest): ' '^=* ?[0-9]+ (passed|failed|skipped)' \
		env PYTHONPATH="$build/python" "$KVF_PY" -m pytest -q -p no:cacheprovider -rs "$KVF_REPO/tests/vllm"
	if [ $ci = 0 ] && grep -q 'not run: ' "$log"; then
		summary+=("vllm connector: SKIPPED ($(grep -o 'not run: .*' "$log" | head -n1); CI=true makes this a failure)")
	fi
	rc_vl=$rc
	pipdir=$(mktemp -d /tmp/kvf-pip.XXXXXX)
	if "$KVF_PY" -m pip install -q --root-user-action=ignore --no-build-isolation --no-deps --target "$pipdir" "$KVF_REPO" &&
		PYTHONPATH="$pipdir" "$KVF_PY" -c 'import kvferry, kvferry.sglang, kvferry.vllm; kvferry.Engine().close(); print("pip install .: kvferry", kvferry.__file__)' &&
		PYTHONPATH="$pipdir" "$KVF_PY" -c '
from importlib.metadata import entry_points
(ep,) = [e for e in entry_points(group="sglang.srt.plugins") if e.name == "kvferry"]
assert ep.load().__module__ == "kvferry.sglang.plugin", ep
print("pip install .: SGLang plugin entry point", ep.value)'; then
		summary+=("python (pip install .): ok")
	else
		summary+=("python (pip install .): FAILED")
		status=1
	fi
	rm -rf "$pipdir"
	section_end "python package" "pytest exit $rc_py, sglang queues exit $rc_sg, vllm connector exit $rc_vl"
else
	problem python "the extension module was not built (python3-dev missing, or the build failed)"
	section_end "python package" "not run"
fi

# ---- 3b. protocol model -------------------------------------------------------
section "protocol model (spin)"
summarized model '' '^model: [0-9]+ passed, [0-9]+ failed$' "$KVF_REPO/tests/model/run.sh"
section_end "protocol model" "exit $rc"

# ---- 3c. the wheel and the Debian packages (issue 40) ---------------------------
# The wheel built, repaired and installed into a fresh venv of another Python
# (its rxe transfer is the RDMA suite's kvf_wheel, on the venv left here);
# the .debs built, lintian'd, their contents checked and run.
section "wheel and Debian packages"
export KVF_WHEEL_VENV=${KVF_WHEEL_DIR:-$KVF_REPO/build-wheel}/venv
summarized wheel '' '^wheel: (ok|FAILED)' "$KVF_REPO/scripts/wheel-test.sh"
summarized deb '' '^deb: (ok|FAILED)' "$KVF_REPO/scripts/deb-test.sh"
section_end "wheel and Debian packages" done

# ---- 4. RDMA suite ------------------------------------------------------------
section "rdma suite"
rxe_ok=1
if [ ! -x "$build/tests/rxe/verbs_smoke" ]; then
	# the whole build may be broken by unrelated code: try just what the
	# RDMA suite needs
	if [ -f "$build/build.ninja" ] && meson compile -C "$build" verbs_smoke; then :; else rxe_ok=0; fi
fi
if [ "$rxe_mode" = auto ]; then
	if kvf_host_has_rdma; then rxe_mode=host; else rxe_mode=vm; fi
fi
run_rxe() {
	"$@" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	if l=$(grep -E '^rxe: [0-9]+ passed, [0-9]+ failed$' "$log" | tail -n1); then
		summary+=("$l")
	else
		summary+=("rxe: no summary line (runner exit $rc)")
	fi
	[ "$rc" = 0 ] || status=1
}
if [ $rxe_ok = 0 ]; then
	problem rxe "verbs_smoke could not be built"
elif [ "$rxe_mode" = skip ]; then
	problem rxe "KVF_RXE=skip"
elif [ "$rxe_mode" = host ]; then
	echo "RDMA device(s) on this host: $(ls /sys/class/infiniband | tr '\n' ' ')"
	run_rxe "$KVF_REPO/tests/rxe/run.sh"
elif [ "$rxe_mode" = vm ]; then
	echo "no RDMA device on this host: running the suite in a qemu guest with soft-RoCE"
	share=()
	case $build/ in "$KVF_REPO"/*) ;; *) share=(--share "$build") ;; esac
	# the tests' virtual environment, and its base interpreter when outside /usr
	case $KVF_VENV/ in "$KVF_REPO"/*) ;; *) share+=(--share "$KVF_VENV") ;; esac
	case $KVF_WHEEL_VENV/ in "$KVF_REPO"/*) ;; *) [ -d "$KVF_WHEEL_VENV" ] && share+=(--share "$KVF_WHEEL_VENV") ;; esac
	home=$(kvf_venv_home)
	[ -n "$home" ] && share+=(--share "$home")
	run_rxe "$KVF_REPO/scripts/rxe-vm.sh" --devices "${KVF_RXE_DEVICES:-4}" \
		--timeout "${KVF_VM_TIMEOUT:-2700}" "${share[@]+"${share[@]}"}" -- tests/rxe/run.sh
else
	kvf_die "KVF_RXE must be auto, host, vm or skip"
fi
section_end "rdma suite" "$rxe_mode"

# ---- 5. summary ---------------------------------------------------------------
printf '\n==== summary (%s s) ====\n' "$(kvf_elapsed "$t_all")"
printf '%s\n' "${summary[@]}"
exit $status
