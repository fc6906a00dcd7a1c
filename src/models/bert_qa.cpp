#include "qkv/models/bert_qa.h"

#include <algorithm>

#include "qkv/ops/elementwise.h"
#include "qkv/ops/shape.h"

namespace qkv::models {

namespace {

// The encoder without its pooler, under the name "bert": Hugging Face builds
// BertForQuestionAnswering's BertModel with add_pooling_layer=False, so the pooler is neither a
// parameter to train nor a tensor to save.
class BertBody : public nn::Module {
 public:
  explicit BertBody(const Bert& b) {
    register_module("embeddings", b.embeddings);
    register_module("encoder", b.encoder);
  }
};

// Hugging Face's clamp(0, T): positions beyond the window become T, which the loss ignores.
Tensor clamp_positions(const Tensor& pos, int64_t T) {
  QKV_CHECK(pos.defined() && pos.ndim() == 1 && pos.dtype() == DType::i64, "BertForQuestionAnswering",
            "positions must be (B) i64, got ", pos.defined() ? pos.str() : std::string("undefined"));
  std::vector<int64_t> v = pos.contiguous().to_vector<int64_t>();
  for (int64_t& p : v) p = std::clamp<int64_t>(p, 0, T);
  return Tensor::from_vector(v, {int64_t(v.size())});
}

}  // namespace

BertForQuestionAnswering::BertForQuestionAnswering(std::shared_ptr<Bert> b, Generator& gen) : bert(std::move(b)) {
  QKV_CHECK(bert != nullptr, "BertForQuestionAnswering", "needs an encoder");
  register_module("bert", std::make_shared<BertBody>(*bert));
  qa_outputs = register_module(
      "qa_outputs", std::make_shared<nn::Linear>(bert->config().hidden_size, 2, true, nn::init::Scheme::none));
  nn::initialize(*qa_outputs, nn::init::Scheme::normal_002, gen);
}

BertForQuestionAnswering::Logits BertForQuestionAnswering::forward(const Tensor& ids, const Tensor& token_type_ids,
                                                                   const Tensor& key_pad) const {
  Tensor logits = qa_outputs->forward(bert->hidden(ids, token_type_ids, key_pad));  // (B, T, 2)
  return {squeeze(slice(logits, 2, 0, 1), 2), squeeze(slice(logits, 2, 1, 2), 2)};
}

BertForQuestionAnswering::Logits BertForQuestionAnswering::forward_packed(
    const Tensor& ids, const Tensor& token_type_ids, const std::vector<int64_t>& lengths) const {
  Tensor logits = qa_outputs->forward(bert->hidden_packed(ids, token_type_ids, lengths));  // (1, N, 2)
  return {squeeze(slice(logits, 2, 0, 1), 2), squeeze(slice(logits, 2, 1, 2), 2)};
}

Tensor BertForQuestionAnswering::loss(const Logits& l, const Tensor& start_positions, const Tensor& end_positions,
                                      Reduction reduction) {
  QKV_CHECK(l.start.defined() && l.start.ndim() == 2 && l.end.shape() == l.start.shape(), "BertForQuestionAnswering",
            "loss needs (B, T) start and end logits");
  QKV_CHECK(reduction != Reduction::none, "BertForQuestionAnswering", "loss reduction must be mean or sum");
  const int64_t B = l.start.size(0), T = l.start.size(1);
  QKV_CHECK(start_positions.defined() && start_positions.numel() == B && end_positions.defined() &&
                end_positions.numel() == B,
            "BertForQuestionAnswering", "expected ", B, " start and end positions");
  Tensor s = cross_entropy(l.start, clamp_positions(start_positions, T), T, 0.0, reduction);
  Tensor e = cross_entropy(l.end, clamp_positions(end_positions, T), T, 0.0, reduction);
  return mul(add(s, e), 0.5);
}

}  // namespace qkv::models
