// BertConfig (models/bert.h): Hugging Face's BertConfig keys, read strictly; the model built from
// it checks its inputs against the config's tables. Outputs against PyTorch: tests/io/test_bert.cpp.
#include <gtest/gtest.h>

#include "helpers.h"
#include "qkv/autograd/node.h"
#include "qkv/models/bert.h"

using namespace qkv;

namespace {

using qkv::testing::error_of;

models::BertConfig tiny() {
  models::BertConfig c;
  c.vocab_size = 30;
  c.hidden_size = 16;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.intermediate_size = 24;
  c.max_position_embeddings = 8;
  return c;
}

}  // namespace

TEST(BertConfig, ThePublishedBertBaseUncasedConfigReads) {
  // config.json of the published bert-base-uncased checkpoint, as its repository has it.
  nlohmann::json j = nlohmann::json::parse(R"({
    "architectures": ["BertForMaskedLM"], "attention_probs_dropout_prob": 0.1, "gradient_checkpointing": false,
    "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": 768, "initializer_range": 0.02,
    "intermediate_size": 3072, "layer_norm_eps": 1e-12, "max_position_embeddings": 512, "model_type": "bert",
    "num_attention_heads": 12, "num_hidden_layers": 12, "pad_token_id": 0, "position_embedding_type": "absolute",
    "transformers_version": "4.6.0.dev0", "type_vocab_size": 2, "use_cache": true, "vocab_size": 30522})");
  models::BertConfig c = j.get<models::BertConfig>();
  EXPECT_EQ(c.vocab_size, 30522);
  EXPECT_EQ(c.hidden_size, 768);
  EXPECT_EQ(c.num_hidden_layers, 12);
  EXPECT_EQ(c.num_attention_heads, 12);
  EXPECT_EQ(c.intermediate_size, 3072);
  EXPECT_EQ(c.max_position_embeddings, 512);
  EXPECT_EQ(c.type_vocab_size, 2);
  EXPECT_DOUBLE_EQ(c.layer_norm_eps, 1e-12);
  EXPECT_EQ(c.hidden_act, "gelu");
  models::BlockOptions o = c.block_options();
  EXPECT_FALSE(o.pre_norm);  // post-LN
  EXPECT_EQ(o.activation, nn::Activation::gelu);
  EXPECT_EQ(o.activation_dropout, 0.0);
  // to_json -> from_json is the identity
  models::BertConfig again = nlohmann::json(c).get<models::BertConfig>();
  EXPECT_EQ(nlohmann::json(again), nlohmann::json(c));
}

TEST(BertConfig, ActivationsAndBadKeysNameTheKey) {
  auto with = [](const char* key, nlohmann::json v) {
    nlohmann::json j = tiny();
    j[key] = v;
    return j;
  };
  EXPECT_EQ(with("hidden_act", "gelu_new").get<models::BertConfig>().block_options().activation, nn::Activation::gelu_tanh);
  EXPECT_EQ(with("hidden_act", "gelu_pytorch_tanh").get<models::BertConfig>().block_options().activation,
            nn::Activation::gelu_tanh);
  EXPECT_EQ(with("hidden_act", "relu").get<models::BertConfig>().block_options().activation, nn::Activation::relu);
  EXPECT_EQ(with("hidden_act", "silu").get<models::BertConfig>().block_options().activation, nn::Activation::silu);
  EXPECT_NE(error_of([&] { with("hidden_act", "quick_gelu").get<models::BertConfig>(); }).find("hidden_act"),
            std::string::npos);
  EXPECT_NE(error_of([&] { with("hidden_sise", 16).get<models::BertConfig>(); }).find("hidden_sise"), std::string::npos);
  const std::string rel = error_of([&] { with("position_embedding_type", "relative_key").get<models::BertConfig>(); });
  EXPECT_NE(rel.find("position_embedding_type"), std::string::npos) << rel;
  EXPECT_NE(rel.find("relative_key"), std::string::npos) << rel;
  EXPECT_NE(error_of([&] { with("num_attention_heads", 3).get<models::BertConfig>(); }).find("num_attention_heads"),
            std::string::npos);
  EXPECT_NE(error_of([&] { with("add_cross_attention", true).get<models::BertConfig>(); }).find("add_cross_attention"),
            std::string::npos);
  EXPECT_NE(error_of([&] { with("model_type", "roberta").get<models::BertConfig>(); }).find("model_type"),
            std::string::npos);
  EXPECT_NO_THROW(with("classifier_dropout", nullptr).get<models::BertConfig>());  // no architecture: ignored
}

TEST(Bert, InputsOutsideTheConfigsTablesAreErrorsNamingTheKey) {
  models::Bert bert(tiny());
  bert.eval();
  NoGradGuard ng;
  EXPECT_EQ(bert.forward(Tensor::full({2, 8}, 3, DType::i64)).hidden.shape(), Shape({2, 8, 16}));
  EXPECT_EQ(bert.forward(Tensor::full({2, 8}, 3, DType::i64)).pooled.shape(), Shape({2, 16}));
  EXPECT_NE(error_of([&] { bert.hidden(Tensor::full({1, 9}, 3, DType::i64)); }).find("max_position_embeddings"),
            std::string::npos);
  EXPECT_NE(error_of([&] { bert.hidden(Tensor::full({1, 4}, 30, DType::i64)); }).find("vocab_size"), std::string::npos);
  EXPECT_NE(error_of([&] { bert.hidden(Tensor::full({1, 4}, 3, DType::i64), Tensor::full({1, 4}, 2, DType::i64)); })
                .find("type_vocab_size"),
            std::string::npos);
  EXPECT_NE(error_of([&] { bert.hidden(Tensor::full({1, 4}, 3, DType::i64), Tensor::full({1, 3}, 0, DType::i64)); })
                .find("token_type_ids"),
            std::string::npos);
}

TEST(Bert, InitialisationIsHuggingFaces) {
  models::BertConfig c = tiny();
  c.pad_token_id = 1;
  Generator g(5);
  models::Bert bert(c, g);
  const Tensor& w = bert.embeddings->word_embeddings->weight;  // (V, D): the padding row is zero
  for (int64_t j = 0; j < c.hidden_size; ++j) EXPECT_EQ(w.data<float>()[c.hidden_size + j], 0.f);
  for (float v : bert.pooler->dense->bias.to_vector<float>()) EXPECT_EQ(v, 0.f);
  for (float v : bert.embeddings->layer_norm->weight.to_vector<float>()) EXPECT_EQ(v, 1.f);
  double sq = 0;  // normal(0, 0.02): the sample standard deviation of 16 x 16 values within 10%
  for (float v : bert.pooler->dense->weight.to_vector<float>()) sq += double(v) * v;
  EXPECT_NEAR(std::sqrt(sq / 256), 0.02, 0.002);
}
