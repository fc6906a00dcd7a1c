#include "qkv/attention/rnn_attention.h"

#include "qkv/ops/elementwise.h"
#include "qkv/ops/matmul.h"
#include "qkv/ops/shape.h"
#include "qkv/ops/softmax.h"

namespace qkv::attention {
namespace {

void check_keys(const Tensor& keys, const Tensor& pad, int64_t key_dim, const char* op) {
  QKV_CHECK(keys.ndim() == 3 && keys.size(2) == key_dim, op, "keys must be (B, S, ", key_dim, "), got ", keys.str());
  QKV_CHECK(!pad.defined() || (pad.ndim() == 2 && pad.size(0) == keys.size(0) && pad.size(1) == keys.size(1)), op,
            "pad must be (B, S) = (", keys.size(0), ", ", keys.size(1), "), got ", pad.str());
}

void check_query(const Tensor& q, const PreparedKeys& k, int64_t query_dim, const char* op) {
  QKV_CHECK(q.ndim() == 2 && q.size(0) == k.keys.size(0) && q.size(1) == query_dim, op, "query must be (B, ", query_dim,
            ") with B = ", k.keys.size(0), ", got ", q.str());
}

// v^T tanh(W [s; h_i]) for all i: query (B, Ds), keys (B, S, Dh) -> (B, S).
Tensor concat_score(const nn::Linear& W, const nn::Linear& v, const Tensor& query, const Tensor& keys) {
  int64_t B = keys.size(0), S = keys.size(1);
  Tensor s = expand(unsqueeze(query, 1), Shape{B, S, query.size(1)});  // (B, S, Ds)
  Tensor e = tanh(W.forward(concat({s, keys}, 2)));                      // (B, S, A)
  return squeeze(v.forward(e), 2);                                       // (B, S)
}

}  // namespace

Alignment align(const Tensor& scores, const PreparedKeys& k) {
  // Mask is (B, S) u8 with 1 = padding: softmax gives those positions weight 0.
  Tensor w = softmax(scores, k.pad);                              // (B, S)
  Tensor ctx = squeeze(matmul(unsqueeze(w, 1), k.keys), 1);       // (B, 1, S) @ (B, S, Dh) -> (B, Dh)
  return {ctx, w};
}

BahdanauAttention::BahdanauAttention(int64_t qd, int64_t kd, int64_t ad, AdditiveForm f)
    : form(f), query_dim_(qd), key_dim_(kd) {
  if (form == AdditiveForm::concat) {
    attn = register_module("attn", std::make_shared<nn::Linear>(qd + kd, ad, true));
  } else {
    query_proj = register_module("query_proj", std::make_shared<nn::Linear>(qd, ad, true));
    key_proj = register_module("key_proj", std::make_shared<nn::Linear>(kd, ad, false));
  }
  v = register_module("v", std::make_shared<nn::Linear>(ad, 1, false));
}

PreparedKeys BahdanauAttention::prepare(const Tensor& keys, const Tensor& pad) const {
  check_keys(keys, pad, key_dim_, "BahdanauAttention");
  PreparedKeys k{keys, Tensor(), pad};
  if (form == AdditiveForm::sum) k.projected = key_proj->forward(keys);  // W2 h: (B, S, A), once per sentence
  return k;
}

Alignment BahdanauAttention::forward(const Tensor& query, const PreparedKeys& k) const {
  check_query(query, k, query_dim_, "BahdanauAttention");
  if (form == AdditiveForm::concat) return align(concat_score(*attn, *v, query, k.keys), k);
  Tensor e = tanh(add(unsqueeze(query_proj->forward(query), 1), k.projected));  // (B, 1, A) + (B, S, A)
  return align(squeeze(v->forward(e), 2), k);                                 // scores (B, S)
}

LuongScore parse_luong_score(const std::string& s) {
  if (s == "dot") return LuongScore::dot;
  if (s == "general") return LuongScore::general;
  if (s == "concat") return LuongScore::concat;
  if (s == "location") return LuongScore::location;
  fail("LuongAttention", "unknown score '", s, "' (expected dot, general, concat or location)");
}

const char* luong_score_name(LuongScore s) {
  switch (s) {
    case LuongScore::dot: return "dot";
    case LuongScore::general: return "general";
    case LuongScore::concat: return "concat";
    case LuongScore::location: return "location";
  }
  return "?";
}

LuongAttention::LuongAttention(int64_t qd, int64_t kd, LuongScore sc, int64_t ad, int64_t max_positions)
    : score(sc) {
  switch (score) {
    case LuongScore::dot:
      QKV_CHECK(qd == kd, "LuongAttention", "dot scoring needs equal query and key widths, got ", qd, " and ", kd,
                " (use general to learn a projection)");
      break;
    case LuongScore::general: attn = register_module("attn", std::make_shared<nn::Linear>(kd, qd, false)); break;
    case LuongScore::concat:
      QKV_CHECK(ad > 0, "LuongAttention", "concat scoring needs attn_dim > 0");
      attn = register_module("attn", std::make_shared<nn::Linear>(qd + kd, ad, true));
      v = register_module("v", std::make_shared<nn::Linear>(ad, 1, false));
      break;
    case LuongScore::location:
      QKV_CHECK(max_positions > 0, "LuongAttention", "location scoring needs max_positions > 0 (one row of W_a per ",
                "source position), got ", max_positions);
      attn = register_module("attn", std::make_shared<nn::Linear>(qd, max_positions, false));
      max_positions_ = max_positions;
      break;
  }
  query_dim_check_ = qd;
  key_dim_check_ = kd;
}

PreparedKeys LuongAttention::prepare(const Tensor& keys, const Tensor& pad) const {
  check_keys(keys, pad, key_dim_check_, "LuongAttention");
  PreparedKeys k{keys, Tensor(), pad};
  if (score == LuongScore::general) k.projected = attn->forward(keys);  // W h: (B, S, Ds)
  return k;
}

Alignment LuongAttention::forward(const Tensor& query, const PreparedKeys& k) const {
  check_query(query, k, query_dim_check_, "LuongAttention");
  Tensor q = unsqueeze(query, 2);  // (B, Ds, 1)
  switch (score) {
    case LuongScore::dot: return align(squeeze(matmul(k.keys, q), 2), k);           // (B, S, Dh) @ (B, Dh, 1)
    case LuongScore::general: return align(squeeze(matmul(k.projected, q), 2), k);  // (B, S, Ds) @ (B, Ds, 1)
    case LuongScore::concat: return align(concat_score(*attn, *v, query, k.keys), k);
    case LuongScore::location: {  // rows 0..S-1 of W_a: (B, Ds) @ (S, Ds)^T -> (B, S)
      QKV_CHECK(k.keys.size(1) <= max_positions_, "LuongAttention", "location scoring has one row of W_a per ",
                "source position, max_positions = ", max_positions_, ", but the source has ", k.keys.size(1));
      Tensor w_a = slice(attn->weight, 0, 0, k.keys.size(1));  // (S, Ds)
      return align(linear(query, w_a), k);
    }
  }
  return {};
}

}  // namespace qkv::attention
