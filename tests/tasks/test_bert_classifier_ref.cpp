// BERT sentence(-pair) classification against PyTorch (tools/refs/bert_classifier.py: Hugging
// Face's BertForSequenceClassification written from the paper and the published layout):
// logits, loss and every parameter's gradient for a right-padded batch of single texts and of
// pairs with segment ids; the mean-pooling variant; 5 AdamW steps through the one Trainer;
// tasks::Classifier's probabilities on the texts themselves (WordPiece, [CLS]/[SEP], segments);
// starting from a pretraining checkpoint (the classifier newly initialised, cls.* ignored);
// save -> load; and malformed directories as errors naming the file and the field or tensor.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "qkv/autograd/node.h"
#include "qkv/io/bert_cls.h"
#include "qkv/io/format/safetensors.h"
#include "qkv/tasks/classifier.h"
#include "qkv/train/cls_task.h"
#include "qkv/train/schedule.h"
#include "qkv/util/file.h"
#include "helpers.h"
#include "packed_rows.h"
#include "scratch_util.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;
namespace fs = std::filesystem;

namespace {

train::ClsBatch batch_of(const RefFile& ref, const std::string& c) {
  train::ClsBatch b;
  b.ids = ref.get(c, "ids");
  b.token_type_ids = ref.get(c, "token_type_ids");
  b.key_pad = ref.get(c, "key_pad");
  b.labels = ref.get(c, "labels");
  return b;
}

// The classifier's parameters by published name (bert.*, classifier.*).
std::map<std::string, Tensor> published(const io::BertClassifierBundle& b) {
  io::BertBundle bb;
  bb.bert = b.model->bert;
  bb.task_heads = {{"classifier", b.model->classifier}};
  return io::bert_published_parameters(bb);
}

class OneBatch : public train::ClsBatchStream {
 public:
  explicit OneBatch(train::ClsBatch b) : b_(std::move(b)) {}
  train::ClsBatch next() override { ++i_; return b_; }
  int64_t epoch() const override { return i_; }
  std::map<std::string, int64_t> position() const override { return {{"i", i_}}; }
  void restore(const std::map<std::string, int64_t>& p) override { i_ = p.at("i"); }

 private:
  train::ClsBatch b_;
  int64_t i_ = 0;
};

}  // namespace

TEST(BertClassifierRef, LogitsLossAndEveryGradientMatchTorch) {
  RefFile ref("bert_classifier");
  for (const std::string c : {"single", "pairs"}) {
    SCOPED_TRACE(c);
    io::BertClassifierBundle b = io::load_bert_classifier(case_dir(ref, c));
    EXPECT_EQ(b.labels, ref.params(c)["labels"].get<std::vector<std::string>>());
    EXPECT_EQ(b.pairs, c == "pairs");
    EXPECT_EQ(b.max_len, 16);
    EXPECT_TRUE(b.report.initialised.empty());
    EXPECT_TRUE(b.report.ignored.empty());
    EXPECT_EQ(b.model->dropout->p, 0.0);  // classifier_dropout null: hidden_dropout_prob
    const train::ClsBatch batch = batch_of(ref, c);
    const Tensor logits = b.model->forward(batch.ids, batch.token_type_ids, batch.key_pad);
    EXPECT_CLOSE(logits, ref.get(c, "logits"), scaled_tol(ref.get(c, "logits")));
    const int64_t B = batch.ids.size(0);
    Tensor loss = train::BertClassificationTask::summed_loss(*b.model, batch);
    backward(loss, Tensor::full(loss.shape(), 1.0 / double(B)));  // the Trainer's sum / units
    const double want = ref.get(c, "loss").item();
    EXPECT_NEAR(loss.item() / double(B), want, 1e-5 * std::abs(want));
    auto params = published(b);
    size_t compared = 0;
    for (auto& [name, t] : ref.contents().tensors) {
      const std::string prefix = c + "/grad.";
      if (name.rfind(prefix, 0) != 0) continue;
      const std::string n = name.substr(prefix.size());
      SCOPED_TRACE(n);
      ASSERT_TRUE(params.count(n));
      ASSERT_TRUE(params.at(n).grad().defined());
      EXPECT_CLOSE(params.at(n).grad(), t, scaled_tol(t));
      ++compared;
    }
    EXPECT_EQ(compared, params.size());  // every parameter, the pooler and the classifier included
  }
}

TEST(BertClassifierRef, ClassifierOnTextsAndPairsGivesTorchsProbabilities) {
  RefFile ref("bert_classifier");
  for (const std::string c : {"single", "pairs"}) {
    SCOPED_TRACE(c);
    tasks::Classifier clf(case_dir(ref, c));
    EXPECT_EQ(clf.family(), tasks::ClassifierFamily::bert);
    EXPECT_EQ(clf.pairs(), c == "pairs");
    const auto p = ref.params(c);
    std::vector<tasks::ClsInput> inputs;
    for (size_t i = 0; i < p["texts"].size(); ++i)
      inputs.push_back({p["texts"][i].get<std::string>(), c == "pairs" ? p["pairs"][i].get<std::string>() : "",
                        c == "pairs"});
    const std::vector<double> want = ref.get(c, "probs").to_vector<double>();  // (B, C)
    const size_t C = clf.labels().size();
    for (int64_t bs : {64, 1, 3}) {
      SCOPED_TRACE(bs);
      tasks::ClassifyOptions o;
      o.batch_size = bs;
      o.all_probabilities = true;
      auto got = clf.classify(inputs, o);
      ASSERT_EQ(got.size() * C, want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        size_t best = 0;
        for (size_t k = 0; k < C; ++k) {
          EXPECT_NEAR(got[i].probabilities[k], want[i * C + k], 1e-5 * want[i * C + k] + 1e-6) << i << "," << k;
          if (want[i * C + k] > want[i * C + best]) best = k;
        }
        EXPECT_EQ(got[i].label, clf.labels()[best]) << i;
      }
    }
    // The other kind of input is refused, naming it.
    EXPECT_THROW(clf.classify({{"w1", "w2", c != "pairs"}}), Error);
  }
}

TEST(BertClassifierRef, ADirectoryThatDoesNotSayTakesSingleTextsAndPairs) {
  // transformers' save_pretrained writes no qkv_classifier: both kinds of input are classified,
  // each as the reference computes it (the "single" and "pairs" cases share their weights).
  RefFile ref("bert_classifier");
  const std::string d = qkv_test::fresh_temp_path("bert_cls", "undeclared");
  fs::create_directories(d);
  for (auto& e : fs::directory_iterator(case_dir(ref, "single"))) fs::copy_file(e.path(), fs::path(d) / e.path().filename());
  nlohmann::json j = nlohmann::json::parse(read_file(d + "/config.json"));
  j.erase("qkv_classifier");
  write_file_atomic(d + "/config.json", j.dump(2));
  tasks::Classifier clf(d);
  EXPECT_TRUE(clf.accepts(true) && clf.accepts(false));
  EXPECT_EQ(clf.input_pairs(), -1);
  std::vector<tasks::ClsInput> inputs;
  std::vector<double> want;
  for (const std::string c : {"single", "pairs"}) {
    const auto p = ref.params(c);
    for (size_t i = 0; i < p["texts"].size(); ++i)
      inputs.push_back({p["texts"][i].get<std::string>(), c == "pairs" ? p["pairs"][i].get<std::string>() : "",
                        c == "pairs"});
    for (double v : ref.get(c, "probs").to_vector<double>()) want.push_back(v);
  }
  tasks::ClassifyOptions o;
  o.all_probabilities = true;
  auto got = clf.classify(inputs, o);  // singles and pairs in one batch
  const size_t C = clf.labels().size();
  ASSERT_EQ(got.size() * C, want.size());
  for (size_t i = 0; i < got.size(); ++i)
    for (size_t k = 0; k < C; ++k)
      EXPECT_NEAR(got[i].probabilities[k], want[i * C + k], 1e-5 * want[i * C + k] + 1e-6) << i << "," << k;
  // The directory as qkv writes it declares its kind.
  EXPECT_FALSE(tasks::Classifier(case_dir(ref, "single")).accepts(true));
}

TEST(BertClassifierRef, MeanPoolingMatchesTorch) {
  RefFile ref("bert_classifier");
  io::BertClassifierSpec spec;
  spec.labels = ref.params("pairs")["labels"].get<std::vector<std::string>>();
  spec.pairs = true;
  spec.pooling = models::BertClsPooling::mean;
  io::BertClassifierBundle b = io::load_bert_for_classification(case_dir(ref, "mean"), spec);
  EXPECT_TRUE(b.report.initialised.empty());  // the directory's classifier is loaded
  const train::ClsBatch batch = batch_of(ref, "pairs");
  NoGradGuard ng;
  const Tensor logits = b.model->forward(batch.ids, batch.token_type_ids, batch.key_pad);
  EXPECT_CLOSE(logits, ref.get("mean", "logits"), scaled_tol(ref.get("mean", "logits")));
  const double loss = train::BertClassificationTask::summed_loss(*b.model, batch).item() / double(batch.ids.size(0));
  EXPECT_NEAR(loss, ref.get("mean", "loss").item(), 1e-5 * ref.get("mean", "loss").item());
  // The rows without their padding, packed end to end (what classify() runs): the same logits.
  const PackedRows packed = pack_padded(batch.ids, batch.token_type_ids, batch.key_pad);
  ASSERT_LT(packed.ids.size(1), batch.ids.numel()) << "the case should have padding";
  EXPECT_CLOSE(b.model->forward_packed(packed.ids, packed.types, packed.lengths), ref.get("mean", "logits"),
               scaled_tol(ref.get("mean", "logits")));
}

TEST(BertClassifierRef, FiveTrainerStepsMatchTorch) {
  RefFile ref("bert_classifier");
  io::BertClassifierBundle b = io::load_bert_classifier(case_dir(ref, "steps"));
  b.model->train();
  OneBatch stream(batch_of(ref, "pairs"));
  const double lr = ref.params("steps")["lr"];
  AdamW opt(single_group(b.model->parameters()), lr, {0.9, 0.999}, 1e-8, 0.0);
  ConstantLR sched(lr);
  train::TrainOptions o;
  o.max_steps = 5;
  o.label_smoothing = 0;
  o.clip_norm = 0;
  train::BertClassificationTask task(*b.model, stream);
  train::Trainer trainer(task, opt, sched, o, qkv_test::fresh_temp_path("bert_cls", "steps"), {});
  const std::vector<double> expect = ref.get("steps", "losses").to_vector<double>();
  ASSERT_EQ(expect.size(), 5u);
  for (size_t i = 0; i < expect.size(); ++i) {
    const double loss = trainer.train_step();
    EXPECT_LE(std::abs(loss - expect[i]) / std::abs(expect[i]), 1e-5) << "step " << i + 1;
  }
  EXPECT_LT(expect.back(), expect.front());  // the reference itself learns
}

TEST(BertClassifierRef, FromAPretrainingCheckpointTheHeadIsNewAndClsIgnoredThenSaveLoads) {
  RefFile ref("bert_classifier");
  io::BertClassifierSpec spec;
  spec.labels = {"a", "b", "c"};
  spec.max_len = 12;
  io::BertClassifierBundle b = io::load_bert_for_classification(case_dir(ref, "pretrained"), spec);
  EXPECT_EQ(b.report.initialised, (std::vector<std::string>{"classifier.weight", "classifier.bias"}));
  for (const char* n : {"cls.predictions.bias", "cls.predictions.transform.dense.weight",
                        "cls.predictions.transform.LayerNorm.bias", "cls.seq_relationship.weight",
                        "cls.seq_relationship.bias"})
    EXPECT_NE(std::find(b.report.ignored.begin(), b.report.ignored.end(), n), b.report.ignored.end()) << n;
  for (auto& n : b.report.ignored) EXPECT_EQ(n.rfind("cls.", 0), 0u) << n;
  EXPECT_NE(b.report.summary().find("newly initialised: classifier.weight"), std::string::npos);
  // The new head: Hugging Face's initialisation, weight N(0, 0.02), bias 0.
  const std::vector<double> w = b.model->classifier->weight.to_vector<double>();
  double sq = 0;
  for (double v : w) sq += v * v;
  EXPECT_NEAR(std::sqrt(sq / double(w.size())), 0.02, 0.006);
  for (double v : b.model->classifier->bias.to_vector<double>()) EXPECT_EQ(v, 0.0);
  EXPECT_EQ(b.max_len, 12);

  // Saved: Hugging Face's BertForSequenceClassification layout; loaded back bit for bit.
  const std::string dir = qkv_test::fresh_temp_path("bert_cls", "saved");
  io::save_bert_classifier(dir, b);
  const nlohmann::json cfg = nlohmann::json::parse(read_file(dir + "/config.json"));
  EXPECT_EQ(cfg.at("architectures"), nlohmann::json::array({"BertForSequenceClassification"}));
  EXPECT_EQ(cfg.at("id2label"), (nlohmann::json{{"0", "a"}, {"1", "b"}, {"2", "c"}}));
  EXPECT_EQ(cfg.at("label2id"), (nlohmann::json{{"a", 0}, {"b", 1}, {"c", 2}}));
  EXPECT_EQ(cfg.at("model_type"), "bert");
  EXPECT_EQ(cfg.at("qkv_classifier").at("max_len"), 12);
  std::set<std::string> names;
  for (auto& [n, t] : safetensors::load(dir + "/model.safetensors").tensors) names.insert(n);
  EXPECT_TRUE(names.count("classifier.weight") && names.count("classifier.bias") &&
              names.count("bert.pooler.dense.weight") && names.count("bert.encoder.layer.1.output.LayerNorm.bias"));
  for (auto& n : names) EXPECT_TRUE(n.rfind("bert.", 0) == 0 || n.rfind("classifier.", 0) == 0) << n;
  EXPECT_TRUE(fs::exists(dir + "/vocab.txt") && fs::exists(dir + "/tokenizer.json"));
  io::BertClassifierBundle back = io::load_bert_classifier(dir);
  EXPECT_EQ(back.labels, spec.labels);
  EXPECT_EQ(back.max_len, 12);
  auto p1 = published(b), p2 = published(back);
  ASSERT_EQ(p1.size(), p2.size());
  for (auto& [n, t] : p1) EXPECT_TRUE(bit_equal(t, p2.at(n))) << n;
}

TEST(BertClassifierRef, MalformedDirectoriesNameTheFileAndTheFieldOrTensor) {
  RefFile ref("bert_classifier");
  auto copy_case = [&](const std::string& c, const std::string& name) {
    const std::string d = qkv_test::fresh_temp_path("bert_cls", name);
    fs::create_directories(d);
    for (auto& e : fs::directory_iterator(case_dir(ref, c))) fs::copy_file(e.path(), fs::path(d) / e.path().filename());
    return d;
  };
  auto edit_config = [](const std::string& d, const std::function<void(nlohmann::json&)>& f) {
    nlohmann::json j = nlohmann::json::parse(read_file(d + "/config.json"));
    f(j);
    write_file_atomic(d + "/config.json", j.dump(2));
  };
  auto error_of = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  auto expect_has = [](const std::string& msg, std::initializer_list<const char*> parts) {
    for (const char* p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  };
  {  // num_labels disagrees with id2label
    const std::string d = copy_case("single", "num_labels");
    edit_config(d, [](nlohmann::json& j) { j["num_labels"] = 2; });
    expect_has(error_of([&] { io::load_bert_classifier(d); }), {"config.json", "num_labels", "3 labels"});
  }
  {  // a multi-label model: Hugging Face reads it with a sigmoid per label, not a softmax
    const std::string d = copy_case("single", "multi_label");
    edit_config(d, [](nlohmann::json& j) { j["problem_type"] = "multi_label_classification"; });
    expect_has(error_of([&] { io::load_bert_classifier(d); }),
               {"config.json", "problem_type", "\"multi_label_classification\" is not supported"});
    edit_config(d, [](nlohmann::json& j) { j["problem_type"] = "single_label_classification"; });
    EXPECT_NO_THROW(io::load_bert_classifier(d));
  }
  {  // a label named twice: an answer could not say which class it is
    const std::string d = copy_case("single", "twice");
    edit_config(d, [](nlohmann::json& j) { j["id2label"]["2"] = j["id2label"]["0"]; });
    expect_has(error_of([&] { io::load_bert_classifier(d); }), {"config.json", "id2label", "appears twice"});
  }
  {  // a max_len past the position table (it used to be cut to the table without a word)
    const std::string d = copy_case("single", "max_len");
    edit_config(d, [](nlohmann::json& j) { j["qkv_classifier"]["max_len"] = 100000; });
    expect_has(error_of([&] { io::load_bert_classifier(d); }),
               {"config.json", "max_len 100000", "max_position_embeddings = "});
  }
  {  // id2label of two labels against a classifier of three rows
    const std::string d = copy_case("single", "shape");
    edit_config(d, [](nlohmann::json& j) {
      j["id2label"] = {{"0", "x"}, {"1", "y"}};
      j["label2id"] = {{"x", 0}, {"y", 1}};
    });
    expect_has(error_of([&] { io::load_bert_classifier(d); }), {"model.safetensors", "classifier.weight", "(2, 32)"});
  }
  {  // a pretraining checkpoint is no fine-tuned classifier: the head is missing
    const std::string d = copy_case("pretrained", "nohead");
    edit_config(d, [](nlohmann::json& j) { j["id2label"] = {{"0", "x"}, {"1", "y"}}; });
    expect_has(error_of([&] { io::load_bert_classifier(d); }), {"model.safetensors", "classifier.weight", "missing"});
    expect_has(error_of([&] { tasks::Classifier c(d); }), {"classifier.weight"});
  }
  {  // no id2label; an unknown qkv_classifier key; a model_type that is no classifier
    const std::string d = copy_case("single", "fields");
    edit_config(d, [](nlohmann::json& j) { j.erase("id2label"); });
    expect_has(error_of([&] { io::load_bert_classifier(d); }), {"config.json", "id2label"});
    edit_config(d, [](nlohmann::json& j) {
      j["id2label"] = {{"0", "x"}, {"1", "y"}, {"2", "z"}};
      j["qkv_classifier"]["pool"] = "mean";
    });
    expect_has(error_of([&] { io::load_bert_classifier(d); }), {"config.json", "qkv_classifier.pool"});
    edit_config(d, [](nlohmann::json& j) { j["model_type"] = "t5"; });
    expect_has(error_of([&] { tasks::Classifier c(d); }), {"config.json", "model_type", "t5"});
  }
}
