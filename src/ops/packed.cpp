#include "qkv/ops/packed.h"

#include "qkv/autograd/node.h"
#include "qkv/ops/matmul.h"
#include "qkv/ops/shape.h"

namespace qkv {

Tensor linear_packed(const Tensor& x, const kernels::PackedLinear& w) {
  QKV_CHECK(w.defined(), "linear_packed", "the packed weight is empty");
  QKV_CHECK(x.defined() && x.ndim() >= 1 && x.size(-1) == w.K && x.dtype() == w.weight.dtype(), "linear_packed",
            "expected x (..., ", w.K, ") ", dtype_name(w.weight.dtype()), ", got ",
            x.defined() ? x.str() : std::string("undefined"));
  if (grad_enabled() && (x.requires_grad() || w.weight.requires_grad())) return linear(x, w.weight, w.bias);
  const int64_t R = x.numel() / w.K;
  Tensor x2 = reshape(x.detach(), {R, w.K});  // a view when x's rows are contiguous
  if (x2.strides()[1] != 1) x2 = x2.contiguous();
  Tensor out = Tensor::empty({R, w.N}, x.dtype());
  kernels::packed_linear(x2, w, out);
  std::vector<int64_t> os = x.shape().vec();
  os.back() = w.N;
  return reshape(out, Shape(os));
}

}  // namespace qkv
