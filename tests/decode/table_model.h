// tests/decode/table_model.h - a fixed Seq2Seq for decoder tests:
// logits(t, prev) = W[prev] + P[t] + S[sentence] (W (V, V), P (T, V), S (B, V)).
#pragma once
#include "qkv/models/seq2seq.h"
#include "qkv/ops/elementwise.h"

namespace qkv::testing {

class TableState : public models::DecoderState {
 public:
  std::vector<int64_t> sentence;  // row -> sentence
  int64_t t = 0;
  void select_rows(const std::vector<int64_t>& rows) override {
    std::vector<int64_t> s;
    for (int64_t r : rows) s.push_back(sentence.at(size_t(r)));
    sentence = s;
  }
  int64_t rows() const override { return int64_t(sentence.size()); }
  int64_t steps() const override { return t; }
};

class TableModel : public models::Seq2Seq {
 public:
  TableModel(Tensor W, Tensor P, Tensor S, int64_t max_len) : W_(W), P_(P), S_(S), max_len_(max_len) {}
  Tensor forward(const Tensor&, const Tensor&, const Tensor&) override { throw Error("not used"); }
  std::unique_ptr<models::DecoderState> start(const Tensor& src, const Tensor&) override {
    auto st = std::make_unique<TableState>();
    for (int64_t b = 0; b < src.size(0); ++b) st->sentence.push_back(b);
    return st;
  }
  Tensor step(models::DecoderState& s, const Tensor& last) override {
    auto& st = static_cast<TableState&>(s);
    int64_t V = W_.size(1), R = st.rows();
    Tensor out = Tensor::empty({R, V});
    const float *w = W_.data<float>(), *p = P_.data<float>(), *sb = S_.data<float>();
    const int64_t* l = last.data<int64_t>();
    for (int64_t r = 0; r < R; ++r)
      for (int64_t v = 0; v < V; ++v)
        out.data<float>()[r * V + v] = w[l[r] * V + v] + p[st.t * V + v] + sb[st.sentence[size_t(r)] * V + v];
    ++st.t;
    return out;
  }
  models::AttentionMaps cross_attention(const Tensor&, const Tensor&, const Tensor&) override { return {}; }
  int64_t src_vocab() const override { return W_.size(0); }
  int64_t tgt_vocab() const override { return W_.size(1); }
  int64_t max_len() const override { return max_len_; }

 private:
  Tensor W_, P_, S_;
  int64_t max_len_;
};

}  // namespace qkv::testing
