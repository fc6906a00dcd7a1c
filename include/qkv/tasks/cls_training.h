// qkv/tasks/cls_training.h - fine-tuning a classifier as one library call: `qkv train` with
// "model_type": "gpt_classifier" (a GPT, Radford et al. 2018, 3.3) or "bert_classifier" (a BERT,
// Devlin et al. 2019, 4.1; or the small encoder trained from scratch with "pooling": "mean")
// parses its flags into a TrainingRun (ClassifierRun) and calls train_classifier. Both families
// share everything but the model: the data, the labels, validation, the run directory, resume.
//
// Config (docs/config.md):
//   "init_from"     a pretrained directory with its tokenizer: GPT-2 layout (io/gpt2.h) for GPT,
//                   any BERT directory (io/bert.h; e.g. `qkv train`'s BERT pretraining) for BERT;
//                   or, without it,
//   "model"         a fresh GptConfig / BertConfig (vocab_size filled in) and
//   "tokenizer"     GPT: {"vocab_size", "min_frequency"}: byte-level BPE learned from the training
//                   texts; BERT: as BERT pretraining's (tasks/bert_pretraining.h): a WordPiece
//                   vocabulary learned from the training texts, or {"path"} (or --tokenizer)
//   "num_labels"    optional: must equal the training set's number of labels
//   "data"          {"max_len" (truncation, default the model's positions), "batch_size"}
//   "optimizer", "schedule", "train" as for translation; "valid" {"max_examples", "batch_size"}
//   GPT only:  "special_tokens" {"start", "delim", "extract"}: their names (default [START]
//              [DELIM] [EXTRACT]), added to the tokenizer, the token embedding grown by N(0, 0.02)
//              rows; "lm_weight": the auxiliary LM loss's weight (GPT-1: 0.5; 0 = off)
//   BERT only: "pooling" "pooler" (Hugging Face's BertForSequenceClassification) | "mean";
//              "classifier_dropout" (default hidden_dropout_prob)
//
// Data: label<TAB>text or label<TAB>a<TAB>b files (tasks/cls_data.h), or a corpus built from
// packages (cls-debian, pairs-debian, sentiment, pang-lee-reviews, pang-lee-sentences). Labels
// are the training set's distinct names (tasks::label_names); a validation label outside them is
// an error.
//
// The run directory is training_run.h's: run.json (+ "labels"), metrics.jsonl,
// checkpoints/step-N/ (the model in the family's layout: GPT2ForSequenceClassification,
// io/gpt2_cls.h, or BertForSequenceClassification, io/bert_cls.h; + training_state.safetensors),
// best -> the checkpoint with the best validation accuracy, and model/ (its copy, for
// tasks::Classifier).
#pragma once
#include <cstdint>
#include <string>

#include "qkv/tasks/training_run.h"
#include "qkv/train/trainer.h"

namespace qkv::tasks {

// corpus: cls-debian | pairs-debian | sentiment | pang-lee-reviews | pang-lee-sentences;
// train_file / valid_file: labelled files (label<TAB>text or label<TAB>a<TAB>b). tokenizer_path:
// BERT only (instead of learning WordPiece).
using ClassifierRun = TrainingRun;

struct ClassifierRunResult {
  train::Outcome outcome;
  int64_t steps = 0;
  double best_accuracy = 0;  // validation accuracy of the published model, in [0, 1]
  std::string model_dir;
};

// The corpus directory of a classification corpus name, built first if needed.
std::string ensure_cls_corpus(const std::string& name, const std::string& data_dir);

ClassifierRunResult train_classifier(const ClassifierRun& run);

}  // namespace qkv::tasks
