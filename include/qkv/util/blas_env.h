// qkv/util/blas_env.h - the OpenBLAS / OpenMP settings qkv programs run with.
#pragma once

namespace qkv {

// How long an idle OpenMP thread spins before it sleeps, in libgomp's spin iterations (one
// `pause` each, about 15 ns on this machine's Xeon: about 0.3 ms). A greedy decoding step is
// some 18 parallel regions with a few to tens of microseconds of serial work between them; a
// worker that went to sleep in each gap costs a futex wake-up of 100-200 us on this VM (the
// OMP_WAIT_POLICY=PASSIVE behaviour, spin count 0), which made decoding 1.4-1.9x slower in wall
// time. libgomp's own default spins about 20x longer (300000), which burns CPU time that
// other processes on a shared machine could use.
inline constexpr const char* kGompSpinCount = "20000";

// Settings that must be in the environment before the libraries load, so they cannot be set
// from main(): OpenBLAS 0.3.21 (Debian 12) does not recognise recent Xeons and falls back to its
// SSE3 kernels, about 4x slower (and summing in another order), unless OPENBLAS_CORETYPE is set;
// libgomp reads its spin count at load. If QKV_NO_REEXEC is unset and either setting is missing
// (OPENBLAS_CORETYPE=SkylakeX, on AVX-512 machines only; GOMP_SPINCOUNT=kGompSpinCount, unless
// the user set OMP_WAIT_POLICY or GOMP_SPINCOUNT), this re-executes the program
// (/proc/self/exe, same argv) once with them added. Otherwise, or if exec fails, it returns.
// Call it first in main().
void reexec_with_blas_settings(char** argv);

}  // namespace qkv
