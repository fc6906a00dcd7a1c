// qkv/tasks/translation_training.h - a whole translation training run as one library call: config
// to tokenizers and model, optimizer, schedule, batch streams, the shared train::Trainer loop,
// validation (loss, BLEU, chrF through Translator), checkpoints and the published model.
// `qkv train` parses its flags into a TranslationRun and calls train_translation.
//
// A run directory holds run.json (the resolved config, data paths and tokenizer), metrics.jsonl,
// checkpoints/step-N/ (model directory + training_state.safetensors), best -> the checkpoint with
// the best validation BLEU, and model/ (a copy of the best model, for Translator / qkv translate).
#pragma once
#include <cstdint>
#include <string>

#include "qkv/train/trainer.h"

namespace qkv::tasks {

struct TranslationRun {
  std::string config_path;  // a new run: JSON config (configs/, docs/config.md)
  std::string out_dir;      // a new run: the run directory to create
  std::string resume;       // or: continue this run directory from its latest checkpoint
  std::string corpus;       // a corpus built from Debian packages ("en-de-small"), or
  std::string train_tsv, valid_tsv;  // 'source<TAB>target' files
  std::string tokenizer_path;        // a shared tokenizer instead of learning BPE
  std::string data_dir = "data";     // where named corpora are built and cached
  int64_t max_steps = -1;            // >= 0: overrides train.max_steps
  double max_minutes = -1;           // >= 0: overrides train.max_minutes
};

struct TranslationRunResult {
  train::Outcome outcome;
  int64_t steps = 0;
  double best_bleu = 0;
  std::string model_dir;  // <run>/model
};

// Progress and validation lines go to stderr. Errors (bad config keys, missing files, a run
// directory that already holds a run) throw qkv::Error naming the file and field.
TranslationRunResult train_translation(const TranslationRun& run);

}  // namespace qkv::tasks
