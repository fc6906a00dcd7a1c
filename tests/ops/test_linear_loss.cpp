// ops/loss's linear_cross_entropy (the LM head and its loss without the logits in memory) against
// PyTorch's cross_entropy(linear(x, W, b)) (tools/refs/ops_linear_loss.py), in one chunk and in
// many; against qkv's own composition and finite differences in f64; eval mode; errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "gradcheck.h"
#include "helpers.h"
#include "qkv/autograd/node.h"
#include "qkv/kernels/bf16.h"
#include "qkv/kernels/elementwise.h"
#include "qkv/kernels/gemm.h"
#include "qkv/kernels/loss.h"
#include "qkv/ops/loss.h"
#include "qkv/ops/matmul.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;

namespace {

std::vector<Tensor> leaves(std::initializer_list<Tensor> ts) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) {
    Tensor c = t.defined() ? t.clone() : Tensor();
    if (c.defined()) c.set_requires_grad(true);
    out.push_back(c);
  }
  return out;
}

}  // namespace

// Every case in one chunk (0: the default size, larger than these), in chunks of one row, and of
// four (the last chunk short): the loss and the gradients of x, W and b within fp32's tolerance
// (1e-5 relative) of torch's f64 values.
TEST(LinearCrossEntropy, MatchesPyTorchInOneChunkAndInMany) {
  RefFile ref("ops_linear_loss");
  int n = 0;
  for (const auto& c : ref.cases()) {
    const auto p = ref.params(c);
    const Reduction red = p["reduction"] == "sum" ? Reduction::sum : Reduction::mean;
    const bool has_bias = ref.has(c, "b");
    for (int64_t chunk : {0, 1, 4}) {
      SCOPED_TRACE(c + " chunk_rows " + std::to_string(chunk));
      std::vector<Tensor> in = leaves({ref.get(c, "x"), ref.get(c, "w"), has_bias ? ref.get(c, "b") : Tensor()});
      Tensor y = linear_cross_entropy(in[0], in[1], in[2], ref.get(c, "t"), p["ignore_index"].get<int64_t>(),
                                      p["smoothing"].get<double>(), red, chunk);
      ASSERT_EQ(y.shape(), Shape({}));
      EXPECT_CLOSE(y, ref.get(c, "y"), kF32);
      backward(y, ref.get(c, "gy"));
      EXPECT_CLOSE(in[0].grad(), ref.get(c, "gx"), kF32);
      EXPECT_CLOSE(in[1].grad(), ref.get(c, "gw"), kF32);
      if (has_bias) {
        EXPECT_CLOSE(in[2].grad(), ref.get(c, "gb"), kF32);
      }
    }
    ++n;
  }
  EXPECT_EQ(n, 10);
}

// In f64 the fused op equals cross_entropy(linear(...)) to rounding, for every chunking, and
// passes finite differences; with x alone or W alone requiring a gradient, only that one gets it.
TEST(LinearCrossEntropy, EqualsTheComposedOpsAndFiniteDifferencesInF64) {
  const Tensor x = randn({3, 4, 6}, 71, DType::f64), w = randn({9, 6}, 72, DType::f64), b = randn({9}, 73, DType::f64);
  const Tensor t = Tensor::from_vector<int64_t>({1, 8, -100, 0, 3, 3, 7, -100, 2, 5, 6, 4}, {3, 4});
  for (double ls : {0.0, 0.2}) {
    for (Reduction red : {Reduction::sum, Reduction::mean}) {
      std::vector<Tensor> ref_in = leaves({x, w, b});
      Tensor want = cross_entropy(linear(ref_in[0], ref_in[1], ref_in[2]), t, -100, ls, red);
      backward(want);
      for (int64_t chunk : {0, 1, 5, 12}) {
        SCOPED_TRACE("smoothing " + std::to_string(ls) + " chunk_rows " + std::to_string(chunk));
        std::vector<Tensor> in = leaves({x, w, b});
        Tensor got = linear_cross_entropy(in[0], in[1], in[2], t, -100, ls, red, chunk);
        EXPECT_NEAR(got.item(), want.item(), 1e-12);
        backward(got);
        for (int i = 0; i < 3; ++i) EXPECT_CLOSE(in[i].grad(), ref_in[i].grad(), (Tol{1e-12, 1e-12}));
      }
      EXPECT_GRADCHECK(
          [&](const std::vector<Tensor>& v) { return linear_cross_entropy(v[0], v[1], v[2], t, -100, ls, red, 5); },
          {x, w, b});
    }
  }
  Tensor xo = x.clone(), wo = w.clone();
  xo.set_requires_grad(true);
  backward(linear_cross_entropy(xo, wo, Tensor(), t));
  EXPECT_TRUE(xo.grad().defined());
  EXPECT_FALSE(wo.grad().defined());
}

// Mixed-precision training (native bf16 products): the chunk's dlogits are rounded once for dX and
// dW, in the pass that sums the bias gradient. The gradients are bit for bit those of the kernels
// run one by one, each product rounding its own operands and the bias summed on its own.
TEST(LinearCrossEntropy, InBf16TheGradientsAreThoseOfThePerProductRounding) {
  if (!kernels::dnnl_cpu_info().bf16_native()) GTEST_SKIP() << "no bf16 kernel here";
  const kernels::Bf16ProductsScope native(kernels::Bf16Products::native);
  const kernels::MatmulPrecisionScope bf16(kernels::MatmulPrecision::bf16);
  const int64_t R = 10, D = 12, V = 37, C = 4;  // chunks of 4, 4 and 2 rows
  const Tensor x = randn({R, D}, 91), w = randn({V, D}, 92), b = randn({V}, 93);
  std::vector<int64_t> tv(static_cast<size_t>(R));
  for (int64_t i = 0; i < R; ++i) tv[size_t(i)] = (i * 11) % V;
  const Tensor t = Tensor::from_vector(tv, {R});
  std::vector<Tensor> in = leaves({x, w, b});
  backward(linear_cross_entropy(in[0], in[1], in[2], t, -100, 0.1, Reduction::mean, C));
  Tensor gx = Tensor::empty({R, D}), gw = Tensor::empty({V, D}), gb = Tensor::zeros({V}), part = Tensor::empty({V});
  Tensor rows = Tensor::empty({C}), stats = Tensor::empty({C, 2});  // per row: max, log sum exp(x - max)
  for (int64_t r0 = 0; r0 < R; r0 += C) {
    const int64_t n = std::min(C, R - r0);
    const Tensor xc = x.as_strided({n, D}, {D, 1}, r0 * D);
    Tensor L = Tensor::empty({n, V}), rc = rows.as_strided({n}, {1}, 0), lc = stats.as_strided({n, 2}, {2, 1}, 0);
    kernels::linear(xc, w, b, L);
    kernels::cross_entropy_forward_backward(L, tv.data() + r0, -100, 0.1, 1.0 / double(R), rc, lc);
    Tensor gxc = gx.as_strided({n, D}, {D, 1}, r0 * D);
    kernels::matmul_2d(L, w, gxc);
    kernels::matmul_2d(L.as_strided({V, n}, {1, V}, 0), xc, gw, r0 == 0 ? 0.0 : 1.0);
    kernels::column_sums(L, part);
    kernels::add_inplace(gb, part);
  }
  EXPECT_EQ(in[0].grad().to_vector<float>(), gx.to_vector<float>());
  EXPECT_EQ(in[1].grad().to_vector<float>(), gw.to_vector<float>());
  EXPECT_EQ(in[2].grad().to_vector<float>(), gb.to_vector<float>());
}

// Without recording (eval, perplexity) the same loss, and no graph.
TEST(LinearCrossEntropy, WithoutGradientsTheSameLossAndNoGraph) {
  const Tensor x = randn({20, 8}, 74), w = randn({33, 8}, 75);
  std::vector<int64_t> tv(20);
  for (int64_t i = 0; i < 20; ++i) tv[size_t(i)] = (i * 7) % 33;
  const Tensor t = Tensor::from_vector(tv, {20});
  std::vector<Tensor> in = leaves({x, w});
  const double recorded = linear_cross_entropy(in[0], in[1], Tensor(), t, -100, 0.0, Reduction::mean, 6).item();
  NoGradGuard no_grad;
  Tensor y = linear_cross_entropy(in[0], in[1], Tensor(), t, -100, 0.0, Reduction::mean, 6);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_EQ(y.item(), recorded);
}

TEST(LinearCrossEntropy, BadInputsThrowNamingTheField) {
  const Tensor x = Tensor::zeros({3, 4}), w = Tensor::zeros({5, 4}), t = Tensor::zeros({3}, DType::i64);
  auto expect_msg = [](auto&& fn, const std::vector<std::string>& parts) {
    const std::string m = error_of(fn);
    for (const std::string& p : parts) EXPECT_MENTIONS(m, p);
  };
  expect_msg([&] { linear_cross_entropy(x, w, Tensor(), t, -100, 0.0, Reduction::none); },
             {"linear_cross_entropy", "reduction", "sum or mean"});
  expect_msg([&] { linear_cross_entropy(x, Tensor::zeros({5, 3}), Tensor(), t); }, {"in_features", "(5, 3)"});
  expect_msg([&] { linear_cross_entropy(x, w, Tensor::zeros({4}), t); }, {"bias", "(5)"});
  expect_msg([&] { linear_cross_entropy(x, w, Tensor(), Tensor::zeros({4}, DType::i64)); },
             {"targets", "(3)", "(4)"});
  expect_msg([&] { linear_cross_entropy(x, w, Tensor(), Tensor::from_vector<int64_t>({0, 5, 1}, {3})); },
             {"target 5", "C = 5"});
  expect_msg([&] { linear_cross_entropy(x, w, Tensor(), t, -100, 0.0, Reduction::mean, -1); }, {"chunk_rows", "-1"});
  // The gradients were made by the forward: a second backward through a retained graph is refused.
  Tensor xr = randn({3, 4}, 76);
  xr.set_requires_grad(true);
  Tensor y = linear_cross_entropy(xr, w, Tensor(), t);
  backward(y, Tensor(), /*retain_graph=*/true);
  expect_msg([&] { backward(y, Tensor(), true); }, {"linear_cross_entropy", "once", "retain_graph"});
}
