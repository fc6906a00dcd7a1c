// qkv/tasks/embedder.h - sentence embeddings from a BERT encoder: the one way `qkv embed`, the
// benches and later the server embed texts.
//
//   qkv::tasks::Embedder e("models/bert-base-uncased");        // loads the directory once
//   auto v = e.embed({{"a fine film"}, {"question", "answer", true}}, {.pooling = Pooling::mean});
//
// Each input becomes [CLS] a [SEP] (pairs: [CLS] a [SEP] b [SEP], segment 1 for b and its [SEP]),
// cut to max_position_embeddings tokens (pairs: the longer text loses its last token first, a
// tie cutting b: Hugging Face's "longest_first", text::truncate_longest_first), and inputs run in
// batches of batch_size rows packed end to end without padding (Bert::hidden_packed), so a row's
// vector does not depend on what shares its batch beyond the products' rounding. Pooling:
//   cls   the last hidden state at [CLS] (sentence-transformers' CLS pooling; not the pooler);
//   mean  the average of the last hidden states over the row's tokens, [CLS] and [SEP] included;
// then, on request, divided by its L2 norm (max(||v||, 1e-12), torch.nn.functional.normalize).
#pragma once
#include <string>
#include <vector>

#include "qkv/io/bert.h"
#include "qkv/kernels/bf16.h"
#include "qkv/tasks/cls_data.h"

namespace qkv::tasks {

enum class Pooling { cls, mean };
Pooling parse_pooling(const std::string& name);  // "cls" | "mean"; anything else throws naming it

struct EmbedOptions {
  Pooling pooling = Pooling::cls;
  bool normalize = false;
  int64_t batch_size = 32;
  // Matrix products in fp32, or in bf16 (kernels/bf16.h): every weight converted once to bf16 in
  // oneDNN's layout and cached with the model (rebuilt only when a weight changes), activations
  // rounded per product, f32 accumulation; softmax, layer norm and reductions stay fp32. bf16 needs
  // AMX or AVX512_BF16 (a qkv::Error otherwise).
  // Or int8 (kernels/int8.h): the weights of at least kernels::int8_min_weight_elements() values
  // quantized once per output channel and cached likewise, activations per row, exact int32 sums;
  // smaller weights and products of two activations stay fp32. int8 needs AVX512-VNNI or AMX.
  kernels::MatmulPrecision precision = kernels::MatmulPrecision::fp32;
};

struct SentenceEmbedding {
  std::vector<float> vector;  // (hidden_size)
  bool truncated = false;     // the input was cut to max_position_embeddings tokens
};

class Embedder {
 public:
  // io::load_bert without heads (their tensors are ignored), eval mode. The directory needs a
  // tokenizer (tokenizer.json or vocab.txt) with [CLS] and [SEP].
  // precision bf16 / int8: the weights held in bf16 / int8 as they are read (see
  // hold_weights_in_bf16 / _in_int8).
  explicit Embedder(const std::string& model_dir, kernels::MatmulPrecision precision = kernels::MatmulPrecision::fp32);
  explicit Embedder(io::BertBundle bundle);  // a model in memory (shared, not copied)

  std::vector<SentenceEmbedding> embed(const std::vector<ClsInput>& inputs, const EmbedOptions& opt = {}) const;
  int64_t dim() const { return bundle_.config.hidden_size; }
  // bf16 inference in half the weight memory (nn::Module::hold_weights_in_bf16): afterwards every
  // call must ask for precision bf16 (an fp32 or int8 call is an error naming a weight). The
  // commands call it when --precision is bf16.
  void hold_weights_in_bf16() { bundle_.bert->hold_weights_in_bf16(); }
  // int8 inference in a quarter of the weight memory (nn::Module::hold_weights_in_int8), likewise
  // (every call at precision int8 afterwards).
  void hold_weights_in_int8() { bundle_.bert->hold_weights_in_int8(); }
  const io::BertBundle& bundle() const { return bundle_; }

 private:
  io::BertBundle bundle_;
};

}  // namespace qkv::tasks
