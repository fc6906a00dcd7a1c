// Position ids past a GPT's position table are named as positions, in a forward pass and in a
// cached decoding step (they were reported as token ids: "embedding: id 9 ... out of range for a
// vocabulary of V = 4", the position table's size taken for the vocabulary's).
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "qkv/models/gpt.h"
#include "qkv/tensor/tensor.h"
#include "qkv/util/error.h"
#include "tiny_models.h"

using namespace qkv;

TEST(GptPositions, PositionIdsOutsideTheTableAreNamed) {
  io::GptBundle b = qkv_test::tiny_gpt(4);
  b.model->eval();
  const Tensor ids = Tensor::from_vector<int64_t>({3, 4}, {1, 2});
  auto expect_named = [](const std::function<void()>& f, const std::string& want) {
    try {
      f();
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  expect_named([&] { b.model->forward(ids, {}, Tensor::from_vector<int64_t>({0, 9}, {1, 2})); },
               "position id 9 is outside [0, n_positions = 4)");
  expect_named([&] { b.model->forward(ids, {}, Tensor::from_vector<int64_t>({-1, 0}, {1, 2})); },
               "position id -1 is outside");
  models::GptCache cache = b.model->start();
  expect_named([&] { b.model->step(ids, cache, Tensor::from_vector<int64_t>({4, 5}, {1, 2})); },
               "Gpt::step: position id 4 is outside [0, n_positions = 4)");
  EXPECT_NO_THROW(b.model->forward(ids, {}, Tensor::from_vector<int64_t>({2, 3}, {1, 2})));
}
