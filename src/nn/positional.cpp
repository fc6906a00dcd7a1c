#include "qkv/nn/positional.h"

#include <cmath>

#include "qkv/nn/init.h"
#include "qkv/ops/elementwise.h"
#include "qkv/ops/shape.h"

namespace qkv::nn {

Tensor sinusoidal_table(int64_t max_len, int64_t d, SinusoidLayout layout) {
  QKV_CHECK(d > 0 && d % 2 == 0, "SinusoidalPositionalEncoding", "d_model must be positive and even, got ", d);
  QKV_CHECK(max_len >= 0, "SinusoidalPositionalEncoding", "max_len must be >= 0, got ", max_len);
  Tensor table = Tensor::empty({max_len, d});  // (max_len, D)
  float* p = table.data<float>();
  for (int64_t pos = 0; pos < max_len; ++pos) {
    for (int64_t i = 0; i < d / 2; ++i) {
      double angle = double(pos) * std::exp(-std::log(10000.0) * double(2 * i) / double(d));
      float s = float(std::sin(angle)), c = float(std::cos(angle));
      if (layout == SinusoidLayout::interleaved) {
        p[pos * d + 2 * i] = s;
        p[pos * d + 2 * i + 1] = c;
      } else {
        p[pos * d + i] = s;
        p[pos * d + d / 2 + i] = c;
      }
    }
  }
  return table;
}

SinusoidalPositionalEncoding::SinusoidalPositionalEncoding(int64_t d, int64_t max_len, SinusoidLayout layout) {
  table_ = register_buffer("pe", sinusoidal_table(max_len, d, layout), /*persistent=*/false);
}

Tensor SinusoidalPositionalEncoding::forward(const Tensor& x, int64_t offset) const {
  QKV_CHECK(x.ndim() == 3 && x.size(2) == table_.size(1), "SinusoidalPositionalEncoding",
            "expected (B, T, ", table_.size(1), "), got ", x.str());
  int64_t T = x.size(1);
  QKV_CHECK(offset >= 0 && offset + T <= max_len(), "SinusoidalPositionalEncoding", "positions ", offset, "..",
            offset + T - 1, " exceed max_len ", max_len());
  Tensor pe = slice(table_, 0, offset, offset + T);  // (T, D), broadcast over B
  return add(x, pe);
}

LearnedPositionalEmbedding::LearnedPositionalEmbedding(int64_t max_len, int64_t d) {
  weight = register_parameter("weight", Tensor::empty({max_len, d}));
  init::normal(weight, 0.0, 1.0);
}

Tensor LearnedPositionalEmbedding::forward(const Tensor& x, int64_t offset) const {
  QKV_CHECK(x.ndim() == 3 && x.size(2) == weight.size(1), "LearnedPositionalEmbedding", "expected (B, T, ",
            weight.size(1), "), got ", x.str());
  int64_t T = x.size(1);
  QKV_CHECK(offset >= 0 && offset + T <= weight.size(0), "LearnedPositionalEmbedding", "positions ", offset, "..",
            offset + T - 1, " exceed max_len ", weight.size(0));
  return add(x, slice(weight, 0, offset, offset + T));
}

}  // namespace qkv::nn
