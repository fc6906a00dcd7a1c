// Causal language modelling (train/lm_task): the packed-window stream, and 100 training steps of
// a GPT loaded from the published layout equal to PyTorch step by step
// (tools/refs/lm_trajectory.py: same weights and batches, AdamW, warm-up + cosine, clipping).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "scratch_util.h"
#include "qkv/io/gpt2.h"
#include "qkv/train/lm_task.h"
#include "qkv/train/schedule.h"
#include "run_qkv.h"
#include "qkv/util/file.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;
using qkv::testing::run_qkv;

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
  train::Trainer trainer(task, opt, sched, o, qkv_test::temp_run_dir("lm_trajectory"), {});

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

TEST(LmTraining, StridedPerplexityMatchesTheReference) {
  // tools/refs/models_gpt.py case "strided": a 40-token text, windows of 12 moved by 5, scored in
  // fp64 by the PyTorch GPT; qkv's fp32 sum of 39 log-probabilities within 1e-5 relative.
  RefFile ref("models_gpt");
  auto p = ref.params("strided");
  io::GptBundle b = io::load_gpt2((std::filesystem::path(ref_dir()) / p["dir"].get<std::string>()).string());
  std::vector<int64_t> text = ref.get("strided", "text").to_vector<int64_t>();
  train::NllSum r = train::strided_nll(*b.model, text, p["context"], p["stride"]);
  EXPECT_EQ(r.tokens, int64_t(p["count"]));
  EXPECT_EQ(r.tokens, int64_t(text.size()) - 1);
  const double want = ref.get("strided", "total_nll").to_vector<double>()[0];
  EXPECT_NEAR(r.total, want, 1e-5 * std::abs(want));
  EXPECT_THROW(train::strided_nll(*b.model, text, 13, 5), Error);  // longer than n_positions
  EXPECT_THROW(train::strided_nll(*b.model, text, 12, 13), Error);  // stride beyond the window
}

TEST(LmTraining, PerplexityCommandPrintsTheLibrarysFigures) {
  // The gpt2 reference model (61 tokens) with a character tokenizer learned here (fewer than 61
  // symbols): `qkv perplexity` must print the token count and mean NLL of train::strided_nll.
  RefFile ref("models_gpt");
  namespace fs = std::filesystem;
  const fs::path src = fs::path(ref_dir()) / ref.params("gpt2")["dir"].get<std::string>();
  const fs::path dir = fs::path(::testing::TempDir()) / ("qkv_ppl_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(src / "config.json", dir / "config.json");
  fs::copy_file(src / "model.safetensors", dir / "model.safetensors");
  const std::string text = "the cat sat on the mat and the dog sat on the log\nthe end of the tale\n";
  write_file_atomic((dir / "text.txt").string(), text);
  ASSERT_EQ(run_qkv({"train-tokenizer", "--kind", "char", "--vocab-size", "61", "--input", (dir / "text.txt").string(),
                     "--out", (dir / "tokenizer.json").string()}, dir / "tok.log"), 0) << read_file((dir / "tok.log").string());
  ASSERT_EQ(run_qkv({"perplexity", "--model", dir.string(), "--input", (dir / "text.txt").string(), "--context", "12",
                     "--stride", "4"}, dir / "ppl.log", (dir / "ppl.out").string()), 0)
      << read_file((dir / "ppl.log").string());
  const std::string out = read_file((dir / "ppl.out").string());

  io::GptBundle b = io::load_gpt2(dir.string());
  std::vector<int32_t> ids32 = b.tokenizer->encode(text);
  train::NllSum r = train::strided_nll(*b.model, std::vector<int64_t>(ids32.begin(), ids32.end()), 12, 4);
  char want[128];
  std::snprintf(want, sizeof want, "tokens      %lld ", (long long)r.tokens);
  EXPECT_NE(out.find(want), std::string::npos) << out;
  std::snprintf(want, sizeof want, "mean NLL    %.6f nats/token", r.total / double(r.tokens));
  EXPECT_NE(out.find(want), std::string::npos) << out;
  std::snprintf(want, sizeof want, "perplexity  %.4f", std::exp(r.total / double(r.tokens)));
  EXPECT_NE(out.find(want), std::string::npos) << out;
  // A model directory without a tokenizer is refused, naming it.
  fs::remove(dir / "tokenizer.json");
  EXPECT_NE(run_qkv({"perplexity", "--model", dir.string(), "--input", (dir / "text.txt").string()}, dir / "e.log"), 0);
  EXPECT_NE(read_file((dir / "e.log").string()).find("tokenizer"), std::string::npos);
}
