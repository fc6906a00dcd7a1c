// qkv/nn/positional.h - absolute position encodings added to token embeddings.
// (Relative positions (Shaw et al.) and RoPE act inside attention: see qkv/attention/.)
#pragma once
#include "qkv/nn/module.h"

namespace qkv::nn {

// PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...) (Vaswani et al. 2017).
// Layout `halves` puts all sines first, then all cosines (Hugging Face Marian / fairseq).
enum class SinusoidLayout { interleaved, halves };

// The (max_len, d_model) f32 table, each angle computed in double and rounded once (PyTorch's
// f32 table to ~1 ulp). The one source of the table: the module below holds it, viz draws it.
Tensor sinusoidal_table(int64_t max_len, int64_t d_model, SinusoidLayout layout = SinusoidLayout::interleaved);

class SinusoidalPositionalEncoding : public Module {
 public:
  SinusoidalPositionalEncoding(int64_t d_model, int64_t max_len, SinusoidLayout layout = SinusoidLayout::interleaved);
  // x (B, T, D) -> x + PE[offset : offset + T]; offset serves incremental decoding.
  Tensor forward(const Tensor& x, int64_t offset = 0) const;
  Tensor table() const { return table_; }  // (max_len, D), computed once (not saved)
  int64_t max_len() const { return table_.size(0); }

 private:
  Tensor table_;
};

class LearnedPositionalEmbedding : public Module {
 public:
  LearnedPositionalEmbedding(int64_t max_len, int64_t d_model);
  Tensor forward(const Tensor& x, int64_t offset = 0) const;  // x (B, T, D) -> x + W[offset : offset + T]
  Tensor weight;  // (max_len, D)
};

}  // namespace qkv::nn
