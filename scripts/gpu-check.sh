#!/usr/bin/env bash
# Which path CUDA memory takes on this host, and a room moved from it
# (docs/design.md, "GPU memory and staging"):
#
#   scripts/gpu-check.sh
#
# tools/gpu_check allocates CUDA memory on GPU 0, registers it as a kvferry
# region and prints the path the registration took: "path: dmabuf", "path:
# peer memory" or "path: staging" (the NIC can do neither: kvferry copies
# each chunk to registered host memory on a CUDA stream). Then, on the
# host's first RDMA device (or a soft-RoCE device it adds when the host has
# the rdma_rxe module and we are root), it moves one room from that memory to
# host memory and checks every byte against a CUDA copy back.
#
# Exit: 0 checked, 1 a failure, 2 no RDMA device to move a room on (the path
# is still printed), 3 no GPU (no libcuda, or no device): said on the first
# line. Environment: KVF_BUILD_DIR (default build), KVF_GPU_DEV and
# KVF_GPU_ADDR (the RDMA device and its IPv4 address, instead of the first).
set -uo pipefail
KVF_PROG=gpu-check
source "$(dirname "$0")/lib.sh"
cd "$KVF_REPO"
build=${KVF_BUILD_DIR:-build}
tool=$build/tools/gpu_check
[ -x "$tool" ] || kvf_die "not built: $tool (meson compile -C $build)"

# No GPU: the tool says so and exits 3 before it needs a device.
"$tool" --items 1 > /tmp/kvf-gpu-check.$$ 2>&1
rc=$?
if [ $rc = 3 ]; then
	cat /tmp/kvf-gpu-check.$$
	rm -f /tmp/kvf-gpu-check.$$
	exit 3
fi
rm -f /tmp/kvf-gpu-check.$$

dev=${KVF_GPU_DEV:-$(kvf_first_rdma_dev)}
if [ -z "$dev" ] && [ "$(id -u)" = 0 ] && modprobe rdma_rxe 2> /dev/null; then
	nd=$(ip -o route get 1.1.1.1 2> /dev/null | sed -n 's/.* dev \([^ ]*\).*/\1/p')
	[ -n "$nd" ] && rdma link add kvfgpu0 type rxe netdev "$nd" && dev=kvfgpu0 &&
		kvf_log "added soft-RoCE device kvfgpu0 on $nd"
fi
addr=${KVF_GPU_ADDR:-}
if [ -n "$dev" ] && [ -z "$addr" ]; then
	nd=$(ls "/sys/class/infiniband/$dev/device/net" 2> /dev/null | head -n1)
	[ -n "$nd" ] || nd=$(rdma link show "$dev/1" 2> /dev/null | sed -n 's/.* netdev \([^ ]*\).*/\1/p')
	addr=$(ip -o -4 addr show dev "$nd" 2> /dev/null | awk '{ sub(/\/.*/, "", $4); print $4; exit }')
fi
if [ -z "$dev" ] || [ -z "$addr" ]; then
	echo "gpu-check: a GPU, but no RDMA device with an IPv4 address (set KVF_GPU_DEV, KVF_GPU_ADDR)"
	exit 2
fi
kvf_log "RDMA device $dev, address $addr"
exec "$tool" --device "$dev" --addr "$addr" "$@"
