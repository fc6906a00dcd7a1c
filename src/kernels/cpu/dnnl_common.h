// Shared by the oneDNN backends (gemm_dnnl.cpp: bf16, gemm_int8.cpp: int8); nothing outside
// src/kernels/cpu includes oneDNN.
#pragma once
#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>

namespace qkv::kernels::dnnl_detail {

// The process's CPU engine.
inline dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// Sets the calling thread's OpenMP team size for the scope (oneDNN reads it when a primitive is
// made and runs that many threads), then restores it.
class OmpThreadsScope {
 public:
  explicit OmpThreadsScope(int n) : saved_(omp_get_max_threads()) {
    if (n != saved_) omp_set_num_threads(n);
  }
  ~OmpThreadsScope() {
    if (omp_get_max_threads() != saved_) omp_set_num_threads(saved_);
  }
  OmpThreadsScope(const OmpThreadsScope&) = delete;
  OmpThreadsScope& operator=(const OmpThreadsScope&) = delete;

 private:
  int saved_;
};

}  // namespace qkv::kernels::dnnl_detail
