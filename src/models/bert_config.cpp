// BertConfig: validation and config.json (Hugging Face BertConfig keys) (de)serialisation.
#include "qkv/models/bert.h"
#include "qkv/models/model_size.h"
#include "qkv/util/config.h"

namespace qkv::models {

void BertConfig::validate() const {
  const char* w = "BertConfig";
  check_size(w, "vocab_size", vocab_size, 1, kMaxVocab);
  check_size(w, "hidden_size", hidden_size, 1, kMaxWidth);
  QKV_CHECK(num_attention_heads > 0 && hidden_size % num_attention_heads == 0, w,
            "hidden_size must be a positive multiple of num_attention_heads, got hidden_size=", hidden_size,
            " num_attention_heads=", num_attention_heads);
  check_size(w, "num_hidden_layers", num_hidden_layers, 1, kMaxLayers);
  check_size(w, "intermediate_size", intermediate_size, 1, kMaxFfnWidth);
  check_size(w, "max_position_embeddings", max_position_embeddings, 1, kMaxPositions);
  check_size(w, "type_vocab_size", type_vocab_size, 1, kMaxVocab);
  const double d = double(hidden_size), ff = double(intermediate_size);  // per layer 4 d^2 + 2 d ff + biases, norms
  check_parameters_fit(w, double(vocab_size + max_position_embeddings + type_vocab_size) * d + d * d +
                              double(num_hidden_layers) * (4 * d * d + 2 * d * ff + 9 * d + ff));
  QKV_CHECK(layer_norm_eps > 0, w, "layer_norm_eps must be positive, got ", layer_norm_eps);
  QKV_CHECK(pad_token_id >= 0, w, "pad_token_id must be >= 0, got ", pad_token_id);
  QKV_CHECK(pad_token_id < vocab_size, w, "pad_token_id must be below vocab_size = ", vocab_size, ", got ",
            pad_token_id);
  for (auto [name, p] : {std::pair{"hidden_dropout_prob", hidden_dropout_prob},
                         std::pair{"attention_probs_dropout_prob", attention_probs_dropout_prob}})
    QKV_CHECK(p >= 0 && p < 1, w, name, " must be in [0, 1), got ", p);
  QKV_CHECK(position_embedding_type == "absolute", w, "position_embedding_type \"", position_embedding_type,
            "\" is not supported (qkv's BERT has learned absolute positions: \"absolute\")");
  try {
    nn::parse_activation(hidden_act);
  } catch (const Error& e) {
    fail(w, "hidden_act: ", e.what());
  }
}

BlockOptions BertConfig::block_options() const {
  BlockOptions o;
  o.d_model = hidden_size;
  o.heads = num_attention_heads;
  o.d_ff = intermediate_size;
  o.dropout = hidden_dropout_prob;                  // after the attention output and the FFN output
  o.attention_dropout = attention_probs_dropout_prob;
  o.activation_dropout = 0;                         // BERT has none inside the FFN
  o.activation = nn::parse_activation(hidden_act);
  o.pre_norm = false;                               // post-LN, as the paper
  o.eps = layer_norm_eps;
  o.init = nn::init::Scheme::normal_002;
  return o;
}

void to_json(nlohmann::json& j, const BertConfig& c) {
  j = nlohmann::json{{"model_type", "bert"},
                     {"vocab_size", c.vocab_size},
                     {"hidden_size", c.hidden_size},
                     {"num_hidden_layers", c.num_hidden_layers},
                     {"num_attention_heads", c.num_attention_heads},
                     {"intermediate_size", c.intermediate_size},
                     {"hidden_act", c.hidden_act},
                     {"hidden_dropout_prob", c.hidden_dropout_prob},
                     {"attention_probs_dropout_prob", c.attention_probs_dropout_prob},
                     {"max_position_embeddings", c.max_position_embeddings},
                     {"type_vocab_size", c.type_vocab_size},
                     {"layer_norm_eps", c.layer_norm_eps},
                     {"pad_token_id", c.pad_token_id},
                     {"position_embedding_type", c.position_embedding_type},
                     {"initializer_range", 0.02}};
}

namespace {

// Keys of Hugging Face's BertConfig (and PretrainedConfig) that describe no part of the encoder's
// computation (task heads' labels, initialisation, generation, bookkeeping): read and ignored.
const char* const kIgnoredKeys[] = {
    "architectures", "initializer_range", "use_cache", "classifier_dropout", "transformers_version", "torch_dtype",
    "_name_or_path", "gradient_checkpointing", "id2label", "label2id", "num_labels", "problem_type",
    "tokenizer_class", "output_attentions", "output_hidden_states", "return_dict", "bos_token_id", "eos_token_id",
    "sep_token_id", "directionality", "pooler_fc_size", "pooler_num_attention_heads", "pooler_num_fc_layers",
    "pooler_size_per_head", "pooler_type", "chunk_size_feed_forward", "finetuning_task",
    "qkv_classifier"};  // qkv_classifier: io/bert_cls.h reads it

}  // namespace

void from_json(const nlohmann::json& j, BertConfig& c) {
  QKV_CHECK(j.is_object(), "BertConfig", "expected a JSON object, got ", j.type_name());
  const BertConfig d;  // defaults
  ConfigReader r(j, "BertConfig");  // unknown keys and wrong types throw naming the key
  r.fixed("model_type", "bert", "BERT");
  c.vocab_size = r.integer("vocab_size", d.vocab_size);
  c.hidden_size = r.integer("hidden_size", d.hidden_size);
  c.num_hidden_layers = r.integer("num_hidden_layers", d.num_hidden_layers);
  c.num_attention_heads = r.integer("num_attention_heads", d.num_attention_heads);
  c.intermediate_size = r.integer("intermediate_size", d.intermediate_size);
  c.hidden_act = r.string("hidden_act", d.hidden_act);
  c.hidden_dropout_prob = r.number("hidden_dropout_prob", d.hidden_dropout_prob);
  c.attention_probs_dropout_prob = r.number("attention_probs_dropout_prob", d.attention_probs_dropout_prob);
  c.max_position_embeddings = r.integer("max_position_embeddings", d.max_position_embeddings);
  c.type_vocab_size = r.integer("type_vocab_size", d.type_vocab_size);
  c.layer_norm_eps = r.number("layer_norm_eps", d.layer_norm_eps);
  c.pad_token_id = r.integer("pad_token_id", d.pad_token_id);
  c.position_embedding_type = r.string("position_embedding_type", d.position_embedding_type);
  QKV_CHECK(c.position_embedding_type == "absolute", r.where("position_embedding_type"), "\"",
            c.position_embedding_type, "\" is not supported (qkv's BERT has learned absolute positions: \"absolute\")");
  r.fixed("is_decoder", false, "BERT");
  r.fixed("add_cross_attention", false, "BERT");
  r.fixed("tie_word_embeddings", true, "BERT");
  for (const char* k : kIgnoredKeys)
    if (r.has(k)) r.raw(k);
  r.finish();
  c.validate();
}

}  // namespace qkv::models
