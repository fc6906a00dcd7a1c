// qkv/train/trainer.h - the training loop, one for every task (translation, language modelling,
// classification): a TrainingTask supplies the model, its micro-batches and their summed losses.
//
// One step: accum_steps micro-batches, each micro-batch's summed loss (e.g. label-smoothed
// cross-entropy over its non-pad target tokens) divided by the step's total count of what the
// losses sum over, backward, global-norm clipping, lr from the schedule, optimizer update. Validation, checkpoints, early stopping and SIGINT/SIGTERM are
// handled here; writing the model files and scoring BLEU are callbacks, because they belong to
// io/, decode/ and eval/, which sit below train/ in DESIGN.md's layer order.
//
// Resuming restores the weights (by the caller), optimizer moments, step, epoch, the default
// generator's (seed, offset) and the data position, so an interrupted run continues bit-exactly.
//
// Under mpirun (train/distributed.h) every rank runs this loop in step: each computes the loss of
// its rows of every micro-batch, the gradients are summed over the ranks before clipping, every
// rank validates (so early stopping agrees), and rank 0 alone writes checkpoints, metrics and
// the progress line. The training state then also holds the number of ranks (a resume with
// another number is refused) and every rank's generator state (dropout differs per rank).
#pragma once
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "qkv/kernels/bf16.h"
#include "qkv/nn/module.h"
#include "qkv/train/checkpoint.h"
#include "qkv/train/nonfinite.h"
#include "qkv/train/distributed.h"
#include "qkv/train/optim.h"
#include "qkv/train/progress.h"
#include "qkv/train/schedule.h"
#include "qkv/util/config.h"

namespace qkv::train {

inline constexpr int64_t kMaxAccumSteps = 4096;  // train.accum_steps: every micro-batch is held until the update

struct TrainOptions {
  int64_t max_steps = 1000;   // stop after this many updates (0 = no limit)
  int64_t max_epochs = 0;     // stop after this many epochs (0 = no limit)
  double max_minutes = 0;     // stop after this much wall-clock time in this process (0 = no limit)
  int64_t accum_steps = 1;    // micro-batches per update, at most kMaxAccumSteps
  double label_smoothing = 0.1;
  double clip_norm = 1.0;     // 0 = off
  int64_t valid_every = 500;  // updates between validations (0 = only at the end)
  int64_t save_every = 500;   // updates between checkpoints (0 = only at the end)
  int64_t log_every = 50;     // plain-log interval when stderr is not a terminal
  int keep_last = 3;
  int average_last = 0;       // publish the mean of the last N checkpoints as the model (0 = the best)
  int patience = 0;           // validations without a better best_metric before stopping (0 = off)
  // "fp32" | "bf16": the matrix products of each step's forward and backward passes. bf16 is
  // mixed precision as torch's autocast: operands rounded to bf16, f32 accumulation and results;
  // master weights, gradients, optimizer, clipping, softmax, norms and losses stay fp32, and so
  // do validation and the saved checkpoints. Needs AMX or AVX512_BF16 (an error otherwise).
  kernels::MatmulPrecision precision = kernels::MatmulPrecision::fp32;
  // A NaN or Inf in a step's loss or gradients (qkv/train/nonfinite.h): stop, or skip the step.
  NonFinitePolicy on_nonfinite = NonFinitePolicy::stop;
  int max_nonfinite_skips = 20;  // consecutive skipped steps before stopping anyway

  static TrainOptions from_config(ConfigReader& r);  // reads the keys above (snake_case)
};

struct TrainCallbacks {
  std::function<void(const std::string& dir)> write_model;  // config.json, model.safetensors, tokenizer
  // Validation metrics, e.g. {"valid_loss": .., "valid_bleu": .., "valid_chrf": ..}.
  std::function<std::map<std::string, double>()> validate;
  // The validation metric that picks run/best and drives patience, and which way is better:
  // BLEU for translation, accuracy for classification, perplexity (lower) for language models.
  // best_bleu() reports its best value.
  std::string best_metric = "valid_bleu";
  bool lower_is_better = false;
};

enum class Outcome { finished, early_stopped, interrupted };

// What the loop needs from a task. Micro-batches come from an endless, resumable stream (epochs
// reshuffle deterministically); position()/restore() carry the stream's place in checkpoints.
class TrainingTask {
 public:
  struct MicroBatch {
    int64_t units = 0;  // how many terms its loss sums (target tokens, sequences, ...)
    std::function<Tensor(double label_smoothing)> summed_loss;  // recorded scalar, training mode
    // Data-parallel training (train/distributed.h) splits a micro-batch by rows (sentences,
    // sequences): the units of each row (summing to `units`), and the summed loss of rows
    // [begin, end) alone, so that the shards' losses add up to summed_loss's. Tasks that leave
    // rows_loss empty train on one process only.
    std::vector<int64_t> row_units;
    std::function<Tensor(double label_smoothing, int64_t begin, int64_t end)> rows_loss;
  };
  virtual ~TrainingTask() = default;
  virtual nn::Module& model() = 0;
  virtual MicroBatch next() = 0;
  virtual int64_t epoch() const = 0;  // epochs completed so far
  // What MicroBatch::units counts, for the progress line's rate ("tok" -> "tok/s").
  virtual const char* unit_name() const { return "tok"; }
  virtual std::map<std::string, int64_t> position() const = 0;
  virtual void restore(const std::map<std::string, int64_t>& position) = 0;
};

class Trainer {
 public:
  Trainer(TrainingTask& task, Optimizer& opt, const LrSchedule& schedule, TrainOptions options, std::string run_dir,
          TrainCallbacks callbacks);

  // Restores optimizer, counters, RNG and data position from checkpoint_dir/training_state.safetensors.
  void restore_training_state(const std::string& checkpoint_dir);
  Outcome run();

  double train_step();  // one update; returns the mean per-token loss (see on_nonfinite)
  int64_t step() const { return step_; }
  std::string save_checkpoint();  // returns the checkpoint directory
  // The best value of callbacks.best_metric so far (-1 before any validation).
  double best_score() const { return best_bleu_; }
  double best_bleu() const { return best_bleu_; }
  // Data-parallel: seconds spent in the gradient all-reduce so far (0 on one process), and the
  // bytes it sums per step (every gradient, f32, and one word per parameter tensor).
  double communication_seconds() const { return allreduce_ ? allreduce_->seconds() : 0.0; }
  int64_t all_reduce_bytes() const;

 private:
  std::map<std::string, Tensor> training_state() const;
  void restore_training_state_from(const std::string& file);
  bool validate_and_track();  // returns true if early stopping triggers
  // False if the step's loss or gradient norm is non-finite: the policy throws or skips the update.
  bool step_is_finite(double loss, double grad_norm);
  void start_data_parallel();  // checks that the ranks agree, gives each its own dropout stream
  Tensor shard_loss(const TrainingTask::MicroBatch& b);  // this rank's rows' summed loss (undefined: none)
  double sum_over_ranks(double loss_sum);  // sums gradients and losses over ranks; agrees on stopping

  TrainingTask& task_;
  Optimizer& opt_;
  const LrSchedule& schedule_;
  TrainOptions o_;
  std::string run_dir_;
  CheckpointManager checkpoints_;    // run_dir/checkpoints, pruned to keep_last
  std::optional<MetricsLog> metrics_;  // run_dir/metrics.jsonl, opened once by run()
  TrainCallbacks cb_;
  int64_t step_ = 0;
  double best_bleu_ = -1;  // the best best_metric (stored as 'best_bleu' in training states)
  int64_t best_step_ = 0, bad_validations_ = 0;
  int64_t validated_step_ = -1;  // the step of the last validation (-1: none, or a state saved before it was kept)
  double last_loss_ = 0, tokens_per_s_ = 0;
  int64_t last_step_tokens_ = 0;
  bool last_step_skipped_ = false;  // the last train_step() dropped a non-finite update
  int skipped_in_a_row_ = 0;
  // Data parallelism (one rank: comm_.distributed() is false and none of this is used).
  Communicator& comm_ = Communicator::world();
  std::unique_ptr<GradientAllReduce> allreduce_;
  bool restored_ = false;                    // restore_training_state ran (rank RNG states set)
  bool agreed_stop_ = false, agreed_out_of_time_ = false;  // any rank's, after the last step
  double max_seconds_ = 0;                   // max_minutes in seconds, checked in train_step
  std::chrono::steady_clock::time_point run_start_{};
  double step_seconds_ = 0;                  // cumulative train_step time (for the comm fraction)
};

}  // namespace qkv::train
