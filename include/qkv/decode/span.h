// qkv/decode/span.h - extractive QA's span search: the best answers over the windows of one
// context (Devlin et al. 2019, 4.2; Hugging Face's postprocess_qa_predictions).
//
// A span (window w, start s, end e) is valid when s and e are context positions (ctx_begin >= 0:
// never the question, [CLS], [SEP] or padding), s <= e and e - s + 1 <= max_answer_length; its
// score is start_logit[s] + end_logit[e] and its answer the context bytes
// [ctx_begin[s], ctx_end[e]). Candidates from every window are pooled; one answer (the same
// bytes, from overlapping windows) keeps its best score. Ties go to the lower (window, s, e).
//
// top_k = 0 searches every valid pair (O(T * max_answer_length) per window): the exact n best.
// top_k > 0 is Hugging Face's heuristic: only the top_k starts and top_k ends of each window
// (by logit, over every position) are paired, which can miss the best valid span when those
// positions are all outside the context.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace qkv::decode {

struct SpanWindow {
  std::span<const float> start_logits, end_logits;  // (T)
  std::span<const int64_t> ctx_begin, ctx_end;      // (T): context bytes, -1 outside the context
};

struct SpanSearchOptions {
  int64_t max_answer_length = 30;  // tokens
  int64_t n_best = 1;
  int64_t top_k = 0;  // 0 = every start and end
};

struct SpanCandidate {
  int64_t window = 0, start = 0, end = 0;  // positions in the window
  int64_t begin = 0, stop = 0;             // the answer's context bytes [begin, stop)
  double score = 0;                        // start logit + end logit
};

// Best first, at most n_best; empty when no window has a context position.
std::vector<SpanCandidate> best_spans(const std::vector<SpanWindow>& windows, const SpanSearchOptions& opt);

}  // namespace qkv::decode
