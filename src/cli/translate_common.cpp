#include "translate_common.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "qkv/train/seq2seq_data.h"

namespace qkv::cli {

train::SeqIds special_ids(const io::Seq2SeqBundle& b) {
  const auto& m = b.config.at("model");
  return {m.value("pad_id", int64_t(0)), m.value("bos_id", int64_t(1)), m.value("eos_id", int64_t(2))};
}

TranslateResult translate_lines(io::Seq2SeqBundle& b, const std::vector<std::string>& lines,
                                const TranslateRequest& req) {
  QKV_CHECK(req.batch_size >= 1, "translate", "batch size must be >= 1, got ", req.batch_size);
  train::SeqIds ids = special_ids(b);
  TranslateResult r;
  int64_t n = int64_t(lines.size());
  r.src_ids.resize(size_t(n));
  r.text.resize(size_t(n));
  r.hyps.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    bool cut = false;
    r.src_ids[size_t(i)] = train::encode_sentence(*b.src_tok, lines[size_t(i)], ids.eos, b.model->max_len(), &cut);
    if (cut) {
      QKV_CHECK(!req.refuse_long, "translate", "line ", i + 1, " has more than ", b.model->max_len() - 1,
                " source tokens (the model's maximum); shorten it or drop --on-long refuse to truncate");
      ++r.truncated;
      if (!req.quiet)
        std::fprintf(stderr, "qkv translate: warning: line %lld truncated to %lld tokens (model maximum)\n",
                     (long long)(i + 1), (long long)(b.model->max_len() - 1));
    }
  }
  // Longest first: similar lengths share a batch (little padding), and the slowest run early.
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t c) {
    return r.src_ids[size_t(a)].size() > r.src_ids[size_t(c)].size();
  });
  for (int64_t start = 0; start < n; start += req.batch_size) {
    int64_t end = std::min(n, start + req.batch_size);
    std::vector<const std::vector<int64_t>*> rows;
    for (int64_t k = start; k < end; ++k) rows.push_back(&r.src_ids[size_t(order[size_t(k)])]);
    Tensor src, pad;
    train::make_source_batch(rows, ids.pad, src, pad);
    auto out = decode::translate(*b.model, src, pad, {ids.bos, ids.eos}, req.options);
    for (int64_t k = start; k < end; ++k) {
      int64_t line = order[size_t(k)];
      auto& h = out[size_t(k - start)];
      std::vector<int32_t> toks;
      for (int64_t t : h.front().tokens)
        if (t != ids.eos) toks.push_back(int32_t(t));
      r.text[size_t(line)] = b.tgt_tok->decode(toks);
      r.hyps[size_t(line)] = std::move(h);
    }
  }
  return r;
}

}  // namespace qkv::cli
