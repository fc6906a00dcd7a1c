// EncoderBlock / DecoderBlock against torch.nn.TransformerEncoderLayer / TransformerDecoderLayer
// (tools/refs/models_transformer.py, cases layer_*): post-LN and pre-LN, every activation the config
// accepts (ReLU, GELU erf, GELU tanh, SiLU), key-padding
// and causal masks; forward and the gradients of the inputs and of every parameter.
#include <gtest/gtest.h>

#include <cmath>

#include "qkv/autograd/node.h"
#include "qkv/models/transformer_blocks.h"
#include "qkv/ops/shape.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;
using namespace qkv::models;

namespace {

BlockOptions options_of(const nlohmann::json& p) {
  BlockOptions o;
  o.d_model = p["d_model"];
  o.heads = p["heads"];
  o.d_ff = p["d_ff"];
  o.dropout = 0.0;
  o.activation = nn::parse_activation(p["activation"]);
  o.pre_norm = p["pre_norm"];
  return o;
}

std::map<std::string, Tensor> params_of(const RefFile& ref, const std::string& c) {
  std::map<std::string, Tensor> sd;
  for (auto& [name, t] : ref.contents().tensors)
    if (name.rfind(c + "/p.", 0) == 0) sd[name.substr(c.size() + 3)] = t;
  return sd;
}

// f32 tolerance with the absolute floor scaled by the tensor's largest element: K/Q projection
// gradients are sums of terms of size ~max|g| that cancel (softmax backward), so an element's
// error is relative to those terms, not to the small result. Measured on layer_dec_pre_relu
// (max|g| 2.6): torch's own f32 gradient is off its f64 value by 8.3e-7 absolute, qkv's by 7.6e-7.
Tol grad_tol(const Tensor& ref) {
  double mx = 0;
  for (double v : ref.to_vector<double>()) mx = std::max(mx, std::abs(v));
  return {kF32.rtol, kF32.atol * std::max(1.0, mx)};
}

void expect_param_grads(const nn::Module& m, const RefFile& ref, const std::string& c, size_t expected_count) {
  size_t n = 0;
  for (auto& [name, t] : m.named_parameters()) {
    SCOPED_TRACE(name);
    Tensor expected = ref.get(c, "g." + name);
    EXPECT_CLOSE(t.grad(), expected, grad_tol(expected));
    ++n;
  }
  EXPECT_EQ(n, expected_count);
}

}  // namespace

TEST(TransformerLayers, EncoderBlockMatchesTorchEncoderLayer) {
  RefFile ref("models_transformer");
  int n = 0;
  for (auto& c : ref.cases()) {
    if (c.rfind("layer_enc_", 0) != 0) continue;
    SCOPED_TRACE(c);
    auto p = ref.params(c);
    EncoderBlock block(options_of(p));
    block.load_state_dict(params_of(ref, c), /*strict=*/true, c);  // also checks every name
    Tensor x = ref.get(c, "x").clone().set_requires_grad(true);
    AttentionMask mask;
    mask.key_padding = ref.get(c, "key_padding");
    mask.causal = p["causal"].get<bool>();
    Tensor y = block.forward(x, mask);
    EXPECT_CLOSE(y, ref.get(c, "y"), kF32);
    backward(y, ref.get(c, "gy"));
    EXPECT_CLOSE(x.grad(), ref.get(c, "gx"), kF32);
    expect_param_grads(block, ref, c, 16);
    ++n;
  }
  EXPECT_EQ(n, 7);  // relu, gelu x post/pre; the causal GPT block; gelu_tanh (post), silu (pre)
}

TEST(TransformerLayers, DecoderBlockMatchesTorchDecoderLayer) {
  RefFile ref("models_transformer");
  int n = 0;
  for (auto& c : ref.cases()) {
    if (c.rfind("layer_dec_", 0) != 0) continue;
    SCOPED_TRACE(c);
    DecoderBlock block(options_of(ref.params(c)));
    block.load_state_dict(params_of(ref, c), /*strict=*/true, c);
    Tensor x = ref.get(c, "x").clone().set_requires_grad(true);
    Tensor mem = ref.get(c, "memory").clone().set_requires_grad(true);
    AttentionMask self_mask, mem_mask;
    self_mask.causal = true;
    mem_mask.key_padding = ref.get(c, "memory_padding");
    Tensor y = block.forward(x, mem, self_mask, mem_mask);
    EXPECT_CLOSE(y, ref.get(c, "y"), kF32);
    backward(y, ref.get(c, "gy"));
    EXPECT_CLOSE(x.grad(), ref.get(c, "gx"), kF32);
    EXPECT_CLOSE(mem.grad(), ref.get(c, "gmemory"), kF32);
    expect_param_grads(block, ref, c, 26);
    ++n;
  }
  EXPECT_EQ(n, 6);  // relu, gelu x post/pre; gelu_tanh (pre), silu (post)
}

TEST(TransformerLayers, DecoderBlockStepsEqualTorchFullForward) {
  RefFile ref("models_transformer");
  for (std::string c : {"layer_dec_post_relu", "layer_dec_pre_gelu", "layer_dec_pre_gelu_tanh", "layer_dec_post_silu"}) {
    SCOPED_TRACE(c);
    DecoderBlock block(options_of(ref.params(c)));
    block.load_state_dict(params_of(ref, c), true, c);
    NoGradGuard ng;
    Tensor x = ref.get(c, "x"), y = ref.get(c, "y");
    AttentionMask mem_mask;
    mem_mask.key_padding = ref.get(c, "memory_padding");
    DecoderLayerCache cache = block.start(ref.get(c, "memory"));
    for (int64_t t = 0; t < x.size(1); ++t) {
      SCOPED_TRACE(t);
      Tensor out = block.step(contiguous(slice(x, 1, t, t + 1)), cache, mem_mask);  // (B, 1, D)
      EXPECT_CLOSE(out, contiguous(slice(y, 1, t, t + 1)), kF32);
    }
  }
}

TEST(TransformerLayers, DecoderOnlyBlockIsTheCausalGptBlock) {
  // A DecoderBlock without cross-attention has exactly the EncoderBlock's parameters and, with a
  // causal mask, computes torch's causal pre-LN encoder layer (GPT-2's block).
  RefFile ref("models_transformer");
  const std::string c = "layer_enc_pre_gelu_causal";
  DecoderBlock block(options_of(ref.params(c)), /*cross_attention=*/false);
  EXPECT_FALSE(block.has_cross_attention());
  block.load_state_dict(params_of(ref, c), /*strict=*/true, c);
  Tensor x = ref.get(c, "x").clone().set_requires_grad(true);
  AttentionMask mask;
  mask.causal = true;
  mask.key_padding = ref.get(c, "key_padding");
  Tensor y = block.forward(x, Tensor(), mask, {});
  EXPECT_CLOSE(y, ref.get(c, "y"), kF32);
  backward(y, ref.get(c, "gy"));
  EXPECT_CLOSE(x.grad(), ref.get(c, "gx"), kF32);
  expect_param_grads(block, ref, c, 16);
}

TEST(TransformerLayers, StackNamesAndFinalNorm) {
  BlockOptions o;
  o.d_model = 8;
  o.heads = 2;
  o.d_ff = 16;
  o.pre_norm = true;
  Encoder pre(o, 2);
  auto sd = pre.state_dict();
  EXPECT_EQ(sd.count("layers.1.self_attn.q_proj.weight"), 1u);
  EXPECT_EQ(sd.count("layers.0.fc1.weight"), 1u);
  EXPECT_EQ(sd.count("layers.0.final_layer_norm.bias"), 1u);
  EXPECT_EQ(sd.count("layer_norm.weight"), 1u);  // pre-LN: final LayerNorm
  o.pre_norm = false;
  Decoder post(o, 1);
  auto sd2 = post.state_dict();
  EXPECT_EQ(sd2.count("layer_norm.weight"), 0u);  // post-LN: none
  EXPECT_EQ(sd2.count("layers.0.encoder_attn.out_proj.bias"), 1u);
  EXPECT_EQ(sd2.count("layers.0.encoder_attn_layer_norm.weight"), 1u);
  EXPECT_EQ(sd2.size(), 26u);
}
