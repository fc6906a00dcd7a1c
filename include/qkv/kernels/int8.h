// qkv/kernels/int8.h - int8 products for inference: out = x @ W^T + bias with W quantized once and
// x quantized per call, integer products accumulated exactly in int32 by oneDNN (AVX512-VNNI or
// AMX) or by qkv's own kernel (AVX512-VNNI, or AVX2), the result scaled back to f32.
//
// The scheme (what CTranslate2 and oneDNN's int8 inference use):
//   weights, per output channel n (a row of W (N, K)), symmetric:
//     sw[n] = max_k |W[n,k]| / 127,  qw[n,k] = nearbyint(W[n,k] * (127 / max_k |W[n,k]|))  (s8, |qw| <= 127;
//     a row of zeros: scale 0, all zeros);
//   activations, per row m of x (M, K), symmetric, stored as u8 with zero point 128 (VNNI's
//   instruction multiplies u8 by s8):
//     sx[m] = max_k |x[m,k]| / 127,  qx[m,k] = nearbyint(x[m,k] * (127 / max_k |x[m,k]|)) + 128;
//   acc[m,n] = sum_k qx[m,k] qw[n,k] (int32, exact), and with c[n] = 128 sum_k qw[n,k]:
//     out[m,n] = fma(float(acc[m,n] - c[n]), sx[m] * sw[n], bias[n]).
// A row of zeros quantizes to zeros (scale 0); a row with a NaN or infinity gives NaN outputs.
// nearbyint rounds half to even (the default rounding mode).
//
// Without VNNI (plain AVX-512 or AVX2) oneDNN's int8 kernels pair products in saturating 16-bit
// sums, which is not exact for this scheme. There every weight takes the rows form and every
// product qkv's own kernel, whose AVX2 sign trick keeps its 16-bit pair sums below saturation
// (|qx - 128|, |qw| <= 127): the same exact sums, so the same bits as on a VNNI CPU. A build with
// neither refuses int8 with an error that says to use fp32. Only src/kernels/cpu/gemm_int8.cpp
// sees oneDNN.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

namespace qkv::kernels {

// True when oneDNN's effective ISA has AVX512-VNNI (avx512_core_vnni or above) or AMX: its
// blocked int8 kernels are exact.
bool int8_native();
// True when qkv's own kernel is compiled with SIMD (AVX512-VNNI or AVX2). Asks nothing of oneDNN
// (which reads ONEDNN_MAX_CPU_ISA once, at its first use).
bool int8_own_kernel_built();
// True when int8 products run here: qkv's own kernel is built, or int8_native().
bool int8_supported();
// What runs the batches: "AMX" or "AVX512-VNNI" (oneDNN's, with int8_native()), else qkv's own
// kernel's "AVX512-VNNI" or "AVX2"; nullptr without int8_supported().
const char* int8_kernel();

// A weight W (N, K) quantized once for many products (opaque: oneDNN's blocked layout for this
// CPU, or qkv's plain s8 rows).
struct Int8Weight;

// w (N, K) f32 with row stride ldw >= K, in oneDNN's blocked layout (the rows form below without
// int8_native()). Throws without int8_supported(), or when w has a NaN or an infinity (naming the row).
std::shared_ptr<const Int8Weight> pack_int8_weight(const float* w, int64_t N, int64_t K, int64_t ldw);

// The same quantization into (N, K) rows of qkv's own (the rows form): row-major, row stride K,
// in one buffer of N * K bytes.
std::shared_ptr<const Int8Weight> pack_int8_weight_rows(const float* w, int64_t N, int64_t K, int64_t ldw);
// The rows form over rows quantized elsewhere (q (N, K) with row stride ldq, values in [-127, 127]
// (checked), scale[n] = sw[n], zero_point_sum[n] = 128 sum_k q[n,k]), read in place; `keep` owns q
// and stays alive with it.
std::shared_ptr<const Int8Weight> int8_weight_over_rows(const int8_t* q, int64_t ldq, const float* scale,
                                                        const int32_t* zero_point_sum, int64_t N, int64_t K,
                                                        std::shared_ptr<const void> keep);
// oneDNN's blocked form (pack_int8_weight's) of a weight in the rows form: its rows reordered once
// into a copy, its scales and sums copied; the rows are not kept. For weights held in int8 in a
// model that multiplies batches (translation's beam search): oneDNN's blocked kernels run 10-30%
// faster there than over the plain rows (`bench_matmul int8plain`, 16 rows). Without
// int8_native(), the rows form again (over the same rows).
std::shared_ptr<const Int8Weight> int8_weight_blocked_from_rows(const Int8Weight& rows);
// The scheme's weight rule: w (N, K) (row stride ldw) -> q (row stride ldq), scale (N) and
// zero_point_sum (N). Throws naming the row of a NaN or an infinity.
void quantize_int8_rows(const float* w, int64_t N, int64_t K, int64_t ldw, int8_t* q, int64_t ldq, float* scale,
                        int32_t* zero_point_sum);

// out (M, N) with row stride ldo = x (M, K) (row stride ldx) @ W^T + bias, by the scheme above.
// The rows form: fewer than int8_rows_max_batch() rows on qkv's own kernel
// (src/kernels/cpu/gemm_int8_rows.cpp), more through oneDNN reading the rows as plain weights
// (every batch on qkv's kernel without int8_native()).
// Either way each int32 sum is exact, so the two forms give the same bits.
// bias (N) f32 or null. Products of fewer than 2^20 (spinning idle threads) / 2^22 multiply-adds
// run on one thread, as the f32 packed products do.
void gemm_int8_packed(int64_t M, const float* x, int64_t ldx, const Int8Weight& w, const float* bias, float* out,
                      int64_t ldo);

// Whether a weight (N, K) takes the int8 form under precision int8 (PackedWeights, ops/packed.h):
// when it has at least int8_min_weight_elements() values. Measured on an Intel Xeon with
// AVX512-VNNI (BENCHMARKS.md, "int8 at 2^17"; `bench_matmul int8`), with the activations quantized
// by the whole team: the translation model's (768, 256), (1024, 256) and (256, 1024) weights
// (2^17.6-2^18 values) run 1.0-2.1x faster in int8 at 1-128 rows than the fp32 panels (once 0.8x,
// W2 at 8 rows), its (256, 256) ones 0.72-0.91x slower at every batch (the f32 weight stays in cache
// and the call's fixed cost dominates). Whole decoding, 2^17 against the earlier 2^19: greedy 1.46x
// fp32 against 1.04x, beam 4 1.54x against 1.01x; GPT cfg1 generation 2.01x against 1.18x.
bool int8_pays(int64_t N, int64_t K);
int64_t int8_min_weight_elements();  // 2^17 unless set, or the QKV_INT8_MIN_WEIGHT environment value
// Sets the threshold for this process (0: every weight in int8; tests use it on small models).
// Forms already packed keep theirs.
void set_int8_min_weight_elements(int64_t n);

// A weight too small for int8_pays but of at least 2^16 values (the translation model's
// (256, 256) projections) takes both forms under int8 when int8_small_weight_min_rows() > 0: its
// fp32 panels and its int8 form, and products of at least that many rows use the int8 one. On
// AMX, `bench_matmul int8` gives a (256, 256) weight in int8 against the fp32 panels 0.6-0.7x at
// 1 row, 0.9-1.1x at 8, 0.8-1.4x at 32 (above 1 in 4 runs of 5) and 3.0-3.7x at 128 (Intel Xeon,
// 2026-11-29): 32 by default there. Without AMX (AVX512-VNNI) it measured 0.72-0.91x at every
// batch: 0 (never). The QKV_INT8_SMALL_WEIGHT_ROWS environment value overrides the default.
bool int8_pays_from_rows(int64_t N, int64_t K);  // the weight takes both forms
int64_t int8_small_weight_min_rows();
void set_int8_small_weight_min_rows(int64_t rows);  // 0: never (tests, benches); forms already packed keep theirs

// The activation rule alone: q (K) <- one row x (K); returns its scale sx.
float quantize_row_u8(const float* x, int64_t K, uint8_t* q);

// Weights quantized by pack_int8_weight so far (tests count them: quantized once, not per call).
int64_t int8_weights_packed();

// Batches below this many rows take the rows form's own kernel (4 unless set, or the
// QKV_INT8_ROWS_BATCH environment value).
int64_t int8_rows_max_batch();
void set_int8_rows_max_batch(int64_t rows);

// For tests: the quantized weight as plain (N, K) s8 rows and its per-row scales sw (N).
void int8_weight_values(const Int8Weight& w, int8_t* q, float* scales);
int64_t int8_weight_rows(const Int8Weight& w);
int64_t int8_weight_cols(const Int8Weight& w);
size_t int8_weight_bytes(const Int8Weight& w);  // the s8 weight: in oneDNN's layout (padded), or N * K
bool int8_weight_in_rows(const Int8Weight& w);  // the rows form

}  // namespace qkv::kernels
