// qkv/eval/span.h - extractive QA scores with the SQuAD evaluation script's definitions:
// answers are normalised (lowercase, ASCII punctuation removed, the articles a/an/the removed,
// whitespace collapsed); exact match and token F1 take the best over the gold answers.
#pragma once
#include <string>
#include <vector>

namespace qkv::eval {

std::string normalize_answer(const std::string& s);
double span_exact_match(const std::string& pred, const std::vector<std::string>& golds);  // 0/1
double span_f1(const std::string& pred, const std::vector<std::string>& golds);           // 0..1

struct SpanScores {
  double exact_match = 0, f1 = 0;  // corpus means, 0..100 like the SQuAD script
};
SpanScores span_scores(const std::vector<std::string>& preds,
                       const std::vector<std::vector<std::string>>& golds);

}  // namespace qkv::eval
