// The endpoints of the encoder tasks: /v1/embeddings (OpenAI's shape), /v1/classify, /v1/tag and
// /v1/answer. Each reads its request strictly (json_request.h), checks it against the limits,
// queues it on its model as a job and answers in its JSON shape (endpoints.cpp has the others).
#include <string_view>

#include "qkv/text/pretokenize.h"
#include "server_impl.h"

namespace qkv::serve {

void Server::Impl::embeddings(const httplib::Request& req, httplib::Response& res) {
  const std::string ep = "/v1/embeddings";
  JsonRequest body(req.body, ep, {"model", "input", "encoding_format", "pooling", "normalize", "user"});
  const Kind kind = Kind::embedding;
  ServedModel& m = pick(body, ep, &kind);
  const auto& tok = *m.embedder()->bundle().tokenizer;
  auto job = std::make_shared<EmbedJob>();
  const std::vector<std::string> texts = body.string_or_strings("input");
  check_inputs(texts.size(), opt.limits, ep, "input");
  for (size_t i = 0; i < texts.size(); ++i) {
    const int64_t n = int64_t(tok.encode(texts[i]).size());
    check_tokens(n, i, opt.limits, ep, "input");
    job->tokens += std::min<int64_t>(n + 2, m.embedder()->bundle().config.max_position_embeddings);  // [CLS] .. [SEP]
    job->inputs.push_back({texts[i], "", false});
  }
  if (auto f = body.string("encoding_format"); f && *f != "float")
    throw HttpError(400, ep + ": field \"encoding_format\": only \"float\" is supported, got \"" + *f + "\"",
                    "invalid_request_error", "encoding_format");
  const std::string pooling = body.string("pooling").value_or("cls");
  if (pooling != "cls" && pooling != "mean")
    throw HttpError(400, ep + ": field \"pooling\": expected \"cls\" or \"mean\", got \"" + pooling + "\"",
                    "invalid_request_error", "pooling");
  job->opt.pooling = tasks::parse_pooling(pooling);
  job->opt.normalize = body.boolean("normalize", false);
  (void)body.string("user");
  job->items = job->inputs.size();
  job->key = pooling + (job->opt.normalize ? " normalized" : "");
  submit(m, job);
  wait(*job);
  current_request().tokens = job->tokens;
  nlohmann::json data = nlohmann::json::array();
  for (size_t i = 0; i < job->out.size(); ++i)
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", job->out[i].vector}});
  res.set_content(dump({{"object", "list"}, {"data", data}, {"model", m.name()},
                        {"usage", {{"prompt_tokens", job->tokens}, {"total_tokens", job->tokens}}}}),
                  "application/json");
}

void Server::Impl::classify(const httplib::Request& req, httplib::Response& res) {
  const std::string ep = "/v1/classify";
  JsonRequest body(req.body, ep, {"model", "text", "text_pair", "texts", "text_pairs"});
  const Kind kind = Kind::classification;
  ServedModel& m = pick(body, ep, &kind);
  const tasks::Classifier& clf = *m.classifier();
  auto job = std::make_shared<ClassifyJob>();
  if (body.has("text") == body.has("texts"))
    throw HttpError(400, ep + ": give exactly one of \"text\" (a string) and \"texts\" (an array of strings)");
  const bool one = body.has("text");
  if (one ? body.has("text_pairs") : body.has("text_pair"))
    throw HttpError(400, ep + ": \"text\" goes with \"text_pair\", \"texts\" with \"text_pairs\"");
  const std::vector<std::string> a = one ? std::vector<std::string>{*body.string("text")} : body.strings("texts");
  const bool pair = body.has(one ? "text_pair" : "text_pairs");
  std::vector<std::string> b;
  if (pair) b = one ? std::vector<std::string>{*body.string("text_pair")} : body.strings("text_pairs");
  if (a.empty()) throw HttpError(400, ep + ": \"texts\" is empty", "invalid_request_error", "texts");
  if (pair && b.size() != a.size())
    throw HttpError(400, ep + ": \"text_pairs\" has " + std::to_string(b.size()) + " texts, \"texts\" " + std::to_string(a.size()),
                    "invalid_request_error", "text_pairs");
  if (!clf.accepts(pair))
    throw HttpError(400, ep + ": model '" + m.name() + "' classifies " + (clf.pairs() ? "pairs of texts: give \"text_pair\"" : "single texts: no \"text_pair\""),
                    "invalid_request_error", pair ? "text_pair" : "text");
  check_inputs(a.size(), opt.limits, ep, one ? "text" : "texts");
  const text::Tokenizer& tok = *m.tokenizer();
  for (size_t i = 0; i < a.size(); ++i) {
    check_tokens(int64_t(tok.encode(a[i]).size()), i, opt.limits, ep, one ? "text" : "texts");
    if (pair) check_tokens(int64_t(tok.encode(b[i]).size()), i, opt.limits, ep, one ? "text_pair" : "text_pairs");
    job->inputs.push_back({a[i], pair ? b[i] : "", pair});
  }
  job->items = job->inputs.size();
  job->key = "";
  submit(m, job);
  wait(*job);
  nlohmann::json results = nlohmann::json::array();
  for (auto& r : job->out) {
    nlohmann::json probs = nlohmann::json::object();
    for (size_t c = 0; c < r.probabilities.size(); ++c) probs[clf.labels()[c]] = r.probabilities[c];
    nlohmann::json x{{"label", r.label}, {"probability", r.probability}, {"probabilities", probs}};
    if (r.truncated) x["truncated"] = true;
    results.push_back(x);
  }
  res.set_content(dump({{"model", m.name()}, {"results", results}}), "application/json");
}

void Server::Impl::tag(const httplib::Request& req, httplib::Response& res) {
  const std::string ep = "/v1/tag";
  JsonRequest body(req.body, ep, {"model", "text", "texts", "probabilities"});
  const Kind kind = Kind::tagging;
  ServedModel& m = pick(body, ep, &kind);
  const Texts in = one_or_many_texts(body, ep);
  const std::vector<std::string>& texts = in.texts;
  const std::string& field = in.field;
  check_inputs(texts.size(), opt.limits, ep, field);
  auto job = std::make_shared<TagJob>();
  const text::Tokenizer& tok = *m.tokenizer();
  for (size_t i = 0; i < texts.size(); ++i) {
    check_tokens(int64_t(tok.encode(texts[i]).size()), i, opt.limits, ep, field);
    std::vector<std::string> words;  // as qkv tag reads a line: words between whitespace
    for (std::string_view w : text::whitespace_split(texts[i])) words.emplace_back(w);
    if (words.empty())
      throw HttpError(400, ep + ": input " + std::to_string(i) + " of \"" + field + "\" has no words",
                      "invalid_request_error", field);
    job->sentences.push_back(std::move(words));
  }
  job->opt.probabilities = body.boolean("probabilities", false);
  job->items = job->sentences.size();
  job->key = job->opt.probabilities ? "probabilities" : "";
  submit(m, job);
  wait(*job);
  nlohmann::json results = nlohmann::json::array();
  for (size_t i = 0; i < job->out.size(); ++i) {
    const tasks::Tagging& t = job->out[i];
    nlohmann::json x{{"words", job->sentences[i]}, {"tags", t.tags}};
    if (job->opt.probabilities) x["probabilities"] = t.probability;
    if (t.windows > 1) x["windows"] = t.windows;
    if (t.words_cut) x["words_cut"] = t.words_cut;
    results.push_back(x);
  }
  res.set_content(dump({{"model", m.name()}, {"results", results}}), "application/json");
}

void Server::Impl::answer(const httplib::Request& req, httplib::Response& res) {
  const std::string ep = "/v1/answer";
  JsonRequest body(req.body, ep, {"model", "question", "context", "questions", "contexts", "n_best"});
  const Kind kind = Kind::question_answering;
  ServedModel& m = pick(body, ep, &kind);
  const TextPairs p = text_pairs(body, ep, {"question", "context"}, {"questions", "contexts"});
  const std::vector<std::string> &qs = p.first, &cs = p.second;
  const std::string &qf = p.fields[0], &cf = p.fields[1];
  check_inputs(qs.size(), opt.limits, ep, qf);
  auto job = std::make_shared<AnswerJob>();
  const text::Tokenizer& tok = *m.tokenizer();
  for (size_t i = 0; i < qs.size(); ++i) {
    // As `qkv answer` refuses them: an empty context was answered with no answers, an empty
    // question with answers to nothing.
    for (const auto& [text, field] : {std::pair{&qs[i], &qf}, std::pair{&cs[i], &cf}})
      if (text->empty())
        throw HttpError(400, ep + ": input " + std::to_string(i) + " of \"" + *field + "\" is empty",
                        "invalid_request_error", *field);
    check_tokens(int64_t(tok.encode(qs[i]).size()), i, opt.limits, ep, qf);
    check_tokens(int64_t(tok.encode(cs[i]).size()), i, opt.limits, ep, cf);
    job->inputs.emplace_back(qs[i], cs[i]);
  }
  job->n_best = body.integer("n_best", 1, 1, 20);
  job->items = job->inputs.size();
  job->key = "n" + std::to_string(job->n_best);
  submit(m, job);
  wait(*job);
  nlohmann::json results = nlohmann::json::array();
  for (const auto& spans : job->out) {
    nlohmann::json answers = nlohmann::json::array();
    for (const tasks::QaAnswerSpan& s : spans)
      answers.push_back({{"text", s.text}, {"start", s.start}, {"end", s.end}, {"score", s.score}});
    results.push_back({{"answers", answers}});
  }
  res.set_content(dump({{"model", m.name()}, {"results", results}}), "application/json");
}

}  // namespace qkv::serve
