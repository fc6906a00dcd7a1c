// MultiHeadAttention against torch.nn.MultiheadAttention (tools/refs/attention_mha.py): forward,
// per-head weights, gradients of the inputs and of every parameter, on the fused path (no
// weights) and the naive path (weights); and the incremental API against the same references.
#include "qkv/attention/multihead.h"

#include <gtest/gtest.h>

#include "qkv/autograd/node.h"
#include "qkv/ops/shape.h"
#include "param_grads.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;
using attention::MultiHeadAttention;

namespace {

std::shared_ptr<MultiHeadAttention> load_mha(const RefFile& ref, const std::string& c) {
  auto p = ref.params(c);
  auto m = std::make_shared<MultiHeadAttention>(p["d_model"].get<int64_t>(), p["heads"].get<int64_t>(), 0.0,
                                                p["bias"].get<bool>(), p["kdim"].get<int64_t>(),
                                                p["vdim"].get<int64_t>());
  std::map<std::string, Tensor> sd;
  for (auto& [name, t] : ref.contents().tensors)
    if (name.rfind(c + "/p.", 0) == 0) sd[name.substr(c.size() + 3)] = t;
  m->load_state_dict(sd, /*strict=*/true, c);
  return m;
}

AttentionMask mask_of(const RefFile& ref, const std::string& c) {
  AttentionMask m;
  m.causal = ref.params(c)["causal"].get<bool>();
  if (ref.has(c, "key_padding")) m.key_padding = ref.get(c, "key_padding");
  return m;
}

// Rows [t0, t1) of axis 1 of a (B, T, D) tensor.
Tensor rows(const Tensor& x, int64_t t0, int64_t t1) { return contiguous(slice(x, 1, t0, t1)); }

}  // namespace

TEST(MultiHeadAttention, MatchesTorchForwardAndAllGradients) {
  RefFile ref("attention_mha");
  int n = 0;
  for (auto& c : ref.cases()) {
    for (bool need_weights : {false, true}) {  // fused kernel / naive path
      SCOPED_TRACE(c + (need_weights ? " (weights)" : " (fused)"));
      auto m = load_mha(ref, c);
      bool self = ref.params(c)["self"];
      Tensor q = ref.get(c, "query").clone();
      q.set_requires_grad(true);
      Tensor k = q, v = q;
      if (!self) {
        k = ref.get(c, "key").clone().set_requires_grad(true);
        v = ref.get(c, "value").clone().set_requires_grad(true);
      }
      auto r = m->forward(q, k, v, mask_of(ref, c), need_weights);
      EXPECT_CLOSE(r.out, ref.get(c, "out"), kF32);
      if (need_weights) EXPECT_CLOSE(r.weights, ref.get(c, "weights"), kF32);
      else EXPECT_FALSE(r.weights.defined());
      backward(r.out, ref.get(c, "gy"));
      // Input and weight gradients sum over B*T (<= 33) rows and D (<= 32) features: f32 holds.
      EXPECT_CLOSE(q.grad(), ref.get(c, "gquery"), kF32);
      if (!self) {
        EXPECT_CLOSE(k.grad(), ref.get(c, "gkey"), kF32);
        EXPECT_CLOSE(v.grad(), ref.get(c, "gvalue"), kF32);
      }
      expect_param_grads(*m, ref, c, kF32);
      EXPECT_EQ(m->named_parameters().size(), ref.params(c)["bias"].get<bool>() ? 8u : 4u);
    }
    ++n;
  }
  EXPECT_EQ(n, 9);
}

TEST(MultiHeadAttention, ParameterNamesFollowHuggingFace) {
  MultiHeadAttention m(16, 4);
  std::vector<std::string> names;
  for (auto& [n, t] : m.named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"q_proj.weight", "q_proj.bias", "k_proj.weight", "k_proj.bias",
                                             "v_proj.weight", "v_proj.bias", "out_proj.weight", "out_proj.bias"}));
  EXPECT_EQ(m.head_dim(), 4);
  EXPECT_THROW(MultiHeadAttention(10, 4), Error);  // 10 is not a multiple of 4
  try {
    m.forward(Tensor::zeros({2, 3, 16}), Tensor::zeros({2, 5, 12}), Tensor::zeros({2, 5, 16}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string s = e.what();
    EXPECT_NE(s.find("key"), std::string::npos) << s;
    EXPECT_NE(s.find("(2, 5, 12)"), std::string::npos) << s;
  }
}

TEST(MultiHeadAttention, IncrementalSelfAttentionEqualsTorchCausalForward) {
  RefFile ref("attention_mha");
  for (std::string c : {"self_causal", "self_nobias", "self_one_head_long"}) {
    SCOPED_TRACE(c);
    auto m = load_mha(ref, c);
    NoGradGuard ng;
    Tensor x = ref.get(c, "query"), expected = ref.get(c, "out");  // (B, T, D)
    const int64_t T = x.size(1);
    // One position per step.
    attention::KVCache cache;
    for (int64_t t = 0; t < T; ++t) {
      SCOPED_TRACE(t);
      auto r = m->step(rows(x, t, t + 1), cache, /*need_weights=*/t % 2 == 1);
      EXPECT_CLOSE(r.out, rows(expected, t, t + 1), kF32);
      EXPECT_EQ(cache.length(), t + 1);
    }
    // Several positions at once (causal among themselves), then one by one.
    attention::KVCache cache2;
    int64_t first = std::min<int64_t>(3, T);
    EXPECT_CLOSE(m->step(rows(x, 0, first), cache2).out, rows(expected, 0, first), kF32);
    for (int64_t t = first; t < T; ++t)
      EXPECT_CLOSE(m->step(rows(x, t, t + 1), cache2).out, rows(expected, t, t + 1), kF32);
  }
}

TEST(MultiHeadAttention, KVCacheSelectRowsReordersHypotheses) {
  RefFile ref("attention_mha");
  const std::string c = "self_causal";  // B = 2, T = 7
  auto m = load_mha(ref, c);
  NoGradGuard ng;
  Tensor x = ref.get(c, "query"), expected = ref.get(c, "out");
  attention::KVCache cache;
  for (int64_t t = 0; t < 3; ++t) m->step(rows(x, t, t + 1), cache);
  // Rows {1, 0, 1}: the cache now holds three hypotheses; feed each its own continuation.
  std::vector<int64_t> pick = {1, 0, 1};
  Tensor idx = Tensor::from_vector<int64_t>(pick, {3});
  cache.select_rows(idx);
  EXPECT_EQ(cache.rows(), 3);
  Tensor xs = index_select(x, 0, idx), es = index_select(expected, 0, idx);
  for (int64_t t = 3; t < x.size(1); ++t) {
    SCOPED_TRACE(t);
    EXPECT_CLOSE(m->step(rows(xs, t, t + 1), cache).out, rows(es, t, t + 1), kF32);
  }
  EXPECT_THROW(cache.select_rows(Tensor::from_vector<int64_t>({3}, {1})), Error);  // no row 3
}

TEST(MultiHeadAttention, PrecomputedCrossAttentionEqualsTorch) {
  RefFile ref("attention_mha");
  for (std::string c : {"cross_keypad", "cross_plain_one_query", "cross_kdim_vdim"}) {
    SCOPED_TRACE(c);
    auto m = load_mha(ref, c);
    NoGradGuard ng;
    auto kv = m->project_kv(ref.get(c, "key"), ref.get(c, "value"));
    Tensor q = ref.get(c, "query"), expected = ref.get(c, "out");
    AttentionMask mask = mask_of(ref, c);
    for (int64_t t = 0; t < q.size(1); ++t) {  // one query position at a time, as a decoder does
      auto r = m->attend(rows(q, t, t + 1), kv, mask, /*need_weights=*/true);
      EXPECT_CLOSE(r.out, rows(expected, t, t + 1), kF32);
      EXPECT_CLOSE(r.weights, contiguous(slice(ref.get(c, "weights"), 2, t, t + 1)), kF32);
    }
  }
}

TEST(MultiHeadAttention, KVCacheKeyPaddingEqualsTheMaskedForward) {
  // Row 1 left-padded by 3 positions: the padding is recorded in the cache by the first step and
  // must be masked at every later step (general path for several positions, the single-query
  // kernel for one), also after select_rows moves the rows (same count: a table; more rows: a
  // gather). Expected: the full forward with {causal, key_padding} at the real positions.
  RefFile ref("attention_mha");
  const std::string c = "self_causal";  // B = 2, T = 7
  auto m = load_mha(ref, c);
  NoGradGuard ng;
  Tensor x = ref.get(c, "query");  // (B, T, D)
  const int64_t T = x.size(1);
  std::vector<uint8_t> padv(size_t(2 * T), 0);
  for (int64_t j = 0; j < 3; ++j) padv[size_t(T + j)] = 1;
  Tensor pad = Tensor::from_vector<uint8_t>(padv, {2, T});
  AttentionMask mask;
  mask.causal = true;
  mask.key_padding = pad;
  Tensor expected = m->forward(x, x, x, mask).out;  // (B, T, D)
  auto real = [&](const Tensor& y, const Tensor& p, int64_t t0, int64_t t1) {  // padding rows zeroed
    return masked_fill(y, unsqueeze(rows(p, t0, t1), 2), 0.0);
  };
  for (std::vector<int64_t> pick : {std::vector<int64_t>{0, 1}, {1, 0}, {1, 0, 1}}) {
    SCOPED_TRACE(pick.size() == 2 && pick[0] == 1 ? "swapped" : pick.size() == 3 ? "three rows" : "as is");
    attention::KVCache cache;
    EXPECT_CLOSE(real(m->step(rows(x, 0, 4), cache, rows(pad, 0, 4)).out, pad, 0, 4),
                 real(rows(expected, 0, 4), pad, 0, 4), kF32);
    Tensor idx = Tensor::from_vector<int64_t>(pick, {int64_t(pick.size())});
    cache.select_rows(idx);
    Tensor xs = index_select(x, 0, idx), es = index_select(expected, 0, idx), ps = index_select(pad, 0, idx);
    for (int64_t t = 4; t < T; ++t) {
      SCOPED_TRACE(t);
      EXPECT_CLOSE(m->step(rows(xs, t, t + 1), cache).out, rows(es, t, t + 1), kF32);
    }
    EXPECT_TRUE(bit_equal(cache.key_padding_mask(), ps));
  }
}
