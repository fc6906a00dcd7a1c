// Non-finite numbers in training (qkv/train/nonfinite.h): a task whose loss and gradients go NaN
// (or Inf) at one batch. With train.on_nonfinite "stop" the run stops in that step, naming the
// step, the loss and the first parameter whose gradient is non-finite, before any update; with
// "skip" the step is dropped and the run ends bit-identical to one that never drew that batch.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <set>

#include "qkv/nn/module.h"
#include "qkv/ops/elementwise.h"
#include "qkv/ops/reduce.h"
#include "qkv/train/optim.h"
#include "qkv/train/schedule.h"
#include "qkv/train/trainer.h"
#include "ref.h"

using namespace qkv;

namespace {

// Two parameters; the loss is linear in both: sum(first * x1) + sum(second * x2).
class Toy : public nn::Module {
 public:
  Toy() {
    first = register_parameter("first", Tensor::from_vector<float>({0.5f, -0.25f, 1.0f}, {3}));
    second = register_parameter("second", Tensor::from_vector<float>({-1.0f, 0.75f, 0.125f}, {3}));
  }
  Tensor first, second;
};

// Batch i has inputs that depend on i; batches in `poisoned` put `bad` into x2 (so into the loss
// and second's gradient, while first's stays finite); batches in `omitted` are never drawn.
class PoisonTask : public train::TrainingTask {
 public:
  PoisonTask(std::set<int64_t> poisoned, double bad, std::set<int64_t> omitted = {})
      : poisoned_(std::move(poisoned)), omitted_(std::move(omitted)), bad_(float(bad)) {}
  nn::Module& model() override { return model_; }
  MicroBatch next() override {
    while (omitted_.count(i_)) ++i_;
    const float s = 1.0f + 0.1f * float(i_);
    std::vector<float> x2{0.3f * s, -0.7f * s, 0.2f};
    if (poisoned_.count(i_)) x2[1] = bad_;
    Tensor x1 = Tensor::from_vector<float>({s, -0.5f * s, 0.25f}, {3}), x2t = Tensor::from_vector<float>(x2, {3});
    ++i_;
    MicroBatch b;
    b.units = 1;
    b.summed_loss = [this, x1, x2t](double) { return qkv::sum(model_.first * x1) + qkv::sum(model_.second * x2t); };
    return b;
  }
  int64_t epoch() const override { return 0; }
  std::map<std::string, int64_t> position() const override { return {{"batch", i_}}; }
  void restore(const std::map<std::string, int64_t>& p) override { i_ = p.at("batch"); }
  Toy model_;

 private:
  std::set<int64_t> poisoned_, omitted_;
  float bad_;
  int64_t i_ = 0;
};

struct TrainRun {
  train::TrainOptions o;
  std::string dir;
  TrainRun(int64_t steps, train::NonFinitePolicy policy) {
    o.max_steps = steps;
    o.save_every = 0;
    o.valid_every = 0;
    o.on_nonfinite = policy;
    o.clip_norm = 1.0;
    dir = (std::filesystem::temp_directory_path() / ("qkv_nonfinite_" + std::to_string(::getpid()))).string();
  }
  // Runs the task; returns the error message ("" if the run finished).
  std::string go(PoisonTask& task) {
    std::filesystem::remove_all(dir);
    ParamGroup group;
    group.params = task.model_.parameters();
    Adam opt({group}, 0.05);
    ConstantLR sched(0.05);
    train::Trainer trainer(task, opt, sched, o, dir, {});
    try {
      trainer.run();
    } catch (const Error& e) {
      return e.what();
    }
    steps = trainer.step();
    return "";
  }
  int64_t steps = -1;
};

const double kNaN = std::numeric_limits<double>::quiet_NaN(), kInf = std::numeric_limits<double>::infinity();

}  // namespace

TEST(NonFinite, StopNamesStepLossAndFirstParameterBeforeUpdating) {
  for (double bad : {kNaN, kInf}) {
    SCOPED_TRACE(bad);
    TrainRun run(10, train::NonFinitePolicy::stop);
    PoisonTask poisoned({4}, bad);  // the fifth batch: step 5
    const std::string m = run.go(poisoned);
    EXPECT_NE(m.find("step 5:"), std::string::npos) << m;
    EXPECT_NE(m.find(std::isnan(bad) ? "loss nan" : "loss "), std::string::npos) << m;
    EXPECT_NE(m.find("first parameter with a non-finite gradient: 'second'"), std::string::npos) << m;
    EXPECT_NE(m.find("on_nonfinite"), std::string::npos) << m;
    // The weights are the fourth step's: a clean run of 4 steps has the same bits.
    TrainRun four(4, train::NonFinitePolicy::stop);
    PoisonTask clean({}, 0);
    ASSERT_EQ(four.go(clean), "");
    EXPECT_TRUE(qkv::testing::bit_equal(poisoned.model_.first, clean.model_.first));
    EXPECT_TRUE(qkv::testing::bit_equal(poisoned.model_.second, clean.model_.second));
    std::filesystem::remove_all(run.dir);
  }
}

TEST(NonFinite, SkipDropsTheStepAsIfTheBatchWereNeverDrawn) {
  TrainRun run(8, train::NonFinitePolicy::skip);
  PoisonTask poisoned({3, 6}, kNaN);
  ASSERT_EQ(run.go(poisoned), "");
  EXPECT_EQ(run.steps, 8);
  TrainRun ref(8, train::NonFinitePolicy::stop);
  PoisonTask omitted({}, 0, {3, 6});
  ASSERT_EQ(ref.go(omitted), "");
  EXPECT_TRUE(qkv::testing::bit_equal(poisoned.model_.first, omitted.model_.first));
  EXPECT_TRUE(qkv::testing::bit_equal(poisoned.model_.second, omitted.model_.second));
  // The control: the omitted batches do matter (a run that uses them ends elsewhere).
  TrainRun all(8, train::NonFinitePolicy::stop);
  PoisonTask clean({}, 0);
  ASSERT_EQ(all.go(clean), "");
  EXPECT_FALSE(qkv::testing::bit_equal(clean.model_.first, omitted.model_.first));
  std::filesystem::remove_all(run.dir);
}

TEST(NonFinite, TooManySkipsInARowStop) {
  TrainRun run(10, train::NonFinitePolicy::skip);
  run.o.max_nonfinite_skips = 2;
  PoisonTask poisoned({2, 3, 4, 5}, kInf);
  const std::string m = run.go(poisoned);
  EXPECT_NE(m.find("step 3:"), std::string::npos) << m;  // steps 1, 2 done; batches 2, 3 skipped; 4 stops
  EXPECT_NE(m.find("3 steps in a row"), std::string::npos) << m;
  EXPECT_NE(m.find("max_nonfinite_skips (2)"), std::string::npos) << m;
  std::filesystem::remove_all(run.dir);
}

TEST(NonFinite, ConfigKeys) {
  nlohmann::json j = {{"on_nonfinite", "skip"}, {"max_nonfinite_skips", 3}};
  ConfigReader r(j, "run.json", "train");
  train::TrainOptions o = train::TrainOptions::from_config(r);
  EXPECT_EQ(o.on_nonfinite, train::NonFinitePolicy::skip);
  EXPECT_EQ(o.max_nonfinite_skips, 3);
  EXPECT_EQ(train::TrainOptions().on_nonfinite, train::NonFinitePolicy::stop);
  nlohmann::json bad = {{"on_nonfinite", "ignore"}};
  ConfigReader rb(bad, "run.json", "train");
  try {
    train::TrainOptions::from_config(rb);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("run.json: field 'train.on_nonfinite'"), std::string::npos) << m;
    EXPECT_NE(m.find("\"stop\" or \"skip\", got \"ignore\""), std::string::npos) << m;
  }
}
