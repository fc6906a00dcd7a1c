#include "qkv/train/seq2seq_task.h"

#include <algorithm>

#include "qkv/autograd/node.h"
#include "qkv/ops/loss.h"
#include "qkv/ops/shape.h"

namespace qkv::train {
namespace {

// Sum over non-pad targets of the (smoothed) token loss: logits (B, T, V), targets (B, T).
Tensor summed_loss(const Tensor& logits, const Tensor& tgt_out, int64_t pad_id, double ls) {
  int64_t V = logits.size(-1);
  return cross_entropy(reshape(logits, {-1, V}), reshape(tgt_out, {-1}), pad_id, ls, Reduction::sum);
}

// Real (non-pad) target tokens of each row of tgt_out (B, T).
std::vector<int64_t> target_tokens_per_row(const Tensor& tgt_out, int64_t pad_id) {
  const int64_t B = tgt_out.size(0), T = tgt_out.size(1);
  const int64_t* y = tgt_out.data<int64_t>();
  std::vector<int64_t> n(size_t(B), 0);
  for (int64_t r = 0; r < B; ++r)
    for (int64_t t = 0; t < T; ++t) n[size_t(r)] += y[r * T + t] != pad_id;
  return n;
}

// Rows [begin, end) of a right-padded batch, cut to their own longest source and target (the
// columns past them are padding in every one of these rows).
Seq2SeqBatch batch_rows(const Seq2SeqBatch& b, int64_t begin, int64_t end, int64_t pad_id) {
  const int64_t S = b.src.size(1);
  const uint8_t* spad = b.src_pad.data<uint8_t>();
  const std::vector<int64_t> tgt = target_tokens_per_row(b.tgt_out, pad_id);
  int64_t s_len = 0, t_len = 0, tokens = 0, src_tokens = 0;
  for (int64_t r = begin; r < end; ++r) {
    int64_t n = 0;
    for (int64_t s = 0; s < S; ++s) n += spad[r * S + s] == 0;
    s_len = std::max(s_len, n);
    src_tokens += n;
    t_len = std::max(t_len, tgt[size_t(r)]);
    tokens += tgt[size_t(r)];
  }
  auto cut = [&](const Tensor& x, int64_t cols) { return slice(slice(x, 0, begin, end), 1, 0, cols).contiguous(); };
  Seq2SeqBatch out;
  out.src = cut(b.src, s_len);          // (end - begin, s_len)
  out.src_pad = cut(b.src_pad, s_len);  // (end - begin, s_len)
  out.tgt_in = cut(b.tgt_in, t_len);    // (end - begin, t_len)
  out.tgt_out = cut(b.tgt_out, t_len);  // (end - begin, t_len)
  out.src_tokens = src_tokens;
  out.tgt_tokens = tokens;
  return out;
}

}  // namespace

TrainingTask::MicroBatch Seq2SeqTask::next() {
  Seq2SeqBatch b = data_.next();
  MicroBatch m;
  m.units = b.tgt_tokens;
  m.summed_loss = [this, b](double ls) {
    return model_.loss(b.src, b.src_pad, b.tgt_in, b.tgt_out, pad_, ls, Reduction::sum);
  };
  m.row_units = target_tokens_per_row(b.tgt_out, pad_);
  m.rows_loss = [this, b](double ls, int64_t begin, int64_t end) {
    const Seq2SeqBatch part = batch_rows(b, begin, end, pad_);
    return model_.loss(part.src, part.src_pad, part.tgt_in, part.tgt_out, pad_, ls, Reduction::sum);
  };
  return m;
}

double Seq2SeqTask::evaluate_loss(models::Seq2Seq& model, const std::vector<Seq2SeqBatch>& batches, int64_t pad_id,
                                  double ls) {
  NoGradGuard ng;
  const nn::EvalScope eval_mode(model);
  double total = 0;
  int64_t tokens = 0;
  for (const Seq2SeqBatch& b : batches) {
    total += summed_loss(model.forward(b.src, b.src_pad, b.tgt_in), b.tgt_out, pad_id, ls).item();
    tokens += b.tgt_tokens;
  }
  return tokens ? total / double(tokens) : 0.0;
}

}  // namespace qkv::train
