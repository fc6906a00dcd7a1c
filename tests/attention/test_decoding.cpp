// Incremental decoding (src/attention/decoding.cpp): the single-query kernel path of
// MultiHeadAttention::step / attend, with hypotheses reordered in place (KVCache row table,
// ProjectedKV row map), against full causal / cross attention over the reordered sequences.
#include <gtest/gtest.h>

#include "qkv/attention/multihead.h"
#include "qkv/autograd/node.h"
#include "qkv/ops/shape.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;

namespace {
Tensor pos(const Tensor& x, int64_t t) { return contiguous(slice(x, 1, t, t + 1)); }  // (B, 1, D)
Tensor idx(std::vector<int64_t> v) { return Tensor::from_vector<int64_t>(v, {int64_t(v.size())}); }

// (d_model, heads): the kernel's scalar path (head size 4), and its AVX-512 path with one
// 16-float vector per head (64/4), two 256-float register blocks (512/4), and one block plus
// two single-vector remainders (288/2, head size 144).
struct Dims {
  int64_t d, heads;
};
class Decoding : public ::testing::TestWithParam<Dims> {};
INSTANTIATE_TEST_SUITE_P(HeadSizes, Decoding, ::testing::Values(Dims{16, 4}, Dims{64, 4}, Dims{512, 4}, Dims{288, 2}),
                         [](const auto& info) {
                           return "d" + std::to_string(info.param.d) + "h" + std::to_string(info.param.heads);
                         });
}  // namespace

TEST_P(Decoding, SelfAttentionStepsAcrossInPlaceReorders) {
  NoGradGuard ng;
  const auto [D, H] = GetParam();
  attention::MultiHeadAttention m(D, H);
  m.eval();
  const int64_t B = 3, T = 9;
  Tensor x = randn({B, T, D}, 21);
  AttentionMask causal;
  causal.causal = true;
  Tensor expected = m.forward(x, x, x, causal).out;  // (B, T, D)
  attention::KVCache cache;
  Tensor xs = x, es = expected;
  for (int64_t t = 0; t < T; ++t) {
    SCOPED_TRACE(t);
    if (t == 3 || t == 5 || t == 7) {  // same row count: the table path (no K/V copied)
      Tensor perm = t == 3 ? idx({2, 0, 1}) : (t == 5 ? idx({1, 1, 0}) : idx({0, 2, 2}));
      cache.select_rows(perm);
      xs = index_select(xs, 0, perm);
      es = index_select(es, 0, perm);
      ASSERT_NE(cache.row_table(), nullptr);
    }
    const bool weights = t == 6;  // the gathered (sdpa) path reads the same table
    auto r = m.step(pos(xs, t), cache, weights);
    EXPECT_CLOSE(r.out, pos(es, t), kF32);
    EXPECT_EQ(r.weights.defined(), weights);
  }
  EXPECT_EQ(cache.length(), T);
  EXPECT_GE(cache.capacity(), T);
  // A different row count gathers into new storage and drops the table.
  cache.select_rows(idx({1, 0}));
  EXPECT_EQ(cache.rows(), 2);
  EXPECT_EQ(cache.row_table(), nullptr);
  EXPECT_EQ(cache.k().size(2), T);  // (rows, H, length, Dh)
  EXPECT_THROW(cache.select_rows(idx({2})), Error);  // no row 2 now
}

TEST_P(Decoding, CrossAttentionRowMapSharesTheMemory) {
  NoGradGuard ng;
  const auto [D, H] = GetParam();
  attention::MultiHeadAttention m(D, H);
  m.eval();
  Tensor memory = randn({2, 5, D}, 22), q = randn({4, 1, D}, 23);
  Tensor pad = Tensor::zeros({2, 5}, DType::u8);
  pad.data<uint8_t>()[1 * 5 + 4] = pad.data<uint8_t>()[1 * 5 + 3] = 1;  // sentence 1 has 3 tokens
  auto kv = m.project_kv(memory, memory);
  Tensor rows = idx({1, 1, 0, 1});
  kv.select_rows(rows);  // four hypotheses over two sentences: no K/V copied
  kv.select_rows(idx({0, 1, 2, 3}));
  EXPECT_EQ(kv.rows(), 4);
  EXPECT_EQ(kv.k.size(0), 2);
  AttentionMask mask;
  mask.key_padding = index_select(pad, 0, rows);
  Tensor mem_rows = index_select(memory, 0, rows);
  Tensor expected = m.forward(q, mem_rows, mem_rows, mask).out;
  EXPECT_CLOSE(m.attend(q, kv, mask).out, expected, kF32);
  auto with_w = m.attend(q, kv, mask, /*need_weights=*/true);  // the gathered sdpa path
  EXPECT_CLOSE(with_w.out, expected, kF32);
  EXPECT_THROW(kv.select_rows(idx({4})), Error);
}
