#include "qkv/text/batching.h"

#include <nlohmann/json.hpp>
#include <numeric>

#include "qkv/text/line_reader.h"
#include "qkv/util/error.h"
#include "qkv/util/hash.h"

namespace qkv::text {

void ParallelDataset::add(const std::vector<int32_t>& src, const std::vector<int32_t>& tgt) {
  src_.insert(src_.end(), src.begin(), src.end());
  tgt_.insert(tgt_.end(), tgt.begin(), tgt.end());
  src_off_.push_back(src_.size());
  tgt_off_.push_back(tgt_.size());
}

ParallelDataset read_parallel_dataset(const std::string& tsv_path, const Encoder& encode_src,
                                      const Encoder& encode_tgt, size_t max_lines) {
  ParallelDataset ds;
  LineReader rd(tsv_path);
  std::string_view line;
  while ((max_lines == 0 || ds.size() < max_lines) && rd.next(line)) {
    auto f = split_tabs(line);
    QKV_CHECK(f.size() == 2, "parallel TSV '" + tsv_path + "'", "line ", rd.line_number(),
              ": expected 2 tab-separated fields, found ", f.size());
    ds.add(encode_src(f[0]), encode_tgt(f[1]));
  }
  return ds;
}

int64_t Batch::real_tokens() const {
  int64_t n = 0;
  for (int64_t b = 0; b < batch; ++b) n += std::max(src_lengths[b], tgt_lengths[b]);
  return n;
}

std::vector<uint8_t> key_padding_mask(const std::vector<int32_t>& lengths, int64_t max_len) {
  std::vector<uint8_t> m(lengths.size() * size_t(max_len));  // (B, L)
  for (size_t b = 0; b < lengths.size(); ++b) {
    QKV_CHECK(lengths[b] >= 0 && lengths[b] <= max_len, "key_padding_mask", "length ", lengths[b],
              " of row ", b, " outside [0, ", max_len, "]");
    for (int64_t t = 0; t < max_len; ++t) m[b * size_t(max_len) + size_t(t)] = t >= lengths[b];
  }
  return m;
}

std::array<int64_t, 3> DataPosition::to_array() const {
  return {int64_t(epoch), int64_t(batch_index), int64_t(seed)};
}
DataPosition DataPosition::from_array(const std::array<int64_t, 3>& a) {
  return {uint64_t(a[0]), uint64_t(a[1]), uint64_t(a[2])};
}
std::string DataPosition::to_json() const {
  return nlohmann::json{{"epoch", epoch}, {"batch_index", batch_index}, {"seed", seed}}.dump();
}
DataPosition DataPosition::from_json(const std::string& s) {
  try {
    auto j = nlohmann::json::parse(s);
    return {j.at("epoch").get<uint64_t>(), j.at("batch_index").get<uint64_t>(), j.at("seed").get<uint64_t>()};
  } catch (const nlohmann::json::exception& e) {
    fail("DataPosition::from_json", "expected {\"epoch\", \"batch_index\", \"seed\"}, got '", s, "': ", e.what());
  }
}

std::vector<std::vector<int64_t>> token_budget_batches(const std::vector<int64_t>& src_lengths,
                                                       const std::vector<int64_t>& tgt_lengths,
                                                       const BatcherOptions& opt, size_t* skipped) {
  QKV_CHECK(src_lengths.size() == tgt_lengths.size(), "token_budget_batches", "got ", src_lengths.size(),
            " source and ", tgt_lengths.size(), " target lengths");
  QKV_CHECK(opt.max_tokens > 0, "token_budget_batches", "max_tokens must be > 0, got ", opt.max_tokens);
  QKV_CHECK(opt.max_batch >= 0 && opt.max_len >= 0, "token_budget_batches",
            "max_batch and max_len must be >= 0, got ", opt.max_batch, " and ", opt.max_len);
  auto len = [&](int64_t i) { return std::max(src_lengths[size_t(i)], tgt_lengths[size_t(i)]); };
  std::vector<int64_t> idx;
  size_t left_out = 0;
  for (size_t i = 0; i < src_lengths.size(); ++i) {
    const int64_t l = len(int64_t(i));
    if ((opt.max_len && l > opt.max_len) || l > opt.max_tokens || l == 0) {
      ++left_out;
      continue;
    }
    idx.push_back(int64_t(i));
  }
  if (skipped) *skipped = left_out;
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) {
    const int64_t la = len(a), lb = len(b);
    if (la != lb) return la < lb;
    if (src_lengths[size_t(a)] != src_lengths[size_t(b)]) return src_lengths[size_t(a)] < src_lengths[size_t(b)];
    return tgt_lengths[size_t(a)] < tgt_lengths[size_t(b)];
  });
  // Greedy packing: lengths ascend, so the newest member is the longest row.
  std::vector<std::vector<int64_t>> batches;
  std::vector<int64_t> cur;
  for (int64_t i : idx) {
    const int64_t rows = int64_t(cur.size()) + 1;
    const bool fits = rows * len(i) <= opt.max_tokens && (!opt.max_batch || rows <= opt.max_batch);
    if (!fits && !cur.empty()) {
      batches.push_back(std::move(cur));
      cur.clear();
    }
    cur.push_back(i);
  }
  if (!cur.empty()) batches.push_back(std::move(cur));
  QKV_CHECK(batches.size() < (1ull << 32), "token_budget_batches", "too many batches: ", batches.size());
  return batches;
}

std::vector<uint32_t> epoch_batch_order(size_t n, uint64_t seed, uint64_t epoch) {
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  uint64_t state = seed ^ (0xd1b54a32d192ed03ull * (epoch + 1));
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[splitmix64(state) % i]);
  return order;
}

TokenBudgetBatcher::TokenBudgetBatcher(const ParallelDataset& data, const BatcherOptions& opt,
                                       uint64_t seed)
    : data_(data), opt_(opt) {
  pos_.seed = seed;
  std::vector<int64_t> src_lengths(data.size()), tgt_lengths(data.size());
  for (size_t i = 0; i < data.size(); ++i) src_lengths[i] = data.src_len(i), tgt_lengths[i] = data.tgt_len(i);
  batches_ = token_budget_batches(src_lengths, tgt_lengths, opt, &skipped_);
}

std::vector<uint32_t> TokenBudgetBatcher::epoch_order(uint64_t epoch) const {
  return epoch_batch_order(batches_.size(), pos_.seed, epoch);
}

Batch TokenBudgetBatcher::make_batch(const std::vector<int64_t>& members) const {
  Batch b;
  b.batch = int64_t(members.size());
  for (int64_t i : members) {
    b.src_len = std::max(b.src_len, data_.src_len(size_t(i)));
    b.tgt_len = std::max(b.tgt_len, data_.tgt_len(size_t(i)));
  }
  b.src.assign(size_t(b.batch * b.src_len), opt_.pad_id);
  b.tgt.assign(size_t(b.batch * b.tgt_len), opt_.pad_id);
  for (int64_t r = 0; r < b.batch; ++r) {
    const size_t i = size_t(members[size_t(r)]);
    const int64_t ls = data_.src_len(i), lt = data_.tgt_len(i);
    std::copy(data_.src(i), data_.src(i) + ls, b.src.begin() + r * b.src_len);
    std::copy(data_.tgt(i), data_.tgt(i) + lt, b.tgt.begin() + r * b.tgt_len);
    b.src_lengths.push_back(int32_t(ls));
    b.tgt_lengths.push_back(int32_t(lt));
    b.indices.push_back(int64_t(i));
  }
  return b;
}

Batch TokenBudgetBatcher::batch_at(uint64_t epoch, uint64_t i) const {
  QKV_CHECK(i < batches_.size(), "TokenBudgetBatcher::batch_at", "batch index ", i, " out of range [0, ",
            batches_.size(), ")");
  return make_batch(batches_[epoch_order(epoch)[i]]);
}

Batch TokenBudgetBatcher::next() {
  QKV_CHECK(!batches_.empty(), "TokenBudgetBatcher::next", "no batches (dataset empty or every example skipped)");
  if (order_epoch_ != pos_.epoch) {
    order_ = epoch_order(pos_.epoch);
    order_epoch_ = pos_.epoch;
  }
  Batch b = make_batch(batches_[order_[pos_.batch_index]]);
  if (++pos_.batch_index == batches_.size()) {
    ++pos_.epoch;
    pos_.batch_index = 0;
  }
  return b;
}

void TokenBudgetBatcher::restore(const DataPosition& p) {
  QKV_CHECK(p.seed == pos_.seed, "TokenBudgetBatcher::restore", "position seed ", p.seed,
            " differs from this batcher's seed ", pos_.seed);
  QKV_CHECK(p.batch_index < batches_.size(), "TokenBudgetBatcher::restore", "batch_index ",
            p.batch_index, " out of range [0, ", batches_.size(), ")");
  pos_ = p;
}

}  // namespace qkv::text
