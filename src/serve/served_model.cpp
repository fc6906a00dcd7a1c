#include "served_model.h"

#include <algorithm>
#include <filesystem>

#include "qkv/util/error.h"
#include "qkv/util/file.h"

namespace fs = std::filesystem;

namespace qkv::serve {

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::translation: return "translation";
    case Kind::generation: return "generation";
    case Kind::embedding: return "embedding";
    case Kind::classification: return "classification";
    case Kind::tagging: return "tagging";
    case Kind::question_answering: return "question_answering";
  }
  return "?";
}

Kind model_kind(const std::string& dir) {
  QKV_CHECK(fs::is_directory(dir), "serve", "--model ", dir, ": no such directory");
  const std::string cfg = (fs::path(dir) / "config.json").string();
  QKV_CHECK(fs::is_regular_file(cfg), cfg, "missing (a model directory holds config.json and model.safetensors)");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(cfg));
  } catch (const nlohmann::json::exception& e) {
    fail(cfg, "not valid JSON: ", e.what());
  }
  QKV_CHECK(j.is_object(), cfg, "expected a JSON object");
  auto architecture_ends = [&](const std::string& suffix) {
    if (!j.contains("architectures") || !j["architectures"].is_array()) return false;
    for (auto& a : j["architectures"]) {
      const std::string n = a.is_string() ? a.get<std::string>() : "";
      if (n.size() >= suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0) return true;
    }
    return false;
  };
  if (j.contains("qkv_classifier") || architecture_ends("ForSequenceClassification")) return Kind::classification;
  if (architecture_ends("ForTokenClassification")) return Kind::tagging;
  if (architecture_ends("ForQuestionAnswering")) return Kind::question_answering;
  QKV_CHECK(j.contains("model_type") && j["model_type"].is_string(), cfg,
            "field 'model_type': expected a string (transformer, rnn, gpt2 or bert)");
  const std::string t = j["model_type"];
  if (t == "transformer" || t == "rnn") return Kind::translation;
  if (t == "gpt2") return Kind::generation;
  if (t == "bert") return Kind::embedding;
  fail(cfg, "field 'model_type': expected transformer, rnn, gpt2 or bert (or a classifier), got \"", t, "\"");
}

std::string finish_reason(const std::string& finish) { return finish == "length" ? "length" : "stop"; }

void CompletionJob::push(Piece p) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    pieces_.push_back(std::move(p));
  }
  cv_.notify_all();
}

std::vector<CompletionJob::Piece> CompletionJob::take(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait_for(lk, timeout, [&] { return !pieces_.empty() || done_; });
  std::vector<Piece> out;
  out.swap(pieces_);
  return out;
}

ServedModel::ServedModel(std::string name, const std::string& dir, kernels::MatmulPrecision precision,
                         const BatchOptions& batch, Metrics* metrics)
    : name_(std::move(name)), kind_(model_kind(dir)), precision_(precision), metrics_(metrics) {
  switch (kind_) {
    // bf16: every request runs in bf16, so the weights are held in bf16 as they are read
    case Kind::translation: translator_ = std::make_unique<tasks::Translator>(dir, precision); break;
    case Kind::generation: generator_ = std::make_unique<tasks::Generator>(dir, precision); break;
    case Kind::embedding: embedder_ = std::make_unique<tasks::Embedder>(dir, precision); break;
    case Kind::classification: classifier_ = std::make_unique<tasks::Classifier>(dir, precision); break;
    case Kind::tagging: tagger_ = std::make_unique<tasks::Tagger>(dir, precision); break;
    case Kind::question_answering: answerer_ = std::make_unique<tasks::QuestionAnswerer>(dir, precision); break;
  }
  queue_ = std::make_unique<BatchQueue>(batch, [this](const std::vector<std::shared_ptr<Job>>& b) { run(b); });
}

ServedModel::~ServedModel() { queue_->stop(); }

const text::Tokenizer* ServedModel::tokenizer(bool target) const {
  if (translator_) return (target ? translator_->bundle().tgt_tok : translator_->bundle().src_tok).get();
  if (generator_) return generator_->bundle().tokenizer.get();
  if (embedder_) return embedder_->bundle().tokenizer.get();
  if (tagger_) return tagger_->bundle().tokenizer.get();
  if (answerer_) return answerer_->bundle().tokenizer.get();
  if (classifier_->gpt()) return classifier_->gpt()->tokenizer.get();
  return classifier_->bert()->tokenizer.get();
}

namespace {

// Thrown from the streaming callback when every job of a batch has been cancelled.
struct AllCancelled {};

// An error from the library on a request's inputs is the request's fault (400); anything else 500.
int status_of(const std::exception& e) { return dynamic_cast<const Error*>(&e) ? 400 : 500; }

// The inputs of a batch's jobs (of type J, field `in`), end to end: one library call's inputs.
template <class J, class In>
std::vector<In> gather(const std::vector<Job*>& jobs, std::vector<In> J::*in) {
  std::vector<In> all;
  for (auto* j : jobs) {
    const auto& v = static_cast<J&>(*j).*in;
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

// The call's results back: each job's `out` gets the part that answers its `in`, in order.
template <class J, class In, class Out>
void scatter(const std::vector<Job*>& jobs, std::vector<In> J::*in, std::vector<Out> J::*out,
             const std::vector<Out>& results) {
  size_t at = 0;
  for (auto* j : jobs) {
    J& job = static_cast<J&>(*j);
    const size_t n = (job.*in).size();
    (job.*out).assign(results.begin() + int64_t(at), results.begin() + int64_t(at + n));
    at += n;
  }
}

}  // namespace

void ServedModel::run(const std::vector<std::shared_ptr<Job>>& batch) {
  std::vector<Job*> jobs;
  for (auto& j : batch) {
    if (j->cancelled) j->fail(499, "the client closed the connection");
    else jobs.push_back(j.get());
  }
  if (jobs.empty()) return;
  auto call = [&](const std::vector<Job*>& js) {
    size_t inputs = 0;
    for (auto* j : js) inputs += j->items;
    metrics_->batch(name_, inputs);
    switch (kind_) {
      case Kind::translation: dynamic_cast<ScoreJob*>(js[0]) ? score(js) : translate(js); break;
      case Kind::generation: complete(js); break;
      case Kind::embedding: embed(js); break;
      case Kind::classification: classify(js); break;
      case Kind::tagging: tag(js); break;
      case Kind::question_answering: answer(js); break;
    }
  };
  try {
    call(jobs);
  } catch (const AllCancelled&) {
    for (auto* j : jobs) j->fail(499, "the client closed the connection");
  } catch (const std::exception& e) {
    if (jobs.size() == 1) {
      jobs[0]->fail(status_of(e), e.what());
      return;
    }
    for (auto* j : jobs) {  // find the request at fault: each alone
      try {
        call({j});
      } catch (const AllCancelled&) {
        j->fail(499, "the client closed the connection");
      } catch (const std::exception& e1) {
        j->fail(status_of(e1), e1.what());
      }
    }
  }
}

void ServedModel::translate(const std::vector<Job*>& jobs) {
  const std::vector<std::string> lines = gather(jobs, &TranslateJob::lines);
  tasks::TranslateOptions opt = static_cast<TranslateJob&>(*jobs[0]).opt;
  opt.precision = precision_;
  opt.batch_size = std::max<int64_t>(1, int64_t(lines.size()));
  opt.quiet = true;
  tasks::Translations r = translator_->translate(lines, opt);
  size_t at = 0;
  int64_t total = 0;
  for (auto* j : jobs) {
    auto& t = static_cast<TranslateJob&>(*j);
    t.out.assign(r.text.begin() + int64_t(at), r.text.begin() + int64_t(at + t.lines.size()));
    t.tokens = 0;
    t.nbest.clear();
    for (size_t i = at; i < at + t.lines.size(); ++i) {
      t.tokens += int64_t(r.hyps[i].front().tokens.size());
      if (opt.search.nbest == 1) continue;
      t.nbest.emplace_back();
      for (size_t k = 0; k < r.hyps[i].size(); ++k)
        t.nbest.back().push_back({r.hyp_text[i][k], r.hyps[i][k].score, r.hyps[i][k].logprob});
    }
    total += t.tokens;
    at += t.lines.size();
  }
  metrics_->tokens(name_, total);
  for (auto* j : jobs) j->finish();
}

void ServedModel::score(const std::vector<Job*>& jobs) {
  const std::vector<std::string> sources = gather(jobs, &ScoreJob::sources), targets = gather(jobs, &ScoreJob::targets);
  tasks::ScoreOptions opt = static_cast<ScoreJob&>(*jobs[0]).opt;
  opt.precision = precision_;
  opt.batch_size = std::max<int64_t>(1, int64_t(sources.size()));
  opt.quiet = true;
  scatter(jobs, &ScoreJob::sources, &ScoreJob::out, translator_->score(sources, targets, opt).pairs);
  int64_t total = 0;
  for (auto* j : jobs) {
    auto& t = static_cast<ScoreJob&>(*j);
    t.tokens = 0;
    for (auto& p : t.out) t.tokens += p.tokens;
    total += t.tokens;
  }
  metrics_->tokens(name_, total);
  for (auto* j : jobs) j->finish();
}

void ServedModel::complete(const std::vector<Job*>& jobs) {
  std::vector<std::string> prompts;
  std::vector<size_t> start;  // first prompt of each job in the call
  for (auto* j : jobs) {
    auto& c = static_cast<CompletionJob&>(*j);
    start.push_back(prompts.size());
    prompts.insert(prompts.end(), c.prompts.begin(), c.prompts.end());
  }
  tasks::GenerateOptions opt = static_cast<CompletionJob&>(*jobs[0]).opt;
  opt.precision = precision_;
  opt.batch_size = std::max<int64_t>(1, int64_t(prompts.size()));
  opt.quiet = true;
  // Streaming: per prompt, the generated tokens whose log-probabilities were sent, and whether the
  // echoed prompt was. A piece carries the tokens since the last one (a token whose text is held
  // back goes with the next piece, or with the finish).
  const bool logprobs = opt.logprobs >= 0;  // the batch's jobs share their options (their key)
  const text::Tokenizer* tok = generator_->bundle().tokenizer.get();
  std::vector<size_t> sent(prompts.size(), 0);
  std::vector<char> echoed(prompts.size(), 0);
  auto since = [&](const tasks::Generation& g, size_t p, bool echo) -> nlohmann::json {
    if (!logprobs) return nullptr;
    nlohmann::json j = tasks::logprobs_json(*tok, g, echo, sent[p], SIZE_MAX, /*list_prompt=*/false);
    sent[p] = g.logprobs.size();
    return j;
  };
  // Beam search does not stream (its requests never ask to) and returns n per prompt.
  const size_t per = opt.num_beams > 1 ? size_t(opt.num_return_sequences) : 1;
  if (opt.num_beams == 1) opt.on_token = [&](const tasks::TokenEvent& e) {
    const size_t k = size_t(std::upper_bound(start.begin(), start.end(), e.prompt) - start.begin()) - 1;
    auto& c = static_cast<CompletionJob&>(*jobs[k]);
    const size_t i = e.prompt - start[k];
    if (c.stream && c.echo && !echoed[e.prompt]) {
      echoed[e.prompt] = 1;
      c.push({i, c.prompts[i], "", logprobs ? tasks::logprobs_json(*tok, *e.generation, true, 0, 0) : nullptr});
    }
    if (c.stream && !e.text.empty()) c.push({i, std::string(e.text), "", since(*e.generation, e.prompt, c.echo)});
    if (std::all_of(jobs.begin(), jobs.end(), [](Job* j) { return j->cancelled.load(); })) throw AllCancelled{};
  };
  std::vector<tasks::Generation> r = generator_->generate(prompts, opt);
  int64_t total = 0;
  for (size_t k = 0; k < jobs.size(); ++k) {
    auto& c = static_cast<CompletionJob&>(*jobs[k]);
    c.out.assign(r.begin() + int64_t(start[k] * per), r.begin() + int64_t((start[k] + c.prompts.size()) * per));
    c.tokens = 0;
    for (size_t i = 0; i < c.out.size(); ++i) {
      c.tokens += int64_t(c.out[i].tokens.size());
      if (c.stream) c.push({i, "", finish_reason(c.out[i].finish), since(c.out[i], start[k] + i, c.echo)});
    }
    total += c.tokens;
  }
  metrics_->tokens(name_, total);
  for (auto* j : jobs) j->finish();
}

void ServedModel::embed(const std::vector<Job*>& jobs) {
  const std::vector<tasks::ClsInput> inputs = gather(jobs, &EmbedJob::inputs);
  tasks::EmbedOptions opt = static_cast<EmbedJob&>(*jobs[0]).opt;
  opt.precision = precision_;
  opt.batch_size = std::max<int64_t>(1, int64_t(inputs.size()));
  scatter(jobs, &EmbedJob::inputs, &EmbedJob::out, embedder_->embed(inputs, opt));
  int64_t total = 0;
  for (auto* j : jobs) total += static_cast<EmbedJob&>(*j).tokens;
  metrics_->tokens(name_, total);
  for (auto* j : jobs) j->finish();
}

void ServedModel::classify(const std::vector<Job*>& jobs) {
  const std::vector<tasks::ClsInput> inputs = gather(jobs, &ClassifyJob::inputs);
  tasks::ClassifyOptions opt = static_cast<ClassifyJob&>(*jobs[0]).opt;
  opt.precision = precision_;
  opt.batch_size = std::max<int64_t>(1, int64_t(inputs.size()));
  opt.all_probabilities = true;
  scatter(jobs, &ClassifyJob::inputs, &ClassifyJob::out, classifier_->classify(inputs, opt));
  for (auto* j : jobs) j->finish();
}

void ServedModel::tag(const std::vector<Job*>& jobs) {
  tasks::TagOptions opt = static_cast<TagJob&>(*jobs[0]).opt;
  opt.precision = precision_;
  scatter(jobs, &TagJob::sentences, &TagJob::out, tagger_->tag(gather(jobs, &TagJob::sentences), opt));
  for (auto* j : jobs) j->finish();
}

void ServedModel::answer(const std::vector<Job*>& jobs) {
  answerer_->options().n_best = static_cast<AnswerJob&>(*jobs[0]).n_best;  // this queue's thread alone calls it
  scatter(jobs, &AnswerJob::inputs, &AnswerJob::out, answerer_->answer(gather(jobs, &AnswerJob::inputs)));
  for (auto* j : jobs) j->finish();
}

}  // namespace qkv::serve
