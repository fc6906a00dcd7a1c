// qkv/tasks/cls_training.h - fine-tuning a GPT for text classification as one library call
// (Radford et al. 2018, 3.3): `qkv train` with "model_type": "gpt_classifier" parses its flags
// into a TrainingRun (ClassifierRun) and calls train_gpt_classifier.
//
// Config (docs/config.md):
//   "init_from"     a GPT-2-layout directory (io/gpt2.h) with its tokenizer; or, without it,
//   "model"         a fresh GptConfig (vocab_size filled in) and
//   "tokenizer"     {"vocab_size", "min_frequency"}: byte-level BPE learned from the training texts
//   "special_tokens" {"start", "delim", "extract"}: their names (default [START] [DELIM] [EXTRACT]);
//                   added to the tokenizer, the token embedding grown by N(0, 0.02) rows
//   "lm_weight"     the auxiliary LM loss's weight (GPT-1: 0.5; 0 = off)
//   "data"          {"max_len" (truncation, default n_positions), "batch_size"}
//   "optimizer", "schedule", "train" as for translation; "valid" {"max_examples", "batch_size"}
//
// Data: label<TAB>text or label<TAB>a<TAB>b files (tasks/cls_data.h), or a corpus built from
// packages (cls-debian, pairs-debian, sentiment, pang-lee-reviews, pang-lee-sentences). Labels
// are the training set's distinct names (tasks::label_names); a validation label outside them is
// an error.
//
// The run directory is translation's: run.json, metrics.jsonl, checkpoints/step-N/ (the model in
// the GPT2ForSequenceClassification layout, io/gpt2_cls.h, + training_state.safetensors), best ->
// the checkpoint with the best validation accuracy, and model/ (its copy, for tasks::Classifier).
#pragma once
#include <cstdint>
#include <string>

#include "qkv/tasks/training_run.h"
#include "qkv/train/trainer.h"

namespace qkv::tasks {

// corpus: cls-debian | pairs-debian | sentiment | pang-lee-reviews | pang-lee-sentences;
// train_file / valid_file: labelled files (label<TAB>text or label<TAB>a<TAB>b). tokenizer_path
// must be empty: the tokenizer comes from init_from or is learned.
using ClassifierRun = TrainingRun;

struct ClassifierRunResult {
  train::Outcome outcome;
  int64_t steps = 0;
  double best_accuracy = 0;  // validation accuracy of the published model, in [0, 1]
  std::string model_dir;
};

// The corpus directory of a classification corpus name, built first if needed.
std::string ensure_cls_corpus(const std::string& name, const std::string& data_dir);

ClassifierRunResult train_gpt_classifier(const ClassifierRun& run);

}  // namespace qkv::tasks
