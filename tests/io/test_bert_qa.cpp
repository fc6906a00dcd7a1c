// BertForQuestionAnswering (models/bert_qa) through the Hugging Face layout (io/bert_qa) against
// tools/refs/models_bert_qa.py: start/end logits of a right-padded two-segment batch, Hugging
// Face's loss with a start position past the window (clamped, ignored) and every parameter's
// gradient; what loading a pretraining directory reports; save -> load bits; a bad head shape.
#include "qkv/io/bert_qa.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "qkv/autograd/node.h"
#include "qkv/io/format/safetensors.h"
#include "helpers.h"
#include "packed_rows.h"
#include "scratch_util.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;
namespace fs = std::filesystem;

namespace {

}  // namespace

TEST(BertQa, LogitsLossAndEveryGradientMatchTorch) {
  RefFile ref("models_bert_qa");
  const std::string c = "qa";
  io::BertQaBundle b = io::load_bert_qa(case_dir(ref, c));
  EXPECT_TRUE(b.report.initialised.empty()) << b.report.summary();
  EXPECT_TRUE(b.report.ignored.empty()) << b.report.summary();
  EXPECT_TRUE(contains(b.report.loaded, "qa_outputs.weight"));
  b.model->eval();  // no dropout: the reference has none
  auto logits = b.model->forward(ref.get(c, "ids"), ref.get(c, "token_type_ids"), ref.get(c, "key_pad"));
  EXPECT_CLOSE(logits.start, ref.get(c, "start_logits"), scaled_tol(ref.get(c, "start_logits")));
  EXPECT_CLOSE(logits.end, ref.get(c, "end_logits"), scaled_tol(ref.get(c, "end_logits")));
  Tensor loss = models::BertForQuestionAnswering::loss(logits, ref.get(c, "start_positions"), ref.get(c, "end_positions"));
  EXPECT_CLOSE(loss, ref.get(c, "loss"), kF32);
  {  // The rows packed without padding (what tasks::QuestionAnswerer runs): torch's logits at the real positions.
    NoGradGuard ng;
    const PackedRows p = pack_padded(ref.get(c, "ids"), ref.get(c, "token_type_ids"), ref.get(c, "key_pad"));
    ASSERT_LT(p.ids.size(1), ref.get(c, "ids").numel()) << "the case should have padding";
    auto packed = b.model->forward_packed(p.ids, p.types, p.lengths);
    for (const auto& [got, name] : {std::pair{packed.start, "start_logits"}, std::pair{packed.end, "end_logits"}}) {
      const Tensor want = p.real_concat(ref.get(c, name));  // (N)
      EXPECT_CLOSE(reshape(got, want.shape()), want, scaled_tol(want));
    }
  }
  backward(loss);
  auto params = io::bert_qa_published_parameters(b);
  EXPECT_EQ(params.size(), b.model->named_parameters().size());  // no pooler among them
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

TEST(BertQa, ParameterNamesAreHuggingFacesWithoutPooler) {
  models::BertConfig cfg;
  cfg.vocab_size = 20, cfg.hidden_size = 8, cfg.num_hidden_layers = 1, cfg.num_attention_heads = 2;
  cfg.intermediate_size = 12, cfg.max_position_embeddings = 16;
  io::BertQaBundle b = io::make_bert_qa(cfg);
  bool head = false;
  for (auto& [name, t] : b.model->named_parameters()) {
    EXPECT_EQ(name.find("pooler"), std::string::npos) << name;
    EXPECT_TRUE(name.rfind("bert.", 0) == 0 || name.rfind("qa_outputs.", 0) == 0) << name;
    head |= name == "qa_outputs.weight";
  }
  EXPECT_TRUE(head);
}

TEST(BertQa, PretrainingDirectoryReportsTheNewHeadAndIgnoresPoolerAndCls) {
  RefFile ref("models_bert");
  io::BertQaBundle b = io::load_bert_qa(case_dir(ref, "pretraining"));
  const auto& r = b.report;
  EXPECT_EQ(r.initialised, (std::vector<std::string>{"qa_outputs.weight", "qa_outputs.bias"})) << r.summary();
  for (const char* n : {"bert.pooler.dense.weight", "bert.pooler.dense.bias", "cls.predictions.bias",
                        "cls.predictions.decoder.weight", "cls.seq_relationship.weight"})
    EXPECT_TRUE(contains(r.ignored, n)) << n << "\n" << r.summary();
  EXPECT_TRUE(contains(r.loaded, "bert.encoder.layer.1.output.LayerNorm.bias"));
  EXPECT_FALSE(contains(r.loaded, "bert.pooler.dense.weight"));
  EXPECT_NE(r.summary().find("newly initialised: qa_outputs.weight"), std::string::npos) << r.summary();
  ASSERT_NE(b.tokenizer, nullptr);
}

TEST(BertQa, SaveThenLoadGivesTheSameBitsAndNoPooler) {
  RefFile ref("models_bert_qa");
  io::BertQaBundle a = io::load_bert_qa(case_dir(ref, "qa"));
  const std::string dir = qkv_test::fresh_temp_path("bert_qa", "roundtrip");
  io::save_bert_qa(dir, a);
  const auto stored = safetensors::load(dir + "/model.safetensors").tensors;
  EXPECT_EQ(stored.count("bert.pooler.dense.weight"), 0u);
  EXPECT_EQ(stored.count("qa_outputs.bias"), 1u);
  io::BertQaBundle b = io::load_bert_qa(dir);
  EXPECT_TRUE(b.report.initialised.empty() && b.report.ignored.empty()) << b.report.summary();
  auto pa = io::bert_qa_published_parameters(a), pb = io::bert_qa_published_parameters(b);
  ASSERT_EQ(pa.size(), pb.size());
  for (auto& [n, t] : pa) EXPECT_TRUE(bit_equal(t, pb.at(n))) << n;
  fs::remove_all(dir);
}

TEST(BertQa, AHeadOfTheWrongShapeNamesFileAndTensor) {
  RefFile ref("models_bert_qa");
  const std::string dir = qkv_test::fresh_temp_path("bert_qa", "badhead");
  fs::create_directories(dir);
  for (const char* f : {"config.json", "vocab.txt"}) fs::copy_file(case_dir(ref, "qa") + "/" + f, dir + "/" + f);
  auto tensors = safetensors::load(case_dir(ref, "qa") + "/model.safetensors").tensors;
  tensors["qa_outputs.weight"] = Tensor::zeros({3, 32});
  safetensors::save(dir + "/model.safetensors", tensors);
  try {
    io::load_bert_qa(dir);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("model.safetensors"), std::string::npos) << m;
    EXPECT_NE(m.find("qa_outputs.weight"), std::string::npos) << m;
  }
  fs::remove_all(dir);
}
