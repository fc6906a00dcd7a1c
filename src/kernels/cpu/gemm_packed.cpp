// Pre-packed f32 linear layers for skinny products (incremental decoding: a few dozen rows per
// call against the same weights for every step). See kernels/gemm.h, PackedLinear.
//
// A BLAS call re-packs the weight on every call; for a (32 x 256) x (256 x 8000) product that
// packing costs about as much as the multiply (perf: sgemm_incopy 27% of greedy decoding). Here
// W^T is packed once into panels of 32 output columns, (K, 32) each, zero-padded, and an
// AVX-512 micro-kernel computes 8 x 32 tiles of the output in 16 registers: per k one 32-wide
// panel row, 8 broadcasts, 16 FMAs. Panels are split among threads (disjoint output columns,
// so results do not depend on the thread count: each element is one k-ordered dot product).
//
// The rows layout (PackLayout::rows) keeps no copy: the product reads the weights' own (N, K)
// rows. At batch 1 a decoding step is memory-bound (GPT-2 124M reads 500 MB of weights per
// token), so what matters is that every weight byte is read once, in long contiguous streams, by
// both threads at once: threads own disjoint ranges of 8-row blocks (a block is 8 * K contiguous
// floats) and every x row is multiplied with a block while it is in L1. At batch 1 a thread
// reads its range as two streams, its halves a row of each at a time, with a software prefetch
// ahead (see rows_product).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "qkv/kernels/gemm.h"
#include "qkv/kernels/int8.h"
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

// ---------------------------------------------------------------- rows layout

constexpr int64_t kBlock = 8;  // weight rows per block (outputs per tile, at most)

// Where global row n of a rows pack lives: the stacked weights (N_i, K), in order.
struct RowSource {
  const float* const* base;  // segment s starts at base[s], its global rows at start[s]
  const int64_t* start;      // nseg + 1 entries, start[nseg] = N
  int nseg;
  int64_t K;
  const float* row(int64_t n) const {
    int s = 0;
    while (n >= start[s + 1]) ++s;
    return base[s] + (n - start[s]) * K;
  }
};

#if defined(__AVX512F__)
// The sum of v's 16 lanes by a fixed tree: lane l + lane l+8, then + 4, + 2, + 1 (what GCC's
// _mm512_reduce_add_ps does, written with in-register shuffles; the masked forms with every lane
// selected, because GCC 12 warns about the unmasked ones' undefined pass-through operand).
inline float lane_sum(__m512 v) {
  constexpr __mmask16 all = 0xFFFF;
  v = _mm512_add_ps(v, _mm512_mask_shuffle_f32x4(v, all, v, v, 0x4E));  // 256-bit halves swapped
  v = _mm512_add_ps(v, _mm512_mask_shuffle_f32x4(v, all, v, v, 0xB1));  // 128-bit quarters swapped in pairs
  v = _mm512_add_ps(v, _mm512_mask_permute_ps(v, all, v, 0x4E));        // 64-bit pairs swapped
  v = _mm512_add_ps(v, _mm512_mask_permute_ps(v, all, v, 0xB1));        // neighbours swapped
  return _mm512_cvtss_f32(v);
}

// out[m * ldo + r] = bias[r] + dot(x[m * ldx ..], w[r][..]) for MR rows of x and NR weight rows.
// Lane l of acc[m][r] sums the products at k = l, l + 16, ... in k order (the tail masked); the
// 16 lanes are then added by lane_sum (a fixed tree). So an output depends only on
// its x row, its weight row and K. Stream (batch 1, where a thread's weight rows are read one
// after another as one contiguous run): each 64-byte line is requested kStreamAhead floats before
// it is used. For 8-row blocks the next block is not prefetched in software: into L1 (T0) it made
// the rows 1.17-1.20x slower than the panels (Intel Xeon); into L2 (T1) it was level with none
// there and 8-10% slower than none on AMD EPYC Zen 5 (bench_matmul gpt2stream, BENCHMARKS.md).
constexpr int64_t kStreamAhead = 2048;  // 8 KB: the best of 1, 2 and 4K floats (Zen 5)
// A hint for the line kStreamAhead floats past p (the address may lie past the weight's end: never a fault).
inline void prefetch_ahead(const float* p) {
  _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(p) + kStreamAhead * 4), _MM_HINT_T0);
}
template <int MR, int NR, bool Stream = false>
void rows_tile(const float* x, int64_t ldx, const float* const* w, int64_t K, const float* bias, float* out,
               int64_t ldo) {
  __m512 acc[MR][NR];
  for (int m = 0; m < MR; ++m)
    for (int r = 0; r < NR; ++r) acc[m][r] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    __m512 xv[MR];
    for (int m = 0; m < MR; ++m) xv[m] = _mm512_loadu_ps(x + m * ldx + k);
    if constexpr (Stream)
      for (int r = 0; r < NR; ++r) prefetch_ahead(w[r] + k);
    for (int r = 0; r < NR; ++r) {
      const __m512 wv = _mm512_loadu_ps(w[r] + k);
      for (int m = 0; m < MR; ++m) acc[m][r] = _mm512_fmadd_ps(xv[m], wv, acc[m][r]);
    }
  }
  if (k < K) {  // the last K % 16 columns: masked loads read zeros past K
    const __mmask16 tail = __mmask16((1u << (K - k)) - 1);
    __m512 xv[MR];
    for (int m = 0; m < MR; ++m) xv[m] = _mm512_maskz_loadu_ps(tail, x + m * ldx + k);
    for (int r = 0; r < NR; ++r) {
      const __m512 wv = _mm512_maskz_loadu_ps(tail, w[r] + k);
      for (int m = 0; m < MR; ++m) acc[m][r] = _mm512_fmadd_ps(xv[m], wv, acc[m][r]);
    }
  }
  for (int m = 0; m < MR; ++m)
    for (int r = 0; r < NR; ++r) out[m * ldo + r] = lane_sum(acc[m][r]) + (bias ? bias[r] : 0.f);
}

// Two weight rows far apart (the two halves of a thread's range) against one x row, each read as
// its own prefetched stream: out_a / out_b get exactly what rows_tile<1, 1> computes for each row.
void row_pair_stream(const float* x, const float* wa, const float* wb, int64_t K, const float* bias_a,
                     const float* bias_b, float* out_a, float* out_b) {
  __m512 acc_a = _mm512_setzero_ps(), acc_b = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    prefetch_ahead(wa + k);
    prefetch_ahead(wb + k);
    const __m512 xv = _mm512_loadu_ps(x + k);
    acc_a = _mm512_fmadd_ps(xv, _mm512_loadu_ps(wa + k), acc_a);
    acc_b = _mm512_fmadd_ps(xv, _mm512_loadu_ps(wb + k), acc_b);
  }
  if (k < K) {
    const __mmask16 tail = __mmask16((1u << (K - k)) - 1);
    const __m512 xv = _mm512_maskz_loadu_ps(tail, x + k);
    acc_a = _mm512_fmadd_ps(xv, _mm512_maskz_loadu_ps(tail, wa + k), acc_a);
    acc_b = _mm512_fmadd_ps(xv, _mm512_maskz_loadu_ps(tail, wb + k), acc_b);
  }
  *out_a = lane_sum(acc_a) + (bias_a ? *bias_a : 0.f);
  *out_b = lane_sum(acc_b) + (bias_b ? *bias_b : 0.f);
}
#else
template <int MR, int NR, bool Stream = false>
void rows_tile(const float* x, int64_t ldx, const float* const* w, int64_t K, const float* bias, float* out,
               int64_t ldo) {
  // The same order of additions as the AVX-512 version: 16 k-ordered lane sums, then lane_sum's
  // tree (lane l + lane l+8, then + 4, + 2, + 1).
  for (int m = 0; m < MR; ++m)
    for (int r = 0; r < NR; ++r) {
      float lane[16] = {};
      for (int64_t k = 0; k < K; ++k) lane[k % 16] = std::fma(x[m * ldx + k], w[r][k], lane[k % 16]);
      for (int half = 8; half >= 1; half /= 2)
        for (int l = 0; l < half; ++l) lane[l] += lane[l + half];
      out[m * ldo + r] = lane[0] + (bias ? bias[r] : 0.f);
    }
}
// Two rows, each as rows_tile<1, 1> computes it (the AVX-512 version's bits).
void row_pair_stream(const float* x, const float* wa, const float* wb, int64_t K, const float* bias_a,
                     const float* bias_b, float* out_a, float* out_b) {
  rows_tile<1, 1>(x, 0, &wa, K, bias_a, out_a, 0);
  rows_tile<1, 1>(x, 0, &wb, K, bias_b, out_b, 0);
}
#endif

// One block of nrows <= kBlock weight rows (pointers w) against all M rows of x: the block is
// read from memory once and from L1 by every later group of x rows. Up to 2 x rows take the
// block 8 rows wide (16 accumulators), 3-4 x rows take it as two halves of 4 (16 accumulators).
void rows_block(int64_t M, const float* x, int64_t ldx, const float* const* w, int64_t nrows, int64_t K,
                const float* bias, float* out, int64_t ldo) {
  for (int64_t m0 = 0; m0 < M; m0 += 4) {
    const int64_t mr = std::min<int64_t>(4, M - m0);
    const float* xm = x + m0 * ldx;
    float* om = out + m0 * ldo;
    if (nrows == kBlock) {
      switch (mr) {
        case 1: rows_tile<1, 8>(xm, ldx, w, K, bias, om, ldo); break;
        case 2: rows_tile<2, 8>(xm, ldx, w, K, bias, om, ldo); break;
        case 3:
          rows_tile<3, 4>(xm, ldx, w, K, bias, om, ldo);
          rows_tile<3, 4>(xm, ldx, w + 4, K, bias ? bias + 4 : nullptr, om + 4, ldo);
          break;
        default:
          rows_tile<4, 4>(xm, ldx, w, K, bias, om, ldo);
          rows_tile<4, 4>(xm, ldx, w + 4, K, bias ? bias + 4 : nullptr, om + 4, ldo);
      }
    } else {  // the last, partial block: one weight row at a time
      for (int64_t r = 0; r < nrows; ++r) {
        const float* const* wr = w + r;
        const float* br = bias ? bias + r : nullptr;
        switch (mr) {
          case 1: rows_tile<1, 1>(xm, ldx, wr, K, br, om + r, ldo); break;
          case 2: rows_tile<2, 1>(xm, ldx, wr, K, br, om + r, ldo); break;
          case 3: rows_tile<3, 1>(xm, ldx, wr, K, br, om + r, ldo); break;
          default: rows_tile<4, 1>(xm, ldx, wr, K, br, om + r, ldo);
        }
      }
    }
  }
}

// out (M, N) = x (M, K) @ W^T + bias with W's rows read in place (RowSource). Blocks of 8 rows
// are split among threads in contiguous ranges (schedule static): each thread streams its own
// part of every weight, and each output is computed by one thread in a fixed order. At batch 1
// rows are taken one at a time (rows_tile<1, 1>, the same order of additions as the 8-row tiles)
// rather than as eight interleaved streams: GPT-2 124M's products streamed from DRAM at 73-87 GB/s
// against 38 for 8-row tiles in a standalone loop of the two (AMD EPYC Zen 5). A thread (on the
// pool, or alone when the product is too small for it) reads its range as two streams, its two
// halves a row of each at a time (row_pair_stream), each prefetched ahead: one core keeps more
// lines in flight than with one stream. GPT-2's 49 products of a token: 60-61 -> 67-68 GB/s in a loop where the machine
// was fast (/tmp/scratch/streams.cpp of 2026-11-28), level when other tenants held it to 45.
void rows_product(int64_t M, const float* x, int64_t ldx, const RowSource& src, int64_t N, const float* bias,
                  float* out, int64_t min_macs) {
  const int64_t K = src.K, nb = (N + kBlock - 1) / kBlock;
  if (M == 1) {
    // Rows [lo, hi) as two streams, its halves a row of each at a time, and for an odd count the
    // last row alone.
    const auto rows_as_two_streams = [&](int64_t lo, int64_t hi) {
      const int64_t half = (hi - lo) / 2, mid = lo + half;
      const auto b = [&](int64_t n) { return bias ? bias + n : nullptr; };
      for (int64_t j = 0; j < half; ++j)
        row_pair_stream(x, src.row(lo + j), src.row(mid + j), K, b(lo + j), b(mid + j), out + lo + j, out + mid + j);
      if (mid + half < hi) {
        const float* w = src.row(hi - 1);
        rows_tile<1, 1, true>(x, ldx, &w, K, b(hi - 1), out + hi - 1, N);
      }
    };
    if (N * K < min_macs || nb < 2) return rows_as_two_streams(0, N);
#pragma omp parallel
    {  // each thread a contiguous share of the 8-row blocks
      const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
      rows_as_two_streams(std::min(N, nb * t / nt * kBlock), std::min(N, nb * (t + 1) / nt * kBlock));
    }
    return;
  }
  parallel_for_if(M * N * K >= min_macs && nb > 1, nb, [&](int64_t b) {
    const int64_t n0 = b * kBlock, nrows = std::min(kBlock, N - n0);
    const float* w[kBlock];
    for (int64_t r = 0; r < nrows; ++r) w[r] = src.row(n0 + r);
    rows_block(M, x, ldx, w, nrows, K, bias ? bias + n0 : nullptr, out + n0, N);
  });
}

}  // namespace

const char* pack_layout_name(PackLayout l) { return l == PackLayout::rows ? "rows" : "panels"; }

PackedLinear pack_linear_rows(const std::vector<Tensor>& weights, const Tensor& bias) {
  QKV_CHECK(!weights.empty(), "pack_linear_rows", "needs at least one weight");
  PackedLinear p;
  p.layout = PackLayout::rows;
  p.K = weights[0].defined() && weights[0].ndim() == 2 ? weights[0].size(1) : -1;
  for (const Tensor& w : weights) {
    QKV_CHECK(w.defined() && w.ndim() == 2 && w.size(1) == p.K && w.dtype() == DType::f32 && w.is_contiguous(),
              "pack_linear_rows", "every weight must be (N_i, ", p.K, ") f32 and contiguous, got ",
              w.defined() ? w.str() : std::string("undefined"));
    p.N += w.size(0);
    p.rows.push_back(w);  // the tensor itself (requires_grad too): read in place, never copied
  }
  if (weights.size() == 1) p.weight = weights[0];
  if (bias.defined()) {
    QKV_CHECK(bias.ndim() == 1 && bias.size(0) == p.N && bias.dtype() == DType::f32, "pack_linear_rows",
              "bias must be (", p.N, ") f32, got ", bias.str());
    p.bias = bias;
    p.dense_bias = bias.detach().contiguous();
  }
  return p;
}

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
  if (precision == MatmulPrecision::int8 && int8_pays(p.N, p.K)) {  // quantized once per output channel
    Tensor wc = w.detach().contiguous();
    p.precision = precision;
    p.int8 = pack_int8_weight(wc.data<float>(), p.N, p.K, p.K);
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
    const int64_t ldx = M == 1 ? K : x.strides()[0];
    const float* bias = p.dense_bias.defined() ? p.dense_bias.data<float>() : nullptr;
    if (M >= bf16_fma_min_rows && p.weight.defined() && bf16_products() == Bf16Products::fp32_fma) {
      // A batch's worth of rows: compute-bound, where this CPU's fp32 FMA beats its bf16 kernel.
      // The unpacked bf16 product against the original weight (bf16_products() runs it as fp32_fma).
      const MatmulPrecisionScope bf16(MatmulPrecision::bf16);
      return linear(x, p.weight, p.dense_bias, out);
    }
    gemm_bf16_packed(M, x.data<float>(), ldx, *p.bf16, bias, out.data<float>(), N);
    return;
  }
  if (p.int8 && x.dtype() == DType::f32 && x.strides()[1] == 1) {
    gemm_int8_packed(M, x.data<float>(), M == 1 ? K : x.strides()[0], *p.int8,
                     p.dense_bias.defined() ? p.dense_bias.data<float>() : nullptr, out.data<float>(), N);
    return;
  }
  // Multiply-adds below which one thread is cheaper than the pool. With spinning idle threads a
  // region costs a few microseconds, and the pool pays from 2^16: at batch 1 a product is a
  // stream over its weight (GPT cfg1's 256 x 768 .. 1024 x 256 weights, 65K-262K multiply-adds,
  // are 0.25-1 MB each) that two cores read faster than one. At 2^20 those ran on one thread and
  // cfg1 generated at 0.31-0.39 ms/token; at 2^16, 0.22-0.24 (AMD EPYC Zen 5, bench_gpt_generate;
  // translation decoding and GPT-2 124M unchanged). With sleeping threads (a wake-up is 100 us or
  // more on a VM) only the 4M+ products take the pool. Results are the same either way: each
  // output is one thread's fixed-order dot product.
  const int64_t min_macs = idle_threads_spin() ? (int64_t(1) << 16) : (int64_t(1) << 22);
  if (p.layout == PackLayout::rows) {
    QKV_CHECK(x.dtype() == DType::f32 && x.strides()[1] == 1 && x.size(1) == K && out.is_contiguous() &&
                  out.size(0) == M && out.size(1) == N,
              "packed_linear", "a rows pack takes x (M, ", K, ") f32 with unit-stride rows and out (M, ", N,
              ") contiguous, got x ", x.str(), ", out ", out.str());
    std::vector<const float*> base;
    std::vector<int64_t> start{0};
    for (const Tensor& w : p.rows) {
      base.push_back(w.data<float>());
      start.push_back(start.back() + w.size(0));
    }
    const RowSource src{base.data(), start.data(), int(base.size()), K};
    rows_product(M, x.data<float>(), M == 1 ? K : x.strides()[0], src, N,
                 p.dense_bias.defined() ? p.dense_bias.data<float>() : nullptr, out.data<float>(), min_macs);
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
