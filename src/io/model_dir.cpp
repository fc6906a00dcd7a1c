#include "qkv/io/model_dir.h"

#include <filesystem>
#include <optional>
#include <string>

#include "qkv/models/rnn_seq2seq.h"
#include "qkv/models/transformer.h"
#include "qkv/text/special_tokens.h"
#include "qkv/util/config.h"
#include "qkv/util/file.h"

namespace fs = std::filesystem;

namespace qkv::io {

namespace {

constexpr const char* kSeq2SeqFormat = "qkv-seq2seq-1";  // config.json's "format" (absent in early models)

// Checks {"model_type": ..., "model": {...}} and returns the type.
std::string model_type(const nlohmann::json& config, const std::string& where) {
  QKV_CHECK(config.is_object() && config.contains("model_type") && config["model_type"].is_string(), where,
            "field 'model_type': expected \"transformer\" or \"rnn\"");
  std::string type = config["model_type"];
  QKV_CHECK(config.contains("model") && config["model"].is_object(), where, "field 'model': expected an object");
  QKV_CHECK(type == "transformer" || type == "rnn", where, "field 'model_type': unknown model type '", type,
            "' (expected \"transformer\" or \"rnn\")");
  return type;
}

models::TransformerConfig transformer_config(const nlohmann::json& model, const std::string& where) {
  models::TransformerConfig c;
  try {
    from_json(model, c);
  } catch (const Error& e) {
    fail(where, "field 'model': ", e.what());
  }
  return c;
}

}  // namespace

std::shared_ptr<models::Seq2Seq> make_seq2seq(const nlohmann::json& config, const std::string& where, bool to_load) {
  if (model_type(config, where) == "transformer")
    return std::make_shared<models::Transformer>(transformer_config(config["model"], where), default_generator(),
                                                 to_load ? nn::init::Scheme::none : nn::init::Scheme::xavier_uniform);
  // errors read "<where>: field 'model.<key>': ..."
  return std::make_shared<models::RnnSeq2Seq>(models::RnnSeq2SeqConfig::parse(config["model"], where, "model"));
}

nlohmann::json resolved_model_config(const nlohmann::json& config, const std::string& where) {
  if (model_type(config, where) == "transformer") return transformer_config(config["model"], where);
  return models::RnnSeq2SeqConfig::parse(config["model"], where, "model");
}

nlohmann::json read_seq2seq_config(const std::string& path) {
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    fail(path, "not valid JSON: ", e.what());
  }
  // A Hugging Face directory (GPT-2, BERT and their heads) says what it is.
  if (config.is_object() && !config.contains("model") && config.contains("architectures") &&
      config["architectures"].is_array() && !config["architectures"].empty())
    fail(path, "holds a ", config["architectures"][0].dump(), " model, not a translation model (expected ",
         "model_type \"transformer\" or \"rnn\"; GPT and BERT directories are for generate, classify, embed, tag, ",
         "answer)");
  // The sections a qkv translation model's config.json holds: the model's, the tokenizer's, and
  // the training config it was trained with (kept for the record; not read here).
  ConfigReader top(config, path);
  const std::string format = top.string("format", kSeq2SeqFormat);
  QKV_CHECK(format == kSeq2SeqFormat, top.where("format"), "expected \"", kSeq2SeqFormat, "\", got \"", format,
            "\" (a model written by another version of qkv?)");
  top.string("model_type");
  for (const char* section : {"model", "tokenizer", "data", "optimizer", "schedule", "train", "valid"})
    top.object(section, std::string(section) == "model");
  if (top.has("seed")) top.integer("seed");
  top.finish();
  resolved_model_config(config, path);  // the model's checks, without building it
  return config;
}

Seq2SeqBundle load_seq2seq(const std::string& dir, kernels::MatmulPrecision precision) {
  QKV_CHECK(fs::is_directory(dir), dir, "not a model directory (expected config.json, model.safetensors, tokenizer.json)");
  std::string cfg_path = (fs::path(dir) / "config.json").string();
  QKV_CHECK(fs::exists(cfg_path), cfg_path, "missing: a model directory needs config.json");
  Seq2SeqBundle b;
  b.config = read_seq2seq_config(cfg_path);
  std::string weights = (fs::path(dir) / "model.safetensors").string();
  QKV_CHECK(fs::exists(weights), weights, "missing: a model directory needs model.safetensors");
  b.model = make_seq2seq(b.config, cfg_path, /*to_load=*/true);
  auto* transformer = dynamic_cast<models::Transformer*>(b.model.get());
  if (transformer && precision == kernels::MatmulPrecision::bf16)  // held before it is read (RNNs stay f32)
    transformer->hold_weights_in_bf16();
  if (transformer && precision == kernels::MatmulPrecision::int8) transformer->hold_weights_in_int8_blocked();
  b.model->load(weights);
  b.model->eval();
  const nlohmann::json tok = b.config.value("tokenizer", nlohmann::json::object());
  QKV_CHECK(tok.is_object(), cfg_path, "field 'tokenizer': expected an object");
  for (const char* key : {"shared", "protect"})
    QKV_CHECK(!tok.contains(key) || tok[key].is_boolean(), cfg_path, "field 'tokenizer.", key,
              "': expected true or false, got ", tok[key].dump());
  const bool shared = tok.value("shared", true);
  b.protect_spans = tok.value("protect", false);
  if (shared) {
    b.src_tok = text::load_tokenizer((fs::path(dir) / "tokenizer.json").string());
    b.tgt_tok = b.src_tok;
  } else {
    b.src_tok = text::load_tokenizer((fs::path(dir) / "source_tokenizer.json").string());
    b.tgt_tok = text::load_tokenizer((fs::path(dir) / "target_tokenizer.json").string());
  }
  QKV_CHECK(b.src_tok->vocab_size() <= b.model->src_vocab(), dir, "source tokenizer has ", b.src_tok->vocab_size(),
            " ids but the model's source vocabulary is ", b.model->src_vocab());
  QKV_CHECK(b.tgt_tok->vocab_size() <= b.model->tgt_vocab(), dir, "target tokenizer has ", b.tgt_tok->vocab_size(),
            " ids but the model's target vocabulary is ", b.model->tgt_vocab());
  // Decoding starts, ends and pads with config.json's ids (as training wrote them from the target
  // tokenizer); an edited eos_id 0 translated into "tree tree tree ..." with no error. A tokenizer
  // that names no such token (one made without roles) cannot be checked.
  const nlohmann::json model = b.config.value("model", nlohmann::json::object());
  const struct {
    const char* key;
    text::Role role;
    int64_t fallback;  // the Translator's when the key is absent
  } ids[] = {{"pad_id", text::Role::Pad, 0}, {"bos_id", text::Role::Bos, 1}, {"eos_id", text::Role::Eos, 2}};
  for (const auto& [key, role, fallback] : ids) {
    const int64_t id = model.contains(key) && model[key].is_number_integer() ? model[key].get<int64_t>() : fallback;
    const std::optional<int32_t> want = b.tgt_tok->special_id(role);
    QKV_CHECK(!want || *want == id, cfg_path, "field 'model.", key, "' is ", id, " but the target tokenizer's ",
              text::role_name(role), " token is ", *want, ": the model and its tokenizer do not belong together");
  }
  return b;
}

void save_seq2seq(const std::string& dir, const Seq2SeqBundle& b) {
  fs::create_directories(dir);
  nlohmann::json cfg = b.config;
  cfg["format"] = kSeq2SeqFormat;
  bool shared = b.src_tok == b.tgt_tok;
  cfg["tokenizer"] = {{"shared", shared}, {"protect", b.protect_spans}};
  write_file_atomic((fs::path(dir) / "config.json").string(), cfg.dump(2) + "\n");
  b.model->save((fs::path(dir) / "model.safetensors").string(), {{"format", "pt"}});
  if (shared) {
    b.src_tok->save((fs::path(dir) / "tokenizer.json").string());
  } else {
    b.src_tok->save((fs::path(dir) / "source_tokenizer.json").string());
    b.tgt_tok->save((fs::path(dir) / "target_tokenizer.json").string());
  }
}

}  // namespace qkv::io
