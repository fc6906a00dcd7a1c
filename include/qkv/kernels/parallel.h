// qkv/kernels/parallel.h - what a parallel region costs, for kernels that choose between one
// thread and the OpenMP pool by the size of their work.
#pragma once

#include <cstdint>

namespace qkv::kernels {

// Whether idle OpenMP threads spin before they sleep (libgomp: a positive GOMP_SPINCOUNT, or no
// OMP_WAIT_POLICY=PASSIVE; read once). When they spin, as under qkv's default
// (util/blas_env.h), entering a parallel region costs a few microseconds; when they sleep, it
// costs a wake-up of 100 us or more on a VM, so small work should stay on one thread.
bool idle_threads_spin();

// body(i) for i in [0, n): split statically over the pool when `parallel` and there are at least
// two indices (as `omp parallel for schedule(static)`), else in order on this thread without
// entering a region. An OpenMP region whose if-clause is false still builds a one-thread team in
// libgomp, about 0.27 us (AMD EPYC Zen 5), which a batch-1 decoding step paid on each of its ~20
// small ops; a region over one index leaves the other threads idle and cost batch-1 attention
// over a long cache 8-10%. Either way an index runs on one thread in the same order, so results
// do not depend on `parallel`.
template <typename Body>
inline void parallel_for_if(bool parallel, int64_t n, Body&& body) {
  if (!parallel || n < 2) {
    for (int64_t i = 0; i < n; ++i) body(i);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) body(i);
}

}  // namespace qkv::kernels
