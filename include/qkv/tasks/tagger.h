// qkv/tasks/tagger.h - a loaded BERT token classifier answering batches of sentences: the one way
// `qkv tag`, `qkv eval-tag` and training's validation tag words.
//
//   qkv::tasks::Tagger t("runs/ner/model");                  // loads the directory once
//   auto r = t.tag({{"Install", "foo", "2.1"}});
//   r[0].tags  // {"O", "B-PKG", "B-VER"}
//
// Each word is split into pieces on its own and predicted from its first piece; sentences longer
// than max_position_embeddings - 2 pieces are tagged in overlapping windows of whole words, each
// word read from the window where it has the most context (text/word_alignment.h), so every
// word gets a tag; the result says how many windows a sentence took. Windows run in batches
// packed end to end without padding (Bert::hidden_packed: results do not depend on the batch
// beyond float rounding).
#pragma once
#include <string>
#include <vector>

#include "qkv/io/bert_tagger.h"
#include "qkv/kernels/bf16.h"

namespace qkv::tasks {

struct TagOptions {
  int64_t batch_size = 32;   // windows per batch
  int64_t max_len = 0;       // pieces per window with [CLS] and [SEP] (0: max_position_embeddings)
  int64_t stride = 0;        // pieces between window starts (0: half a window)
  bool probabilities = false;  // fill Tagging::probability
  // The matrix products' precision (tasks/classifier.h's ClassifyOptions::precision): a Tagger
  // built with precision bf16 / int8 holds its weights so and must be called at that precision.
  kernels::MatmulPrecision precision = kernels::MatmulPrecision::fp32;
};

struct Tagging {
  std::vector<std::string> tags;    // one per word
  std::vector<int64_t> tag_ids;     // one per word
  std::vector<double> probability;  // softmax probability of each word's tag, on request
  int64_t windows = 1;              // > 1: the sentence was longer than one window
  int64_t words_cut = 0;            // words longer than a window: only their first pieces were read
};

class Tagger {
 public:
  // io::load_bert_tagger, eval mode. precision bf16 / int8: the weights held in bf16 / int8
  // (nn::Module::hold_weights_in_bf16 / _in_int8; the encoder's as they are read, the
  // classifier's after), so every tag() call asks for that precision.
  explicit Tagger(const std::string& model_dir,
                  kernels::MatmulPrecision precision = kernels::MatmulPrecision::fp32);
  // A model already in memory, e.g. the one being trained (shared, not copied; its mode is set to
  // eval during tag() and restored after).
  explicit Tagger(io::BertTaggerBundle bundle);

  std::vector<Tagging> tag(const std::vector<std::vector<std::string>>& sentences, const TagOptions& opt = {}) const;

  const std::vector<std::string>& labels() const { return bundle_.labels; }
  const io::BertTaggerBundle& bundle() const { return bundle_; }

 private:
  io::BertTaggerBundle bundle_;
};

}  // namespace qkv::tasks
