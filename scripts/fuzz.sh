#!/usr/bin/env bash
# Build one libFuzzer harness with clang + ASan + UBSan and run it.
#
#   scripts/fuzz.sh NAME SECONDS [LIBFUZZER_FLAG...]
#
# NAME picks tests/fuzz/fuzz_NAME.c; its seeds are tests/fuzz/corpus/NAME/,
# its dictionary tests/fuzz/NAME.dict (if any). The build is in build-fuzz/
# (KVF_FUZZ_BUILD_DIR to change); new corpus entries go to
# BUILD/fuzz-corpus/NAME/, a crashing input to BUILD/fuzz-NAME-crash-*.
# Prints libFuzzer's final line (executions, coverage) and its final
# stats; exits nonzero when the harness found a crash, a leak or a
# sanitizer report.
set -euo pipefail
KVF_PROG=fuzz
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

[ $# -ge 2 ] || kvf_die "usage: $0 NAME SECONDS [LIBFUZZER_FLAG...]"
name=$1 secs=$2
shift 2
case $secs in '' | *[!0-9]*) kvf_die "SECONDS must be a whole number, got '$secs'" ;; esac
cd "$KVF_REPO"
[ -f "tests/fuzz/fuzz_$name.c" ] || kvf_die "no harness tests/fuzz/fuzz_$name.c"
build=${KVF_FUZZ_BUILD_DIR:-build-fuzz}

# libFuzzer's runtime ships in compiler-rt (Debian: libclang-rt-14-dev).
kvf_need_pkgs clang meson ninja-build pkg-config libconfig-dev
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n)\n{ (void)d; return (int)(n & 0); }\n' >"$probe/p.c"
if ! clang -fsanitize=fuzzer,address,undefined "$probe/p.c" -o "$probe/p" 2>/dev/null; then
	kvf_need_pkgs libclang-rt-14-dev
	clang -fsanitize=fuzzer,address,undefined "$probe/p.c" -o "$probe/p" ||
		kvf_die "clang -fsanitize=fuzzer does not link here"
fi

if [ ! -f "$build/build.ninja" ]; then
	# fuzzer-no-link: the library's own code carries the coverage
	# counters libFuzzer steers by. b_lundef=false: the shared library
	# cannot resolve the sanitizer runtime at link time under clang.
	CC=clang meson setup "$build" -Db_sanitize=address,undefined -Db_lundef=false \
		-Dc_args=-fsanitize=fuzzer-no-link -Dtests=false >/dev/null
fi
meson compile -C "$build" "fuzz_$name" >/dev/null

corpus="$build/fuzz-corpus/$name"
mkdir -p "$corpus"
flags=(-max_total_time="$secs" -print_final_stats=1 -close_fd_mask=2
	-artifact_prefix="$build/fuzz-$name-")
[ -f "tests/fuzz/$name.dict" ] && flags+=(-dict="tests/fuzz/$name.dict")
seeds=()
[ -d "tests/fuzz/corpus/$name" ] && seeds=("tests/fuzz/corpus/$name")
log="$build/fuzz-$name.log"
kvf_log "running fuzz_$name for ${secs}s (log: $log)"
rc=0
LSAN_OPTIONS="suppressions=$KVF_REPO/tests/fuzz/lsan.supp:print_suppressions=0" \
UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
	"$build/tests/fuzz/fuzz_$name" "${flags[@]}" "$@" "$corpus" "${seeds[@]}" \
	>"$log" 2>&1 || rc=$?
grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1 || true
grep -E '^stat::' "$log" | awk '!seen[$0]++' || true
if [ "$rc" != 0 ]; then
	grep -E "ERROR|SUMMARY|fuzz_$name:|Test unit written" "$log" | awk '!seen[$0]++' ||
		tail -n 30 "$log"
	kvf_die "fuzz_$name failed (exit $rc); see $log"
fi
kvf_log "fuzz_$name: no crash in ${secs}s"
