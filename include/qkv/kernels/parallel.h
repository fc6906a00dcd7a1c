// qkv/kernels/parallel.h - what a parallel region costs, for kernels that choose between one
// thread and the OpenMP pool by the size of their work.
#pragma once

namespace qkv::kernels {

// Whether idle OpenMP threads spin before they sleep (libgomp: a positive GOMP_SPINCOUNT, or no
// OMP_WAIT_POLICY=PASSIVE; read once). When they spin, as under qkv's default
// (util/blas_env.h), entering a parallel region costs a few microseconds; when they sleep, it
// costs a wake-up of 100 us or more on a VM, so small work should stay on one thread.
bool idle_threads_spin();

}  // namespace qkv::kernels
