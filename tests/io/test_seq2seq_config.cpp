// A translation model's config.json is read as strictly as the GPT and BERT ones: a format from
// another qkv, an unknown key or a section of the wrong type is an error naming the file and the
// field, and a model too short to hold a token and </s> is refused (it translated everything to
// nothing, exit 0). The sections of the training config a model keeps are accepted.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "qkv/io/model_dir.h"
#include "qkv/util/error.h"
#include "qkv/util/file.h"

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

std::string error_of(const nlohmann::json& config) {
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
  EXPECT_EQ(error_of(model_config()), "");
  nlohmann::json early = model_config();
  early.erase("format");  // models written before the key existed
  EXPECT_EQ(error_of(early), "");

  nlohmann::json c = model_config();
  c["format"] = "qkv-seq2seq-99";
  EXPECT_EQ(error_of(c).rfind("field 'format': expected \"qkv-seq2seq-1\", got \"qkv-seq2seq-99\"", 0), 0u)
      << error_of(c);
  c = model_config();
  c["bogus"] = 1;
  EXPECT_EQ(error_of(c).rfind("field 'bogus': unknown key", 0), 0u) << error_of(c);
  c = model_config();
  c["train"] = "x";
  EXPECT_EQ(error_of(c).rfind("field 'train': expected an object", 0), 0u) << error_of(c);
  const nlohmann::json bert = {{"architectures", {"BertForSequenceClassification"}}, {"model_type", "bert"}};
  EXPECT_EQ(error_of(bert).rfind("holds a \"BertForSequenceClassification\" model, not a translation model", 0), 0u)
      << error_of(bert);
  c = model_config();
  c["model"]["max_len"] = 1;
  EXPECT_NE(error_of(c).find("max_len must be at least 2 (a token and </s>), got 1"), std::string::npos)
      << error_of(c);
}
