// tests/common/gradcheck.h - finite-difference gradient check in float64.
// Compares backward() of L = sum(f(inputs) * R) (R a fixed random projection) with central
// differences (L(x + eps) - L(x - eps)) / 2eps for every element of every f64 input.
// Tolerance: |analytic - numeric| <= atol + rtol * |numeric|, defaults atol 1e-6, rtol 1e-5
// (central differences at eps 1e-6 in f64 are accurate to ~1e-9 for smooth functions).
#pragma once
#include <functional>
#include <vector>

#include <gtest/gtest.h>

#include "qkv/tensor/tensor.h"

namespace qkv::testing {

using TensorFn = std::function<Tensor(const std::vector<Tensor>&)>;

::testing::AssertionResult gradcheck(const TensorFn& f, std::vector<Tensor> inputs, double eps = 1e-6,
                                     double atol = 1e-6, double rtol = 1e-5);
#define EXPECT_GRADCHECK(...) EXPECT_TRUE(::qkv::testing::gradcheck(__VA_ARGS__))

}  // namespace qkv::testing
