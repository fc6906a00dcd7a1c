// AVX2 helpers shared by the kernels that have an AVX2 form for CPUs without AVX-512 (gemm_rows.cpp,
// gemm_packed.cpp). Internal to src/kernels/cpu.
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

}  // namespace qkv::kernels
#endif
