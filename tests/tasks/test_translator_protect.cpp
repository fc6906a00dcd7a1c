// Protected spans through a whole translation run (tokenizer.protect, text/placeholders.h): the
// training pairs' shared spans become placeholders for BPE and training, the model directory says
// so, and the Translator masks its input the same way and puts the spans back into the output.
//
// The task: "copy w1 .. wn SPAN" -> "kopiere w1 .. wn SPAN", SPAN a made-up option (--xxxxx with
// five random letters) or printf conversion, so held-out spans are strings the model never saw.
// With protection the model only has to copy a placeholder; the same run without it has to
// spell five unseen letters, which the control run shows it does not.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <random>

#include "qkv/tasks/attention_view.h"
#include "qkv/tasks/translation_training.h"
#include "qkv/tasks/translator.h"
#include "qkv/text/placeholders.h"
#include "qkv/util/file.h"

namespace fs = std::filesystem;
using namespace qkv;

namespace {

struct Pair {
  std::string src, tgt, span;
};

std::vector<Pair> make_pairs(int n, uint64_t seed) {
  const char* words[] = {"alpha", "beta", "gamma", "delta", "eps", "zeta"};
  const char* formats[] = {"%s", "%d", "%-8s", "%lu"};
  std::mt19937_64 rng(seed);
  std::vector<Pair> out;
  for (int i = 0; i < n; ++i) {
    std::string span;
    if (rng() % 2) {
      span = "--";
      for (int k = 0; k < 5; ++k) span += char('a' + rng() % 26);
    } else {
      span = formats[rng() % 4];
    }
    std::string body;
    for (int k = 0, len = 1 + int(rng() % 3); k < len; ++k) body += std::string(" ") + words[rng() % 6];
    out.push_back({"copy" + body + " " + span, "kopiere" + body + " " + span, span});
  }
  return out;
}

void write_tsv(const fs::path& p, const std::vector<Pair>& pairs) {
  std::string s;
  for (auto& x : pairs) s += x.src + "\t" + x.tgt + "\n";
  write_file_atomic(p.string(), s);
}

// Trains on 400 pairs; returns how many of 40 held-out sources translate with their span intact.
int spans_kept(const fs::path& dir, bool protect, std::vector<std::string>* hyps_out = nullptr) {
  write_tsv(dir / "train.tsv", make_pairs(400, 1));
  const auto held_out = make_pairs(40, 2);
  write_tsv(dir / "valid.tsv", held_out);
  write_file_atomic((dir / "config.json").string(), std::string(R"({
    "model_type": "transformer",
    "model": {"d_model": 32, "heads": 2, "enc_layers": 1, "dec_layers": 1, "d_ff": 64, "dropout": 0.0, "max_len": 40,
              "shared_embeddings": true, "tie_output": true, "pre_norm": true},
    "tokenizer": {"kind": "bpe", "vocab_size": 80, "min_frequency": 1, "protect": )") +
                                                         (protect ? "true" : "false") + R"(},
    "data": {"max_tokens": 400, "max_sentences": 32},
    "optimizer": {"type": "adam", "betas": [0.9, 0.98], "eps": 1e-9},
    "schedule": {"type": "warmup_cosine", "lr": 0.005, "warmup": 30, "total": 300},
    "train": {"max_steps": 300, "save_every": 0, "valid_every": 0},
    "valid": {"max_sentences": 10},
    "seed": 3
  })");
  tasks::TranslationRun run;
  run.config_path = (dir / "config.json").string();
  run.out_dir = (dir / "run").string();
  run.train_file = (dir / "train.tsv").string();
  run.valid_file = (dir / "valid.tsv").string();
  const auto result = tasks::train_translation(run);

  const tasks::Translator t(result.model_dir);
  EXPECT_EQ(t.bundle().protect_spans, protect);
  std::vector<std::string> src;
  for (auto& p : held_out) src.push_back(p.src);
  const auto r = t.translate(src);
  // The model saw the masked source: its ids decode to protect()'s text.
  if (protect) {
    EXPECT_EQ(t.bundle().src_tok->decode(std::vector<int32_t>(r.src_ids[0].begin(), r.src_ids[0].end() - 1)),
              text::protect(src[0]).text);
  }
  // A long option name is one placeholder to a protecting model, so the line fits its 40
  // positions: source_too_long and pair_too_long (what qkv serve checks) read it as translate and
  // score do.
  const std::string long_span = "copy alpha --" + std::string(200, 'q');
  tasks::TranslateOptions quiet;
  quiet.quiet = true;
  EXPECT_EQ(t.translate({long_span}, quiet).truncated, protect ? 0 : 1);
  EXPECT_EQ(t.source_too_long(long_span), !protect);
  EXPECT_EQ(t.pair_too_long(long_span, "kopiere alpha --" + std::string(200, 'q')), std::make_pair(!protect, !protect));
  EXPECT_EQ(t.pair_too_long("copy beta", "kopiere beta"), std::make_pair(false, false));
  {  // the attention viewer reads the source as the translation did (placeholders, not raw spans)
    tasks::ViewInput in;
    in.text = src[0];
    const viz::AttentionPage page = tasks::translation_attention_page(t, in);
    EXPECT_EQ(page.sequences.at(0).second.size(), r.src_ids[0].size());
    // Its caption shows the translation as translate prints it: the spans put back.
    EXPECT_EQ(page.info.at(1).second, r.text[0]);
    // A given target is read as score reads the pair: the span both sides share is the same
    // placeholder, as training saw it (it was encoded raw: a target the model never sees).
    in.target = held_out[0].tgt;
    const viz::AttentionPage given = tasks::translation_attention_page(t, in);
    const std::vector<std::string>& target = given.sequences.at(2).second;
    EXPECT_EQ(target.size(), t.pair_ids(src[0], held_out[0].tgt).second.size());
    const bool placeholder = std::any_of(target.begin(), target.end(), [](const std::string& label) {
      return label.find("\xEF\xBD\x9F") != std::string::npos;
    });
    EXPECT_EQ(placeholder, protect);
  }
  if (protect) {  // every hypothesis of an n-best list comes back restored, not only the best
    tasks::TranslateOptions nbest = quiet;
    nbest.search.beam = 3, nbest.search.nbest = 3;
    const auto n = t.translate({src[0], src[1]}, nbest);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(n.hyp_text[i].size(), 3u);
      EXPECT_EQ(n.hyp_text[i].front(), n.text[i]);
      for (const std::string& h : n.hyp_text[i]) EXPECT_EQ(h.find("\xEF\xBD\x9F"), std::string::npos) << h;
    }
  }
  int kept = 0;
  for (size_t i = 0; i < held_out.size(); ++i) kept += r.text[i].find(held_out[i].span) != std::string::npos;
  if (hyps_out) *hyps_out = r.text;
  return kept;
}

}  // namespace

TEST(TranslatorProtect, UnseenSpansComeBackVerbatim) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("qkv_protect_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "on");
  fs::create_directories(dir / "off");
  std::vector<std::string> hyps;
  const int with = spans_kept(dir / "on", true, &hyps);
  EXPECT_EQ(with, 40) << "first hypothesis: " << hyps[0];
  // No placeholder is left in any output.
  for (auto& h : hyps) EXPECT_EQ(h.find("\xEF\xBD\x9F"), std::string::npos) << h;
  // Control: the same run without protection loses most made-up option names (it keeps the
  // printf conversions it saw in training, about half the spans).
  const int without = spans_kept(dir / "off", false);
  EXPECT_LT(without, 30);
  std::printf("spans kept verbatim: %d/40 with protection, %d/40 without\n", with, without);
  fs::remove_all(dir);
}
