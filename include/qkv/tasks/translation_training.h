// qkv/tasks/translation_training.h - a whole translation training run as one library call: config
// to tokenizers and model, optimizer, schedule, batch streams, the shared train::Trainer loop,
// validation (loss, BLEU, chrF through Translator), checkpoints and the published model.
// `qkv train` parses its flags into a TrainingRun and calls train_translation.
//
// A run directory holds run.json (the resolved config, data paths and tokenizer), metrics.jsonl,
// checkpoints/step-N/ (model directory + training_state.safetensors), best -> the checkpoint with
// the best validation BLEU, and model/ (a copy of the best model, for Translator / qkv translate).
#pragma once
#include <cstdint>
#include <string>

#include "qkv/tasks/training_run.h"
#include "qkv/train/trainer.h"

namespace qkv::tasks {

// corpus: "en-de-small", ...; train_file / valid_file: 'source<TAB>target' lines; tokenizer_path:
// one tokenizer shared by both sides instead of learning BPE.
using TranslationRun = TrainingRun;

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
