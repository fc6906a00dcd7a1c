// qkv/util/blas_env.h - the OpenBLAS / OpenMP settings qkv programs run with.
#pragma once

#include <string>

namespace qkv {

// How long an idle OpenMP thread spins before it sleeps, in libgomp's spin iterations (one
// `pause` each, about 15 ns on this machine's Xeon: about 75 us). A greedy decoding step is some
// 18 parallel regions with serial work of a few to tens of microseconds between them; a worker
// that sleeps in each gap (OMP_WAIT_POLICY=PASSIVE, spin count 0) needs a wake-up that costs
// 100 us or more on a VM whose idle vCPU halted. Greedy bench, seconds per batch, alone on the 2
// cores: PASSIVE 0.21-0.52, 5000 spins 0.14-0.24, 20000 spins 0.14-0.17. Spinning loses when
// other processes want the cores: two such benches at once took 0.28-0.30 s each with PASSIVE,
// 0.47-0.52 with 5000 spins and 0.90-1.11 with 20000 (libgomp's own default is 300000). So run
// concurrent jobs with OMP_WAIT_POLICY=PASSIVE (scripts/test.sh does, for ctest -j2).
inline constexpr const char* kGompSpinCount = "5000";

// Settings that must be in the environment before the libraries load, so they cannot be set
// from main(): OpenBLAS 0.3.21 (Debian 12) does not recognise recent Xeons and falls back to its
// SSE3 kernels, about 4x slower (and summing in another order), unless OPENBLAS_CORETYPE is set;
// libgomp reads its spin count at load. If QKV_NO_REEXEC is unset and either setting is missing
// (OPENBLAS_CORETYPE=SkylakeX, on AVX-512 machines only; GOMP_SPINCOUNT=kGompSpinCount, unless
// the user set OMP_WAIT_POLICY or GOMP_SPINCOUNT), this re-executes the program
// (/proc/self/exe, same argv) once with them added. Otherwise, or if exec fails, it returns.
// Call it first in main().
void reexec_with_blas_settings(char** argv);

// The vector extensions OpenBLAS's forced kernel families need.
struct CpuVectorIsa {
  bool avx = false, avx2 = false, avx512f = false;
};
CpuVectorIsa this_cpu_vector_isa();

// OPENBLAS_CORETYPE forces a kernel family even on a CPU that cannot run it: SkylakeX, Cooperlake
// or SapphireRapids without AVX-512 (as a command copied from an AVX-512 machine does), Haswell or
// Zen without AVX2, Sandybridge without AVX. The first product then dies of an illegal
// instruction. Returns the error to print for `coretype` (the variable's value, as OpenBLAS reads
// it: case-insensitive; null when unset) on `cpu`, or "" when the CPU can run it.
std::string blas_coretype_error(const char* coretype, CpuVectorIsa cpu);

}  // namespace qkv
