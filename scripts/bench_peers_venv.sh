#!/usr/bin/env bash
# The peers' virtual environment for scripts/bench-compare.sh --only peers
# (issue 39): KVF_PEERS_VENV (default .venv-peers in the repository, which
# the soft-RoCE guest sees at the same path), made from the CPython 3.11 of
# scripts/lib.sh's kvf_base_py (its prefix under /usr, which the guest
# shares), with bench/requirements-peers.txt installed --no-deps (every pin
# exact: nothing resolved, no torch). Again only when that file changed.
#
# Then one fix-up: nixl-cu12 bundles its own libibverbs (rdma-core 48,
# renamed libibverbs-<hash>.so, with mlx5 only), which looks for providers
# in /usr/lib64/libibverbs and so finds no rxe device. Its file becomes a
# link to the system's libibverbs.so.1 (Debian's rdma-core, whose providers
# include rxe; it has every symbol version the bundled UCX asks for), so
# UCX's verbs transports see the same devices perftest and kvferry use.
#
#   scripts/bench_peers_venv.sh      prints the venv's python
set -euo pipefail
KVF_PROG=bench-peers-venv
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
venv=${KVF_PEERS_VENV:-$KVF_REPO/.venv-peers}
req=$KVF_REPO/bench/requirements-peers.txt
py=$venv/bin/python
want=$(sha256sum "$req" | cut -d' ' -f1)
if ! [ -x "$py" ] || [ "$(cat "$venv/.kvf-requirements" 2> /dev/null)" != "$want" ]; then
	if ! [ -x "$py" ]; then
		base=$(kvf_base_py) || kvf_die "no CPython 3.11 with venv here"
		"$base" -m venv "$venv" || kvf_die "python3 -m venv $venv failed"
	fi
	kvf_log "installing $req into $venv"
	"$py" -m pip install -q --disable-pip-version-check --no-deps -r "$req" >&2 ||
		kvf_die "pip install -r $req failed"
	echo "$want" > "$venv/.kvf-requirements"
fi
sysverbs=$(ls /usr/lib/x86_64-linux-gnu/libibverbs.so.1 /usr/lib/*/libibverbs.so.1 2> /dev/null | head -n 1)
[ -n "$sysverbs" ] || kvf_die "no system libibverbs.so.1 (rdma-core's libibverbs1)"
for f in "$venv"/lib/python3.11/site-packages/nixl_cu*.libs/libibverbs-*.so*; do
	[ -e "$f" ] || continue
	[ -L "$f" ] && [ "$(readlink "$f")" = "$sysverbs" ] && continue
	ln -sf "$sysverbs" "$f"
	kvf_log "${f#"$venv"/} -> $sysverbs"
done
echo "$py"
