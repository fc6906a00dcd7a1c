// tests/common/ref.h - PyTorch reference files (tools/refs/*.py) and comparison helpers.
//
// Tolerances per dtype (|actual - expected| <= atol + rtol * |expected|, elementwise):
//   f32: rtol 1e-5, atol 1e-6 (scaled by the op where a reduction over K terms adds error; the
//        test states the factor and why);  f64: rtol 1e-10, atol 1e-12.
#pragma once
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "qkv/io/format/safetensors.h"
#include "qkv/tensor/tensor.h"

namespace qkv::testing {

struct Tol {
  double rtol, atol;
};
constexpr Tol kF32{1e-5, 1e-6};
constexpr Tol kF64{1e-10, 1e-12};

// Directory of generated references: $QKV_REF_DIR, else the build tree's refs/.
std::string ref_dir();

class RefFile {
 public:
  explicit RefFile(const std::string& stem);  // loads <ref_dir>/<stem>.safetensors or throws
  std::vector<std::string> cases() const;     // in name order; throws if there are none
  nlohmann::json params(const std::string& c) const;
  bool has(const std::string& c, const std::string& name) const;
  Tensor get(const std::string& c, const std::string& name) const;  // throws if missing
  const safetensors::Contents& contents() const { return contents_; }

 private:
  std::string path_;
  safetensors::Contents contents_;
};

// The directory of a case's checkpoint: its "dir" parameter, under ref_dir().
std::string case_dir(const RefFile& ref, const std::string& c);

// f32 for a result that sums terms of the size of the reference's largest values (a model's
// logits, a parameter's gradient): rtol 1e-5 and the absolute floor 1e-6 times that largest
// magnitude (at least 1). When such terms cancel to a small result, its rounding error stays
// relative to the terms (a logit of 0.028 among logits up to ~3 differs by 1.4e-6 between -O1
// and -O3 builds: the order of summation).
Tol scaled_tol(const Tensor& ref);

// Adds a gtest failure (with the worst element, its index and the values) if not close.
::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, Tol tol);
#define EXPECT_CLOSE(actual, expected, tol) EXPECT_TRUE(::qkv::testing::all_close((actual), (expected), (tol)))

// Bitwise equality of two tensors' contents.
bool bit_equal(const Tensor& a, const Tensor& b);

// Random tensor from a seeded qkv Generator (for tests that need no reference).
Tensor randn(const Shape& shape, uint64_t seed, DType dtype = DType::f32);
// n values of randn(Shape{n}, seed), each times scale, for raw-pointer kernel tests.
std::vector<float> randn_values(int64_t n, uint64_t seed, float scale = 1.f);

// oneDNN's ISA under ONEDNN_MAX_CPU_ISA=AVX512_CORE: "avx512_core" on a CPU with AVX-512, else the
// CPU's own ISA (a cap above what the CPU has changes nothing; "avx2" on AMD Zen 3).
std::string onednn_isa_capped_at_avx512_core();

}  // namespace qkv::testing
