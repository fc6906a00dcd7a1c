// Each endpoint: its request read strictly (json_request.h), checked against the limits, queued
// on its model as a job, and answered in its JSON shape (OpenAI's for completions and embeddings).
// Numbers go out as nlohmann's shortest round-trip text: a client reads back the very double.
// Here: model choice and queueing, /v1/translate, /v1/score, /v1/completions, /tokenize,
// /detokenize; the encoder tasks' endpoints are in endpoints_encoders.cpp.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <numeric>
#include <random>

#include "qkv/train/seq2seq_data.h"
#include "server_impl.h"

namespace qkv::serve {

namespace {

std::string num(double x) {
  char b[40];
  std::snprintf(b, sizeof b, "%.17g", x);
  return b;
}

constexpr int64_t kMaxLogprobs = 20;  // OpenAI allows 5
constexpr int64_t kMaxChoices = 128;  // completions per prompt ("n"), as OpenAI

nlohmann::json usage(int64_t prompt, int64_t completion) {
  return {{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}};
}

// OpenAI's sampled best_of: of each prompt's `per` consecutive completions in out, the n with the
// highest mean log-probability per token (the model's own, Generation::logprobs), best first (ties:
// the earlier). Returns their indices in out, prompt by prompt.
std::vector<size_t> best_per_token(const std::vector<tasks::Generation>& out, size_t per, size_t n) {
  auto mean = [&](size_t i) {
    double sum = 0;
    for (const auto& t : out[i].logprobs) sum += t.logprob;
    return out[i].logprobs.empty() ? -INFINITY : sum / double(out[i].logprobs.size());
  };
  std::vector<size_t> picked;
  for (size_t first = 0; first < out.size(); first += per) {
    std::vector<size_t> order(per);
    std::iota(order.begin(), order.end(), first);
    std::vector<double> score(per);
    for (size_t j = 0; j < per; ++j) score[j] = mean(first + j);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return score[a - first] > score[b - first]; });
    picked.insert(picked.end(), order.begin(), order.begin() + int64_t(n));
  }
  return picked;
}

// The tokenizer a /tokenize or /detokenize request names: the model's, or with "target": true a
// translation model's target side. Never null.
const text::Tokenizer* tokenizer_asked(const JsonRequest& body, const std::string& ep, ServedModel& m) {
  const bool target = body.boolean("target", false);
  if (target && m.kind() != Kind::translation)
    throw HttpError(400, ep + ": \"target\" is for translation models", "invalid_request_error", "target");
  const text::Tokenizer* tok = m.tokenizer(target);
  if (!tok) throw HttpError(400, ep + ": model '" + m.name() + "' has no tokenizer");
  return tok;
}

}  // namespace

// Texts in one request: at most --max-inputs.
void check_inputs(size_t n, const Limits& lim, const std::string& endpoint, const std::string& field) {
  if (int64_t(n) > lim.max_inputs)
    throw limit_error(400, "max_inputs",
                      endpoint + ": " + std::to_string(n) + " inputs in \"" + field + "\", more than " +
                          std::to_string(lim.max_inputs) + " (--max-inputs)",
                      field);
}

// One text's tokens: at most --max-input-tokens.
void check_tokens(int64_t n, size_t i, const Limits& lim, const std::string& endpoint, const std::string& field) {
  if (n > lim.max_input_tokens)
    throw limit_error(400, "max_input_tokens",
                      endpoint + ": input " + std::to_string(i) + " of \"" + field + "\" has " + std::to_string(n) +
                          " tokens, more than " + std::to_string(lim.max_input_tokens) + " (--max-input-tokens)",
                      field);
}

Texts one_or_many_texts(const JsonRequest& body, const std::string& ep) {
  if (body.has("text") == body.has("texts"))
    throw HttpError(400, ep + ": give exactly one of \"text\" (a string) and \"texts\" (an array of strings)");
  Texts t;
  t.field = body.has("text") ? "text" : "texts";
  t.texts = body.has("text") ? std::vector<std::string>{*body.string("text")} : body.strings("texts");
  if (t.texts.empty()) throw HttpError(400, ep + ": \"texts\" is empty", "invalid_request_error", "texts");
  return t;
}

TextPairs text_pairs(const JsonRequest& body, const std::string& ep, const std::array<std::string, 2>& one_names,
                     const std::array<std::string, 2>& many_names) {
  const bool one = body.has(one_names[0]) || body.has(one_names[1]);
  const auto& many = many_names;
  if (one == (body.has(many[0]) || body.has(many[1])))
    throw HttpError(400, ep + ": give either \"" + one_names[0] + "\" and \"" + one_names[1] + "\" (strings) or \"" +
                             many[0] + "\" and \"" + many[1] + "\" (arrays of strings of the same length)");
  TextPairs p;
  p.fields = one ? one_names : many;
  for (int k : {0, 1})
    if (!body.has(p.fields[size_t(k)]))
      throw HttpError(400, ep + ": field \"" + p.fields[size_t(k)] + "\" is required with \"" +
                               p.fields[size_t(1 - k)] + "\"",
                      "invalid_request_error", p.fields[size_t(k)]);
  p.first = one ? std::vector<std::string>{*body.string(p.fields[0])} : body.strings(p.fields[0]);
  p.second = one ? std::vector<std::string>{*body.string(p.fields[1])} : body.strings(p.fields[1]);
  if (p.first.empty()) throw HttpError(400, ep + ": \"" + many[0] + "\" is empty", "invalid_request_error", many[0]);
  if (p.second.size() != p.first.size())
    throw HttpError(400, ep + ": \"" + many[1] + "\" has " + std::to_string(p.second.size()) + " texts, \"" +
                             many[0] + "\" " + std::to_string(p.first.size()),
                    "invalid_request_error", many[1]);
  return p;
}

ServedModel& Server::Impl::pick(const JsonRequest& body, const std::string& endpoint, const Kind* kind) {
  auto list = [&] {
    std::string s;
    for (auto& m : models) s += (s.empty() ? "" : ", ") + m->name() + " (" + kind_name(m->kind()) + ")";
    return s;
  };
  if (auto name = body.string("model")) {
    for (auto& m : models)
      if (m->name() == *name) {
        if (kind && m->kind() != *kind)
          throw HttpError(400, endpoint + ": model '" + *name + "' is a " + kind_name(m->kind()) + " model; this endpoint needs a " +
                                   kind_name(*kind) + " model (served: " + list() + ")",
                          "invalid_request_error", "model");
        return *m;
      }
    throw HttpError(404, endpoint + ": no model named '" + *name + "' (served: " + list() + ")", "not_found", "model");
  }
  std::vector<ServedModel*> fit;
  for (auto& m : models)
    if (!kind || m->kind() == *kind) fit.push_back(m.get());
  if (fit.empty())
    throw HttpError(404, endpoint + ": no " + std::string(kind_name(*kind)) + " model is served (served: " + list() + ")",
                    "not_found");
  if (fit.size() > 1)
    throw HttpError(400, endpoint + ": several models could answer; name one in \"model\" (served: " + list() + ")",
                    "invalid_request_error", "model");
  return *fit[0];
}

void Server::Impl::submit(ServedModel& m, const std::shared_ptr<Job>& job) {
  if (!m.queue().push(job))
    throw limit_error(429, "max_queue",
                      "the queue of model '" + m.name() + "' is full (" + std::to_string(opt.limits.max_queue) +
                          " inputs, --max-queue); retry later");
}

void Server::Impl::wait(Job& job) {
  job.wait();
  if (job.error_status()) throw HttpError(job.error_status(), job.error(), job.error_status() >= 500 ? "server_error" : "invalid_request_error");
}

namespace {

// Input i of `field` is longer than the model takes (max_len tokens with </s>) and truncation is off.
HttpError too_long(const std::string& ep, size_t i, const std::string& field, int64_t max_len) {
  return HttpError(400, ep + ": input " + std::to_string(i) + " of \"" + field + "\" has more than " +
                            std::to_string(max_len - 1) + " tokens, the model's maximum (\"truncate\": true cuts it)",
                   "invalid_request_error", field);
}

}  // namespace

void Server::Impl::translate(const httplib::Request& req, httplib::Response& res) {
  const std::string ep = "/v1/translate";
  JsonRequest body(req.body, ep, {"model", "text", "texts", "beam", "alpha", "patience", "max_length",
                                  "no_repeat_ngram_size", "allow_unk", "truncate", "n_best"});
  const Kind kind = Kind::translation;
  ServedModel& m = pick(body, ep, &kind);
  auto job = std::make_shared<TranslateJob>();
  Texts in = one_or_many_texts(body, ep);
  const std::string& field = in.field;
  job->lines = std::move(in.texts);
  check_inputs(job->lines.size(), opt.limits, ep, field);
  const auto& b = m.translator()->bundle();
  const bool truncate = body.boolean("truncate", false);  // a text longer than the model takes: cut it, or 400
  int64_t truncated = 0;
  for (size_t i = 0; i < job->lines.size(); ++i) {
    check_tokens(int64_t(b.src_tok->encode(job->lines[i]).size()), i, opt.limits, ep, field);
    const bool cut = m.translator()->source_too_long(job->lines[i]);  // as Translator encodes it
    truncated += cut;
    if (cut && !truncate) throw too_long(ep, i, field, b.model->max_len());
  }
  auto& s = job->opt.search;
  s.beam = int(body.integer("beam", 1, 1, opt.limits.max_beam));
  s.nbest = int(body.integer("n_best", 1, 1, s.beam));  // the n best of the beam, with their scores
  s.alpha = body.number("alpha", s.alpha, 0, 10);
  s.patience = body.number("patience", s.patience, 0.125, 64);
  if (s.beam > 1 && s.nbest > decode::endings_kept(s))
    throw HttpError(400, ep + ": n_best " + std::to_string(s.nbest) + " is more than the " +
                             std::to_string(decode::endings_kept(s)) + " hypotheses beam search keeps at patience " +
                             num(s.patience) + " (round(patience x beam)): raise patience or lower n_best",
                    "invalid_request_error", "n_best");
  s.no_repeat_ngram_size = int(body.integer("no_repeat_ngram_size", 0, 0, 16));
  s.allow_unk = body.boolean("allow_unk", false);
  if (body.has("max_length")) {
    const int64_t ml = body.integer("max_length", 0, 1, INT64_MAX);
    if (ml > opt.limits.max_tokens)
      throw limit_error(400, "max_tokens",
                        ep + ": max_length " + std::to_string(ml) + " is more than " + std::to_string(opt.limits.max_tokens) +
                            " (--max-tokens)",
                        "max_length");
    s.max_len_ratio = 0, s.max_len_extra = ml;
  }
  job->opt.refuse_long = !truncate;
  job->items = job->lines.size();
  job->key = std::string(truncate ? "cut " : "") + "b" + std::to_string(s.beam) + " a" + num(s.alpha) + " p" +
             num(s.patience) + " r" + num(s.max_len_ratio) + " e" + std::to_string(s.max_len_extra) + " n" +
             std::to_string(s.no_repeat_ngram_size) + " k" + std::to_string(s.nbest) + (s.allow_unk ? " unk" : "");
  submit(m, job);
  wait(*job);
  current_request().tokens = job->tokens;
  nlohmann::json out{{"model", m.name()}, {"translations", job->out}, {"usage", {{"completion_tokens", job->tokens}}}};
  if (truncated) out["truncated"] = truncated;  // texts cut to the model's maximum
  if (s.nbest > 1) {
    out["n_best"] = nlohmann::json::array();
    for (const auto& alternatives : job->nbest) {
      nlohmann::json list = nlohmann::json::array();
      for (const auto& a : alternatives) list.push_back({{"text", a.text}, {"score", a.score}, {"logprob", a.logprob}});
      out["n_best"].push_back(list);
    }
  }
  res.set_content(dump(out), "application/json");
}

void Server::Impl::score(const httplib::Request& req, httplib::Response& res) {
  const std::string ep = "/v1/score";
  JsonRequest body(req.body, ep, {"model", "source", "target", "sources", "targets", "token_logprobs", "truncate"});
  const Kind kind = Kind::translation;
  ServedModel& m = pick(body, ep, &kind);
  auto job = std::make_shared<ScoreJob>();
  TextPairs p = text_pairs(body, ep, {"source", "target"}, {"sources", "targets"});
  const std::string &sf = p.fields[0], &tf = p.fields[1];
  job->sources = std::move(p.first), job->targets = std::move(p.second);
  check_inputs(job->sources.size(), opt.limits, ep, sf);
  const auto& b = m.translator()->bundle();
  const bool truncate = body.boolean("truncate", false);  // a side longer than the model takes: cut it, or 400
  for (size_t i = 0; i < job->sources.size(); ++i) {
    check_tokens(int64_t(b.src_tok->encode(job->sources[i]).size()), i, opt.limits, ep, sf);
    check_tokens(int64_t(b.tgt_tok->encode(job->targets[i]).size()), i, opt.limits, ep, tf);
    const auto [cut_source, cut_target] = m.translator()->pair_too_long(job->sources[i], job->targets[i]);
    if ((cut_source || cut_target) && !truncate)
      throw too_long(ep, i, cut_source ? sf : tf, b.model->max_len());  // before the queue, as /v1/translate
  }
  job->opt.token_logprobs = body.boolean("token_logprobs", false);
  job->opt.refuse_long = !truncate;
  job->items = job->sources.size();
  job->key = std::string("score") + (truncate ? " cut" : "") + (job->opt.token_logprobs ? " tokens" : "");
  submit(m, job);
  wait(*job);
  current_request().tokens = job->tokens;
  nlohmann::json scores = nlohmann::json::array();
  for (const tasks::PairScore& p : job->out) {
    nlohmann::json x{{"logprob", p.logprob}, {"tokens", p.tokens}, {"mean_logprob", p.logprob / double(p.tokens)}};
    if (job->opt.token_logprobs) x["token_logprobs"] = p.token_logprobs;
    if (p.truncated) x["truncated"] = true;
    scores.push_back(x);
  }
  res.set_content(dump({{"model", m.name()}, {"scores", scores}, {"usage", {{"target_tokens", job->tokens}}}}),
                  "application/json");
}

void Server::Impl::completions(const httplib::Request& req, httplib::Response& res, Slot slot) {
  const std::string ep = "/v1/completions";
  JsonRequest body(req.body, ep,
                   {"model", "prompt", "max_tokens", "temperature", "top_p", "top_k", "stop", "seed", "stream", "n",
                    "repetition_penalty", "presence_penalty", "frequency_penalty", "no_repeat_ngram_size", "min_tokens",
                    "user", "logprobs", "echo", "use_beam_search", "best_of", "length_penalty", "early_stopping",
                    "logit_bias"});
  const Kind kind = Kind::generation;
  ServedModel& m = pick(body, ep, &kind);
  const tasks::Generator& gen = *m.generator();
  if (!gen.bundle().tokenizer) throw HttpError(400, ep + ": model '" + m.name() + "' has no tokenizer: text prompts need one");
  auto job = std::make_shared<CompletionJob>();
  const std::vector<std::string> prompts = body.string_or_strings("prompt");
  // n completions per prompt: the prompt repeated n times in one call, so that sampled ones draw
  // from random streams of their own; choice i * n + j is prompt i's j-th (OpenAI's order).
  const int64_t n_choices = body.integer("n", 1, 1, kMaxChoices);
  check_inputs(prompts.size(), opt.limits, ep, "prompt");
  if (int64_t(prompts.size()) * n_choices > opt.limits.max_inputs)
    throw limit_error(400, "max_inputs",
                      ep + ": " + std::to_string(prompts.size()) + " prompts times n " + std::to_string(n_choices) +
                          " are more than " + std::to_string(opt.limits.max_inputs) + " completions (--max-inputs)",
                      "n");
  // best_of (default n): vLLM's beam search with best_of beams, the n best returned; or, sampling,
  // OpenAI's: best_of completions per prompt, the n of highest log-probability per token returned.
  // Choices as above.
  const bool beam = body.boolean("use_beam_search", false);
  const int64_t best_of = body.integer("best_of", n_choices, 1, kMaxChoices);
  if (best_of < n_choices)
    throw HttpError(400, ep + ": best_of (" + std::to_string(best_of) + ") must be at least n (" +
                             std::to_string(n_choices) + ")", "invalid_request_error", "best_of");
  const bool best_of_samples = !beam && best_of > n_choices;
  if (int64_t(prompts.size()) * best_of > opt.limits.max_inputs)
    throw limit_error(400, "max_inputs",
                      ep + ": " + std::to_string(prompts.size()) + " prompts times best_of " + std::to_string(best_of) +
                          " are more than " + std::to_string(opt.limits.max_inputs) +
                          (beam ? " beams" : " completions") + " (--max-inputs)",
                      "best_of");
  if (beam) job->prompts = prompts;  // the library returns n per prompt
  else
    for (const std::string& p : prompts) job->prompts.insert(job->prompts.end(), size_t(best_of), p);
  int64_t prompt_tokens = 0;  // each prompt once, whatever n
  const int64_t n_positions = gen.bundle().config.n_positions;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const int64_t n = int64_t(gen.bundle().tokenizer->encode(prompts[i]).size());
    check_tokens(n, i, opt.limits, ep, "prompt");
    if (n > n_positions - 1)
      throw HttpError(400, ep + ": prompt " + std::to_string(i) + " has " + std::to_string(n) +
                               " tokens; the model's context holds " + std::to_string(n_positions) +
                               " (prompt + at least one new token)",
                      "invalid_request_error", "prompt");
    prompt_tokens += n;
  }
  auto& o = job->opt;
  const int64_t max_tokens = body.integer("max_tokens", 16, 1, INT64_MAX);
  if (max_tokens > opt.limits.max_tokens)
    throw limit_error(400, "max_tokens",
                      ep + ": max_tokens " + std::to_string(max_tokens) + " is more than " +
                          std::to_string(opt.limits.max_tokens) + " (--max-tokens)",
                      "max_tokens");
  o.max_new_tokens = max_tokens;
  const double temperature = body.number("temperature", beam ? 0.0 : 1.0, 0, 100);
  if (beam && temperature > 0)
    throw HttpError(400, ep + ": use_beam_search needs temperature 0 (beam search does not sample)",
                    "invalid_request_error", "temperature");
  o.sample = temperature > 0;
  if (o.sample) o.logits.temperature = temperature;
  o.logits.top_p = body.number("top_p", 1.0, 0, 1, /*lo_open=*/true);
  o.logits.top_k = body.integer("top_k", 0, 0, 1 << 30);
  o.logits.repetition_penalty = body.number("repetition_penalty", 1.0, 1e-6, 100);
  o.logits.presence_penalty = body.number("presence_penalty", 0.0, -2, 2);  // OpenAI's bounds
  o.logits.frequency_penalty = body.number("frequency_penalty", 0.0, -2, 2);
  o.no_repeat_ngram_size = int(body.integer("no_repeat_ngram_size", 0, 0, 16));  // as /v1/translate
  if (body.has("logit_bias")) {  // OpenAI's: {"token id": bias in [-100, 100]}
    const nlohmann::json& lb = body.json().at("logit_bias");
    auto bad = [&](const std::string& why) {
      return HttpError(400, ep + ": field \"logit_bias\": " + why, "invalid_request_error", "logit_bias");
    };
    if (!lb.is_object()) throw bad("expected an object of token ids to biases, got " + shown_value(lb));
    const int64_t V = gen.bundle().config.vocab_size;
    for (const auto& [key, value] : lb.items()) {
      // A token id as a plain decimal: stoll took " 5", "+5" and "05" for 5 (and "05" beside "5" then
      // failed as "logit_bias names token 5 twice", naming no field).
      const bool plain = !key.empty() && key.size() <= 9 && (key == "0" || key[0] != '0') &&
                         std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
      const int64_t id = plain ? std::stoll(key) : -1;
      if (id < 0 || id >= V)
        throw bad("key \"" + key + "\": expected a token id in [0, " + std::to_string(V) + ")");
      if (!value.is_number() || !(value.get<double>() >= -100 && value.get<double>() <= 100))
        throw bad("token " + key + ": expected a bias in [-100, 100], got " + shown_value(value));
      o.logits.logit_bias.emplace_back(id, value.get<double>());
    }
    std::sort(o.logits.logit_bias.begin(), o.logits.logit_bias.end());  // one order for the batch key
  }
  o.min_new_tokens = body.integer("min_tokens", 0, 0, max_tokens);  // vLLM's name: eos held back until then
  if (body.has("stop")) {
    o.stop = body.json().at("stop").is_string() ? std::vector<std::string>{*body.string("stop")} : body.strings("stop");
    if (o.stop.size() > 4) throw HttpError(400, ep + ": field \"stop\": at most 4 strings, got " + std::to_string(o.stop.size()), "invalid_request_error", "stop");
    for (auto& s : o.stop)
      if (s.empty()) throw HttpError(400, ep + ": field \"stop\": an empty stop string", "invalid_request_error", "stop");
  }
  o.seed = body.has("seed") ? body.unsigned_integer("seed", 0) : std::random_device{}();
  (void)body.string("user");
  job->stream = body.boolean("stream", false);
  if (beam) {
    if (job->stream)
      throw HttpError(400, ep + ": use_beam_search cannot stream (the search knows its completions only when it ends)",
                      "invalid_request_error", "stream");
    if (!o.stop.empty())
      throw HttpError(400, ep + ": stop strings are not supported with use_beam_search", "invalid_request_error", "stop");
    o.num_beams = best_of;
    o.num_return_sequences = n_choices;
    o.length_penalty = body.number("length_penalty", 1.0, -100, 100);
    using ES = tasks::GenerateOptions::EarlyStopping;
    if (body.has("early_stopping")) {
      const nlohmann::json& e = body.json().at("early_stopping");
      if (e.is_boolean()) o.early_stopping = e.get<bool>() ? ES::first : ES::heuristic;
      else if (e == "never") o.early_stopping = ES::never;
      else
        throw HttpError(400,
                        ep + ": field \"early_stopping\": expected true, false or \"never\", got " + shown_value(e),
                        "invalid_request_error", "early_stopping");
    }
  } else {
    for (const char* f : {"length_penalty", "early_stopping"})
      if (body.has(f))
        throw HttpError(400, ep + ": field \"" + f + "\" is for use_beam_search", "invalid_request_error", f);
    if (best_of_samples && !o.sample)
      throw HttpError(400, ep + ": best_of above n needs sampling (temperature > 0) or use_beam_search: greedy "
                      "completions of a prompt are all the same", "invalid_request_error", "best_of");
    if (best_of_samples && job->stream)
      throw HttpError(400, ep + ": best_of above n cannot stream (the best are known only at the end)",
                      "invalid_request_error", "stream");
  }
  // OpenAI's legacy logprobs: the chosen tokens' log-probabilities and the `logprobs` most likely
  // at each position (0..kMaxLogprobs); echo: the prompt leads the text (and its tokens' logprobs).
  const int64_t logprobs = body.integer("logprobs", -1, 0, kMaxLogprobs);
  o.logprobs = best_of_samples ? std::max<int64_t>(logprobs, 0) : logprobs;  // best_of ranks by them
  job->echo = body.boolean("echo", false);
  o.prompt_logprobs = job->echo && logprobs >= 0;
  job->items = job->prompts.size();
  // Greedy requests with the same options share batches (a row's answer does not depend on its
  // batch); a sampled one runs alone: its prompts' random streams are numbered within the call.
  if (o.sample) {
    job->key = "sample " + std::to_string(++next_sample_key);
  } else {
    job->key = "greedy n" + std::to_string(o.max_new_tokens) + " r" + num(o.logits.repetition_penalty) + " p" +
               num(o.logits.presence_penalty) + " f" + num(o.logits.frequency_penalty) + " g" +
               std::to_string(o.no_repeat_ngram_size) + " m" + std::to_string(o.min_new_tokens) + " l" +
               std::to_string(o.logprobs) + (o.prompt_logprobs ? " e" : "") + " b" + std::to_string(o.num_beams) +
               " n" + std::to_string(o.num_return_sequences) + " lp" + num(o.length_penalty) + " es" +
               std::to_string(int(o.early_stopping));
    for (const auto& [t, b] : o.logits.logit_bias) job->key += " lb" + std::to_string(t) + ":" + num(b);
    for (auto& s : o.stop) job->key += " s" + std::to_string(s.size()) + ":" + s;
  }
  const uint64_t id = current_request().id;
  const int64_t created = int64_t(std::time(nullptr));
  submit(m, job);

  if (!job->stream) {
    wait(*job);
    current_request().tokens = job->tokens;
    nlohmann::json choices = nlohmann::json::array();
    std::vector<size_t> picked(job->out.size());  // the choices' generations, in order
    std::iota(picked.begin(), picked.end(), size_t(0));
    if (best_of_samples) picked = best_per_token(job->out, size_t(best_of), size_t(n_choices));
    for (size_t i = 0; i < picked.size(); ++i) {
      const tasks::Generation& g = job->out[picked[i]];
      const nlohmann::json lp =
          logprobs >= 0 ? tasks::logprobs_json(*gen.bundle().tokenizer, g, job->echo) : nlohmann::json(nullptr);
      const std::string& prompt = job->prompts[beam ? i / size_t(n_choices) : picked[i]];
      choices.push_back({{"text", job->echo ? prompt + g.text : g.text}, {"index", i}, {"logprobs", lp},
                         {"finish_reason", finish_reason(g.finish)}});
    }
    res.set_content(dump({{"id", "cmpl-" + std::to_string(id)}, {"object", "text_completion"}, {"created", created},
                          {"model", m.name()}, {"choices", choices}, {"usage", usage(prompt_tokens, job->tokens)}}),
                    "application/json");
    return;
  }
  // Server-sent events: one per piece of text (echo: the prompt first), one with each prompt's
  // finish_reason, then [DONE]; with "logprobs", each carries its tokens' (their union is the
  // object a request without "stream" gets).
  // The provider writes the whole stream in one call (cpp-httplib stops calling providers once
  // the server stops; a stream in flight when draining starts still ends normally).
  res.set_header("Cache-Control", "no-cache");
  const std::string name = m.name();
  res.set_chunked_content_provider(
      "text/event-stream", [job, slot, name, id, created](size_t, httplib::DataSink& sink) {
        auto event = [&](const nlohmann::json& j) {
          const std::string s = "data: " + dump(j) + "\n\n";
          return sink.write(s.data(), s.size());
        };
        for (;;) {
          const bool was_done = job->done();  // before taking: then nothing is left behind
          for (auto& p : job->take(std::chrono::milliseconds(was_done ? 0 : 100))) {
            nlohmann::json choice{{"text", p.text}, {"index", p.index}, {"logprobs", p.logprobs}};
            choice["finish_reason"] = p.finish.empty() ? nlohmann::json(nullptr) : nlohmann::json(p.finish);
            nlohmann::json chunk{{"id", "cmpl-" + std::to_string(id)}, {"object", "text_completion"}, {"created", created},
                                 {"model", name}, {"choices", {choice}}};
            if (!event(chunk)) {
              job->cancelled = true;  // the client went away: the batch may stop early
              return false;
            }
          }
          if (was_done) {
            if (job->error_status()) {
              event({{"error", {{"message", job->error()}, {"type", "server_error"}, {"code", job->error_status()}}}});
            } else {
              current_request().tokens = job->tokens;
            }
            const std::string done = "data: [DONE]\n\n";
            if (!sink.write(done.data(), done.size())) return false;
            sink.done();
            return true;
          }
          if (!sink.is_writable()) {
            job->cancelled = true;
            return false;
          }
        }
      });
}

void Server::Impl::tokenize(const httplib::Request& req, httplib::Response& res) {
  const std::string ep = "/tokenize";
  JsonRequest body(req.body, ep, {"model", "text", "add_special_tokens", "target"});
  ServedModel& m = pick(body, ep, nullptr);
  const text::Tokenizer* tok = tokenizer_asked(body, ep, m);
  const auto text = body.string("text");
  if (!text) throw HttpError(400, ep + ": field \"text\" is required", "invalid_request_error", "text");
  const text::Encoding e = tok->encode_single(*text, body.boolean("add_special_tokens", false));
  std::vector<std::string> pieces;
  for (int32_t id : e.ids) pieces.push_back(tok->id_to_token(id));
  res.set_content(dump({{"model", m.name()}, {"tokens", e.ids}, {"pieces", pieces}}), "application/json");
}

void Server::Impl::detokenize(const httplib::Request& req, httplib::Response& res) {
  const std::string ep = "/detokenize";
  JsonRequest body(req.body, ep, {"model", "tokens", "skip_special_tokens", "target"});
  ServedModel& m = pick(body, ep, nullptr);
  const text::Tokenizer* tok = tokenizer_asked(body, ep, m);
  const std::vector<int64_t> ids = body.integers("tokens");
  std::vector<int32_t> ids32;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= tok->vocab_size())
      throw HttpError(400, ep + ": field \"tokens\" element " + std::to_string(i) + ": expected an id in [0, " +
                               std::to_string(tok->vocab_size()) + "), got " + std::to_string(ids[i]),
                      "invalid_request_error", "tokens");
    ids32.push_back(int32_t(ids[i]));
  }
  res.set_content(dump({{"model", m.name()}, {"text", tok->decode(ids32, body.boolean("skip_special_tokens", true))}}),
                  "application/json");
}

}  // namespace qkv::serve
