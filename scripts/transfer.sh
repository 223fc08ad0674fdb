#!/usr/bin/env bash
# The main job: a real RDMA transfer, prefill side -> decode side, on this
# host's RDMA device, or on soft-RoCE inside a qemu guest when the host has
# none (two rxe devices on a veth pair there, one per side).
#
#   scripts/transfer.sh [--size BYTES]
#
# Today (the kvferry transport does not exist yet) the transfer is made with
# plain verbs: tests/rxe/verbs_smoke writes --size bytes (default 16 MiB) with
# one RDMA WRITE and checks every byte, then ib_write_bw moves 64 x 1 MiB from
# the decode device's client to the prefill device's server and reports Gb/s
# (the raw-verbs baseline); then tools/kvferry-bench, kvferry's own transfer:
# a prefill and a decode engine, KVF_BENCH_ROOMS rooms (default 20), every
# destination byte checked (marked "kvferry-bench" below); last, a request
# stream shaped like SGLang's (tests/rxe/scenarios/sglang.sh stream): two
# processes, KV, aux and state regions, KVF_SGLANG_REQUESTS requests
# (default 500; 0 skips it) of random length sent in 1-6 chunks with a
# random decode_prefix_len, every byte of every region checked.
#
# Environment: KVF_BUILD_DIR (default build), KVF_RXE=auto|host|vm,
# KVF_VM_TIMEOUT (default 600).
set -euo pipefail
KVF_PROG=transfer
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$KVF_REPO"

size=$((16 << 20))
inner=0
while [ $# -gt 0 ]; do
	case $1 in
	--size) size=${2:?}; shift 2 ;;
	--inner) inner=1; shift ;;
	-h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) kvf_die "unknown argument: $1 (see --help)" ;;
	esac
done
build=${KVF_BUILD_DIR:-build}
case $build in /*) ;; *) build=$KVF_REPO/$build ;; esac
export KVF_BUILD_DIR=$build

# ---- the transfer itself (on the device, host or guest) -------------------------
if [ $inner = 1 ]; then
	dev0=${KVF_RXE_DEV0:-$(kvf_first_rdma_dev)}
	[ -n "$dev0" ] || kvf_die "no RDMA device"
	dev1=${KVF_RXE_DEV1:-$dev0}
	gid0=${KVF_RXE_GID0:-$(kvf_roce_gid_index "$dev0")}
	gid1=${KVF_RXE_GID1:-${KVF_RXE_DEV1:+$(kvf_roce_gid_index "$dev1")}}
	gid1=${gid1:-$gid0}
	addr0=${KVF_RXE_ADDR0:-}
	if [ -z "$addr0" ]; then
		read -r g < "/sys/class/infiniband/$dev0/ports/1/gids/${gid0:-0}"
		g=${g#0000:0000:0000:0000:0000:ffff:}
		addr0=$(printf '%d.%d.%d.%d' "0x${g:0:2}" "0x${g:2:2}" "0x${g:5:2}" "0x${g:7:2}")
	fi
	ulimit -l unlimited 2> /dev/null || kvf_log "warning: memlock limit $(ulimit -l) KiB (see README)"
	echo "transfer: prefill side $dev0 ($addr0, gid ${gid0:--}), decode side $dev1 (gid ${gid1:--})"

	echo "transfer: step 1/4: one ${size}-byte RDMA WRITE, checked byte for byte (verbs_smoke)"
	timeout 120 "$build/tests/rxe/verbs_smoke" -d "$dev0" ${gid0:+-g "$gid0"} -s "$size" -t 60000

	echo "transfer: step 2/4: ib_write_bw, 64 x 1 MiB RDMA WRITEs $dev1 -> $dev0"
	x0=${gid0:+-x $gid0}
	x1=${gid1:+-x $gid1}
	# shellcheck disable=SC2086
	timeout 120 ib_write_bw -d "$dev0" $x0 -u 18 -p 18631 -F --report_gbits -s 1048576 -n 64 > /tmp/kvf-bw-server.log 2>&1 &
	spid=$!
	for _ in $(seq 1 150); do
		ss -Hltn 'sport = :18631' 2> /dev/null | grep -q . && break
		sleep 0.1
	done
	# shellcheck disable=SC2086
	timeout 120 ib_write_bw -d "$dev1" $x1 -u 18 -p 18631 -F --report_gbits -s 1048576 -n 64 "$addr0" | tee /tmp/kvf-bw.log
	wait "$spid" || { cat /tmp/kvf-bw-server.log; kvf_die "ib_write_bw server failed"; }
	bw=$(awk '/^ *1048576 +64 /{print $4}' /tmp/kvf-bw.log | head -n1)
	[ -n "$bw" ] || kvf_die "ib_write_bw reported no bandwidth"
	echo "transfer: raw verbs: ${size} B written and checked; ib_write_bw $bw Gb/s average ($dev1 -> $dev0)"

	# ==== kvferry-bench: kvferry's own transfer (prefill and decode engines,
	# ==== rooms over rdma_cm, every destination byte checked), prefill on
	# ==== $dev0, decode on $dev1 connecting from its own address.
	bench=$build/tools/kvferry-bench
	[ -x "$bench" ] || kvf_die "$bench is not built"
	addr1=${KVF_RXE_ADDR1:-}
	echo "transfer: step 3/4: kvferry-bench, ${KVF_BENCH_ROOMS:-100} rooms of 8 buffers x 8 blocks x 16 KiB, $dev0 -> $dev1"
	cat > /tmp/kvf-prefill.conf <<CONF
engine: { id = "prefill"; };
rdma: { device = "$dev0"; listen_addr = "$addr0"; listen_port = 18641; };
CONF
	cat > /tmp/kvf-decode.conf <<CONF
engine: { id = "decode"; };
rdma: { device = "$dev1"; peer = "$addr0:18641"; source_addr = "$addr1"; };
CONF
	timeout 150 "$bench" --prefill-config /tmp/kvf-prefill.conf --decode-config /tmp/kvf-decode.conf \
		--rooms "${KVF_BENCH_ROOMS:-100}" --buffers 8 --blocks-per-room 8 --block-size 16384 --timeout 120 |
		tee /tmp/kvf-bench.log
	[ "${PIPESTATUS[0]}" = 0 ] || kvf_die "kvferry-bench failed"
	# "N bytes in S s from the first send (S s with the setup): G Gb/s, R rooms/s"
	kbw=$(sed -n 's/.*: \([0-9.]*\) Gb\/s, [0-9.]* rooms\/s$/\1/p' /tmp/kvf-bench.log | tail -n1)
	[ -n "$kbw" ] || kvf_die "no bandwidth line in kvferry-bench's output (/tmp/kvf-bench.log)"
	echo "transfer: kvferry-bench $kbw Gb/s vs ib_write_bw $bw Gb/s on the same devices:" \
		"$(awk -v a="$kbw" -v b="$bw" 'BEGIN { printf "%.2f", a / b }') x"

	# ==== an SGLang-shaped request stream: regions, chunks, user data
	n=${KVF_SGLANG_REQUESTS:-500}
	if [ "$n" != 0 ]; then
		echo "transfer: step 4/4: $n SGLang-shaped requests (kv 32 x 2 KiB pages, aux, state; 1-6 chunks each), $dev0 -> $dev1"
		timeout 480 "$KVF_REPO/tests/rxe/scenarios/sglang.sh" "$build" "$dev0" "$addr0" "$dev1" \
			"${addr1:-$addr0}" stream "$n" || kvf_die "the request stream failed"
	fi
	echo "transfer: done"
	exit 0
fi

# ---- host side: packages, build, then run the above where a device is ---------
kvf_need_pkgs "${KVF_PKGS_BUILD[@]}" "${KVF_PKGS_RDMA[@]}"
if [ ! -f "$build/build.ninja" ]; then
	meson setup "$build" > /dev/null || kvf_die "meson setup $build failed"
fi
# only what the transfer needs, so unrelated breakage elsewhere does not stop it
meson compile -C "$build" verbs_smoke > /dev/null || kvf_die "building verbs_smoke failed"
meson compile -C "$build" kvferry-bench > /dev/null || kvf_die "building kvferry-bench failed"
# the request stream's scenario (step 4) checks for its sibling programs too
meson compile -C "$build" sglang_driver kvf_driver fake_peer > /dev/null ||
	kvf_die "building the request stream's drivers failed"

mode=${KVF_RXE:-auto}
if [ "$mode" = auto ]; then
	if kvf_host_has_rdma; then mode=host; else mode=vm; fi
fi
case $mode in
host) exec "$0" --inner --size "$size" ;;
vm)
	kvf_log "no RDMA device on this host: running on soft-RoCE in a qemu guest"
	share=()
	case $build/ in "$KVF_REPO"/*) ;; *) share=(--share "$build") ;; esac
	exec "$KVF_REPO/scripts/rxe-vm.sh" --devices 2 --timeout "${KVF_VM_TIMEOUT:-600}" \
		"${share[@]+"${share[@]}"}" -- scripts/transfer.sh --inner --size "$size"
	;;
*) kvf_die "KVF_RXE must be auto, host or vm" ;;
esac
