#!/usr/bin/env bash
# Fuzzes every input format qkv reads (tests/fuzz/<name>.cpp, issue 19) with libFuzzer under
# ASan + UBSan: builds the targets with clang in build-fuzz/, then runs each for SECONDS
# (default 600) from its seed corpus (tests/fuzz/corpus/<name>/, read only; new inputs go to
# build-fuzz/corpus/<name>/). A crash input is kept in tests/fuzz/crashes/<name>/: commit it with
# the fix, and the test suite replays it from then on (test_fuzz, tests/fuzz/test_replay.cpp).
#   scripts/fuzz.sh [SECONDS] [TARGET...]
# Not part of scripts/test.sh. Installs clang and libFuzzer (Debian's clang-14, libfuzzer-14-dev,
# libomp-14-dev for clang's OpenMP) if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
shift || true

# The library's own packages (this script builds its own tree), and clang, libFuzzer and libomp.
scripts/install.sh --no-build --with clang-14 --with libfuzzer-14-dev --with libomp-14-dev

# clang at -O1 does not vectorize the `omp simd` loops and does not know GCC's warning groups in
# the sources' GCC pragmas: about 300 lines of warnings a build that say nothing about fuzzing.
quiet="-Wno-pass-failed -Wno-unknown-warning-option"
if [ ! -f build-fuzz/build.ninja ]; then
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
    -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g $quiet" -DQKV_FUZZ=ON -DQKV_BUILD_TESTS=OFF \
    -DQKV_BUILD_BENCH=OFF -DQKV_BUILD_EXAMPLES=OFF >/dev/null
fi
targets=("$@")
if ((${#targets[@]} == 0)); then
  cmake --build build-fuzz --target qkv_fuzzers -- --quiet
  for f in build-fuzz/fuzz_*; do targets+=("${f#build-fuzz/fuzz_}"); done
else  # only the named ones: the cheap parsers need a small part of the library
  cmake --build build-fuzz --target "${targets[@]/#/fuzz_}" -- --quiet
fi
export OMP_NUM_THREADS=1  # the parsers are serial; keep the other core free
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
status=0
for t in "${targets[@]}"; do
  mkdir -p "build-fuzz/corpus/$t" "tests/fuzz/crashes/$t" build-fuzz/logs
  echo "== fuzz $t for ${seconds}s"
  # -timeout: an input taking over 10 s is a hang; -rss_limit_mb: the machine is shared.
  if ! build-fuzz/fuzz_"$t" "build-fuzz/corpus/$t" "tests/fuzz/corpus/$t" -max_total_time="$seconds" \
      -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
      -artifact_prefix="tests/fuzz/crashes/$t/" >"build-fuzz/logs/$t.log" 2>&1; then
    echo "fuzz: $t FAILED; the input is in tests/fuzz/crashes/$t/ (log: build-fuzz/logs/$t.log)" >&2
    status=1
  fi
  grep -E "^stat::number_of_executed_units|^#[0-9]+.*(DONE|cov:)" "build-fuzz/logs/$t.log" | tail -2 || true
  rmdir "tests/fuzz/crashes/$t" 2>/dev/null || true  # keep only directories with inputs
done
exit $status
