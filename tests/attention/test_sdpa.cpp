// attention/sdpa against PyTorch (tools/refs/attention_sdpa.py), finite differences, and the
// op's contracts: masks, dropout from Philox, weight replay, strided layouts, errors.
#include "qkv/attention/sdpa.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "gradcheck.h"
#include "helpers.h"
#include "qkv/autograd/node.h"
#include "qkv/ops/elementwise.h"
#include "qkv/ops/reduce.h"
#include "qkv/ops/shape.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;

namespace {

// f32 results vs float64 PyTorch on the same f32 inputs. rtol stays 1e-5; atol is raised because
// f32 rounding of the logits dominates: with scale * |q||k| large (shape s3: Dh 80, scale 0.3,
// logits of std ~2.7) an output near 0 carries |dS| * max|v| ~ 1e-6 absolute error. PyTorch's
// own f32 math is 1.6x over the house tolerance on that shape (measured vs its f64); qkv's fused
// and naive paths are at most 2.2x. Hence atol 3e-6 for out/weights. Gradients are sums over up
// to 130 rows of such terms: atol 1e-5.
constexpr Tol kF32Out{1e-5, 3e-6};
constexpr Tol kF32Grad{1e-5, 1e-5};

AttentionMask sdpa_mask_of(const RefFile& ref, const std::string& c) {
  AttentionMask m;
  m.causal = ref.params(c)["causal"].get<bool>();
  if (ref.has(c, "key_padding")) m.key_padding = ref.get(c, "key_padding");
  if (ref.has(c, "key_lengths")) m.key_lengths = ref.get(c, "key_lengths");
  if (ref.has(c, "mask")) m.mask = ref.get(c, "mask");
  return m;
}

bool is_dropout_case(const std::string& c) { return c.rfind("dropout", 0) == 0; }

struct SdpaRun {
  Tensor out, weights, dq, dk, dv;
};

// Runs the op on the case's inputs (converted to dt) and backpropagates the case's gy.
SdpaRun run_case(const RefFile& ref, const std::string& c, DType dt, bool need_weights, Generator* gen = nullptr) {
  auto p = ref.params(c);
  Tensor q = ref.get(c, "q").to(dt), k = ref.get(c, "k").to(dt), v = ref.get(c, "v").to(dt);
  for (Tensor* t : {&q, &k, &v}) t->set_requires_grad(true);
  AttentionMask m = sdpa_mask_of(ref, c);
  std::optional<double> scale;
  double drop_p = 0.0;
  if (is_dropout_case(c)) {
    drop_p = p["p"].get<double>();
  } else if (!p["default_scale"].get<bool>()) {
    scale = p["scale"].get<double>();
  }
  SdpaResult r = scaled_dot_product_attention(q, k, v, m, drop_p, drop_p > 0, need_weights, scale, gen);
  backward(r.out, ref.get(c, "gy").to(dt));
  return {r.out, r.weights, q.grad(), k.grad(), v.grad()};
}

void expect_matches(const RefFile& ref, const std::string& c, const SdpaRun& r, Tol out_tol, Tol grad_tol) {
  EXPECT_CLOSE(r.out, ref.get(c, "out"), out_tol);
  if (r.weights.defined()) {
    EXPECT_CLOSE(r.weights, ref.get(c, "weights"), out_tol);
  }
  EXPECT_CLOSE(r.dq, ref.get(c, "dq"), grad_tol);
  EXPECT_CLOSE(r.dk, ref.get(c, "dk"), grad_tol);
  EXPECT_CLOSE(r.dv, ref.get(c, "dv"), grad_tol);
}

}  // namespace

TEST(Sdpa, FusedAndNaiveMatchPyTorchF32) {
  RefFile ref("attention_sdpa");
  int n = 0;
  for (const auto& c : ref.cases()) {
    if (is_dropout_case(c)) continue;
    for (bool naive : {false, true}) {
      SCOPED_TRACE(c + (naive ? " naive" : " fused"));
      SdpaRun r = run_case(ref, c, DType::f32, naive);
      EXPECT_EQ(r.weights.defined(), naive);
      expect_matches(ref, c, r, kF32Out, kF32Grad);
      ++n;
    }
  }
  EXPECT_EQ(n, 2 * 6 * 8);
}

TEST(Sdpa, FusedAndNaiveMatchPyTorchF64) {
  RefFile ref("attention_sdpa");
  for (const auto& c : ref.cases()) {
    if (is_dropout_case(c)) continue;
    for (bool naive : {false, true}) {
      SCOPED_TRACE(c + (naive ? " naive" : " fused"));
      expect_matches(ref, c, run_case(ref, c, DType::f64, naive), kF64, kF64);
    }
  }
}

TEST(Sdpa, DropoutMatchesPyTorchWithPhiloxMask) {
  RefFile ref("attention_sdpa");
  int n = 0;
  for (const auto& c : ref.cases()) {
    if (!is_dropout_case(c)) continue;
    auto p = ref.params(c);
    const uint64_t seed = p["seed"], offset = p["offset"];
    const int64_t elems = ref.get(c, "z").numel();
    for (DType dt : {DType::f32, DType::f64})
      for (bool naive : {false, true}) {
        SCOPED_TRACE(c + (naive ? " naive " : " fused ") + dtype_name(dt));
        Generator g;
        g.set_state(seed, offset);
        SdpaRun r = run_case(ref, c, dt, naive, &g);
        EXPECT_EQ(g.offset(), offset + uint64_t(elems + 3) / 4);  // reserved exactly B*H*Tq*Tk draws
        if (dt == DType::f32) expect_matches(ref, c, r, kF32Out, kF32Grad);
        else expect_matches(ref, c, r, kF64, kF64);
        ++n;
      }
  }
  EXPECT_EQ(n, 3 * 4);
}

TEST(Sdpa, FullyMaskedRowsGiveExactZerosNotNaN) {
  RefFile ref("attention_sdpa");
  for (const std::string c : {"s1_fullpad", "s3_fullpad"}) {
    for (bool naive : {false, true}) {
      SCOPED_TRACE(c + (naive ? " naive" : " fused"));
      SdpaRun r = run_case(ref, c, DType::f32, naive);
      // Batch 0 has every key padded: its outputs and its q, k, v gradients are exactly 0.
      const int64_t per_b = r.out.numel() / r.out.size(0);
      auto out = r.out.to_vector<float>();
      for (int64_t i = 0; i < per_b; ++i) ASSERT_EQ(out[size_t(i)], 0.f) << i;
      for (const Tensor& g : {r.dq, r.dk, r.dv}) {
        auto gv = g.to_vector<float>();
        for (int64_t i = 0; i < g.numel() / g.size(0); ++i) ASSERT_EQ(gv[size_t(i)], 0.f) << i;
        for (float x : gv) ASSERT_FALSE(std::isnan(x));
      }
    }
  }
}

TEST(Sdpa, GradcheckF64) {
  // q (2, 2, 3, 4), k (2, 2, 5, 4), v (2, 2, 5, 5): Dv = Tk so the naive variant can check the
  // gradient through out and the returned weights at once (out + weights).
  Tensor q = randn({2, 2, 3, 4}, 41, DType::f64), k = randn({2, 2, 5, 4}, 42, DType::f64);
  Tensor v = randn({2, 2, 5, 5}, 43, DType::f64);
  Tensor kp = Tensor::from_vector<uint8_t>({0, 0, 0, 1, 1, 1, 1, 1, 1, 1}, {2, 5});  // batch 1: all padded
  Tensor add = randn({1, 1, 3, 5}, 44, DType::f64);
  for (int variant = 0; variant < 5; ++variant) {
    SCOPED_TRACE(variant);
    AttentionMask m;
    m.causal = variant >= 1;
    if (variant >= 2) m.key_padding = kp, m.mask = add;
    const bool naive = variant >= 3;
    const double p = variant == 2 || variant == 4 ? 0.25 : 0.0;
    EXPECT_GRADCHECK(
        [&](const std::vector<Tensor>& in) {
          Generator g(77);  // the same dropout mask at every evaluation
          SdpaResult r = scaled_dot_product_attention(in[0], in[1], in[2], m, p, true, naive, 0.7, &g);
          return naive ? qkv::add(r.out, r.weights) : r.out;
        },
        {q, k, v});
  }
}

TEST(Sdpa, WeightReplayEqualsNaiveWeightsAndPyTorch) {
  RefFile ref("attention_sdpa");
  for (const std::string c : {"s3_combined", "s3_bool", "s1_fullpad", "s2_keylen"}) {
    SCOPED_TRACE(c);
    Tensor q = ref.get(c, "q"), k = ref.get(c, "k"), v = ref.get(c, "v");
    AttentionMask m = sdpa_mask_of(ref, c);
    auto p = ref.params(c);
    std::optional<double> scale;
    if (!p["default_scale"].get<bool>()) scale = p["scale"].get<double>();
    SdpaResult r = scaled_dot_product_attention(q, k, v, m, 0.0, false, true, scale);
    Tensor all = attention_weights(q, k, m, scale);
    EXPECT_TRUE(bit_equal(all, r.weights));
    EXPECT_CLOSE(all, ref.get(c, "weights"), kF32Out);
    // Chosen heads, in the order asked: head h of the replay is head heads[h] of the full weights.
    const int64_t H = q.size(1);
    std::vector<int64_t> heads = {H - 1, 0};
    Tensor some = attention_weights(q, k, m, scale, heads);
    ASSERT_EQ(some.shape(), Shape({q.size(0), 2, q.size(2), k.size(2)}));
    auto full = r.weights.to_vector<float>(), part = some.to_vector<float>();
    const int64_t tt = q.size(2) * k.size(2);
    for (int64_t b = 0; b < q.size(0); ++b)
      for (size_t hi = 0; hi < heads.size(); ++hi)
        for (int64_t e = 0; e < tt; ++e)
          ASSERT_EQ(part[size_t((b * 2 + int64_t(hi)) * tt + e)], full[size_t((b * H + heads[hi]) * tt + e)]);
  }
}

// A (B, T, H, D) buffer seen as (B, H, T, D) (what a multi-head projection produces).
Tensor bthd_view(const Tensor& bhtd) {
  const int64_t B = bhtd.size(0), H = bhtd.size(1), T = bhtd.size(2), D = bhtd.size(3);
  Tensor buf = Tensor::empty({B, T, H, D});
  Tensor view = buf.as_strided({B, H, T, D}, {T * H * D, D, H * D, 1}, 0);
  view.copy_from(bhtd);
  return view;
}

TEST(Sdpa, StridedInputsGiveTheSameResultsAndLayouts) {
  RefFile ref("attention_sdpa");
  const std::string c = "s3_combined";
  SdpaRun want = run_case(ref, c, DType::f32, false);
  Tensor q = bthd_view(ref.get(c, "q")), k = bthd_view(ref.get(c, "k")), v = bthd_view(ref.get(c, "v"));
  ASSERT_FALSE(q.is_contiguous());
  for (Tensor* t : {&q, &k, &v}) t->set_requires_grad(true);
  SdpaResult r = scaled_dot_product_attention(q, k, v, sdpa_mask_of(ref, c), 0.0, false, false, ref.params(c)["scale"]);
  backward(r.out, bthd_view(ref.get(c, "gy")), /*retain_graph=*/true);
  // Same kernels on the same numbers: identical bits whatever the layout.
  EXPECT_TRUE(bit_equal(r.out, want.out));
  EXPECT_TRUE(bit_equal(q.grad(), want.dq));
  EXPECT_TRUE(bit_equal(k.grad(), want.dk));
  EXPECT_TRUE(bit_equal(v.grad(), want.dv));
  // out is (B, H, Tq, Dv) over a (B, Tq, H, Dv) buffer; gradients mirror the (B, T, H, D) inputs.
  const Shape& os = r.out.shape();
  EXPECT_EQ(r.out.strides(), Shape({os[2] * os[1] * os[3], os[3], os[1] * os[3], 1}));
  // (The leaves' .grad is a contiguous copy made by the engine: ask the node directly.)
  std::vector<Tensor> g = r.out.grad_fn()->backward({bthd_view(ref.get(c, "gy"))});
  EXPECT_EQ(g[0].strides(), q.strides());
  EXPECT_EQ(g[1].strides(), k.strides());
  EXPECT_TRUE(bit_equal(g[0], want.dq));
}

// q, k, v as MultiHeadAttention makes them: heads of the pieces of one (B, T, 3 H Dh) projection,
// split along the last axis. Their gradients come back as the same views of one new buffer, with
// the bits of separate inputs', and the split's backward takes that buffer whole without a copy;
// pieces' gradients that are not side by side are copied, as before. Fused and naive kernels.
TEST(Sdpa, GradientsOfOneProjectionsPiecesShareOneBufferAndTheSplitTakesItWhole) {
  const int64_t B = 2, T = 5, H = 3, Dh = 4, D = H * Dh;
  Generator gen(7);
  Tensor x = Tensor::empty({B, T, 3 * D}), gy = Tensor::empty({B, H, T, Dh});
  gen.normal(x.data<float>(), x.numel());
  gen.normal(gy.data<float>(), gy.numel());
  auto heads = [&](const Tensor& piece) { return permute(reshape(piece, {B, T, H, Dh}), {0, 2, 1, 3}); };
  AttentionMask causal;
  causal.causal = true;
  for (bool need_weights : {false, true}) {
    SCOPED_TRACE(need_weights ? "naive" : "fused");
    // Separate contiguous leaves: the reference bits.
    std::vector<Tensor> sep;
    for (int i = 0; i < 3; ++i)
      sep.push_back(heads(slice(x, 2, i * D, (i + 1) * D)).contiguous().set_requires_grad(true));
    SdpaResult want = scaled_dot_product_attention(sep[0], sep[1], sep[2], causal, 0.0, false, need_weights);
    backward(want.out, gy);

    Tensor xl = x.clone().set_requires_grad(true);
    std::vector<Tensor> pieces = split(xl, {D, D, D}, 2);
    SdpaResult r = scaled_dot_product_attention(heads(pieces[0]), heads(pieces[1]), heads(pieces[2]), causal, 0.0,
                                                false, need_weights);
    std::vector<Tensor> g = r.out.grad_fn()->backward({gy, Tensor()});
    ASSERT_EQ(g.size(), 3u);
    for (int i = 0; i < 3; ++i) {
      EXPECT_TRUE(g[size_t(i)].storage() == g[0].storage());
      EXPECT_EQ(g[size_t(i)].strides(), Shape({T * 3 * D, Dh, 3 * D, 1}));
      EXPECT_EQ(g[size_t(i)].offset() - g[0].offset(), i * D);
      EXPECT_TRUE(bit_equal(g[size_t(i)], sep[size_t(i)].grad()));
    }
    // The split's node, given the three pieces' gradients (B, T, D) side by side: no copy.
    std::vector<Tensor> side;
    for (const Tensor& gi : g) side.push_back(reshape(permute(gi, {0, 2, 1, 3}), {B, T, D}));
    const auto& split_node = pieces[0].grad_fn();
    Tensor whole = split_node->backward(side)[0];
    EXPECT_TRUE(whole.storage() == g[0].storage());
    EXPECT_EQ(whole.shape(), Shape({B, T, 3 * D}));
    // Apart (each its own contiguous copy): copied into a new buffer, the same values.
    std::vector<Tensor> apart;
    for (const Tensor& si : side) apart.push_back(si.contiguous());
    Tensor copied = split_node->backward(apart)[0];
    EXPECT_FALSE(copied.storage() == apart[0].storage());
    EXPECT_TRUE(bit_equal(copied, whole));
    // And through the engine: x's gradient has the separate leaves' bits, side by side.
    backward(r.out, gy);
    for (int i = 0; i < 3; ++i)
      EXPECT_TRUE(bit_equal(heads(slice(xl.grad(), 2, i * D, (i + 1) * D)).contiguous(), sep[size_t(i)].grad()));
  }
}

TEST(Sdpa, EvalModeAppliesNoDropoutAndDrawsNothing) {
  Tensor q = randn({2, 2, 9, 16}, 1), k = randn({2, 2, 9, 16}, 2), v = randn({2, 2, 9, 16}, 3);
  Generator g(5);
  Tensor plain = scaled_dot_product_attention(q, k, v).out;
  Tensor eval = scaled_dot_product_attention(q, k, v, {}, 0.5, false, false, {}, &g).out;
  EXPECT_TRUE(bit_equal(plain, eval));
  EXPECT_EQ(g.offset(), 0u);
  Tensor train = scaled_dot_product_attention(q, k, v, {}, 0.5, true, false, {}, &g).out;
  EXPECT_FALSE(bit_equal(plain, train));
  EXPECT_EQ(g.offset(), uint64_t(2 * 2 * 9 * 9 + 3) / 4);
}

// The fused backward recomputes the softmax from the mask: a padding mask or an additive mask
// written in place after the forward is refused (autograd/node.h), as torch refuses it.
TEST(Sdpa, AMaskWrittenBeforeBackwardIsRefused) {
  for (const char* which : {"key_padding", "mask"}) {
    Tensor q = randn({2, 2, 3, 4}, 31), k = randn({2, 2, 5, 4}, 32), v = randn({2, 2, 5, 4}, 33);
    q.set_requires_grad(true);
    AttentionMask m;
    if (std::string(which) == "key_padding") {
      m.key_padding = Tensor::zeros({2, 5}, DType::u8);
    } else {
      m.mask = Tensor::zeros({3, 5});
    }
    Tensor loss = sum(scaled_dot_product_attention(q, k, v, m).out);
    (m.key_padding.defined() ? m.key_padding : m.mask).fill(1.0);
    const std::string e = error_of([&] { backward(loss); });
    EXPECT_NE(e.find("ScaledDotProductAttentionBackward: saved tensor 5 of 5 was modified in place"),
              std::string::npos) << which << ": " << e;
    EXPECT_FALSE(q.grad().defined()) << which;
  }
}

TEST(Sdpa, BadInputsThrowNamingTheField) {
  Tensor q = randn({2, 3, 4, 8}, 1), k = randn({2, 3, 6, 8}, 2), v = randn({2, 3, 6, 8}, 3);
  auto expect_error = [](auto&& fn, std::vector<std::string> parts) {
    try {
      fn();
      ADD_FAILURE() << "expected an error mentioning " << parts[0];
    } catch (const Error& e) {
      std::string m = e.what();
      for (const auto& p : parts) EXPECT_NE(m.find(p), std::string::npos) << m;
    }
  };
  const std::string op = "scaled_dot_product_attention";
  expect_error([&] { scaled_dot_product_attention(q, randn({2, 3, 6, 7}, 4), v); }, {op, "k:", "(2, 3, 6, 7)"});
  expect_error([&] { scaled_dot_product_attention(q, k, randn({2, 3, 5, 8}, 4)); }, {op, "v:", "(2, 3, 5, 8)"});
  expect_error([&] { scaled_dot_product_attention(randn({3, 4, 8}, 1), k, v); }, {op, "q:", "(3, 4, 8)"});
  expect_error([&] { scaled_dot_product_attention(q, k.to(DType::f64), v); }, {op, "k:", "f64"});
  AttentionMask m;
  m.key_padding = Tensor::zeros({2, 5}, DType::boolean);
  expect_error([&] { scaled_dot_product_attention(q, k, v, m); }, {op, "key_padding", "(2, 6)", "(2, 5)"});
  m = {};
  m.mask = Tensor::zeros({2, 4, 6}, DType::boolean);  // H = 3, not 2
  expect_error([&] { scaled_dot_product_attention(q, k, v, m); }, {op, "mask.mask", "(2, 4, 6)"});
  m = {};
  m.key_lengths = Tensor::from_vector<int64_t>({6, 7}, {2});
  expect_error([&] { scaled_dot_product_attention(q, k, v, m); }, {op, "key_lengths", "7"});
  expect_error([&] { scaled_dot_product_attention(q, k, v, {}, 1.0, true); }, {op, "dropout_p"});
  expect_error([&] { attention_weights(q, k, {}, {}, {3}); }, {"attention_weights", "heads", "3"});
}
