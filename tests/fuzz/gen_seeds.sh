#!/usr/bin/env bash
# Regenerate the seed corpora of fuzz_proto, fuzz_reasm and fuzz_engine
# (tests/fuzz/corpus/{proto,reasm,engine}) with seed_gen, built in the fuzz
# build dir (KVF_FUZZ_BUILD_DIR, default build-fuzz; scripts/fuzz.sh sets
# it up). Run it after a change of the wire format, and commit the result.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${KVF_FUZZ_BUILD_DIR:-build-fuzz}
[ -f "$build/build.ninja" ] || { echo "gen_seeds: no $build (run scripts/fuzz.sh first)" >&2; exit 1; }
meson compile -C "$build" seed_gen >/dev/null || { meson compile -C "$build" seed_gen; exit 1; }
rm -rf tests/fuzz/corpus/proto tests/fuzz/corpus/reasm tests/fuzz/corpus/engine
"$build/tests/fuzz/seed_gen" tests/fuzz/corpus
ls tests/fuzz/corpus/proto tests/fuzz/corpus/reasm tests/fuzz/corpus/engine
