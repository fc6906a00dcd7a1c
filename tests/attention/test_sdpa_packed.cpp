// AttentionMask::packed_lengths (sdpa.h): sequences end to end in one row, each attending only
// to itself. The contract is that a sequence's output is the output it gets alone, so each
// sequence is checked against the op on that sequence by itself (the op itself is checked against
// PyTorch in test_sdpa.cpp): the fused per-sequence path must give the same bits, the explicit
// block-diagonal mask (weights, gradients) the same values within f32 rounding (rtol 1e-5).
#include <gtest/gtest.h>

#include <array>

#include "qkv/attention/multihead.h"
#include "qkv/attention/sdpa.h"
#include "qkv/autograd/node.h"
#include "qkv/ops/shape.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;

namespace {

constexpr Tol kPackedF32Out{1e-5, 1e-6};
const std::vector<int64_t> kLengths = {5, 1, 9, 3, 70};  // 70: more than one query block

// Positions [start, start + len) of a (1, H, T, D) tensor, as a contiguous copy.
Tensor position_rows(const Tensor& x, int64_t start, int64_t len) {
  return slice(x, 2, start, start + len).contiguous();
}

// q, k, v as MultiHeadAttention makes them: (1, H, T, Dh) views of one (1, T, 3 H Dh) projection.
std::array<Tensor, 3> packed_qkv(int64_t H, int64_t Dh, uint64_t seed) {
  int64_t T = 0;
  for (int64_t len : kLengths) T += len;
  const Tensor proj = randn({1, T, 3 * H * Dh}, seed);
  std::array<Tensor, 3> out;
  for (int64_t i = 0; i < 3; ++i)
    out[size_t(i)] = proj.as_strided({1, H, T, Dh}, {T * 3 * H * Dh, Dh, 3 * H * Dh, 1}, i * H * Dh);
  return out;
}

}  // namespace

TEST(SdpaPacked, EachSequenceGetsTheBitsItGetsAlone) {
  const auto [q, k, v] = packed_qkv(3, 16, 7);
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal);
    AttentionMask m;
    m.causal = causal;
    m.packed_lengths = kLengths;
    const Tensor out = scaled_dot_product_attention(q, k, v, m).out;  // (1, H, T, Dh)
    ASSERT_EQ(out.shape(), q.shape());
    AttentionMask alone;
    alone.causal = causal;
    int64_t start = 0;
    for (int64_t len : kLengths) {
      SCOPED_TRACE(len);
      const Tensor want = scaled_dot_product_attention(position_rows(q, start, len), position_rows(k, start, len),
                                                       position_rows(v, start, len), alone)
                              .out;
      EXPECT_TRUE(bit_equal(position_rows(out, start, len), want));
      start += len;
    }
  }
}

TEST(SdpaPacked, WeightsAndGradientsComeFromTheBlockDiagonal) {
  const auto [q0, k0, v0] = packed_qkv(2, 8, 11);
  Tensor q = q0.contiguous(), k = k0.contiguous(), v = v0.contiguous();
  for (Tensor* t : {&q, &k, &v}) t->set_requires_grad(true);
  AttentionMask m;
  m.causal = true;
  m.packed_lengths = kLengths;
  SdpaResult r = scaled_dot_product_attention(q, k, v, m, 0.0, false, /*need_weights=*/true);
  const Tensor gy = randn(r.out.shape(), 12);
  backward(r.out, gy);
  AttentionMask alone;
  alone.causal = true;
  int64_t start = 0;
  const int64_t T = q.size(2);
  for (int64_t len : kLengths) {
    SCOPED_TRACE(len);
    Tensor qs = position_rows(q.detach(), start, len), ks = position_rows(k.detach(), start, len),
           vs = position_rows(v.detach(), start, len);
    for (Tensor* t : {&qs, &ks, &vs}) t->set_requires_grad(true);
    SdpaResult s = scaled_dot_product_attention(qs, ks, vs, alone, 0.0, false, true);
    backward(s.out, position_rows(gy, start, len));
    EXPECT_CLOSE(position_rows(r.out.detach(), start, len), s.out.detach(), kPackedF32Out);
    EXPECT_CLOSE(position_rows(q.grad(), start, len), qs.grad(), kPackedF32Out);
    EXPECT_CLOSE(position_rows(k.grad(), start, len), ks.grad(), kPackedF32Out);
    EXPECT_CLOSE(position_rows(v.grad(), start, len), vs.grad(), kPackedF32Out);
    // This sequence's queries put their weight on its own keys, and none on any other's.
    const Tensor w = position_rows(r.weights.detach(), start, len);  // (1, H, len, T)
    EXPECT_CLOSE(slice(w, 3, start, start + len).contiguous(), s.weights.detach(), kPackedF32Out);
    const auto wv = w.to_vector<float>();
    for (size_t e = 0; e < wv.size(); ++e) {
      const int64_t j = int64_t(e) % T;
      if (j < start || j >= start + len) {
        ASSERT_EQ(wv[e], 0.0f) << "key " << j;
      }
    }
    start += len;
  }
}

TEST(SdpaPacked, BadLengthsThrowNamingTheField) {
  const auto [q, k, v] = packed_qkv(2, 8, 3);
  auto expect_error = [&](AttentionMask m, const std::string& part) {
    for (bool weights : {false, true}) {  // the fused path and the explicit mask check alike
      try {
        scaled_dot_product_attention(q, k, v, m, 0.0, false, weights);
        ADD_FAILURE() << "expected an error mentioning " << part;
      } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("mask.packed_lengths"), std::string::npos) << msg;
        EXPECT_NE(msg.find(part), std::string::npos) << msg;
      }
    }
  };
  AttentionMask m;
  m.packed_lengths = {5, 1, 9, 3, 69};
  expect_error(m, "sum to 87, expected Tq = 88");
  m.packed_lengths = {5, 1, 9, 3, 71, -1};
  expect_error(m, "positive lengths, got -1");
  m.packed_lengths = kLengths;
  m.key_padding = Tensor::zeros({1, 88}, DType::u8);
  expect_error(m, "causal only");
  m = {};
  m.packed_lengths = {44, 44};
  Tensor q2 = randn({2, 2, 44, 8}, 4);
  try {
    scaled_dot_product_attention(q2, q2, q2, m);
    ADD_FAILURE() << "expected an error for two rows";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("one row (B = 1)"), std::string::npos) << e.what();
  }
}

// Rotary and relative positions count across the whole row, so packed sequences would see each
// other's positions: refused by name rather than computed wrong.
TEST(SdpaPacked, PositionalSelfAttentionRefusesPackedSequences) {
  for (auto kind : {attention::AttentionPositions::Kind::rope, attention::AttentionPositions::Kind::relative}) {
    attention::MultiHeadAttention mha(16, 2);
    attention::AttentionPositions p;
    p.kind = kind;
    mha.set_positions(p);
    const Tensor x = randn({1, 6, 16}, 5);
    AttentionMask m;
    m.packed_lengths = {2, 4};
    try {
      mha.forward(x, x, x, m);
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("packed sequences"), std::string::npos) << e.what();
    }
  }
}
