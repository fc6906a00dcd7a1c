// qkv/ops/dropout.h - inverted dropout with a counter-based mask (f32, f64).
#pragma once
#include "qkv/tensor/rng.h"
#include "qkv/tensor/tensor.h"

namespace qkv {

// Identity when !training or p == 0 (returns x itself). Otherwise y = x * keep / (1 - p), where
// element i (row-major) is dropped iff u_i < p, u_i = u32_to_unit_float(lane i % 4 of
// philox4x32(gen.seed(), 0, base + i / 4)) and base = gen.reserve(numel). The mask therefore
// depends only on the seed and the generator's offset, never on the thread count. The backward
// reuses the saved u8 mask. p must be in [0, 1).
Tensor dropout(const Tensor& x, double p, bool training, Generator& gen = default_generator());

// The keep mask (u8, 1 = kept) dropout would draw for `shape` at counter `base` (for tests/tools).
Tensor dropout_keep_mask(const Shape& shape, double p, uint64_t seed, uint64_t base);

}  // namespace qkv
