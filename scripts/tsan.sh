#!/usr/bin/env bash
# ThreadSanitizer over the tests that run code on several threads (issue 19, docs/robustness.md):
# OpenMP kernels and the GEMM front-end's batched workers, oneDNN and OpenBLAS called from them,
# attention, decoding, the optimizers, the server's batching loop and HTTP threads, the corpus
# builder's extraction threads (data: downloads Debian and npm packages).
#   scripts/tsan.sh [CTEST_REGEX]     (default: every test of the binaries in LAYERS below)
# Builds with clang-14 + -fsanitize=thread in build-tsan/ (Debug -O1). Not part of scripts/test.sh:
# the tests take minutes under TSan, but the build takes 40 on a loaded 2-core machine.
#
# One OpenMP runtime, and one TSan understands: GCC's libgomp is not instrumented, so TSan misses
# the happens-before of its barriers and reports every value handed from one parallel region to
# the code after it. LLVM's libomp supplies those edges through its OMPT tool Archer
# (libarcher.so, OMP_TOOL_LIBRARIES). OpenBLAS and oneDNN, compiled by Debian with GCC, ask for
# libgomp.so.1 by name: build-tsan/omp/libgomp.so.1 is a link to libomp.so.5 (which exports
# libgomp's GOMP_* entry points), so their threads are libomp's too and Archer sees every barrier.
set -euo pipefail
cd "$(dirname "$0")/.."
LLVM=/usr/lib/llvm-14
LAYERS=(kernels ops attention decode train models tasks serve data)  # test_<layer>, whole (ctest label)
regex=${1:-}

# The library's and the tests' packages, and clang with its TSan runtime and libomp.
scripts/install.sh --tests --no-build --with clang-14 --with libclang-rt-14-dev --with libomp-14-dev

if [ ! -f build-tsan/build.ninja ]; then
  cmake -S . -B build-tsan -G Ninja -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
    -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" -DQKV_TSAN=ON \
    -DQKV_BUILD_BENCH=OFF -DQKV_BUILD_EXAMPLES=OFF >/dev/null
fi
log=$(mktemp)
if ! cmake --build build-tsan --target "${LAYERS[@]/#/test_}" -- --quiet >"$log" 2>&1; then
  cat "$log" >&2; rm -f "$log"; exit 1
fi
rm -f "$log"
mkdir -p build-tsan/omp
ln -sfn "$LLVM/lib/libomp.so.5" build-tsan/omp/libgomp.so.1

export LD_LIBRARY_PATH=$PWD/build-tsan/omp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export OMP_TOOL_LIBRARIES=$LLVM/lib/libarcher.so
# ignore_noninstrumented_modules: no reports on accesses made inside the uninstrumented libraries
# (libomp itself, OpenBLAS, oneDNN, libstdc++.so), whose own synchronisation TSan cannot see;
# Archer asks for it. Their lock and thread calls still count as synchronisation.
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ignore_noninstrumented_modules=1 ${TSAN_OPTIONS:-}"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}  # more threads than cores: more interleavings
export OMP_WAIT_POLICY=PASSIVE                # ... so idle ones must sleep, not spin
export QKV_REF_DIR=$PWD/build-tsan/refs  # written by ctest's refs_generate fixture
labels=$(IFS='|'; echo "^(${LAYERS[*]})\$")
(cd build-tsan && ctest --output-on-failure -j1 --timeout 3600 -L "$labels" ${regex:+-R "$regex"})
