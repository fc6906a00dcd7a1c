#include "qkv/ops/embedding.h"

#include <algorithm>
#include <vector>

#include "qkv/autograd/node.h"
#include "qkv/kernels/index.h"

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

struct EmbeddingBackward : Node {
  std::vector<int64_t> ids;  // (N) flattened
  int64_t padding_idx = -1;
  const char* name() const override { return "EmbeddingBackward"; }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    // out[n] = weight[ids[n]]  ->  dweight[ids[n]] += gy[n] (except the padding row)
    const Shape& ws = input_shapes[1];
    Tensor gy = g[0].contiguous();
    Tensor gw = Tensor::zeros(ws, gy.dtype());
    kernels::embedding_backward(gy, ids, padding_idx, gw);
    return {Tensor(), gw};
  }
  void release_saved() override { ids.clear(); }
};

}  // namespace

Tensor embedding(const Tensor& ids, const Tensor& weight, int64_t padding_idx) {
  check_defined(ids, "embedding", "ids");
  QKV_CHECK(ids.dtype() == DType::i64 || ids.dtype() == DType::i32, "embedding", "ids must be i32 or i64, got ",
            ids.str());
  const bool held = weight.dtype() == DType::bf16 || weight.dtype() == DType::i8;  // held in bf16 or int8
  if (!held) check_floating(weight, "embedding", "weight");
  QKV_CHECK(weight.ndim() == 2, "embedding", "weight must be (V, D), got ", weight.str());
  int64_t V = weight.shape()[0], D = weight.shape()[1];
  QKV_CHECK(padding_idx >= -1 && padding_idx < V, "embedding", "padding_idx must be -1 (none) or in [0, ", V,
            "), got ", padding_idx);
  QKV_CHECK(ids.ndim() < kMaxDims, "embedding", "ids ", ids.str(), " has too many axes (max ", kMaxDims - 1, ")");
  std::vector<int64_t> idv = checked_ids(ids, V);
  Shape os = ids.shape();
  os.push_back(D);
  // A table held in bf16 or int8 (nn::Module::hold_weights_in_bf16 / _in_int8) looks up f32 rows;
  // it needs no gradient.
  Tensor out = Tensor::empty(os, held ? DType::f32 : weight.dtype());
  kernels::embedding_forward(weight.contiguous(), idv, out);
  if (any_requires_grad({weight})) {
    auto node = make_node<EmbeddingBackward>({ids, weight});
    node->ids = std::move(idv);
    node->padding_idx = padding_idx;
    set_history(out, node);
  }
  return out;
}

}  // namespace qkv
