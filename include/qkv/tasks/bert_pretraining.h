// qkv/tasks/bert_pretraining.h - BERT pretraining (masked-language modelling + next-sentence
// prediction) as one library call, through the shared train::Trainer and run directory.
// `qkv train` calls it when the config's model_type is "bert".
//
// Config (JSON; configs/bert-pretrain-en.json, docs/config.md):
//   "model_type": "bert"
//   "model":     models::BertConfig keys; vocab_size defaults to the tokenizer's,
//                max_position_embeddings to data.max_len
//   "tokenizer": {"kind": "wordpiece", "vocab_size": N, "min_frequency": 2, "lowercase": true} learns a WordPiece
//                vocabulary on the training documents (lower-cased, BERT's BasicTokenizer words;
//                pieces from BPE merges, each as a word start and as a "##" continuation), or
//                {"path": vocab.txt | tokenizer.json | dir} loads one (bert-base-uncased's vocab.txt)
//   "data":      {"max_len": T (default 128), "batch_size": sequences (default 16)}
//   "optimizer", "schedule", "train": as for "gpt" (label_smoothing is not used)
//   "valid":     {"max_pairs": N}: validate on about N held-out pairs, whole batches spread evenly (0 = all)
//   "seed"
// Documents (data/documents.h) are split into segments at line breaks and sentence ends
// (". ", "! ", "? "); train/bert_pretrain.h builds the pairs and the masks.
//
// Validation on the held-out documents' pairs (masked once, from the seed): MLM loss (mean over
// predicted tokens), MLM accuracy, NSP accuracy; best -> the lowest MLM loss. model/ is a
// Hugging Face BertForPreTraining directory (io/bert.h: cls.predictions + cls.seq_relationship).
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <memory>
#include <nlohmann/json.hpp>

#include "qkv/tasks/training_run.h"
#include "qkv/text/tokenizer.h"
#include "qkv/train/trainer.h"

namespace qkv::tasks {

struct BertRunResult {
  train::Outcome outcome;
  int64_t steps = 0;
  double best_mlm_loss = 0;  // lowest validation MLM loss
  std::string model_dir;     // <run>/model
};

BertRunResult train_bert(const TrainingRun& run);

// A WordPiece vocabulary learned on texts: BERT's BasicTokenizer words (lower-cased and without
// accents unless lowercase is false: a cased vocabulary, which the loaded tokenizer keeps cased),
// BPE merges over their characters, every piece as a word start and as a "##" continuation, after
// [PAD] [UNK] [CLS] [SEP] [MASK] (ids 0-4); work_dir holds the vocab.txt while it is loaded.
std::shared_ptr<text::Tokenizer> learn_wordpiece(const std::vector<std::string>& texts, int vocab_size,
                                                 int64_t min_frequency, const std::string& work_dir,
                                                 bool lowercase = true);
// A config's "tokenizer" section for BERT (above): flag_path (--tokenizer) or "path" loads one;
// otherwise a WordPiece vocabulary is learned from texts (learn_wordpiece; work_dir holds its file
// meanwhile). Errors name `where` and the key.
// Shared with BERT fine-tuning (tasks/cls_training.h, tasks/qa_training.h, tasks/tag_training.h),
// which learn it from their training texts.
std::shared_ptr<text::Tokenizer> make_bert_tokenizer(const nlohmann::json& section, const std::string& where,
                                                     const std::string& flag_path, const std::vector<std::string>& texts,
                                                     const std::string& work_dir);

// A document cut into segments: at line breaks, and after '.', '!' or '?' followed by a space.
// Empty segments are dropped.
std::vector<std::string> split_segments(const std::string& document);

}  // namespace qkv::tasks
