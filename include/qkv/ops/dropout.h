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

// Fused forms for Transformer blocks; each draws exactly the mask dropout(., p, training, gen)
// would (same generator offsets), so results are bit-identical to the unfused composition while
// making one pass instead of two and saving one u8 mask instead of activations:
//   relu_dropout(x)   = dropout(relu(x))      (saves keep & !(x <= 0): a NaN passes, as in relu)
//   add_dropout(x, y) = x + dropout(y)        (x and y of one shape and dtype: the residual branch)
Tensor relu_dropout(const Tensor& x, double p, bool training, Generator& gen = default_generator());
Tensor add_dropout(const Tensor& x, const Tensor& y, double p, bool training, Generator& gen = default_generator());

// The keep mask (u8, 1 = kept) dropout would draw for `shape` at counter `base` (for tests/tools).
Tensor dropout_keep_mask(const Shape& shape, double p, uint64_t seed, uint64_t base);

}  // namespace qkv
