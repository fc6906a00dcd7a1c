// AVX2 helpers shared by the kernels that have an AVX2 form for CPUs without AVX-512 (gemm_rows.cpp,
// gemm_packed.cpp, elementwise.cpp). Internal to src/kernels/cpu.
#pragma once
#if defined(__AVX2__)
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

namespace qkv::kernels {

// The mask of lanes i < n (n clamped to 0..8) for _mm256_maskload_ps / _mm256_maskstore_ps: the
// masked-out lanes read nothing (never past p + n) and load as zero.
inline __m256i first_lanes(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(std::clamp<int64_t>(n, 0, 8))),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// The 8 floats at p of which `rest` remain: a plain load or store for 8 or more, a masked one for
// fewer (lanes past the end load as zero and are not stored). AMD's masked stores are microcoded:
// a loop that masked every store, GELU's, spent about half its time in them on a Zen 1.
inline __m256 load8(const float* p, int64_t rest) {
  return rest >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, first_lanes(rest));
}
inline void store8(float* p, int64_t rest, __m256 v) {
  if (rest >= 8)
    _mm256_storeu_ps(p, v);
  else
    _mm256_maskstore_ps(p, first_lanes(rest), v);
}

}  // namespace qkv::kernels
#endif
