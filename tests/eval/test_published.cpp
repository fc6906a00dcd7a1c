// BLEU and chrF against values published outside qkv:
//  - Papineni et al. 2002, "BLEU: a Method for Automatic Evaluation of Machine Translation",
//    Section 2.1: modified n-gram precisions of its worked examples (17/18, 10/17, 8/14, 1/13, 2/7).
//  - sacreBLEU's own test suite (github.com/mjpost/sacrebleu, test/test_bleu.py,
//    test/test_sentence_bleu.py, test/test_chrf.py): expected scores, with that file's tolerance;
//    and its README's API example (BLEU line and chrF2 = 59.73).
#include <gtest/gtest.h>

#include <cstdio>

#include "qkv/eval/bleu.h"
#include "qkv/eval/chrf.h"
#include "qkv/util/error.h"

using namespace qkv::eval;

namespace {
std::vector<std::vector<std::string>> one_ref(const std::vector<std::string>& r) { return {r}; }

BleuOptions opts(BleuSmooth s, double v = -1, bool eff = false, const char* tok = "13a") {
  BleuOptions o;
  o.smooth = s;
  o.smooth_value = v;
  o.effective_order = eff;
  o.tokenize = tok;
  return o;
}
}  // namespace

TEST(BleuPaper, ModifiedPrecisionsOfWorkedExamples) {
  const std::vector<std::vector<std::string>> refs = {
      {"It is a guide to action that ensures that the military will forever heed Party commands"},
      {"It is the guiding principle which guarantees the military forces always being under the "
       "command of the Party"},
      {"It is the practical guide for the army always to heed the directions of the party"}};
  const auto o = opts(BleuSmooth::Exp, -1, false, "none");
  BleuScore c1 = corpus_bleu({"It is a guide to action which ensures that the military always "
                              "obeys the commands of the party"}, refs, o);
  EXPECT_EQ(c1.counts[0], 17);
  EXPECT_EQ(c1.totals[0], 18);
  EXPECT_EQ(c1.counts[1], 10);
  EXPECT_EQ(c1.totals[1], 17);
  BleuScore c2 = corpus_bleu(
      {"It is to insure the troops forever hearing the activity guidebook that party direct"}, refs, o);
  EXPECT_EQ(c2.counts[0], 8);
  EXPECT_EQ(c2.totals[0], 14);
  EXPECT_EQ(c2.counts[1], 1);
  EXPECT_EQ(c2.totals[1], 13);
  BleuOptions lc = o;
  lc.lowercase = true;  // the paper matches "The" with "the"
  BleuScore c3 = corpus_bleu({"the the the the the the the"},
                             {{"The cat is on the mat."}, {"There is a cat on the mat."}}, lc);
  EXPECT_EQ(c3.counts[0], 2);
  EXPECT_EQ(c3.totals[0], 7);
}

// test/test_bleu.py (EPSILON = 1e-8 there).
TEST(SacreBleuSuite, CorpusBleu) {
  const std::vector<std::vector<std::string>> refs = {
      {"The dog bit the man.", "It was not unexpected.", "The man bit him first."},
      {"The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."}};
  const std::vector<std::string> hyps = {"The dog bit the man.", "It wasn't surprising.",
                                         "The man had just bitten him."};
  BleuScore def = corpus_bleu(hyps, refs);
  EXPECT_NEAR(def.score, 48.530827, 1e-6);  // 7 significant digits published
  EXPECT_EQ(def.signature, std::string("nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:") +
                               kSacreBleuCompat);
  // sacreBLEU README ("Using the API"): the printed line and chrF of the same example
  EXPECT_EQ(def.verbose(), "82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)");
  EXPECT_EQ(corpus_chrf(hyps, refs).format(), std::string("chrF2|nrefs:2|case:mixed|eff:yes|nc:6|nw:0|"
                                                          "space:no|version:") + kSacreBleuCompat + " = 59.73");
  EXPECT_NEAR(corpus_bleu(hyps, refs, opts(BleuSmooth::None)).score, 48.530827, 1e-6);
  EXPECT_NEAR(corpus_bleu(hyps, refs, opts(BleuSmooth::Exp, -1, false, "none")).score,
              49.1919566, 1e-7);
  EXPECT_EQ(corpus_bleu({"", "", ""}, refs).score, 0.0);
  // test_max_ngram_order: formatted with 2 decimals
  const char* by_order[] = {"77.65", "60.50", "53.93", "48.53", "46.14", "43.28"};
  for (int n = 1; n <= 6; ++n) {
    BleuOptions o;
    o.max_order = n;
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", corpus_bleu(hyps, refs, o).score);
    EXPECT_EQ(std::string(buf), by_order[n - 1]) << "max order " << n;
  }
}

TEST(SacreBleuSuite, StatisticsScoringEffectiveOrder) {
  BleuScore st = corpus_bleu({"am I am a character sequence"},
                             one_ref({"I am a symbol string sequence a a"}));
  EXPECT_EQ(st.counts, (std::vector<double>{4, 2, 1, 0}));
  EXPECT_EQ(st.totals, (std::vector<double>{6, 5, 4, 3}));
  // compute_bleu's own default smoothing is 'none'
  EXPECT_NEAR(compute_bleu({9, 7, 5, 3}, {10, 8, 6, 4}, 11, 11, opts(BleuSmooth::None)).score / 100,
              0.8375922397, 1e-8);
  // raw_corpus_bleu = floor smoothing 0.01, tokenize none, effective order
  const auto raw = opts(BleuSmooth::Floor, 0.01, true, "none");
  // no match at all: 0 (sacreBLEU 2.x, its issue #141; 1.x gave 0.0037991784)
  EXPECT_EQ(corpus_bleu({"this is a test", "another test"}, one_ref({"ref1", "ref2"}), raw).score, 0.0);
  EXPECT_NEAR(corpus_bleu({"this is a fest"}, one_ref({"this is a test"}), raw).score / 100,
              0.223606797749979, 1e-8);
  EXPECT_NEAR(corpus_bleu({"test"}, one_ref({"a test"}), raw).score / 100, 0.3678794411714425, 1e-8);
  EXPECT_NEAR(corpus_bleu({"a test"}, one_ref({"a test"}), raw).score / 100, 1.0, 1e-8);
  EXPECT_NEAR(corpus_bleu({"a little test"}, one_ref({"a test"}), raw).score / 100,
              0.03218297948685433, 1e-8);
  // offset test: floor 0 -> 0, default floor 0.1 -> 0.1555722182 (tokenize none, eff order)
  EXPECT_NEAR(corpus_bleu({"am I am a character sequence"}, one_ref({"I am a symbol string sequence a a"}),
                          opts(BleuSmooth::Floor, -1, true, "none")).score / 100, 0.1555722182, 1e-8);
  EXPECT_EQ(corpus_bleu({"am I am a character sequence"}, one_ref({"I am a symbol string sequence a a"}),
                        opts(BleuSmooth::Floor, 0.0, true, "none")).score, 0.0);
}

TEST(SacreBleuSuite, DegenerateStatistics) {
  struct C { std::vector<int64_t> c, t; int64_t h, r; double off; };
  for (const C& x : {C{{0, 0, 0, 0}, {4, 4, 2, 1}, 0, 1, 0.0}, C{{0, 0, 0, 0}, {10, 11, 12, 0}, 14, 10, 0.0},
                     C{{0, 0, 0, 0}, {0, 0, 0, 0}, 0, 0, 0.0}, C{{6, 5, 4, 0}, {6, 5, 4, 3}, 6, 6, 0.0},
                     C{{0, 0, 0, 0}, {0, 0, 0, 0}, 0, 0, 0.1}, C{{0, 0, 0, 0}, {0, 0, 0, 0}, 1, 5, 0.01}})
    EXPECT_EQ(compute_bleu(x.c, x.t, x.h, x.r, opts(BleuSmooth::Floor, x.off)).score, 0.0);
}

// test/test_sentence_bleu.py (EPSILON = 1e-3 there): sentence_bleu with effective order.
TEST(SacreBleuSuite, SentenceBleuSmoothing) {
  const std::string ref = "producţia de zahăr brut se exprimă în zahăr alb;";
  const std::string sys = "Producția de zahăr primă va fi exprimată în ceea ce privește zahărul alb;";
  struct C { BleuSmooth s; double v; const char* tok; double expect; };
  for (const C& c : {C{BleuSmooth::Exp, -1, "13a", 8.493}, C{BleuSmooth::None, -1, "13a", 0.0},
                     C{BleuSmooth::Floor, -1, "13a", 4.51688}, C{BleuSmooth::Floor, 0.1, "13a", 4.51688},
                     C{BleuSmooth::Floor, 0.5, "13a", 10.10}, C{BleuSmooth::AddK, -1, "13a", 14.882},
                     C{BleuSmooth::AddK, 1, "13a", 14.882}, C{BleuSmooth::AddK, 2, "13a", 21.389},
                     C{BleuSmooth::Exp, -1, "none", 7.347}})
    EXPECT_NEAR(sentence_bleu(sys, {ref}, opts(c.s, c.v, true, c.tok)).score, c.expect, 1e-3)
        << int(c.s) << " " << c.v << " " << c.tok;
  for (BleuSmooth s : {BleuSmooth::Exp, BleuSmooth::None, BleuSmooth::Floor, BleuSmooth::AddK})
    EXPECT_EQ(sentence_bleu("this is a cat", {"okay thanks"}, opts(s, -1, true)).score, 0.0);
}

// test/test_chrf.py (EPSILON = 1e-4 there).
TEST(SacreBleuSuite, Chrf) {
  ChrfOptions eps;  // beta 3, epsilon smoothing
  eps.beta = 3;
  eps.eps_smoothing = true;
  struct C { std::vector<std::string> h, r; double expect; };
  for (const C& c : {C{{"abcdefg"}, {"hijklmnop"}, 0.0}, C{{"a"}, {"b"}, 0.0}, C{{""}, {"b"}, 0.0},
                     C{{""}, {"ref"}, 0.0}, C{{""}, {"reference"}, 0.0}, C{{"aa"}, {"ab"}, 8.3333},
                     C{{"a", "b"}, {"a", "c"}, 8.3333}, C{{"a"}, {"a"}, 16.6667},
                     C{{"a b c"}, {"a b c"}, 50.0}, C{{"a b c"}, {"abc"}, 50.0},
                     C{{" risk assessment must be made of those who are qualified and expertise in the "
                        "sector - these are the scientists ."},
                       {"risk assessment has to be undertaken by those who are qualified and expert in "
                        "that area - that is the scientists ."}, 63.361730},
                     C{{" Die    Beziehung zwischen  Obama und Netanjahu ist nicht gerade  freundlich. "},
                       {"Das Verhältnis zwischen Obama und Netanyahu ist nicht gerade freundschaftlich."},
                       64.1302698},
                     C{{"Niemand hat die Absicht, eine Mauer zu errichten"},
                       {"Niemand hat die Absicht, eine Mauer zu errichten"}, 100.0}})
    EXPECT_NEAR(corpus_chrf(c.h, {c.r}, eps).score, c.expect, 1e-4) << c.h[0];

  ChrfOptions eff;  // sacreBLEU < 2 effective-order averaging, the default
  eff.beta = 3;
  for (const C& c : {C{{"a"}, {"a"}, 100.0}, C{{""}, {"reference"}, 0.0}, C{{"a b c"}, {"a b c"}, 100.0},
                     C{{"a b c"}, {"abc"}, 100.0}, C{{""}, {"c"}, 0.0}, C{{"a", "b"}, {"a", "c"}, 50.0},
                     C{{"aa"}, {"ab"}, 25.0}})
    EXPECT_NEAR(corpus_chrf(c.h, {c.r}, eff).score, c.expect, 1e-4) << c.h[0];

  ChrfOptions ws = eff;
  ws.whitespace = true;
  EXPECT_NEAR(corpus_chrf({"Die Beziehung zwischen Obama und Netanjahu ist nicht gerade freundlich."},
                          {{"Das Verhältnis zwischen Obama und Netanyahu ist nicht gerade freundschaftlich."}},
                          ws).score, 67.3481606, 1e-4);
  EXPECT_NEAR(corpus_chrf({"risk assessment must be made of those who are qualified and expertise in the "
                           "sector - these are the scientists ."},
                          {{"risk assessment has to be undertaken by those who are qualified and expert in "
                            "that area - that is the scientists ."}}, ws).score, 65.2414427, 1e-4);

  ChrfOptions sent;  // sentence_chrf(eps_smoothing=True), beta 2
  sent.eps_smoothing = true;
  EXPECT_NEAR(sentence_chrf("Co nás nejvíc trápí, protože lékaři si vybírají, kdo bude žít a kdo zemře.",
                            {"Nejvíce smutní jsme z toho, že musíme rozhodovat o tom, kdo bude žít a kdo zemře."},
                            sent).score, 39.14078509, 1e-4);
  EXPECT_NEAR(sentence_chrf("Nebo prostě nemají vybavení, které by jim pomohlo, uvedli lékaři.",
                            {"A někdy nemáme ani potřebný materiál, abychom jim pomohli, popsali lékaři."},
                            sent).score, 31.22557079, 1e-4);
  EXPECT_NEAR(sentence_chrf("Lapali po dechu, jejich životy skončily dřív, než skutečně začaly.",
                            {"Lapali po dechu a pak jejich život skončil - dřív, než skutečně mohl začít, připomněli."},
                            sent).score, 57.15704367, 1e-4);
}

TEST(SacreBleuSuite, SignaturesAndFormat) {
  ChrfScore c = corpus_chrf({"a b"}, {{"a b"}}, ChrfOptions::chrf_plus_plus());
  EXPECT_EQ(c.name, "chrF2++");
  EXPECT_EQ(c.signature, std::string("nrefs:1|case:mixed|eff:yes|nc:6|nw:2|space:no|version:") +
                             kSacreBleuCompat);
  BleuOptions o;
  o.smooth = BleuSmooth::Floor;
  o.lowercase = true;
  BleuScore b = corpus_bleu({"The dog bit the man."}, {{"The dog bit the man."}}, o);
  EXPECT_EQ(b.format(), std::string("BLEU|nrefs:1|case:lc|eff:no|tok:13a|smooth:floor[0.10]|version:") +
                            kSacreBleuCompat + " = 100.00 100.0/100.0/100.0/100.0 (BP = 1.000 ratio = "
                            "1.000 hyp_len = 6 ref_len = 6)");
}

TEST(BleuErrors, BadInputNamesTheProblem) {
  EXPECT_THROW(corpus_bleu({"a", "b"}, {{"a"}}), qkv::Error);
  EXPECT_THROW(corpus_bleu({"a"}, {{""}}), qkv::Error);  // sacreBLEU refuses all-empty references
  EXPECT_THROW(corpus_bleu({"a"}, {}), qkv::Error);
  EXPECT_THROW(corpus_bleu({"\xff"}, {{"a"}}), qkv::Error);
  try {
    corpus_bleu({"a", "b"}, {{"a", "b"}, {"x"}});
    FAIL();
  } catch (const qkv::Error& e) {
    EXPECT_NE(std::string(e.what()).find("reference stream 1 has 1 lines, expected 2"), std::string::npos)
        << e.what();
  }
}
