// BertForTokenClassification (models/bert_tagger.h) through Hugging Face's published layout
// (io/bert_tagger.h) against the class written in PyTorch (tools/refs/models_bert_tagger.py,
// float64 from the same float32 weights): logits of a right-padded batch, the loss with the
// ignored positions (-100: later pieces of a word, [CLS], [SEP], padding), every parameter's
// gradient. Also: a BertForPreTraining directory starts a tagger (classifier newly initialised,
// pooler and cls.* ignored), save -> load bits, and errors naming the file and the key or tensor.
#include "qkv/io/bert_tagger.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "qkv/autograd/node.h"
#include "qkv/io/format/safetensors.h"
#include "qkv/util/file.h"
#include "helpers.h"
#include "packed_rows.h"
#include "scratch_util.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;
namespace fs = std::filesystem;

namespace {

}  // namespace

TEST(BertTagger, LogitsLossAndEveryGradientMatchTorch) {
  RefFile ref("models_bert_tagger");
  const std::string c = "tagger";
  io::BertTaggerBundle b = io::load_bert_tagger(case_dir(ref, c));
  EXPECT_EQ(b.labels, ref.params(c)["labels"].get<std::vector<std::string>>());
  EXPECT_TRUE(b.report.initialised.empty()) << b.report.summary();
  EXPECT_EQ(b.report.ignored, std::vector<std::string>{"bert.embeddings.position_ids"});
  EXPECT_TRUE(contains(b.report.loaded, "classifier.weight") && contains(b.report.loaded, "classifier.bias"));
  ASSERT_TRUE(b.tokenizer != nullptr);
  b.model->eval();  // no dropout: the reference has none
  Tensor logits = b.model->forward(ref.get(c, "ids"), ref.get(c, "key_pad"));  // (B, T, C)
  // Every position, padding included (a padding query attends to the real keys, as in torch).
  EXPECT_CLOSE(logits, ref.get(c, "logits"), scaled_tol(ref.get(c, "logits")));
  Tensor loss = b.model->loss(logits, ref.get(c, "labels"));
  EXPECT_CLOSE(loss, ref.get(c, "loss"), kF32);
  {  // The rows packed without padding (what tasks::Tagger runs): torch's logits at the real positions.
    NoGradGuard ng;
    const PackedRows p = pack_padded(ref.get(c, "ids"), Tensor(), ref.get(c, "key_pad"));
    ASSERT_LT(p.ids.size(1), ref.get(c, "ids").numel()) << "the case should have padding";
    const Tensor want = p.real_concat(ref.get(c, "logits"));  // (N, C)
    EXPECT_CLOSE(reshape(b.model->forward_packed(p.ids, p.lengths), want.shape()), want, scaled_tol(want));
  }
  backward(loss);
  auto params = io::bert_tagger_published_parameters(b);
  EXPECT_EQ(params.size(), b.model->named_parameters().size());  // every parameter has a published name
  EXPECT_FALSE(params.count("bert.pooler.dense.weight"));
  size_t compared = 0;
  for (auto& [name, p] : params) {
    SCOPED_TRACE(name);
    Tensor want = ref.get(c, "grad." + name);
    ASSERT_TRUE(p.grad().defined());
    EXPECT_CLOSE(p.grad(), want, scaled_tol(want));
    ++compared;
  }
  size_t in_ref = 0;
  for (auto& [name, t] : ref.contents().tensors) in_ref += name.rfind(c + "/grad.", 0) == 0;
  EXPECT_EQ(compared, in_ref);
}

TEST(BertTagger, SummedLossOverLabelledPositionsIsTheMeanTimesTheirCount) {
  // What the trainer optimises (sum / units, units = labelled positions) is Hugging Face's mean.
  RefFile ref("models_bert_tagger");
  const std::string c = "tagger";
  io::BertTaggerBundle b = io::load_bert_tagger(case_dir(ref, c));
  NoGradGuard ng;
  Tensor logits = b.model->forward(ref.get(c, "ids"), ref.get(c, "key_pad"));
  const Tensor labels = ref.get(c, "labels");
  int64_t n = 0;
  for (int64_t y : labels.to_vector<int64_t>()) n += y != -100;
  const double sum = b.model->loss(logits, labels, /*sum=*/true).to_vector<double>()[0];
  EXPECT_NEAR(sum / double(n), ref.get(c, "loss").to_vector<double>()[0], 1e-5 * std::abs(sum / double(n)));
}

TEST(BertTagger, APretrainingDirectoryStartsATaggerAndSaysWhatItDid) {
  RefFile pre("models_bert");
  const std::string dir = (fs::path(ref_dir()) / pre.params("pretraining")["dir"].get<std::string>()).string();
  io::BertTaggerBundle t = io::bert_tagger_from_pretrained(dir, {"O", "B-X", "I-X"});
  const auto& r = t.report;
  EXPECT_EQ(r.initialised, (std::vector<std::string>{"classifier.weight", "classifier.bias"}));
  for (const char* n : {"bert.pooler.dense.weight", "bert.pooler.dense.bias", "cls.predictions.bias",
                        "cls.predictions.transform.dense.weight", "cls.seq_relationship.weight",
                        "cls.predictions.decoder.weight"})
    EXPECT_TRUE(contains(r.ignored, n)) << n << "\n" << r.summary();
  EXPECT_TRUE(contains(r.loaded, "bert.encoder.layer.1.output.LayerNorm.bias"));
  EXPECT_NE(r.summary().find("newly initialised: classifier.weight"), std::string::npos) << r.summary();
  EXPECT_NE(r.summary().find("ignored: bert.pooler.dense.weight"), std::string::npos) << r.summary();
  EXPECT_EQ(t.model->bert->pooler, nullptr);
  EXPECT_EQ(t.model->classifier->weight.shape(), Shape({3, t.config.hidden_size}));
  // The encoder is the pretrained one: its hidden states equal the reference's.
  NoGradGuard ng;
  Tensor h = t.model->bert->hidden(pre.get("pretraining", "ids"), pre.get("pretraining", "token_type_ids"),
                                   pre.get("pretraining", "key_pad"));
  EXPECT_CLOSE(h, pre.get("pretraining", "hidden"), scaled_tol(pre.get("pretraining", "hidden")));
}

TEST(BertTagger, SaveWritesThePublishedLayoutAndLoadsTheSameBits) {
  RefFile ref("models_bert_tagger");
  const std::string src = case_dir(ref, "tagger"), out = qkv_test::fresh_temp_path("bert_tagger", "save");
  io::BertTaggerBundle b = io::load_bert_tagger(src);
  io::save_bert_tagger(out, b);
  const auto cfg = nlohmann::json::parse(read_file(out + "/config.json"));
  EXPECT_EQ(cfg["architectures"], nlohmann::json::array({"BertForTokenClassification"}));
  EXPECT_EQ(cfg["id2label"]["1"], "B-PKG");
  EXPECT_EQ(cfg["label2id"]["B-URL"], 4);
  auto orig = safetensors::load(src + "/model.safetensors").tensors;
  auto mine = safetensors::load(out + "/model.safetensors").tensors;
  for (auto& [name, t] : orig) {
    if (name == "bert.embeddings.position_ids") continue;
    ASSERT_TRUE(mine.count(name)) << name;
    EXPECT_TRUE(bit_equal(mine.at(name), t)) << name;
  }
  EXPECT_EQ(mine.size() + 1, orig.size());  // nothing else (no pooler)
  io::BertTaggerBundle back = io::load_bert_tagger(out);
  EXPECT_EQ(back.labels, b.labels);
  EXPECT_TRUE(fs::exists(out + "/vocab.txt"));
  fs::remove_all(out);
}

TEST(BertTagger, ErrorsNameTheFileAndTheKeyOrTensor) {
  RefFile ref("models_bert_tagger");
  const std::string src = case_dir(ref, "tagger"), dir = qkv_test::fresh_temp_path("bert_tagger", "errors");
  fs::create_directories(dir);
  fs::copy(src, dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  auto cfg = nlohmann::json::parse(read_file(dir + "/config.json"));
  auto write_cfg = [&](const nlohmann::json& j) { write_file_atomic(dir + "/config.json", j.dump()); };

  nlohmann::json no_labels = cfg;
  no_labels.erase("id2label");
  write_cfg(no_labels);
  std::string e = error_of([&] { io::load_bert_tagger(dir); });
  EXPECT_NE(e.find("config.json"), std::string::npos) << e;
  EXPECT_NE(e.find("id2label"), std::string::npos) << e;

  nlohmann::json gap = cfg;
  gap["id2label"] = {{"0", "O"}, {"2", "B-PKG"}};
  write_cfg(gap);
  e = error_of([&] { io::load_bert_tagger(dir); });
  EXPECT_NE(e.find("id2label"), std::string::npos) << e;
  EXPECT_NE(e.find("'2'"), std::string::npos) << e;

  nlohmann::json three = cfg;  // 3 labels, a classifier of 5
  three["id2label"] = {{"0", "O"}, {"1", "B-PKG"}, {"2", "I-PKG"}};
  write_cfg(three);
  e = error_of([&] { io::load_bert_tagger(dir); });
  EXPECT_NE(e.find("model.safetensors"), std::string::npos) << e;
  EXPECT_NE(e.find("classifier.weight"), std::string::npos) << e;

  // A BertForPreTraining directory is not a token classifier: load_bert_tagger says so.
  RefFile pre("models_bert");
  const std::string pdir = (fs::path(ref_dir()) / pre.params("pretraining")["dir"].get<std::string>()).string();
  e = error_of([&] { io::load_bert_tagger(pdir); });
  EXPECT_NE(e.find("holds a \"BertForPreTraining\" model, not a token classifier"), std::string::npos) << e;
  fs::remove_all(dir);
}
