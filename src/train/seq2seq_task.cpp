#include "qkv/train/seq2seq_task.h"

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

}  // namespace

TrainingTask::MicroBatch Seq2SeqTask::next() {
  Seq2SeqBatch b = data_.next();
  MicroBatch m;
  m.units = b.tgt_tokens;
  m.summed_loss = [this, b](double ls) {
    Tensor logits = model_.forward(b.src, b.src_pad, b.tgt_in);  // (B, T, V)
    return summed_loss(logits, b.tgt_out, pad_, ls);
  };
  return m;
}

double Seq2SeqTask::evaluate_loss(models::Seq2Seq& model, const std::vector<Seq2SeqBatch>& batches, int64_t pad_id,
                                  double ls) {
  NoGradGuard ng;
  bool was_training = model.is_training();
  model.eval();
  double total = 0;
  int64_t tokens = 0;
  for (const Seq2SeqBatch& b : batches) {
    total += summed_loss(model.forward(b.src, b.src_pad, b.tgt_in), b.tgt_out, pad_id, ls).item();
    tokens += b.tgt_tokens;
  }
  model.train(was_training);
  return tokens ? total / double(tokens) : 0.0;
}

}  // namespace qkv::train
