// qkv/tasks/classifier.h - a loaded text classifier answering batches: the one way `qkv
// classify`, `qkv eval-classify` and training's validation classify, whichever model it holds.
//
//   qkv::tasks::Classifier c("runs/sst/model");               // loads the directory once
//   auto r = c.classify({{"a fine film"}, {"dull", "", false}});
//   std::cout << r[0].label << " " << r[0].probability << "\n";
//
// It holds one of:
//   a GPT fine-tuned for classification (io/gpt2_cls.h): [START] a [EXTRACT] or
//     [START] a [DELIM] b [EXTRACT], the class read at [EXTRACT];
//   a BERT fine-tuned for classification (io/bert_cls.h): [CLS] a [SEP] or [CLS] a [SEP] b [SEP]
//     with segment ids, the class read from the pooled [CLS] state (or the mean state);
// which one a directory holds is read from its config.json (classifier_family). Inputs are
// truncated to the model's max_len (train/cls_stream.h), run in right-padded batches of similar
// length (which does not change any result: padding keys are masked) and answered in input order.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "qkv/io/bert_cls.h"
#include "qkv/io/gpt2_cls.h"
#include "qkv/kernels/bf16.h"
#include "qkv/tasks/cls_data.h"
#include "qkv/train/cls_stream.h"

namespace qkv::tasks {

struct ClassifyOptions {
  int64_t batch_size = 32;
  bool all_probabilities = false;  // fill Classification::probabilities
  // Matrix products in fp32, or in bf16 (kernels/bf16.h): every weight converted once to bf16 in
  // oneDNN's layout and cached with the model (rebuilt only when a weight changes), activations
  // rounded per product, f32 accumulation; softmax, layer norm and reductions stay fp32. bf16 needs
  // AMX or AVX512_BF16 (a qkv::Error otherwise).
  // Or int8 (kernels/int8.h): the weights of at least kernels::int8_min_weight_elements() values
  // quantized once per output channel and cached likewise, activations per row, exact int32 sums;
  // smaller weights and products of two activations stay fp32. int8 needs AVX512-VNNI or AMX.
  kernels::MatmulPrecision precision = kernels::MatmulPrecision::fp32;
};

struct Classification {
  int64_t label_id = 0;
  std::string label;
  double probability = 0;              // softmax probability of the label
  std::vector<double> probabilities;   // per label id, on request
  bool truncated = false;              // the input was cut to max_len tokens
};

enum class ClassifierFamily { gpt, bert };
// config.json's "model_type" ("gpt2" / "openai-gpt" or "bert"), else its "architectures"
// (GPT2... / Bert...); anything else is an error naming the file and the field.
ClassifierFamily classifier_family(const std::string& model_dir);

class Classifier {
 public:
  // Either family, eval mode. precision bf16 / int8: the weights held in bf16 / int8 as they are
  // read (see hold_weights_in_bf16 / _in_int8).
  explicit Classifier(const std::string& model_dir,
                      kernels::MatmulPrecision precision = kernels::MatmulPrecision::fp32);
  // A model already in memory, e.g. the one being trained (shared, not copied; its mode is set to
  // eval during classify() and restored after).
  explicit Classifier(io::GptClassifierBundle bundle);
  explicit Classifier(io::BertClassifierBundle bundle);

  // Inputs must be of the kind the model takes (accepts(); qkv::Error naming the input's 1-based
  // index otherwise).
  std::vector<Classification> classify(const std::vector<ClsInput>& inputs, const ClassifyOptions& opt = {}) const;

  const std::vector<std::string>& labels() const;
  bool pairs() const;
  // Whether an input of this kind is taken: the kind the model was trained on, or either kind for
  // a BERT directory that does not say (BertClassifierBundle::pairs_declared).
  bool accepts(bool pair) const;
  // read_cls_inputs' `pairs` argument for this model: 1 pairs, 0 single texts, -1 the first line decides.
  int input_pairs() const { return accepts(true) && accepts(false) ? -1 : pairs() ? 1 : 0; }
  int64_t max_len() const;
  ClassifierFamily family() const { return bert_ ? ClassifierFamily::bert : ClassifierFamily::gpt; }

  // What training shares with classify(): an input as the model reads it (label 0), the logits
  // of a batch of such inputs (B, C) in the model's current mode, the module, and saving.
  train::ClsExample encode(const ClsInput& x, bool* truncated = nullptr) const;
  Tensor logits(const train::ClsBatch& batch) const;
  nn::Module& module() const;
  void save(const std::string& dir) const;  // the family's layout, each file atomically

  // bf16 inference in half the weight memory (nn::Module::hold_weights_in_bf16): afterwards every
  // call must ask for precision bf16 (an fp32 or int8 call is an error naming a weight). The
  // commands call it when --precision is bf16.
  void hold_weights_in_bf16();
  // int8 inference in a quarter of the weight memory (nn::Module::hold_weights_in_int8), likewise
  // (every call at precision int8 afterwards).
  void hold_weights_in_int8();
  const io::GptClassifierBundle* gpt() const { return gpt_.get(); }    // null for BERT
  const io::BertClassifierBundle* bert() const { return bert_.get(); }  // null for GPT

 private:
  std::shared_ptr<io::GptClassifierBundle> gpt_;
  std::shared_ptr<io::BertClassifierBundle> bert_;
};

}  // namespace qkv::tasks
