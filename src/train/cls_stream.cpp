#include "qkv/train/cls_stream.h"

#include <algorithm>

namespace qkv::train {

ClsTokens ClsTokens::of(const text::Tokenizer& tok) {
  auto delim = tok.special_id(text::Role::Delim);
  return {tok.require_special_id(text::Role::Start), delim ? int64_t(*delim) : -1,
          tok.require_special_id(text::Role::Extract)};
}

std::vector<int64_t> encode_cls_input(const text::Tokenizer& tok, const ClsTokens& t, std::string_view a,
                                      const std::string_view* b, int64_t max_len, bool* truncated) {
  QKV_CHECK(!b || t.delim >= 0, "classification input", "a pair needs the tokenizer's [DELIM] token (role delim)");
  std::vector<int32_t> ia = tok.encode(a), ib;
  if (b) ib = tok.encode(*b);
  const int64_t budget = max_len - (b ? 3 : 2);  // room for the text between the special tokens
  QKV_CHECK(budget >= (b ? 2 : 1), "classification input", "max_len ", max_len, " leaves no room for the text");
  const bool cut = text::truncate_longest_first(ia, ib, budget);
  if (truncated) *truncated = cut;
  std::vector<int64_t> ids;
  ids.reserve(ia.size() + ib.size() + 3);
  ids.push_back(t.start);
  ids.insert(ids.end(), ia.begin(), ia.end());
  if (b) {
    ids.push_back(t.delim);
    ids.insert(ids.end(), ib.begin(), ib.end());
  }
  ids.push_back(t.extract);
  return ids;
}

ClsExample encode_bert_cls_input(const text::Tokenizer& tok, std::string_view a, const std::string_view* b,
                                 int64_t max_len, bool* truncated) {
  const int64_t cls = tok.require_special_id(text::Role::Cls), sep = tok.require_special_id(text::Role::Sep);
  std::vector<int32_t> ia = tok.encode(a), ib;
  if (b) ib = tok.encode(*b);
  const int64_t budget = max_len - (b ? 3 : 2);  // the text between [CLS] and the [SEP]s
  QKV_CHECK(budget >= (b ? 2 : 1), "classification input", "max_len ", max_len, " leaves no room for the text");
  const bool cut = text::truncate_longest_first(ia, ib, budget);
  if (truncated) *truncated = cut;
  ClsExample x;
  x.ids.reserve(ia.size() + ib.size() + 3);
  x.ids.push_back(cls);
  x.ids.insert(x.ids.end(), ia.begin(), ia.end());
  x.ids.push_back(sep);
  x.types.assign(x.ids.size(), 0);
  if (b) {
    x.ids.insert(x.ids.end(), ib.begin(), ib.end());
    x.ids.push_back(sep);
    x.types.resize(x.ids.size(), 1);
  }
  return x;
}

ClsBatch make_cls_batch(const std::vector<const ClsExample*>& rows) {
  QKV_CHECK(!rows.empty(), "make_cls_batch", "no examples");
  const int64_t B = int64_t(rows.size());
  int64_t T = 0;
  for (auto* r : rows) T = std::max<int64_t>(T, int64_t(r->ids.size()));
  std::vector<int64_t> ids(size_t(B * T), 0), lm(size_t(B * (T - 1)), -100);  // (B, T), (B, T-1)
  std::vector<int64_t> extract(static_cast<size_t>(B)), labels(static_cast<size_t>(B));  // (B), (B)
  std::vector<uint8_t> pad(size_t(B * T), 1);
  std::vector<int64_t> types;  // (B, T) when the rows carry segments (BERT)
  if (!rows[0]->types.empty()) types.assign(size_t(B * T), 0);
  bool any_pad = false;
  for (int64_t i = 0; i < B; ++i) {
    const auto& v = rows[size_t(i)]->ids;
    const int64_t n = int64_t(v.size());
    std::copy(v.begin(), v.end(), ids.begin() + i * T);
    if (!types.empty()) {
      const auto& ty = rows[size_t(i)]->types;
      QKV_CHECK(ty.size() == v.size(), "make_cls_batch", "row ", i, ": ", ty.size(), " token types for ", n, " ids");
      std::copy(ty.begin(), ty.end(), types.begin() + i * T);
    }
    std::fill(pad.begin() + i * T, pad.begin() + i * T + n, uint8_t(0));
    any_pad |= n < T;
    for (int64_t j = 0; j + 1 < n; ++j) lm[size_t(i * (T - 1) + j)] = v[size_t(j + 1)];  // next real token
    extract[size_t(i)] = n - 1;
    labels[size_t(i)] = rows[size_t(i)]->label;
  }
  ClsBatch b;
  b.ids = Tensor::from_vector(ids, {B, T});
  if (any_pad) b.key_pad = Tensor::from_vector(pad, {B, T});
  if (!types.empty()) b.token_type_ids = Tensor::from_vector(types, {B, T});
  b.extract_pos = Tensor::from_vector(extract, {B});
  b.labels = Tensor::from_vector(labels, {B});
  b.lm_targets = Tensor::from_vector(lm, {B, T - 1});
  return b;
}

ClsExampleStream::ClsExampleStream(std::vector<ClsExample> examples, int64_t batch_size, uint64_t seed)
    : examples_(std::move(examples)) {
  QKV_CHECK(!examples_.empty(), "classification stream", "no training examples");
  QKV_CHECK(batch_size > 0, "classification stream", "batch_size must be positive, got ", batch_size);
  // Every token, segment id and label: a resume then refuses a corpus edited in place (lengths and
  // labels alone let a run go on with other text).
  LengthPlan p = fingerprinted_length_plan(examples_, batch_size, seed, [](PlanHash& h, const ClsExample& e) {
    h.mix(e.ids.size());
    for (int64_t v : e.ids) h.mix(uint64_t(v));
    h.mix(e.types.size());
    for (int64_t v : e.types) h.mix(uint64_t(v));
    h.mix(uint64_t(e.label));
  });
  plan_ = std::move(p.batches);
  order_.emplace(plan_.size(), seed, p.fingerprint, "classification stream");
}

ClsBatch ClsExampleStream::batch(size_t i) const {
  std::vector<const ClsExample*> rows;
  for (size_t e : plan_[i]) rows.push_back(&examples_[e]);
  return make_cls_batch(rows);
}

std::vector<ClsBatch> ClsExampleStream::all_batches() const {
  std::vector<ClsBatch> out;
  for (size_t i = 0; i < plan_.size(); ++i) out.push_back(batch(i));
  return out;
}

}  // namespace qkv::train
