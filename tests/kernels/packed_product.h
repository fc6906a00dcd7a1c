// tests/kernels/packed_product.h - a product against a packed weight, and a tensor's values.
#pragma once
#include <vector>

#include "qkv/kernels/gemm.h"
#include "qkv/tensor/tensor.h"

namespace qkv::testing {

// x (M, K) times the packed weight: (M, N).
inline Tensor product(const Tensor& x, const kernels::PackedLinear& p) {
  Tensor out = Tensor::empty({x.size(0), p.N});
  kernels::packed_linear(x, p, out);
  return out;
}

inline std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

}  // namespace qkv::testing
