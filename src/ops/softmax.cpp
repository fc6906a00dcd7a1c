#include "qkv/ops/softmax.h"

#include "qkv/autograd/node.h"
#include "qkv/ops/elementwise.h"
#include "qkv/kernels/softmax.h"

namespace qkv {
namespace {

// A view of `mask` with x's shape (stride 0 on broadcast axes); validates dtype and shape.
Tensor broadcast_mask(const Tensor& mask, const Tensor& x, const char* op) {
  DType d = mask.dtype();
  bool is_bool = d == DType::boolean || d == DType::u8;
  QKV_CHECK(is_bool || d == x.dtype(), op, "mask must be bool/u8 (true = masked out) or ", dtype_name(x.dtype()),
            " (additive), got ", mask.str(), " for x ", x.str());
  int nd = x.ndim(), lead = nd - mask.ndim();
  bool ok = lead >= 0;
  Shape st = x.shape();
  for (int k = 0; ok && k < nd; ++k) {
    int md = k - lead;
    if (md < 0 || mask.shape()[md] == 1) {
      st[k] = 0;
    } else {
      ok = mask.shape()[md] == x.shape()[k];
      st[k] = mask.strides()[md];
    }
  }
  QKV_CHECK(ok, op, "mask ", mask.str(), " does not broadcast to x ", x.str());
  return mask.as_strided(x.shape(), st, mask.offset());
}

struct SoftmaxBackward : Node {
  bool log = false;
  Tensor y;     // forward output, contiguous
  Tensor mask;  // broadcast view of the mask (or undefined)
  const char* name() const override { return log ? "LogSoftmaxBackward" : "SoftmaxBackward"; }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    Tensor gx = Tensor::empty(y.shape(), y.dtype());
    kernels::softmax_backward(y, g[0].contiguous(), mask, log, gx);
    Tensor gmask;
    if (next.size() > 1 && next[1].valid()) gmask = sum_to(gx, input_shapes[1]);  // d(x + m)/dm = 1
    std::vector<Tensor> out{next[0].valid() ? gx : Tensor()};
    if (next.size() > 1) out.push_back(gmask);
    return out;
  }
  void release_saved() override { y = mask = Tensor(); }
};

Tensor softmax_impl(const Tensor& x, const Tensor& mask, bool log) {
  const char* op = log ? "log_softmax" : "softmax";
  check_floating(x, op, "x");
  QKV_CHECK(x.ndim() >= 1, op, "x must have at least one axis, got ", x.str());
  Tensor xc = x.contiguous();
  Tensor mview = mask.defined() ? broadcast_mask(mask, x, op) : Tensor();
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  kernels::softmax_forward(xc, mview, log, out);
  bool mask_grad = mask.defined() && is_floating(mask.dtype());
  if (any_requires_grad({x, mask_grad ? mask : Tensor()})) {
    std::shared_ptr<SoftmaxBackward> node =
        mask_grad ? make_node<SoftmaxBackward>({x, mask}) : make_node<SoftmaxBackward>({x});
    node->log = log;
    node->y = node->save(out);
    node->mask = node->save(mview);
    set_history(out, node);
  }
  return out;
}

}  // namespace

Tensor softmax(const Tensor& x, const Tensor& mask) { return softmax_impl(x, mask, false); }
Tensor log_softmax(const Tensor& x, const Tensor& mask) { return softmax_impl(x, mask, true); }

}  // namespace qkv
