// Saved tensors are version-checked (autograd/node.h): writing into a tensor that an op saved for
// backward, after the forward and before backward(), makes backward() throw naming the op, as
// torch refuses ("modified by an inplace operation"); it accumulates no gradient anywhere. Writing
// into a tensor no backward reads is allowed, as in torch.
#include <gtest/gtest.h>

#include "helpers.h"
#include "qkv/autograd/node.h"
#include "qkv/ops/elementwise.h"
#include "qkv/ops/matmul.h"
#include "qkv/ops/reduce.h"
#include "qkv/ops/softmax.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;

namespace {

Tensor leaf_randn(const Shape& shape, uint64_t seed) {
  Tensor t = randn(shape, seed);
  t.set_requires_grad(true);
  return t;
}

}  // namespace

TEST(SavedVersions, WritingASavedInputBeforeBackwardIsAClearError) {
  Tensor x = leaf_randn({3, 4}, 1), w = leaf_randn({4, 5}, 2);
  Tensor loss = sum(matmul(x, w));
  w.copy_from(randn({4, 5}, 3));  // e.g. weights loaded, or an optimizer step, before backward
  const std::string m = error_of([&] { backward(loss); });
  EXPECT_NE(m.find("MatmulBackward: saved tensor 2 of 2 was modified in place after the forward pass"),
            std::string::npos) << m;
  EXPECT_NE(m.find("write into a clone, or call backward() first"), std::string::npos) << m;
  // Refused before any node ran: no leaf got a gradient, and the graph is intact.
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(w.grad().defined());
}

TEST(SavedVersions, AnAnnouncedRawWriteAndAFillAreCaughtToo) {
  Tensor x = leaf_randn({2, 3}, 4), w = leaf_randn({3, 3}, 5);
  Tensor loss = sum(matmul(x, w));
  w.data<float>()[0] += 1.0f;
  w.mark_modified();  // as the optimizer kernels and nn::init announce their writes
  EXPECT_NE(error_of([&] { backward(loss); }).find("MatmulBackward: saved tensor 2 of 2"), std::string::npos);

  Tensor x2 = leaf_randn({2, 3}, 6), w2 = leaf_randn({3, 3}, 7);
  Tensor loss2 = sum(matmul(x2, w2));
  x2.fill(0.0);
  EXPECT_NE(error_of([&] { backward(loss2); }).find("MatmulBackward: saved tensor 1 of 2"), std::string::npos);
}

TEST(SavedVersions, WritingASavedOutputIsAnError) {
  // softmax's backward reads its output y: a write into y is caught (sum saves nothing, so the
  // softmax is the only node that saved y).
  Tensor x = leaf_randn({2, 6}, 8);
  Tensor y = softmax(x);
  Tensor loss = sum(y);
  y.fill(0.25);
  EXPECT_NE(error_of([&] { backward(loss); }).find("SoftmaxBackward: saved tensor 1 of 1 was modified in place"),
            std::string::npos);
  EXPECT_FALSE(x.grad().defined());
  // The first node met from the root names the error: here mul, which saved y as its input too.
  Tensor x2 = leaf_randn({2, 6}, 9);
  Tensor y2 = softmax(x2);
  Tensor loss2 = sum(mul(y2, randn({2, 6}, 10)));
  y2.fill(0.25);
  EXPECT_NE(error_of([&] { backward(loss2); }).find("MulBackward: saved tensor 1 of 2"), std::string::npos);
}

TEST(SavedVersions, WritingWhatNoBackwardReadsIsAllowed) {
  // add saves nothing (d(a + b)/da = 1): its inputs may be overwritten before backward, as in torch.
  Tensor a = leaf_randn({5}, 10), b = leaf_randn({5}, 11);
  Tensor loss = sum(add(a, b));
  a.fill(3.0);
  b.copy_from(randn({5}, 12));
  backward(loss);
  for (float g : a.grad().to_vector<float>()) EXPECT_EQ(g, 1.0f);
  for (float g : b.grad().to_vector<float>()) EXPECT_EQ(g, 1.0f);
}

TEST(SavedVersions, UnwrittenSavedTensorsPassAndRetainedGraphsRunTwice) {
  Tensor x = leaf_randn({3, 4}, 13), w = leaf_randn({4, 2}, 14);
  Tensor loss = sum(matmul(x, w));
  backward(loss, Tensor(), /*retain_graph=*/true);
  backward(loss);
  // d sum(x w)/dx[i][k] = sum_j w[k][j], accumulated twice.
  const std::vector<float> wv = w.to_vector<float>(), gx = x.grad().to_vector<float>();
  for (int i = 0; i < 3; ++i)
    for (int k = 0; k < 4; ++k) EXPECT_FLOAT_EQ(gx[size_t(i * 4 + k)], 2 * (wv[size_t(k * 2)] + wv[size_t(k * 2 + 1)]));
}
