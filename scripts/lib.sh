# shellcheck shell=bash
# Helpers shared by the kvferry scripts. Source it; do not run it.

KVF_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)

# Packages a fresh Debian 12 machine needs for the build, the unit suite and
# the soft-RoCE suite (host tools are also what the VM guest runs: it shares
# the host's /usr).
# clang + libclang-rt-14-dev (libclang_rt.fuzzer): the libFuzzer harnesses.
# python3-*: the Python package (python/: the extension's headers, the wheel's
# build backend, the tests' numpy host buffers and runner); scripts run
# /usr/bin/python3 ($KVF_PY), whose packages these are.
# abigail-tools: the unit suite's abi test (abidw/abidiff, tests/unit/abi_check.sh).
# python3-mypy: tests/python/test_stubs.py (the extension's type stubs).
KVF_PKGS_BUILD=(gcc meson ninja-build pkg-config libconfig-dev libcriterion-dev
	libck-dev libibverbs-dev librdmacm-dev libssl-dev spin clang libclang-rt-14-dev libmicrohttpd-dev
	python3-dev python3-mesonpy python3-numpy python3-pytest python3-pip
	abigail-tools python3-mypy)
# Debian's interpreter: PATH may find another python3 (pyenv, a venv) without
# the packages above.
KVF_PY=/usr/bin/python3
# tests/sglang: what the pinned SGLang tree's imports need from Debian
# (KVF_SGLANG_SRC; the rest, which Debian lacks or has only in a version
# SGLang cannot use, is stubbed in tests/sglang/sglang_stubs.py, which lists
# every stub and why).
# (Those its disaggregation modules import, bootstrap server included;
# fastapi, uvicorn, setproctitle are only its HTTP server's, not needed.)
KVF_PKGS_SGLANG=(python3-torch python3-torchvision python3-zmq python3-requests
	python3-aiohttp python3-psutil python3-pil python3-tqdm python3-dill
	python3-ipython python3-regex python3-sentencepiece python3-packaging
	python3-starlette)
KVF_PKGS_RDMA=(rdma-core ibverbs-utils ibverbs-providers rdmacm-utils perftest
	iproute2 kmod)
KVF_PKGS_VM=(qemu-system-x86 linux-image-amd64 busybox-static cpio)
# Only scripts/bench-compare.sh: UCX's ucx_perftest and the plots.
KVF_PKGS_BENCH=(ucx-utils gnuplot-nox time)

kvf_log() { printf '%s: %s\n' "${KVF_PROG:-kvferry}" "$*" >&2; }
kvf_die() { kvf_log "error: $*"; exit 1; }

kvf_now() { date +%s.%N; }
# kvf_elapsed START -> seconds since START, one decimal
kvf_elapsed() { awk -v a="$1" -v b="$(kvf_now)" 'BEGIN { printf "%.1f", b - a }'; }

# kvf_need_pkgs PKG... : install the packages that are not installed yet.
# Runs `apt-get update` first, and only when something is missing.
# KVF_NO_INSTALL=1 turns a missing package into an error instead.
kvf_need_pkgs() {
	local p missing=()
	for p in "$@"; do
		if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
			missing+=("$p")
		fi
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	if [ "${KVF_NO_INSTALL:-0}" = 1 ]; then
		kvf_die "missing packages: ${missing[*]} (KVF_NO_INSTALL=1, not installing)"
	fi
	command -v apt-get >/dev/null || kvf_die "missing packages: ${missing[*]} and no apt-get here"
	local sudo=()
	if [ "$(id -u)" != 0 ]; then
		command -v sudo >/dev/null || kvf_die "missing packages: ${missing[*]}; run as root or install sudo"
		sudo=(sudo)
	fi
	kvf_log "installing: ${missing[*]}"
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q ||
		kvf_die "apt-get update failed"
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" ||
		kvf_die "apt-get install failed: ${missing[*]}"
}

# True when this host has an RDMA device (hardware or rxe) visible to verbs.
kvf_host_has_rdma() {
	[ -d /sys/class/infiniband ] && [ -n "$(ls -A /sys/class/infiniband 2>/dev/null)" ]
}

# kvf_first_rdma_dev: name of the first RDMA device on this host
kvf_first_rdma_dev() { ls /sys/class/infiniband 2>/dev/null | head -n1; }

# kvf_roce_gid_index DEV [PORT] : index of the RoCE v2 GID that maps an IPv4
# address (::ffff:a.b.c.d), else the first RoCE v2 GID, else nothing.
kvf_roce_gid_index() {
	local dev=$1 port=${2:-1} d g t i first=
	d=/sys/class/infiniband/$dev/ports/$port
	for ((i = 0; ; i++)); do
		[ -e "$d/gids/$i" ] || break
		read -r t < "$d/gid_attrs/types/$i" 2>/dev/null || continue
		case $t in *v2*|*V2*) ;; *) continue ;; esac
		read -r g < "$d/gids/$i" 2>/dev/null || continue
		case $g in
		0000:0000:0000:0000:0000:ffff:*) echo "$i"; return 0 ;;
		esac
		[ -z "$first" ] && first=$i
	done
	[ -n "$first" ] && echo "$first"
}
