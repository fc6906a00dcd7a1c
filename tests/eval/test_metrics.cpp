// Accuracy / P / R / F1, perplexity, SQuAD span EM/F1, NER entity F1: hand-worked examples
// (each expected value is derived in the comment next to it).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "qkv/eval/classification.h"
#include "qkv/eval/ner.h"
#include "qkv/eval/span.h"
#include "qkv/eval/bleu.h"
#include "qkv/eval/chrf.h"
#include "qkv/util/file.h"
#include "qkv/util/unicode.h"
#include "qkv/util/utf8.h"
#include "qkv/util/error.h"

using namespace qkv::eval;

TEST(Classification, HandWorkedReport) {
  // gold: 0 0 0 1 1 2 ; pred: 0 0 1 1 2 2
  // class 0: tp 2 fp 0 fn 1 -> P 1, R 2/3, F1 0.8
  // class 1: tp 1 fp 1 fn 1 -> P 1/2, R 1/2, F1 1/2
  // class 2: tp 1 fp 1 fn 0 -> P 1/2, R 1, F1 2/3
  // class 3: absent everywhere -> excluded from the macro mean
  const std::vector<int> gold = {0, 0, 0, 1, 1, 2}, pred = {0, 0, 1, 1, 2, 2};
  auto r = classification_report(pred, gold, 4);
  EXPECT_DOUBLE_EQ(r.accuracy, 4.0 / 6.0);
  EXPECT_DOUBLE_EQ(r.per_class[0].precision, 1.0);
  EXPECT_DOUBLE_EQ(r.per_class[0].recall, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(r.per_class[0].f1, 0.8);
  EXPECT_EQ(r.per_class[0].support, 3);
  EXPECT_DOUBLE_EQ(r.per_class[2].f1, 2.0 / 3.0);
  EXPECT_EQ(r.per_class[3].f1, 0.0);
  EXPECT_DOUBLE_EQ(r.macro.precision, (1.0 + 0.5 + 0.5) / 3);
  EXPECT_DOUBLE_EQ(r.macro.recall, (2.0 / 3 + 0.5 + 1.0) / 3);
  EXPECT_DOUBLE_EQ(r.macro.f1, (0.8 + 0.5 + 2.0 / 3) / 3);
  // micro over single-label classes: TP 4, FP 2, FN 2 -> P = R = F1 = accuracy = 2/3
  EXPECT_DOUBLE_EQ(r.micro.precision, 4.0 / 6.0);
  EXPECT_DOUBLE_EQ(r.micro.f1, 4.0 / 6.0);
  EXPECT_DOUBLE_EQ(accuracy(pred, gold), 4.0 / 6.0);
  EXPECT_THROW(classification_report({0, 5}, {0, 1}, 4), qkv::Error);
  EXPECT_THROW(accuracy({0}, {0, 1}), qkv::Error);
}

TEST(Classification, Perplexity) {
  // uniform over 50 tokens: NLL = ln 50 per token -> perplexity 50
  EXPECT_NEAR(perplexity(std::log(50.0)), 50.0, 1e-12);
  EXPECT_NEAR(perplexity(10 * std::log(8.0), 10), 8.0, 1e-12);
  EXPECT_THROW(perplexity(1.0, 0), qkv::Error);
  EXPECT_THROW(perplexity(NAN), qkv::Error);
}

TEST(Span, NormalisationFollowsSquadScript) {
  EXPECT_EQ(normalize_answer("The  Eiffel Tower!"), "eiffel tower");
  EXPECT_EQ(normalize_answer("an apple, a pear and the banana."), "apple pear and banana");
  EXPECT_EQ(normalize_answer("Theatre anathema"), "theatre anathema");  // not whole words
  EXPECT_EQ(normalize_answer("Ärger ÜBER a-b"), "ärger über ab");      // '-' removed, then "ab"
  EXPECT_EQ(normalize_answer("a"), "");
}

TEST(Span, ExactMatchAndF1) {
  EXPECT_EQ(span_exact_match("the Denver Broncos", {"Denver Broncos", "Broncos"}), 1.0);
  EXPECT_EQ(span_exact_match("Denver", {"Denver Broncos"}), 0.0);
  // pred "denver broncos won" vs gold "broncos": same 1, P 1/3, R 1 -> F1 0.5;
  // vs gold "denver broncos": same 2, P 2/3, R 1 -> F1 0.8 (the maximum)
  EXPECT_DOUBLE_EQ(span_f1("Denver Broncos won", {"Broncos", "Denver Broncos"}), 0.8);
  // repeated tokens are clipped: pred "a b b" (articles gone: "b b") vs "b c": same 1 -> P 1/2 R 1/2
  EXPECT_DOUBLE_EQ(span_f1("x b b", {"b c"}), 1.0 / 3.0 * 2 * 0.5 / (1.0 / 3.0 + 0.5));
  EXPECT_EQ(span_f1("the", {""}), 1.0);  // both normalise to nothing (no-answer)
  EXPECT_EQ(span_f1("cat", {""}), 0.0);
  auto s = span_scores({"Denver Broncos", "Paris"}, {{"Denver Broncos"}, {"London"}});
  EXPECT_DOUBLE_EQ(s.exact_match, 50.0);
  EXPECT_DOUBLE_EQ(s.f1, 50.0);
}

// Worked cases of the SQuAD v1.1 evaluation script (evaluate-v1.1.py: lower, drop
// string.punctuation, \b(a|an|the)\b -> ' ', split; F1 over the Counter intersection), each
// value computed by hand from those definitions.
TEST(Span, SquadScriptWorkedCases) {
  EXPECT_EQ(normalize_answer("Saint-Denis"), "saintdenis");                // '-' removed inside a word
  EXPECT_EQ(normalize_answer("\u201cquoted\u201d text"), "\u201cquoted\u201d text");  // only ASCII punctuation goes
  EXPECT_EQ(normalize_answer("a theory of the mind"), "theory of mind");
  EXPECT_EQ(normalize_answer("The Beatles' album"), "beatles album");
  EXPECT_EQ(normalize_answer("theatrical   A.B.C."), "theatrical abc");
  // pred {cat sat on mat}, gold {cat on mat}: same 3, P 3/4, R 1 -> 6/7
  EXPECT_DOUBLE_EQ(span_f1("the cat sat on the mat", {"cat on mat"}), 6.0 / 7.0);
  // pred {broncos x2}, gold {denver broncos}: the intersection counts broncos once -> P 1/2 R 1/2
  EXPECT_DOUBLE_EQ(span_f1("Broncos Broncos", {"Denver Broncos"}), 0.5);
  EXPECT_DOUBLE_EQ(span_f1("1.2.3", {"123"}), 1.0);  // punctuation removed before splitting
  // pred {in 1985}, gold {1985 in paris}: same 2, P 1, R 2/3 -> 0.8
  EXPECT_DOUBLE_EQ(span_f1("in 1985", {"1985, in Paris"}), 0.8);
  EXPECT_EQ(span_exact_match("Saint Denis", {"Saint-Denis"}), 0.0);  // "saint denis" != "saintdenis"
}

TEST(Ner, EntitiesFollowSeqevalChunking) {
  // B-PER I-PER O B-LOC I-LOC I-ORG : PER[0,2) LOC[3,5) ORG[5,6) (type change starts an entity)
  auto e = bio_entities({"B-PER", "I-PER", "O", "B-LOC", "I-LOC", "I-ORG"});
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0], (Entity{"PER", 0, 2}));
  EXPECT_EQ(e[1], (Entity{"LOC", 3, 5}));
  EXPECT_EQ(e[2], (Entity{"ORG", 5, 6}));
  // an I- after O starts an entity (conlleval); B- after B- splits
  auto f = bio_entities({"O", "I-MISC", "I-MISC", "B-MISC", "B-MISC"});
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0], (Entity{"MISC", 1, 3}));
  EXPECT_EQ(f[2], (Entity{"MISC", 4, 5}));
  // IOBES: S- is a single-token entity, E- closes
  auto g = bio_entities({"S-PER", "B-LOC", "E-LOC", "O"});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[1], (Entity{"LOC", 1, 3}));
}

TEST(Ner, EntityF1) {
  // sentence 1 gold PER[0,2) LOC[3,4); pred PER[0,2) LOC[3,5)  -> 1 correct of 2 pred, 2 gold
  // sentence 2 gold ORG[0,1);        pred ORG[0,1) PER[2,3)   -> 1 correct of 2 pred, 1 gold
  // micro: P 2/4, R 2/3, F1 = 2*(1/2)(2/3)/(7/6) = 4/7
  std::vector<std::vector<std::string>> gold = {{"B-PER", "I-PER", "O", "B-LOC", "O"},
                                                {"B-ORG", "O", "O"}};
  std::vector<std::vector<std::string>> pred = {{"B-PER", "I-PER", "O", "B-LOC", "I-LOC"},
                                                {"B-ORG", "O", "B-PER"}};
  auto s = ner_scores(pred, gold);
  EXPECT_EQ(s.n_pred, 4);
  EXPECT_EQ(s.n_gold, 3);
  EXPECT_EQ(s.n_correct, 2);
  EXPECT_DOUBLE_EQ(s.precision, 0.5);
  EXPECT_DOUBLE_EQ(s.recall, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(s.f1, 4.0 / 7.0);
  EXPECT_DOUBLE_EQ(s.per_type["PER"].precision, 0.5);  // 1 of 2 predicted PER correct
  EXPECT_DOUBLE_EQ(s.per_type["PER"].recall, 1.0);
  EXPECT_EQ(s.per_type["LOC"].f1, 0.0);
  EXPECT_THROW(ner_scores({{"O"}}, {{"O", "O"}}), qkv::Error);
}

TEST(Unicode, LowerSplitAndDecode) {
  using qkv::utf8::from_u32;
  auto dec = [](const std::string& s) { return qkv::utf8::to_u32_strict(s, "test"); };
  // Python: "ÄÖÜ ẞ İ ǅ ΣΑ ΟΔΟΣ".lower() == "äöü ß i̇ ǆ σα οδος" (Final_Sigma: the last Σ of a word is ς)
  EXPECT_EQ(from_u32(qkv::unicode::lower(dec("ÄÖÜ ẞ İ ǅ ΣΑ ΟΔΟΣ"))), "äöü ß i\u0307 ǆ σα οδος");
  auto w = qkv::unicode::split_ws(dec("a\u00a0b\u3000c\x1f" "d  e\u200b"));
  ASSERT_EQ(w.size(), 5u);  // U+200B (zero width space) is not whitespace for Python
  EXPECT_EQ(from_u32(w[4]), "e\u200b");
  EXPECT_THROW(dec("\xc0\xaf"), qkv::Error);      // overlong
  EXPECT_THROW(dec("\xed\xa0\x80"), qkv::Error);  // surrogate
  EXPECT_THROW(dec("abc\xe2\x82"), qkv::Error);   // truncated
}

// Lower-cased BLEU and chrF on Greek, where Python's str.lower() (sacreBLEU's) writes a word's last
// capital sigma as final ς: hypotheses in lower case against upper-case references, scored by the
// independent Python reference (tools/eval/sacrebleu_ref.py) and by qkv. Without the Final_Sigma
// rule qkv lowered "ΟΔΟΣ" to "οδοσ", which does not match the hypothesis's "οδος".
TEST(Unicode, LowercasedBleuAndChrfOnGreekEqualSacreBleu) {
  const std::vector<std::string> hyps = {"ο δρόμος είναι μακρύς", "ο σίσυφος σπρώχνει την πέτρα",
                                         "οι άνθρωποι της πόλης"};
  const std::vector<std::string> refs = {"Ο ΔΡΌΜΟΣ ΕΊΝΑΙ ΜΑΚΡΎΣ", "Ο ΣΊΣΥΦΟΣ ΣΠΡΏΧΝΕΙ ΤΗΝ ΠΈΤΡΑ",
                                         "ΟΙ ΆΝΘΡΩΠΟΙ ΤΗΣ ΠΌΛΗΣ"};
  const std::string dir = ::testing::TempDir() + "/qkv_greek_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  nlohmann::json j = {{"hyps", hyps}, {"refs", refs}};
  qkv::write_file_atomic(dir + "/in.json", j.dump());
  const std::string cmd = "/usr/bin/python3 -c " + std::string("'import json, sys; sys.path.insert(0, \"") +
                          QKV_SOURCE_DIR + "/tools/eval\"); import sacrebleu_ref as r; d = json.load(open(sys.argv[1])); "
                          "print(r.corpus_bleu(d[\"hyps\"], [d[\"refs\"]], lowercase=True)[\"score\"]); "
                          "print(r.corpus_chrf(d[\"hyps\"], [d[\"refs\"]], lowercase=True)[\"score\"])' " +
                          dir + "/in.json > " + dir + "/out.txt";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  double want_bleu = 0, want_chrf = 0;
  ASSERT_EQ(std::sscanf(qkv::read_file(dir + "/out.txt").c_str(), "%lf %lf", &want_bleu, &want_chrf), 2);
  EXPECT_GT(want_bleu, 99.0);  // lower-cased, the hypotheses are the references
  BleuOptions bo;
  bo.lowercase = true;
  ChrfOptions co;
  co.lowercase = true;
  const std::vector<std::vector<std::string>> streams = {refs};
  EXPECT_NEAR(corpus_bleu(hyps, streams, bo).score, want_bleu, 1e-9);
  EXPECT_NEAR(corpus_chrf(hyps, streams, co).score, want_chrf, 1e-9);
}
