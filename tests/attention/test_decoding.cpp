// Incremental decoding (src/attention/decoding.cpp): the single-query kernel path of
// MultiHeadAttention::step / attend, with hypotheses reordered in place (KVCache row table,
// ProjectedKV row map), against full causal / cross attention over the reordered sequences.
#include <gtest/gtest.h>

#include <omp.h>

#include <functional>

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

// attention_decode (decode_attention.h) on hand-made tensors: a row table and a row map equal
// sdpa over the gathered rows, and bad inputs throw naming the op.
TEST(AttentionDecodeOp, TableMapPaddingAndClearErrors) {
  NoGradGuard ng;
  const int64_t P = 3, L = 6, H = 2, Dh = 16, B = 4;
  Tensor k = randn({P, L, H, Dh}, 41), v = randn({P, L, H, Dh}, 42);
  Tensor wide = randn({B, 1, 3 * H * Dh}, 43);                // q: the first H * Dh of each row
  Tensor q = wide.as_strided({B, 1, H, Dh}, {3 * H * Dh, 3 * H * Dh, Dh, 1}, 0);
  const double scale = 0.25;
  // Row map: rows read storage rows {2, 0, 2, 1}; row 1 pads its last two keys.
  std::vector<int32_t> map{2, 0, 2, 1};
  std::vector<uint8_t> pad(size_t(B * L), 0);
  pad[size_t(1 * L + 4)] = pad[size_t(1 * L + 5)] = 1;
  DecodeRows rows;
  rows.map = map;
  rows.key_padding = pad;
  rows.key_padding_ld = L;
  Tensor out = attention_decode(q, k, v, rows, scale);  // (B, 1, H * Dh)
  Tensor sel = idx({2, 0, 2, 1});
  AttentionMask m;
  m.key_padding = Tensor::from_vector<uint8_t>(pad, {B, L});
  auto ref = scaled_dot_product_attention(permute(contiguous(q), {0, 2, 1, 3}),
                                          permute(index_select(k, 0, sel), {0, 2, 1, 3}),
                                          permute(index_select(v, 0, sel), {0, 2, 1, 3}), m, 0.0, false, false, scale);
  EXPECT_CLOSE(out, reshape(contiguous(permute(ref.out, {0, 2, 1, 3})), {B, 1, H * Dh}), kF32);
  // Row table (B, ld 8): position j of row r from storage row (r + j) % P.
  std::vector<int32_t> table(size_t(B * 8), 0);
  for (int64_t r = 0; r < B; ++r)
    for (int64_t j = 0; j < L; ++j) table[size_t(r * 8 + j)] = int32_t((r + j) % P);
  DecodeRows tr;
  tr.table = table;
  tr.table_ld = 8;
  Tensor out_t = attention_decode(q, k, v, tr, scale);
  Tensor kg = Tensor::empty({B, L, H, Dh}), vg = Tensor::empty({B, L, H, Dh});
  for (int64_t r = 0; r < B; ++r)
    for (int64_t j = 0; j < L; ++j) {
      const int64_t s = (r + j) % P;
      slice(slice(kg, 0, r, r + 1), 1, j, j + 1).copy_from(slice(slice(k, 0, s, s + 1), 1, j, j + 1));
      slice(slice(vg, 0, r, r + 1), 1, j, j + 1).copy_from(slice(slice(v, 0, s, s + 1), 1, j, j + 1));
    }
  auto ref_t = scaled_dot_product_attention(permute(contiguous(q), {0, 2, 1, 3}), permute(kg, {0, 2, 1, 3}),
                                            permute(vg, {0, 2, 1, 3}), {}, 0.0, false, false, scale);
  EXPECT_CLOSE(out_t, reshape(contiguous(permute(ref_t.out, {0, 2, 1, 3})), {B, 1, H * Dh}), kF32);

  auto expect_error = [&](const std::function<void()>& f, const std::string& words) {
    try {
      f();
      ADD_FAILURE() << "no error, expected one mentioning " << words;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("attention_decode"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  expect_error([&] { attention_decode(q.to(DType::f64), k, v, rows, scale); }, "q must be (B, 1, H, Dh) f32");
  expect_error([&] { attention_decode(permute(q, {0, 1, 3, 2}), k, v, rows, scale); }, "heads must be contiguous");
  expect_error([&] { attention_decode(q, permute(k, {0, 2, 1, 3}), v, rows, scale); }, "k and v must be");
  expect_error([&] { attention_decode(q, k, slice(v, 1, 0, 5), rows, scale); }, "one shape and strides");
  DecodeRows bad_map = rows;
  bad_map.map = std::span<const int32_t>(map.data(), 3);
  expect_error([&] { attention_decode(q, k, v, bad_map, scale); }, "row map: expected 4 entries");
  std::vector<int32_t> far{0, 1, 2, 3};
  DecodeRows out_of_range;
  out_of_range.map = far;
  expect_error([&] { attention_decode(q, k, v, out_of_range, scale); }, "reads storage row 3 of 3");
  expect_error([&] { attention_decode(q, k, v, DecodeRows{}, scale); }, "one row per query");
}

// A long cache (700 positions: six chunks of 128 and a remainder, kernels/cpu/attention_decode.cpp)
// is summed in chunks; a batch-1 row splits them over the threads. Its bits equal one thread's and
// the same row's inside a batch, for the scalar path (head size 24) and the AVX-512 one (32), with
// a whole chunk padded; a fully padded row gives 0; all against sdpa.
TEST(AttentionDecodeOp, LongCacheBitsDependNeitherOnThreadsNorOnTheBatch) {
  NoGradGuard ng;
  const int threads = omp_get_max_threads();
  for (int64_t Dh : {24, 32}) {
    SCOPED_TRACE("head size " + std::to_string(Dh));
    const int64_t P = 2, L = 700, H = 4, B = 3;  // H * Dh * L large enough for two threads
    Tensor k = randn({P, L, H, Dh}, 51), v = randn({P, L, H, Dh}, 52), q = randn({B, 1, H, Dh}, 53);
    std::vector<int32_t> map{1, 0, 1};
    std::vector<uint8_t> pad(size_t(B * L), 0);
    for (int64_t j = 256; j < 384; ++j) pad[size_t(j)] = 1;  // row 0: chunk 2 entirely
    for (int64_t j : {0, 5, 129, 699}) pad[size_t(j)] = 1;
    std::fill(pad.begin() + 2 * L, pad.end(), uint8_t(1));  // row 2: everything
    auto run = [&](int t, int64_t rows_n) {
      omp_set_num_threads(t);
      DecodeRows rows;
      rows.map = std::span<const int32_t>(map.data(), size_t(rows_n));
      rows.key_padding = std::span<const uint8_t>(pad.data(), size_t(rows_n * L));
      rows.key_padding_ld = L;
      Tensor out = attention_decode(slice(q, 0, 0, rows_n), k, v, rows, 0.2);
      omp_set_num_threads(threads);
      return out;
    };
    Tensor one_1 = run(1, 1), one_2 = run(2, 1), batch_1 = run(1, B), batch_2 = run(2, B);
    EXPECT_TRUE(bit_equal(one_1, one_2));
    EXPECT_TRUE(bit_equal(one_2, contiguous(slice(batch_2, 0, 0, 1))));
    EXPECT_TRUE(bit_equal(batch_1, batch_2));
    EXPECT_TRUE(bit_equal(contiguous(slice(batch_2, 0, 2, 3)), Tensor::zeros({1, 1, H * Dh})));
    Tensor sel = idx({1, 0});
    AttentionMask m;
    m.key_padding = Tensor::from_vector<uint8_t>(std::vector<uint8_t>(pad.begin(), pad.begin() + 2 * L), {2, L});
    auto ref = scaled_dot_product_attention(permute(slice(q, 0, 0, 2), {0, 2, 1, 3}),
                                            permute(index_select(k, 0, sel), {0, 2, 1, 3}),
                                            permute(index_select(v, 0, sel), {0, 2, 1, 3}), m, 0.0, false, false, 0.2);
    EXPECT_CLOSE(slice(batch_2, 0, 0, 2), reshape(contiguous(permute(ref.out, {0, 2, 1, 3})), {2, 1, H * Dh}), kF32);
  }
}
