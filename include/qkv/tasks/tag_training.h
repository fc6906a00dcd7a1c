// qkv/tasks/tag_training.h - fine-tuning BERT for token classification (tagging, NER) as one
// library call: `qkv train` with "model_type": "bert_tagger" (models/bert_tagger.h).
//
// Config (JSON; configs/bert-tag-*.json, docs/config.md):
//   "model_type": "bert_tagger"
//   "init_from":  a BERT directory in Hugging Face's layout (io/bert.h: BertForPreTraining,
//                 BertModel, ...) with its tokenizer: its encoder, a new classifier; or, without it,
//   "model":      a fresh models::BertConfig (vocab_size defaults to the tokenizer's,
//                 max_position_embeddings to data.max_len) and
//   "tokenizer":  {"kind": "wordpiece", "vocab_size", "min_frequency"} learned on the training
//                 sentences (tasks/bert_pretraining.h), or {"path": vocab.txt | tokenizer.json | dir}
//   "data":       {"max_len": pieces per window with [CLS] and [SEP] (default 128, at most
//                 max_position_embeddings), "batch_size": windows (default 32)}
//   "optimizer", "train" as for "bert" (train.label_smoothing defaults to 0)
//   "schedule":   as for "bert"; warmup_cosine's defaults: total = train.max_steps, warmup = 10% of
//                 it, lr = 5e-5 with init_from (Devlin et al.'s fine-tuning rate), 1e-3 without
//   "valid":      {"max_sentences": N (0 = all, default), "batch_size": windows (default 64)}
//   "seed"
// Data: CoNLL-style files (tasks/tag_data.h; --train / --valid), or a corpus built from packages
// (--corpus pos-wsj | ner-debian). The labels are the training set's tags (tasks::tag_names); a
// validation tag outside them is an error naming the file and line.
//
// Validation tags the held-out sentences through tasks::Tagger (windows as at inference):
// valid_accuracy (words), and for a chunk tag set (O, B-X, I-X, ...) valid_precision /
// valid_recall / valid_f1 over entities (eval/ner.h). best -> the best valid_f1 for a chunk tag
// set, else the best valid_accuracy. model/ is a BertForTokenClassification directory
// (io/bert_tagger.h).
#pragma once
#include <cstdint>
#include <string>

#include "qkv/tasks/training_run.h"
#include "qkv/train/trainer.h"

namespace qkv::tasks {

struct TaggerRunResult {
  train::Outcome outcome;
  int64_t steps = 0;
  std::string best_metric;  // valid_f1 or valid_accuracy
  double best_score = 0;
  std::string model_dir;
};

// The corpus directory of a tagging corpus name (pos-wsj, ner-debian), built first if needed.
std::string ensure_tag_corpus(const std::string& name, const std::string& data_dir);

TaggerRunResult train_bert_tagger(const TrainingRun& run);

}  // namespace qkv::tasks
