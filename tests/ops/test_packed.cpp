// ops/packed.h: linear_packed (weights packed once, AVX-512 micro-kernel) against linear (BLAS),
// and the PackedWeights cache that repacks whenever its weights change.
#include "qkv/ops/packed.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "qkv/autograd/node.h"
#include "qkv/kernels/int8.h"
#include "qkv/kernels/optim.h"
#include "qkv/ops/elementwise.h"
#include "qkv/ops/matmul.h"
#include "qkv/ops/reduce.h"
#include "qkv/ops/shape.h"
#include "int8_threshold.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;

TEST(LinearPacked, MatchesLinearForEveryTileShape) {
  NoGradGuard ng;
  // Rows 1..17 cover full and partial 8-row tiles; N covers full, partial and single panels.
  for (int64_t M : {1, 3, 8, 9, 17, 32}) {
    for (int64_t N : {1, 5, 16, 31, 32, 33, 70, 96}) {
      for (int64_t K : {1, 7, 64, 130}) {
        for (bool bias : {true, false}) {
          SCOPED_TRACE(::testing::Message() << "M " << M << " N " << N << " K " << K << " bias " << bias);
          Tensor x = randn({M, K}, uint64_t(M * 1000 + N * 10 + K)), w = randn({N, K}, uint64_t(N + 7 * K));
          Tensor b = bias ? randn({N}, uint64_t(N + 3)) : Tensor();
          auto p = kernels::pack_linear(w, b);
          // Reductions over K terms: the f32 tolerance scaled by sqrt(K) as in test_matmul.
          Tol tol{kF32.rtol, kF32.atol * std::sqrt(double(K))};
          EXPECT_CLOSE(linear_packed(x, p), linear(x, w, b), tol);
        }
      }
    }
  }
}

// in_features 0: every output row is the bias (an empty sum), as linear gives; it divided by K = 0.
TEST(LinearPacked, NoInputFeaturesGiveTheBias) {
  NoGradGuard ng;
  const Tensor w = Tensor::full({3, 0}, 0.5), b = Tensor::from_vector<float>({1, 2, 3}, {3});
  const Tensor x = Tensor::full({2, 4, 0}, 2.0);
  for (const Tensor& bias : {b, Tensor()}) {
    const Tensor y = linear_packed(x, kernels::pack_linear(w, bias));
    ASSERT_EQ(y.shape(), Shape({2, 4, 3}));
    for (int64_t i = 0; i < y.numel(); ++i) EXPECT_EQ(y.data<float>()[i], bias.defined() ? float(i % 3 + 1) : 0.f);
  }
}

TEST(LinearPacked, LargeShapesTakeTheParallelPaths) {
  NoGradGuard ng;
  // N * K >= 2^18 packs the panels on the pool and M * N * K >= 2^22 multiplies on it, whatever
  // the wait policy (kernels/parallel.h); N = 1000 leaves a partial last panel to zero-pad.
  const int64_t M = 32, N = 1000, K = 300;
  // Against the f64 product, not f32 BLAS: two f32 sums in different orders may differ by twice
  // the tolerance each meets (OpenBLAS's Zen kernels did, at 1.05x).
  Tensor x = randn({M, K}, 11), w = randn({N, K}, 12), b = randn({N}, 13);
  Tol tol{kF32.rtol, kF32.atol * std::sqrt(double(K))};
  const Tensor exact = linear(x.to(DType::f64), w.to(DType::f64), b.to(DType::f64)).to(DType::f32);
  EXPECT_CLOSE(linear_packed(x, kernels::pack_linear(w, b)), exact, tol);
}

// Hundreds of rows ending in a partial tile, on the pool (M * N * K >= 2^22). Each row's outputs
// are its bias plus its k-ordered FMAs whatever rows share the call (decoding relies on it: a
// sentence's tokens do not depend on its batch), so every slice of rows gives the whole product's
// bits.
TEST(LinearPacked, SlicesOfRowsGiveTheWholeProductsBits) {
  NoGradGuard ng;
  const int64_t M = 523, N = 130, K = 70;
  Tensor x = randn({M, K}, 21), w = randn({N, K}, 22), b = randn({N}, 23);
  const auto p = kernels::pack_linear(w, b);
  const Tensor whole = linear_packed(x, p);
  const Tensor exact = linear(x.to(DType::f64), w.to(DType::f64), b.to(DType::f64)).to(DType::f32);
  EXPECT_CLOSE(whole, exact, (Tol{kF32.rtol, kF32.atol * std::sqrt(double(K))}));
  for (int64_t r0 = 0; r0 < M; r0 += 37) {
    const int64_t r1 = std::min(M, r0 + 37);
    const Tensor part = linear_packed(slice(x, 0, r0, r1), p);
    for (int64_t i = 0; i < (r1 - r0) * N; ++i)
      ASSERT_EQ(part.data<float>()[i], whole.data<float>()[r0 * N + i]) << "row " << r0 + i / N << " col " << i % N;
  }
}

TEST(LinearPacked, LeadingAxesStridedRowsAndF64) {
  NoGradGuard ng;
  Tensor w = randn({40, 24}, 1), b = randn({40}, 2);
  auto p = kernels::pack_linear(w, b);
  Tensor x = randn({3, 5, 24}, 3);  // (B, T, K) -> (B, T, N)
  EXPECT_CLOSE(linear_packed(x, p), linear(x, w, b), kF32);
  Tensor wide = randn({6, 48}, 4);  // rows with a stride of 48: a column slice
  Tensor xs = wide.as_strided({6, 24}, {48, 1}, 8);
  EXPECT_CLOSE(linear_packed(xs, p), linear(xs, w, b), kF32);
  Tensor w64 = randn({9, 5}, 5, DType::f64), x64 = randn({4, 5}, 6, DType::f64);
  EXPECT_CLOSE(linear_packed(x64, kernels::pack_linear(w64, Tensor())), linear(x64, w64), kF64);
  EXPECT_THROW(linear_packed(randn({2, 23}, 7), p), Error);  // K mismatch names the op
}

// PackedWeights (ops/packed.h): one pack while nothing changes, a new one after every kind of write.
TEST(PackedWeights, RepacksExactlyWhenASourceChanged) {
  NoGradGuard ng;
  Tensor w = randn({40, 24}, 21), b = randn({40}, 22), x = randn({3, 24}, 23);
  PackedWeights cache;
  auto p1 = cache.get({w}, {b});
  EXPECT_EQ(cache.get({w}, {b}), p1);  // unchanged: the same pack
  EXPECT_CLOSE(linear_packed(x, *p1), linear(x, w, b), kF32);
  auto expect_repacked = [&](const char* what, const Tensor& nw, const Tensor& nb) {
    SCOPED_TRACE(what);
    auto before = cache.get({nw}, {nb});
    EXPECT_EQ(cache.get({nw}, {nb}), before);
    return before;
  };
  std::shared_ptr<const kernels::PackedLinear> last = p1;
  w.copy_from(mul(w, 3.0));  // copy_from
  auto p2 = expect_repacked("copy_from", w, b);
  EXPECT_NE(p2, last);
  EXPECT_CLOSE(linear_packed(x, *p2), linear(x, w, b), kF32);
  last = p2;
  b.fill(0.5);  // fill (the bias)
  auto p3 = expect_repacked("fill", w, b);
  EXPECT_NE(p3, last);
  EXPECT_CLOSE(linear_packed(x, *p3), linear(x, w, b), kF32);
  last = p3;
  w.data<float>()[7] += 1.f;  // a raw write, announced
  w.mark_modified();
  auto p4 = expect_repacked("mark_modified", w, b);
  EXPECT_NE(p4, last);
  EXPECT_CLOSE(linear_packed(x, *p4), linear(x, w, b), kF32);
  last = p4;
  Tensor w2 = randn({40, 24}, 24);  // another tensor in the weight's place
  auto p5 = expect_repacked("replaced", w2, b);
  EXPECT_NE(p5, last);
  EXPECT_CLOSE(linear_packed(x, *p5), linear(x, w2, b), kF32);
  // The optimizer kernels announce their writes too.
  Tensor g = randn({40, 24}, 25), m = Tensor::zeros({40, 24}), v = Tensor::zeros({40, 24});
  kernels::AdamStep h;
  h.lr = 0.1;
  h.step = 1;
  kernels::adam_update(w2, g, m, v, nullptr, h);
  auto p6 = cache.get({w2}, {b});
  EXPECT_NE(p6, p5);
  EXPECT_CLOSE(linear_packed(x, *p6), linear(x, w2, b), kF32);
}

TEST(PackedWeights, StackedWeightsEqualTheirConcatenation) {
  NoGradGuard ng;
  Tensor wq = randn({16, 24}, 31), wk = randn({16, 24}, 32), wv = randn({16, 24}, 33);
  Tensor bq = randn({16}, 34), bk = randn({16}, 35), bv = randn({16}, 36), x = randn({5, 24}, 37);
  PackedWeights cache;
  auto p = cache.get({wq, wk, wv}, {bq, bk, bv});
  EXPECT_EQ(p->N, 48);
  EXPECT_CLOSE(linear_packed(x, *p), linear(x, concat({wq, wk, wv}, 0), concat({bq, bk, bv}, 0)), kF32);
  wk.fill(0.25);  // one source of three written: repacked
  auto p2 = cache.get({wq, wk, wv}, {bq, bk, bv});
  EXPECT_NE(p2, p);
  EXPECT_CLOSE(linear_packed(x, *p2), linear(x, concat({wq, wk, wv}, 0), concat({bq, bk, bv}, 0)), kF32);
  EXPECT_THROW(cache.get({wq, wk}, {bq}), Error);               // a bias per weight, or none
  EXPECT_THROW(cache.get({wq, wk}, {bq, Tensor()}), Error);     // all or none defined
}

// The rows layout (kernels::PackLayout::rows): the weights read in place, no copy; the same
// staleness rules; stacked weights never concatenated; recorded products stay differentiable.
TEST(PackedWeights, RowsLayoutReadsTheWeightsInPlace) {
  NoGradGuard ng;
  Tensor wq = randn({16, 24}, 41), wk = randn({16, 24}, 42), wv = randn({16, 24}, 43);
  Tensor bq = randn({16}, 44), bk = randn({16}, 45), bv = randn({16}, 46), x = randn({5, 24}, 47);
  PackedWeights cache;
  auto panels = cache.get({wq, wk, wv}, {bq, bk, bv});
  EXPECT_EQ(panels->layout, kernels::PackLayout::panels);
  cache.set_layout(kernels::PackLayout::rows);
  auto p = cache.get({wq, wk, wv}, {bq, bk, bv});
  EXPECT_NE(p, panels);
  EXPECT_EQ(p->layout, kernels::PackLayout::rows);
  ASSERT_EQ(p->rows.size(), 3u);
  EXPECT_EQ(p->rows[1].data<float>(), wk.data<float>());
  EXPECT_FALSE(p->panels.defined());
  EXPECT_EQ(cache.get({wq, wk, wv}, {bq, bk, bv}), p);  // unchanged: the same pack
  EXPECT_CLOSE(linear_packed(x, *p), linear(x, concat({wq, wk, wv}, 0), concat({bq, bk, bv}, 0)), kF32);
  bk.fill(0.5);  // a bias written: a new pack (the biases are concatenated)
  auto p2 = cache.get({wq, wk, wv}, {bq, bk, bv});
  EXPECT_NE(p2, p);
  EXPECT_CLOSE(linear_packed(x, *p2), linear(x, concat({wq, wk, wv}, 0), concat({bq, bk, bv}, 0)), kF32);
  // A weight that is not contiguous (a transposed view) is packed into panels instead.
  Tensor wt = randn({24, 16}, 48);
  PackedWeights other;
  other.set_layout(kernels::PackLayout::rows);
  auto pt = other.get({transpose(wt, 0, 1)});
  EXPECT_EQ(pt->layout, kernels::PackLayout::panels);
  EXPECT_CLOSE(linear_packed(x, *pt), linear(x, transpose(wt, 0, 1), Tensor()), kF32);
}

// The rows layout under bf16: the stacked weights converted once into one bf16 copy (not oneDNN's
// layout), the same pack while nothing changes, converted again after a weight is written; a
// switch to panels drops it.
TEST(PackedWeights, RowsLayoutInBf16ConvertsOnce) {
  NoGradGuard ng;
  Tensor wq = randn({16, 24}, 81), wk = randn({16, 24}, 82), x = randn({5, 24}, 83);
  const auto direct = kernels::pack_linear_rows({concat({wq, wk}, 0)}, Tensor(), kernels::MatmulPrecision::bf16);
  PackedWeights cache;
  cache.set_layout(kernels::PackLayout::rows);
  const int64_t before = kernels::bf16_weights_packed();
  auto p = cache.get({wq, wk}, {}, kernels::MatmulPrecision::bf16);
  EXPECT_EQ(p->layout, kernels::PackLayout::rows);
  EXPECT_TRUE(p->rows_bf16 != nullptr);
  EXPECT_TRUE(p->bf16 == nullptr);
  EXPECT_EQ(cache.get({wq, wk}, {}, kernels::MatmulPrecision::bf16), p);
  EXPECT_EQ(kernels::bf16_weights_packed() - before, 1);
  auto f = cache.get({wq, wk}, {}, kernels::MatmulPrecision::fp32);  // its own form, in place
  EXPECT_TRUE(f->rows_bf16 == nullptr);
  EXPECT_EQ(f->rows[0].data<float>(), wq.data<float>());
  // The kernel's own bits (test_packed_rows_bf16.cpp checks them against the exact product).
  EXPECT_TRUE(bit_equal(linear_packed(x, *p), linear_packed(x, direct)));
  wk.data<float>()[3] = 100.f;
  wk.mark_modified();
  auto p2 = cache.get({wq, wk}, {}, kernels::MatmulPrecision::bf16);
  EXPECT_NE(p2, p);
  EXPECT_EQ(kernels::bf16_weights_packed() - before, 2);
  EXPECT_EQ(cache.layout(kernels::MatmulPrecision::bf16), kernels::PackLayout::rows);
  // Each form's layout on its own: fp32 back to panels keeps the bf16 rows pack.
  cache.set_layout(kernels::PackLayout::panels, kernels::MatmulPrecision::fp32);
  EXPECT_EQ(cache.get({wq, wk}, {}, kernels::MatmulPrecision::bf16), p2);
  EXPECT_TRUE(cache.get({wq, wk}, {}, kernels::MatmulPrecision::fp32)->panels.defined());
  cache.set_layout(kernels::PackLayout::rows, kernels::MatmulPrecision::int8);  // int8's own: bf16 keeps its pack
  EXPECT_EQ(cache.layout(kernels::MatmulPrecision::int8), kernels::PackLayout::rows);
  EXPECT_EQ(cache.get({wq, wk}, {}, kernels::MatmulPrecision::bf16), p2);
  // Panels: oneDNN's bf16 form (which needs AMX or AVX512_BF16) under native products, else qkv's.
  const kernels::Bf16ProductsScope products(kernels::dnnl_cpu_info().bf16_native() ? kernels::Bf16Products::native
                                                                                    : kernels::Bf16Products::fp32_fma);
  cache.set_layout(kernels::PackLayout::panels, kernels::MatmulPrecision::bf16);
  auto q = cache.get({wq, wk}, {}, kernels::MatmulPrecision::bf16);
  EXPECT_EQ(q->layout, kernels::PackLayout::panels);
  EXPECT_TRUE(kernels::bf16_products() == kernels::Bf16Products::native ? q->bf16 != nullptr
                                                                        : q->bf16_panels != nullptr);
  EXPECT_TRUE(q->rows_bf16 == nullptr);
}

TEST(PackedWeights, RowsLayoutRecordsThroughTheConcatenation) {
  Tensor wq = randn({8, 6}, 51), wk = randn({8, 6}, 52), x = randn({3, 6}, 53);
  wq.set_requires_grad(true);
  wk.set_requires_grad(true);
  PackedWeights cache;
  cache.set_layout(kernels::PackLayout::rows);
  auto p = cache.get({wq, wk});
  Tensor y = linear_packed(x, *p);  // grad mode on, weights require grad: recorded
  ASSERT_TRUE(y.requires_grad());
  backward(sum(y));
  // d sum(x W^T) / dW = ones (N, M) @ x: every row of both gradients is the column sums of x.
  Tensor expect = sum(x, {0}, true);  // (1, 6)
  EXPECT_CLOSE(wq.grad(), expand(expect, {8, 6}).contiguous(), kF32);
  EXPECT_CLOSE(wk.grad(), expand(expect, {8, 6}).contiguous(), kF32);
}

// PackedWeights under int8: a stack that pays gets its own quantized form, made once and again
// after a weight changes; a stack too small to pay shares the fp32 form (the same object, in the
// owner's layout), so it costs no second copy.
TEST(PackedWeights, Int8KeepsItsOwnFormOnlyForStacksThatPay) {
  if (!kernels::int8_supported()) GTEST_SKIP() << "no int8 kernel here";
  Int8Threshold restore(kernels::int8_min_weight_elements());  // as it was, at the end
  Tensor wq = randn({64, 32}, 311), wk = randn({64, 32}, 312);
  PackedWeights cache;
  {
    kernels::set_int8_min_weight_elements(128 * 32);  // the stack [wq; wk] (128, 32) pays; wq alone would not
    const int64_t before = kernels::int8_weights_packed();
    auto a = cache.get({wq, wk}, {}, kernels::MatmulPrecision::int8);
    ASSERT_TRUE(a->int8 != nullptr);
    EXPECT_EQ(a->N, 128);
    EXPECT_EQ(cache.get({wq, wk}, {}, kernels::MatmulPrecision::int8), a);
    EXPECT_EQ(kernels::int8_weights_packed() - before, 1);
    auto f = cache.get({wq, wk}, {}, kernels::MatmulPrecision::fp32);
    EXPECT_TRUE(f->int8 == nullptr);
    EXPECT_NE(f, a);
    wk.data<float>()[3] = 100.f;
    wk.mark_modified();
    auto c = cache.get({wq, wk}, {}, kernels::MatmulPrecision::int8);
    EXPECT_NE(c, a);
    EXPECT_EQ(kernels::int8_weights_packed() - before, 2);
  }
  kernels::set_int8_min_weight_elements(128 * 32 + 1);
  PackedWeights rows;
  rows.set_layout(kernels::PackLayout::rows);
  auto f = rows.get({wq, wk}, {}, kernels::MatmulPrecision::fp32);
  auto i = rows.get({wq, wk}, {}, kernels::MatmulPrecision::int8);
  EXPECT_EQ(i, f) << "a stack too small to pay must share the fp32 form";
  EXPECT_EQ(i->layout, kernels::PackLayout::rows);
}

// The int8 rows layout (s8 rows: qkv's kernel below int8_rows_max_batch() rows, oneDNN reading
// them as plain weights from there) gives the blocked form's bits at every batch: both quantize
// the same way and sum exactly in int32. A stack that pays only from a batch multiplies its fp32
// rows below int8_small_weight_min_rows() rows, as the fp32 rows pack does.
TEST(PackedWeights, Int8RowsLayoutGivesTheBlockedFormsBits) {
  if (!kernels::int8_native()) GTEST_SKIP() << "no AVX512-VNNI or AMX int8 kernel here (no blocked form)";
  Tensor wq = randn({384, 128}, 331), wk = randn({128, 128}, 332), b = randn({512}, 333);
  const std::vector<Tensor> biases{slice(b, 0, 0, 384), slice(b, 0, 384, 512)};
  for (const bool from_batch : {false, true}) {
    Int8Threshold always(from_batch ? 512 * 128 + 1 : 512 * 128);
    Int8SmallWeightRows small(from_batch ? 3 : kernels::int8_small_weight_min_rows());
    ASSERT_EQ(kernels::int8_pays_from_rows(512, 128), from_batch);
    PackedWeights blocked, rows, fp32_rows;
    rows.set_layout(kernels::PackLayout::rows);
    fp32_rows.set_layout(kernels::PackLayout::rows);
    auto pb = blocked.get({wq, wk}, biases, kernels::MatmulPrecision::int8);
    auto pr = rows.get({wq, wk}, biases, kernels::MatmulPrecision::int8);
    auto pf = fp32_rows.get({wq, wk}, biases, kernels::MatmulPrecision::fp32);
    ASSERT_TRUE(pb->int8 != nullptr && pr->int8 != nullptr);
    EXPECT_FALSE(kernels::int8_weight_in_rows(*pb->int8));
    EXPECT_TRUE(kernels::int8_weight_in_rows(*pr->int8));
    EXPECT_EQ(pr->layout, kernels::PackLayout::rows);
    EXPECT_EQ(pr->int8_from_batch, from_batch);
    for (int64_t M : {1, 2, 3, 4, 5, 8}) {
      SCOPED_TRACE("from_batch " + std::to_string(from_batch) + ", M " + std::to_string(M));
      const Tensor x = randn({M, 128}, 340 + uint64_t(M));
      Tensor got = Tensor::empty({M, 512}), want = Tensor::empty({M, 512});
      kernels::packed_linear(x, *pr, got);
      kernels::packed_linear(x, from_batch && M < 3 ? *pf : *pb, want);
      EXPECT_TRUE(bit_equal(got, want));
    }
  }
}

// A stack's bf16 or int8 form without fp32 panels keeps no joined f32 copy of its weights (for
// GPT-2 in int8 that copy was 81 MiB): `weight` is empty and `rows` holds the originals, which
// the fallbacks join per call. Each fallback must give what the joined weight gives.
TEST(PackedWeights, LowPrecisionStacksKeepNoJoinedCopy) {
  Tensor wq = randn({64, 32}, 321), wk = randn({64, 32}, 322), b = randn({128}, 323);
  const Tensor joined = concat({wq, wk}, 0);
  auto expect_originals = [&](const kernels::PackedLinear& p) {
    EXPECT_FALSE(p.weight.defined()) << "a joined copy is kept";
    ASSERT_EQ(p.rows.size(), 2u);
    EXPECT_TRUE(p.rows[0].same(wq) && p.rows[1].same(wk));
    EXPECT_TRUE(bit_equal(p.original_weight(), joined));
  };
  if (kernels::int8_supported()) {
    Int8Threshold restore(kernels::int8_min_weight_elements());
    kernels::set_int8_min_weight_elements(128 * 32);  // the stack pays from one row: int8 form only
    PackedWeights cache;
    auto p = cache.get({wq, wk}, {slice(b, 0, 0, 64), slice(b, 0, 64, 128)}, kernels::MatmulPrecision::int8);
    ASSERT_TRUE(p->int8 != nullptr && !p->panels.defined());
    expect_originals(*p);
    // x with strided rows: the fp32 product against the joined originals, bit for bit.
    Tensor xt = transpose(randn({32, 5}, 324), 0, 1);  // (5, 32), column stride 5
    Tensor out = Tensor::empty({5, 128}), want = Tensor::empty({5, 128});
    kernels::packed_linear(xt, *p, out);
    kernels::linear(xt, joined, b, want);
    EXPECT_TRUE(bit_equal(out, want));
    // Recorded (x requires grad): through the concatenation, the gradient reaching wq.
    wq.set_requires_grad(true);
    Tensor x = randn({3, 32}, 325);
    x.set_requires_grad(true);
    backward(sum(linear_packed(x, *p)));
    ASSERT_TRUE(wq.grad().defined());
    EXPECT_CLOSE(wq.grad(), expand(sum(x.detach(), {0}, true), {64, 32}).contiguous(), kF32);
    wq.set_requires_grad(false);
  }
  // Panels layout: oneDNN's bf16 form (native products, which need AMX or AVX512_BF16), or qkv's
  // bf16 panels (fp32_fma); neither reads a joined copy.
  for (const auto how : {kernels::Bf16Products::native, kernels::Bf16Products::fp32_fma}) {
    if (how == kernels::Bf16Products::native && !kernels::dnnl_cpu_info().bf16_native()) continue;
    SCOPED_TRACE(kernels::bf16_products_name(how));
    const kernels::Bf16ProductsScope products(how);
    PackedWeights cache;
    auto p = cache.get({wq, wk}, {}, kernels::MatmulPrecision::bf16);
    ASSERT_TRUE((how == kernels::Bf16Products::native ? p->bf16 != nullptr : p->bf16_panels != nullptr) &&
                !p->panels.defined());
    expect_originals(*p);
    // A batch on a CPU whose bf16 products run as fp32_fma: the joined originals, rounded.
    const kernels::Bf16ProductsScope fma(kernels::Bf16Products::fp32_fma);
    Tensor x = randn({kernels::bf16_fma_min_rows, 32}, 326);
    Tensor out = Tensor::empty({kernels::bf16_fma_min_rows, 128}), want = out.clone();
    kernels::packed_linear(x, *p, out);
    kernels::packed_linear(x, kernels::pack_linear(joined, Tensor(), kernels::MatmulPrecision::bf16), want);
    EXPECT_TRUE(bit_equal(out, want));
  }
}
