// Fine-tuning a GPT for classification ([START] text [EXTRACT], a linear head on the hidden state
// at [EXTRACT], the auxiliary LM loss weighted 0.5) against PyTorch (tools/refs/gpt_finetune.py):
// the gradients of the first step and the loss of 5 AdamW steps through the one Trainer.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "scratch_util.h"
#include "qkv/autograd/node.h"
#include "qkv/io/gpt2.h"
#include "qkv/ops/shape.h"
#include "qkv/train/cls_task.h"
#include "qkv/train/schedule.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;

namespace {

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

struct Finetune {
  std::unique_ptr<models::GptClassifier> model;
  train::ClsBatch batch;
  nlohmann::json params;
};

Finetune load(const RefFile& ref) {
  const std::string c = "run";
  Finetune s;
  s.params = ref.params(c);
  io::GptBundle b = io::load_gpt2((std::filesystem::path(ref_dir()) / s.params["dir"].get<std::string>()).string());
  s.model = std::make_unique<models::GptClassifier>(b.model, int64_t(s.params["labels"]));
  s.model->score->weight.copy_from(ref.get(c, "score0"));
  s.batch.ids = ref.get(c, "ids");
  s.batch.key_pad = ref.get(c, "key_pad");
  s.batch.extract_pos = ref.get(c, "extract");
  s.batch.labels = ref.get(c, "labels");
  Tensor t = contiguous(slice(s.batch.ids, 1, 1));  // (B, T-1): next tokens, -100 unless both real
  const Tensor& pad = s.batch.key_pad;
  std::vector<int64_t> v = t.to_vector<int64_t>();
  const int64_t B = t.size(0), T1 = t.size(1), T = pad.size(1);
  const uint8_t* kp = pad.data<uint8_t>();
  for (int64_t r = 0; r < B; ++r)
    for (int64_t j = 0; j < T1; ++j)
      if (kp[r * T + j] || kp[r * T + j + 1]) v[size_t(r * T1 + j)] = -100;
  s.batch.lm_targets = Tensor::from_vector(v, {B, T1});
  return s;
}

}  // namespace

TEST(GptFinetune, ExtractHeadAndAuxiliaryLossGradientsMatchTorch) {
  RefFile ref("gpt_finetune");
  Finetune s = load(ref);
  const int64_t B = s.batch.ids.size(0);
  Tensor loss = train::GptClassificationTask::summed_loss(*s.model, s.batch, s.params["lm_weight"]);
  backward(loss, Tensor::full(loss.shape(), 1.0 / double(B)));  // the Trainer's sum / units
  EXPECT_NEAR(loss.item() / double(B), ref.get("run", "losses").to_vector<double>()[0],
              1e-5 * std::abs(ref.get("run", "losses").to_vector<double>()[0]));
  std::map<std::string, Tensor> published;
  for (auto& [name, t] : ref.contents().tensors)
    if (name.rfind("run/grad.", 0) == 0 && name != "run/grad.score.weight") published[name.substr(9)] = t;
  auto want = io::gpt2_to_qkv(published, s.model->transformer->config(), "reference gradients");
  want["score.weight"] = ref.get("run", "grad.score.weight");
  auto params = s.model->named_parameters();
  ASSERT_EQ(params.size(), want.size());
  for (auto& [name, p] : params) {
    SCOPED_TRACE(name);
    std::string key = name.rfind("transformer.", 0) == 0 ? name.substr(12) : name;
    ASSERT_TRUE(want.count(key));
    EXPECT_CLOSE(p.grad(), want.at(key), scaled_tol(want.at(key)));
  }
}

TEST(GptFinetune, FiveTrainerStepsMatchTorch) {
  RefFile ref("gpt_finetune");
  Finetune s = load(ref);
  OneBatch stream(s.batch);
  AdamW opt(single_group(s.model->parameters()), s.params["lr"], {0.9, 0.999}, 1e-8, 0.0);
  ConstantLR sched(s.params["lr"]);
  train::TrainOptions o;
  o.max_steps = s.params["steps"];
  o.label_smoothing = 0;
  o.clip_norm = 0;
  train::GptClassificationTask task(*s.model, stream, s.params["lm_weight"]);
  train::Trainer trainer(task, opt, sched, o, qkv_test::temp_run_dir("gpt_finetune"), {});
  std::vector<double> expect = ref.get("run", "losses").to_vector<double>();
  for (size_t i = 0; i < expect.size(); ++i) {
    double loss = trainer.train_step();
    EXPECT_LE(std::abs(loss - expect[i]) / std::abs(expect[i]), 1e-5) << "step " << i + 1;
  }
  // Without the auxiliary loss the first step's loss is the classification loss alone: smaller.
  Finetune t = load(ref);
  const double cls_only = train::GptClassificationTask::summed_loss(*t.model, t.batch, 0.0).item();
  EXPECT_LT(cls_only / double(t.batch.ids.size(0)), expect[0]);
}
