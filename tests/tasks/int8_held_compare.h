// Shared by the tests of weights held in int8 (nn::Module::hold_weights_in_int8): exactly
// quantizable weights, and comparisons of held weights and of a held model with its f32 twin.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "qkv/autograd/node.h"
#include "qkv/kernels/int8.h"
#include "qkv/nn/module.h"
#include "qkv/tensor/held_int8.h"
#include "qkv/tensor/rng.h"
#include "precision_compare.h"
#include "ref.h"

namespace qkv::testing::int8_held {

// Every 2-D parameter of m set to exactly quantizable values: row n is q * 2^-(6 + n % 3) with q
// drawn from [-127, 127] and one entry +-127, so the rule's scale is 2^-(6 + n % 3) and q * scale
// is the value itself.
inline void make_exactly_quantizable(nn::Module& m, uint64_t seed) {
  Generator g(seed);
  for (auto& [name, t] : m.named_parameters()) {
    if (t.ndim() != 2) continue;
    const int64_t N = t.size(0), K = t.size(1);
    Tensor v = Tensor::empty({N, K});
    for (int64_t n = 0; n < N; ++n) {
      const float s = std::ldexp(1.0f, -int(6 + n % 3));
      for (int64_t k = 0; k < K; ++k) v.data<float>()[n * K + k] = float(int64_t(g.randint(255)) - 127) * s;
      v.data<float>()[n * K + int64_t(g.randint(uint64_t(K)))] = (g.randint(2) ? 127.f : -127.f) * s;
    }
    NoGradGuard ng;
    t.copy_from(v);
  }
}

// The q values, scales and zero-point sums of two held weights are equal.
inline void expect_same_held(const Tensor& a, const Tensor& b, const std::string& name) {
  const HeldInt8Rows x = held_int8_rows(a, name.c_str()), y = held_int8_rows(b, name.c_str());
  ASSERT_EQ(x.rows, y.rows) << name;
  ASSERT_EQ(x.K, y.K) << name;
  EXPECT_EQ(std::memcmp(x.q, y.q, size_t(x.rows * x.K)), 0) << name;
  EXPECT_EQ(std::memcmp(x.scale, y.scale, size_t(x.rows) * 4), 0) << name;
  EXPECT_EQ(std::memcmp(x.zero_point_sum, y.zero_point_sum, size_t(x.rows) * 4), 0) << name;
}

// Every 2-D parameter of `held` is held in int8 and stands for the twin's f32 value exactly;
// everything else is the twin's, bit for bit.
inline void expect_held_twin(const nn::Module& held, const nn::Module& twin) {
  const auto t = twin.state_dict();
  for (auto& [name, w] : held.state_dict()) {
    ASSERT_TRUE(t.count(name)) << name;
    if (w.ndim() != 2) {
      EXPECT_TRUE(bit_equal(w, t.at(name))) << name;
      continue;
    }
    ASSERT_EQ(w.dtype(), DType::i8) << name;
    EXPECT_FALSE(w.requires_grad()) << name;
    EXPECT_TRUE(bit_equal(dequantize_held_int8(w), t.at(name))) << name << ": not exactly representable";
  }
}

template <typename F, typename G>
void expect_same_bits_in_int8(const char* what, F held, G twin) {
  NoGradGuard ng;
  kernels::MatmulPrecisionScope int8(kernels::MatmulPrecision::int8);
  const Tensor a = held(), b = twin();
  EXPECT_TRUE(bit_equal(a, b)) << what << ": max-relative difference " << max_rel(b, a);
}

}  // namespace qkv::testing::int8_held
