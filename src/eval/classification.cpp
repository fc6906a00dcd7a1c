// Accuracy, precision/recall/F1 (micro, macro), perplexity.
#include "qkv/eval/classification.h"

#include <cmath>

#include "qkv/util/error.h"

namespace qkv::eval {
namespace {

void check_pair(const char* op, const std::vector<int>& pred, const std::vector<int>& gold) {
  QKV_CHECK(pred.size() == gold.size(), op, "predictions and gold labels differ in length: ",
            pred.size(), " vs ", gold.size());
  QKV_CHECK(!gold.empty(), op, "expected at least one example, got none");
}

double ratio(int64_t a, int64_t b) { return b > 0 ? double(a) / double(b) : 0.0; }

Prf prf(int64_t tp, int64_t fp, int64_t fn) {
  Prf r;
  r.precision = ratio(tp, tp + fp);
  r.recall = ratio(tp, tp + fn);
  const double d = r.precision + r.recall;
  r.f1 = d > 0 ? 2 * r.precision * r.recall / d : 0.0;
  r.support = tp + fn;
  return r;
}

}  // namespace

double accuracy(const std::vector<int>& pred, const std::vector<int>& gold) {
  check_pair("accuracy", pred, gold);
  int64_t hit = 0;
  for (size_t i = 0; i < gold.size(); ++i) hit += pred[i] == gold[i];
  return double(hit) / double(gold.size());
}

ClassificationReport classification_report(const std::vector<int>& pred,
                                           const std::vector<int>& gold, int num_classes) {
  check_pair("classification_report", pred, gold);
  QKV_CHECK(num_classes > 0, "classification_report", "num_classes must be > 0, got ",
            num_classes);
  std::vector<int64_t> tp(num_classes, 0), fp(num_classes, 0), fn(num_classes, 0);
  for (size_t i = 0; i < gold.size(); ++i) {
    const int p = pred[i], g = gold[i];
    QKV_CHECK(p >= 0 && p < num_classes && g >= 0 && g < num_classes, "classification_report",
              "labels must be in [0, ", num_classes, "), got prediction ", p, " and gold ", g,
              " at index ", i);
    if (p == g) {
      ++tp[g];
    } else {
      ++fp[p];
      ++fn[g];
    }
  }
  ClassificationReport r;
  r.accuracy = accuracy(pred, gold);
  int64_t TP = 0, FP = 0, FN = 0;
  int present = 0;
  for (int c = 0; c < num_classes; ++c) {
    r.per_class.push_back(prf(tp[c], fp[c], fn[c]));
    TP += tp[c], FP += fp[c], FN += fn[c];
    if (tp[c] + fp[c] + fn[c] > 0) {  // label occurs in gold or predictions
      ++present;
      r.macro.precision += r.per_class[c].precision;
      r.macro.recall += r.per_class[c].recall;
      r.macro.f1 += r.per_class[c].f1;
    }
  }
  r.macro.precision /= present;
  r.macro.recall /= present;
  r.macro.f1 /= present;  // mean of per-class F1, not F1 of the mean P and R
  r.macro.support = int64_t(gold.size());
  r.micro = prf(TP, FP, FN);
  return r;
}

double perplexity(double mean_nll) {
  QKV_CHECK(std::isfinite(mean_nll) && mean_nll >= 0, "perplexity",
            "expected a finite non-negative mean NLL, got ", mean_nll);
  return std::exp(mean_nll);
}

double perplexity(double total_nll, int64_t n_tokens) {
  QKV_CHECK(n_tokens > 0, "perplexity", "expected n_tokens > 0, got ", n_tokens);
  return perplexity(total_nll / double(n_tokens));
}

}  // namespace qkv::eval
