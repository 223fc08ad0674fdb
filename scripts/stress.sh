#!/usr/bin/env bash
# Stress run of the soft-RoCE test bed: boots one guest (scripts/rxe-vm.sh
# --devices 2) and runs tests/rxe/stress.sh there: the transfer scenarios
# (bench two/one, fake_peer good, abort prefill/decode) ROUNDS times while
# HOGS busy loops load the guest's 2 vCPUs.
#
#   scripts/stress.sh [ROUNDS] [HOGS]     (defaults 5 and 2)
#
# Not part of CI: 5 rounds take ~15-30 minutes (measured: 891 s). Binaries come from
# ${KVF_BUILD_DIR:-build}; KVF_SCEN_RDMA adds rdma keys to every engine
# (e.g. KVF_SCEN_RDMA="qp_timeout = 14;" to compare with the old default).
# Ends with "stress: N passed, N failed"; exit nonzero on any failure.
set -euo pipefail
KVF_PROG=stress
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

rounds=${1:-5} hogs=${2:-2}
for v in "$rounds" "$hogs"; do
	case $v in '' | *[!0-9]*) kvf_die "usage: scripts/stress.sh [ROUNDS] [HOGS] (whole numbers), got '$v'" ;; esac
done
[ "$rounds" -ge 1 ] || kvf_die "ROUNDS must be at least 1"
build=${KVF_BUILD_DIR:-build}
[ -x "$KVF_REPO/$build/tools/kvferry-bench" ] || [ -x "$build/tools/kvferry-bench" ] ||
	kvf_die "not built: $build/tools/kvferry-bench (meson setup build && meson compile -C build)"
# the worst case of one round is the sum of the scenarios' timeouts (1,010 s)
exec "$KVF_REPO/scripts/rxe-vm.sh" --devices 2 --timeout $((rounds * 1030 + 300)) -- \
	tests/rxe/stress.sh "$rounds" "$hogs"
