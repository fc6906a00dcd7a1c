// gemm_bf16_tile (kernels/bf16.h): small bf16 products on the calling thread, for the attention
// kernels' tiles (64 x 128 x 64 and the like, a few hundred thousand multiply-adds each).
//
// Both operands are rounded (to_bf16) into per-thread buffers laid out for AVX512_BF16's
// vdpbf16ps, which multiplies pairs of bf16 values along K and adds both exact products to an f32
// lane: a 32-bit word holds the pair of k = 2p and 2p + 1 (an odd K padded with a zero).
//   A: word (m, p) broadcast to all lanes, stored by rows of A or by pairs of A's rows (PackedA);
//   B: (Kp/2, Np) words, word (p, n) in lane n: 16 columns per load (Np = N rounded up to 16).
// A micro-tile of up to 8 rows x 32 columns keeps 16 f32 accumulators in registers: per pair of
// K, 2 loads of B, 8 broadcasts of A and 16 vdpbf16ps. Rounding, interleaving and the transpose a
// B^T operand needs are vector code too: at these sizes packing costs a good part of the products.
//
// On a CPU with AMX (and the kernel's permission to use its tile registers) the products run on
// AMX tiles instead, from the same B layout with K padded to whole tiles (see products_amx).
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "qkv/kernels/bf16.h"
#include "qkv/util/error.h"
#include "transpose16.h"
#include "unroll.h"

namespace qkv::kernels {
namespace {

#if defined(__AVX512BF16__)
constexpr int64_t kMR = 8;  // rows per micro-tile
constexpr int64_t kNV = 2;  // 16-lane column vectors per micro-tile (8 x 2 measured fastest of 4x4 .. 16x1)

__mmask16 lanes(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1u); }

// Rounding is AVX512_BF16's vcvtne2ps2bf16: to nearest even like to_bf16, except that it makes f32
// subnormals zero and keeps NaNs' sign and payload. Neither changes a product: vdpbf16ps reads
// bf16 subnormals as zero, and a NaN operand gives NaN.

// words[0, P) = the bf16 pairs of x[0, K) (P = (K + 1) / 2, an odd K padded with zero), then
// zero words up to `pad` (>= P).
void round_row(const float* x, int64_t K, uint32_t* words, int64_t pad) {
  uint16_t* h = reinterpret_cast<uint16_t*>(words);
  for (int64_t k = 0; k < K; k += 32) {
    const __m512 lo = _mm512_maskz_loadu_ps(lanes(K - k), x + k);
    const __m512 hi = _mm512_maskz_loadu_ps(lanes(K - k - 16), x + k + 16);
    const __mmask32 m = K - k >= 32 ? ~__mmask32(0) : (__mmask32(1) << (K - k)) - 1u;
    _mm512_mask_storeu_epi16(h + k, m, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
  }
  if (K % 2) h[K] = 0;
  std::fill(words + (K + 1) / 2, words + pad, 0u);
}

// words[n] = the pair (r0[n], r1[n]) for n < N (r1 null: zero), zero up to `pad`.
void interleave_rows(const float* r0, const float* r1, int64_t N, uint32_t* words, int64_t pad) {
  // cvtne2ps gives (r0[n .. n + 16), r1[n .. n + 16)) as 32 bf16; this order pairs them up.
  const __m512i order = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                                         21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  for (int64_t n = 0; n < N; n += 16) {
    const __mmask16 m = lanes(N - n);
    const __m512 lo = _mm512_maskz_loadu_ps(m, r0 + n);
    const __m512 hi = r1 ? _mm512_maskz_loadu_ps(m, r1 + n) : _mm512_setzero_ps();
    const __m512i both = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
    _mm512_mask_storeu_epi32(words + n, m, _mm512_permutexvar_epi16(order, both));
  }
  std::fill(words + N, words + pad, 0u);
}


// A's pairs for the micro-kernel, word (m, p) at A2[m * rs + p * ps]:
//   !ta: rows of A rounded in place, (M, P) with rs = P, ps = 1;
//   ta:  op(A)[m][k] = A[k][m]: rows 2p and 2p + 1 of A interleaved, (P, M) with rs = 1, ps = M.
struct PackedA {
  const uint32_t* w;
  int64_t rs, ps;
};
PackedA pack_a(bool ta, int64_t M, int64_t K, const float* A, int64_t lda, std::vector<uint32_t>& buf) {
  const int64_t P = (K + 1) / 2;
  buf.resize(size_t(M * P));
  if (!ta) {
    for (int64_t m = 0; m < M; ++m) round_row(A + m * lda, K, buf.data() + m * P, P);
    return {buf.data(), P, 1};
  }
  for (int64_t p = 0; p < P; ++p)
    interleave_rows(A + 2 * p * lda, 2 * p + 1 < K ? A + (2 * p + 1) * lda : nullptr, M, buf.data() + p * M, M);
  return {buf.data(), 1, M};
}

// B's pairs, (rows, Np) words (rows >= P): word (p, n) = op(B)[2p][n], op(B)[2p + 1][n]; zero for
// n >= N and for p >= P.
//   !tb: rows 2p and 2p + 1 of B interleaved;
//   tb:  op(B)[k][n] = B[n][k]: B's rows rounded into (Np, Pp) words, then transposed.
void pack_b(bool tb, int64_t K, int64_t N, const float* B, int64_t ldb, uint32_t* B2, int64_t Np, int64_t rows,
            std::vector<uint32_t>& tmp) {
  const int64_t P = (K + 1) / 2;
  if (!tb) {
    for (int64_t p = 0; p < P; ++p)
      interleave_rows(B + 2 * p * ldb, 2 * p + 1 < K ? B + (2 * p + 1) * ldb : nullptr, N, B2 + p * Np, Np);
    std::fill(B2 + P * Np, B2 + rows * Np, 0u);
    return;
  }
  const int64_t Pp = (rows + 15) / 16 * 16;
  tmp.resize(size_t(Np * Pp));
  for (int64_t n = 0; n < N; ++n) round_row(B + n * ldb, K, tmp.data() + n * Pp, Pp);
  std::fill(tmp.begin() + N * Pp, tmp.end(), 0u);  // the padding columns of op(B)
  for (int64_t p0 = 0; p0 < Pp; p0 += 16)
    for (int64_t n0 = 0; n0 < Np; n0 += 16) {
      if (p0 + 16 <= rows) {
        transpose16(tmp.data() + n0 * Pp + p0, Pp, B2 + p0 * Np + n0, Np);
      } else {  // the last rows of B2: through a block, as B2 has only `rows` rows
        alignas(64) uint32_t blk[16 * 16];
        transpose16(tmp.data() + n0 * Pp + p0, Pp, blk, 16);
        for (int64_t p = p0; p < rows; ++p)
          std::copy(blk + (p - p0) * 16, blk + (p - p0) * 16 + 16, B2 + p * Np + n0);
      }
    }
}

// C[r][c] = alpha * sum_p A2(r, p) . B2[p][c] + beta * C[r][c] for r < MR rows and NV vectors of
// 16 columns, the last one masked by `tail`.
template <int MR, int NV>
void micro_tile(int64_t P, PackedA a2, const uint32_t* B2, int64_t Np, float alpha, float beta, float* C, int64_t ldc,
                __mmask16 tail) {
  __m512 acc[MR][NV];
  QKV_UNROLL
  for (int r = 0; r < MR; ++r)
    QKV_UNROLL
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t p = 0; p < P; ++p) {
    __m512bh b[NV];
    QKV_UNROLL
    for (int v = 0; v < NV; ++v) b[v] = (__m512bh)_mm512_loadu_si512(B2 + p * Np + 16 * v);
    const uint32_t* ap = a2.w + p * a2.ps;
    QKV_UNROLL
    for (int r = 0; r < MR; ++r) {
      const __m512bh a = (__m512bh)_mm512_set1_epi32(int(ap[r * a2.rs]));
      QKV_UNROLL
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], a, b[v]);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha);
  QKV_UNROLL
  for (int r = 0; r < MR; ++r)
    QKV_UNROLL
    for (int v = 0; v < NV; ++v) {
      const __mmask16 k = v == NV - 1 ? tail : __mmask16(0xFFFF);
      float* c = C + r * ldc + 16 * v;
      __m512 x = _mm512_mul_ps(va, acc[r][v]);
      if (beta != 0.f) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(k, c));
      _mm512_mask_storeu_ps(c, k, x);
    }
}

// One micro-tile of `vecs` (1 .. NV) column vectors, by its own instantiation.
template <int MR, int NV = kNV>
void col_tail(int64_t vecs, int64_t P, PackedA a2, const uint32_t* B2, int64_t Np, float alpha, float beta, float* C,
              int64_t ldc, __mmask16 tail) {
  if constexpr (NV > 0) {
    if (vecs == NV) return micro_tile<MR, NV>(P, a2, B2, Np, alpha, beta, C, ldc, tail);
    return col_tail<MR, NV - 1>(vecs, P, a2, B2, Np, alpha, beta, C, ldc, tail);
  }
}

template <int MR>
void row_block(int64_t N, int64_t P, PackedA a2, const uint32_t* B2, int64_t Np, float alpha, float beta, float* C,
               int64_t ldc) {
  for (int64_t j = 0; j < N; j += 16 * kNV) {
    const int64_t cols = std::min<int64_t>(16 * kNV, N - j), vecs = (cols + 15) / 16;
    const __mmask16 tail = lanes(cols - 16 * (vecs - 1));
    col_tail<MR>(vecs, P, a2, B2 + j, Np, alpha, beta, C + j, ldc, tail);
  }
}

// Rows [0, M) in blocks of kMR, the last block of M % kMR rows by its own instantiation.
template <int MR = kMR>
void row_tail(int64_t rows, int64_t N, int64_t P, PackedA a2, const uint32_t* B2, int64_t Np, float alpha, float beta,
              float* C, int64_t ldc) {
  if constexpr (MR > 0) {
    if (rows == MR) return row_block<MR>(N, P, a2, B2, Np, alpha, beta, C, ldc);
    return row_tail<MR - 1>(rows, N, P, a2, B2, Np, alpha, beta, C, ldc);
  }
}

void products_native(int64_t M, int64_t N, int64_t P, PackedA a2, const uint32_t* B2, int64_t Np, float alpha,
                     float beta, float* C, int64_t ldc) {
  auto rows_from = [&](int64_t r) { return PackedA{a2.w + r * a2.rs, a2.rs, a2.ps}; };
  for (int64_t i = 0; i < M; i += kMR)
    row_tail(std::min<int64_t>(kMR, M - i), N, P, rows_from(i), B2, Np, alpha, beta, C + i * ldc, ldc);
}

#if defined(__AMX_TILE__) && defined(__AMX_BF16__)
// AMX. A tile register holds up to 16 rows of 64 bytes; tdpbf16ps multiplies a 16 x 16-word tile
// of A (16 rows, 32 values of K as 16 pairs) by a 16 x 16-word tile of B (16 pairs of K, 16
// columns: pack_b's layout) into a 16 x 16 f32 tile of C, summing pairs of exact products into f32
// as vdpbf16ps does (bf16 subnormals read as zero). tmm0-3 hold a 32 x 32 block of C (2 x 2 tiles),
// tmm4-5 two row slices of A, tmm6-7 two column slices of B; every tile is configured 16 x 64 bytes,
// so A and B are zero-padded to whole tiles (Mp rows, Pp pairs, Np columns) and C goes through an
// f32 buffer, alpha and beta applied on the way out.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Linux lends a process the 8 KiB of tile state only on request (arch_prctl ARCH_REQ_XCOMP_PERM for
// XTILEDATA); oneDNN asks too, and the permission is per process, so asking again is harmless.
bool amx_permitted() {
  static const bool ok = [] {
    constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return ok;
}

// The tile intrinsics are asm without a memory clobber: this keeps the packing stores before the
// tile loads, and the reads of the C buffer after the tile stores.
inline void memory_barrier() { asm volatile("" ::: "memory"); }

// C tiles (RT x CT of 16 x 16) at cb (row stride ldcb floats) = A2 rows (stride Pp words) x B2
// columns (stride Np words), over Pp pairs of K.
template <int RT, int CT>
void amx_block(const uint32_t* A2, const uint32_t* B2, int64_t Pp, int64_t Np, float* cb, int64_t ldcb) {
  const int64_t sa = Pp * 4, sb = Np * 4, sc = ldcb * 4;  // strides in bytes
  _tile_zero(0);
  if constexpr (CT > 1) _tile_zero(1);
  if constexpr (RT > 1) _tile_zero(2);
  if constexpr (RT > 1 && CT > 1) _tile_zero(3);
  for (int64_t p = 0; p < Pp; p += 16) {
    _tile_loadd(4, A2 + p, sa);
    if constexpr (RT > 1) _tile_loadd(5, A2 + 16 * Pp + p, sa);
    _tile_loadd(6, B2 + p * Np, sb);
    if constexpr (CT > 1) _tile_loadd(7, B2 + p * Np + 16, sb);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (CT > 1) _tile_dpbf16ps(1, 4, 7);
    if constexpr (RT > 1) _tile_dpbf16ps(2, 5, 6);
    if constexpr (RT > 1 && CT > 1) _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, cb, sc);
  if constexpr (CT > 1) _tile_stored(1, cb + 16, sc);
  if constexpr (RT > 1) _tile_stored(2, cb + 16 * ldcb, sc);
  if constexpr (RT > 1 && CT > 1) _tile_stored(3, cb + 16 * ldcb + 16, sc);
}

// A's pairs as AMX reads them, (Mp, Pp) words row-major: word (m, p) = op(A)[m][2p], op(A)[m][2p + 1].
//   !ta: rows of A rounded in place;
//   ta:  rows 2p and 2p + 1 of A interleaved into (Pp, Mp) words, then transposed.
void pack_a_rows(bool ta, int64_t M, int64_t K, const float* A, int64_t lda, int64_t Mp, int64_t Pp, uint32_t* A2,
                 std::vector<uint32_t>& tmp) {
  const int64_t P = (K + 1) / 2;
  if (!ta) {
    for (int64_t m = 0; m < M; ++m) round_row(A + m * lda, K, A2 + m * Pp, Pp);
    std::fill(A2 + M * Pp, A2 + Mp * Pp, 0u);
    return;
  }
  tmp.resize(size_t(Pp * Mp));
  for (int64_t p = 0; p < P; ++p)
    interleave_rows(A + 2 * p * lda, 2 * p + 1 < K ? A + (2 * p + 1) * lda : nullptr, M, tmp.data() + p * Mp, Mp);
  std::fill(tmp.begin() + P * Mp, tmp.end(), 0u);
  for (int64_t p0 = 0; p0 < Pp; p0 += 16)
    for (int64_t m0 = 0; m0 < Mp; m0 += 16) transpose16(tmp.data() + p0 * Mp + m0, Mp, A2 + m0 * Pp + p0, Pp);
}

void products_amx(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                  const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  thread_local std::vector<uint32_t> abuf, bbuf, tmp;
  thread_local std::vector<float> cbuf;
  const int64_t Mp = (M + 15) / 16 * 16, Np = (N + 15) / 16 * 16, Pp = ((K + 1) / 2 + 15) / 16 * 16;
  abuf.resize(size_t(Mp * Pp));
  bbuf.resize(size_t(Pp * Np));
  cbuf.resize(size_t(Mp * Np));
  pack_a_rows(ta, M, K, A, lda, Mp, Pp, abuf.data(), tmp);
  pack_b(tb, K, N, B, ldb, bbuf.data(), Np, Pp, tmp);
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) cfg.rows[t] = 16, cfg.colsb[t] = 64;
  memory_barrier();
  _tile_loadconfig(&cfg);  // per call: oneDNN's kernels configure the tiles their own way in between
  for (int64_t i = 0; i < Mp; i += 32)
    for (int64_t j = 0; j < Np; j += 32) {
      const uint32_t* a = abuf.data() + i * Pp;
      const uint32_t* b = bbuf.data() + j;
      float* c = cbuf.data() + i * Np + j;
      const bool two_rows = i + 32 <= Mp, two_cols = j + 32 <= Np;
      if (two_rows && two_cols) amx_block<2, 2>(a, b, Pp, Np, c, Np);
      else if (two_rows) amx_block<2, 1>(a, b, Pp, Np, c, Np);
      else if (two_cols) amx_block<1, 2>(a, b, Pp, Np, c, Np);
      else amx_block<1, 1>(a, b, Pp, Np, c, Np);
    }
  _tile_release();  // tile state back to init: nothing for the kernel to save at a context switch
  memory_barrier();
  const __m512 va = _mm512_set1_ps(alpha);
  for (int64_t r = 0; r < M; ++r)
    for (int64_t j = 0; j < N; j += 16) {
      const __mmask16 k = lanes(N - j);
      float* c = C + r * ldc + j;
      __m512 x = _mm512_mul_ps(va, _mm512_loadu_ps(cbuf.data() + r * Np + j));
      if (beta != 0.f) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(k, c));
      _mm512_mask_storeu_ps(c, k, x);
    }
}
#endif
#endif

}  // namespace

bool bf16_tile_kernel_available(Bf16TileKernel k) {
  switch (k) {
    case Bf16TileKernel::amx:
#if defined(__AVX512BF16__) && defined(__AMX_TILE__) && defined(__AMX_BF16__)
      return dnnl_cpu_info().amx && amx_permitted();  // dnnl_cpu_info follows ONEDNN_MAX_CPU_ISA
#else
      return false;
#endif
    case Bf16TileKernel::avx512_bf16:
#if defined(__AVX512BF16__)
      return true;
#else
      return false;
#endif
    case Bf16TileKernel::fp32_fma:
      return true;
  }
  return false;
}

Bf16TileKernel bf16_tile_kernel() {
  if (bf16_products() != Bf16Products::native) return Bf16TileKernel::fp32_fma;
  static const Bf16TileKernel native = bf16_tile_kernel_available(Bf16TileKernel::amx) ? Bf16TileKernel::amx
                                       : bf16_tile_kernel_available(Bf16TileKernel::avx512_bf16)
                                           ? Bf16TileKernel::avx512_bf16
                                           : Bf16TileKernel::fp32_fma;
  return native;
}

const char* bf16_tile_kernel_name(Bf16TileKernel k) {
  switch (k) {
    case Bf16TileKernel::amx: return "AMX";
    case Bf16TileKernel::avx512_bf16: return "AVX512_BF16";
    case Bf16TileKernel::fp32_fma: return "fp32_fma";
  }
  return "?";
}

bool bf16_tile_native() { return bf16_tile_kernel() != Bf16TileKernel::fp32_fma; }

namespace {

// gemm_bf16_tile through `kernel`, which the caller knows is available.
void tile_product(Bf16TileKernel kernel, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                  const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  QKV_CHECK(beta == 0.f || beta == 1.f, "gemm_bf16_tile", "beta must be 0 or 1, got ", beta);
  QKV_CHECK(lda >= std::max<int64_t>(1, ta ? M : K) && ldb >= std::max<int64_t>(1, tb ? K : N) &&
                ldc >= std::max<int64_t>(1, N),
            "gemm_bf16_tile", "lda = ", lda, ", ldb = ", ldb, ", ldc = ", ldc, " below the stored row lengths");
  if (M == 0 || N == 0) return;
  if (K == 0 || alpha == 0.f) {  // an empty sum
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.f ? 0.f : C[i * ldc + j];
    return;
  }
#if defined(__AVX512BF16__) && defined(__AMX_TILE__) && defined(__AMX_BF16__)
  if (kernel == Bf16TileKernel::amx) return products_amx(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#endif
#if defined(__AVX512BF16__)
  if (kernel == Bf16TileKernel::avx512_bf16) {
    thread_local std::vector<uint32_t> abuf, bbuf, tmp;
    const int64_t P = (K + 1) / 2, Np = (N + 15) / 16 * 16;
    const PackedA a2 = pack_a(ta, M, K, A, lda, abuf);
    bbuf.resize(size_t(P * Np));
    pack_b(tb, K, N, B, ldb, bbuf.data(), Np, P, tmp);
    return products_native(M, N, P, a2, bbuf.data(), Np, alpha, beta, C, ldc);
  }
#endif
  // The same exact products summed in f32 by the fp32 GEMM (single-threaded inside a parallel region).
  gemm_bf16_rounded(Bf16Products::fp32_fma, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace

// bf16_tile_kernel() is always available: no check per tile.
void gemm_bf16_tile(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                    const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  tile_product(bf16_tile_kernel(), ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void gemm_bf16_tile_with(Bf16TileKernel kernel, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                         const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  QKV_CHECK(bf16_tile_kernel_available(kernel), "gemm_bf16_tile", "the ", bf16_tile_kernel_name(kernel),
            " kernel is not available on this CPU or build");
  tile_product(kernel, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace qkv::kernels
