// qkv/train/bert_pretrain.h - BERT pretraining data and task: masked-language modelling (MLM) and
// next-sentence prediction (NSP), as Devlin et al. (2019) and google-research/bert's
// create_pretraining_data.py build them.
//
// Pairs (make_nsp_pairs): each document is a list of segments (sentences, as token ids). Going
// through a document, segments are gathered until they hold max_len - 3 tokens (or the document
// ends); the gathered chunk is cut at a random segment boundary into A and the rest (B). With
// probability 1/2 B is instead taken from a random other document, from a random segment on, up
// to the remaining length (is_random = 1), and the unused part of the chunk is put back. A chunk
// of one segment that is to keep its B is cut at a random token instead (create_pretraining_data.py
// makes every such chunk random, which on corpora of one-sentence documents leaves far more than
// half the pairs random; this keeps the paper's 50/50). Only a one-token chunk is always random. The pair is trimmed to max_len - 3 tokens by removing a token
// from the front or back (coin flip) of the longer side. Sequence: [CLS] A [SEP] B [SEP],
// segment ids 0 for [CLS] A [SEP], 1 for B [SEP].
//
// Masking (mask_sequence): every token that is not special ([CLS], [SEP], [PAD]) is chosen with
// probability 0.15 (an independent Bernoulli draw, as Hugging Face's DataCollatorForLanguageModeling;
// the paper states the 15% rate); a chosen token becomes [MASK] with probability 0.8, a random
// non-special token with 0.1, and stays with 0.1. Its label is the original id; tokens not chosen
// have label -100 (ignored by the loss).
//
// The pairs are built once from the seed; each batch's masks are drawn afresh from a generator
// seeded by (seed, epoch, batch id), so a batch's masks depend only on the data position that
// checkpoints store (exact resume) and change between epochs (dynamic masking, as RoBERTa).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "qkv/models/bert.h"
#include "qkv/train/batch_order.h"
#include "qkv/train/trainer.h"

namespace qkv::train {

// A small counter-based generator (splitmix64): deterministic across platforms.
class MaskRng {
 public:
  explicit MaskRng(uint64_t seed) : s_(seed) {}
  uint64_t bits();
  double uniform() { return double(bits() >> 11) * 0x1.0p-53; }  // [0, 1)
  uint64_t below(uint64_t n) { return bits() % n; }              // [0, n), n << 2^64: bias negligible
 private:
  uint64_t s_;
};
uint64_t mix_seed(uint64_t a, uint64_t b);

struct NspPair {
  std::vector<int64_t> ids;       // [CLS] A [SEP] B [SEP]
  std::vector<int64_t> segments;  // 0 .. 0 1 .. 1
  int64_t is_random = 0;          // NSP label: 0 = B follows A, 1 = B from another document
};

struct BertSpecials {
  int64_t cls = 0, sep = 0, pad = 0, mask = 0;
  int64_t vocab = 0;                // ids are in [0, vocab)
  std::vector<uint8_t> is_special;  // (vocab): 1 = never chosen, never drawn as the random token
};

// Removes tokens from the longer side (b when they are as long), from its front or its back on a
// coin flip of `rng`, until |a| + |b| <= max_tokens: create_pretraining_data.py's
// truncate_seq_pair, in linear time.
void truncate_pair(std::vector<int64_t>& a, std::vector<int64_t>& b, size_t max_tokens, MaskRng& rng);

// documents[d][s] = the ids of segment s of document d (no specials). Documents with no tokens
// are skipped; at least two documents are needed (random B).
std::vector<NspPair> make_nsp_pairs(const std::vector<std::vector<std::vector<int64_t>>>& documents, int64_t max_len,
                                    MaskRng& rng, const BertSpecials& sp);

enum class MaskAction : uint8_t { none = 0, mask = 1, random = 2, keep = 3 };
struct MaskOptions {
  double select = 0.15, to_mask = 0.8, to_random = 0.1;  // the rest of the chosen stay unchanged
};

// Masks ids in place; labels (same size) get the original id of chosen tokens, -100 elsewhere.
// actions, if given, receives what happened to each token.
void mask_sequence(std::vector<int64_t>& ids, std::vector<int64_t>& labels, const BertSpecials& sp, MaskRng& rng,
                   const MaskOptions& opt = {}, std::vector<MaskAction>* actions = nullptr);

struct BertBatch {
  Tensor ids;             // (B, T) i64, masked
  Tensor token_type_ids;  // (B, T) i64
  Tensor key_pad;         // (B, T) u8, 1 = padding; undefined when nothing is padded
  Tensor mlm_labels;      // (B, T) i64, -100 where not predicted
  Tensor nsp_labels;      // (B) i64
  int64_t sequences = 0, predicted = 0;
};

// Pads pairs to the longest of them; labels given as -100 at padding.
BertBatch collate_bert(const std::vector<NspPair>& pairs, const std::vector<std::vector<int64_t>>& masked_ids,
                       const std::vector<std::vector<int64_t>>& labels, int64_t pad_id);

// Where BertPretrainTask's batches come from (tests replay a reference's batches through it).
class BertBatchStream {
 public:
  virtual ~BertBatchStream() = default;
  virtual BertBatch next() = 0;
  virtual int64_t epoch() const = 0;
  virtual std::map<std::string, int64_t> position() const = 0;
  virtual void restore(const std::map<std::string, int64_t>& position) = 0;
};

class BertPretrainStream : public BertBatchStream {
 public:
  BertPretrainStream(std::vector<NspPair> pairs, int64_t batch_size, const BertSpecials& sp, uint64_t seed);
  BertBatch next() override;
  int64_t epoch() const override { return order_->epoch(); }
  std::map<std::string, int64_t> position() const override { return order_->position(); }
  void restore(const std::map<std::string, int64_t>& pos) override { order_->restore(pos); }
  int64_t batches_per_epoch() const { return (int64_t(pairs_.size()) + batch_ - 1) / batch_; }
  int64_t pairs() const { return int64_t(pairs_.size()); }
  BertBatch batch(size_t b, uint64_t mask_seed) const;  // pairs b * batch_size .., masked from mask_seed

 private:
  std::vector<NspPair> pairs_;
  int64_t batch_;
  BertSpecials sp_;
  uint64_t seed_;
  std::optional<BatchOrder> order_;
};

struct BertLosses {
  Tensor mlm;  // mean cross-entropy over the predicted tokens (0 if none)
  Tensor nsp;  // mean cross-entropy over the sequences
};
BertLosses bert_pretrain_losses(const models::BertForPreTraining& model, const BertBatch& b);

struct BertEval {
  double mlm_loss = 0, mlm_accuracy = 0, nsp_accuracy = 0;
  int64_t predicted = 0, sequences = 0;
};

// The Trainer's task. Loss per unit (a sequence): mean MLM cross-entropy + mean NSP cross-entropy
// of the batch, as Hugging Face's BertForPreTraining sums them (summed_loss = B * that).
class BertPretrainTask : public TrainingTask {
 public:
  BertPretrainTask(models::BertForPreTraining& model, BertBatchStream& data) : model_(model), data_(data) {}
  nn::Module& model() override { return model_; }
  MicroBatch next() override;
  int64_t epoch() const override { return data_.epoch(); }
  const char* unit_name() const override { return "seq"; }
  std::map<std::string, int64_t> position() const override { return data_.position(); }
  void restore(const std::map<std::string, int64_t>& position) override { data_.restore(position); }

  // MLM loss (mean over predicted tokens), MLM accuracy (argmax == label over predicted tokens)
  // and NSP accuracy over batches; eval mode, no grad.
  static BertEval evaluate(models::BertForPreTraining& model, const std::vector<BertBatch>& batches);

 private:
  models::BertForPreTraining& model_;
  BertBatchStream& data_;
};

}  // namespace qkv::train
