// The rows layout's product (kernels/gemm.h, PackLayout::rows): out = x @ W^T + bias with W's
// (N, K) rows read where they are, f32 (the weights in place) or bf16 bits (a copy converted once,
// half the bytes to stream). Internal to src/kernels/cpu (gemm_packed.cpp calls it).
#pragma once
#include <cstdint>

namespace qkv::kernels {

// Where global row n of a rows pack lives: weights (N_i, K) stacked in order, elements W (float,
// or uint16_t holding bf16 bits).
template <typename W>
struct RowSource {
  const W* const* base;  // segment s starts at base[s], its global rows at start[s]
  const int64_t* start;  // nseg + 1 entries, start[nseg] = N
  int nseg;
  int64_t K;
  const W* row(int64_t n) const {
    int s = 0;
    while (n >= start[s + 1]) ++s;
    return base[s] + (n - start[s]) * K;
  }
};

// out (M, N) = x (M, K) @ W^T + bias (N, or null); x rows with stride ldx, out contiguous; x and
// W both f32, or both bf16 bits. Each output is one dot product in an order fixed by K alone
// (f32: 16 k-ordered lane sums of fused multiply-adds; bf16: 16 lanes of vdpbf16ps pairs; then a
// fixed tree), so its bits depend neither on M, nor on the other rows of x, nor on the thread
// count. The pool is used from min_macs multiply-adds.
void rows_product(int64_t M, const float* x, int64_t ldx, const RowSource<float>& src, int64_t N, const float* bias,
                  float* out, int64_t min_macs);
void rows_product(int64_t M, const uint16_t* x, int64_t ldx, const RowSource<uint16_t>& src, int64_t N,
                  const float* bias, float* out, int64_t min_macs);

// Counts a bf16 copy of qkv's own (a rows pack's rows, a panels pack's bf16 panels) among the
// weights converted to bf16 (bf16_weights_packed, whose counter lives in gemm_dnnl.cpp).
void count_bf16_weight_copy();

}  // namespace qkv::kernels
