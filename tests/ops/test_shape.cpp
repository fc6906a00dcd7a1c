// ops/shape against PyTorch (tools/refs/ops_shape.py), finite differences, and error messages.
#include "qkv/ops/shape.h"

#include <gtest/gtest.h>

#include <limits>

#include "gradcheck.h"
#include "helpers.h"
#include "pre_view.h"
#include "qkv/autograd/node.h"
#include "qkv/ops/elementwise.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;

namespace {

std::vector<int64_t> ints(const nlohmann::json& j) { return j.get<std::vector<int64_t>>(); }

Tensor apply_single(const std::string& op, const Tensor& v, const nlohmann::json& p) {
  if (op == "reshape") return reshape(v, ints(p["shape"]));
  if (op == "permute") return permute(v, p["dims"].get<std::vector<int>>());
  if (op == "transpose") return transpose(v, p["a"], p["b"]);
  if (op == "unsqueeze") return unsqueeze(v, p["axis"]);
  if (op == "squeeze") return squeeze(v, p["axis"]);
  if (op == "slice") {
    int64_t start = p["start"].is_null() ? 0 : p["start"].get<int64_t>();
    int64_t end = p["end"].is_null() ? kSliceEnd : p["end"].get<int64_t>();
    return slice(v, p["axis"], start, end, p["step"]);
  }
  if (op == "expand") return expand(v, Shape(ints(p["shape"])));
  if (op == "contiguous") return contiguous(v);
  if (op == "flatten") return flatten(v, p["start"], p["end"]);
  throw std::runtime_error("unknown op " + op);
}

bool is_view_op(const std::string& op) {
  return op == "permute" || op == "transpose" || op == "unsqueeze" || op == "squeeze" || op == "slice" ||
         op == "expand";
}

}  // namespace

TEST(Shape, MatchesPyTorch) {
  RefFile ref("ops_shape");
  int n = 0;
  for (const auto& c : ref.cases()) {
    SCOPED_TRACE(c);
    auto p = ref.params(c);
    std::string op = p["op"];
    if (op == "concat") {
      std::vector<Tensor> leaves, views;
      for (int k = 0; k < p["n"].get<int>(); ++k) {
        leaves.push_back(leaf(ref, c, "x" + std::to_string(k)));
        views.push_back(pre_view(leaves.back(), p["pres"][size_t(k)]));
      }
      Tensor y = concat(views, p["axis"]);
      EXPECT_CLOSE(y, ref.get(c, "y"), kF32);
      backward(y, ref.get(c, "gy"));
      for (size_t k = 0; k < leaves.size(); ++k) EXPECT_CLOSE(leaves[k].grad(), ref.get(c, "gx" + std::to_string(k)), kF32);
    } else if (op == "split" || op == "chunk") {
      Tensor x = leaf(ref, c, "x");
      Tensor v = pre_view(x, p["pre"]);
      std::vector<Tensor> ys = op == "split" ? split(v, ints(p["arg"]), p["axis"]) : chunk(v, p["arg"], p["axis"]);
      ASSERT_EQ(int(ys.size()), p["n"].get<int>());
      // One backward per piece (retaining the graph): each run reaches the split node with a
      // single defined gradient, and the leaf accumulates the sum.
      for (size_t k = 0; k < ys.size(); ++k) {
        EXPECT_CLOSE(ys[k], ref.get(c, "y" + std::to_string(k)), kF32);
        EXPECT_EQ(ys[k].storage(), x.storage()) << "pieces must be views";
        backward(ys[k], ref.get(c, "gy" + std::to_string(k)), /*retain_graph=*/true);
      }
      EXPECT_CLOSE(x.grad(), ref.get(c, "gx"), kF32);
    } else if (op == "gather" || op == "index_select") {
      Tensor x = leaf(ref, c, "x");
      Tensor v = pre_view(x, p["pre"]);
      Tensor index = ref.get(c, "index");
      Tensor y = op == "gather" ? gather(v, p["axis"], index) : index_select(v, p["axis"], index);
      EXPECT_CLOSE(y, ref.get(c, "y"), kF32);
      backward(y, ref.get(c, "gy"));
      EXPECT_CLOSE(x.grad(), ref.get(c, "gx"), kF32);  // duplicate indices: scatter-add of few terms
    } else if (op == "where") {
      Tensor a = leaf(ref, c, "a"), b = leaf(ref, c, "b");
      Tensor y = where(ref.get(c, "cond"), pre_view(a, p["pre"]), b);
      EXPECT_CLOSE(y, ref.get(c, "y"), kF32);
      backward(y, ref.get(c, "gy"));
      EXPECT_CLOSE(a.grad(), ref.get(c, "ga"), kF32);
      EXPECT_CLOSE(b.grad(), ref.get(c, "gb"), kF32);  // sums over broadcast axes (<= 10 terms)
    } else if (op == "masked_fill") {
      Tensor x = leaf(ref, c, "x");
      Tensor y = masked_fill(pre_view(x, p["pre"]), ref.get(c, "mask"), p["value"]);
      EXPECT_CLOSE(y, ref.get(c, "y"), kF32);
      backward(y, ref.get(c, "gy"));
      EXPECT_CLOSE(x.grad(), ref.get(c, "gx"), kF32);
    } else {
      Tensor x = leaf(ref, c, "x");
      Tensor v = pre_view(x, p["pre"]);
      Tensor y = apply_single(op, v, p);
      EXPECT_CLOSE(y, ref.get(c, "y"), kF32);
      if (is_view_op(op) || ((op == "reshape" || op == "flatten") && p["pre"] == "none")) {
        EXPECT_EQ(y.storage(), x.storage()) << op << " must return a view";
      }
      backward(y, ref.get(c, "gy"));
      EXPECT_CLOSE(x.grad(), ref.get(c, "gx"), kF32);
    }
    ++n;
  }
  EXPECT_GE(n, 59);  // every case in the reference file ran
}

TEST(Shape, ReshapeIsAViewWheneverStridesAllow) {
  Tensor x = randn({4, 6, 5}, 1);
  Tensor rows = slice(x, 0, 1, 3);  // (2, 6, 5), contiguous apart from the offset
  EXPECT_EQ(reshape(rows, {12, 5}).storage(), x.storage());
  Tensor cols = slice(x, 2, 0, 2);  // (4, 6, 2): the last axis is cut, axes 0-1 still merge
  Tensor merged = reshape(cols, {24, 2});
  EXPECT_EQ(merged.storage(), x.storage());
  EXPECT_TRUE(bit_equal(merged, cols.contiguous().as_strided({24, 2}, {2, 1}, 0)));
  Tensor t = transpose(x, 0, 1);  // (6, 4, 5): axes 0-1 no longer merge -> copy
  Tensor copied = reshape(t, {24, 5});
  EXPECT_NE(copied.storage(), x.storage());
  EXPECT_TRUE(bit_equal(copied, t.contiguous().as_strided({24, 5}, {5, 1}, 0)));
}

TEST(Shape, SplitPiecesInOneBackward) {
  // Several pieces' gradients reach the split node in one pass; pieces without one count as 0.
  Tensor x = randn({6, 3}, 2);
  x.set_requires_grad(true);
  auto ys = chunk(x, 3, 0);  // three (2, 3)
  Tensor y = add(mul(ys[0], 2.0), ys[2]);
  backward(y, Tensor::ones({2, 3}));
  std::vector<float> g = x.grad().to_vector<float>();
  for (int i = 0; i < 18; ++i) EXPECT_EQ(g[size_t(i)], i < 6 ? 2.f : (i < 12 ? 0.f : 1.f)) << i;
}

// Steps past the axis (Python's a[1::2**63 - 1]): one element, not an extent that overflowed to -1;
// and its gradient lands on that element alone.
TEST(Shape, SliceStepsPastTheAxisTakeOneElement) {
  Tensor x = reshape(Tensor::arange(24, DType::f32), {2, 3, 4});
  x.set_requires_grad(true);
  for (int64_t step : {int64_t(5), int64_t(1) << 62, std::numeric_limits<int64_t>::max()}) {
    SCOPED_TRACE(step);
    Tensor y = slice(x, 2, 1, kSliceEnd, step);
    ASSERT_EQ(y.shape(), Shape({2, 3, 1}));
    for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(y.contiguous().data<float>()[i], float(i * 4 + 1));
  }
  backward(slice(x, 2, 1, kSliceEnd, std::numeric_limits<int64_t>::max()), Tensor::ones({2, 3, 1}));
  for (int64_t i = 0; i < 24; ++i) EXPECT_EQ(x.grad().data<float>()[i], i % 4 == 1 ? 1.f : 0.f) << i;
  EXPECT_EQ(slice(x, 2, 3, 1, std::numeric_limits<int64_t>::max()).shape(), Shape({2, 3, 0}));
}

TEST(Shape, GradcheckF64) {
  auto t = [](const std::vector<int64_t>& s, uint64_t seed) { return randn(Shape(s), seed, DType::f64); };
  using In = std::vector<Tensor>;
  EXPECT_GRADCHECK([](const In& in) { return reshape(transpose(in[0], 0, 1), {-1, 2}); }, {t({3, 4}, 1)});
  EXPECT_GRADCHECK([](const In& in) { return permute(in[0], {2, 0, 1}); }, {t({2, 3, 4}, 2)});
  EXPECT_GRADCHECK([](const In& in) { return transpose(in[0], -1, 0); }, {t({2, 3, 4}, 3)});
  EXPECT_GRADCHECK([](const In& in) { return squeeze(unsqueeze(in[0], 1), 1); }, {t({3, 4}, 4)});
  EXPECT_GRADCHECK([](const In& in) { return slice(in[0], 1, -5, 6, 2); }, {t({3, 7}, 5)});
  EXPECT_GRADCHECK([](const In& in) { return expand(in[0], {2, 3, 4}); }, {t({3, 1}, 6)});
  EXPECT_GRADCHECK([](const In& in) { return contiguous(transpose(in[0], 0, 1)); }, {t({3, 4}, 7)});
  EXPECT_GRADCHECK([](const In& in) { return flatten(in[0], 0, 1); }, {t({2, 3, 4}, 8)});
  EXPECT_GRADCHECK([](const In& in) { return concat({in[0], transpose(in[1], 0, 1)}, 1); },
                   {t({3, 2}, 9), t({4, 3}, 10)});
  EXPECT_GRADCHECK([](const In& in) {
    auto ys = split(in[0], {1, 3, 2}, -1);
    return add(mul(ys[0], slice(ys[2], 1, 0, 1)), slice(ys[1], 1, 1, 2));  // (4, 1)
  }, {t({4, 6}, 11)});
  EXPECT_GRADCHECK([](const In& in) { return chunk(in[0], 2, 0)[1]; }, {t({5, 3}, 12)});
  Tensor gidx = Tensor::from_vector<int64_t>({0, 2, 2, 1, 0, 0}, {2, 3});
  EXPECT_GRADCHECK([&](const In& in) { return gather(in[0], 1, gidx); }, {t({2, 4}, 13)});
  Tensor sidx = Tensor::from_vector<int32_t>({3, 0, 3, 3}, {4});
  EXPECT_GRADCHECK([&](const In& in) { return index_select(in[0], 0, sidx); }, {t({5, 2}, 14)});
  Tensor cond = Tensor::from_vector<bool>({true, false, false, true, true, false}, {2, 3});
  EXPECT_GRADCHECK([&](const In& in) { return where(cond, in[0], in[1]); }, {t({3}, 15), t({2, 1}, 16)});
  Tensor mask = Tensor::from_vector<uint8_t>({1, 0, 1}, {3});
  EXPECT_GRADCHECK([&](const In& in) { return masked_fill(in[0], mask, -7.0); }, {t({2, 3}, 17)});
}

TEST(Shape, BadInputsThrowNamingOpAndShapes) {
  Tensor x = Tensor::zeros({2, 3, 4});
  std::string m = error_of([&] { transpose(x, 0, 3); });
  EXPECT_MENTIONS(m, "transpose");
  EXPECT_MENTIONS(m, "axis 3");
  EXPECT_MENTIONS(m, "(2, 3, 4)");
  m = error_of([&] { unsqueeze(x, 4); });
  EXPECT_MENTIONS(m, "unsqueeze");
  EXPECT_MENTIONS(m, "axis 4");
  m = error_of([&] { slice(x, -4, 0, 1); });
  EXPECT_MENTIONS(m, "slice");
  EXPECT_MENTIONS(m, "axis -4");
  m = error_of([&] { permute(x, {0, 0, 1}); });
  EXPECT_MENTIONS(m, "permute");
  EXPECT_MENTIONS(m, "[0, 0, 1]");
  EXPECT_MENTIONS(m, "(2, 3, 4)");
  m = error_of([&] { permute(x, {0, 1}); });
  EXPECT_MENTIONS(m, "[0, 1]");
  m = error_of([&] { reshape(x, {5, 5}); });
  EXPECT_MENTIONS(m, "reshape");
  EXPECT_MENTIONS(m, "(2, 3, 4)");
  EXPECT_MENTIONS(m, "(5, 5)");
  m = error_of([&] { reshape(x, {-1, 5}); });
  EXPECT_MENTIONS(m, "(-1, 5)");
  m = error_of([&] { reshape(x, {-1, -1}); });
  EXPECT_MENTIONS(m, "only one");
  m = error_of([&] { expand(x, {2, 5, 4}); });
  EXPECT_MENTIONS(m, "expand");
  EXPECT_MENTIONS(m, "(2, 5, 4)");
  m = error_of([&] { concat({Tensor::zeros({2, 3}), Tensor::zeros({2, 4})}, 0); });
  EXPECT_MENTIONS(m, "concat");
  EXPECT_MENTIONS(m, "(2, 3)");
  EXPECT_MENTIONS(m, "(2, 4)");
  m = error_of([&] { split(x, {1, 1}, 1); });
  EXPECT_MENTIONS(m, "split");
  EXPECT_MENTIONS(m, "(1, 1)");
  EXPECT_MENTIONS(m, "has 3");
  m = error_of([&] { slice(x, 0, 0, 1, 0); });
  EXPECT_MENTIONS(m, "step");
  Tensor idx = Tensor::from_vector<int64_t>({0, 7}, {1, 2});
  m = error_of([&] { gather(Tensor::zeros({1, 5}), 1, idx); });
  EXPECT_MENTIONS(m, "gather");
  EXPECT_MENTIONS(m, "index 7");
  EXPECT_MENTIONS(m, "[0, 5)");
  EXPECT_MENTIONS(m, "(1, 5)");
  m = error_of([&] { index_select(x, 1, Tensor::from_vector<int32_t>({-1}, {1})); });
  EXPECT_MENTIONS(m, "index_select");
  EXPECT_MENTIONS(m, "index -1");
  EXPECT_MENTIONS(m, "[0, 3)");
  m = error_of([&] { gather(x, 0, Tensor::zeros({2, 3, 4}, DType::f32)); });
  EXPECT_MENTIONS(m, "i64 or i32");
  m = error_of([&] { where(Tensor::zeros({2}, DType::f32), x, x); });
  EXPECT_MENTIONS(m, "where");
  EXPECT_MENTIONS(m, "bool or u8");
  m = error_of([&] { where(Tensor::zeros({5}, DType::boolean), x, x); });
  EXPECT_MENTIONS(m, "where");
  EXPECT_MENTIONS(m, "(5)");
  m = error_of([&] { masked_fill(Tensor::zeros({3, 1}), Tensor::zeros({3, 4}, DType::boolean), 1.0); });
  EXPECT_MENTIONS(m, "masked_fill");
  EXPECT_MENTIONS(m, "(3, 4)");
  EXPECT_MENTIONS(m, "(3, 1)");
}
