// qkv/eval/classification.h - accuracy, per-class precision/recall/F1 with micro and macro
// averages (scikit-learn's definitions: a 0/0 ratio counts as 0; macro = unweighted mean over the
// labels present in gold or predictions), and perplexity from the mean negative log-likelihood.
#pragma once
#include <cstdint>
#include <vector>

namespace qkv::eval {

struct Prf {
  double precision = 0, recall = 0, f1 = 0;
  int64_t support = 0;  // gold examples of the class (micro/macro: all gold examples)
};

struct ClassificationReport {
  double accuracy = 0;
  std::vector<Prf> per_class;  // indexed by label 0..num_classes-1
  Prf micro, macro;
};

// Labels in [0, num_classes); lengths must match and be non-zero (qkv::Error otherwise).
double accuracy(const std::vector<int>& pred, const std::vector<int>& gold);
ClassificationReport classification_report(const std::vector<int>& pred,
                                           const std::vector<int>& gold, int num_classes);

// exp(mean NLL in nats); the second form takes a summed NLL and the number of predicted tokens.
double perplexity(double mean_nll);
double perplexity(double total_nll, int64_t n_tokens);

}  // namespace qkv::eval
