#!/usr/bin/env bash
# Soft-RoCE (rdma_rxe) devices on a real Linux host whose kernel has rdma_rxe.
#
#   scripts/rxe-host.sh add NETDEV [NAME]   create rxe device NAME (default
#                                           rxe_NETDEV) on NETDEV; no-op if
#                                           NETDEV already has one
#   scripts/rxe-host.sh remove NAME         delete rxe device NAME; no-op if absent
#   scripts/rxe-host.sh status              list RDMA links, rxe devices, their
#                                           RoCE v2 GID index and memlock limit
#
# add/remove need root. NETDEV must be up and should carry an IPv4 address
# (the RoCE v2 GID the tests use is ::ffff:<that address>). Loopback is
# refused by rxe; on a machine with no spare netdev a dummy one works:
#   ip link add kvf0 type dummy && ip addr add 10.77.0.1/24 dev kvf0 && ip link set kvf0 up
# Then run the RDMA suite with tests/rxe/run.sh (scripts/test.sh does that
# on its own when a device exists).
set -euo pipefail
KVF_PROG=rxe-host
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }

need_root() { [ "$(id -u)" = 0 ] || kvf_die "$1 needs root (try: sudo $0 $*)"; }
need_rdma_tool() {
	command -v rdma > /dev/null || kvf_die "the 'rdma' tool is missing: apt-get install iproute2"
}
load_module() {
	[ -d /sys/module/rdma_rxe ] && return 0
	if ! modinfo rdma_rxe > /dev/null 2>&1; then
		kvf_die "kernel $(uname -r) has no rdma_rxe module (CONFIG_RDMA_RXE); use scripts/rxe-vm.sh instead"
	fi
	modprobe rdma_rxe || kvf_die "modprobe rdma_rxe failed"
	modprobe rdma_ucm 2> /dev/null || true # rdma_cm userspace (rping, librdmacm)
}
# rxe device bound to a netdev, if any
rxe_on() { rdma link show 2> /dev/null | awk -v nd="$1" '$0 ~ " netdev " nd "( |$)" { split($2, a, "/"); print a[1]; exit }'; }

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
add)
	[ $# -ge 1 ] && [ $# -le 2 ] || usage
	netdev=$1 name=${2:-rxe_$1}
	need_root add "$netdev" "$name"
	need_rdma_tool
	[ "$netdev" != lo ] || kvf_die "rxe refuses the loopback netdev; use a dummy netdev (see $0 --help)"
	[ -e "/sys/class/net/$netdev" ] || kvf_die "no netdev '$netdev' (ip -br link lists them)"
	load_module
	have=$(rxe_on "$netdev")
	if [ -n "$have" ]; then
		if [ "$have" = "$name" ]; then
			kvf_log "$name already on $netdev (nothing to do)"
		elif [ $# = 2 ]; then
			kvf_die "$netdev already carries rxe device $have, not $name (remove $have first to rename)"
		else
			kvf_log "$netdev already carries rxe device $have (nothing to do)"
		fi
		name=$have
	else
		[ ! -e "/sys/class/infiniband/$name" ] ||
			kvf_die "an RDMA device named $name exists on another netdev"
		rdma link add "$name" type rxe netdev "$netdev" || kvf_die "rdma link add $name type rxe netdev $netdev failed"
		kvf_log "added $name on $netdev"
	fi
	ip -4 -o addr show dev "$netdev" | grep -q inet ||
		kvf_log "warning: $netdev has no IPv4 address; RoCE v2 IPv4 GID (and rdma_cm to it) will be missing"
	gid=
	for _ in $(seq 1 20); do gid=$(kvf_roce_gid_index "$name") && [ -n "$gid" ] && break; sleep 0.1; done
	kvf_log "$name: RoCE v2 GID index ${gid:-none yet}"
	;;
remove)
	[ $# = 1 ] || usage
	name=$1
	need_root remove "$name"
	need_rdma_tool
	if [ ! -e "/sys/class/infiniband/$name" ]; then
		kvf_log "no RDMA device $name (nothing to do)"
		exit 0
	fi
	rdma link show 2> /dev/null | grep -q "^link $name/" ||
		kvf_die "$name is not an rxe link (hardware device?); not removing"
	rdma link delete "$name" || kvf_die "rdma link delete $name failed"
	kvf_log "removed $name"
	;;
status)
	need_rdma_tool
	if [ -d /sys/module/rdma_rxe ]; then
		echo "rdma_rxe: loaded"
	elif modinfo rdma_rxe > /dev/null 2>&1; then
		echo "rdma_rxe: available, not loaded"
	else
		echo "rdma_rxe: not available in kernel $(uname -r) (use scripts/rxe-vm.sh)"
	fi
	echo "links:"
	rdma link show 2> /dev/null | sed 's/^/  /' || true
	devs=$(ls /sys/class/infiniband 2> /dev/null || true)
	if [ -z "$devs" ]; then
		echo "devices: none"
	else
		echo "devices:"
		for d in $devs; do
			printf '  %s: RoCE v2 IPv4 GID index %s\n' "$d" "$(kvf_roce_gid_index "$d" || true)"
		done
	fi
	echo "memlock limit (ulimit -l): $(ulimit -l)"
	;;
-h|--help|help) usage 0 ;;
*) usage ;;
esac
