// tests/common/transformer_ref.h - the encoder-decoder Transformers of
// tools/refs/models_transformer.py (cases model_*: random weights, src/src_pad/tgt_in/tgt_out and
// torch's logits), loaded into models::Transformer.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "qkv/models/transformer.h"
#include "ref.h"

namespace qkv::testing {

// The model of case c, every parameter from torch's state (strict: none missing, none extra), eval mode.
inline std::unique_ptr<models::Transformer> load_transformer_ref(const RefFile& ref, const std::string& c) {
  models::TransformerConfig cfg = ref.params(c)["config"].get<models::TransformerConfig>();
  auto m = std::make_unique<models::Transformer>(cfg);
  std::map<std::string, Tensor> sd;
  for (auto& [name, t] : ref.contents().tensors)
    if (name.rfind(c + "/p.", 0) == 0) sd[name.substr(c.size() + 3)] = t;
  m->load_state_dict(sd, /*strict=*/true, c);
  m->eval();
  return m;
}

// The last four put positions inside self-attention (relative: Shaw et al.; rope: RoFormer, both
// pair layouts); their reference is plain torch written from the papers (PosTransformer).
inline const std::vector<std::string> kTransformerRefModels = {
    "model_post_relu_separate",      "model_pre_gelu_shared_tied",    "model_post_learned_unscaled_tied",
    "model_pre_silu_shared_tied",    "model_post_gelu_tanh_separate", "model_post_relative_separate",
    "model_pre_rope_shared_tied",    "model_post_rope_half_separate", "model_pre_relative_shared_tied"};

// How many model cases the reference file holds: a test asserts it is kTransformerRefModels.size(),
// so a case added there and not here, or a missing file, fails rather than passing with fewer.
inline size_t count_transformer_ref_models(const RefFile& ref) {
  size_t n = 0;
  for (auto& [name, t] : ref.contents().tensors)
    n += name.rfind("model_", 0) == 0 && name.size() > 7 && name.compare(name.size() - 7, 7, "/logits") == 0;
  return n;
}

}  // namespace qkv::testing
