#!/usr/bin/env bash
# Build libFuzzer harnesses with clang + ASan + UBSan and run them.
#
#   scripts/fuzz.sh NAME SECONDS [LIBFUZZER_FLAG...]
#   scripts/fuzz.sh all SECONDS [LIBFUZZER_FLAG...]
#
# NAME picks tests/fuzz/fuzz_NAME.c (`all`: every one, in turn); its seeds
# are tests/fuzz/corpus/NAME/, its dictionary tests/fuzz/NAME.dict (if
# any). The build is in build-fuzz/ (KVF_FUZZ_BUILD_DIR to change); new
# corpus entries go to BUILD/fuzz-corpus/NAME/, a crashing input to
# BUILD/fuzz-NAME-crash-*, the log to BUILD/fuzz-NAME.log.
# Prints, per harness, its executions and coverage (libFuzzer's final
# stats line), then `fuzz: N passed, N failed`; exits nonzero when a
# harness found a crash, a leak or a sanitizer report.
set -euo pipefail
KVF_PROG=fuzz
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

[ $# -ge 2 ] || kvf_die "usage: $0 NAME|all SECONDS [LIBFUZZER_FLAG...]"
name=$1 secs=$2
shift 2
case $secs in '' | *[!0-9]*) kvf_die "SECONDS must be a whole number, got '$secs'" ;; esac
cd "$KVF_REPO"
if [ "$name" = all ]; then
	names=()
	for f in tests/fuzz/fuzz_*.c; do
		n=${f#tests/fuzz/fuzz_}
		names+=("${n%.c}")
	done
else
	[ -f "tests/fuzz/fuzz_$name.c" ] || kvf_die "no harness tests/fuzz/fuzz_$name.c"
	names=("$name")
fi
build=${KVF_FUZZ_BUILD_DIR:-build-fuzz}

# libFuzzer's runtime ships in compiler-rt (Debian 12: libclang-rt-14-dev,
# which holds libclang_rt.fuzzer-x86_64.a).
kvf_need_pkgs clang libclang-rt-14-dev meson ninja-build pkg-config libconfig-dev
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n)\n{ (void)d; return (int)(n & 0); }\n' >"$probe/p.c"
clang -fsanitize=fuzzer,address,undefined "$probe/p.c" -o "$probe/p" ||
	kvf_die "clang -fsanitize=fuzzer does not link here"

if [ ! -f "$build/build.ninja" ]; then
	# fuzzer-no-link: the library's own code carries the coverage
	# counters libFuzzer steers by. b_lundef=false: the shared library
	# cannot resolve the sanitizer runtime at link time under clang.
	CC=clang meson setup "$build" -Db_sanitize=address,undefined -Db_lundef=false \
		-Dc_args=-fsanitize=fuzzer-no-link -Dtests=false >/dev/null
fi
meson compile -C "$build" "${names[@]/#/fuzz_}" >/dev/null ||
	kvf_die "building ${names[*]/#/fuzz_} in $build failed"

# run_one NAME [FLAG...]: run it, print its summary; nonzero on a finding.
run_one() {
	local n=$1 corpus log rc=0 last
	shift
	corpus="$build/fuzz-corpus/$n"
	log="$build/fuzz-$n.log"
	mkdir -p "$corpus"
	local flags=(-max_total_time="$secs" -print_final_stats=1 -close_fd_mask=2
		-artifact_prefix="$build/fuzz-$n-")
	[ -f "tests/fuzz/$n.dict" ] && flags+=(-dict="tests/fuzz/$n.dict")
	local seeds=()
	[ -d "tests/fuzz/corpus/$n" ] && seeds=("tests/fuzz/corpus/$n")
	kvf_log "running fuzz_$n for ${secs}s (log: $log)"
	LSAN_OPTIONS="suppressions=$KVF_REPO/tests/fuzz/lsan.supp:print_suppressions=0" \
	UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
		"$build/tests/fuzz/fuzz_$n" "${flags[@]}" "$@" "$corpus" "${seeds[@]}" \
		>"$log" 2>&1 || rc=$?
	# libFuzzer's last status line: "#EXECS DONE cov: N ft: N corp: ..."
	# (or the last "#EXECS ..." line before a finding).
	last=$(grep -E '^#[0-9]+[[:space:]]' "$log" | tail -1 || true)
	printf 'fuzz_%s: %s execs, cov %s, ft %s, corp %s in %ss: %s\n' "$n" \
		"$(sed -nE 's/^#([0-9]+).*/\1/p' <<<"$last")" \
		"$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$last")" \
		"$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$last")" \
		"$(sed -nE 's/.* corp: ([^ ]+).*/\1/p' <<<"$last")" \
		"$secs" "$([ "$rc" = 0 ] && echo ok || echo "FAILED (exit $rc)")"
	echo "  $last"
	if [ "$rc" != 0 ]; then
		grep -E "ERROR|SUMMARY|fuzz_$n:|Test unit written" "$log" | awk '!seen[$0]++' ||
			tail -n 30 "$log"
		kvf_log "fuzz_$n failed (exit $rc); see $log"
	fi
	return "$rc"
}

passed=0 failed=0
for n in "${names[@]}"; do
	if run_one "$n" "$@"; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
	fi
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" = 0 ]
