# shellcheck shell=bash
# Helpers shared by the kvferry scripts. Source it; do not run it.

KVF_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)

# Packages a fresh Debian 12 machine needs for the build, the unit suite and
# the soft-RoCE suite (host tools are also what the VM guest runs: it shares
# the host's /usr).
# clang + libclang-rt-14-dev (libclang_rt.fuzzer): the libFuzzer harnesses.
# python3-dev (and on Debian 12 python3.11-venv): the interpreter the tests'
# virtual environment is made from (kvf_venv) and its headers; the Python
# packages themselves come from PyPI into that environment (tests/requirements.txt).
# abigail-tools: the unit suite's abi test (abidw/abidiff, tests/unit/abi_check.sh).
KVF_PKGS_BUILD=(gcc meson ninja-build pkg-config libconfig-dev libcriterion-dev
	libck-dev libibverbs-dev librdmacm-dev libssl-dev spin clang libclang-rt-14-dev libmicrohttpd-dev
	python3-dev abigail-tools)
# Debian 12's python3 is 3.11 (its venv module a package of its own); Debian 13
# has none of its own: kvf_base_py takes pyenv's 3.11 there.
case $(cut -d. -f1 /etc/debian_version 2> /dev/null) in 12) KVF_PKGS_BUILD+=(python3.11-venv) ;; esac
# The tests' Python, one variable: KVF_PY, the interpreter of the virtual
# environment KVF_VENV (default .venv in the repo, which the soft-RoCE guest
# sees at the same path), made by kvf_venv from CPython 3.11 with
# tests/requirements.txt: SGLang's and vLLM's pinned releases, torch, and
# the test tools (pytest, mypy, meson-python).
KVF_VENV=${KVF_VENV:-$KVF_REPO/.venv}
KVF_PY=$KVF_VENV/bin/python
KVF_REQUIREMENTS=$KVF_REPO/tests/requirements.txt
KVF_PKGS_RDMA=(rdma-core ibverbs-utils ibverbs-providers rdmacm-utils perftest
	iproute2 kmod)
KVF_PKGS_VM=(qemu-system-x86 linux-image-amd64 busybox-static cpio)
# Only scripts/wheel-test.sh (patchelf: auditwheel repair; python3-venv: the
# user's venv of Debian's python3, 3.13 on Debian 13) and scripts/deb-test.sh
# (dpkg-buildpackage, lintian; man-db and bsdextrautils' col read the man pages).
KVF_PKGS_PKG=(debhelper dh-python dpkg-dev lintian patchelf python3-venv cpio man-db bsdextrautils)
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

# kvf_base_py: the CPython 3.11 the virtual environment is made from:
# Debian's (Debian 12's python3; Debian 13 machines may carry it too), else
# pyenv's. 3.11: the release every pinned wheel of tests/requirements.txt has.
kvf_base_py() {
	local p
	for p in /usr/bin/python3.11 /root/.pyenv/versions/3.11*/bin/python3.11 "$(command -v python3.11)"; do
		[ -x "$p" ] && "$p" -c 'import venv, ensurepip' 2>/dev/null && { echo "$p"; return 0; }
	done
	return 1
}

# kvf_venv: make KVF_VENV (once) and install tests/requirements.txt into it
# when the file changed since the last install (every pin is exact and
# installed --no-deps: nothing is resolved, so no unpinned torch can come in).
kvf_venv() {
	local base stamp want
	want=$(sha256sum "$KVF_REQUIREMENTS" | cut -d' ' -f1)
	stamp=$KVF_VENV/.kvf-requirements
	[ -x "$KVF_PY" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] && return 0
	if [ ! -x "$KVF_PY" ]; then
		base=$(kvf_base_py) || kvf_die "no CPython 3.11 with venv here (Debian: python3.11-venv; or pyenv's 3.11)"
		kvf_log "making $KVF_VENV from $base"
		"$base" -m venv "$KVF_VENV" || kvf_die "python3 -m venv $KVF_VENV failed"
	fi
	kvf_log "installing $KVF_REQUIREMENTS into $KVF_VENV (several GB the first time)"
	"$KVF_PY" -m pip install -q --disable-pip-version-check --no-deps -r "$KVF_REQUIREMENTS" ||
		kvf_die "pip install -r $KVF_REQUIREMENTS failed"
	echo "$want" > "$stamp"
}

# kvf_venv_home: the base interpreter's prefix when it is outside /usr (the
# soft-RoCE guest shares /usr only: scripts/rxe-vm.sh --share it), else nothing.
kvf_venv_home() {
	local home
	home=$(sed -n 's/^home *= *//p' "$KVF_VENV/pyvenv.cfg" 2>/dev/null)
	case $home in /usr/bin|/usr/local/bin|'') ;; *) dirname "$home" ;; esac
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
