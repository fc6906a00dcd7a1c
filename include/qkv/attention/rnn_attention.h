// qkv/attention/rnn_attention.h - the attention mechanisms of RNN encoder-decoders.
//
// A decoder state s (B, Ds) scores every encoder state h_i (B, S, Dh); masked softmax over i
// gives the alignment a (B, S) and the context c = sum_i a_i h_i (B, Dh).
//
//   Bahdanau (additive, 2015):  e_i = v^T tanh(W [s; h_i])          form concat
//                               e_i = v^T tanh(W1 s + W2 h_i)         form sum (W2 h precomputed)
//   Luong (multiplicative, 2015): dot      e_i = s^T h_i
//                                 general  e_i = s^T W h_i
//                                 concat   e_i = v^T tanh(W [s; h_i])
//                                 location e_i = (W_a s)_i   (section 3.1: a = softmax(W_a s), from
//                                          the decoder state alone; W_a has one row per source
//                                          position up to a maximum, rows 0..S-1 score a length-S source)
// Parameter names: W (Linear "attn" over [s; h]), W1 "query_proj", W2 "key_proj", v "v",
// W in general "attn" (no bias, Dh -> Ds), W_a in location "attn" (no bias, Ds -> max_positions).
#pragma once
#include "qkv/nn/layers.h"

namespace qkv::attention {

struct Alignment {
  Tensor context;  // (B, Dh)
  Tensor weights;  // (B, S), rows sum to 1 over unpadded positions (0 at padding)
};

// Keys prepared once per source sentence (the projected encoder states where a form allows it).
struct PreparedKeys {
  Tensor keys;       // (B, S, Dh) the encoder states
  Tensor projected;  // (B, S, A) W2 h (Bahdanau sum) or W h (Luong general); else undefined
  Tensor pad;        // (B, S) u8, 1 = padding, or undefined
};

class RnnAttention : public nn::Module {
 public:
  virtual PreparedKeys prepare(const Tensor& keys, const Tensor& pad) const = 0;
  virtual Alignment forward(const Tensor& query, const PreparedKeys& k) const = 0;  // query (B, Ds)
  Alignment forward(const Tensor& query, const Tensor& keys, const Tensor& pad) const {
    return forward(query, prepare(keys, pad));
  }
};

enum class AdditiveForm { concat, sum };

class BahdanauAttention : public RnnAttention {
 public:
  // query_dim Ds, key_dim Dh, attn_dim A.
  BahdanauAttention(int64_t query_dim, int64_t key_dim, int64_t attn_dim, AdditiveForm form = AdditiveForm::sum);
  PreparedKeys prepare(const Tensor& keys, const Tensor& pad) const override;
  Alignment forward(const Tensor& query, const PreparedKeys& k) const override;
  using RnnAttention::forward;

  AdditiveForm form;
  std::shared_ptr<nn::Linear> attn;        // concat: (A, Ds + Dh), with bias
  std::shared_ptr<nn::Linear> query_proj;  // sum: (A, Ds), with bias
  std::shared_ptr<nn::Linear> key_proj;    // sum: (A, Dh), no bias
  std::shared_ptr<nn::Linear> v;           // (1, A), no bias

 private:
  int64_t query_dim_, key_dim_;
};

enum class LuongScore { dot, general, concat, location };
LuongScore parse_luong_score(const std::string& s);  // "dot" | "general" | "concat" | "location"
const char* luong_score_name(LuongScore s);

class LuongAttention : public RnnAttention {
 public:
  // attn_dim: concat only. max_positions: location only, the longest source it can score (S <= it).
  LuongAttention(int64_t query_dim, int64_t key_dim, LuongScore score, int64_t attn_dim = 0,
                 int64_t max_positions = 0);
  PreparedKeys prepare(const Tensor& keys, const Tensor& pad) const override;
  Alignment forward(const Tensor& query, const PreparedKeys& k) const override;
  using RnnAttention::forward;

  LuongScore score;
  std::shared_ptr<nn::Linear> attn;  // general: (Ds, Dh) no bias; concat: (A, Ds + Dh) with bias;
                                     // location: W_a (max_positions, Ds) no bias
  std::shared_ptr<nn::Linear> v;     // concat: (1, A) no bias

 private:
  int64_t query_dim_check_, key_dim_check_, max_positions_ = 0;
};

// Masked softmax over the last axis of scores (B, S) and the weighted sum of keys.
Alignment align(const Tensor& scores, const PreparedKeys& k);

}  // namespace qkv::attention
