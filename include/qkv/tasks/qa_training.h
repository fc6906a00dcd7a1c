// qkv/tasks/qa_training.h - fine-tuning BERT for extractive question answering as one library
// call: `qkv train` with "model_type": "bert_qa" calls train_bert_qa.
//
// Config (configs/bert-qa-debian.json, docs/config.md):
//   "model_type": "bert_qa"
//   "init_from":  a BERT directory in Hugging Face's layout (a pretraining run's model/, or any
//                 BertModel / BertForPreTraining / BertForQuestionAnswering dir) with its tokenizer;
//                 its load report is printed (qa_outputs newly initialised, pooler and cls.* ignored);
//   or "model":   models::BertConfig keys for a fresh encoder (vocab_size defaults to the
//                 tokenizer's, max_position_embeddings to data.max_len) and
//      "tokenizer": as BERT pretraining's (tasks/bert_pretraining.h): {"path"} or a WordPiece
//                 vocabulary learned on the training questions and contexts
//   "data":       {"max_len": window tokens (256), "doc_stride" (128), "max_query_len" (64),
//                  "batch_size": windows (16)}
//   "valid":      {"max_examples" (1000, spread over the file; 0 = all), "batch_size" (32), "max_answer_length" (30)}
//   "optimizer" (default adamw, lr 5e-5), "schedule" (default warmup_cosine over train.max_steps),
//   "train", "seed"
//
// Data: SQuAD-shaped JSON lines (data/qa_examples.h) via --train/--valid, or --corpus qa-debian.
// Each training example's windows (text/qa_features.h) are rows; a window without the whole
// first answer trains to [CLS]. Validation answers the validation examples with
// tasks::QuestionAnswerer and scores SQuAD EM/F1 against all their gold answers; best -> the
// highest F1. model/ is a BertForQuestionAnswering directory (io/bert_qa.h) with qa.json (the
// window settings, read by `qkv answer`).
#pragma once
#include <cstdint>
#include <string>

#include "qkv/tasks/training_run.h"
#include "qkv/train/trainer.h"

namespace qkv::tasks {

struct QaRunResult {
  train::Outcome outcome;
  int64_t steps = 0;
  double best_f1 = 0;     // validation F1 (0..100) of the published model
  std::string model_dir;  // <run>/model
};

// The corpus directory of a QA corpus name ("qa-debian"), built first if needed.
std::string ensure_qa_corpus(const std::string& name, const std::string& data_dir);

QaRunResult train_bert_qa(const TrainingRun& run);

}  // namespace qkv::tasks
