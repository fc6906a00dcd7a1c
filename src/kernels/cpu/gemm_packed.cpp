// Pre-packed f32 linear layers for skinny products (incremental decoding: a few dozen rows per
// call against the same weights for every step). See kernels/gemm.h, PackedLinear.
//
// A BLAS call re-packs the weight on every call; for a (32 x 256) x (256 x 8000) product that
// packing costs about as much as the multiply (perf: sgemm_incopy 27% of greedy decoding). Here
// W^T is packed once into panels of 32 output columns, (K, 32) each, zero-padded, and an
// AVX-512 micro-kernel computes 8 x 32 tiles of the output in 16 registers: per k one 32-wide
// panel row, 8 broadcasts, 16 FMAs. Panels are split among threads (disjoint output columns,
// so results do not depend on the thread count: each element is one k-ordered dot product).
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "qkv/kernels/gemm.h"
#include "qkv/kernels/parallel.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace qkv::kernels {
namespace {

constexpr int64_t kPanel = 32;  // output columns per panel
constexpr int64_t kRows = 8;    // output rows per tile

#if defined(__AVX512F__)
// c (MR, ncols) = x (MR, K) @ panel (K, 32) [+ bias], ncols <= 32. `prefetch`, if not null, is
// the next panel: its row k is requested into L2 as row k of this one is used, so that the weights
// (a decoder's 20 MB live in L3, not L2) arrive before the next panel's first pass needs them.
template <int MR>
void tile(const float* x, int64_t ldx, const float* panel, int64_t K, const float* bias, float* c, int64_t ldc,
          int64_t ncols, const float* prefetch) {
  __m512 acc[MR][2];
  const __m512 b0 = bias ? _mm512_loadu_ps(bias) : _mm512_setzero_ps();
  const __m512 b1 = bias ? _mm512_loadu_ps(bias + 16) : _mm512_setzero_ps();
  for (int m = 0; m < MR; ++m) {
    acc[m][0] = b0;
    acc[m][1] = b1;
  }
  for (int64_t k = 0; k < K; ++k) {
    if (prefetch) {
      _mm_prefetch(reinterpret_cast<const char*>(prefetch + k * kPanel), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(prefetch + k * kPanel + 16), _MM_HINT_T1);
    }
    const __m512 w0 = _mm512_load_ps(panel + k * kPanel), w1 = _mm512_load_ps(panel + k * kPanel + 16);
    for (int m = 0; m < MR; ++m) {
      const __m512 a = _mm512_set1_ps(x[m * ldx + k]);
      acc[m][0] = _mm512_fmadd_ps(a, w0, acc[m][0]);
      acc[m][1] = _mm512_fmadd_ps(a, w1, acc[m][1]);
    }
  }
  if (ncols == kPanel) {
    for (int m = 0; m < MR; ++m) {
      _mm512_storeu_ps(c + m * ldc, acc[m][0]);
      _mm512_storeu_ps(c + m * ldc + 16, acc[m][1]);
    }
  } else {
    const __mmask16 k0 = ncols >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << ncols) - 1);
    const __mmask16 k1 = ncols <= 16 ? __mmask16(0) : __mmask16((1u << (ncols - 16)) - 1);
    for (int m = 0; m < MR; ++m) {
      _mm512_mask_storeu_ps(c + m * ldc, k0, acc[m][0]);
      _mm512_mask_storeu_ps(c + m * ldc + 16, k1, acc[m][1]);
    }
  }
}
#else
template <int MR>
void tile(const float* x, int64_t ldx, const float* panel, int64_t K, const float* bias, float* c, int64_t ldc,
          int64_t ncols, const float*) {
  for (int m = 0; m < MR; ++m) {
    float acc[kPanel];
    for (int64_t j = 0; j < kPanel; ++j) acc[j] = bias ? bias[j] : 0.f;
    for (int64_t k = 0; k < K; ++k) {
      const float a = x[m * ldx + k];
      for (int64_t j = 0; j < kPanel; ++j) acc[j] += a * panel[k * kPanel + j];
    }
    std::copy_n(acc, ncols, c + m * ldc);
  }
}
#endif

void tile_rows(int64_t mr, const float* x, int64_t ldx, const float* panel, int64_t K, const float* bias, float* c,
               int64_t ldc, int64_t ncols, const float* prefetch) {
  switch (mr) {
    case 8: return tile<8>(x, ldx, panel, K, bias, c, ldc, ncols, prefetch);
    case 7: return tile<7>(x, ldx, panel, K, bias, c, ldc, ncols, prefetch);
    case 6: return tile<6>(x, ldx, panel, K, bias, c, ldc, ncols, prefetch);
    case 5: return tile<5>(x, ldx, panel, K, bias, c, ldc, ncols, prefetch);
    case 4: return tile<4>(x, ldx, panel, K, bias, c, ldc, ncols, prefetch);
    case 3: return tile<3>(x, ldx, panel, K, bias, c, ldc, ncols, prefetch);
    case 2: return tile<2>(x, ldx, panel, K, bias, c, ldc, ncols, prefetch);
    default: return tile<1>(x, ldx, panel, K, bias, c, ldc, ncols, prefetch);
  }
}

}  // namespace

PackedLinear pack_linear(const Tensor& w, const Tensor& bias, MatmulPrecision precision) {
  QKV_CHECK(w.defined() && w.ndim() == 2, "pack_linear", "weight must be (N, K), got ",
            w.defined() ? w.str() : std::string("undefined"));
  PackedLinear p;
  p.weight = w;  // kept as is (requires_grad too): the recorded / f64 fallback uses it
  p.N = w.size(0);
  p.K = w.size(1);
  if (bias.defined()) {
    QKV_CHECK(bias.ndim() == 1 && bias.size(0) == p.N && bias.dtype() == w.dtype(), "pack_linear", "bias must be (",
              p.N, ") ", dtype_name(w.dtype()), ", got ", bias.str());
    p.bias = bias;
  }
  if (w.dtype() != DType::f32) return p;  // f64 goes through BLAS with the original weight
  if (precision == MatmulPrecision::bf16 && p.N > 0 && p.K > 0) {  // converted once to bf16 in oneDNN's layout
    Tensor wc = w.detach().contiguous();
    p.precision = precision;
    p.bf16 = pack_bf16_weight(wc.data<float>(), p.N, p.K, p.K);
    if (p.bias.defined()) p.dense_bias = bias.detach().contiguous();
    return p;
  }
  const int64_t np = (p.N + kPanel - 1) / kPanel;
  p.panels = Tensor::empty({np, p.K, kPanel});  // 64-byte aligned (the allocator's alignment)
  Tensor wc = w.contiguous();
  const float* src = wc.data<float>();
  float* dst = p.panels.data<float>();
  // Panel j = rows n0..n0+31 of w, transposed to (K, 32), zero past N. Decoding packs every
  // weight (19 MB for the 3+3-layer base model) on one thread between its parallel regions
  // otherwise; panels are independent.
#pragma omp parallel for schedule(static) if (p.N * p.K >= (int64_t(1) << 18) && np > 1)
  for (int64_t j = 0; j < np; ++j) {
    const int64_t n0 = j * kPanel, ncols = std::min(kPanel, p.N - n0);
    float* panel = dst + j * p.K * kPanel;
    for (int64_t k = 0; k < p.K; ++k) {
      float* out = panel + k * kPanel;
      for (int64_t c = 0; c < ncols; ++c) out[c] = src[(n0 + c) * p.K + k];
      for (int64_t c = ncols; c < kPanel; ++c) out[c] = 0.0f;
    }
  }
  if (p.bias.defined()) {  // contiguous; zero-padded to whole panels (read 32 wide)
    p.dense_bias = bias.detach().contiguous();
    if (p.N % kPanel != 0) {
      p.padded_bias = Tensor::zeros({np * kPanel});
      std::memcpy(p.padded_bias.data<float>(), p.dense_bias.data<float>(), size_t(p.N) * sizeof(float));
    }
  }
  return p;
}

void packed_linear(const Tensor& x, const PackedLinear& p, Tensor& out) {
  const int64_t M = x.size(0), K = p.K, N = p.N;
  if (p.bf16 && x.dtype() == DType::f32 && x.strides()[1] == 1) {
    gemm_bf16_packed(M, x.data<float>(), M == 1 ? K : x.strides()[0], *p.bf16,
                     p.dense_bias.defined() ? p.dense_bias.data<float>() : nullptr, out.data<float>(), N);
    return;
  }
  if (!p.panels.defined() || x.dtype() != DType::f32 || x.strides()[1] != 1) {
    linear(x, p.weight, p.bias, out);
    return;
  }
  const float* xp = x.data<float>();
  const int64_t ldx = x.strides()[0];
  float* op = out.data<float>();
  const float* panels = p.panels.data<float>();
  const float* bias = p.padded_bias.defined() ? p.padded_bias.data<float>()
                                              : (p.dense_bias.defined() ? p.dense_bias.data<float>() : nullptr);
  const int64_t np = (N + kPanel - 1) / kPanel;
  // Multiply-adds below which one thread is cheaper than the pool: with spinning idle threads the
  // decoder's 32x256x256 projections (2M) gain from two threads (greedy bench -7% wall); with
  // sleeping ones only the 6M+ products do.
  const int64_t min_macs = idle_threads_spin() ? (int64_t(1) << 20) : (int64_t(1) << 22);
#pragma omp parallel for schedule(static) if (M * N * K >= min_macs && np > 1)
  for (int64_t j = 0; j < np; ++j) {
    const int64_t n0 = j * kPanel, ncols = std::min(kPanel, N - n0);
    const float* panel = panels + j * K * kPanel;
    const float* b = bias ? bias + n0 : nullptr;
    const float* next = j + 1 < np ? panel + K * kPanel : nullptr;
    for (int64_t m0 = 0; m0 < M; m0 += kRows)  // the first row tile prefetches the next panel
      tile_rows(std::min(kRows, M - m0), xp + m0 * ldx, ldx, panel, K, b, op + m0 * N + n0, N, ncols,
                m0 == 0 ? next : nullptr);
  }
}

}  // namespace qkv::kernels
