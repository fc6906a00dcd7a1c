// Shared by the oneDNN backends (gemm_dnnl.cpp: bf16 and large fp32 products, gemm_int8.cpp:
// int8); nothing outside src/kernels/cpu includes oneDNN.
#pragma once
#include <omp.h>

#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <oneapi/dnnl/dnnl.hpp>

#include "qkv/kernels/parallel.h"

namespace qkv::kernels::dnnl_detail {

// The process's CPU engine. qkv keeps its own primitive caches (gemm_dnnl.cpp, gemm_int8.cpp),
// so oneDNN's global one (1,024 primitives by default) would only hold a second reference to
// primitives qkv has already dropped: with it, the demo's translation training, which meets new
// shapes at every step, peaked 130-150 MB higher. It is turned off unless the environment sets
// ONEDNN_PRIMITIVE_CACHE_CAPACITY.
inline dnnl::engine& engine() {
  static dnnl::engine e = [] {
    if (!std::getenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY") && !std::getenv("DNNL_PRIMITIVE_CACHE_CAPACITY"))
      dnnl::set_primitive_cache_capacity(0);
    return dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
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

// FNV-1a over the fields of a primitive-cache key.
inline size_t hash_key(std::initializer_list<int64_t> fields) {
  uint64_t h = 1469598103934665603ull;
  for (int64_t v : fields) h = (h ^ uint64_t(v)) * 1099511628211ull;
  return size_t(h);
}

// Threads for a product against a packed weight: one for small products (decoding at batch 1: a
// few hundred thousand multiply-adds), where oneDNN would otherwise wake the whole pool for each
// (that cost 3x the fp32 panels' CPU time for GPT generation at batch 1); the same threshold as
// packed_linear's. One inside a parallel region.
inline int product_threads(int64_t M, int64_t N, int64_t K) {
  const int64_t min_macs = idle_threads_spin() ? (int64_t(1) << 20) : (int64_t(1) << 22);
  return omp_in_parallel() || M * N * K < min_macs ? 1 : omp_get_max_threads();
}

}  // namespace qkv::kernels::dnnl_detail
