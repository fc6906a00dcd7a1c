// qkv serve's endpoints, through HTTP on a loopback port, against the library calls they stand
// for (the oracle here is tasks/: the server must add nothing and lose nothing):
//   /v1/translate = Translator::translate; /v1/score = Translator::score (the doubles read back
//   exactly; a side past the model's length refused or, asked, truncated); /v1/embeddings =
//   Embedder::embed (the floats read back exactly); /v1/classify = Classifier::classify (texts
//   and pairs); /v1/tag = Tagger::tag and /v1/answer = QuestionAnswerer::answer (also at bf16);
//   /tokenize and /detokenize = the tokenizer's; /health, /metrics (Prometheus text)
//   and the request ids; requests that arrive together are answered by one batch, each as if
//   alone. /v1/completions: test_serve_completions.cpp.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <sstream>
#include <thread>
#include <vector>

#include "qkv/tasks/classifier.h"
#include "qkv/tasks/embedder.h"
#include "qkv/tasks/generator.h"
#include "qkv/tasks/question_answerer.h"
#include "qkv/tasks/tagger.h"
#include "qkv/tasks/translator.h"
#include "helpers.h"
#include "serve_fixture.h"

using namespace qkv;
using namespace qkv_test;

namespace {

const std::vector<std::string> kTexts = {"cannot open the file", "directory not found", "save",
                                         "print error read write user name", "the user"};

}  // namespace

TEST(Serve, TranslateEqualsTheTranslator) {
  const auto& m = ServeModels::get();
  RunningServer s(m.all());
  tasks::Translator lib(m.translation);
  tasks::TranslateOptions o;
  Reply r = post(s.port, "/v1/translate", {{"texts", kTexts}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json["translations"].get<std::vector<std::string>>(), lib.translate(kTexts, o).text);
  EXPECT_EQ(r.json["model"], "mt");
  // One text, beam search with a length penalty and a length cap.
  o.search.beam = 3, o.search.alpha = 1.5, o.search.max_len_ratio = 0, o.search.max_len_extra = 4;
  r = post(s.port, "/v1/translate", {{"text", kTexts[0]}, {"beam", 3}, {"alpha", 1.5}, {"max_length", 4}, {"model", "mt"}});
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(r.json["translations"].size(), 1u);
  EXPECT_EQ(r.json["translations"][0], lib.translate({kTexts[0]}, o).text[0]);
  int64_t tokens = 0;
  for (auto& h : lib.translate({kTexts[0]}, o).hyps) tokens += int64_t(h.front().tokens.size());
  EXPECT_EQ(r.json["usage"]["completion_tokens"], tokens);
  EXPECT_FALSE(r.json.contains("n_best"));
  // The 3 best of a beam of 4, with their scores and log-probabilities (the same doubles).
  tasks::TranslateOptions nb;
  nb.search.beam = 4, nb.search.nbest = 3;
  const tasks::Translations three = lib.translate(kTexts, nb);
  r = post(s.port, "/v1/translate", {{"texts", kTexts}, {"beam", 4}, {"n_best", 3}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json["translations"].get<std::vector<std::string>>(), three.text);
  ASSERT_EQ(r.json["n_best"].size(), kTexts.size());
  for (size_t i = 0; i < kTexts.size(); ++i) {
    ASSERT_EQ(r.json["n_best"][i].size(), 3u) << i;
    for (size_t k = 0; k < 3; ++k) {
      const auto& a = r.json["n_best"][i][k];
      EXPECT_EQ(a["text"], lib.detokenize(three.hyps[i][k].tokens)) << i << " " << k;
      EXPECT_EQ(a["score"].get<double>(), three.hyps[i][k].score) << i << " " << k;
      EXPECT_EQ(a["logprob"].get<double>(), three.hyps[i][k].logprob) << i << " " << k;
    }
  }
  EXPECT_EQ(post(s.port, "/v1/translate", {{"text", "save"}, {"beam", 2}, {"n_best", 3}}).status, 400);
  r = post(s.port, "/v1/translate", {{"text", "save"}, {"beam", 4}, {"n_best", 3}, {"patience", 0.5}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("n_best 3 is more than the 2 hypotheses beam search keeps at patience 0.5"), std::string::npos)
      << r.body;
  // "allow_unk": the search may take <unk> (some of 24 word triples' greedy outputs do), which the
  // text then drops; without it the search takes another token there.
  std::vector<std::string> words, texts;
  std::istringstream all(qkv_test::kTinyWords);
  for (std::string w; all >> w;) words.push_back(w);
  for (size_t i = 0; i < 24; ++i)
    texts.push_back(words[i % 13] + " " + words[i * 5 % 13] + " " + words[(i * 7 + 3) % 13]);
  tasks::TranslateOptions a;
  a.search.allow_unk = true;
  const tasks::Translations allowed = lib.translate(texts, a);
  const int64_t unk = lib.bundle().tgt_tok->require_special_id(text::Role::Unk);
  int64_t unks = 0;
  for (auto& h : allowed.hyps) unks += std::count(h[0].tokens.begin(), h[0].tokens.end(), unk);
  ASSERT_GT(unks, 0);
  r = post(s.port, "/v1/translate", {{"texts", texts}, {"allow_unk", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json["translations"].get<std::vector<std::string>>(), allowed.text);
  r = post(s.port, "/v1/translate", {{"texts", texts}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json["translations"].get<std::vector<std::string>>(), lib.translate(texts, {}).text);
  EXPECT_NE(allowed.text, lib.translate(texts, {}).text);
}

TEST(Serve, ScoreEqualsTheTranslatorsScore) {
  const auto& m = ServeModels::get();
  RunningServer s(m.all());
  tasks::Translator lib(m.translation);
  // Each text against its own greedy translation and against another text's (a worse fit).
  std::vector<std::string> sources, targets;
  const std::vector<std::string> own = lib.translate(kTexts).text;
  for (size_t i = 0; i < kTexts.size(); ++i) {
    sources.insert(sources.end(), {kTexts[i], kTexts[i]});
    targets.insert(targets.end(), {own[i], kTexts[(i + 1) % kTexts.size()]});
  }
  tasks::ScoreOptions o;
  o.batch_size = int64_t(sources.size());  // as the server calls it: one batch
  o.token_logprobs = true;
  const tasks::Scores want = lib.score(sources, targets, o);
  Reply r = post(s.port, "/v1/score", {{"sources", sources}, {"targets", targets}, {"token_logprobs", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json["model"], "mt");
  ASSERT_EQ(r.json["scores"].size(), sources.size());
  int64_t tokens = 0;
  for (size_t i = 0; i < sources.size(); ++i) {
    const auto& g = r.json["scores"][i];
    EXPECT_EQ(g["logprob"].get<double>(), want.pairs[i].logprob) << i;  // the same double, read back
    EXPECT_EQ(g["tokens"].get<int64_t>(), want.pairs[i].tokens) << i;
    EXPECT_EQ(g["mean_logprob"].get<double>(), want.pairs[i].logprob / double(want.pairs[i].tokens)) << i;
    EXPECT_EQ(g["token_logprobs"].get<std::vector<double>>(), want.pairs[i].token_logprobs) << i;
    EXPECT_FALSE(g.contains("truncated")) << i;
    tokens += want.pairs[i].tokens;
  }
  EXPECT_EQ(r.json["usage"]["target_tokens"], tokens);
  // One pair; no token_logprobs unless asked.
  r = post(s.port, "/v1/score", {{"source", sources[3]}, {"target", targets[3]}, {"model", "mt"}});
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(r.json["scores"].size(), 1u);
  EXPECT_EQ(r.json["scores"][0]["logprob"].get<double>(), lib.score({sources[3]}, {targets[3]}).pairs[0].logprob);
  EXPECT_FALSE(r.json["scores"][0].contains("token_logprobs"));
  // A source longer than the model's 16 positions: refused, naming the input and its field as
  // /v1/translate does, unless "truncate".
  std::string longer;
  for (int i = 0; i < 5; ++i) longer += std::string(i ? " " : "") + kTinyWords;
  r = post(s.port, "/v1/score", {{"sources", {sources[0], longer}}, {"targets", {targets[0], targets[1]}}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(error_message(r).find("/v1/score: input 1 of \"sources\" has more than 15 tokens"), std::string::npos)
      << r.body;
  EXPECT_EQ(r.json["error"]["param"], "sources") << r.body;
  r = post(s.port, "/v1/score", {{"source", longer}, {"target", targets[1]}, {"truncate", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  tasks::ScoreOptions q;
  q.quiet = true;
  const tasks::Scores cut = lib.score({longer}, {targets[1]}, q);
  ASSERT_TRUE(cut.pairs[0].truncated);
  EXPECT_EQ(cut.truncated, 1);
  EXPECT_EQ(r.json["scores"][0]["truncated"], true);
  EXPECT_EQ(r.json["scores"][0]["logprob"].get<double>(), cut.pairs[0].logprob);
  // Malformed requests.
  using J = nlohmann::json;
  for (const J& bad : {J{{"source", "save"}}, J{{"sources", {"save"}}, {"targets", {"save", "the user"}}},
                       J{{"source", "save"}, {"targets", {"save"}}},
                       J{{"sources", J::array()}, {"targets", J::array()}},
                       J{{"source", "save"}, {"target", "save"}, {"model", "gpt"}}})
    EXPECT_EQ(post(s.port, "/v1/score", bad).status, 400) << bad.dump();
  EXPECT_NE(error_message(post(s.port, "/v1/score", {{"source", "save"}})).find("\"target\" is required"),
            std::string::npos);
}

TEST(Serve, EmbeddingsEqualTheEmbedder) {
  const auto& m = ServeModels::get();
  RunningServer s(m.all());
  tasks::Embedder lib(m.bert);
  std::vector<tasks::ClsInput> in;
  for (auto& t : kTexts) in.push_back({t, "", false});
  for (const std::string pooling : {"cls", "mean"}) {
    tasks::EmbedOptions o;
    o.pooling = tasks::parse_pooling(pooling);
    o.normalize = pooling == "mean";
    auto want = lib.embed(in, o);
    Reply r = post(s.port, "/v1/embeddings", {{"input", kTexts}, {"pooling", pooling}, {"normalize", o.normalize}});
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.json["object"], "list");
    ASSERT_EQ(r.json["data"].size(), kTexts.size());
    for (size_t i = 0; i < kTexts.size(); ++i) {
      EXPECT_EQ(r.json["data"][i]["object"], "embedding");
      EXPECT_EQ(r.json["data"][i]["index"], i);
      // Exactly: the JSON number is the float's shortest round-trip form.
      EXPECT_EQ(r.json["data"][i]["embedding"].get<std::vector<float>>(), want[i].vector) << pooling << " " << i;
    }
  }
  Reply r = post(s.port, "/v1/embeddings", {{"input", "the user"}, {"encoding_format", "float"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json["data"][0]["embedding"].get<std::vector<float>>(), lib.embed({{"the user", "", false}})[0].vector);
  EXPECT_EQ(r.json["usage"]["prompt_tokens"], 4);  // [CLS] the user [SEP]
}

TEST(Serve, ClassifyEqualsTheClassifierForTextsAndPairs) {
  const auto& m = ServeModels::get();
  RunningServer s(m.all());
  tasks::Classifier single(m.cls), pairs(m.pair);
  tasks::ClassifyOptions o;
  o.all_probabilities = true;
  std::vector<tasks::ClsInput> in;
  for (auto& t : kTexts) in.push_back({t, "", false});
  auto want = single.classify(in, o);
  Reply r = post(s.port, "/v1/classify", {{"model", "cls"}, {"texts", kTexts}});
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(r.json["results"].size(), kTexts.size());
  for (size_t i = 0; i < kTexts.size(); ++i) {
    EXPECT_EQ(r.json["results"][i]["label"], want[i].label);
    EXPECT_EQ(r.json["results"][i]["probability"].get<double>(), want[i].probability);
    EXPECT_EQ(r.json["results"][i]["probabilities"]["neg"].get<double>(), want[i].probabilities[0]);
    EXPECT_EQ(r.json["results"][i]["probabilities"]["pos"].get<double>(), want[i].probabilities[1]);
  }
  auto pw = pairs.classify({{"the file", "not found", true}}, o);
  r = post(s.port, "/v1/classify", {{"model", "pair"}, {"text", "the file"}, {"text_pair", "not found"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json["results"][0]["label"], pw[0].label);
  EXPECT_EQ(r.json["results"][0]["probabilities"]["unrelated"].get<double>(), pw[0].probabilities[2]);
  // The wrong kind of input for the model, and no model named where two classifiers could answer.
  r = post(s.port, "/v1/classify", {{"model", "pair"}, {"text", "the file"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(error_message(r).find("pairs of texts"), std::string::npos) << r.body;
  r = post(s.port, "/v1/classify", {{"text", "the file"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(error_message(r).find("several models could answer; name one in \"model\""), std::string::npos) << r.body;
}

TEST(Serve, TagEqualsTheTagger) {
  const auto& m = ServeModels::get();
  RunningServer s(m.all());
  tasks::Tagger lib(m.tag);
  // The second is longer than the model's 16 positions: tagged in windows.
  const std::vector<std::string> texts = {"cannot open  the file", std::string(kTinyWords) + " " + kTinyWords};
  const std::vector<std::vector<std::string>> words = {{"cannot", "open", "the", "file"}, [] {
    std::vector<std::string> w;
    std::istringstream in(std::string(kTinyWords) + " " + kTinyWords);
    for (std::string x; in >> x;) w.push_back(x);
    return w;
  }()};
  tasks::TagOptions o;
  o.probabilities = true;
  const auto want = lib.tag(words, o);
  ASSERT_GT(want[1].windows, 1);
  Reply r = post(s.port, "/v1/tag", {{"texts", texts}, {"probabilities", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json["model"], "tag");
  ASSERT_EQ(r.json["results"].size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const auto& x = r.json["results"][i];
    EXPECT_EQ(x["words"].get<std::vector<std::string>>(), words[i]);
    EXPECT_EQ(x["tags"].get<std::vector<std::string>>(), want[i].tags) << i;
    EXPECT_EQ(x["probabilities"].get<std::vector<double>>(), want[i].probability) << i;
  }
  EXPECT_EQ(r.json["results"][1]["windows"], want[1].windows);
  r = post(s.port, "/v1/tag", {{"text", texts[0]}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json["results"][0]["tags"].get<std::vector<std::string>>(), want[0].tags);
  EXPECT_FALSE(r.json["results"][0].contains("probabilities"));
  EXPECT_EQ(post(s.port, "/v1/tag", {{"text", "  "}}).status, 400);
  EXPECT_EQ(post(s.port, "/v1/tag", {{"text", "save"}, {"model", "cls"}}).status, 400);
  // --precision bf16 (where this CPU runs it): the tagger's weights held in bf16, its answers
  // those of tasks::Tagger(dir, bf16), not fp32's.
  if (!kernels::dnnl_cpu_info().bf16_native()) return;
  serve::ServerOptions bf16;
  bf16.precision = kernels::MatmulPrecision::bf16;
  RunningServer s16({{"tag", m.tag}}, bf16);
  o.precision = kernels::MatmulPrecision::bf16;
  const auto want16 = tasks::Tagger(m.tag, o.precision).tag(words, o);
  r = post(s16.port, "/v1/tag", {{"texts", texts}, {"probabilities", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  for (size_t i = 0; i < 2; ++i) {
    const auto p = r.json["results"][i]["probabilities"].get<std::vector<double>>();
    EXPECT_EQ(p, want16[i].probability) << i;
    EXPECT_NE(p, want[i].probability) << i;
  }
}

TEST(Serve, AnswerEqualsTheQuestionAnswerer) {
  const auto& m = ServeModels::get();
  RunningServer s(m.all());
  tasks::QuestionAnswerer lib(m.qa);
  lib.options().n_best = 3;
  const std::vector<std::pair<std::string, std::string>> inputs = {
      {"what cannot open", "the user cannot open the file"},
      {"which name", std::string("print the user name ") + kTinyWords}};  // past 16 positions: windows
  const auto want = lib.answer(inputs);
  Reply r = post(s.port, "/v1/answer", {{"questions", {inputs[0].first, inputs[1].first}},
                                        {"contexts", {inputs[0].second, inputs[1].second}}, {"n_best", 3}});
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(r.json["results"].size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const auto& a = r.json["results"][i]["answers"];
    ASSERT_EQ(a.size(), want[i].size()) << i;
    ASSERT_EQ(a.size(), 3u);
    for (size_t k = 0; k < a.size(); ++k) {
      EXPECT_EQ(a[k]["text"], want[i][k].text);
      EXPECT_EQ(a[k]["start"], want[i][k].start);
      EXPECT_EQ(a[k]["end"], want[i][k].end);
      EXPECT_EQ(a[k]["score"].get<double>(), want[i][k].score);
      const auto& w = want[i][k];  // the context's own text between the offsets (ASCII here)
      EXPECT_EQ(a[k]["text"], inputs[i].second.substr(size_t(w.start), size_t(w.end - w.start)));
    }
  }
  // One input; n_best 1 by default.
  r = post(s.port, "/v1/answer", {{"question", inputs[0].first}, {"context", inputs[0].second}});
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(r.json["results"][0]["answers"].size(), 1u);
  EXPECT_EQ(r.json["results"][0]["answers"][0]["text"], want[0][0].text);
  using J = nlohmann::json;
  for (const J& bad : {J{{"question", "a"}}, J{{"questions", {"a"}}, {"contexts", {"b", "c"}}},
                       J{{"question", "a"}, {"context", "b"}, {"n_best", 0}},
                       J{{"question", "a"}, {"context", "b"}, {"model", "tag"}}})
    EXPECT_EQ(post(s.port, "/v1/answer", bad).status, 400) << bad.dump();
  // An empty question or context is refused by field, as `qkv answer` refuses it (they were
  // answered: no answers for an empty context, answers to nothing for an empty question).
  for (const auto& [bad, field] : std::vector<std::pair<J, std::string>>{
           {J{{"question", "what"}, {"context", ""}}, "input 0 of \"context\" is empty"},
           {J{{"questions", {"what", ""}}, {"contexts", {"a b", "c d"}}}, "input 1 of \"questions\" is empty"}}) {
    const Reply e = post(s.port, "/v1/answer", bad);
    EXPECT_EQ(e.status, 400) << e.body;
    EXPECT_NE(error_message(e).find(field), std::string::npos) << e.body;
  }
  // --precision bf16 (where this CPU runs it): the answers of tasks::QuestionAnswerer(dir, bf16).
  if (!kernels::dnnl_cpu_info().bf16_native()) return;
  serve::ServerOptions bf16;
  bf16.precision = kernels::MatmulPrecision::bf16;
  RunningServer s16({{"qa", m.qa}}, bf16);
  tasks::QuestionAnswerer lib16(m.qa, bf16.precision);
  const auto want16 = lib16.answer(inputs);
  r = post(s16.port, "/v1/answer", {{"question", inputs[1].first}, {"context", inputs[1].second}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json["results"][0]["answers"][0]["score"].get<double>(), want16[1][0].score);
  EXPECT_NE(r.json["results"][0]["answers"][0]["score"].get<double>(), want[1][0].score);
}

TEST(Serve, TokenizeAndDetokenizeUseTheModelsTokenizer) {
  const auto& m = ServeModels::get();
  RunningServer s(m.all());
  auto tok = word_tokenizer({"<pad>", "<unk>", "<s>", "</s>"});  // the translation model's
  Reply r = post(s.port, "/tokenize", {{"model", "mt"}, {"text", "open the zebra file"}});
  ASSERT_EQ(r.status, 200) << r.body;
  const auto ids = tok->encode("open the zebra file");
  EXPECT_EQ(r.json["tokens"].get<std::vector<int32_t>>(), ids);
  EXPECT_EQ(r.json["pieces"].get<std::vector<std::string>>(), (std::vector<std::string>{"open", "the", "<unk>", "file"}));
  r = post(s.port, "/detokenize", {{"model", "mt"}, {"tokens", ids}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json["text"], tok->decode(ids));
  // "target": the translation model's target side (this model shares one vocabulary); refused elsewhere.
  r = post(s.port, "/tokenize", {{"model", "mt"}, {"text", "open the zebra file"}, {"target", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json["tokens"].get<std::vector<int32_t>>(), ids);
  r = post(s.port, "/detokenize", {{"model", "gpt"}, {"tokens", {1}}, {"target", true}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(error_message(r).find("/detokenize: \"target\" is for translation models"), std::string::npos) << r.body;
  r = post(s.port, "/detokenize", {{"model", "mt"}, {"tokens", {4, 999}}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(error_message(r).find("element 1: expected an id in [0, " + std::to_string(tok->vocab_size()) + "), got 999"),
            std::string::npos)
      << r.body;
  r = post(s.port, "/tokenize", {{"text", "x"}});  // five models: which one?
  EXPECT_EQ(r.status, 400);
  r = post(s.port, "/tokenize", {{"model", "nope"}, {"text", "x"}});
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(error_message(r).find("no model named 'nope' (served: mt (translation), gpt (generation)"), std::string::npos)
      << r.body;
}

TEST(Serve, HealthMetricsAndRequestIds) {
  const auto& m = ServeModels::get();
  RunningServer s(m.all());
  Reply h = request(s.port, "GET", "/health");
  ASSERT_EQ(h.status, 200);
  EXPECT_EQ(h.json["status"], "ok");
  ASSERT_EQ(h.json["models"].size(), 7u);
  EXPECT_EQ(h.json["models"][1]["kind"], "generation");
  EXPECT_EQ(h.json["models"][3]["kind"], "classification");
  EXPECT_EQ(h.json["models"][5]["kind"], "tagging");  // from config.json's architectures
  EXPECT_EQ(h.json["models"][6]["kind"], "question_answering");
  ASSERT_EQ(post(s.port, "/v1/translate", {{"text", "the file"}}).status, 200);
  ASSERT_EQ(post(s.port, "/v1/translate", {{"text", 3}}).status, 400);
  ASSERT_EQ(request(s.port, "POST", "/v2/none", "{}").status, 404);
  // The three answers are counted once written (possibly after the client read them): wait.
  ASSERT_TRUE(wait_metric(s.port, "qkv_request_duration_seconds_count{endpoint=\"/v1/translate\"}", 2));
  ASSERT_TRUE(wait_metric(s.port, "qkv_requests_total{endpoint=\"other\",status=\"404\"}", 1));
  Reply mt = request(s.port, "GET", "/metrics");
  ASSERT_EQ(mt.status, 200);
  const std::string& t = mt.body;
  EXPECT_EQ(metric(t, "qkv_requests_total{endpoint=\"/v1/translate\",status=\"200\"}"), 1) << t;
  EXPECT_EQ(metric(t, "qkv_requests_total{endpoint=\"/v1/translate\",status=\"400\"}"), 1) << t;
  EXPECT_EQ(metric(t, "qkv_requests_total{endpoint=\"other\",status=\"404\"}"), 1) << t;
  EXPECT_EQ(metric(t, "qkv_errors_total{endpoint=\"/v1/translate\"}"), 1) << t;
  EXPECT_EQ(metric(t, "qkv_request_duration_seconds_count{endpoint=\"/v1/translate\"}"), 2) << t;
  EXPECT_EQ(metric(t, "qkv_request_duration_seconds_bucket{endpoint=\"/v1/translate\",le=\"+Inf\"}"), 2) << t;
  EXPECT_EQ(metric(t, "qkv_queue_length{model=\"mt\"}"), 0) << t;
  EXPECT_EQ(metric(t, "qkv_requests_in_flight"), 0) << t;
  EXPECT_GT(metric(t, "qkv_tokens_total{model=\"mt\"}"), 0) << t;
  EXPECT_GT(metric(t, "qkv_tokens_per_second{model=\"mt\"}"), 0) << t;
  EXPECT_NE(t.find("# TYPE qkv_request_duration_seconds histogram"), std::string::npos);
  // Every answer carries its request id, counting up.
  httplib::Client c("127.0.0.1", s.port);
  auto a = c.Get("/health"), b = c.Get("/health");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(std::stoll(b->get_header_value("X-Request-Id")), std::stoll(a->get_header_value("X-Request-Id")) + 1);
}

TEST(Serve, ConcurrentRequestsShareABatchAndEachEqualsItsOwnCall) {
  const auto& m = ServeModels::get();
  serve::ServerOptions opt;
  opt.batch.max_wait = std::chrono::milliseconds(2000);  // time for every request to arrive, even under load
  opt.batch.max_batch = 64;
  RunningServer s(m.all(), opt);
  tasks::Translator mt(m.translation);
  tasks::Generator gpt(m.gpt);
  tasks::GenerateOptions go;
  go.max_new_tokens = 7;
  const int n = 6;
  std::vector<Reply> tr(n), cr(n);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] { tr[size_t(i)] = post(s.port, "/v1/translate", {{"text", kTexts[size_t(i) % kTexts.size()]}}); });
    threads.emplace_back([&, i] {
      cr[size_t(i)] = post(s.port, "/v1/completions",
                           {{"prompt", kTexts[size_t(i) % kTexts.size()]}, {"max_tokens", 7}, {"temperature", 0}});
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < n; ++i) {
    const std::string& text = kTexts[size_t(i) % kTexts.size()];
    ASSERT_EQ(tr[size_t(i)].status, 200) << tr[size_t(i)].body;
    EXPECT_EQ(tr[size_t(i)].json["translations"][0], mt.translate({text}).text[0]) << i;
    ASSERT_EQ(cr[size_t(i)].status, 200) << cr[size_t(i)].body;
    EXPECT_EQ(cr[size_t(i)].json["choices"][0]["text"], gpt.generate({text}, go)[0].text) << i;
  }
  // Fewer library calls than requests: they were batched (all of them arrive well within 2 s).
  const std::string t = request(s.port, "GET", "/metrics").body;
  EXPECT_EQ(metric(t, "qkv_batch_inputs_total{model=\"mt\"}"), n) << t;
  EXPECT_LE(metric(t, "qkv_batches_total{model=\"mt\"}"), 2) << t;
  EXPECT_EQ(metric(t, "qkv_batch_inputs_total{model=\"gpt\"}"), n) << t;
  EXPECT_LE(metric(t, "qkv_batches_total{model=\"gpt\"}"), 2) << t;
}
