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
// At precision bf16 on a CPU whose bf16 products run as fp32_fma (bf16.h: one whose bf16
// instructions do not outrun its fp32 FMA), the panels hold bf16 values and the same micro-kernel
// widens each panel row in registers (a shift and a mask) before its FMAs, on x rounded to bf16.
//
// The rows layout (PackLayout::rows) keeps no copy in fp32: the product (gemm_rows.cpp) reads
// the weights' own (N, K) rows; in bf16 it reads one copy of them converted to bf16, row-major.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "avx2_lanes.h"
#include "gemm_rows.h"
#include "qkv/kernels/bf16.h"
#include "qkv/kernels/gemm.h"
#include "qkv/kernels/int8.h"
#include "qkv/kernels/parallel.h"
#include "qkv/tensor/held_int8.h"
#include "qkv/util/buffer.h"
#include "unroll.h"

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

namespace qkv::kernels {
namespace {

constexpr int64_t kPanel = 32;  // output columns per panel
constexpr int64_t kRows = 8;    // output rows per tile

// A bf16 panel stores row k of its 32 columns as 16 dwords, dword c holding column c in its low half
// and column c + 16 in its high half: widening to f32 (bf16 bits << 16) is then one shift for
// columns 0-15 and one mask for 16-31. panel_value reads column j of such a row (the scalar
// tile's; AVX-512 builds do not call it, and clang warns about unused functions).
[[maybe_unused]] inline float panel_value(const float* row, int64_t j) { return row[j]; }
[[maybe_unused]] inline float panel_value(const uint16_t* row, int64_t j) {
  return from_bf16(row[j < 16 ? 2 * j : 2 * (j - 16) + 1]);
}

#if defined(__AVX512F__)
// Row k of a panel as two f32 vectors, columns 0-15 and 16-31 (64-byte aligned).
inline void panel_row(const float* row, __m512& w0, __m512& w1) {
  w0 = _mm512_load_ps(row);
  w1 = _mm512_load_ps(row + 16);
}
inline void panel_row(const uint16_t* row, __m512& w0, __m512& w1) {
  // The zero-masked forms with every lane selected: GCC 12 warns about the unmasked ones'
  // undefined pass-through operand.
  constexpr __mmask16 all = 0xFFFF;
  const __m512i v = _mm512_load_si512(row);
  w0 = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(all, v, 16));
  w1 = _mm512_castsi512_ps(_mm512_maskz_and_epi32(all, v, _mm512_set1_epi32(int(0xFFFF0000u))));
}

// c (MR, ncols) = x (MR, K) @ panel (K, 32) [+ bias], ncols <= 32; W is float (f32 panels) or
// uint16_t (bf16 panels, widened in registers: the same FMAs in the same order, so a bf16 panel's
// result equals the f32 panel of its widened values bit for bit). `prefetch`, if not null, is
// the next panel: its row k is requested into L2 as row k of this one is used, so that the weights
// (a decoder's 20 MB live in L3, not L2) arrive before the next panel's first pass needs them.
template <int MR, typename W>
void tile(const float* x, int64_t ldx, const W* panel, int64_t K, const float* bias, float* c, int64_t ldc,
          int64_t ncols, const W* prefetch) {
  __m512 acc[MR][2];
  const __m512 b0 = bias ? _mm512_loadu_ps(bias) : _mm512_setzero_ps();
  const __m512 b1 = bias ? _mm512_loadu_ps(bias + 16) : _mm512_setzero_ps();
  QKV_UNROLL
  for (int m = 0; m < MR; ++m) {
    acc[m][0] = b0;
    acc[m][1] = b1;
  }
  for (int64_t k = 0; k < K; ++k) {
    if (prefetch) {
      _mm_prefetch(reinterpret_cast<const char*>(prefetch + k * kPanel), _MM_HINT_T1);
      if constexpr (sizeof(W) == 4)  // an f32 panel row is two cache lines, a bf16 one is one
        _mm_prefetch(reinterpret_cast<const char*>(prefetch + k * kPanel + 16), _MM_HINT_T1);
    }
    __m512 w0, w1;
    panel_row(panel + k * kPanel, w0, w1);
    QKV_UNROLL
    for (int m = 0; m < MR; ++m) {
      const __m512 a = _mm512_set1_ps(x[m * ldx + k]);
      acc[m][0] = _mm512_fmadd_ps(a, w0, acc[m][0]);
      acc[m][1] = _mm512_fmadd_ps(a, w1, acc[m][1]);
    }
  }
  if (ncols == kPanel) {
    QKV_UNROLL
    for (int m = 0; m < MR; ++m) {
      _mm512_storeu_ps(c + m * ldc, acc[m][0]);
      _mm512_storeu_ps(c + m * ldc + 16, acc[m][1]);
    }
  } else {
    const __mmask16 k0 = ncols >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << ncols) - 1);
    const __mmask16 k1 = ncols <= 16 ? __mmask16(0) : __mmask16((1u << (ncols - 16)) - 1);
    QKV_UNROLL
    for (int m = 0; m < MR; ++m) {
      _mm512_mask_storeu_ps(c + m * ldc, k0, acc[m][0]);
      _mm512_mask_storeu_ps(c + m * ldc + 16, k1, acc[m][1]);
    }
  }
}
#elif defined(__AVX2__) && defined(__FMA__)
// AVX2 (AMD Zen 3, older Xeons): 16 ymm registers hold a 6 x 16 tile (12 accumulators, one half
// panel row, a broadcast), so a tile runs as passes over half panels (columns 0-15, 16-31) and
// groups of up to 6 rows. Every element is still bias + its k-ordered FMAs: the AVX-512 build's bits.
inline void half_row(const float* row, int half, __m256& w0, __m256& w1) {
  w0 = _mm256_load_ps(row + 16 * half);
  w1 = _mm256_load_ps(row + 16 * half + 8);
}
inline void half_row(const uint16_t* row, int half, __m256& w0, __m256& w1) {  // the layout above panel_value
  const __m256i v0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(row));
  const __m256i v1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(row) + 1);
  if (half == 0) {
    w0 = _mm256_castsi256_ps(_mm256_slli_epi32(v0, 16));
    w1 = _mm256_castsi256_ps(_mm256_slli_epi32(v1, 16));
  } else {
    const __m256i high = _mm256_set1_epi32(int(0xFFFF0000u));
    w0 = _mm256_castsi256_ps(_mm256_and_si256(v0, high));
    w1 = _mm256_castsi256_ps(_mm256_and_si256(v1, high));
  }
}

// c (G, the half's columns) for G <= 6 rows of x and one half panel; `prefetch` as in tile.
template <int G, typename W>
void tile_half(const float* x, int64_t ldx, const W* panel, int64_t K, const float* bias, float* c, int64_t ldc,
               int64_t ncols, int half, const W* prefetch) {
  __m256 acc[G][2];
  const __m256 bias0 = bias ? _mm256_loadu_ps(bias + 16 * half) : _mm256_setzero_ps();  // padded to 32
  const __m256 bias1 = bias ? _mm256_loadu_ps(bias + 16 * half + 8) : _mm256_setzero_ps();
  QKV_UNROLL
  for (int m = 0; m < G; ++m) {
    acc[m][0] = bias0;
    acc[m][1] = bias1;
  }
  for (int64_t k = 0; k < K; ++k) {
    if (prefetch) {
      _mm_prefetch(reinterpret_cast<const char*>(prefetch + k * kPanel), _MM_HINT_T1);
      if constexpr (sizeof(W) == 4)
        _mm_prefetch(reinterpret_cast<const char*>(prefetch + k * kPanel + 16), _MM_HINT_T1);
    }
    __m256 w0, w1;
    half_row(panel + k * kPanel, half, w0, w1);
    QKV_UNROLL
    for (int m = 0; m < G; ++m) {
      const __m256 a = _mm256_broadcast_ss(x + m * ldx + k);
      acc[m][0] = _mm256_fmadd_ps(a, w0, acc[m][0]);
      acc[m][1] = _mm256_fmadd_ps(a, w1, acc[m][1]);
    }
  }
  const int64_t n = ncols - 16 * half;  // 16 or more: the whole half (store8); fewer in the last panel
  QKV_UNROLL
  for (int m = 0; m < G; ++m) {
    store8(c + m * ldc + 16 * half, n, acc[m][0]);
    store8(c + m * ldc + 16 * half + 8, n - 8, acc[m][1]);
  }
}

template <int MR, typename W>
void tile(const float* x, int64_t ldx, const W* panel, int64_t K, const float* bias, float* c, int64_t ldc,
          int64_t ncols, const W* prefetch) {
  // 7 and 8 rows (kRows) as 4 + 3 and 4 + 4, not 6 + 1 and 6 + 2: a pass over 2 rows has 4
  // accumulators, fewer than FMA latency x throughput (5 on Zen 1), and waited on its chains. On
  // Zen 1 the 32-row decoding products went from 67-71 to 71-75 GFLOP/s (bench_matmul packed).
  constexpr int G0 = MR <= 6 ? MR : (MR + 1) / 2, G1 = MR - G0;
  for (int half = 0; half < 2 && 16 * half < ncols; ++half) {
    tile_half<G0>(x, ldx, panel, K, bias, c, ldc, ncols, half, half == 0 ? prefetch : nullptr);
    if constexpr (G1 > 0) tile_half<G1, W>(x + G0 * ldx, ldx, panel, K, bias, c + G0 * ldc, ldc, ncols, half, nullptr);
  }
}
#else
template <int MR, typename W>
void tile(const float* x, int64_t ldx, const W* panel, int64_t K, const float* bias, float* c, int64_t ldc,
          int64_t ncols, const W*) {
  for (int m = 0; m < MR; ++m) {
    float acc[kPanel];
    for (int64_t j = 0; j < kPanel; ++j) acc[j] = bias ? bias[j] : 0.f;
    for (int64_t k = 0; k < K; ++k) {
      const float a = x[m * ldx + k];
      for (int64_t j = 0; j < kPanel; ++j) acc[j] += a * panel_value(panel + k * kPanel, j);
    }
    std::copy_n(acc, ncols, c + m * ldc);
  }
}
#endif

template <typename W>
void tile_rows(int64_t mr, const float* x, int64_t ldx, const W* panel, int64_t K, const float* bias, float* c,
               int64_t ldc, int64_t ncols, const W* prefetch) {
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

// out (M, N) = x (M, K) @ panels + bias: bias padded to whole panels (or null). Panels are split
// among threads (disjoint output columns), from min_macs multiply-adds. (Widening a bf16 panel once
// into a per-thread f32 copy for all its row tiles was slower at 32 rows: 1.1-1.35x the time.)
template <typename W>
void panels_product(int64_t M, const float* xp, int64_t ldx, const W* panels, int64_t N, int64_t K,
                    const float* bias, float* op, int64_t min_macs) {
  const int64_t np = (N + kPanel - 1) / kPanel;
#pragma omp parallel for schedule(static) if (M * N * K >= min_macs && np > 1)
  for (int64_t j = 0; j < np; ++j) {
    const int64_t n0 = j * kPanel, ncols = std::min(kPanel, N - n0);
    const W* panel = panels + j * K * kPanel;
    const float* b = bias ? bias + n0 : nullptr;
    const W* next = j + 1 < np ? panel + K * kPanel : nullptr;
    for (int64_t m0 = 0; m0 < M; m0 += kRows)  // the first row tile prefetches the next panel
      tile_rows(std::min(kRows, M - m0), xp + m0 * ldx, ldx, panel, K, b, op + m0 * N + n0, N, ncols,
                m0 == 0 ? next : nullptr);
  }
}

}  // namespace

const char* pack_layout_name(PackLayout l) { return l == PackLayout::rows ? "rows" : "panels"; }

namespace {

// The (N, K) bf16 bits of weights held in bf16, stacked on N: their own storage when they lie one
// after another in it (one weight; the query, key and value that nn::MultiHeadAttention stores
// together), else a joined copy.
std::shared_ptr<const uint16_t> stacked_bf16_bits(const std::vector<Tensor>& weights, int64_t N, int64_t K) {
  bool adjacent = true;
  for (size_t i = 1; i < weights.size(); ++i)
    adjacent = adjacent && weights[i].storage() == weights[0].storage() &&
               weights[i].offset() == weights[i - 1].offset() + weights[i - 1].numel();
  if (adjacent)  // an alias that keeps the storage alive
    return std::shared_ptr<const uint16_t>(weights[0].storage(), static_cast<const uint16_t*>(weights[0].raw_data()));
  const size_t bytes = (size_t(std::max<int64_t>(N * K, 1)) * sizeof(uint16_t) + 63) / 64 * 64;
  uint16_t* dst = static_cast<uint16_t*>(buffer_alloc(bytes, BufferLife::kept));
  QKV_CHECK(dst != nullptr, "pack_linear_rows", "out of memory for a bf16 copy of ", bytes, " bytes");
  std::shared_ptr<const uint16_t> out(dst, BufferDeleter{bytes, BufferLife::kept});
  for (const Tensor& w : weights) {
    std::memcpy(dst, w.raw_data(), size_t(w.numel()) * sizeof(uint16_t));
    dst += w.numel();
  }
  return out;
}

// The int8 rows form of weights held in int8, stacked on N: their own storage when they lie one
// after another in it (one weight; a held query, key and value), else a joined copy.
std::shared_ptr<const Int8Weight> stacked_int8_rows(const std::vector<Tensor>& weights, int64_t N, int64_t K) {
  bool adjacent = true;
  for (size_t i = 1; i < weights.size(); ++i)
    adjacent = adjacent && weights[i].storage() == weights[0].storage() &&
               weights[i].offset() == weights[i - 1].offset() + weights[i - 1].numel();
  Tensor first = weights[0];  // the stack's first rows, in a storage holding all N of them
  if (!adjacent) {
    const std::shared_ptr<Storage> joined = held_int8_storage(N, K);
    int64_t row = 0;
    for (const Tensor& w : weights) {
      copy_held_int8(held_int8_tensor(joined, row, w.size(0)), w);
      row += w.size(0);
    }
    first = held_int8_tensor(joined, 0, N);
  }
  const HeldInt8Rows r = held_int8_rows(first, "pack_linear_rows");
  return int8_weight_over_rows(r.q, K, r.scale, r.zero_point_sum, N, K, first.storage());
}

}  // namespace

PackedLinear pack_linear_rows(const std::vector<Tensor>& weights, const Tensor& bias, MatmulPrecision precision,
                              bool held_int8_blocked) {
  QKV_CHECK(!weights.empty(), "pack_linear_rows", "needs at least one weight");
  PackedLinear p;
  p.layout = PackLayout::rows;
  p.precision = precision;
  p.K = weights[0].defined() && weights[0].ndim() == 2 ? weights[0].size(1) : -1;
  const DType dt = weights[0].defined() ? weights[0].dtype() : DType::f32;
  QKV_CHECK(dt == DType::f32 || (dt == DType::bf16 && precision == MatmulPrecision::bf16) ||
                (dt == DType::i8 && precision == MatmulPrecision::int8),
            "pack_linear_rows", "weights held in ", dt == DType::i8 ? "int8" : "bf16", " pack for ",
            dt == DType::i8 ? "int8" : "bf16", " products only, got precision ", precision_name(precision));
  for (const Tensor& w : weights) {
    QKV_CHECK(w.defined() && w.ndim() == 2 && w.size(1) == p.K && w.dtype() == dt && w.is_contiguous(),
              "pack_linear_rows", "every weight must be (N_i, ", p.K, ") ", dtype_name(dt), " and contiguous, got ",
              w.defined() ? w.str() : std::string("undefined"));
    p.N += w.size(0);
    p.rows.push_back(w);  // the tensor itself (requires_grad too): fp32 reads it in place, never copied
  }
  if (weights.size() == 1) p.weight = weights[0];
  if (dt == DType::i8) {  // every batch in int8: held weights have no f32 values to fall back to
    p.int8 = stacked_int8_rows(weights, p.N, p.K);
    if (held_int8_blocked) {  // batches on oneDNN's blocked copy, fewer rows on the held rows
      p.int8_rows = p.int8;
      p.int8 = int8_weight_blocked_from_rows(*p.int8_rows);
    }
  } else if (dt == DType::bf16) {
    p.rows_bf16 = stacked_bf16_bits(weights, p.N, p.K);
  } else if (precision == MatmulPrecision::bf16) {  // one (N, K) copy in bf16, 64-byte aligned, weights in order
    const size_t bytes = (size_t(std::max<int64_t>(p.N * p.K, 1)) * sizeof(uint16_t) + 63) / 64 * 64;
    uint16_t* dst = static_cast<uint16_t*>(buffer_alloc(bytes, BufferLife::kept));
    QKV_CHECK(dst != nullptr, "pack_linear_rows", "out of memory for a bf16 copy of ", bytes, " bytes");
    p.rows_bf16 = std::shared_ptr<const uint16_t>(dst, BufferDeleter{bytes, BufferLife::kept});
    for (const Tensor& w : weights) {
      round_to_bf16(w.data<float>(), dst, w.numel());
      dst += w.numel();
    }
    count_bf16_weight_copy();
  } else if (precision == MatmulPrecision::int8 && (int8_pays(p.N, p.K) || int8_pays_from_rows(p.N, p.K))) {
    // Quantized per output channel, as pack_linear's blocked form: the same values, so the same bits.
    p.int8_from_batch = !int8_pays(p.N, p.K);
    const Tensor joined = weights.size() == 1 ? weights[0].detach() : p.original_weight();  // contiguous
    p.int8 = pack_int8_weight_rows(joined.data<float>(), p.N, p.K, p.K);
  }
  if (bias.defined()) {
    QKV_CHECK(bias.ndim() == 1 && bias.size(0) == p.N && bias.dtype() == DType::f32, "pack_linear_rows",
              "bias must be (", p.N, ") f32, got ", bias.str());
    p.bias = bias;
    p.dense_bias = bias.detach().contiguous();
  }
  return p;
}

Tensor PackedLinear::original_weight() const {
  const std::vector<Tensor> parts = weight.defined() ? std::vector<Tensor>{weight} : rows;
  const auto held = [](const Tensor& t) { return t.dtype() == DType::bf16 || t.dtype() == DType::i8; };
  if (parts.empty() || (weight.defined() && !held(weight))) return weight;
  // Joined, and widened to f32 if held in bf16 (Tensor::copy_from widens exactly) or int8 (q * scale).
  Tensor joined = Tensor::empty({N, K}, held(parts[0]) ? DType::f32 : parts[0].dtype());
  int64_t row = 0;
  for (const Tensor& r : parts) {
    joined.as_strided({r.size(0), K}, {K, 1}, row * K)
        .copy_from(r.dtype() == DType::i8 ? dequantize_held_int8(r) : r.detach());
    row += r.size(0);
  }
  return joined;
}

namespace {

// Panel j = rows n0..n0+31 of w (N, K), transposed to (K, 32), zero past N: f32 panels of f32
// values, or bf16 panels (W uint16_t, paired as panel_value reads them) of f32 values rounded to
// bf16 (S float) or of bf16 bits (S uint16_t). Decoding packs every weight (19 MB for the 3+3-layer
// base model) on one thread between its parallel regions otherwise; panels are independent.
template <typename S, typename W>
void fill_panels(const S* src, int64_t N, int64_t K, W* dst) {
  const int64_t np = (N + kPanel - 1) / kPanel;
#pragma omp parallel for schedule(static) if (N * K >= (int64_t(1) << 18) && np > 1)
  for (int64_t j = 0; j < np; ++j) {
    const int64_t n0 = j * kPanel, ncols = std::min(kPanel, N - n0);
    W* panel = dst + j * K * kPanel;
    for (int64_t k = 0; k < K; ++k) {
      W* out = panel + k * kPanel;
      for (int64_t c = 0; c < kPanel; ++c) {
        const S v = c < ncols ? src[(n0 + c) * K + k] : S(0);
        if constexpr (std::is_same_v<W, float>)
          out[c] = v;
        else if constexpr (std::is_same_v<S, float>)
          out[c < 16 ? 2 * c : 2 * (c - 16) + 1] = to_bf16(v);
        else
          out[c < 16 ? 2 * c : 2 * (c - 16) + 1] = v;
      }
    }
  }
}

// The bf16 panels of w (N, K), f32 values or bf16 bits, in a buffer of their own (64-byte aligned).
template <typename S>
std::shared_ptr<const uint16_t> bf16_panels_of(const S* w, int64_t N, int64_t K) {
  const size_t bytes = size_t((N + kPanel - 1) / kPanel * K * kPanel) * sizeof(uint16_t);
  uint16_t* dst = static_cast<uint16_t*>(buffer_alloc(std::max<size_t>(bytes, 64), BufferLife::kept));
  QKV_CHECK(dst != nullptr, "pack_linear", "out of memory for bf16 panels of ", bytes, " bytes");
  std::shared_ptr<const uint16_t> out(dst, BufferDeleter{std::max<size_t>(bytes, 64), BufferLife::kept});
  fill_panels(w, N, K, dst);
  count_bf16_weight_copy();
  return out;
}

// p.dense_bias (contiguous) and, for a panels form (f32 or bf16) when N is not a multiple of 32,
// p.padded_bias (zero-padded to whole panels, which the tiles read 32 wide), from bias if defined.
// Call it once the pack's forms are set.
void set_bias(PackedLinear& p, const Tensor& bias) {
  if (!bias.defined()) return;
  p.dense_bias = bias.detach().contiguous();
  if ((p.panels.defined() || p.bf16_panels) && p.N % kPanel != 0) {
    p.padded_bias = Tensor::zeros({(p.N + kPanel - 1) / kPanel * kPanel});
    std::memcpy(p.padded_bias.data<float>(), p.dense_bias.data<float>(), size_t(p.N) * sizeof(float));
  }
}

// The bias a panels product reads: padded to whole panels, or dense when N is a multiple of 32.
const float* panel_bias(const PackedLinear& p) {
  if (p.padded_bias.defined()) return p.padded_bias.data<float>();
  return p.dense_bias.defined() ? p.dense_bias.data<float>() : nullptr;
}

// out (M, N) = x @ W^T + bias for a batch of rows (bf16_fma_min_rows or more) of a bf16 pack: what
// linear() runs under bf16, which under fp32_fma is the fp32 GEMM on x rounded to bf16 values and
// the weight's bf16 values, bias rows first. For a weight held in bf16 this does the same without
// its detours: the held bits widened (exact) once into a per-thread buffer, where linear() would
// widen them into a new tensor (PackedLinear::original_weight) and gemm_bf16 round that copy again
// (10% of bf16 BERT embeddings on a Xeon without AMX); the same operands, the same call, the same bits.
void bf16_batch_product(const Tensor& x, const PackedLinear& p, Tensor& out) {
  const Tensor& first = p.weight.defined() ? p.weight : p.rows.front();
  if (first.dtype() != DType::bf16 || bf16_products() != Bf16Products::fp32_fma) {
    const MatmulPrecisionScope bf16(MatmulPrecision::bf16);
    return linear(x, p.original_weight(), p.dense_bias, out);
  }
  const int64_t M = x.size(0), N = p.N, K = p.K;
  thread_local std::vector<float> wide, rounded;
  wide.resize(size_t(N * K));
  int64_t row = 0;
  for (const Tensor& part : p.weight.defined() ? std::vector<Tensor>{p.weight} : p.rows) {
    const Tensor c = part.contiguous();
    const uint16_t* bits = static_cast<const uint16_t*>(c.raw_data());
    float* dst = wide.data() + row * K;
    const int64_t n = c.numel();
#pragma omp parallel for simd schedule(static) if (parallel : n >= (int64_t(1) << 18) && !omp_in_parallel())
    for (int64_t i = 0; i < n; ++i) dst[i] = from_bf16(bits[i]);
    row += part.size(0);
  }
  rounded.resize(size_t(M * K));
  round_to_bf16_values(x.data<float>(), M, K, x.strides()[0], rounded.data());
  float* o = out.data<float>();
  const bool bias = p.dense_bias.defined();
  if (bias) {  // as gemm's front-end does before a product with beta = 1
    const float* b = p.dense_bias.data<float>();
#pragma omp parallel for schedule(static) if (M * N >= (int64_t(1) << 18))
    for (int64_t i = 0; i < M; ++i) std::memcpy(o + i * N, b, size_t(N) * sizeof(float));
  }
  const MatmulPrecisionScope fp32(MatmulPrecision::fp32);
  gemm(false, true, M, N, K, 1.f, rounded.data(), K, wide.data(), K, bias ? 1.f : 0.f, o, N);
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
    const DType bdt = w.dtype() == DType::bf16 ? DType::f32 : w.dtype();  // a bf16 weight's bias stays f32
    QKV_CHECK(bias.ndim() == 1 && bias.size(0) == p.N && bias.dtype() == bdt, "pack_linear", "bias must be (", p.N,
              ") ", dtype_name(bdt), ", got ", bias.str());
    p.bias = bias;
  }
  if (w.dtype() == DType::bf16)
    QKV_CHECK(precision == MatmulPrecision::bf16, "pack_linear",
              "a weight held in bf16 packs for bf16 products only, got precision ", precision_name(precision));
  const bool to_bf16_once = w.dtype() == DType::f32 && precision == MatmulPrecision::bf16 && p.N > 0 && p.K > 0;
  if (w.dtype() == DType::bf16 || to_bf16_once) {
    // Converted once to bf16 (a weight held in bf16: its bits): qkv's bf16 panels where this
    // process's bf16 products run as fp32_fma (bf16.h), else oneDNN's layout.
    const Tensor wc = w.detach().contiguous();
    const bool held = w.dtype() == DType::bf16;
    const uint16_t* bits = held ? static_cast<const uint16_t*>(wc.raw_data()) : nullptr;
    p.precision = precision;
    if (bf16_products() == Bf16Products::fp32_fma)
      p.bf16_panels = held ? bf16_panels_of(bits, p.N, p.K) : bf16_panels_of(wc.data<float>(), p.N, p.K);
    else
      p.bf16 = held ? pack_bf16_weight_bits(bits, p.N, p.K) : pack_bf16_weight(wc.data<float>(), p.N, p.K, p.K);
    set_bias(p, bias);
    return p;
  }
  if (w.dtype() != DType::f32) return p;  // f64 goes through BLAS with the original weight
  const bool int8_always = int8_pays(p.N, p.K), int8_by_rows = int8_pays_from_rows(p.N, p.K);
  if (precision == MatmulPrecision::int8 && (int8_always || int8_by_rows)) {  // quantized once per output channel
    Tensor wc = w.detach().contiguous();
    p.precision = precision;
    p.int8 = pack_int8_weight(wc.data<float>(), p.N, p.K, p.K);
    p.int8_from_batch = !int8_always;
    if (int8_always) {
      set_bias(p, bias);
      return p;
    }
    // Paying only from int8_small_weight_min_rows() rows: the fp32 panels too, for fewer rows.
  }
  p.panels = Tensor::empty({(p.N + kPanel - 1) / kPanel, p.K, kPanel});  // 64-byte aligned (the allocator's)
  const Tensor wc = w.contiguous();
  fill_panels(wc.data<float>(), p.N, p.K, p.panels.data<float>());
  set_bias(p, bias);
  return p;
}

void packed_linear(const Tensor& x, const PackedLinear& p, Tensor& out) {
  const int64_t M = x.size(0), K = p.K, N = p.N;
  // Multiply-adds below which one thread is cheaper than the pool. With spinning idle threads a
  // region costs a few microseconds, and the pool pays from 2^16: at batch 1 a product is a
  // stream over its weight (GPT cfg1's 256 x 768 .. 1024 x 256 weights, 65K-262K multiply-adds,
  // are 0.25-1 MB each) that two cores read faster than one. At 2^20 those ran on one thread and
  // cfg1 generated at 0.31-0.39 ms/token; at 2^16, 0.22-0.24 (AMD EPYC Zen 5, bench_gpt_generate;
  // translation decoding and GPT-2 124M unchanged). With sleeping threads (a wake-up is 100 us or
  // more on a VM) only the 4M+ products take the pool. Results are the same either way: each
  // output is one thread's fixed-order dot product.
  const int64_t min_macs = idle_threads_spin() ? (int64_t(1) << 16) : (int64_t(1) << 22);
  const float* dense_bias = p.dense_bias.defined() ? p.dense_bias.data<float>() : nullptr;
  // A stack that pays only from a batch (int8_pays_from_rows) takes int8 from
  // int8_small_weight_min_rows() rows; below, its fp32 form (panels, or the rows read in place).
  const int64_t int8_min_rows = int8_small_weight_min_rows();
  const bool int8_at_this_batch = !p.int8_from_batch || (int8_min_rows > 0 && M >= int8_min_rows);
  if (p.layout == PackLayout::rows) {
    QKV_CHECK(x.dtype() == DType::f32 && x.strides()[1] == 1 && x.size(1) == K && out.is_contiguous() &&
                  out.size(0) == M && out.size(1) == N,
              "packed_linear", "a rows pack takes x (M, ", K, ") f32 with unit-stride rows and out (M, ", N,
              ") contiguous, got x ", x.str(), ", out ", out.str());
    const int64_t ldx = M == 1 ? K : x.strides()[0];
    if (p.int8 && int8_at_this_batch) {  // s8 rows: qkv's kernel below int8_rows_max_batch() rows
      const bool rows = p.int8_rows && M < int8_rows_max_batch();
      gemm_int8_packed(M, x.data<float>(), ldx, rows ? *p.int8_rows : *p.int8, dense_bias, out.data<float>(), N);
      return;
    }
    if (p.rows_bf16) {  // bf16 products: x rounded to bf16 (per-thread buffer), the weights' bf16 copy
      const int64_t start[2] = {0, N};
      thread_local std::vector<uint16_t> rounded;
      rounded.resize(size_t(M * K));
      round_to_bf16(x.data<float>(), M, K, ldx, rounded.data());
      const uint16_t* base = p.rows_bf16.get();
      rows_product(M, rounded.data(), K, RowSource<uint16_t>{&base, start, 1, K}, N, dense_bias, out.data<float>(),
                   min_macs);
      return;
    }
    std::vector<const float*> base;
    std::vector<int64_t> starts{0};
    for (const Tensor& w : p.rows) {
      base.push_back(w.data<float>());
      starts.push_back(starts.back() + w.size(0));
    }
    rows_product(M, x.data<float>(), ldx, RowSource<float>{base.data(), starts.data(), int(base.size()), K}, N,
                 dense_bias, out.data<float>(), min_macs);
    return;
  }
  if (p.bf16_panels && x.dtype() == DType::f32 && x.strides()[1] == 1) {
    if (M >= bf16_fma_min_rows) return bf16_batch_product(x, p, out);  // the fp32 GEMM on the rounded operands
    thread_local std::vector<float> rounded;  // x's values rounded to bf16, then widened FMAs
    rounded.resize(size_t(M * K));
    round_to_bf16_values(x.data<float>(), M, K, M == 1 ? K : x.strides()[0], rounded.data());
    panels_product(M, rounded.data(), K, p.bf16_panels.get(), N, K, panel_bias(p), out.data<float>(), min_macs);
    return;
  }
  if (p.bf16 && x.dtype() == DType::f32 && x.strides()[1] == 1) {
    const int64_t ldx = M == 1 ? K : x.strides()[0];
    if (M >= bf16_fma_min_rows && p.defined() && bf16_products() == Bf16Products::fp32_fma) {
      // A batch's worth of rows: compute-bound, where this CPU's fp32 FMA beats its bf16 kernel.
      // The unpacked bf16 product against the original weight, as fp32_fma.
      return bf16_batch_product(x, p, out);
    }
    gemm_bf16_packed(M, x.data<float>(), ldx, *p.bf16, dense_bias, out.data<float>(), N);
    return;
  }
  if (p.int8 && x.dtype() == DType::f32 && x.strides()[1] == 1 && int8_at_this_batch) {
    gemm_int8_packed(M, x.data<float>(), M == 1 ? K : x.strides()[0], *p.int8, dense_bias, out.data<float>(), N);
    return;
  }
  if (!p.panels.defined() || x.dtype() != DType::f32 || x.strides()[1] != 1) {
    linear(x, p.original_weight(), p.bias, out);
    return;
  }
  panels_product(M, x.data<float>(), x.strides()[0], p.panels.data<float>(), N, K, panel_bias(p), out.data<float>(),
                 min_macs);
}

}  // namespace qkv::kernels
