// Parameter gradients of an attention module against PyTorch ("g.<name>" tensors of a case).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "qkv/nn/module.h"
#include "ref.h"

namespace qkv::testing {

inline bool is_key_bias(const std::string& name) {
  return name.size() >= 11 && name.compare(name.size() - 11, 11, "k_proj.bias") == 0;
}

// Compares every parameter's gradient within tol, except a key-projection bias: its gradient is
// exactly zero in exact arithmetic (a key bias adds q.b to every score of a row, and softmax
// ignores per-row constants). PyTorch's and qkv's values are both rounding noise (~6e-7, the
// sign depends on summation order), so the analytic zero is asserted instead.
inline void expect_param_grads(const nn::Module& m, const RefFile& ref, const std::string& c, Tol tol) {
  for (auto& [name, t] : m.named_parameters()) {
    SCOPED_TRACE(name);
    if (is_key_bias(name)) {
      for (double g : t.grad().to_vector<double>()) EXPECT_LE(std::abs(g), 1e-5);
      continue;
    }
    EXPECT_CLOSE(t.grad(), ref.get(c, "g." + name), tol);
  }
}

}  // namespace qkv::testing
