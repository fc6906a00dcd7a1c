// qkv/kernels/dropout.h - dropout's keep masks and fused passes (f32, f64).
//
// Element i is kept when u_i >= p, u_i the i-th uniform float of the Philox stream at counter
// `base` of generator `seed` (tensor/rng.h; four per block, so `base` counts blocks of 4). Masks
// are drawn in chunks of kMaskChunk elements, each chunk's pass running right after its draw while
// it is in L1; chunks split among OpenMP threads, and the result does not depend on the thread
// count. Kept elements are scaled by s = 1 / (1 - p). All tensors contiguous; keep is u8.
#pragma once
#include "qkv/tensor/tensor.h"

namespace qkv::kernels {

constexpr int64_t kMaskChunk = 4096;  // elements per mask draw (a multiple of 4: whole Philox blocks)

void dropout_keep_mask(Tensor& keep, double p, uint64_t seed, uint64_t base);
// out = keep ? x * s : 0, keep drawn.
void dropout_forward(const Tensor& x, double p, uint64_t seed, uint64_t base, Tensor& keep, Tensor& out);
// out = drawn ? relu(x) * s : 0, keep = drawn & !(x <= 0) (ReLU then dropout, one pass; keep is the
// backward's mask; relu keeps NaN and -0 as torch.relu does).
void relu_dropout_forward(const Tensor& x, double p, uint64_t seed, uint64_t base, Tensor& keep, Tensor& out);
// out = x + (keep ? y * s : 0), keep drawn.
void add_dropout_forward(const Tensor& x, const Tensor& y, double p, uint64_t seed, uint64_t base, Tensor& keep,
                         Tensor& out);
// out = keep ? x * scale : 0 (the backward of all three, with the saved mask).
void apply_keep_mask(const Tensor& x, const Tensor& keep, double scale, Tensor& out);

}  // namespace qkv::kernels
