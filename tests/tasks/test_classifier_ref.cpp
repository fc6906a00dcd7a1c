// tasks::Classifier on a directory that PyTorch wrote in Hugging Face's
// GPT2ForSequenceClassification layout (tools/refs/gpt_classifier_dir.py): qkv's loader reads
// the layout, the tokenizer's [START]/[EXTRACT], and id2label, and its probabilities for a
// batch of texts of different lengths equal that model class's (logits at the last token before
// the padding), in one batch and one text at a time.
#include <gtest/gtest.h>

#include <filesystem>

#include "qkv/tasks/classifier.h"
#include "ref.h"

using namespace qkv;
using namespace qkv::testing;

TEST(ClassifierRef, HuggingFaceLayoutProbabilitiesMatchTorch) {
  RefFile ref("gpt_classifier_dir");
  const auto p = ref.params("batch");
  tasks::Classifier clf((std::filesystem::path(ref_dir()) / p["dir"].get<std::string>()).string());
  EXPECT_EQ(clf.labels(), p["labels"].get<std::vector<std::string>>());
  EXPECT_FALSE(clf.pairs());
  std::vector<tasks::ClsInput> inputs;
  for (auto& t : p["texts"]) inputs.push_back({t.get<std::string>(), "", false});
  const std::vector<double> want = ref.get("batch", "probs").to_vector<double>();  // (B, C)
  const size_t C = clf.labels().size();
  for (int64_t batch : {64, 1, 4}) {
    SCOPED_TRACE(batch);
    tasks::ClassifyOptions o;
    o.batch_size = batch;
    o.all_probabilities = true;
    auto got = clf.classify(inputs, o);
    ASSERT_EQ(got.size() * C, want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      size_t best = 0;
      for (size_t c = 0; c < C; ++c) {
        EXPECT_NEAR(got[i].probabilities[c], want[i * C + c], 1e-5 * want[i * C + c] + 1e-6) << i << "," << c;
        if (want[i * C + c] > want[i * C + best]) best = c;
      }
      EXPECT_EQ(got[i].label, clf.labels()[best]) << i;
      EXPECT_NEAR(got[i].probability, want[i * C + best], 1e-5 * want[i * C + best]) << i;
    }
  }
  // A pair for this single-text model is refused, naming the input.
  EXPECT_THROW(clf.classify({{"w1", "w2", true}}), Error);
}
