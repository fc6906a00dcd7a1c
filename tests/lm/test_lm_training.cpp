// Causal language modelling (train/lm_task): the packed-window stream, and 100 training steps of
// a GPT loaded from the published layout equal to PyTorch step by step
// (tools/refs/lm_trajectory.py: same weights and batches, AdamW, warm-up + cosine, clipping).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "qkv/io/gpt2.h"
#include "qkv/train/lm_task.h"
#include "qkv/train/schedule.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;

namespace {

// The reference's batches, replayed in its order.
class ReplayLm : public train::LmBatchStream {
 public:
  explicit ReplayLm(std::vector<train::LmBatch> b) : batches_(std::move(b)) {}
  train::LmBatch next() override { return batches_[size_t(i_++ % int64_t(batches_.size()))]; }
  int64_t epoch() const override { return i_ / int64_t(batches_.size()); }
  std::map<std::string, int64_t> position() const override { return {{"i", i_}}; }
  void restore(const std::map<std::string, int64_t>& p) override { i_ = p.at("i"); }

 private:
  std::vector<train::LmBatch> batches_;
  int64_t i_ = 0;
};

}  // namespace

TEST(LmTraining, HundredStepsMatchPyTorch) {
  RefFile ref("lm_trajectory");
  const std::string c = "run";
  auto p = ref.params(c);
  io::GptBundle b = io::load_gpt2((std::filesystem::path(ref_dir()) / p["dir"].get<std::string>()).string());
  std::vector<train::LmBatch> batches;
  for (int i = 0; i < int(p["batches"]); ++i) {
    train::LmBatch lb;
    lb.ids = ref.get(c, "ids" + std::to_string(i));
    lb.targets = ref.get(c, "targets" + std::to_string(i));
    lb.tokens = lb.targets.numel();
    batches.push_back(lb);
  }
  ReplayLm stream(batches);
  AdamW opt(make_param_groups(b.model->named_parameters(), is_bias_or_norm), 1.0, {p["betas"][0], p["betas"][1]},
            p["eps"], p["weight_decay"]);
  WarmupCosine sched(p["lr"], p["warmup"], p["steps"]);
  train::TrainOptions o;
  o.max_steps = p["steps"];
  o.label_smoothing = 0;
  o.clip_norm = p["clip"];
  train::LmTask task(*b.model, stream);
  train::Trainer trainer(task, opt, sched, o, ::testing::TempDir() + "/lm_trajectory", {});

  std::vector<double> expect = ref.get(c, "losses").to_vector<double>();
  std::vector<double> exact = ref.get(c, "losses64").to_vector<double>();
  double reference_fp32_error = 0;
  for (size_t s = 0; s < expect.size(); ++s) {
    double loss = trainer.train_step();
    reference_fp32_error = std::max(reference_fp32_error, std::abs(expect[s] - exact[s]) / std::abs(exact[s]));
    // fp32: 1e-5 relative on the loss at every step (PyTorch's own fp32 run stays within 6.4e-7
    // of its fp64 run over these 100 steps, checked below).
    ASSERT_LE(std::abs(loss - expect[s]) / std::abs(expect[s]), 1e-5)
        << "step " << s + 1 << ": qkv " << loss << " vs PyTorch " << expect[s];
  }
  EXPECT_LT(reference_fp32_error, 1e-5);
  EXPECT_LT(expect.back(), expect.front() * 0.2) << "the reference run should learn the stream's rule";
}

TEST(LmTraining, PackedWindowsOverlapByOneAndResumeExactly) {
  // Documents 0..9, 10..19, 20..24 (each ending in its own last id) -> one stream 0..24;
  // windows of T + 1 = 5 tokens start at 0, 4, 8, ..., 20: six windows, the last (20..24) complete.
  std::vector<std::vector<int64_t>> docs(3);
  for (int64_t t = 0; t < 25; ++t) docs[t < 10 ? 0 : t < 20 ? 1 : 2].push_back(t);
  train::PackedLmStream s(docs, 4, 4, 7);
  EXPECT_EQ(s.windows(), 6);
  EXPECT_EQ(s.batches_per_epoch(), 2);
  auto all = s.all_batches();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].ids.shape(), (Shape{4, 4}));
  EXPECT_EQ(all[1].ids.shape(), (Shape{2, 4}));  // the last batch holds the remaining windows
  EXPECT_EQ(all[0].ids.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(all[0].targets.to_vector<int64_t>(),
            (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}));
  EXPECT_EQ(all[1].targets.to_vector<int64_t>(), (std::vector<int64_t>{17, 18, 19, 20, 21, 22, 23, 24}));
  EXPECT_EQ(all[0].tokens + all[1].tokens, 24);

  // A stream restored from a saved position continues with the same batches.
  for (int i = 0; i < 3; ++i) s.next();
  auto pos = s.position();
  train::PackedLmStream t(docs, 4, 4, 7);
  t.restore(pos);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(s.next().ids.to_vector<int64_t>(), t.next().ids.to_vector<int64_t>());
  // Another corpus with the same window count is refused.
  docs[2][0] = 99;
  train::PackedLmStream u(docs, 4, 4, 7);
  EXPECT_THROW(u.restore(pos), Error);
  EXPECT_THROW(train::PackedLmStream({{1, 2, 3}}, 4, 4, 7), Error);  // fewer tokens than one window
}
