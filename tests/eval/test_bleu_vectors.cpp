// C++ BLEU / chrF / 13a == the independent Python reference (tools/eval/sacrebleu_ref.py) on
// real prose from /usr/share/common-licenses and synthetic edge cases (tools/eval/make_vectors.py).
// Tolerance: scores are f64 computed with the same operations in the same order, so they must
// agree to rtol 1e-12 (allowing only libm last-bit differences); counts are exact.
#include <gtest/gtest.h>

#include <cmath>

#include "qkv/eval/bleu.h"
#include "qkv/eval/chrf.h"
#include "vectors.h"

using namespace qkv::eval;
using nlohmann::json;

namespace {

constexpr double kRtol = 1e-12;

void expect_close(double a, double b, const std::string& what) {
  EXPECT_LE(std::fabs(a - b), kRtol * std::max(1.0, std::fabs(b))) << what << ": " << a << " vs " << b;
}

std::vector<std::vector<std::string>> streams(const json& c) {
  return c["refs"].get<std::vector<std::vector<std::string>>>();
}

BleuOptions bleu_opts(const json& o) {
  BleuOptions b;
  b.lowercase = o.value("lowercase", false);
  b.tokenize = o.value("tokenize", std::string("13a"));
  b.effective_order = o.value("effective_order", false);
  const std::string s = o.value("smooth", std::string("exp"));
  b.smooth = s == "none" ? BleuSmooth::None : s == "floor" ? BleuSmooth::Floor
           : s == "add-k" ? BleuSmooth::AddK : BleuSmooth::Exp;
  if (o.contains("smooth_value")) b.smooth_value = o["smooth_value"].get<double>();
  return b;
}

ChrfOptions chrf_opts(const json& o) {
  ChrfOptions c;
  c.word_order = o.value("word_order", 0);
  c.beta = o.value("beta", 2);
  c.lowercase = o.value("lowercase", false);
  c.whitespace = o.value("whitespace", false);
  c.eps_smoothing = o.value("eps_smoothing", false);
  return c;
}

}  // namespace

TEST(BleuVectors, CorpusBleuEqualsPythonReference) {
  const auto& v = qkv::testing::eval_vectors();
  ASSERT_TRUE(v.contains("cases"));
  int checked = 0;
  for (const auto& c : v["cases"]) {
    const auto hyps = c["hyps"].get<std::vector<std::string>>();
    for (const auto& e : c["bleu"]) {
      const std::string what = c["name"].get<std::string>() + " " + e["opts"].dump();
      BleuScore s = corpus_bleu(hyps, streams(c), bleu_opts(e["opts"]));
      expect_close(s.score, e["score"].get<double>(), what + " score");
      expect_close(s.bp, e["bp"].get<double>(), what + " bp");
      EXPECT_EQ(s.hyp_len, e["sys_len"].get<int64_t>()) << what;
      EXPECT_EQ(s.ref_len, e["ref_len"].get<int64_t>()) << what;
      EXPECT_EQ(s.nrefs, e["nrefs"].get<std::string>()) << what;
      for (int n = 0; n < 4; ++n) {
        EXPECT_EQ(s.counts[n], e["counts"][n].get<double>()) << what << " order " << n + 1;
        EXPECT_EQ(s.totals[n], e["totals"][n].get<double>()) << what << " order " << n + 1;
        expect_close(s.precisions[n], e["precisions"][n].get<double>(), what + " precision");
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 400);
}

TEST(BleuVectors, ChrfEqualsPythonReference) {
  const auto& v = qkv::testing::eval_vectors();
  ASSERT_TRUE(v.contains("cases"));
  int checked = 0;
  for (const auto& c : v["cases"]) {
    const auto hyps = c["hyps"].get<std::vector<std::string>>();
    for (const auto& e : c["chrf"]) {
      const std::string what = c["name"].get<std::string>() + " " + e["opts"].dump();
      ChrfScore s = corpus_chrf(hyps, streams(c), chrf_opts(e["opts"]));
      expect_close(s.score, e["score"].get<double>(), what);
      EXPECT_EQ(s.stats, e["stats"].get<std::vector<int64_t>>()) << what;
      ++checked;
    }
  }
  EXPECT_GT(checked, 300);
}

TEST(BleuVectors, Tokenize13aEqualsPythonReference) {
  const auto& v = qkv::testing::eval_vectors();
  ASSERT_TRUE(v.contains("tokenize_13a"));
  for (const auto& t : v["tokenize_13a"])
    EXPECT_EQ(tokenize_13a(t["line"].get<std::string>()), t["tokens"].get<std::string>())
        << "line: " << t["line"];
  EXPECT_GT(v["tokenize_13a"].size(), 400u);
}
