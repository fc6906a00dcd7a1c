// src/serve/served_model.h - one model directory behind the server: the tasks/ object that
// answers for it (Translator, Generator, Embedder, Classifier, Tagger or QuestionAnswerer, by what
// config.json says), its
// batching queue, and the jobs its endpoints queue. The batch functions concatenate the inputs of
// the jobs of a batch (equal keys = equal options), make one library call, and hand each job its
// part; if that call fails, each job is run alone so that one bad request cannot fail another.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "metrics.h"
#include "qkv/serve/batch_queue.h"
#include "qkv/tasks/classifier.h"
#include "qkv/tasks/embedder.h"
#include "qkv/tasks/generator.h"
#include "qkv/tasks/question_answerer.h"
#include "qkv/tasks/tagger.h"
#include "qkv/tasks/translator.h"

namespace qkv::serve {

enum class Kind { translation, generation, embedding, classification, tagging, question_answering };
const char* kind_name(Kind k);  // "translation", ...
// What a model directory holds, from its config.json: a classifier ("qkv_classifier", or an
// architecture ending in ForSequenceClassification), a tagger (...ForTokenClassification), a
// question answerer (...ForQuestionAnswering), else by model_type: transformer / rnn ->
// translation, gpt2 -> generation, bert -> embedding. Errors name the file and the field.
Kind model_kind(const std::string& dir);

struct TranslateJob : Job {
  std::vector<std::string> lines;
  tasks::TranslateOptions opt;
  std::vector<std::string> out;  // one translation per line
  // With opt.search.nbest > 1: each line's n best, best first (text, score, log-probability).
  struct Alternative {
    std::string text;
    double score = 0, logprob = 0;
  };
  std::vector<std::vector<Alternative>> nbest;
  int64_t tokens = 0;            // target tokens generated
};

// Pairs to score by forced decoding (/v1/score) on a translation model; its key starts "score",
// which no TranslateJob's does, so a batch holds one kind of job.
struct ScoreJob : Job {
  std::vector<std::string> sources, targets;
  tasks::ScoreOptions opt;
  std::vector<tasks::PairScore> out;  // one per pair
  int64_t tokens = 0;                 // target tokens scored
};

// A completion request's prompts. Streaming jobs also receive the text as it is generated.
struct CompletionJob : Job {
  struct Piece {
    size_t index = 0;    // prompt index within the job
    std::string text;    // new text (may be empty on the last piece)
    std::string finish;  // set on the last piece of a prompt: "stop" or "length"
    nlohmann::json logprobs;  // with "logprobs": those of the tokens since the last piece (else null)
  };
  std::vector<std::string> prompts;
  tasks::GenerateOptions opt;  // its on_token is not used (the batch sets its own)
  bool stream = false;
  bool echo = false;  // the prompt leads each text (OpenAI's "echo"; streamed: the first piece)
  std::vector<tasks::Generation> out;
  int64_t tokens = 0;

  void push(Piece p);
  // Pieces since the last call; waits up to `timeout` when there are none and the job is not done.
  std::vector<Piece> take(std::chrono::milliseconds timeout);

 private:
  std::vector<Piece> pieces_;
};

struct EmbedJob : Job {
  std::vector<tasks::ClsInput> inputs;
  tasks::EmbedOptions opt;
  std::vector<tasks::SentenceEmbedding> out;
  int64_t tokens = 0;  // input tokens
};

struct TagJob : Job {
  std::vector<std::vector<std::string>> sentences;  // words
  tasks::TagOptions opt;
  std::vector<tasks::Tagging> out;
};

struct AnswerJob : Job {
  std::vector<std::pair<std::string, std::string>> inputs;  // (question, context)
  int64_t n_best = 1;
  std::vector<std::vector<tasks::QaAnswerSpan>> out;
};

struct ClassifyJob : Job {
  std::vector<tasks::ClsInput> inputs;
  tasks::ClassifyOptions opt;
  std::vector<tasks::Classification> out;
};

// OpenAI's finish_reason for a Generation's finish ("eos" and "stop" -> "stop", "length").
std::string finish_reason(const std::string& finish);

class ServedModel {
 public:
  ServedModel(std::string name, const std::string& dir, kernels::MatmulPrecision precision, const BatchOptions& batch,
              Metrics* metrics);
  ~ServedModel();  // stops the queue (runs what is queued) before the model goes

  const std::string& name() const { return name_; }
  Kind kind() const { return kind_; }
  // The tokenizer /tokenize and /detokenize use: a translation model's source (target = false) or
  // target one, the model's own otherwise; null when the directory has none.
  const text::Tokenizer* tokenizer(bool target = false) const;
  BatchQueue& queue() { return *queue_; }

  const tasks::Translator* translator() const { return translator_.get(); }
  const tasks::Generator* generator() const { return generator_.get(); }
  const tasks::Embedder* embedder() const { return embedder_.get(); }
  const tasks::Classifier* classifier() const { return classifier_.get(); }
  const tasks::Tagger* tagger() const { return tagger_.get(); }
  const tasks::QuestionAnswerer* answerer() const { return answerer_.get(); }

 private:
  void run(const std::vector<std::shared_ptr<Job>>& batch);
  void translate(const std::vector<Job*>& jobs);
  void score(const std::vector<Job*>& jobs);
  void complete(const std::vector<Job*>& jobs);
  void embed(const std::vector<Job*>& jobs);
  void classify(const std::vector<Job*>& jobs);
  void tag(const std::vector<Job*>& jobs);
  void answer(const std::vector<Job*>& jobs);

  std::string name_;
  Kind kind_;
  kernels::MatmulPrecision precision_;
  Metrics* metrics_;
  std::unique_ptr<tasks::Translator> translator_;
  std::unique_ptr<tasks::Generator> generator_;
  std::unique_ptr<tasks::Embedder> embedder_;
  std::unique_ptr<tasks::Classifier> classifier_;
  std::unique_ptr<tasks::Tagger> tagger_;
  std::unique_ptr<tasks::QuestionAnswerer> answerer_;  // its n_best is set per batch
  std::unique_ptr<BatchQueue> queue_;  // last: its loop uses the members above
};

}  // namespace qkv::serve
