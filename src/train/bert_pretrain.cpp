#include "qkv/train/bert_pretrain.h"

#include <algorithm>

#include "qkv/autograd/node.h"
#include "qkv/ops/elementwise.h"
#include "qkv/ops/loss.h"
#include "qkv/ops/reduce.h"
#include "qkv/ops/shape.h"

namespace qkv::train {

uint64_t MaskRng::bits() {
  uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t mix_seed(uint64_t a, uint64_t b) {
  MaskRng r(a ^ (b * 0xD1B54A32D192ED03ull));
  return r.bits();
}

void truncate_pair(std::vector<int64_t>& a, std::vector<int64_t>& b, size_t max_tokens, MaskRng& rng) {
  // The draws and the result of taking one token at a time off the front or the back of the longer
  // side, in linear time: a front erase per token made a 2M-word line without a sentence end take
  // minutes (the counts are kept, and each side is cut once at the end).
  size_t a_front = 0, a_len = a.size(), b_front = 0, b_len = b.size();
  while (a_len + b_len > max_tokens) {
    const bool from_a = a_len > b_len;
    if (rng.uniform() < 0.5) ++(from_a ? a_front : b_front);
    --(from_a ? a_len : b_len);
  }
  a.erase(a.begin(), a.begin() + std::ptrdiff_t(a_front));
  a.resize(a_len);
  b.erase(b.begin(), b.begin() + std::ptrdiff_t(b_front));
  b.resize(b_len);
}

std::vector<NspPair> make_nsp_pairs(const std::vector<std::vector<std::vector<int64_t>>>& documents, int64_t max_len,
                                    MaskRng& rng, const BertSpecials& sp) {
  QKV_CHECK(max_len >= 5, "make_nsp_pairs", "max_len must be >= 5 ([CLS] a [SEP] b [SEP]), got ", max_len);
  std::vector<std::vector<std::vector<int64_t>>> docs;  // non-empty segments of non-empty documents
  for (const auto& d : documents) {
    std::vector<std::vector<int64_t>> segs;
    for (const auto& s : d)
      if (!s.empty()) segs.push_back(s);
    if (!segs.empty()) docs.push_back(std::move(segs));
  }
  QKV_CHECK(docs.size() >= 2, "make_nsp_pairs", "NSP needs at least two non-empty documents, got ", docs.size());
  const size_t max_tokens = size_t(max_len - 3);
  std::vector<NspPair> out;
  for (size_t di = 0; di < docs.size(); ++di) {
    const auto& doc = docs[di];
    std::vector<const std::vector<int64_t>*> chunk;
    size_t chunk_len = 0;
    for (size_t i = 0; i < doc.size(); ++i) {
      chunk.push_back(&doc[i]);
      chunk_len += doc[i].size();
      if (i + 1 != doc.size() && chunk_len < max_tokens) continue;
      // A = chunk[0, a_end), a_end in [1, |chunk| - 1] (1 when the chunk is one segment).
      const size_t a_end = chunk.size() >= 2 ? 1 + size_t(rng.below(chunk.size() - 1)) : 1;
      std::vector<int64_t> a, b;
      for (size_t j = 0; j < a_end; ++j) a.insert(a.end(), chunk[j]->begin(), chunk[j]->end());
      int64_t is_random = 0;
      const bool random_b = rng.uniform() < 0.5;
      if (!random_b && chunk.size() == 1 && a.size() >= 2) {
        // One segment and B must follow A: the segment is cut at a random token into A and B
        // (the paper's "sentences" are any contiguous spans), so that half the pairs are
        // consecutive even where documents are single sentences.
        const size_t cut = 1 + size_t(rng.below(a.size() - 1));
        b.assign(a.begin() + std::ptrdiff_t(cut), a.end());
        a.resize(cut);
      } else if (random_b || chunk.size() == 1) {
        is_random = 1;
        const size_t target_b = max_tokens > a.size() ? max_tokens - a.size() : 1;
        size_t other = size_t(rng.below(docs.size() - 1));
        if (other >= di) ++other;  // any document but this one
        const auto& od = docs[other];
        for (size_t j = size_t(rng.below(od.size())); j < od.size() && b.size() < target_b; ++j)
          b.insert(b.end(), od[j].begin(), od[j].end());
        i -= chunk.size() - a_end;  // the chunk's unused segments are read again
      } else {
        for (size_t j = a_end; j < chunk.size(); ++j) b.insert(b.end(), chunk[j]->begin(), chunk[j]->end());
      }
      truncate_pair(a, b, max_tokens, rng);
      if (a.empty() || b.empty()) {  // trimming cannot empty a side; guard the degenerate case anyway
        chunk.clear();
        chunk_len = 0;
        continue;
      }
      NspPair p;
      p.ids.push_back(sp.cls);
      p.ids.insert(p.ids.end(), a.begin(), a.end());
      p.ids.push_back(sp.sep);
      p.segments.assign(p.ids.size(), 0);
      p.ids.insert(p.ids.end(), b.begin(), b.end());
      p.ids.push_back(sp.sep);
      p.segments.resize(p.ids.size(), 1);
      p.is_random = is_random;
      out.push_back(std::move(p));
      chunk.clear();
      chunk_len = 0;
    }
  }
  return out;
}

void mask_sequence(std::vector<int64_t>& ids, std::vector<int64_t>& labels, const BertSpecials& sp, MaskRng& rng,
                   const MaskOptions& opt, std::vector<MaskAction>* actions) {
  labels.assign(ids.size(), -100);
  if (actions) actions->assign(ids.size(), MaskAction::none);
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t id = ids[i];
    if (id < 0 || id >= sp.vocab || sp.is_special[size_t(id)]) continue;
    if (rng.uniform() >= opt.select) continue;
    labels[i] = id;
    const double u = rng.uniform();
    MaskAction a = MaskAction::keep;
    if (u < opt.to_mask) {
      a = MaskAction::mask;
      ids[i] = sp.mask;
    } else if (u < opt.to_mask + opt.to_random) {
      a = MaskAction::random;
      int64_t r;
      do r = int64_t(rng.below(uint64_t(sp.vocab)));
      while (sp.is_special[size_t(r)]);
      ids[i] = r;
    }
    if (actions) (*actions)[i] = a;
  }
}

BertBatch collate_bert(const std::vector<NspPair>& pairs, const std::vector<std::vector<int64_t>>& masked_ids,
                       const std::vector<std::vector<int64_t>>& labels, int64_t pad_id) {
  const int64_t B = int64_t(pairs.size());
  int64_t T = 0;
  for (const auto& p : pairs) T = std::max<int64_t>(T, int64_t(p.ids.size()));
  BertBatch out;
  out.ids = Tensor::full({B, T}, double(pad_id), DType::i64);
  out.token_type_ids = Tensor::zeros({B, T}, DType::i64);
  out.mlm_labels = Tensor::full({B, T}, -100.0, DType::i64);
  out.nsp_labels = Tensor::zeros({B}, DType::i64);
  Tensor pad = Tensor::zeros({B, T}, DType::u8);
  bool padded = false;
  int64_t *ids = out.ids.data<int64_t>(), *tt = out.token_type_ids.data<int64_t>(),
          *lab = out.mlm_labels.data<int64_t>(), *nsp = out.nsp_labels.data<int64_t>();
  uint8_t* kp = pad.data<uint8_t>();
  for (int64_t r = 0; r < B; ++r) {
    const size_t n = pairs[size_t(r)].ids.size();
    for (size_t t = 0; t < n; ++t) {
      ids[r * T + int64_t(t)] = masked_ids[size_t(r)][t];
      tt[r * T + int64_t(t)] = pairs[size_t(r)].segments[t];
      lab[r * T + int64_t(t)] = labels[size_t(r)][t];
      out.predicted += labels[size_t(r)][t] != -100;
    }
    for (int64_t t = int64_t(n); t < T; ++t) kp[r * T + t] = 1, padded = true;
    nsp[r] = pairs[size_t(r)].is_random;
  }
  if (padded) out.key_pad = pad;
  out.sequences = B;
  return out;
}

BertPretrainStream::BertPretrainStream(std::vector<NspPair> pairs, int64_t batch_size, const BertSpecials& sp,
                                       uint64_t seed)
    : pairs_(std::move(pairs)), batch_(batch_size), sp_(sp), seed_(seed) {
  QKV_CHECK(batch_size > 0, "BertPretrainStream", "batch_size must be positive, got ", batch_size);
  QKV_CHECK(!pairs_.empty(), "BertPretrainStream", "no sentence pairs: the corpus is empty");
  PlanHash h;  // the batch size and every pair identify the plan
  h.mix(uint64_t(batch_size));
  h.mix(pairs_.size());
  for (const auto& p : pairs_) {
    h.mix(p.ids.size());
    for (int64_t t : p.ids) h.mix(uint64_t(t));
    h.mix(uint64_t(p.is_random));
  }
  order_.emplace(size_t(batches_per_epoch()), seed, h.value(), "BertPretrainStream");
}

BertBatch BertPretrainStream::batch(size_t b, uint64_t mask_seed) const {
  const size_t first = b * size_t(batch_), last = std::min(pairs_.size(), first + size_t(batch_));
  std::vector<NspPair> ps(pairs_.begin() + int64_t(first), pairs_.begin() + int64_t(last));
  std::vector<std::vector<int64_t>> masked(ps.size()), labels(ps.size());
  MaskRng rng(mask_seed);
  for (size_t i = 0; i < ps.size(); ++i) {
    masked[i] = ps[i].ids;
    mask_sequence(masked[i], labels[i], sp_, rng);
  }
  return collate_bert(ps, masked, labels, sp_.pad);
}

BertBatch BertPretrainStream::next() {
  const size_t b = order_->next();
  // (epoch, batch id) names this draw uniquely; the order's position is in every checkpoint.
  return batch(b, mix_seed(mix_seed(seed_, uint64_t(order_->epoch())), uint64_t(b)));
}

BertLosses bert_pretrain_losses(const models::BertForPreTraining& model, const BertBatch& b) {
  const models::BertOutput o = model.bert->forward(b.ids, b.token_type_ids, b.key_pad);
  BertLosses l;
  // Over the predicted positions only (BertMlmHead::loss); none predicted: 0, still recorded.
  l.mlm = model.mlm->loss(o.hidden, b.mlm_labels, b.predicted > 0 ? Reduction::mean : Reduction::sum);
  l.nsp = cross_entropy(model.nsp->forward(o.pooled), b.nsp_labels, -100, 0.0, Reduction::mean);
  return l;
}

TrainingTask::MicroBatch BertPretrainTask::next() {
  BertBatch b = data_.next();
  MicroBatch m;
  m.units = b.sequences;
  m.summed_loss = [this, b](double) {
    BertLosses l = bert_pretrain_losses(model_, b);
    return (l.mlm + l.nsp) * double(b.sequences);
  };
  // Rows [begin, end) alone: their shares of the batch's two means, times the batch's B (units
  // are sequences; the MLM mean divides by the whole batch's predicted tokens).
  m.row_units.assign(size_t(b.sequences), 1);
  m.rows_loss = [this, b](double, int64_t begin, int64_t end) {
    auto rows = [&](const Tensor& x) { return x.defined() ? slice(x, 0, begin, end).contiguous() : x; };
    const models::BertOutput o = model_.bert->forward(rows(b.ids), rows(b.token_type_ids), rows(b.key_pad));
    Tensor mlm = model_.mlm->loss(o.hidden, rows(b.mlm_labels), Reduction::sum);
    Tensor nsp = cross_entropy(model_.nsp->forward(o.pooled), rows(b.nsp_labels), -100, 0.0, Reduction::sum);
    const double B = double(b.sequences);
    return mlm * (b.predicted > 0 ? B / double(b.predicted) : 0.0) + nsp;  // nsp: B * (sum / B)
  };
  return m;
}

BertEval BertPretrainTask::evaluate(models::BertForPreTraining& model, const std::vector<BertBatch>& batches) {
  NoGradGuard ng;
  const nn::EvalScope eval_mode(model);
  BertEval e;
  double mlm_sum = 0;
  int64_t mlm_right = 0, nsp_right = 0;
  for (const BertBatch& b : batches) {
    models::BertForPreTraining::Logits lg = model.forward(b.ids, b.token_type_ids, b.key_pad);
    mlm_sum += cross_entropy(lg.mlm, b.mlm_labels, -100, 0.0, Reduction::sum).item();
    Tensor pm = argmax(lg.mlm, -1).contiguous(), pn = argmax(lg.nsp, -1).contiguous();
    const int64_t* p = pm.data<int64_t>();
    const int64_t* lab = b.mlm_labels.data<int64_t>();
    for (int64_t i = 0; i < b.mlm_labels.numel(); ++i) mlm_right += lab[i] != -100 && p[i] == lab[i];
    const int64_t* q = pn.data<int64_t>();
    const int64_t* nl = b.nsp_labels.data<int64_t>();
    for (int64_t i = 0; i < b.sequences; ++i) nsp_right += q[i] == nl[i];
    e.predicted += b.predicted;
    e.sequences += b.sequences;
  }
  if (e.predicted) e.mlm_loss = mlm_sum / double(e.predicted), e.mlm_accuracy = double(mlm_right) / double(e.predicted);
  if (e.sequences) e.nsp_accuracy = double(nsp_right) / double(e.sequences);
  return e;
}

}  // namespace qkv::train
