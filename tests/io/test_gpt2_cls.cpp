// Growing a GPT's vocabulary for [START] [DELIM] [EXTRACT] (models/gpt_vocab.h) and the fine-tuned
// classifier's directory in Hugging Face's GPT2ForSequenceClassification layout (io/gpt2_cls.h):
// old embedding rows and every other tensor stay bit-identical, the tied head's old logits do
// not move, the new rows are N(0, 0.02), and save -> load keeps bits, vocabulary, tokens, labels.
#include "qkv/io/gpt2_cls.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "qkv/autograd/node.h"
#include "qkv/io/format/safetensors.h"
#include "qkv/io/gpt2.h"
#include "qkv/models/gpt_vocab.h"
#include "qkv/ops/shape.h"
#include "qkv/text/char_word.h"
#include "qkv/text/finetune_tokens.h"
#include "qkv/util/file.h"
#include "helpers.h"

using namespace qkv;
namespace fs = std::filesystem;

namespace {

models::GptConfig tiny(int64_t vocab) {
  models::GptConfig c;
  c.vocab_size = vocab;
  c.n_positions = 16;
  c.n_embd = 16;
  c.n_layer = 2;
  c.n_head = 2;
  return c;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.data<float>(), y.data<float>(), size_t(x.numel()) * sizeof(float)) == 0;
}

std::shared_ptr<text::Tokenizer> char_tokenizer() {  // 20 symbols: the model's vocabulary
  std::vector<std::string> vocab = {"<unk>", " "};
  for (char c = 'a'; c < 'a' + 18; ++c) vocab.push_back(std::string(1, c));
  return std::make_shared<text::VocabTokenizer>(text::VocabTokenizer::Level::Char, vocab, "<unk>");
}

fs::path scratch_dir(const std::string& name) {
  fs::path d = fs::path(::testing::TempDir()) / (name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

}  // namespace

TEST(GrowVocab, OldRowsAndTensorsBitIdenticalNewRowsNormal002) {
  Generator init(11);
  models::Gpt old(tiny(20), init);
  old.eval();
  Generator gen(5);
  auto grown = models::grow_vocab(old, 23, gen);
  grown->eval();
  EXPECT_EQ(grown->config().vocab_size, 23);
  EXPECT_EQ(grown->embed_tokens->weight.shape(), Shape({23, 16}));
  auto a = old.state_dict(), b = grown->state_dict();
  ASSERT_EQ(a.size(), b.size());
  for (auto& [name, t] : a) {
    SCOPED_TRACE(name);
    if (name == "embed_tokens.weight") EXPECT_TRUE(same_bits(slice(b.at(name), 0, 0, 20), t));
    else EXPECT_TRUE(same_bits(b.at(name), t));
  }
  // The new rows are the generator's next N(0, 0.02) draws.
  std::vector<float> want(3 * 16);
  Generator again(5);
  again.normal(want.data(), int64_t(want.size()), 0.f, 0.02f);
  EXPECT_TRUE(same_bits(slice(grown->embed_tokens->weight, 0, 20, 23), Tensor::from_vector(want, {3, 16})));
  // The tied head: logits of the old vocabulary do not move; the new columns read the new rows.
  NoGradGuard ng;
  Tensor ids = Tensor::from_vector(std::vector<int64_t>{1, 5, 7, 19, 2, 3}, {1, 6});
  Tensor lo = old.forward(ids), lg = grown->forward(ids);  // (1, 6, 20), (1, 6, 23)
  // (Equal in exact arithmetic; a BLAS may block a wider product differently, so f32 rounding.)
  std::vector<float> x = contiguous(slice(lg, 2, 0, 20)).to_vector<float>(), y = lo.to_vector<float>();
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], 1e-6 * (1 + std::abs(y[i]))) << i;
  EXPECT_THROW(models::grow_vocab(old, 19), Error);
}

TEST(GrowVocab, NewRowsHaveStd002) {
  models::Gpt old(tiny(20));
  auto grown = models::grow_vocab(old, 20 + 4000);
  std::vector<float> w = contiguous(slice(grown->embed_tokens->weight, 0, 20, 4020)).to_vector<float>();
  double s = 0, s2 = 0;
  for (float v : w) s += v, s2 += double(v) * v;
  const double n = double(w.size()), mean = s / n, sd = std::sqrt(s2 / n - mean * mean);
  EXPECT_NEAR(mean, 0.0, 4 * 0.02 / std::sqrt(n));  // 64,000 draws: 4 standard errors
  EXPECT_NEAR(sd, 0.02, 4 * 0.02 / std::sqrt(2 * n));
}

TEST(GrowVocab, GrownModelAndTokenizerRoundTripInGpt2Layout) {
  io::GptBundle b;
  b.tokenizer = char_tokenizer();
  ASSERT_EQ(b.tokenizer->vocab_size(), 20);
  ASSERT_EQ(text::add_finetune_tokens(*b.tokenizer), 3);
  models::Gpt old(tiny(20));
  b.model = models::grow_vocab(old, b.tokenizer->vocab_size());
  b.config = b.model->config();
  const fs::path dir = scratch_dir("qkv_grow_vocab");
  io::save_gpt2(dir.string(), b);
  io::GptBundle back = io::load_gpt2(dir.string());
  EXPECT_EQ(back.config.vocab_size, 23);
  auto sd = back.model->state_dict();
  for (auto& [name, t] : b.model->state_dict()) EXPECT_TRUE(same_bits(sd.at(name), t)) << name;
  ASSERT_TRUE(back.tokenizer);
  EXPECT_EQ(back.tokenizer->vocab_size(), 23);
  EXPECT_EQ(back.tokenizer->encode_pair("ab", "c").ids, (std::vector<int32_t>{20, 2, 3, 21, 4, 22}));
  auto published = safetensors::load((dir / "model.safetensors").string()).tensors;
  EXPECT_EQ(published.at("wte.weight").shape(), Shape({23, 16}));
}

TEST(GptClassifierDir, SaveLoadKeepsBitsLabelsAndHuggingFaceNames) {
  io::GptClassifierBundle b;
  b.tokenizer = char_tokenizer();
  text::add_finetune_tokens(*b.tokenizer);
  models::Gpt old(tiny(20));
  b.model = std::make_shared<models::GptClassifier>(models::grow_vocab(old, 23), 3);
  b.labels = {"neg", "neutral", "pos"};
  b.pairs = true;
  b.max_len = 12;
  const fs::path dir = scratch_dir("qkv_gpt2_cls");
  io::save_gpt2_classifier(dir.string(), b);

  nlohmann::json cfg = nlohmann::json::parse(read_file((dir / "config.json").string()));
  EXPECT_EQ(cfg["architectures"], nlohmann::json({"GPT2ForSequenceClassification"}));
  EXPECT_EQ(cfg["id2label"], nlohmann::json({{"0", "neg"}, {"1", "neutral"}, {"2", "pos"}}));
  EXPECT_EQ(cfg["label2id"], nlohmann::json({{"neg", 0}, {"neutral", 1}, {"pos", 2}}));
  EXPECT_EQ(cfg["vocab_size"], 23);
  auto published = safetensors::load((dir / "model.safetensors").string()).tensors;
  EXPECT_EQ(published.at("transformer.wte.weight").shape(), Shape({23, 16}));
  EXPECT_EQ(published.at("score.weight").shape(), Shape({3, 16}));
  EXPECT_TRUE(published.count("transformer.h.1.mlp.c_proj.weight"));
  EXPECT_FALSE(published.count("lm_head.weight"));

  io::GptClassifierBundle back;
  qkv::testing::expect_load_peak_near_kept([&] { back = io::load_gpt2_classifier(dir.string()); }, 1.5,
                                           "load_gpt2_classifier");
  EXPECT_EQ(back.labels, b.labels);
  EXPECT_TRUE(back.pairs);
  EXPECT_EQ(back.max_len, 12);
  EXPECT_EQ(back.tokenizer->require_special_id(text::Role::Extract), 22);
  auto sd = back.model->state_dict();
  for (auto& [name, t] : b.model->state_dict()) EXPECT_TRUE(same_bits(sd.at(name), t)) << name;

  // A label named twice is an error naming the file and the field.
  nlohmann::json twice = cfg;
  twice["id2label"]["2"] = "neg";
  write_file_atomic((dir / "config.json").string(), twice.dump());
  try {
    io::load_gpt2_classifier(dir.string());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    for (const char* part : {"config.json", "id2label", "'neg' appears twice"})
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
  write_file_atomic((dir / "config.json").string(), cfg.dump());

  // Hugging Face's problem_type: single-label loads; multi-label (a sigmoid per label) is refused
  // by name, not read as a softmax.
  nlohmann::json typed = cfg;
  typed["problem_type"] = "single_label_classification";
  write_file_atomic((dir / "config.json").string(), typed.dump());
  EXPECT_NO_THROW(io::load_gpt2_classifier(dir.string()));
  typed["problem_type"] = "multi_label_classification";
  write_file_atomic((dir / "config.json").string(), typed.dump());
  try {
    io::load_gpt2_classifier(dir.string());
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    for (const char* part : {"config.json", "'problem_type'", "\"multi_label_classification\" is not supported"})
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
  write_file_atomic((dir / "config.json").string(), cfg.dump());

  // qkv_classifier is read as strictly as the BERT classifier's: an unknown key, a value of the
  // wrong type or a max_len the position table cannot hold (n_positions 16 here) is an error
  // naming the field; without the section, single texts over the whole table.
  for (const auto& [section, part] : std::vector<std::pair<nlohmann::json, std::string>>{
           {{{"pairs", true}, {"max_len", 12}, {"pooling", "mean"}}, "'qkv_classifier.pooling': unknown key"},
           {{{"pairs", "yes"}}, "'qkv_classifier.pairs': expected true or false"},
           {{{"max_len", 12.5}}, "'qkv_classifier.max_len': expected an integer"},
           {{{"max_len", 17}}, "'qkv_classifier.max_len': expected 0 (all of n_positions) to n_positions = 16"},
           {{{"max_len", -1}}, "'qkv_classifier.max_len'"},
           {nlohmann::json::array(), "'qkv_classifier': expected an object"}}) {
    nlohmann::json bad = cfg;
    bad["qkv_classifier"] = section;
    write_file_atomic((dir / "config.json").string(), bad.dump());
    try {
      io::load_gpt2_classifier(dir.string());
      ADD_FAILURE() << "expected an error for " << section.dump();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  }
  nlohmann::json plain = cfg;
  plain.erase("qkv_classifier");
  write_file_atomic((dir / "config.json").string(), plain.dump());
  const io::GptClassifierBundle defaults = io::load_gpt2_classifier(dir.string());
  EXPECT_FALSE(defaults.pairs);
  EXPECT_EQ(defaults.max_len, 16);
  write_file_atomic((dir / "config.json").string(), cfg.dump());

  // A score head that does not match the labels is an error naming the tensor.
  published["score.weight"] = Tensor::zeros({2, 16});
  safetensors::save((dir / "model.safetensors").string(), published);
  try {
    io::load_gpt2_classifier(dir.string());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("score.weight"), std::string::npos) << e.what();
  }
}
