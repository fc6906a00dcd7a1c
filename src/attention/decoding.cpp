// Incremental decoding for MultiHeadAttention: the self-attention KVCache, the projected
// cross-attention memory (ProjectedKV), and MultiHeadAttention::step / project_kv / attend.
//
// One new position per step (t = 1, f32, no weights requested, no attention dropout) takes the
// single-query op (attention_decode, decode_attention.h): Q, K and V come from one product
// against the packed [W_q; W_k; W_v], K/V are appended to the cache, and the op reads the cache
// and the projected memory in place through their row tables / maps (beam search reorders
// nothing). Every projection goes through packed weights that are never stale (PackedWeights).
// Anything else (several positions, f64, weights for a heatmap) gathers and goes through
// scaled_dot_product_attention, exactly as the training path.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "qkv/attention/multihead.h"
#include "qkv/autograd/node.h"
#include "qkv/ops/matmul.h"
#include "qkv/ops/packed.h"
#include "qkv/ops/shape.h"

namespace qkv::attention {

namespace {

// i64 (R) row indices, each checked against `rows`.
std::vector<int64_t> checked_rows(const Tensor& index, int64_t rows, const char* who) {
  QKV_CHECK(index.defined() && index.ndim() == 1 && index.dtype() == DType::i64, who,
            "expected an i64 (R) index, got ", index.defined() ? index.str() : std::string("undefined"));
  std::vector<int64_t> idx = index.to_vector<int64_t>();
  for (int64_t r : idx) QKV_CHECK(r >= 0 && r < rows, who, "row ", r, " out of range for ", rows, " rows");
  return idx;
}

}  // namespace

// ---------------------------------------------------------------- KVCache

Tensor KVCache::gather(const Tensor& buf) const {
  const int64_t R = buf.size(0), cap = buf.size(1), H = buf.size(2), Dh = buf.size(3);
  std::vector<int64_t> at(size_t(R * length_));  // (R, length): flat storage position of (row, j)
  for (int64_t r = 0; r < R; ++r)
    for (int64_t j = 0; j < length_; ++j) {
      const int64_t s = table_.empty() ? r : table_[size_t(r * cap + j)];  // storage row
      at[size_t(r * length_ + j)] = s * cap + j;
    }
  Tensor flat = reshape(buf, {R * cap, H, Dh});  // storage positions, a view
  return reshape(index_select(flat, 0, Tensor::from_vector(at, {R * length_})), {R, length_, H, Dh});
}

Tensor KVCache::k_stored() const {
  QKV_CHECK(k_.defined(), "KVCache", "empty cache (nothing appended yet)");
  return slice(k_, 1, 0, length_);  // (rows, length, H, Dh)
}

Tensor KVCache::v_stored() const {
  QKV_CHECK(v_.defined(), "KVCache", "empty cache (nothing appended yet)");
  return slice(v_, 1, 0, length_);
}

DecodeRows KVCache::decode_rows() const {
  DecodeRows d;
  d.table = table_;
  d.table_ld = capacity();
  d.key_padding = pad_;
  d.key_padding_ld = capacity();
  return d;
}

Tensor KVCache::k() const {
  return permute(table_.empty() ? k_stored() : gather(k_), {0, 2, 1, 3});  // (rows, H, length, Dh)
}

Tensor KVCache::v() const {
  return permute(table_.empty() ? v_stored() : gather(v_), {0, 2, 1, 3});
}

Tensor KVCache::key_padding_mask() const {
  if (pad_.empty()) return Tensor();
  const int64_t R = rows(), cap = capacity();
  Tensor m = Tensor::empty({R, length_}, DType::u8);  // (rows, length)
  uint8_t* dst = m.data<uint8_t>();
  for (int64_t r = 0; r < R; ++r) std::copy_n(pad_.begin() + r * cap, length_, dst + r * length_);
  return m;
}

void KVCache::clear() {
  k_ = v_ = Tensor();
  table_.clear();
  pad_.clear();
  length_ = 0;
}

void KVCache::append(const Tensor& k_new, const Tensor& v_new, const Tensor& key_padding) {
  NoGradGuard ng;
  QKV_CHECK(k_new.ndim() == 4 && k_new.shape() == v_new.shape(), "KVCache::append",
            "expected k and v (B, t, H, Dh) of one shape, got ", k_new.str(), " and ", v_new.str());
  const int64_t B = k_new.size(0), t = k_new.size(1), H = k_new.size(2), Dh = k_new.size(3);
  std::vector<uint8_t> new_pad;  // (B, t), empty = no padding among the new positions
  if (key_padding.defined()) {
    QKV_CHECK(key_padding.shape() == Shape({B, t}) &&
                  (key_padding.dtype() == DType::u8 || key_padding.dtype() == DType::boolean),
              "KVCache::append", "key_padding must be (", B, ", ", t, ") u8/bool, got ", key_padding.str());
    Tensor kp = key_padding.contiguous();
    const uint8_t* p = static_cast<const uint8_t*>(kp.raw_data());
    if (std::any_of(p, p + B * t, [](uint8_t x) { return x != 0; })) new_pad.assign(p, p + B * t);
  }
  if (k_.defined()) {
    QKV_CHECK(k_.size(0) == B && k_.size(2) == H && k_.size(3) == Dh, "KVCache::append", "cache holds (", k_.size(0),
              ", *, ", k_.size(2), ", ", k_.size(3), "), got ", k_new.str());
  }
  const int64_t need = length_ + t;
  const int64_t cap = capacity();
  if (need > cap) {  // grow by doubling (at least 16 positions); storage rows keep their places
    int64_t new_cap = std::max<int64_t>({16, 2 * cap, need});
    Tensor k2 = Tensor::empty({B, new_cap, H, Dh}, k_new.dtype()), v2 = Tensor::empty({B, new_cap, H, Dh}, v_new.dtype());
    if (length_ > 0) {
      slice(k2, 1, 0, length_).copy_from(slice(k_, 1, 0, length_));
      slice(v2, 1, 0, length_).copy_from(slice(v_, 1, 0, length_));
    }
    if (!table_.empty()) {
      std::vector<int32_t> t2(size_t(B * new_cap));
      for (int64_t r = 0; r < B; ++r)
        std::copy_n(table_.begin() + r * cap, length_, t2.begin() + r * new_cap);
      table_ = std::move(t2);
    }
    if (!pad_.empty()) {
      std::vector<uint8_t> p2(size_t(B * new_cap), 0);
      for (int64_t r = 0; r < B; ++r) std::copy_n(pad_.begin() + r * cap, length_, p2.begin() + r * new_cap);
      pad_ = std::move(p2);
    }
    k_ = k2;
    v_ = v2;
  }
  slice(k_, 1, length_, need).copy_from(k_new.detach());  // row r's new positions: storage row r
  slice(v_, 1, length_, need).copy_from(v_new.detach());
  if (!table_.empty()) {
    const int64_t c = capacity();
    for (int64_t r = 0; r < B; ++r)
      for (int64_t j = length_; j < need; ++j) table_[size_t(r * c + j)] = int32_t(r);
  }
  if (!new_pad.empty() || !pad_.empty()) {
    const int64_t c = capacity();
    if (pad_.empty()) pad_.assign(size_t(B * c), 0);  // the first padding: earlier positions were real
    for (int64_t r = 0; r < B; ++r)
      for (int64_t j = 0; j < t; ++j) pad_[size_t(r * c + length_ + j)] = new_pad.empty() ? 0 : new_pad[size_t(r * t + j)];
  }
  length_ = need;
}

void KVCache::select_rows(const Tensor& index) {
  if (!k_.defined()) return;
  NoGradGuard ng;
  const int64_t R = rows(), cap = capacity();
  std::vector<int64_t> idx = checked_rows(index, R, "KVCache::select_rows");
  const int64_t n = int64_t(idx.size());
  if (!pad_.empty()) {  // the padding belongs to the logical row: row i now has row idx[i]'s
    std::vector<uint8_t> p2(size_t(n * cap), 0);
    for (int64_t i = 0; i < n; ++i) std::copy_n(pad_.begin() + idx[size_t(i)] * cap, length_, p2.begin() + i * cap);
    pad_ = std::move(p2);
  }
  if (n == R) {  // same number of rows: compose the table, move no keys
    bool identity = table_.empty();
    for (int64_t i = 0; identity && i < n; ++i) identity = idx[size_t(i)] == i;
    if (identity) return;
    std::vector<int32_t> t2(size_t(R * cap));
    for (int64_t i = 0; i < n; ++i) {
      const int64_t src = idx[size_t(i)];
      for (int64_t j = 0; j < length_; ++j)
        t2[size_t(i * cap + j)] = table_.empty() ? int32_t(src) : table_[size_t(src * cap + j)];
    }
    table_ = std::move(t2);
    return;
  }
  // A different number of rows: gather into new storage of the same capacity (no regrowth).
  auto pick = [&](const Tensor& buf) {
    Tensor rows_now = gather(buf);  // (R, length, H, Dh) in row order
    Tensor out = Tensor::empty({n, cap, buf.size(2), buf.size(3)}, buf.dtype());
    slice(out, 1, 0, length_).copy_from(index_select(rows_now, 0, index));
    return out;
  };
  k_ = pick(k_);
  v_ = pick(v_);
  table_.clear();
}

// ---------------------------------------------------------------- ProjectedKV

void ProjectedKV::select_rows(const Tensor& index) {
  std::vector<int64_t> idx = checked_rows(index, rows(), "ProjectedKV::select_rows");
  std::vector<int32_t> m(idx.size());
  for (size_t i = 0; i < idx.size(); ++i) m[i] = row_map.empty() ? int32_t(idx[i]) : row_map[size_t(idx[i])];
  row_map = std::move(m);
}

ProjectedKV ProjectedKV::gathered() const {
  if (row_map.empty()) return {k, v, {}};
  NoGradGuard ng;
  std::vector<int64_t> m(row_map.begin(), row_map.end());
  Tensor index = Tensor::from_vector<int64_t>(m, {int64_t(m.size())});
  return {index_select(k, 0, index), index_select(v, 0, index), {}};
}

Tensor ProjectedKV::k_stored() const { return permute(k, {0, 2, 1, 3}); }  // (P, S, H, Dh)
Tensor ProjectedKV::v_stored() const { return permute(v, {0, 2, 1, 3}); }

// ---------------------------------------------------------------- MultiHeadAttention

namespace {

void check_step_input(const Tensor& x, int64_t dim, const char* what) {
  QKV_CHECK(x.defined() && x.ndim() == 3 && x.size(2) == dim, "MultiHeadAttention", what, " must be (B, T, ", dim,
            "), got ", x.defined() ? x.str() : std::string("undefined"));
}

}  // namespace

bool MultiHeadAttention::single_query_ok(const Tensor& query, bool need_weights) const {
  return query.size(1) == 1 && query.dtype() == DType::f32 && !need_weights && (dropout == 0.0 || !is_training());
}

MhaOutput MultiHeadAttention::step(const Tensor& x_new, KVCache& cache, bool need_weights) const {
  return step(x_new, cache, Tensor(), need_weights);
}

MhaOutput MultiHeadAttention::step(const Tensor& x_new, KVCache& cache, const Tensor& new_key_padding,
                                   bool need_weights) const {
  check_step_input(x_new, d_model_, "step input");
  const int64_t B = x_new.size(0), t = x_new.size(1), D = d_model_;
  Tensor qkv = linear_packed(x_new, *packed_qkv());  // (B, t, 3D) against [W_q; W_k; W_v] (3D, D)
  auto parts = split(qkv, {D, D, D}, 2);                      // 3 x (B, t, D) views
  auto to_bthd = [&](const Tensor& y) { return reshape(y, {B, t, heads_, head_dim_}); };
  if (positions_.kind != AttentionPositions::Kind::none) {
    // Positional self-attention: the new positions follow the cached ones. RoPE rotates the new
    // keys at their absolute positions before they are cached (cached keys are never rotated
    // again); relative scores take each query's absolute position from the cache length.
    Tensor q = split_heads(parts[0]), k_new = to_bthd(parts[1]);  // (B, H, t, Dh), (B, t, H, Dh)
    if (positions_.kind == AttentionPositions::Kind::rope) {
      const int64_t offset = cache.length();
      q = apply_rope(q, offset, positions_.rope_base, positions_.rope_style);
      k_new = permute(apply_rope(permute(k_new, {0, 2, 1, 3}), offset, positions_.rope_base, positions_.rope_style),
                      {0, 2, 1, 3});
    }
    cache.append(k_new, to_bthd(parts[2]), new_key_padding);
    if (positions_.kind == AttentionPositions::Kind::rope && single_query_ok(x_new, need_weights)) {
      Tensor qc = contiguous(permute(q, {0, 2, 1, 3}));  // (B, 1, H, Dh): rotated queries, one per row
      return {out_proj->forward_packed(decode_one_query(qc, cache)), Tensor()};
    }
    AttentionMask mask;
    mask.causal = t > 1;
    mask.key_padding = cache.key_padding_mask();
    return attend_positional(q, cache.k(), cache.v(), mask, need_weights, /*packed_out=*/true);
  }
  cache.append(to_bthd(parts[1]), to_bthd(parts[2]), new_key_padding);  // (B, t, H, Dh)
  if (single_query_ok(x_new, need_weights))  // q: (B, 1, H, Dh) view of qkv's first D columns
    return {out_proj->forward_packed(decode_one_query(to_bthd(parts[0]), cache)), Tensor()};
  AttentionMask mask;
  mask.causal = t > 1;  // query i (of t) sees cached keys up to its own position
  mask.key_padding = cache.key_padding_mask();  // (B, length) or undefined
  return attend_heads(split_heads(parts[0]), cache.k(), cache.v(), mask, need_weights);
}

Tensor MultiHeadAttention::decode_one_query(const Tensor& q, const KVCache& cache) const {
  NoGradGuard ng;
  return attention_decode(q, cache.k_stored(), cache.v_stored(), cache.decode_rows(),
                          1.0 / std::sqrt(double(head_dim_)));  // (B, 1, H * Dh)
}

ProjectedKV MultiHeadAttention::project_kv(const Tensor& key, const Tensor& value) const {
  check_step_input(key, k_proj->weight.size(1), "key");
  check_step_input(value, v_proj->weight.size(1), "value");
  return {split_heads(k_proj->forward(key)), split_heads(v_proj->forward(value)), {}};
}

MhaOutput MultiHeadAttention::attend(const Tensor& query, const ProjectedKV& kv, const AttentionMask& mask,
                                     bool need_weights) const {
  check_step_input(query, d_model_, "query");
  const int64_t B = query.size(0);
  QKV_CHECK(kv.k.defined() && kv.k.ndim() == 4 && kv.rows() == B && kv.k.size(1) == heads_,
            "MultiHeadAttention::attend", "projected K/V must be (", B, ", ", heads_, ", S, ", head_dim_, "), got ",
            kv.k.defined() ? kv.k.str() : std::string("undefined"), " for ", kv.rows(), " rows");
  Tensor q = q_proj->forward_packed(query);  // (B, Tq, D)
  const Tensor& kp = mask.key_padding;
  // The single-query op reads K/V as (P, S, H, Dh) storage (what project_kv makes) and supports
  // a key-padding mask only.
  const bool mask_ok = !mask.causal && !mask.key_lengths.defined() && !mask.mask.defined() &&
                       (!kp.defined() || (kp.dtype() == DType::u8 || kp.dtype() == DType::boolean));
  if (single_query_ok(query, need_weights) && decode_kv_layout_ok(kv.k_stored(), kv.v_stored()) && mask_ok) {
    NoGradGuard ng;
    const int64_t S = kv.k.size(2);
    DecodeRows rows;
    rows.map = kv.row_map;
    Tensor pad;
    if (kp.defined()) {
      QKV_CHECK(kp.ndim() == 2 && kp.size(0) == B && kp.size(1) == S, "MultiHeadAttention::attend",
                "mask.key_padding: expected (", B, ", ", S, "), got ", kp.str());
      pad = kp.contiguous();  // (B, S)
      rows.key_padding = {static_cast<const uint8_t*>(pad.raw_data()), size_t(B * S)};
      rows.key_padding_ld = S;
    }
    Tensor o = attention_decode(reshape(q, {B, 1, heads_, head_dim_}), kv.k_stored(), kv.v_stored(), rows,
                                1.0 / std::sqrt(double(head_dim_)));  // (B, 1, D)
    return {out_proj->forward_packed(o), Tensor()};
  }
  ProjectedKV g = kv.gathered();
  return attend_heads(split_heads(q), g.k, g.v, mask, need_weights);
}

}  // namespace qkv::attention
