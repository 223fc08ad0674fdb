#!/usr/bin/env bash
# The fault matrix of issue 13 (docs/chaos.md): every scenario of
# tests/rxe/scenarios/chaos.sh over ROOMS rooms each, in ONE soft-RoCE guest
# (scripts/rxe-vm.sh --devices 2) unless this machine has two RDMA devices,
# with the binaries of a -Dfault_inject=true build. Prints a table (one row
# per scenario and side: rooms, SUCCESS, FAILED by reason, pinned, worst
# time to terminal past the deadline, wrong bytes, fd and heap leaks) and a
# total line.
#
#   scripts/chaos.sh [--rooms N (1000)] [--json] [--soak N] [--seed S] [SCENARIO...]
#
# --json: the JSON document on stdout, the table on stderr.
# --soak N: instead of the matrix, N rooms with every fault kind at low
#   rates: those that leave the connection up and the teardowns (corrupt,
#   qp_error, bad_rkey; KVF_SOAK_TEARDOWNS=0 leaves these out), the prefill
#   following the decode's requests (docs/chaos.md); RSS, fds, mappings and
#   heap sampled every 10,000 rooms (KVF_SOAK_SAMPLE_EVERY), checked flat
#   from the first sample past 10,000 rooms to the last (samples taken while
#   a connection is remade left out).
# Build dir: KVF_FAULT_BUILD_DIR (default build-fault; made with
# -Dfault_inject=true if missing). Raw output kept in KVF_CHAOS_OUT (default
# a new /tmp/kvf-chaos.* directory).
# Exit: 0 when no room was pinned, no SUCCESS room had a wrong byte, nothing
# leaked and (soak) memory and fds stayed flat; 1 otherwise; 2 usage.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
repo=$(cd "$here/.." && pwd -P)
KVF_PROG=chaos
# shellcheck source=scripts/lib.sh
. "$repo/scripts/lib.sh"
ALL=(early_abort lost_abort dup_abort peer_kill qp_error bad_rkey short_deadlines
	stale_completions ring_full cpu_starve)

rooms=1000 json=0 soak=0 seed=1 in_guest=0 scen=()
while [ $# -gt 0 ]; do
	case $1 in
	--rooms) rooms=${2:?}; shift ;;
	--json) json=1 ;;
	--soak) soak=${2:?}; shift ;;
	--seed) seed=${2:?}; shift ;;
	--in-guest) in_guest=1 ;;
	-h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) kvf_die "unknown option $1 (--help)" ;;
	*) scen+=("$1") ;;
	esac
	shift
done
[ ${#scen[@]} -gt 0 ] || scen=("${ALL[@]}")
for s in "${scen[@]}"; do
	[[ " ${ALL[*]} " == *" $s "* ]] || { kvf_log "unknown scenario '$s' (${ALL[*]})"; exit 2; }
done
build=${KVF_FAULT_BUILD_DIR:-build-fault}
case $build in /*) ;; *) build=$repo/$build ;; esac

# ---- in the guest (or on a host with devices): run the scenarios -------------
if [ $in_guest = 1 ]; then
	dev0=${KVF_RXE_DEV0:?} dev1=${KVF_RXE_DEV1:-$KVF_RXE_DEV0}
	a0=${KVF_RXE_ADDR0:?} a1=${KVF_RXE_ADDR1:-$KVF_RXE_ADDR0}
	rc=0
	if [ "$soak" -gt 0 ]; then
		"$repo/tests/rxe/scenarios/chaos.sh" "$build" "$dev0" "$a0" "$dev1" "$a1" soak "$soak" "$seed" || rc=1
		exit $rc
	fi
	for s in "${scen[@]}"; do
		t=$(kvf_now)
		"$repo/tests/rxe/scenarios/chaos.sh" "$build" "$dev0" "$a0" "$dev1" "$a1" "$s" "$rooms" "$seed" || rc=1
		echo "chaos-time: scenario=$s seconds=$(kvf_elapsed "$t")"
	done
	exit $rc
fi

# ---- on the host: build, one guest, the table ----------------------------------
if [ ! -f "$build/build.ninja" ]; then
	meson setup "$build" -Dfault_inject=true -Dpython=disabled > /dev/null || kvf_die "meson setup $build"
fi
meson compile -C "$build" > /dev/null || kvf_die "meson compile -C $build"
# grep -c reads all of nm's output (grep -q would make nm die of SIGPIPE,
# and pipefail would take that as "not found")
[ "$(nm "$build/tests/rxe/kvf_driver" | grep -c ' kvf_fault_setup')" -gt 0 ] ||
	kvf_die "$build is not a -Dfault_inject=true build (no kvf_fault_setup in kvf_driver)"
out=${KVF_CHAOS_OUT:-$(mktemp -d /tmp/kvf-chaos.XXXXXX)}
mkdir -p "$out"
args=(--in-guest --rooms "$rooms" --soak "$soak" --seed "$seed" "${scen[@]}")
if [ "$soak" -gt 0 ]; then
	limit=$((600 + soak / 20))
else
	limit=$((300 + ${#scen[@]} * (120 + rooms / 8)))
fi
export KVF_FAULT_BUILD_DIR=$build
if [ -n "${KVF_RXE_DEV0:-}" ]; then
	"$0" "${args[@]}" > "$out/raw" 2>&1
else
	"$repo/scripts/rxe-vm.sh" --devices 2 --timeout "$limit" -- scripts/chaos.sh "${args[@]}" > "$out/raw" 2>&1
fi
grc=$?
if [ "$json" = 1 ]; then
	/usr/bin/python3 "$repo/scripts/chaos_table.py" --json --soak "$soak" "$out/raw" 2> /dev/stderr
else
	/usr/bin/python3 "$repo/scripts/chaos_table.py" --soak "$soak" "$out/raw"
fi
trc=$?
[ $grc = 0 ] || grep -E '^(FAIL|chaos-time|rxe-vm|kvferry)' "$out/raw" | tail -n 20 >&2
kvf_log "raw output: $out/raw (guest exit $grc, table check $trc)"
[ $grc = 0 ] && [ $trc = 0 ]
