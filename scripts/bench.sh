#!/usr/bin/env bash
# Benchmarks of issue 2, printed as figures and written as JSON:
#  - kvf_ring against Concurrency Kit's ck_ring SPSC, same run (goal >= 1.0x)
#  - room engine lifecycles/s with 1K and 1M live rooms (goal: ratio <= 1.5)
#  - instructions per lifecycle under callgrind (goal <= 2,000)
# Usage: scripts/bench.sh [OUT.json]   (build dir: $KVF_BUILD_DIR or build-bench)
set -euo pipefail
KVF_PROG=bench
source "$(dirname "$0")/lib.sh"
cd "$KVF_REPO"

out=${1:-bench-results.json}
build=${KVF_BUILD_DIR:-build-bench}
kvf_need_pkgs "${KVF_PKGS_BUILD[@]}" valgrind
# Figures come from an optimized build, not the debug one the tests use.
[ -f "$build/build.ninja" ] || meson setup "$build" --buildtype=release >/dev/null
meson compile -C "$build" bench_ring bench_engine >/dev/null

# Each benchmark runs once: its table on stderr, its JSON on stdout.
echo "== ring: kvf_ring vs ck_ring (SPSC, 32-byte events)"
ring_json=$("$build/bench/bench_ring" --json)

echo "== room engine: lifecycles with 1K and 1M live rooms"
engine_json=$("$build/bench/bench_engine" --json)

echo "== room engine: instructions per lifecycle (callgrind, 1K live rooms)"
k=100032 # a multiple of the benchmark's batch of 64
cg=$(mktemp)
valgrind --tool=callgrind --collect-atstart=no --toggle-collect=run_lifecycles \
	--callgrind-out-file="$cg" "$build/bench/bench_engine" --live 1000 --lifecycles $k \
	>/dev/null 2>"$cg.log"
ir=$(sed -n 's/.*Collected : *\([0-9]*\).*/\1/p' "$cg.log")
rm -f "$cg" "$cg.log"
per=$(( ir / k ))
echo "  $ir instructions / $k lifecycles = $per per lifecycle (goal <= 2000)"

printf '{"ring": %s, "engine": %s, "callgrind": {"lifecycles": %d, "instructions": %d, "per_lifecycle": %d, "goal": 2000}}\n' \
	"$ring_json" "$engine_json" "$k" "$ir" "$per" >"$out"
echo "JSON: $out"
