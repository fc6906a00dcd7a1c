// tasks::Embedder against tools/refs/models_bert.py's sentence embeddings: the reference's BERT
// (PyTorch, float64) embeds texts and pairs written with the model's vocab.txt words (some longer
// than the position table, cut longest-first), with [CLS] and mean pooling over the real tokens,
// and mean pooling L2-normalised. f32: rtol 1e-5, atol 1e-6.
#include "qkv/tasks/embedder.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "ref.h"

using namespace qkv;
using namespace qkv::testing;
namespace fs = std::filesystem;

namespace {

Tensor as_tensor(const std::vector<tasks::SentenceEmbedding>& v) {
  std::vector<float> flat;
  for (auto& e : v) flat.insert(flat.end(), e.vector.begin(), e.vector.end());
  return Tensor::from_vector(flat, {int64_t(v.size()), int64_t(v.at(0).vector.size())});
}

}  // namespace

TEST(Embedder, ClsAndMeanPoolingOfTextsAndPairsMatchTorch) {
  RefFile ref("models_bert");
  for (const std::string c : {"embed_single", "embed_pairs", "embed_truncated"}) {
    SCOPED_TRACE(c);
    auto p = ref.params(c);
    const tasks::Embedder emb((fs::path(ref_dir()) / p["dir"].get<std::string>()).string());
    std::vector<tasks::ClsInput> inputs;
    for (size_t i = 0; i < p["texts"].size(); ++i) {
      tasks::ClsInput x{p["texts"][i].get<std::string>(), "", !p["pairs"].is_null() && !p["pairs"][i].is_null()};
      if (x.pair) x.b = p["pairs"][i].get<std::string>();
      inputs.push_back(x);
    }
    for (int64_t bs : {1, 2, 32}) {  // one batch, or several of similar lengths: the same vectors
      SCOPED_TRACE(bs);
      tasks::EmbedOptions o;
      o.batch_size = bs;
      o.pooling = tasks::Pooling::cls;
      EXPECT_CLOSE(as_tensor(emb.embed(inputs, o)), ref.get(c, "cls"), kF32);
      o.pooling = tasks::Pooling::mean;
      EXPECT_CLOSE(as_tensor(emb.embed(inputs, o)), ref.get(c, "mean"), kF32);
      o.normalize = true;
      auto normalized = emb.embed(inputs, o);
      EXPECT_CLOSE(as_tensor(normalized), ref.get(c, "mean_normalized"), kF32);
      for (auto& e : normalized) EXPECT_EQ(e.truncated, c == "embed_truncated");
    }
  }
}

TEST(Embedder, LongInputsAreCutToThePositionTable) {
  RefFile ref("models_bert");
  const tasks::Embedder emb((fs::path(ref_dir()) / "models_bert/pretraining").string());
  std::string long_text;  // 30 words for a 16-position table
  for (int i = 0; i < 30; ++i) long_text += "w" + std::to_string(i) + " ";
  auto v = emb.embed({{long_text, "", false}, {"w1 w2", long_text, true}, {"w3", "", false}});
  EXPECT_TRUE(v[0].truncated);
  EXPECT_TRUE(v[1].truncated);
  EXPECT_FALSE(v[2].truncated);
  EXPECT_EQ(int64_t(v[0].vector.size()), emb.dim());
  EXPECT_THROW(tasks::parse_pooling("max"), Error);
}
