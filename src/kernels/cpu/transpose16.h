// A 16 x 16 transpose of 32-bit words in AVX-512 registers, for the bf16 packing code (bf16_tile.cpp's
// B^T operands, gemm_dnnl.cpp's blocked weight copies). Internal to src/kernels/cpu.
#pragma once
#if defined(__AVX512F__)
#include <immintrin.h>

#include <cstdint>

namespace qkv::kernels {

// GCC 12 warns that the unpack and shuffle intrinsics read an uninitialised value: their
// _mm512_undefined_epi32() pass-through operand (GCC bug 105593), not ours. Release builds call it
// -Wmaybe-uninitialized, the sanitizer build -Wuninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
// out[c * ldo + r] = in[r * ldi + c] for a 16 x 16 block of 32-bit words: unpack pairs of rows
// (epi32, then epi64) to gather each column's four-row groups per 128-bit lane, then move lanes.
inline void transpose16(const uint32_t* in, int64_t ldi, uint32_t* out, int64_t ldo) {
  __m512i r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_si512(in + i * ldi);
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int g = 0; g < 16; g += 4) {  // u[g + c] (lane L) = column 4L + c of rows g .. g + 3
    r[g] = _mm512_unpacklo_epi64(t[g], t[g + 2]);
    r[g + 1] = _mm512_unpackhi_epi64(t[g], t[g + 2]);
    r[g + 2] = _mm512_unpacklo_epi64(t[g + 1], t[g + 3]);
    r[g + 3] = _mm512_unpackhi_epi64(t[g + 1], t[g + 3]);
  }
  for (int c = 0; c < 4; ++c) {  // column 4L + c = lane L of r[c], r[4 + c], r[8 + c], r[12 + c]
    const __m512i v0 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0x44), v1 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0xEE);
    const __m512i v2 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0x44),
                  v3 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0xEE);
    _mm512_storeu_si512(out + (0 + c) * ldo, _mm512_shuffle_i32x4(v0, v2, 0x88));
    _mm512_storeu_si512(out + (4 + c) * ldo, _mm512_shuffle_i32x4(v0, v2, 0xDD));
    _mm512_storeu_si512(out + (8 + c) * ldo, _mm512_shuffle_i32x4(v1, v3, 0x88));
    _mm512_storeu_si512(out + (12 + c) * ldo, _mm512_shuffle_i32x4(v1, v3, 0xDD));
  }
}
#pragma GCC diagnostic pop

}  // namespace qkv::kernels
#endif
