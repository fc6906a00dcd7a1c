// A translation model's config.json is read as strictly as the GPT and BERT ones: a format from
// another qkv, an unknown key or a section of the wrong type is an error naming the file and the
// field, and a model too short to hold a token and </s> is refused (it translated everything to
// nothing, exit 0). The sections of the training config a model keeps are accepted.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "qkv/io/model_dir.h"
#include "qkv/util/error.h"
#include "qkv/util/file.h"
#include "tiny_models.h"

namespace fs = std::filesystem;

namespace {

nlohmann::json model_config() {
  return nlohmann::json::parse(R"({
    "format": "qkv-seq2seq-1", "model_type": "transformer",
    "model": {"src_vocab": 60, "tgt_vocab": 60, "d_model": 16, "heads": 2, "enc_layers": 1, "dec_layers": 1,
              "d_ff": 32, "max_len": 32, "shared_embeddings": true, "tie_output": true},
    "tokenizer": {"shared": true, "protect": false},
    "data": {"max_tokens": 64}, "optimizer": {}, "schedule": {"type": "noam", "warmup": 20},
    "train": {"max_steps": 40}, "valid": {"max_sentences": 10}, "seed": 3
  })");
}

std::string config_error(const nlohmann::json& config) {
  const std::string path =
      (fs::path(::testing::TempDir()) / ("qkv_seq2seq_cfg_" + std::to_string(getpid()) + ".json")).string();
  qkv::write_file_atomic(path, config.dump());
  std::string err;
  try {
    qkv::io::read_seq2seq_config(path);
  } catch (const qkv::Error& e) {
    err = e.what();
  }
  fs::remove(path);
  return err.empty() ? "" : err.substr(err.find(": ") + 2);  // without the temporary path
}

}  // namespace

TEST(Seq2SeqConfig, StrictAboutFormatKeysSectionsAndLength) {
  EXPECT_EQ(config_error(model_config()), "");
  nlohmann::json early = model_config();
  early.erase("format");  // models written before the key existed
  EXPECT_EQ(config_error(early), "");

  nlohmann::json c = model_config();
  c["format"] = "qkv-seq2seq-99";
  EXPECT_EQ(config_error(c).rfind("field 'format': expected \"qkv-seq2seq-1\", got \"qkv-seq2seq-99\"", 0), 0u)
      << config_error(c);
  c = model_config();
  c["bogus"] = 1;
  EXPECT_EQ(config_error(c).rfind("field 'bogus': unknown key", 0), 0u) << config_error(c);
  c = model_config();
  c["train"] = "x";
  EXPECT_EQ(config_error(c).rfind("field 'train': expected an object", 0), 0u) << config_error(c);
  const nlohmann::json bert = {{"architectures", {"BertForSequenceClassification"}}, {"model_type", "bert"}};
  EXPECT_EQ(config_error(bert).rfind("holds a \"BertForSequenceClassification\" model, not a translation model", 0), 0u)
      << config_error(bert);
  c = model_config();
  c["model"]["max_len"] = 1;
  EXPECT_NE(config_error(c).find("max_len must be at least 2 (a token and </s>), got 1"), std::string::npos)
      << config_error(c);
  // model_size.h's bounds, as GPT's and BERT's: a max_len of 3e7 was allocated (1.9 GB of positions),
  // a d_ff of 2^36 failed as "out of memory" naming nothing.
  for (const auto& [key, value, want] : std::vector<std::tuple<std::string, int64_t, std::string>>{
           {"max_len", 30000000, "max_len must be in [2, 1048576], got 30000000"},
           {"d_ff", int64_t(1) << 36, "d_ff must be in [1, 1048576], got 68719476736"},
           {"enc_layers", 5000, "enc_layers must be in [0, 1024], got 5000"},
           {"src_vocab", int64_t(1) << 25, "src_vocab must be in [1, 16777216]"},
           {"d_model", 65536, "million parameters"}}) {
    c = model_config();
    c["model"][key] = value;
    if (key == "src_vocab") c["model"]["tgt_vocab"] = value, c["model"]["shared_embeddings"] = true;
    if (key == "d_model") c["model"]["src_vocab"] = c["model"]["tgt_vocab"] = int64_t(1) << 22;
    EXPECT_NE(config_error(c).find(want), std::string::npos) << key << ": " << config_error(c);
  }
  nlohmann::json rnn = model_config();
  rnn["model_type"] = "rnn";
  rnn["model"] = {{"src_vocab", 60}, {"tgt_vocab", 60}, {"embed_dim", 16}, {"enc_hidden", 16}, {"dec_hidden", 16},
                  {"max_len", 32}};
  EXPECT_EQ(config_error(rnn), "");
  rnn["model"]["max_len"] = 30000000;
  EXPECT_NE(config_error(rnn).find("field 'model.max_len': must be at most 1048576, got 30000000"), std::string::npos)
      << config_error(rnn);
  rnn["model"]["max_len"] = 32;
  rnn["model"]["enc_hidden"] = rnn["model"]["dec_hidden"] = 60000;
  rnn["model"]["src_vocab"] = rnn["model"]["tgt_vocab"] = int64_t(1) << 24;
  EXPECT_NE(config_error(rnn).find("million parameters"), std::string::npos) << config_error(rnn);
}

// config.json's pad_id, bos_id and eos_id must be the target tokenizer's tokens: decoding starts,
// ends and pads with them, and an edited eos_id translated into "tree tree tree ..." with no error.
TEST(Seq2SeqConfig, SpecialIdsMustBeTheTokenizers) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("qkv_seq2seq_ids_" + std::to_string(getpid()));
  fs::remove_all(dir);
  qkv::io::Seq2SeqBundle b = qkv_test::tiny_translation_model(3);
  b.src_tok->set_special(qkv::text::Role::Pad, "<pad>");  // the fixture's tokenizer names no roles
  b.src_tok->set_special(qkv::text::Role::Bos, "<s>");
  b.src_tok->set_special(qkv::text::Role::Eos, "</s>");
  qkv::io::save_seq2seq(dir.string(), b);
  const std::string cfg = (dir / "config.json").string(), original = qkv::read_file(cfg);
  EXPECT_NO_THROW(qkv::io::load_seq2seq(dir.string()));
  for (const auto& [key, value, want] : std::vector<std::tuple<std::string, int, std::string>>{
           {"eos_id", 0, "field 'model.eos_id' is 0 but the target tokenizer's eos token is 3"},
           {"bos_id", 3, "field 'model.bos_id' is 3 but the target tokenizer's bos token is 2"},
           {"pad_id", 5, "field 'model.pad_id' is 5 but the target tokenizer's pad token is 0"}}) {
    nlohmann::json c = nlohmann::json::parse(original);
    c["model"][key] = value;
    qkv::write_file_atomic(cfg, c.dump());
    try {
      qkv::io::load_seq2seq(dir.string());
      ADD_FAILURE() << key;
    } catch (const qkv::Error& e) {
      EXPECT_NE(std::string(e.what()).find(cfg + ": " + want), std::string::npos) << e.what();
    }
  }
  fs::remove_all(dir);
}
