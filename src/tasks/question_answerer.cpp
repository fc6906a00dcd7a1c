// A fine-tuned BERT answering questions (qkv/tasks/question_answerer.h).
#include "qkv/tasks/question_answerer.h"

#include <algorithm>
#include <exception>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "qkv/autograd/node.h"
#include "qkv/decode/span.h"
#include "qkv/models/model_size.h"
#include "qkv/train/qa_task.h"
#include "qkv/util/config.h"
#include "qkv/util/error_context.h"
#include "qkv/util/file.h"

namespace fs = std::filesystem;

namespace qkv::tasks {

QaOptions read_qa_json(const std::string& model_dir, int64_t max_positions) {
  QaOptions o;
  o.window.max_len = std::min<int64_t>(o.window.max_len, max_positions);
  const std::string path = (fs::path(model_dir) / "qa.json").string();
  if (!fs::exists(path)) return o;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    fail(path, "not valid JSON: ", e.what());
  }
  ConfigReader r(j, path);
  // The bounds `qkv train` applies to the same keys, so a bad value names qa.json here.
  o.window.max_len = r.integer_in("max_len", o.window.max_len, 1, models::kMaxPositions);
  o.window.doc_stride = r.integer_in("doc_stride", o.window.doc_stride, 1, models::kMaxPositions);
  o.window.max_query_len = r.integer_in("max_query_len", o.window.max_query_len, 1, models::kMaxPositions);
  o.max_answer_length = r.integer_in("max_answer_length", o.max_answer_length, 1, models::kMaxPositions);
  r.finish();
  QKV_CHECK(o.window.max_len <= max_positions, r.where("max_len"), o.window.max_len,
            " is longer than the model's max_position_embeddings ", max_positions);
  return o;
}

void write_qa_json(const std::string& model_dir, const QaOptions& o) {
  const nlohmann::json j = {{"max_len", o.window.max_len}, {"doc_stride", o.window.doc_stride},
                            {"max_query_len", o.window.max_query_len}, {"max_answer_length", o.max_answer_length}};
  write_file_atomic((fs::path(model_dir) / "qa.json").string(), j.dump(2) + "\n");
}

namespace {

io::BertQaBundle load_with_tokenizer(const std::string& dir, kernels::MatmulPrecision precision) {
  io::BertQaBundle b = io::load_bert_qa(dir, precision);
  QKV_CHECK(b.tokenizer != nullptr, dir, "has no tokenizer (tokenizer.json or vocab.txt)");
  QKV_CHECK(b.report.initialised.empty(), dir, "is not a fine-tuned question-answering model:\n",
            b.report.summary());
  return b;
}

}  // namespace

QuestionAnswerer::QuestionAnswerer(const std::string& model_dir, kernels::MatmulPrecision precision)
    : QuestionAnswerer(load_with_tokenizer(model_dir, precision), QaOptions{}) {
  opt_ = read_qa_json(model_dir, bundle_.config.max_position_embeddings);
  opt_.precision = precision;
}

QuestionAnswerer::QuestionAnswerer(io::BertQaBundle bundle, QaOptions opt) : bundle_(std::move(bundle)), opt_(opt) {
  QKV_CHECK(bundle_.model && bundle_.tokenizer, "QuestionAnswerer", "needs a model and its tokenizer");
}

std::vector<std::vector<QaAnswerSpan>> QuestionAnswerer::answer(
    const std::vector<std::pair<std::string, std::string>>& inputs, const std::vector<std::string>& where) const {
  QKV_CHECK(where.empty() || where.size() == inputs.size(), "QuestionAnswerer", "where names ", where.size(),
            " inputs, expected ", inputs.size());
  QKV_CHECK(opt_.window.max_len <= bundle_.config.max_position_embeddings, "QuestionAnswerer", "max_len ",
            opt_.window.max_len, " is longer than the model's max_position_embeddings ",
            bundle_.config.max_position_embeddings);
  QKV_CHECK(opt_.batch_size >= 1, "QuestionAnswerer", "batch_size must be >= 1, got ", opt_.batch_size);
  kernels::check_task_precision(opt_.precision, "answer");
  const text::Tokenizer& tok = *bundle_.tokenizer;
  // Every input's windows, then the logits of each, batch by batch.
  std::vector<std::vector<text::QaWindow>> windows(inputs.size());
  std::vector<std::exception_ptr> failed(inputs.size());  // an exception must not leave the parallel loop
#pragma omp parallel for schedule(dynamic, 16)
  for (size_t i = 0; i < inputs.size(); ++i) {  // tokenizers are thread-safe
    try {
      windows[i] = with_context(where.empty() ? "input " + std::to_string(i) : where[i], [&] {
        return text::make_qa_windows(tok, inputs[i].first, text::tokenize_with_offsets(tok, inputs[i].second),
                                     opt_.window);
      });
    } catch (...) {
      failed[i] = std::current_exception();
    }
  }
  for (auto& f : failed)
    if (f) std::rethrow_exception(f);
  std::vector<std::pair<size_t, size_t>> all;  // (input, window)
  for (size_t i = 0; i < inputs.size(); ++i)
    for (size_t w = 0; w < windows[i].size(); ++w) all.push_back({i, w});
  std::vector<std::vector<std::vector<float>>> start(inputs.size()), end(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) start[i].resize(windows[i].size()), end[i].resize(windows[i].size());
  models::BertForQuestionAnswering& model = *bundle_.model;
  {
    const nn::EvalScope eval_mode(model);
    NoGradGuard ng;
    kernels::MatmulPrecisionScope products(opt_.precision);
    for (size_t b = 0; b < all.size(); b += size_t(opt_.batch_size)) {
      const size_t e = std::min(all.size(), b + size_t(opt_.batch_size));
      models::PackedSequences packed;  // the windows end to end, without padding
      for (size_t k = b; k < e; ++k) {
        const train::QaFeature f = train::qa_feature(windows[all[k].first][all[k].second]);
        packed.add(f.ids, f.type_ids);
      }
      const std::vector<int64_t>& lengths = packed.lengths();
      auto logits = model.forward_packed(packed.ids(), packed.token_types(), lengths);
      const Tensor s = logits.start.contiguous(), en = logits.end.contiguous();  // (1, N)
      const float* ps = s.data<float>();
      const float* pe = en.data<float>();
      for (size_t k = b; k < e; ps += lengths[k - b], pe += lengths[k - b], ++k) {
        start[all[k].first][all[k].second].assign(ps, ps + lengths[k - b]);
        end[all[k].first][all[k].second].assign(pe, pe + lengths[k - b]);
      }
    }
  }
  decode::SpanSearchOptions so;
  so.max_answer_length = opt_.max_answer_length;
  so.n_best = opt_.n_best;
  so.top_k = opt_.top_k;
  std::vector<std::vector<QaAnswerSpan>> out(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<decode::SpanWindow> views;
    for (size_t w = 0; w < windows[i].size(); ++w)
      views.push_back({start[i][w], end[i][w], windows[i][w].ctx_begin, windows[i][w].ctx_end});
    const std::string& ctx = inputs[i].second;
    for (const decode::SpanCandidate& c : decode::best_spans(views, so))
      out[i].push_back({ctx.substr(size_t(c.begin), size_t(c.stop - c.begin)), text::utf8_char_offset(ctx, c.begin),
                        text::utf8_char_offset(ctx, c.stop), c.score});
  }
  return out;
}

eval::SpanScores evaluate_qa(const QuestionAnswerer& qa, const std::vector<data::QaExample>& examples,
                             std::vector<QaAnswerSpan>* predictions) {
  QKV_CHECK(!examples.empty(), "evaluate_qa", "no examples");
  std::vector<std::pair<std::string, std::string>> inputs;
  std::vector<std::vector<std::string>> golds;
  for (auto& e : examples) {
    QKV_CHECK(!e.answers.empty(), "evaluate_qa", "example '", e.id, "' has no gold answer");
    inputs.push_back({e.question, e.context});
    golds.emplace_back();
    for (auto& a : e.answers) golds.back().push_back(a.text);
  }
  const auto answers = qa.answer(inputs);
  std::vector<std::string> preds;
  for (auto& a : answers) preds.push_back(a.empty() ? std::string() : a[0].text);
  if (predictions) {
    predictions->clear();
    for (auto& a : answers) predictions->push_back(a.empty() ? QaAnswerSpan{} : a[0]);
  }
  return eval::span_scores(preds, golds);
}

}  // namespace qkv::tasks
