// TransformerConfig: validation and config.json (de)serialisation.
#include "qkv/models/transformer.h"
#include "qkv/models/model_size.h"
#include "qkv/util/config.h"

namespace qkv::models {

void TransformerConfig::validate() const {
  const char* w = "TransformerConfig";
  QKV_CHECK(src_vocab > 0, w, "src_vocab must be positive, got ", src_vocab);
  QKV_CHECK(tgt_vocab > 0, w, "tgt_vocab must be positive, got ", tgt_vocab);
  QKV_CHECK(d_model > 0 && heads > 0 && d_model % heads == 0, w,
            "d_model must be a positive multiple of heads, got d_model=", d_model, " heads=", heads);
  QKV_CHECK(enc_layers >= 0 && dec_layers >= 1, w, "enc_layers must be >= 0 and dec_layers >= 1, got ", enc_layers,
            " and ", dec_layers);
  QKV_CHECK(d_ff > 0, w, "d_ff must be positive, got ", d_ff);
  QKV_CHECK(dropout >= 0 && dropout < 1, w, "dropout must be in [0, 1), got ", dropout);
  QKV_CHECK(attention_dropout >= 0 && attention_dropout < 1, w, "attention_dropout must be in [0, 1), got ",
            attention_dropout);
  nn::parse_activation(activation);  // throws naming the activation
  QKV_CHECK(!shared_embeddings || src_vocab == tgt_vocab, w, "shared_embeddings needs src_vocab == tgt_vocab, got ",
            src_vocab, " and ", tgt_vocab);
  QKV_CHECK(max_len >= 2, w, "max_len must be at least 2 (a token and </s>), got ", max_len);
  QKV_CHECK(positional != PositionalKind::sinusoidal || d_model % 2 == 0, w,
            "sinusoidal positions need an even d_model, got ", d_model);
  QKV_CHECK(positional != PositionalKind::relative || relative_clip >= 1, w, "relative_clip must be >= 1, got ",
            relative_clip);
  if (positional == PositionalKind::rope) {
    QKV_CHECK((d_model / heads) % 2 == 0, w, "rope needs an even head size d_model / heads, got ", d_model / heads);
    QKV_CHECK(rope_base > 1, w, "rope_base must be > 1, got ", rope_base);
    QKV_CHECK(rope_style == "interleaved" || rope_style == "half", w,
              "rope_style: expected \"interleaved\" or \"half\", got \"", rope_style, "\"");
  }
  for (auto [name, id] : {std::pair{"pad_id", pad_id}, std::pair{"bos_id", bos_id}, std::pair{"eos_id", eos_id}})
    QKV_CHECK(id >= 0 && id < tgt_vocab, w, name, " must be in [0, tgt_vocab=", tgt_vocab, "), got ", id);
  QKV_CHECK(pad_id < src_vocab, w, "pad_id must be < src_vocab=", src_vocab, ", got ", pad_id);
  // The bounds of model_size.h, as GPT's and BERT's: a max_len of 3e7 allocated 1.9 GB of positions
  // before the weights were compared, and d_ff 2^36 failed as "out of memory", naming nothing.
  check_size(w, "src_vocab", src_vocab, 1, kMaxVocab);
  check_size(w, "tgt_vocab", tgt_vocab, 1, kMaxVocab);
  check_size(w, "d_model", d_model, 1, kMaxWidth);
  check_size(w, "enc_layers", enc_layers, 0, kMaxLayers);
  check_size(w, "dec_layers", dec_layers, 1, kMaxLayers);
  check_size(w, "d_ff", d_ff, 1, kMaxFfnWidth);
  check_size(w, "max_len", max_len, 2, kMaxPositions);
  // Embeddings, positions and the output layer; per layer 4 d^2 (8 d^2 with cross-attention) + 2 d ff.
  const double d = double(d_model), ff = double(d_ff);
  const double layers = double(enc_layers) * (4 * d * d + 2 * d * ff) + double(dec_layers) * (8 * d * d + 2 * d * ff);
  check_parameters_fit(w, double(src_vocab + 2 * tgt_vocab + max_len) * d + layers);
}

BlockOptions TransformerConfig::block_options() const {
  BlockOptions o;
  o.d_model = d_model;
  o.heads = heads;
  o.d_ff = d_ff;
  o.dropout = dropout;
  o.attention_dropout = attention_dropout;
  o.activation_dropout = dropout;  // as torch.nn.Transformer
  o.activation = nn::parse_activation(activation);
  o.pre_norm = pre_norm;
  o.init = nn::init::Scheme::xavier_uniform;
  if (positional == PositionalKind::relative) {
    o.self_positions.kind = AttentionPositions::Kind::relative;
    o.self_positions.max_distance = relative_clip;
  } else if (positional == PositionalKind::rope) {
    o.self_positions.kind = AttentionPositions::Kind::rope;
    o.self_positions.rope_base = rope_base;
    o.self_positions.rope_style = rope_style == "half" ? attention::RopeStyle::half : attention::RopeStyle::interleaved;
  }
  return o;
}

namespace {
const std::pair<const char*, PositionalKind> kPositional[] = {{"sinusoidal", PositionalKind::sinusoidal},
                                                              {"learned", PositionalKind::learned},
                                                              {"relative", PositionalKind::relative},
                                                              {"rope", PositionalKind::rope},
                                                              {"none", PositionalKind::none}};
const char* positional_name(PositionalKind k) {
  for (auto& [name, kind] : kPositional)
    if (kind == k) return name;
  return "sinusoidal";
}
}  // namespace

void to_json(nlohmann::json& j, const TransformerConfig& c) {
  j = nlohmann::json{{"src_vocab", c.src_vocab},
                     {"tgt_vocab", c.tgt_vocab},
                     {"d_model", c.d_model},
                     {"heads", c.heads},
                     {"enc_layers", c.enc_layers},
                     {"dec_layers", c.dec_layers},
                     {"d_ff", c.d_ff},
                     {"dropout", c.dropout},
                     {"attention_dropout", c.attention_dropout},
                     {"activation", c.activation},
                     {"pre_norm", c.pre_norm},
                     {"shared_embeddings", c.shared_embeddings},
                     {"tie_output", c.tie_output},
                     {"max_len", c.max_len},
                     {"pad_id", c.pad_id},
                     {"bos_id", c.bos_id},
                     {"eos_id", c.eos_id},
                     {"positional", positional_name(c.positional)},
                     {"scale_embeddings", c.scale_embeddings}};
  if (c.positional == PositionalKind::relative) j["relative_clip"] = c.relative_clip;
  if (c.positional == PositionalKind::rope) {
    j["rope_base"] = c.rope_base;
    j["rope_style"] = c.rope_style;
  }
}

void from_json(const nlohmann::json& j, TransformerConfig& c) {
  QKV_CHECK(j.is_object(), "TransformerConfig", "expected a JSON object, got ", j.type_name());
  const TransformerConfig d;  // defaults
  ConfigReader r(j, "TransformerConfig");  // unknown keys and wrong types throw naming the key
  c.src_vocab = r.integer("src_vocab");
  c.tgt_vocab = r.integer("tgt_vocab");
  c.d_model = r.integer("d_model", d.d_model);
  c.heads = r.integer("heads", d.heads);
  c.enc_layers = r.integer("enc_layers", d.enc_layers);
  c.dec_layers = r.integer("dec_layers", d.dec_layers);
  c.d_ff = r.integer("d_ff", d.d_ff);
  c.dropout = r.number("dropout", d.dropout);
  c.attention_dropout = r.number("attention_dropout", d.attention_dropout);
  c.activation = r.string("activation", d.activation);
  c.pre_norm = r.boolean("pre_norm", d.pre_norm);
  c.shared_embeddings = r.boolean("shared_embeddings", d.shared_embeddings);
  c.tie_output = r.boolean("tie_output", d.tie_output);
  c.max_len = r.integer("max_len", d.max_len);
  c.pad_id = r.integer("pad_id", d.pad_id);
  c.bos_id = r.integer("bos_id", d.bos_id);
  c.eos_id = r.integer("eos_id", d.eos_id);
  c.scale_embeddings = r.boolean("scale_embeddings", d.scale_embeddings);
  std::string pos = r.string("positional", "sinusoidal");
  bool known = false;
  for (auto& [name, kind] : kPositional)
    if (pos == name) c.positional = kind, known = true;
  QKV_CHECK(known, r.where("positional"),
            "expected \"sinusoidal\", \"learned\", \"relative\", \"rope\" or \"none\", got \"", pos, "\"");
  c.relative_clip = r.integer("relative_clip", d.relative_clip);
  c.rope_base = r.number("rope_base", d.rope_base);
  c.rope_style = r.string("rope_style", d.rope_style);
  QKV_CHECK(c.positional == PositionalKind::relative || !j.contains("relative_clip"), r.where("relative_clip"),
            "applies to \"positional\": \"relative\" only, got \"", pos, "\"");
  QKV_CHECK(c.positional == PositionalKind::rope || (!j.contains("rope_base") && !j.contains("rope_style")),
            r.where("rope_base"), "rope_base / rope_style apply to \"positional\": \"rope\" only, got \"", pos,
            "\"");
  r.finish();
  c.validate();
}

}  // namespace qkv::models
