// qkv/tasks/lm_training.h - GPT causal-language-model pretraining as one library call: config to
// tokenizer (a byte-level BPE learned on the training text, or an existing one such as GPT-2's)
// and model, the packed token stream, optimizer, schedule, the shared train::Trainer loop,
// validation (mean NLL and perplexity on held-out documents), checkpoints and the published model.
// `qkv train` calls it when the config's model_type is "gpt".
//
// Config (JSON; configs/gpt-lm-en.json, docs/config.md):
//   "model_type": "gpt"
//   "model":     models::GptConfig keys (GPT2Config's names + pre_norm); vocab_size defaults to
//                the tokenizer's, n_positions to data.context
//   "tokenizer": {"kind": "bytebpe", "vocab_size": N, "min_frequency": 2} learns one on the
//                training text (special token <|endoftext|>), or {"path": FILE_OR_DIR} loads one
//   "data":      {"context": T, "batch_size": sequences | "batch_tokens": tokens}
//   "optimizer": train::make_optimizer's section (adamw, ...)
//   "schedule":  make_schedule's section; warmup_cosine's "total" defaults to train.max_steps
//   "train":     train::TrainOptions (label_smoothing defaults to 0 here)
//   "valid":     {"max_tokens": N}: validate on about N held-out tokens, whole batches spread evenly
//                over the held-out stream (0 = all)
//   "seed"
// Documents end with the tokenizer's end-of-text token and are packed (train::PackedLmStream).
//
// The run directory is tasks/training_run.h's; best -> the lowest validation perplexity; model/
// is a GPT-2-layout directory (io/gpt2.h) that `qkv generate` and `qkv perplexity` open.
#pragma once
#include <cstdint>
#include <string>

#include "qkv/tasks/training_run.h"
#include "qkv/train/trainer.h"

namespace qkv::tasks {

// corpus: "lm-en"; train_file / valid_file: text documents (data/documents.h: a document per
// line, or blank-line separated); tokenizer_path overrides the config's tokenizer section.
using LmRun = TrainingRun;

struct LmRunResult {
  train::Outcome outcome;
  int64_t steps = 0;
  double best_perplexity = 0;  // lowest validation perplexity
  std::string model_dir;       // <run>/model
};

// Progress and validation lines go to stderr. Errors (bad config keys, missing files, a run
// directory that already holds a run) throw qkv::Error naming the file and field.
LmRunResult train_lm(const LmRun& run);

}  // namespace qkv::tasks
