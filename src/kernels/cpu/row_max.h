// The maximum of a row, vectorised, and exactly -inf for an empty row or a row of -inf (the
// kernels detect fully masked rows by that -inf).
//
// A bare `#pragma omp simd reduction(max : m)` with m = -inf does not give that under every
// compiler: OpenMP starts each lane's partial maximum at the type's "least representable value",
// which GCC takes as -inf and clang as the lowest finite value (-FLT_MAX). Over a row of -inf,
// clang's result is -FLT_MAX, the fully-masked test fails and softmax, log_softmax and attention
// returned NaN for such rows (Softmax.* failed in the clang ThreadSanitizer build,
// docs/robustness.md). A result equal to the lowest finite value is therefore checked serially.
//
// NaN: the comparison skips it, so a row with a NaN among other values has their maximum (the
// NaN then spreads through exp and the sum), but a row of NaNs alone came out -inf and was taken
// for a fully masked row: softmax and attention wrote zeros for it, hiding a diverged model's NaN
// (torch gives NaN). A -inf result is therefore checked for a NaN, serially (fully masked rows
// are few), and the NaN returned.
#pragma once
#include <cstdint>
#include <limits>

namespace qkv::kernels {

template <typename T>
inline T row_max(const T* x, int64_t n) {
  T m = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t j = 0; j < n; ++j) m = x[j] > m ? x[j] : m;
  if (m == std::numeric_limits<T>::lowest()) {  // -FLT_MAX in x, or clang's initial value
    m = -std::numeric_limits<T>::infinity();
    for (int64_t j = 0; j < n; ++j) m = x[j] > m ? x[j] : m;
  }
  if (m == -std::numeric_limits<T>::infinity())
    for (int64_t j = 0; j < n; ++j)
      if (x[j] != x[j]) return x[j];
  return m;
}

}  // namespace qkv::kernels
