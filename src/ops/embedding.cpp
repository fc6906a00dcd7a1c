#include "qkv/ops/embedding.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "qkv/autograd/node.h"
#include "qkv/kernels/elementwise.h"

namespace qkv {
namespace {

// ids as i64, checked against [0, V).
std::vector<int64_t> checked_ids(const Tensor& ids, int64_t V) {
  std::vector<int64_t> v = ids.dtype() == DType::i64 ? ids.to_vector<int64_t>()
                                                    : [&] {
                                                        std::vector<int32_t> w = ids.to_vector<int32_t>();
                                                        return std::vector<int64_t>(w.begin(), w.end());
                                                      }();
  for (size_t i = 0; i < v.size(); ++i)
    QKV_CHECK(v[i] >= 0 && v[i] < V, "embedding", "id ", v[i], " at flat position ", i, " of ids ", ids.str(),
              " is out of range for a vocabulary of V = ", V);
  return v;
}

template <typename Fn>
void dispatch_float(DType t, Fn&& fn) {
  if (t == DType::f32) fn(float{});
  else fn(double{});
}

struct EmbeddingBackward : Node {
  std::vector<int64_t> ids;  // (N) flattened
  int64_t padding_idx = -1;
  const char* name() const override { return "EmbeddingBackward"; }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    // out[n] = weight[ids[n]]  ->  dweight[ids[n]] += gy[n] (except the padding row)
    const Shape& ws = input_shapes[1];
    int64_t V = ws[0], D = ws[1], N = int64_t(ids.size());
    Tensor gy = g[0].contiguous();
    Tensor gw = Tensor::zeros(ws, gy.dtype());
    dispatch_float(gy.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* gp = gy.data<T>();
      T* wp = gw.data<T>();
      // Threads own column tiles; each walks all ids in order, so sums are deterministic.
      constexpr int64_t kTile = 64;
      int64_t tiles = (D + kTile - 1) / kTile;
#pragma omp parallel for schedule(static) if (N * D >= kernels::kParallelGrain && tiles > 1)
      for (int64_t t = 0; t < tiles; ++t) {
        int64_t j0 = t * kTile, j1 = std::min(D, j0 + kTile);
        for (int64_t n = 0; n < N; ++n) {
          int64_t id = ids[size_t(n)];
          if (id == padding_idx) continue;
          T* dst = wp + id * D;
          const T* src = gp + n * D;
#pragma omp simd
          for (int64_t j = j0; j < j1; ++j) dst[j] += src[j];
        }
      }
      (void)V;
    });
    return {Tensor(), gw};
  }
  void release_saved() override { ids.clear(); }
};

}  // namespace

Tensor embedding(const Tensor& ids, const Tensor& weight, int64_t padding_idx) {
  check_defined(ids, "embedding", "ids");
  QKV_CHECK(ids.dtype() == DType::i64 || ids.dtype() == DType::i32, "embedding", "ids must be i32 or i64, got ",
            ids.str());
  check_floating(weight, "embedding", "weight");
  QKV_CHECK(weight.ndim() == 2, "embedding", "weight must be (V, D), got ", weight.str());
  int64_t V = weight.shape()[0], D = weight.shape()[1];
  QKV_CHECK(padding_idx >= -1 && padding_idx < V, "embedding", "padding_idx must be -1 (none) or in [0, ", V,
            "), got ", padding_idx);
  QKV_CHECK(ids.ndim() < kMaxDims, "embedding", "ids ", ids.str(), " has too many axes (max ", kMaxDims - 1, ")");
  std::vector<int64_t> idv = checked_ids(ids, V);
  Shape os = ids.shape();
  os.push_back(D);
  Tensor out = Tensor::empty(os, weight.dtype());
  Tensor wc = weight.contiguous();
  size_t row_bytes = size_t(D) * dtype_size(weight.dtype());
  const char* wp = static_cast<const char*>(wc.raw_data());
  char* op = static_cast<char*>(out.raw_data());
  int64_t N = int64_t(idv.size());
#pragma omp parallel for schedule(static) if (N * D >= kernels::kParallelGrain)
  for (int64_t n = 0; n < N; ++n) std::memcpy(op + size_t(n) * row_bytes, wp + size_t(idv[size_t(n)]) * row_bytes, row_bytes);
  if (any_requires_grad({weight})) {
    auto node = make_node<EmbeddingBackward>({ids, weight});
    node->ids = std::move(idv);
    node->padding_idx = padding_idx;
    set_history(out, node);
  }
  return out;
}

}  // namespace qkv
