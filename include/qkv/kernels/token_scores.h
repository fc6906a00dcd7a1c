// qkv/kernels/token_scores.h - what decoding reads off one row of f32 logits (V): its logsumexp,
// its most probable token, and its m best tokens, all on the log-softmax values row[v] - lse
// exactly as these functions round them, so greedy search and beam search choose from the same
// numbers. lse uses f32 exps (vexp) summed in blocks of 256 in f32 lanes, the block sums in
// double: fixed order, so the same bits for any thread count.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace qkv::kernels {

// log sum_v exp(row[v]); -inf for an all -inf row. `max_out`, if given, receives max_v row[v].
float row_logsumexp(const float* row, int64_t V, float* max_out = nullptr);
// The first maximum of row[v] - lse: its token and log-probability (token 0 if no logit is finite).
// `banned` (sorted token ids, or null/empty): tokens that may not be chosen; lse stays the whole
// row's, so the log-probabilities are those of the model (fairseq's no-repeat-n-gram blocking).
void best_token(const float* row, int64_t V, int64_t& tok, double& lp, const std::vector<int64_t>* banned = nullptr);
// The m largest row[v] - lse, best first, ties towards the lower token id: (log-prob, token);
// `banned` as for best_token.
void top_tokens(const float* row, int64_t V, size_t m, std::vector<std::pair<float, int64_t>>& top,
                const std::vector<int64_t>* banned = nullptr);

}  // namespace qkv::kernels
