// GptConfig: validation and config.json (GPT2Config keys) (de)serialisation.
#include "qkv/models/gpt.h"
#include "qkv/models/model_size.h"
#include "qkv/util/config.h"

namespace qkv::models {

void GptConfig::validate() const {
  const char* w = "GptConfig";
  check_size(w, "vocab_size", vocab_size, 1, kMaxVocab);
  check_size(w, "n_positions", n_positions, 1, kMaxPositions);
  check_size(w, "n_embd", n_embd, 1, kMaxWidth);
  QKV_CHECK(n_head > 0 && n_embd % n_head == 0, w, "n_embd must be a positive multiple of n_head, got n_embd=", n_embd,
            " n_head=", n_head);
  check_size(w, "n_layer", n_layer, 1, kMaxLayers);
  QKV_CHECK(n_inner >= 0, w, "n_inner must be positive (or null for 4 * n_embd), got ", n_inner);
  check_size(w, "n_inner", d_ff(), 1, kMaxFfnWidth);
  const double d = double(n_embd), ff = double(d_ff());  // embeddings; per layer 4 d^2 + 2 d ff + biases, norms
  check_parameters_fit(w, double(vocab_size + n_positions) * d +
                              double(n_layer) * (4 * d * d + 2 * d * ff + 9 * d + ff));
  QKV_CHECK(layer_norm_epsilon > 0, w, "layer_norm_epsilon must be positive, got ", layer_norm_epsilon);
  for (auto [name, p] : {std::pair{"resid_pdrop", resid_pdrop}, std::pair{"embd_pdrop", embd_pdrop},
                         std::pair{"attn_pdrop", attn_pdrop}})
    QKV_CHECK(p >= 0 && p < 1, w, name, " must be in [0, 1), got ", p);
  nn::parse_activation(activation_function);  // throws naming the activation
}

BlockOptions GptConfig::block_options() const {
  BlockOptions o;
  o.d_model = n_embd;
  o.heads = n_head;
  o.d_ff = d_ff();
  o.dropout = resid_pdrop;
  o.attention_dropout = attn_pdrop;
  o.activation_dropout = 0;  // GPT-2 drops the MLP's output (resid_pdrop), not its inside
  o.activation = nn::parse_activation(activation_function);
  o.pre_norm = pre_norm;
  o.eps = layer_norm_epsilon;
  o.init = nn::init::Scheme::normal_002;
  return o;
}

void to_json(nlohmann::json& j, const GptConfig& c) {
  j = nlohmann::json{{"model_type", "gpt2"},
                     {"architectures", {"GPT2LMHeadModel"}},
                     {"vocab_size", c.vocab_size},
                     {"n_positions", c.n_positions},
                     {"n_embd", c.n_embd},
                     {"n_layer", c.n_layer},
                     {"n_head", c.n_head},
                     {"n_inner", c.n_inner > 0 ? nlohmann::json(c.n_inner) : nlohmann::json(nullptr)},
                     {"activation_function", c.activation_function},
                     {"layer_norm_epsilon", c.layer_norm_epsilon},
                     {"resid_pdrop", c.resid_pdrop},
                     {"embd_pdrop", c.embd_pdrop},
                     {"attn_pdrop", c.attn_pdrop},
                     {"tie_word_embeddings", true}};
  if (!c.pre_norm) j["pre_norm"] = false;  // GPT-1 blocks: not a GPT2Config value (Hugging Face would ignore it)
}

namespace {

// Keys of Hugging Face's GPT2Config that describe no part of the computation (tokens, heads of
// other model classes, initialisation, bookkeeping): read and ignored.
const char* const kIgnoredKeys[] = {
    "architectures", "bos_token_id", "eos_token_id", "pad_token_id", "initializer_range", "use_cache",
    "transformers_version", "torch_dtype", "_name_or_path", "task_specific_params", "summary_type",
    "summary_use_proj", "summary_activation", "summary_proj_to_labels", "summary_first_dropout", "id2label",
    "label2id", "tokenizer_class", "prefix", "output_attentions", "output_hidden_states", "return_dict",
    "problem_type"};  // a classifier's: io::check_single_label reads it

}  // namespace

void from_json(const nlohmann::json& j, GptConfig& c) {
  QKV_CHECK(j.is_object(), "GptConfig", "expected a JSON object, got ", j.type_name());
  const GptConfig d;  // defaults
  ConfigReader r(j, "GptConfig");  // unknown keys and wrong types throw naming the key
  r.fixed("model_type", "gpt2", "GPT-2");
  c.vocab_size = r.integer("vocab_size", d.vocab_size);
  c.n_positions = r.integer("n_positions", d.n_positions);
  c.n_embd = r.integer("n_embd", d.n_embd);
  c.n_layer = r.integer("n_layer", d.n_layer);
  c.n_head = r.integer("n_head", d.n_head);
  c.n_inner = r.has("n_inner") && r.raw("n_inner").is_null() ? 0 : r.integer("n_inner", d.n_inner);
  c.activation_function = r.string("activation_function", d.activation_function);
  c.layer_norm_epsilon = r.number("layer_norm_epsilon", d.layer_norm_epsilon);
  c.resid_pdrop = r.number("resid_pdrop", d.resid_pdrop);
  c.embd_pdrop = r.number("embd_pdrop", d.embd_pdrop);
  c.attn_pdrop = r.number("attn_pdrop", d.attn_pdrop);
  c.pre_norm = r.boolean("pre_norm", d.pre_norm);
  r.fixed("n_ctx", c.n_positions, "GPT-2");
  r.fixed("tie_word_embeddings", true, "GPT-2");
  r.fixed("scale_attn_weights", true, "GPT-2");
  r.fixed("scale_attn_by_inverse_layer_idx", false, "GPT-2");
  r.fixed("reorder_and_upcast_attn", false, "GPT-2");
  r.fixed("add_cross_attention", false, "GPT-2");
  for (const char* k : kIgnoredKeys)
    if (r.has(k)) r.raw(k);
  r.finish();
  c.validate();
}

}  // namespace qkv::models
