#!/usr/bin/env bash
# Run a command inside a throwaway qemu guest that has soft-RoCE (rdma_rxe)
# devices ready, for hosts whose kernel has no RDMA.
#
#   scripts/rxe-vm.sh [--devices 1|2|4] [--timeout S] [--rw] [--share DIR]... -- CMD [ARG]...
#
# The guest is the host's own Debian kernel (/boot/vmlinuz-*), root on tmpfs,
# with the host's /usr and /etc shared read-only over virtio-9p, so it runs the
# host's rdma-core tools and binaries built on the host. The repository is
# shared at the same absolute path (read-only; --rw makes it writable) and CMD
# runs there. Extra --share DIRs are shared read-only at their own path too.
# Nothing leaves the guest: no network card (-nic none).
#
# rxe setup in the guest:
#   --devices 1 (default): rxe0 on a dummy netdev kvf0, 10.77.0.1/24
#   --devices 2: rxe0/rxe1 on a veth pair kvf0/kvf1, 10.77.0.1 and 10.77.0.2
#   --devices 4: two rails, each a veth pair: rail 0 is kvf0<->kvf1 (rxe0, the
#     prefill side, 10.77.0.1; rxe1, the decode side, 10.77.0.2), rail 1 is
#     kvf2<->kvf3 (rxe2 prefill, 10.77.0.3; rxe3 decode, 10.77.0.4); all in
#     10.77.0.0/24, permanent neighbour entries only within each pair
# CMD gets: KVF_IN_VM=1 KVF_RXE_NDEV KVF_RXE_DEV0 KVF_RXE_ADDR0 KVF_RXE_NETDEV0
# KVF_RXE_GID0 (RoCE v2 GID index) [and ...1 with --devices 2, ...1 to ...3
# with --devices 4], memlock unlimited.
#
# Exit status: CMD's. A guest that crashes, hangs past --timeout, or fails to
# set up rxe exits nonzero with a message saying which.
#
# Environment: KVF_VM_DIR (cache, default <repo>/.vm), KVF_VM_KERNEL
# (vmlinuz path), KVF_VM_MEM (MiB, default 2048), KVF_VM_SMP (default 2),
# KVF_VM_ACCEL (kvm|tcg, default: kvm when /dev/kvm works), KVF_VM_VERBOSE=1
# (show kernel messages). Variables named CI and KVF_* (other than the above)
# are passed through to CMD.
set -euo pipefail
KVF_PROG=rxe-vm
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

devices=1
timeout_s=600
repo_rw=0
extra_shares=()

usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit "${1:-2}"; }

while [ $# -gt 0 ]; do
	case $1 in
	--devices) devices=${2:?}; shift 2 ;;
	--devices=*) devices=${1#*=}; shift ;;
	--timeout) timeout_s=${2:?}; shift 2 ;;
	--timeout=*) timeout_s=${1#*=}; shift ;;
	--rw) repo_rw=1; shift ;;
	--share) extra_shares+=("$(cd "${2:?}" && pwd -P)"); shift 2 ;;
	-h|--help) usage 0 ;;
	--) shift; break ;;
	*) kvf_log "unknown option: $1"; usage ;;
	esac
done
[ $# -gt 0 ] || { kvf_log "no command given"; usage; }
case $devices in 1|2|4) ;; *) kvf_die "--devices must be 1, 2 or 4" ;; esac
case $timeout_s in ''|*[!0-9]*) kvf_die "--timeout must be whole seconds" ;; esac

kvf_need_pkgs "${KVF_PKGS_VM[@]}" "${KVF_PKGS_RDMA[@]}"

# ---- kernel and modules -------------------------------------------------
pick_kernel() {
	local k v
	if [ -n "${KVF_VM_KERNEL:-}" ]; then echo "$KVF_VM_KERNEL"; return; fi
	for k in $(ls -1 /boot/vmlinuz-* 2>/dev/null | sort -V -r); do
		v=${k#/boot/vmlinuz-}
		if [ -n "$(find "/usr/lib/modules/$v" -name 'rdma_rxe.ko*' -print -quit 2>/dev/null)" ]; then
			echo "$k"; return
		fi
	done
}
kernel=$(pick_kernel)
[ -n "$kernel" ] && [ -r "$kernel" ] ||
	kvf_die "no readable /boot/vmlinuz-* with rdma_rxe in /usr/lib/modules (install linux-image-amd64)"
kver=${kernel##*/vmlinuz-}
[ -d "/usr/lib/modules/$kver" ] || kvf_die "no /usr/lib/modules/$kver for $kernel"

vmdir=${KVF_VM_DIR:-$KVF_REPO/.vm}
mkdir -p "$vmdir"

# ---- initramfs: static busybox, /init, the modules that mount 9p ----------
# Stage 1 (/init, busybox) mounts a tmpfs root, shares /usr /etc, the repo and
# the run dir into it, points kernel module auto-loading at a wrapper that runs
# the shared modprobe inside that root, then chroots into it for stage 2 (the
# run dir's guest.sh, host bash), and powers off when stage 2 returns.
read -r -d '' INIT <<'EOF' || true
#!/bin/busybox sh
B=/bin/busybox
$B mkdir -p /proc /sys /dev /r
$B mount -t proc proc /proc
$B mount -t sysfs sys /sys
$B mount -t devtmpfs dev /dev
echo "KVF-VM-INIT"
if $B grep -q kvf_probe /proc/cmdline; then echo "KVF-VM-PROBE-OK"; $B poweroff -f; fi
die() { echo "KVF-VM-FATAL: $*"; echo "KVF-VM-EXIT rc=125"; $B poweroff -f; }
for m in $($B cat /modules.list); do
	$B insmod "$m" || die "insmod $m failed"
done
$B mount -t tmpfs -o mode=0755 root /r || die "tmpfs root"
cd /r
$B mkdir -p usr etc proc sys dev tmp run root kvf-run
$B chmod 1777 tmp
m9() { # tag dir opts
	$B mkdir -p "/r$2"
	$B mount -t 9p -o "trans=virtio,version=9p2000.L,msize=512000,$3" "$1" "/r$2" ||
		die "mount 9p $1 at $2"
}
m9 usr /usr ro,cache=loose
m9 etc /etc ro,cache=loose
m9 run /kvf-run rw
# bin/lib links now that /usr is there
for l in bin sbin lib lib32 lib64 libx32; do
	[ -e /r/usr/$l ] && [ ! -e /r/$l ] && $B ln -s usr/$l /r/$l
done
while read -r tag dir opts; do
	m9 "$tag" "$dir" "$opts"
done < /r/kvf-run/shares
$B mount -t proc proc /r/proc
$B mount -t sysfs sys /r/sys
$B mount -t devtmpfs dev /r/dev
$B mkdir -p /r/dev/pts /r/dev/shm
$B mount -t devpts devpts /r/dev/pts
$B mount -t tmpfs shm /r/dev/shm
$B mount -t tmpfs run /r/run
echo /sbin/kvf-modprobe > /proc/sys/kernel/modprobe
$B chroot /r /bin/bash /kvf-run/guest.sh < /dev/console > /dev/console 2>&1
rc=$?
$B sync
echo "KVF-VM-STAGE2-RETURNED rc=$rc"
$B poweroff -f
EOF

build_initramfs() {
	local out=$vmdir/initramfs-$kver.cpio.gz stamp=$vmdir/initramfs-$kver.stamp key tmp
	key=$(printf '%s\n' "$INIT" "$kernel" "$(stat -c '%Y %s' /bin/busybox)" \
		"$(modprobe -S "$kver" --show-depends -a virtio_pci 9pnet_virtio 9p)" | sha256sum | cut -d' ' -f1)
	if [ -s "$out" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$key" ]; then
		echo "$out"; return
	fi
	kvf_log "building initramfs for $kver in $vmdir"
	tmp=$(mktemp -d "$vmdir/initramfs.XXXXXX")
	mkdir -p "$tmp/root/bin" "$tmp/root/sbin" "$tmp/root/modules"
	cp /bin/busybox "$tmp/root/bin/busybox"
	ln -s busybox "$tmp/root/bin/sh"
	printf '%s\n' "$INIT" > "$tmp/root/init"
	chmod 755 "$tmp/root/init"
	# kernel auto-loading (/proc/sys/kernel/modprobe) runs in the initramfs
	# root: hand it to the shared modprobe inside the real root.
	printf '#!/bin/busybox sh\nexec /bin/busybox chroot /r /usr/sbin/modprobe "$@"\n' \
		> "$tmp/root/sbin/kvf-modprobe"
	chmod 755 "$tmp/root/sbin/kvf-modprobe"
	local path n=0 seen=" " dst
	: > "$tmp/root/modules.list"
	while read -r cmd path _; do
		[ "$cmd" = insmod ] || continue
		case $seen in *" $path "*) continue ;; esac
		seen="$seen$path "
		n=$((n + 1))
		dst=/modules/$(printf '%02d' $n)-$(basename "${path%%.ko*}").ko
		case $path in
		*.ko) cp "$path" "$tmp/root$dst" ;;
		*.ko.xz) xz -dc "$path" > "$tmp/root$dst" ;;
		*.ko.zst) zstd -qdc "$path" > "$tmp/root$dst" ;;
		*.ko.gz) gzip -dc "$path" > "$tmp/root$dst" ;;
		*) kvf_die "unknown module format: $path" ;;
		esac
		echo "$dst" >> "$tmp/root/modules.list"
	done < <(modprobe -S "$kver" --show-depends -a virtio_pci 9pnet_virtio 9p)
	[ $n -gt 0 ] || kvf_die "modprobe -S $kver found no modules for virtio_pci/9p"
	(cd "$tmp/root" && find . -print0 | cpio --null -o -H newc --quiet | gzip -1) > "$tmp/initramfs.gz"
	mv -f "$tmp/initramfs.gz" "$out"
	echo "$key" > "$stamp"
	rm -rf "$tmp"
	echo "$out"
}
initramfs=$(build_initramfs)

# ---- per-run dir (shared read-write): command, env, exit code, log -------
run=$(mktemp -d "$vmdir/run.XXXXXX")
cleanup() { [ "${KVF_VM_KEEP:-0}" = 1 ] || rm -rf "$run"; }
trap cleanup EXIT

shares=()
ro=ro
[ $repo_rw = 1 ] && ro=rw
{
	echo "repo $KVF_REPO $ro,cache=loose"
	i=0
	for s in "${extra_shares[@]+"${extra_shares[@]}"}"; do
		echo "x$i $s ro,cache=loose"; i=$((i + 1))
	done
} > "$run/shares"
shares+=(repo "$KVF_REPO" "$ro")
i=0
for s in "${extra_shares[@]+"${extra_shares[@]}"}"; do
	shares+=("x$i" "$s" ro); i=$((i + 1))
done

{
	printf 'cd %q\n' "$PWD"
	printf 'export PWD=%q\n' "$PWD"
	# pass CI and KVF_* through, except this script's own knobs
	while IFS= read -r name; do
		case $name in KVF_VM_*|KVF_RXE_*|KVF_IN_VM) continue ;; esac
		printf 'export %s=%q\n' "$name" "${!name}"
	done < <(compgen -e | grep -E '^(CI|KVF_[A-Za-z0-9_]+)$' || true)
	printf 'exec'
	printf ' %q' "$@"
	printf '\n'
} > "$run/cmd.sh"

# Stage 2, inside the real root (host bash): rxe setup, then CMD.
cat > "$run/guest.sh" <<EOF
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root TERM=dumb LANG=C.UTF-8
DEVICES=$devices
KVF_VM_TRACE=${KVF_VM_TRACE:-0}
EOF
cat >> "$run/guest.sh" <<'EOF'
R=/kvf-run
[ "${KVF_VM_TRACE:-0}" = 1 ] && { PS4='+[$(cut -d" " -f1 /proc/uptime)] '; set -x; }
echo "$(cut -d' ' -f1 /proc/uptime)" > $R/boot_s
fail() { echo "KVF-VM-FATAL: rxe setup: $*"; echo 125 > $R/rc; echo "KVF-VM-EXIT rc=125"; exit 125; }
t() { timeout 30 "$@" || fail "$* (exit $?)"; }
mac() { cat /sys/class/net/$1/address; }
sysctl_set() { echo "$2" > "/proc/sys/$1" || fail "sysctl $1=$2"; }
t modprobe rdma_rxe
t modprobe rdma_ucm
ip link set lo up
if [ "$DEVICES" = 1 ]; then
	t ip link add kvf0 type dummy
	t ip addr add 10.77.0.1/24 dev kvf0
	t ip link set kvf0 up
	t rdma link add rxe0 type rxe netdev kvf0
else
	# veth pairs kvf0/kvf1 (and kvf2/kvf3 with 4); kvfN has 10.77.0.(N+1)
	for ((p = 0; p < DEVICES; p += 2)); do
		t ip link add kvf$p type veth peer name kvf$((p + 1))
	done
	for n in all default; do
		sysctl_set net/ipv4/conf/$n/rp_filter 0
		sysctl_set net/ipv4/conf/$n/accept_local 1
	done
	for ((i = 0; i < DEVICES; i++)); do
		sysctl_set net/ipv4/conf/kvf$i/rp_filter 0
		sysctl_set net/ipv4/conf/kvf$i/accept_local 1
	done
	for ((i = 0; i < DEVICES; i++)); do
		t ip addr add 10.77.0.$((i + 1))/24 dev kvf$i
	done
	for ((i = 0; i < DEVICES; i++)); do
		t ip link set kvf$i up
	done
	for ((p = 0; p < DEVICES; p += 2)); do
		q=$((p + 1))
		t ip neigh replace 10.77.0.$((q + 1)) lladdr "$(mac kvf$q)" dev kvf$p nud permanent
		t ip neigh replace 10.77.0.$((p + 1)) lladdr "$(mac kvf$p)" dev kvf$q nud permanent
	done
	for ((i = 0; i < DEVICES; i++)); do
		t rdma link add rxe$i type rxe netdev kvf$i
	done
fi
gid_of() { # dev ip -> index of its ::ffff:ip RoCE v2 GID (read builtin: no forks)
	local d=/sys/class/infiniband/$1/ports/1 want g t i n
	want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' $(echo "$2" | tr . ' '))
	for n in $(seq 1 100); do
		for ((i = 0; ; i++)); do
			[ -e $d/gids/$i ] || break
			read -r g < $d/gids/$i 2>/dev/null || continue
			[ "$g" = "$want" ] || continue
			read -r t < $d/gid_attrs/types/$i 2>/dev/null || continue
			case $t in *v2*) echo $i; return 0 ;; esac
		done
		sleep 0.1
	done
	return 1
}
for i in $(seq 0 $((DEVICES - 1))); do
	ip=10.77.0.$((i + 1))
	g=$(gid_of rxe$i $ip) || fail "no RoCE v2 GID for $ip on rxe$i"
	export KVF_RXE_DEV$i=rxe$i KVF_RXE_ADDR$i=$ip KVF_RXE_NETDEV$i=kvf$i KVF_RXE_GID$i=$g
done
export KVF_IN_VM=1 KVF_RXE_NDEV=$DEVICES
ulimit -l unlimited || fail "ulimit -l unlimited"
env | grep '^KVF_RXE_' | sort | sed 's/^/rxe-vm: /'
echo "rxe-vm: guest ready at $(cut -d' ' -f1 /proc/uptime) s uptime; running: $(tail -n1 $R/cmd.sh | cut -c6-)"
( . $R/cmd.sh ) < /dev/null
rc=$?
echo $rc > $R/rc
sync
echo "KVF-VM-EXIT rc=$rc"
exit $rc
EOF

# ---- qemu ------------------------------------------------------------------
base_args=(-smp "${KVF_VM_SMP:-2}" -m "${KVF_VM_MEM:-2048}" -machine q35
	-nodefaults -no-user-config -display none -no-reboot -nic none
	-kernel "$kernel" -initrd "$initramfs")
kvm_args=(-accel kvm -cpu host)
tcg_args=(-accel tcg,thread=multi -cpu max)

# /dev/kvm can exist and open yet not run a guest (nested virtualisation
# missing); so boot the initramfs once with KVM to a marker, 20 s at most, and
# remember the verdict for this host kernel + qemu.
kvm_works() {
	[ -r /dev/kvm ] && [ -w /dev/kvm ] || return 1
	local key verdict
	key=$(printf '%s %s' "$(uname -r)" "$(qemu-system-x86_64 --version | head -n1)" | sha256sum | cut -c1-16)
	verdict=$vmdir/kvm-probe.$key
	if [ ! -s "$verdict" ]; then
		if timeout -k 5 20 qemu-system-x86_64 "${kvm_args[@]}" "${base_args[@]}" -serial stdio \
			-append "console=ttyS0 panic=-1 quiet kvf_probe rdinit=/init" < /dev/null 2>&1 |
			grep -q KVF-VM-PROBE-OK; then
			echo yes > "$verdict"
		else
			echo no > "$verdict"
			kvf_log "/dev/kvm is there but a KVM guest did not start; using TCG (cached in $verdict)"
		fi
	fi
	[ "$(cat "$verdict")" = yes ]
}
accel=${KVF_VM_ACCEL:-}
if [ -z "$accel" ]; then
	if kvm_works; then accel=kvm; else accel=tcg; fi
fi
case $accel in
kvm) accel_args=("${kvm_args[@]}") ;;
tcg) accel_args=("${tcg_args[@]}") ;;
*) kvf_die "KVF_VM_ACCEL must be kvm or tcg" ;;
esac

fs_args=()
add_share() { # tag path ro|rw
	local ro=
	[ "$3" = ro ] && ro=,readonly=on
	fs_args+=(-fsdev "local,id=fs_$1,path=$2,security_model=none,multidevs=remap$ro"
		-device "virtio-9p-pci,fsdev=fs_$1,mount_tag=$1")
}
add_share usr /usr ro
add_share etc /etc ro
add_share run "$run" rw
for ((i = 0; i < ${#shares[@]}; i += 3)); do
	add_share "${shares[i]}" "${shares[i + 1]}" "${shares[i + 2]}"
done

quiet="quiet loglevel=3"
[ "${KVF_VM_VERBOSE:-0}" = 1 ] && quiet=
qemu=(qemu-system-x86_64 "${accel_args[@]}" "${base_args[@]}"
	-chardev stdio,id=con,signal=off -serial chardev:con
	-append "console=ttyS0 panic=-1 $quiet rdinit=/init"
	"${fs_args[@]}")

kvf_log "booting $kver ($accel, smp ${KVF_VM_SMP:-2}, $devices rxe device(s), timeout ${timeout_s}s)"
t0=$(kvf_now)
set +e
timeout --kill-after=10 "$timeout_s" "${qemu[@]}" < /dev/null 2> "$run/qemu.err" |
	sed -u 's/\r$//' | tee "$run/console.log"
qrc=${PIPESTATUS[0]}
set -e
total=$(kvf_elapsed "$t0")

if [ -s "$run/qemu.err" ]; then
	grep -v -e 'warning: host doesn.t support requested feature' "$run/qemu.err" >&2 || true
fi
boot=$(cat "$run/boot_s" 2>/dev/null || echo '?')
rc=
if [ -s "$run/rc" ]; then
	rc=$(cat "$run/rc")
elif grep -q '^KVF-VM-EXIT rc=' "$run/console.log"; then
	rc=$(sed -n 's/^KVF-VM-EXIT rc=\([0-9]*\).*/\1/p' "$run/console.log" | tail -n1)
fi
if [ $qrc = 124 ] || [ $qrc = 137 ]; then
	kvf_log "FAIL: guest timed out after ${timeout_s}s (hang; qemu killed)${rc:+, command had exited $rc}"
	exit 124
fi
if [ -z "$rc" ]; then
	kvf_log "FAIL: guest crashed or stopped before the command finished (qemu exit $qrc, no exit code written)"
	grep -E 'KVF-VM-FATAL|Kernel panic|BUG:|Oops' "$run/console.log" >&2 || true
	exit 125
fi
kvf_log "guest boot ${boot}s (uptime when rxe setup began), whole run ${total}s, command exit $rc"
exit "$rc"
