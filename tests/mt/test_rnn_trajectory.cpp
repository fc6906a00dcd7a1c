// 100 training steps of each RNN encoder-decoder variant equal the PyTorch model of
// tools/refs/mt_rnn_trajectory.py step by step: same weights, data order, Adam at a constant
// learning rate, label smoothing, clipping, dropout 0, on a reversal task.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "scratch_util.h"
#include "qkv/models/rnn_seq2seq.h"
#include "qkv/train/seq2seq_task.h"
#include "ref.h"
#include "replay.h"

using namespace qkv;
using namespace qkv::testing;

namespace {

void run_variant(const std::string& c) {
  RefFile ref("mt_rnn_trajectory");
  auto p = ref.params(c);
  auto cfg = models::RnnSeq2SeqConfig::parse(p["config"], "mt_rnn_trajectory " + c);
  models::RnnSeq2Seq model(cfg);
  std::map<std::string, Tensor> init;
  for (auto& [name, t] : model.state_dict()) init[name] = ref.get(c, "init." + name);
  model.load_state_dict(init);

  ReplayStream stream(reference_batches(ref, c, int(p["batches"])));
  auto groups = single_group(model.parameters());
  Adam opt(groups, p["lr"], {0.9, 0.98}, p["eps"]);
  ConstantLR sched(p["lr"]);
  train::TrainOptions o;
  o.max_steps = p["steps"];
  o.label_smoothing = p["label_smoothing"];
  o.clip_norm = p["clip"];
  train::Seq2SeqTask task(model, stream, cfg.pad_id);
  train::Trainer trainer(task, opt, sched, o, qkv_test::temp_run_dir("rnn_trajectory_" + c), {});

  std::vector<double> expect = ref.get(c, "losses").to_vector<double>();
  std::vector<double> exact = ref.get(c, "losses64").to_vector<double>();
  double worst = 0, reference_fp32_error = 0;
  for (size_t s = 0; s < expect.size(); ++s) {
    double loss = trainer.train_step();
    double rel = std::abs(loss - expect[s]) / std::abs(expect[s]);
    worst = std::max(worst, rel);
    reference_fp32_error = std::max(reference_fp32_error, std::abs(expect[s] - exact[s]) / std::abs(exact[s]));
    // fp32 tolerance: 1e-5 relative on the loss at every step. PyTorch's own fp32 run stays
    // within 2.3e-6 of its fp64 run here (luong_dot, late steps; the others < 1e-6), so two fp32
    // implementations have room within 1e-5 without any allowance for drift.
    ASSERT_LE(rel, 1e-5) << c << " step " << s + 1 << ": qkv " << loss << " vs PyTorch " << expect[s];
  }
  // The comparison is meaningful only while fp32 itself is accurate: the reference's own fp32
  // run must stay within 1e-5 of its fp64 run.
  EXPECT_LT(reference_fp32_error, 1e-5);
  std::printf("[ trajectory ] %s: %zu steps, worst relative loss difference %.3g (reference fp32 vs fp64 %.3g)\n",
              c.c_str(), expect.size(), worst, reference_fp32_error);
  ::testing::Test::RecordProperty("worst_relative_loss_error_" + c, std::to_string(worst));
  EXPECT_LT(*std::min_element(expect.begin() + 90, expect.end()), expect.front() * 0.9)
      << "the reference run should learn something";
}
}  // namespace

TEST(RnnTrajectory, NoAttentionSutskeverMatchesPyTorch) { run_variant("none"); }
TEST(RnnTrajectory, BahdanauMatchesPyTorch) { run_variant("bahdanau"); }
TEST(RnnTrajectory, LuongDotInputFeedingMatchesPyTorch) { run_variant("luong_dot"); }
TEST(RnnTrajectory, LuongGeneralMatchesPyTorch) { run_variant("luong_general"); }
TEST(RnnTrajectory, LuongConcatInputFeedingMatchesPyTorch) { run_variant("luong_concat"); }
TEST(RnnTrajectory, LuongLocationInputFeedingMatchesPyTorch) { run_variant("luong_location"); }
