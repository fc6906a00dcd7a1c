// BertMlmHead::loss (pretraining's MLM loss over the labelled positions only, through
// linear_cross_entropy) against the head's full logits and cross_entropy, values and gradients;
// a batch with nothing to predict gives 0 and zero gradients. BertTrajectory checks the whole
// pretraining step against PyTorch.
#include <gtest/gtest.h>

#include <vector>

#include "qkv/autograd/node.h"
#include "qkv/models/bert.h"
#include "qkv/ops/loss.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;

namespace {

struct Head {
  models::BertConfig cfg;
  Tensor words;
  std::shared_ptr<models::BertMlmHead> head;
  Head() {
    cfg.vocab_size = 50, cfg.hidden_size = 16, cfg.num_attention_heads = 2, cfg.intermediate_size = 32;
    words = randn({50, 16}, 81);
    words.set_requires_grad(true);
    Generator g(82);
    head = std::make_shared<models::BertMlmHead>(cfg, words, g);
  }
};

}  // namespace

// In f64 (the head's tensors replaced by f64 leaves), so that the two sums differ only by
// rounding: the loss over the labelled rows equals cross_entropy of the full logits, and so do
// the gradients of x and of every tensor of the head (linear_cross_entropy's own fp32 accuracy is
// checked against PyTorch by LinearCrossEntropy.*).
TEST(BertMlmLoss, EqualsCrossEntropyOfTheFullLogitsInF64) {
  Head h;
  auto& tr = *h.head->transform;
  std::vector<Tensor*> slots = {&h.head->decoder_weight, &tr.dense->weight, &tr.dense->bias, &tr.layer_norm->weight,
                                &tr.layer_norm->bias, &h.head->bias};
  for (Tensor* t : slots) {
    *t = t->to(DType::f64);
    t->set_requires_grad(true);
  }
  const Tensor labels = Tensor::from_vector<int64_t>(
      {-100, 7, -100, -100, 49, 0, -100, -100, -100, 3, -100, 12, -100, -100, -100, 7, -100, -100, 21, -100}, {2, 10});
  const Tensor x0 = randn({2, 10, 16}, 83, DType::f64);
  for (Reduction red : {Reduction::mean, Reduction::sum}) {
    std::vector<std::vector<Tensor>> grads(2);
    double loss[2];
    for (int full = 0; full < 2; ++full) {
      for (Tensor* t : slots) t->zero_grad();
      Tensor x = x0.clone();
      x.set_requires_grad(true);
      Tensor y = full ? cross_entropy(h.head->forward(x), labels, -100, 0.0, red) : h.head->loss(x, labels, red);
      backward(y);
      loss[full] = y.item();
      grads[size_t(full)].push_back(x.grad());
      for (Tensor* t : slots) grads[size_t(full)].push_back(t->grad());
    }
    EXPECT_NEAR(loss[0], loss[1], 1e-12 * std::abs(loss[1]));
    for (size_t i = 0; i < grads[0].size(); ++i) EXPECT_CLOSE(grads[0][i], grads[1][i], (Tol{1e-11, 1e-13})) << i;
  }
}

TEST(BertMlmLoss, NothingToPredictGivesZeroAndZeroGradients) {
  Head h;
  Tensor x = randn({2, 4, 16}, 84);
  x.set_requires_grad(true);
  Tensor loss = h.head->loss(x, Tensor::full({2, 4}, -100.0, DType::i64), Reduction::sum);
  EXPECT_EQ(loss.item(), 0.0);
  backward(loss);
  for (float g : x.grad().to_vector<float>()) ASSERT_EQ(g, 0.f);
  for (float g : h.words.grad().to_vector<float>()) ASSERT_EQ(g, 0.f);
  for (float g : h.head->bias.grad().to_vector<float>()) ASSERT_EQ(g, 0.f);
  EXPECT_THROW(h.head->loss(x, Tensor::zeros({2, 3}, DType::i64), Reduction::sum), Error);
}
