// qkv/tasks/question_answerer.h - a fine-tuned BertForQuestionAnswering answering questions about
// contexts: the one way `qkv answer`, validation during `qkv train` and the benches use it.
//
//   qkv::tasks::QuestionAnswerer qa("runs/qa/model");
//   auto best = qa.answer({{"Who maintains vim?", context}});   // n-best per input, best first
//
// Each (question, context) becomes the windows of text/qa_features.h; the windows of all inputs
// run in batches packed end to end without padding (Bert::hidden_packed); decode/span.h picks
// the n best valid spans over an input's windows (start <= end, at most max_answer_length
// tokens, context tokens only, score = start + end logit). The answer is the context's own text
// between the span's character offsets.
//
// The window settings are part of a trained model: the model directory's qa.json
// ({"max_len", "doc_stride", "max_query_len", "max_answer_length"}), written by `qkv train`
// (bert_qa); without it, run_squad.py's defaults (384, 128, 64, 30), max_len capped at
// max_position_embeddings.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "qkv/data/qa_examples.h"
#include "qkv/eval/span.h"
#include "qkv/io/bert_qa.h"
#include "qkv/kernels/bf16.h"
#include "qkv/text/qa_features.h"

namespace qkv::tasks {

struct QaOptions {
  text::QaWindowOptions window;
  int64_t max_answer_length = 30;  // tokens
  int64_t n_best = 1;
  int64_t top_k = 0;  // 0: every valid span (exact); k: Hugging Face's top-k starts x top-k ends
  int64_t batch_size = 32;  // windows per forward pass
  // The matrix products' precision (not part of qa.json): bf16 / int8 need the weights held so,
  // as QuestionAnswerer(model_dir, precision) holds them and sets this.
  kernels::MatmulPrecision precision = kernels::MatmulPrecision::fp32;
};

// qa.json in a model directory: read (absent: defaults as above), written atomically.
QaOptions read_qa_json(const std::string& model_dir, int64_t max_positions);
void write_qa_json(const std::string& model_dir, const QaOptions& opt);

struct QaAnswerSpan {
  std::string text;
  int64_t start = 0, end = 0;  // characters [start, end) of the context
  double score = 0;            // start logit + end logit
};

class QuestionAnswerer {
 public:
  // io::load_bert_qa + qa.json; the directory needs a tokenizer with [CLS], [SEP] and [PAD].
  // precision bf16 / int8: the weights held so (load_bert_qa) and options().precision set to it.
  explicit QuestionAnswerer(const std::string& model_dir,
                            kernels::MatmulPrecision precision = kernels::MatmulPrecision::fp32);
  QuestionAnswerer(io::BertQaBundle bundle, QaOptions opt);  // a model in memory (shared, not copied)

  // inputs: (question, context). One n-best list per input (empty only for an empty context).
  // An input that cannot be answered (a question that leaves the window no room for its context)
  // is an error naming it: where[i] when given (e.g. "FILE:LINE"), else "input i" (from 0).
  std::vector<std::vector<QaAnswerSpan>> answer(const std::vector<std::pair<std::string, std::string>>& inputs,
                                                const std::vector<std::string>& where = {}) const;

  QaOptions& options() { return opt_; }
  const QaOptions& options() const { return opt_; }
  const io::BertQaBundle& bundle() const { return bundle_; }

 private:
  io::BertQaBundle bundle_;
  QaOptions opt_;
};

// SQuAD EM/F1 (0..100) of the best answers against the examples' gold answers; predictions
// (optional) receives the answers.
eval::SpanScores evaluate_qa(const QuestionAnswerer& qa, const std::vector<data::QaExample>& examples,
                             std::vector<QaAnswerSpan>* predictions = nullptr);

}  // namespace qkv::tasks
