// qkv/tasks/classifier.h - a loaded text classifier answering batches: the one way `qkv
// classify`, `qkv eval-classify` and training's validation classify.
//
//   qkv::tasks::Classifier c("runs/sst/model");               // loads the directory once
//   auto r = c.classify({{"a fine film"}, {"dull", "", false}});
//   std::cout << r[0].label << " " << r[0].probability << "\n";
//
// Today it holds a GPT fine-tuned for classification (io/gpt2_cls.h): each input becomes
// [START] a [EXTRACT] or [START] a [DELIM] b [EXTRACT], truncated to the model's max_len, and
// inputs are run in right-padded batches of similar length (which does not change any result:
// train/cls_stream.h) and answered in input order.
#pragma once
#include <string>
#include <vector>

#include "qkv/io/gpt2_cls.h"
#include "qkv/tasks/cls_data.h"

namespace qkv::tasks {

struct ClassifyOptions {
  int64_t batch_size = 32;
  bool all_probabilities = false;  // fill Classification::probabilities
};

struct Classification {
  int64_t label_id = 0;
  std::string label;
  double probability = 0;              // softmax probability of the label
  std::vector<double> probabilities;   // per label id, on request
  bool truncated = false;              // the input was cut to max_len tokens
};

class Classifier {
 public:
  explicit Classifier(const std::string& model_dir);  // io::load_gpt2_classifier, eval mode
  // A model already in memory, e.g. the one being trained (shared, not copied; its mode is set to
  // eval during classify() and restored after).
  explicit Classifier(io::GptClassifierBundle bundle);

  // Inputs must all be single texts, or all pairs, as the model was trained (qkv::Error naming
  // the input's 1-based index otherwise).
  std::vector<Classification> classify(const std::vector<ClsInput>& inputs, const ClassifyOptions& opt = {}) const;

  const std::vector<std::string>& labels() const { return bundle_.labels; }
  bool pairs() const { return bundle_.pairs; }
  const io::GptClassifierBundle& bundle() const { return bundle_; }

 private:
  io::GptClassifierBundle bundle_;
};

}  // namespace qkv::tasks
