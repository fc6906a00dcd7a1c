// qkv serve's /v1/completions through HTTP against tasks::Generator (the server must add nothing
// and lose nothing): greedy and seeded sampling, the penalties, n-gram blocking, the logit bias,
// stop strings, n completions per prompt, vLLM's beam search, OpenAI's shape, logprobs and echo;
// streaming gives the same text and logprobs as not streaming, piece by piece, and ends with
// [DONE].
#include <sstream>
#include <string>
#include <vector>

#include "qkv/tasks/generator.h"
#include "helpers.h"
#include "serve_fixture.h"

using namespace qkv;
using namespace qkv_test;

namespace {

// The events of a server-sent event stream: the JSON of each "data: " line, and whether it ended
// with "data: [DONE]" (and nothing after it).
std::vector<nlohmann::json> sse_events(const std::string& body, bool* done) {
  std::vector<nlohmann::json> ev;
  *done = false;
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    EXPECT_EQ(line.rfind("data: ", 0), 0u) << line;
    EXPECT_FALSE(*done) << "an event after [DONE]: " << line;
    const std::string data = line.substr(6);
    if (data == "[DONE]") *done = true;
    else ev.push_back(nlohmann::json::parse(data));
  }
  return ev;
}

// One request answered without and with "stream": the plain reply, and the stream's events (its
// status, content type and final [DONE] checked here).
struct Completed {
  Reply plain;
  std::vector<nlohmann::json> events;
};
Completed plain_and_streamed(int port, nlohmann::json req) {
  Completed out{post(port, "/v1/completions", req), {}};
  req["stream"] = true;
  httplib::Client c("127.0.0.1", port);
  auto res = c.Post("/v1/completions", req.dump(), "application/json");
  EXPECT_TRUE(res);
  if (!res) return out;
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/event-stream");
  bool done = false;
  out.events = sse_events(res->body, &done);
  EXPECT_TRUE(done) << res->body;
  return out;
}

}  // namespace

TEST(Serve, CompletionsEqualTheGenerator) {
  const auto& m = ServeModels::get();
  RunningServer s(m.all());
  tasks::Generator lib(m.gpt);
  const std::vector<std::string> prompts = {"the file", "user name error", "cannot"};
  // Greedy (temperature 0).
  tasks::GenerateOptions o;
  o.max_new_tokens = 9;
  auto want = lib.generate(prompts, o);
  Reply r = post(s.port, "/v1/completions", {{"prompt", prompts}, {"max_tokens", 9}, {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json["object"], "text_completion");
  EXPECT_EQ(r.json["model"], "gpt");
  ASSERT_EQ(r.json["choices"].size(), prompts.size());
  int64_t completion = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(r.json["choices"][i]["index"], i);
    EXPECT_EQ(r.json["choices"][i]["text"], want[i].text) << i;
    EXPECT_EQ(r.json["choices"][i]["finish_reason"], want[i].finish == "length" ? "length" : "stop") << i;
    completion += int64_t(want[i].tokens.size());
  }
  EXPECT_EQ(r.json["usage"]["completion_tokens"], completion);
  EXPECT_EQ(r.json["usage"]["prompt_tokens"], 2 + 3 + 1);  // word tokens
  // Greedy with OpenAI's presence and frequency penalties: the Generator's with them.
  o.logits.presence_penalty = 1.5, o.logits.frequency_penalty = 0.8;
  const auto penalised = lib.generate(prompts, o);
  r = post(s.port, "/v1/completions", {{"prompt", prompts}, {"max_tokens", 9}, {"temperature", 0},
                                       {"presence_penalty", 1.5}, {"frequency_penalty", 0.8}});
  ASSERT_EQ(r.status, 200) << r.body;
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(r.json["choices"][i]["text"], penalised[i].text) << i;
  EXPECT_NE(penalised[0].text, want[0].text) << "the penalties changed nothing";
  // And n-gram blocking (2: no word pair twice).
  o.logits = {};
  o.no_repeat_ngram_size = 2;
  const auto blocked = lib.generate(prompts, o);
  r = post(s.port, "/v1/completions",
           {{"prompt", prompts}, {"max_tokens", 9}, {"temperature", 0}, {"no_repeat_ngram_size", 2}});
  ASSERT_EQ(r.status, 200) << r.body;
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(r.json["choices"][i]["text"], blocked[i].text) << i;
  EXPECT_NE(blocked[0].text, want[0].text) << "no n-gram was blocked";
  // OpenAI's logit_bias: the Generator's with it.
  o.no_repeat_ngram_size = 0;
  o.logits.logit_bias = {{3, 4.5}, {7, -100.0}};
  const auto biased = lib.generate(prompts, o);
  r = post(s.port, "/v1/completions", {{"prompt", prompts}, {"max_tokens", 9}, {"temperature", 0},
                                       {"logit_bias", {{"7", -100}, {"3", 4.5}}}});
  ASSERT_EQ(r.status, 200) << r.body;
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(r.json["choices"][i]["text"], biased[i].text) << i;
  EXPECT_NE(biased[0].text, want[0].text) << "the bias changed nothing";
  for (const auto& [bias, msg] : std::vector<std::pair<nlohmann::json, std::string>>{
           {{{"x", 1}}, "key \"x\": expected a token id in [0, "},
           {{{"3", 101}}, "token 3: expected a bias in [-100, 100], got 101"},
           {{{"99999", 1}}, "key \"99999\": expected a token id"},
           {{{" 5", 1}}, "key \" 5\": expected a token id"},  // stoll took these three for 5
           {{{"+5", 1}}, "key \"+5\": expected a token id"},
           {{{"05", 1}, {"5", 2}}, "key \"05\": expected a token id"},
           {nlohmann::json::array({1, 2}), "expected an object of token ids to biases"}}) {
    const Reply e = post(s.port, "/v1/completions", {{"prompt", "cannot"}, {"logit_bias", bias}});
    EXPECT_EQ(e.status, 400) << e.body;
    EXPECT_NE(error_message(e).find("field \"logit_bias\": " + msg), std::string::npos) << e.body;
  }
  o.logits = {};
  // min_tokens, the eos held back (Generator::min_new_tokens; its effect is tested there).
  o.no_repeat_ngram_size = 0, o.min_new_tokens = 6;
  const auto at_least = lib.generate(prompts, o);
  r = post(s.port, "/v1/completions", {{"prompt", prompts}, {"max_tokens", 9}, {"temperature", 0}, {"min_tokens", 6}});
  ASSERT_EQ(r.status, 200) << r.body;
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(r.json["choices"][i]["text"], at_least[i].text) << i;
  o = {};
  o.max_new_tokens = 9;
  // Sampled with a seed: top-k, top-p, temperature, repetition penalty, one prompt as a string.
  o.sample = true, o.seed = 11, o.logits = {0.7, 5, 0.9, 1.3};
  r = post(s.port, "/v1/completions", {{"prompt", prompts[1]}, {"max_tokens", 9}, {"temperature", 0.7}, {"top_k", 5},
                                        {"top_p", 0.9}, {"repetition_penalty", 1.3}, {"seed", 11}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json["choices"][0]["text"], lib.generate({prompts[1]}, o)[0].text);
  // A stop string taken from the greedy text: cut there, finish_reason "stop".
  const std::string free_text = want[0].text;
  ASSERT_GE(free_text.size(), 6u) << free_text;
  const std::string stop = free_text.substr(free_text.size() / 2, 3);
  o = {};
  o.max_new_tokens = 9, o.stop = {stop};
  r = post(s.port, "/v1/completions", {{"prompt", prompts[0]}, {"max_tokens", 9}, {"temperature", 0}, {"stop", stop}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json["choices"][0]["text"], lib.generate({prompts[0]}, o)[0].text);
  EXPECT_EQ(r.json["choices"][0]["finish_reason"], "stop");
  EXPECT_LT(r.json["choices"][0]["text"].get<std::string>().size(), free_text.size());
  // n completions per prompt: the Generator's on each prompt repeated n times (choice i * n + j),
  // sampled ones from random streams of their own; usage counts each prompt once.
  o = {};
  o.sample = true, o.seed = 21, o.max_new_tokens = 9, o.logits.temperature = 1.5;
  const std::vector<std::string> twice = {prompts[0], prompts[0], prompts[0], prompts[2], prompts[2], prompts[2]};
  want = lib.generate(twice, o);
  r = post(s.port, "/v1/completions", {{"prompt", {prompts[0], prompts[2]}}, {"max_tokens", 9}, {"temperature", 1.5},
                                       {"seed", 21}, {"n", 3}});
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(r.json["choices"].size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(r.json["choices"][i]["index"], i);
    EXPECT_EQ(r.json["choices"][i]["text"], want[i].text) << i;
  }
  EXPECT_TRUE(want[0].text != want[1].text || want[1].text != want[2].text) << "three equal samples";
  EXPECT_EQ(r.json["usage"]["prompt_tokens"], 2 + 1);
}

// OpenAI's "logprobs" and "echo": the Generator's log-probabilities, read back as the same doubles,
// each token's text and the most likely tokens keyed by their text, and where each token starts in
// the choice's text; echo puts the prompt first, its first token with nulls.
TEST(Serve, CompletionLogprobsAndEchoEqualTheGenerators) {
  const auto& m = ServeModels::get();
  RunningServer s(m.all());
  tasks::Generator lib(m.gpt);
  const text::Tokenizer& tok = *lib.bundle().tokenizer;
  auto text_of = [&](int64_t id) {
    const int32_t one[1] = {int32_t(id)};
    return tok.decode(one, false);
  };
  const std::vector<std::string> prompts = {"the file", "user name error"};
  tasks::GenerateOptions o;
  o.max_new_tokens = 5, o.logprobs = 2, o.prompt_logprobs = true;
  const auto want = lib.generate(prompts, o);
  for (bool echo : {false, true}) {
    SCOPED_TRACE(echo ? "echo" : "no echo");
    Reply r = post(s.port, "/v1/completions",
                   {{"prompt", prompts}, {"max_tokens", 5}, {"temperature", 0}, {"logprobs", 2}, {"echo", echo}});
    ASSERT_EQ(r.status, 200) << r.body;
    for (size_t i = 0; i < prompts.size(); ++i) {
      const auto& c = r.json["choices"][i];
      EXPECT_EQ(c["text"], (echo ? prompts[i] : "") + want[i].text);
      if (echo) {  // the words as the tokens decode together: the prompt's last and the first generated apart
        std::vector<int32_t> ids(want[i].prompt_ids.begin(), want[i].prompt_ids.end());
        ids.insert(ids.end(), want[i].tokens.begin(), want[i].tokens.end());
        EXPECT_EQ(c["text"], tok.decode(ids));
      }
      std::vector<decode::TokenLogprob> all = want[i].logprobs;
      if (echo) all.insert(all.begin(), want[i].prompt_logprobs.begin(), want[i].prompt_logprobs.end());
      const size_t first = echo ? 1 : 0;  // echo: the prompt's first token, with nulls
      ASSERT_EQ(c["logprobs"]["tokens"].size(), all.size() + first) << c.dump();
      if (echo) {
        EXPECT_EQ(c["logprobs"]["tokens"][0], text_of(want[i].prompt_ids[0]));
        EXPECT_TRUE(c["logprobs"]["token_logprobs"][0].is_null());
        EXPECT_TRUE(c["logprobs"]["top_logprobs"][0].is_null());
      }
      for (size_t j = 0; j < all.size(); ++j) {
        EXPECT_EQ(c["logprobs"]["tokens"][first + j], text_of(all[j].token)) << j;
        EXPECT_EQ(c["logprobs"]["token_logprobs"][first + j].get<double>(), all[j].logprob) << j;
        const auto& top = c["logprobs"]["top_logprobs"][first + j];
        ASSERT_EQ(top.size(), 2u) << top.dump();
        for (const auto& [id, lp] : all[j].top) EXPECT_EQ(top[text_of(id)].get<double>(), lp) << j;
      }
      // text_offset: each token's place in the choice's text (ASCII here: bytes are code points;
      // the tokenizer joins words with spaces), in order.
      const std::string text = c["text"];
      ASSERT_TRUE(std::all_of(text.begin(), text.end(), [](char ch) { return (ch & 0x80) == 0; })) << text;
      ASSERT_EQ(c["logprobs"]["text_offset"].size(), all.size() + first);
      size_t at = 0;
      for (size_t j = 0; j < all.size() + first; ++j) {
        const std::string t = c["logprobs"]["tokens"][j];
        const size_t offset = c["logprobs"]["text_offset"][j];
        EXPECT_EQ(text.substr(offset, t.size()), t) << j;
        EXPECT_GE(offset, at) << j;
        EXPECT_LE(offset, at + 1) << j << ": at most a joining space between tokens";
        at = offset + t.size();
      }
      EXPECT_EQ(at, text.size());
    }
  }
  // Without "logprobs": null, as before; echo alone still leads with the prompt.
  Reply r =
      post(s.port, "/v1/completions", {{"prompt", prompts[0]}, {"max_tokens", 5}, {"temperature", 0}, {"echo", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(r.json["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(r.json["choices"][0]["text"], prompts[0] + want[0].text);
  for (const nlohmann::json& bad : {nlohmann::json{{"prompt", "the"}, {"logprobs", 21}},
                                    nlohmann::json{{"prompt", "the"}, {"logprobs", -1}}})
    EXPECT_EQ(post(s.port, "/v1/completions", bad).status, 400) << bad.dump();
}

TEST(Serve, StreamingGivesTheSameTextPieceByPieceAndEndsWithDone) {
  const auto& m = ServeModels::get();
  RunningServer s(m.all());
  const std::vector<std::string> prompts = {"the file", "user"};
  for (const bool sample : {false, true}) {
    const Completed got = plain_and_streamed(
        s.port, {{"prompt", prompts}, {"max_tokens", 12}, {"temperature", sample ? 0.9 : 0.0}, {"seed", 5}});
    const Reply& plain = got.plain;
    ASSERT_EQ(plain.status, 200) << plain.body;
    const auto& events = got.events;
    std::vector<std::string> text(prompts.size());
    std::vector<std::string> finish(prompts.size());
    std::vector<int> pieces(prompts.size());
    for (const auto& e : events) {
      ASSERT_EQ(e["object"], "text_completion") << e;
      const size_t i = e["choices"][0]["index"];
      ASSERT_LT(i, prompts.size());
      EXPECT_TRUE(finish[i].empty()) << "text after prompt " << i << "'s finish_reason";
      text[i] += e["choices"][0]["text"].get<std::string>();
      if (!e["choices"][0]["finish_reason"].is_null()) finish[i] = e["choices"][0]["finish_reason"];
      ++pieces[i];
    }
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(text[i], plain.json["choices"][i]["text"]) << "sample " << sample << " prompt " << i;
      EXPECT_EQ(finish[i], plain.json["choices"][i]["finish_reason"]) << i;
      EXPECT_GT(pieces[i], 2) << "token by token, not one piece";
    }
  }
}

// Streamed with "logprobs" and "echo": the echoed prompt comes first, and the events' texts and
// logprobs objects put together are the unstreamed answer's (the stop string " file name" makes a
// text ending in " file" wait for the next token, whose event then carries both tokens).
TEST(Serve, StreamedLogprobsAndEchoPutTogetherAreTheUnstreamedOnes) {
  const auto& m = ServeModels::get();
  RunningServer s(m.all());
  const std::vector<std::string> prompts = {"the file", "user name error"};
  for (const bool echo : {false, true}) {
    SCOPED_TRACE(echo ? "echo" : "no echo");
    const Completed got = plain_and_streamed(s.port, {{"prompt", prompts}, {"max_tokens", 12}, {"temperature", 0},
                                                      {"logprobs", 2}, {"echo", echo}, {"stop", " file name"}});
    const Reply& plain = got.plain;
    ASSERT_EQ(plain.status, 200) << plain.body;
    const auto& events = got.events;
    std::vector<std::string> text(prompts.size());
    std::vector<nlohmann::json> lp(prompts.size(), {{"tokens", nlohmann::json::array()},
                                                    {"token_logprobs", nlohmann::json::array()},
                                                    {"top_logprobs", nlohmann::json::array()},
                                                    {"text_offset", nlohmann::json::array()}});
    std::vector<int> events_of(prompts.size()), held(prompts.size());
    for (const auto& e : events) {
      const auto& ch = e["choices"][0];
      const size_t i = ch["index"];
      ASSERT_LT(i, prompts.size());
      if (echo && events_of[i] == 0) {
        EXPECT_EQ(ch["text"], prompts[i]) << "the echoed prompt first";
      }
      ++events_of[i];
      text[i] += ch["text"].get<std::string>();
      ASSERT_TRUE(ch["logprobs"].is_object()) << e.dump();
      held[i] += ch["logprobs"]["tokens"].size() > 1 && !(echo && events_of[i] == 1);
      for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
        for (const auto& x : ch["logprobs"][key]) lp[i][key].push_back(x);
    }
    int any_held = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
      const auto& want = plain.json["choices"][i];
      EXPECT_EQ(text[i], want["text"]) << i;
      EXPECT_EQ(lp[i], want["logprobs"]) << i;  // the same doubles, in the same order
      EXPECT_GT(events_of[i], 3) << i;
      any_held += held[i];
    }
    EXPECT_GT(any_held, 0) << "no event carried a held-back token: the stop string did not test it";
  }
}

// vLLM's beam search fields: use_beam_search with best_of beams returns the Generator's n best per
// prompt (choice i * n + j), echo and logprobs included; what beam search cannot do is refused.
TEST(Serve, CompletionsWithBeamSearchEqualTheGenerators) {
  const auto& m = ServeModels::get();
  RunningServer s(m.all());
  tasks::Generator lib(m.gpt);
  const std::vector<std::string> prompts = {"the file", "cannot"};
  tasks::GenerateOptions o;
  o.max_new_tokens = 7, o.num_beams = 3, o.num_return_sequences = 2, o.length_penalty = 0.5, o.logprobs = 1;
  o.early_stopping = tasks::GenerateOptions::EarlyStopping::never, o.prompt_logprobs = true;
  const auto want = lib.generate(prompts, o);
  const nlohmann::json req = {{"prompt", prompts}, {"max_tokens", 7}, {"use_beam_search", true}, {"best_of", 3},
                              {"n", 2}, {"length_penalty", 0.5}, {"early_stopping", "never"}, {"logprobs", 1},
                              {"echo", true}};
  Reply r = post(s.port, "/v1/completions", req);
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(r.json["choices"].size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    const nlohmann::json& c = r.json["choices"][i];
    EXPECT_EQ(c["index"], i);
    EXPECT_EQ(c["text"], prompts[i / 2] + want[i].text) << i;
    EXPECT_EQ(c["logprobs"], tasks::logprobs_json(*lib.bundle().tokenizer, want[i], true)) << i;
  }
  EXPECT_NE(want[0].text, want[1].text);
  // Without best_of: n beams.
  o.num_beams = 2, o.logprobs = -1, o.prompt_logprobs = false, o.length_penalty = 1;
  o.early_stopping = tasks::GenerateOptions::EarlyStopping::first;
  const auto two = lib.generate({prompts[1]}, o);
  r = post(s.port, "/v1/completions", {{"prompt", prompts[1]}, {"max_tokens", 7}, {"use_beam_search", true}, {"n", 2},
                                       {"early_stopping", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(r.json["choices"].size(), 2u);
  for (size_t j = 0; j < 2; ++j) EXPECT_EQ(r.json["choices"][j]["text"], two[j].text) << j;

  auto refused = [&](nlohmann::json extra, const std::string& want_msg) {
    nlohmann::json q = {{"prompt", "cannot"}, {"max_tokens", 3}, {"use_beam_search", true}};
    q.update(extra);
    const Reply e = post(s.port, "/v1/completions", q);
    EXPECT_EQ(e.status, 400) << e.body;
    EXPECT_NE(error_message(e).find(want_msg), std::string::npos) << e.body;
  };
  refused({{"stream", true}}, "use_beam_search cannot stream");
  refused({{"stop", "x"}}, "stop strings are not supported with use_beam_search");
  refused({{"temperature", 0.7}}, "use_beam_search needs temperature 0");
  refused({{"n", 3}, {"best_of", 2}}, "best_of (2) must be at least n (3)");
  refused({{"early_stopping", "sometimes"}}, "expected true, false or \"never\", got \"sometimes\"");
  refused({{"use_beam_search", false}, {"best_of", 2}, {"temperature", 0}}, "best_of above n needs sampling");
  refused({{"use_beam_search", false}, {"best_of", 2}, {"stream", true}}, "best_of above n cannot stream");
  refused({{"use_beam_search", false}, {"length_penalty", 2}}, "\"length_penalty\" is for use_beam_search");
}

// OpenAI's sampled best_of: best_of completions per prompt (the Generator's on each prompt repeated
// best_of times, from the request's seed), of which the n with the highest mean log-probability
// per token come back, best first; their logprobs only when asked; usage counts every completion.
TEST(Serve, SampledBestOfReturnsTheBestPerTokenOfTheGeneratorsSamples) {
  const auto& m = ServeModels::get();
  RunningServer s(m.all());
  tasks::Generator lib(m.gpt);
  const std::vector<std::string> prompts = {"the file", "user name"};
  tasks::GenerateOptions o;
  o.sample = true, o.seed = 11, o.max_new_tokens = 6, o.logits.temperature = 1.3, o.logprobs = 1;
  std::vector<std::string> each;  // best_of 4 of each prompt
  for (const std::string& p : prompts) each.insert(each.end(), 4, p);
  const auto want = lib.generate(each, o);
  std::vector<size_t> best;  // by mean log-probability per token, the 2 best of each prompt's 4
  int64_t tokens = 0;
  bool reordered = false;
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::vector<std::pair<double, size_t>> mean;
    for (size_t j = 4 * i; j < 4 * i + 4; ++j) {
      double sum = 0;
      for (const auto& t : want[j].logprobs) sum += t.logprob;
      mean.emplace_back(-sum / double(want[j].logprobs.size()), j);  // ascending = best first
      tokens += int64_t(want[j].tokens.size());
    }
    std::sort(mean.begin(), mean.end());
    ASSERT_LT(mean[1].first, mean[2].first) << "a tie at the cut: pick another seed";
    best.insert(best.end(), {mean[0].second, mean[1].second});
    reordered |= mean[0].second != 4 * i || mean[1].second != 4 * i + 1;
  }
  EXPECT_TRUE(reordered) << "the first two samples are the best: the test could not tell ranking from none";
  for (const bool with_logprobs : {false, true}) {
    nlohmann::json q = {{"prompt", prompts}, {"max_tokens", 6}, {"temperature", 1.3}, {"seed", 11}, {"n", 2},
                        {"best_of", 4}};
    if (with_logprobs) q["logprobs"] = 1;
    const Reply r = post(s.port, "/v1/completions", q);
    ASSERT_EQ(r.status, 200) << r.body;
    ASSERT_EQ(r.json["choices"].size(), 4u);
    for (size_t k = 0; k < 4; ++k) {
      const auto& c = r.json["choices"][k];
      EXPECT_EQ(c["index"], k);
      EXPECT_EQ(c["text"], want[best[k]].text) << k;
      EXPECT_EQ(c["logprobs"], with_logprobs ? tasks::logprobs_json(*lib.bundle().tokenizer, want[best[k]], false)
                                             : nlohmann::json(nullptr)) << k;
    }
    EXPECT_EQ(r.json["usage"]["completion_tokens"], tokens);
  }
}

// A value nested 100,000 deep (200 KB, within the body limit) where logit_bias or early_stopping
// wants something else: a 400, and the server goes on serving. The error message dumped the value,
// recursively, and the worker's stack overflowed: the whole server died.
TEST(Serve, ADeeplyNestedValueInAFieldIsA400NotACrash) {
  const auto& m = ServeModels::get();
  RunningServer s(m.all());
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  httplib::Client c("127.0.0.1", s.port);
  for (const std::string& body :
       {R"({"prompt": "cannot", "logit_bias": )" + deep + "}",
        R"({"prompt": "cannot", "logit_bias": {"5": )" + deep + "}}",
        R"({"prompt": "cannot", "use_beam_search": true, "best_of": 2, "early_stopping": )" + deep + "}"}) {
    auto res = c.Post("/v1/completions", body, "application/json");
    ASSERT_TRUE(res) << "no answer: the server died";
    EXPECT_EQ(res->status, 400) << res->body.substr(0, 300);
    EXPECT_NE(res->body.find("an array"), std::string::npos) << res->body.substr(0, 300);
    EXPECT_LT(res->body.size(), 1000u);
  }
  const Reply ok = post(s.port, "/v1/completions", {{"prompt", "cannot"}, {"max_tokens", 2}, {"temperature", 0}});
  EXPECT_EQ(ok.status, 200) << ok.body;
}
