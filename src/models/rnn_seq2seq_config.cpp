// RnnSeq2SeqConfig: validation and config.json (de)serialisation.
#include "qkv/models/rnn_seq2seq.h"

#include <algorithm>
#include <tuple>

#include "qkv/models/model_size.h"
#include "qkv/util/config.h"

namespace qkv::models {
namespace {

const char* cell_name(RnnCell c) { return c == RnnCell::lstm ? "lstm" : "gru"; }
const char* attention_name(RnnAttentionKind a) {
  return a == RnnAttentionKind::none ? "none" : a == RnnAttentionKind::bahdanau ? "bahdanau" : "luong";
}
const char* bridge_name(RnnBridge b) {
  return b == RnnBridge::copy ? "copy" : b == RnnBridge::linear ? "linear" : "zeros";
}
bool uses_attn_dim(const RnnSeq2SeqConfig& c) {
  return c.attention == RnnAttentionKind::bahdanau ||
         (c.attention == RnnAttentionKind::luong && c.score == attention::LuongScore::concat);
}

}  // namespace

void RnnSeq2SeqConfig::validate(const std::string& file, const std::string& section) const {
  auto at = [&](const char* key) { return file + ": field '" + (section.empty() ? key : section + "." + key) + "'"; };
  QKV_CHECK(src_vocab > 0, at("src_vocab"), "must be positive, got ", src_vocab);
  QKV_CHECK(tgt_vocab > 0, at("tgt_vocab"), "must be positive, got ", tgt_vocab);
  QKV_CHECK(embed_dim > 0, at("embed_dim"), "must be positive, got ", embed_dim);
  QKV_CHECK(enc_hidden > 0, at("enc_hidden"), "must be positive, got ", enc_hidden);
  QKV_CHECK(dec_hidden > 0, at("dec_hidden"), "must be positive, got ", dec_hidden);
  QKV_CHECK(enc_layers >= 1, at("enc_layers"), "must be >= 1, got ", enc_layers);
  QKV_CHECK(dec_layers >= 1, at("dec_layers"), "must be >= 1, got ", dec_layers);
  QKV_CHECK(dropout >= 0 && dropout < 1, at("dropout"), "must be in [0, 1), got ", dropout);
  QKV_CHECK(attn_dim >= 0, at("attn_dim"), "must be >= 0 (0 = dec_hidden), got ", attn_dim);
  QKV_CHECK(max_len >= 2, at("max_len"), "must be at least 2 (a token and </s>), got ", max_len);
  for (auto [name, id] : {std::pair{"pad_id", pad_id}, std::pair{"bos_id", bos_id}, std::pair{"eos_id", eos_id}})
    QKV_CHECK(id >= 0 && id < tgt_vocab, at(name), "must be in [0, tgt_vocab=", tgt_vocab, "), got ", id);
  QKV_CHECK(pad_id < src_vocab, at("pad_id"), "must be < src_vocab=", src_vocab, ", got ", pad_id);
  // The bounds of model_size.h, as the other models' (a mistyped size was allocated, or failed as
  // "out of memory" naming nothing).
  using Bound = std::tuple<const char*, int64_t, int64_t>;
  for (auto [key, value, hi] :
       {Bound{"src_vocab", src_vocab, kMaxVocab}, Bound{"tgt_vocab", tgt_vocab, kMaxVocab},
        Bound{"embed_dim", embed_dim, kMaxWidth}, Bound{"enc_hidden", enc_hidden, kMaxWidth},
        Bound{"dec_hidden", dec_hidden, kMaxWidth}, Bound{"attn_dim", attn_dim, kMaxWidth},
        Bound{"enc_layers", enc_layers, kMaxLayers}, Bound{"dec_layers", dec_layers, kMaxLayers},
        Bound{"max_len", max_len, kMaxPositions}})
    QKV_CHECK(value <= hi, at(key), "must be at most ", hi, ", got ", value);
  {  // gates (4 for an LSTM, fewer for a GRU) of every layer, embeddings, the output layer, attention
    const double e = double(embed_dim), he = double(enc_hidden), hd = double(dec_hidden), k = double(key_dim());
    const double a = double(attn_dim > 0 ? attn_dim : dec_hidden), dirs = bidirectional ? 2 : 1;
    check_parameters_fit(file.c_str(), double(src_vocab + tgt_vocab) * e + double(tgt_vocab) * (hd + k) +
                                           4 * double(enc_layers) * dirs * (std::max(e, k) + he) * he +
                                           4 * double(dec_layers) * (e + k + hd) * hd + (k + hd) * a + 2 * k * hd);
  }

  const bool luong = attention == RnnAttentionKind::luong;
  QKV_CHECK(!input_feeding || luong, at("input_feeding"), "only Luong attention feeds h~_{t-1} back into the decoder; ",
            "attention is \"", attention_name(attention), "\"");
  if (luong && score == attention::LuongScore::dot)
    QKV_CHECK(dec_hidden == key_dim(), at("score"), "\"dot\" scores s_t^T h_i, so it needs dec_hidden == ",
              bidirectional ? "2 * enc_hidden (bidirectional) = " : "enc_hidden = ", key_dim(), ", got dec_hidden ",
              dec_hidden, "; use \"general\" to learn the projection");
  switch (bridge) {
    case RnnBridge::copy:
      QKV_CHECK(dec_layers == enc_layers, at("bridge"), "\"copy\" hands encoder layer l's final state to decoder ",
                "layer l, so it needs dec_layers == enc_layers, got ", dec_layers, " and ", enc_layers,
                "; use \"linear\" for a learned bridge");
      QKV_CHECK(dec_hidden == key_dim(), at("bridge"), "\"copy\" hands the encoder's final state to the decoder ",
                "unchanged, so it needs dec_hidden == ",
                bidirectional ? "2 * enc_hidden (forward and backward concatenated) = " : "enc_hidden = ", key_dim(),
                ", got dec_hidden ", dec_hidden, "; set dec_hidden to ", key_dim(), " or bridge to \"linear\"");
      break;
    case RnnBridge::zeros:
      QKV_CHECK(attention != RnnAttentionKind::none, at("bridge"), "\"zeros\" without attention would leave the ",
                "decoder blind to the source; use \"copy\" or \"linear\"");
      break;
    case RnnBridge::linear: break;
  }
}

RnnSeq2SeqConfig RnnSeq2SeqConfig::parse(const nlohmann::json& j, const std::string& file, const std::string& section) {
  RnnSeq2SeqConfig c;
  const RnnSeq2SeqConfig d;
  ConfigReader r(j, file, section);  // unknown keys and wrong types throw naming the key
  c.src_vocab = r.integer("src_vocab");
  c.tgt_vocab = r.integer("tgt_vocab");
  std::string cell = r.string("cell", cell_name(d.cell));
  QKV_CHECK(cell == "lstm" || cell == "gru", r.where("cell"), "expected \"lstm\" or \"gru\", got \"", cell, "\"");
  c.cell = cell == "lstm" ? RnnCell::lstm : RnnCell::gru;
  c.embed_dim = r.integer("embed_dim", d.embed_dim);
  c.enc_hidden = r.integer("enc_hidden", d.enc_hidden);
  c.enc_layers = r.integer("enc_layers", d.enc_layers);
  c.bidirectional = r.boolean("bidirectional", d.bidirectional);
  c.dec_hidden = r.integer("dec_hidden", d.dec_hidden);
  c.dec_layers = r.integer("dec_layers", d.dec_layers);
  c.dropout = r.number("dropout", d.dropout);
  std::string att = r.string("attention", attention_name(d.attention));
  QKV_CHECK(att == "none" || att == "bahdanau" || att == "luong", r.where("attention"),
            "expected \"none\", \"bahdanau\" or \"luong\", got \"", att, "\"");
  c.attention = att == "none" ? RnnAttentionKind::none
                : att == "bahdanau" ? RnnAttentionKind::bahdanau : RnnAttentionKind::luong;
  if (r.has("score")) {
    QKV_CHECK(c.attention == RnnAttentionKind::luong, r.where("score"), "a score function belongs to Luong ",
              "attention; attention is \"", att, "\" (remove \"score\" or set attention to \"luong\")");
    std::string s = r.string("score");
    QKV_CHECK(s == "dot" || s == "general" || s == "concat" || s == "location", r.where("score"),
              "expected \"dot\", \"general\", \"concat\" or \"location\", got \"", s, "\"");
    c.score = attention::parse_luong_score(s);
  }
  c.input_feeding = r.boolean("input_feeding", d.input_feeding);
  if (r.has("attn_dim")) {
    c.attn_dim = r.integer("attn_dim");
    QKV_CHECK(uses_attn_dim(c), r.where("attn_dim"), "only Bahdanau and Luong concat scoring have an attention ",
              "MLP; attention is \"", att, "\"", c.attention == RnnAttentionKind::luong ? " with score " : "",
              c.attention == RnnAttentionKind::luong ? attention::luong_score_name(c.score) : "");
  }
  c.reverse_source = r.boolean("reverse_source", d.reverse_source);
  std::string br = r.string("bridge", bridge_name(d.bridge));
  QKV_CHECK(br == "copy" || br == "linear" || br == "zeros", r.where("bridge"),
            "expected \"copy\", \"linear\" or \"zeros\", got \"", br, "\"");
  c.bridge = br == "copy" ? RnnBridge::copy : br == "linear" ? RnnBridge::linear : RnnBridge::zeros;
  c.max_len = r.integer("max_len", d.max_len);
  c.pad_id = r.integer("pad_id", d.pad_id);
  c.bos_id = r.integer("bos_id", d.bos_id);
  c.eos_id = r.integer("eos_id", d.eos_id);
  r.finish();
  c.validate(file, section);
  return c;
}

void to_json(nlohmann::json& j, const RnnSeq2SeqConfig& c) {
  j = nlohmann::json{{"src_vocab", c.src_vocab},
                     {"tgt_vocab", c.tgt_vocab},
                     {"cell", cell_name(c.cell)},
                     {"embed_dim", c.embed_dim},
                     {"enc_hidden", c.enc_hidden},
                     {"enc_layers", c.enc_layers},
                     {"bidirectional", c.bidirectional},
                     {"dec_hidden", c.dec_hidden},
                     {"dec_layers", c.dec_layers},
                     {"dropout", c.dropout},
                     {"attention", attention_name(c.attention)},
                     {"input_feeding", c.input_feeding},
                     {"reverse_source", c.reverse_source},
                     {"bridge", bridge_name(c.bridge)},
                     {"max_len", c.max_len},
                     {"pad_id", c.pad_id},
                     {"bos_id", c.bos_id},
                     {"eos_id", c.eos_id}};
  if (c.attention == RnnAttentionKind::luong) j["score"] = attention::luong_score_name(c.score);
  if (uses_attn_dim(c)) j["attn_dim"] = c.attn_dim;
}

void from_json(const nlohmann::json& j, RnnSeq2SeqConfig& c) { c = RnnSeq2SeqConfig::parse(j, "RnnSeq2SeqConfig"); }

}  // namespace qkv::models
