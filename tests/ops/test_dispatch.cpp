// Kernel dispatch: a float kernel given another dtype throws, naming the op and the dtype, at
// dispatch (one dispatch_float, src/kernels/cpu/dispatch.h). Before there was one, three ops
// had private copies that ran any non-f32 dtype as f64 over the wrong bytes.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "qkv/kernels/dropout.h"
#include "qkv/kernels/index.h"
#include "qkv/kernels/loss.h"
#include "qkv/util/error.h"

using namespace qkv;

namespace {

void expect_dispatch_error(const std::function<void()>& call, const std::string& op, const std::string& dtype) {
  try {
    call();
    ADD_FAILURE() << op << ": a " << dtype << " tensor was computed on";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(op), std::string::npos) << m;
    EXPECT_NE(m.find(dtype), std::string::npos) << m;
  }
}

}  // namespace

TEST(KernelDispatch, UnsupportedDtypesThrowNamingOpAndDtype) {
  Tensor ints = Tensor::zeros({4, 8}, DType::i64), keep = Tensor::zeros({4, 8}, DType::u8);
  Tensor out = Tensor::zeros({4, 8}, DType::i64);
  expect_dispatch_error([&] { kernels::dropout_forward(ints, 0.5, 1, 0, keep, out); }, "dropout", "i64");
  expect_dispatch_error([&] { kernels::relu_dropout_forward(ints, 0.5, 1, 0, keep, out); }, "relu_dropout", "i64");
  expect_dispatch_error([&] { kernels::add_dropout_forward(ints, ints, 0.5, 1, 0, keep, out); }, "add_dropout", "i64");
  expect_dispatch_error([&] { kernels::apply_keep_mask(ints, keep, 2.0, out); }, "dropout", "i64");
  std::vector<int64_t> ids = {0, 1, 2, 3};
  Tensor gw = Tensor::zeros({4, 8}, DType::i32);
  expect_dispatch_error([&] { kernels::embedding_backward(Tensor::zeros({4, 8}, DType::i32), ids, -1, gw); },
                        "embedding", "i32");
  Tensor rows = Tensor::zeros({4}, DType::u8);
  expect_dispatch_error([&] { kernels::nll_forward(Tensor::zeros({4, 8}, DType::u8), ids.data(), -100, rows); },
                        "nll_loss", "u8");
  expect_dispatch_error([&] { kernels::nll_backward(ids.data(), -100, Tensor::zeros({4}, DType::i64), 1.0, out); },
                        "nll_loss", "i64");
}
