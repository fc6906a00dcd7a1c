// Shared by the bf16 and int8 inference tests: the distance between an fp32 and a reduced-
// precision output, random token ids, and the skip where oneDNN has no bf16 kernel.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "qkv/kernels/bf16.h"
#include "qkv/kernels/int8.h"
#include "qkv/tensor/rng.h"
#include "qkv/tensor/tensor.h"

// Skips a bf16 test where oneDNN has no bf16 kernel (the tasks refuse bf16 there, tested apart).
#define SKIP_WITHOUT_BF16()                                                                                          \
  if (!qkv::kernels::dnnl_cpu_info().bf16_native())                                                                  \
  GTEST_SKIP() << "oneDNN has no bf16 kernel on this CPU (" << qkv::kernels::dnnl_cpu_info().isa << "): bf16 "       \
                  "inference is refused here (tested by CappedIsaIsRefusedByTheTasks)"

// Skips an int8 test where no exact int8 kernel runs (oneDNN's AVX512-VNNI or AMX, or qkv's own
// for AVX512-VNNI or AVX2): the tasks refuse int8 there.
#define SKIP_WITHOUT_INT8()              \
  if (!qkv::kernels::int8_supported()) \
  GTEST_SKIP() << "no int8 kernel here (AVX512-VNNI, AMX or an AVX2 build): int8 inference is refused here"

namespace qkv::testing {

// max |b - a| / max |a| (the max-relative error), over f32 tensors of one shape.
inline double max_rel(const Tensor& a, const Tensor& b) {
  Tensor x = a.contiguous(), y = b.contiguous();
  EXPECT_EQ(x.shape(), y.shape());
  double num = 0, den = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    num = std::max(num, std::fabs(double(x.data<float>()[i]) - double(y.data<float>()[i])));
    den = std::max(den, std::fabs(double(x.data<float>()[i])));
  }
  return num / den;
}

// (B, T) int64 ids drawn uniformly from [lo, hi).
inline Tensor random_ids(Generator& g, int64_t B, int64_t T, int64_t lo, int64_t hi) {
  std::vector<int64_t> v(size_t(B * T));
  for (auto& t : v) t = lo + int64_t(g.randint(uint64_t(hi - lo)));
  return Tensor::from_vector(v, {B, T});
}

// n prompts of ids drawn uniformly from [0, vocab), the i-th of first + i * step tokens.
inline std::vector<std::vector<int64_t>> random_prompts(Generator& g, int n, int64_t first, int64_t step,
                                                        int64_t vocab) {
  std::vector<std::vector<int64_t>> out;
  for (int i = 0; i < n; ++i) {
    const Tensor ids = random_ids(g, 1, first + step * i, 0, vocab);
    out.emplace_back(ids.data<int64_t>(), ids.data<int64_t>() + ids.numel());
  }
  return out;
}

// n source sentences for a translation model: ids from [low, vocab) (above its special ids), the
// i-th of first + i * step tokens, each ending with eos.
inline std::vector<std::vector<int64_t>> random_sources(Generator& g, int n, int64_t first, int64_t step,
                                                        int64_t low, int64_t vocab, int64_t eos) {
  std::vector<std::vector<int64_t>> out;
  for (int i = 0; i < n; ++i) {
    const Tensor ids = random_ids(g, 1, first + step * i, low, vocab);
    out.emplace_back(ids.data<int64_t>(), ids.data<int64_t>() + ids.numel());
    out.back().push_back(eos);
  }
  return out;
}

// f() runs fp32 products against weights held in `held` ("bf16" or "int8"): it must throw the
// error that names the held weight and the precision asked for.
inline void expect_refused_at_fp32(const std::function<void()>& f, const char* held) {
  try {
    f();
    ADD_FAILURE() << "fp32 products against weights held in " << held << " ran";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find(std::string("held in ") + held), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("got fp32"), std::string::npos) << e.what();
  }
}

}  // namespace qkv::testing
