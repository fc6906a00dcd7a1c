// Packed decoding weights follow the parameters (ops/packed.h PackedWeights, owned by
// nn::Linear, nn::Embedding's tied head and MultiHeadAttention's fused [W_q; W_k; W_v]): decode,
// take an optimizer step, decode again; the steps' logits equal the unpacked full forward of the
// updated weights, and differ from the first decode's (so a stale pack would fail the test).
#include <gtest/gtest.h>

#include "qkv/autograd/node.h"
#include "qkv/models/gpt.h"
#include "qkv/models/transformer.h"
#include "qkv/ops/elementwise.h"
#include "qkv/ops/reduce.h"
#include "qkv/ops/shape.h"
#include "qkv/train/optim.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;

namespace {

// One Adam step on mean(logits^2) (any loss that moves every weight will do).
void adam_step(nn::Module& m, const std::function<Tensor()>& logits) {
  ParamGroup group;
  group.params = m.parameters();
  Adam opt({group}, /*lr=*/0.05);
  m.train();
  backward(mean(mul(logits(), logits())));
  opt.step();
  m.eval();
}

// Max |a - b| over all elements.
double max_diff(const Tensor& a, const Tensor& b) {
  auto x = a.to_vector<float>(), y = b.to_vector<float>();
  double d = 0;
  for (size_t i = 0; i < x.size(); ++i) d = std::max(d, double(std::abs(x[i] - y[i])));
  return d;
}

}  // namespace

TEST(PackedNeverStale, TransformerStepsAfterAnOptimizerStep) {
  // tie_output: the generator's weight is the shared embedding (replaced by tie, then written in place).
  const auto cfg = nlohmann::json{{"src_vocab", 40}, {"tgt_vocab", 40}, {"d_model", 32}, {"heads", 2},
                                  {"enc_layers", 2},  {"dec_layers", 2}, {"d_ff", 64},    {"dropout", 0.0},
                                  {"tie_output", true}, {"shared_embeddings", true}}
                       .get<models::TransformerConfig>();
  Generator gen(3);
  models::Transformer m(cfg, gen);
  m.eval();
  const int64_t B = 2, S = 5, T = 4;
  Tensor src = Tensor::from_vector<int64_t>({5, 6, 7, 8, 9, 10, 11, 12, 13, 14}, {B, S});
  Tensor tgt = Tensor::from_vector<int64_t>({1, 20, 21, 22, 1, 23, 24, 25}, {B, T});
  Tensor pad = Tensor::zeros({B, S}, DType::u8);
  auto decode = [&] {  // the steps' logits, (B, T, V)
    NoGradGuard ng;
    auto st = m.start(src, pad);
    std::vector<Tensor> out;
    for (int64_t t = 0; t < T; ++t) out.push_back(reshape(m.step(*st, contiguous(slice(tgt, 1, t, t + 1))), {B, 1, -1}));
    return concat(out, 1);
  };
  auto full = [&] {
    NoGradGuard ng;
    return m.forward(src, pad, tgt);
  };
  Tensor before = decode();
  EXPECT_CLOSE(before, full(), kF32);
  adam_step(m, [&] { return m.forward(src, pad, tgt); });
  Tensor after = decode();
  EXPECT_CLOSE(after, full(), kF32);  // the packed weights were rebuilt from the updated values
  EXPECT_GT(max_diff(after, before), 1e-2);
}

TEST(PackedNeverStale, GptStepsAfterAnOptimizerStepAndAfterCopyFrom) {
  const auto cfg = nlohmann::json{{"vocab_size", 50}, {"n_positions", 16}, {"n_embd", 32}, {"n_layer", 2},
                                  {"n_head", 2},      {"resid_pdrop", 0.0}, {"embd_pdrop", 0.0}, {"attn_pdrop", 0.0}}
                       .get<models::GptConfig>();
  Generator gen(4);
  models::Gpt m(cfg, gen);
  m.eval();
  Tensor ids = Tensor::from_vector<int64_t>({3, 9, 27, 4, 8, 12, 16, 20}, {2, 4});
  Tensor pos = Tensor::from_vector<int64_t>({0, 1, 2, 3, 0, 1, 2, 3}, {2, 4});
  auto decode = [&] {  // prompt of 3, then one step: (2, 4, V)
    NoGradGuard ng;
    auto c = m.start();
    Tensor a = m.step(contiguous(slice(ids, 1, 0, 3)), c, contiguous(slice(pos, 1, 0, 3)));
    Tensor b = m.step(contiguous(slice(ids, 1, 3, 4)), c, contiguous(slice(pos, 1, 3, 4)));
    return concat({a, b}, 1);
  };
  auto full = [&] {
    NoGradGuard ng;
    return m.forward(ids);
  };
  Tensor before = decode();
  EXPECT_CLOSE(before, full(), kF32);
  adam_step(m, [&] { return m.forward(ids); });
  Tensor after = decode();
  EXPECT_CLOSE(after, full(), kF32);
  EXPECT_GT(max_diff(after, before), 1e-2);
  // A write that is not an optimizer step: new values copied into the tied embedding.
  {
    NoGradGuard ng;
    m.embed_tokens->weight.copy_from(mul(m.embed_tokens->weight, 2.0));
  }
  Tensor copied = decode();
  EXPECT_CLOSE(copied, full(), kF32);
  EXPECT_GT(max_diff(copied, after), 1e-2);
}
