// Translator::score: forced decoding of given translations (tasks/translator.h). One teacher-forced
// forward pass per batch of pairs, the log-softmax of every target position read at its token.
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <string>
#include <tuple>

#include "qkv/autograd/node.h"
#include "qkv/nn/module.h"
#include "qkv/ops/loss.h"
#include "qkv/tasks/translator.h"
#include "qkv/text/placeholders.h"
#include "qkv/text/tokenizer.h"

namespace qkv::tasks {

std::pair<std::vector<int64_t>, std::vector<int64_t>> Translator::encode_pair(std::string_view source,
                                                                              std::string_view target,
                                                                              int64_t max_len, bool* cut_source,
                                                                              bool* cut_target) const {
  std::pair<std::string, std::string> prot;
  if (bundle_.protect_spans) {  // as training saw its pairs (tasks/translation_setup.h, protect_pairs)
    prot = text::protect_pair(source, target);
    source = prot.first;
    target = prot.second;
  }
  return {train::encode_sentence(*bundle_.src_tok, source, ids_.eos, max_len, cut_source),
          train::encode_sentence(*bundle_.tgt_tok, target, ids_.eos, max_len, cut_target)};
}

std::pair<std::vector<int64_t>, std::vector<int64_t>> Translator::pair_ids(std::string_view source,
                                                                           std::string_view target) const {
  check_tokenizers("Translator::pair_ids");
  return encode_pair(source, target, 0, nullptr, nullptr);
}

std::pair<bool, bool> Translator::pair_too_long(std::string_view source, std::string_view target) const {
  check_tokenizers("Translator::pair_too_long");
  std::pair<bool, bool> cut{false, false};
  encode_pair(source, target, bundle_.model->max_len(), &cut.first, &cut.second);
  return cut;
}

Scores Translator::score(const std::vector<std::string>& sources, const std::vector<std::string>& targets,
                         const ScoreOptions& opt) const {
  check_tokenizers("score");
  QKV_CHECK(sources.size() == targets.size(), "score", sources.size(), " sources but ", targets.size(), " targets");
  const int64_t max_len = bundle_.model->max_len();
  Scores r;
  std::vector<std::vector<int64_t>> src_ids(sources.size()), tgt_ids(targets.size());
  std::vector<size_t> cut;  // pairs truncated
  for (size_t i = 0; i < sources.size(); ++i) {
    bool cut_src = false, cut_tgt = false;
    std::tie(src_ids[i], tgt_ids[i]) = encode_pair(sources[i], targets[i], max_len, &cut_src, &cut_tgt);
    if (!cut_src && !cut_tgt) continue;
    QKV_CHECK(!opt.refuse_long, "score", "pair ", i + 1, ": the ", cut_src ? "source" : "target", " has more than ",
              max_len - 1, " tokens (the model's maximum); shorten it or allow truncation");
    cut.push_back(i);
    if (!opt.quiet)
      std::fprintf(stderr, "qkv score: warning: pair %zu truncated to %lld tokens a side (model maximum)\n", i + 1,
                   (long long)(max_len - 1));
  }
  r.pairs = score_ids(src_ids, tgt_ids, opt);
  for (size_t i : cut) r.pairs[i].truncated = true;
  r.truncated = int64_t(cut.size());
  return r;
}

std::vector<PairScore> Translator::score_ids(const std::vector<std::vector<int64_t>>& src_ids,
                                             const std::vector<std::vector<int64_t>>& tgt_ids,
                                             const ScoreOptions& opt) const {
  QKV_CHECK(opt.batch_size >= 1, "score", "batch size must be >= 1, got ", opt.batch_size);
  QKV_CHECK(src_ids.size() == tgt_ids.size(), "score", src_ids.size(), " sources but ", tgt_ids.size(), " targets");
  models::Seq2Seq& model = *bundle_.model;
  const int64_t n = int64_t(src_ids.size());
  std::vector<train::Example> pairs(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    pairs[size_t(i)] = {src_ids[size_t(i)], tgt_ids[size_t(i)]};
    for (const auto& [ids, side, vocab] : {std::tuple{&src_ids[size_t(i)], "source", model.src_vocab()},
                                           std::tuple{&tgt_ids[size_t(i)], "target", model.tgt_vocab()}}) {
      QKV_CHECK(!ids->empty() && int64_t(ids->size()) <= model.max_len(), "score", "pair ", i + 1, ": the ", side,
                " has ", ids->size(), " tokens, expected 1 to ", model.max_len(), " (the model's maximum)");
      for (int64_t t : *ids)
        QKV_CHECK(t >= 0 && t < vocab, "score", "pair ", i + 1, ": ", side, " token id ", t, " is outside the ", side,
                  " vocabulary [0, ", vocab, ")");
    }
  }
  kernels::check_task_precision(opt.precision, "score");
  const kernels::MatmulPrecisionScope precision(opt.precision);
  const nn::EvalScope eval_mode(model);
  NoGradGuard no_grad;
  // Longest first in batches of similar length (little padding); results in input order.
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  const auto size_of = [&](int64_t i) { return pairs[size_t(i)].src.size() + pairs[size_t(i)].tgt.size(); };
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return size_of(a) > size_of(b); });
  std::vector<PairScore> out(static_cast<size_t>(n));
  for (int64_t start = 0; start < n; start += opt.batch_size) {
    const int64_t end = std::min(n, start + opt.batch_size);
    std::vector<const train::Example*> rows;
    for (int64_t k = start; k < end; ++k) rows.push_back(&pairs[size_t(order[size_t(k)])]);
    const train::Seq2SeqBatch b = train::make_batch(rows, ids_);
    // -log p of each target position (B, T); padding positions are the pad id, and only a row's
    // own positions are read below.
    const Tensor nll = cross_entropy(model.forward(b.src, b.src_pad, b.tgt_in), b.tgt_out, -100, 0.0,
                                     Reduction::none).contiguous();
    const int64_t T = nll.size(1);
    const float* v = nll.data<float>();
    for (int64_t k = start; k < end; ++k) {
      PairScore& s = out[size_t(order[size_t(k)])];
      const int64_t row = k - start;
      s.tokens = int64_t(rows[size_t(row)]->tgt.size());
      for (int64_t t = 0; t < s.tokens; ++t) {
        const double lp = -double(v[row * T + t]);
        s.logprob += lp;
        if (opt.token_logprobs) s.token_logprobs.push_back(lp);
      }
    }
  }
  return out;
}

}  // namespace qkv::tasks
