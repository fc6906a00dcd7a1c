#include "qkv/ops/packed.h"

#include "qkv/autograd/node.h"
#include "qkv/kernels/int8.h"
#include "qkv/ops/elementwise.h"
#include "qkv/ops/matmul.h"
#include "qkv/ops/shape.h"

namespace qkv {

Tensor linear_packed(const Tensor& x, const kernels::PackedLinear& w) {
  QKV_CHECK(w.defined(), "linear_packed", "the packed weight is empty");
  DType wdt = w.weight.defined() ? w.weight.dtype() : w.rows[0].dtype();  // a stacked pack may have no `weight`
  if (wdt == DType::bf16 || wdt == DType::i8) wdt = DType::f32;  // weights held in bf16 / int8 multiply f32 x
  QKV_CHECK(x.defined() && x.ndim() >= 1 && x.size(-1) == w.K && x.dtype() == wdt, "linear_packed",
            "expected x (..., ", w.K, ") ", dtype_name(wdt), ", got ",
            x.defined() ? x.str() : std::string("undefined"));
  if (grad_enabled()) {
    bool weight_grad = w.weight.defined() && w.weight.requires_grad();
    for (const Tensor& r : w.rows) weight_grad = weight_grad || r.requires_grad();
    if (x.requires_grad() || weight_grad)  // recorded: a stacked pack's weights concatenated (differentiable)
      return linear(x, w.weight.defined() ? w.weight : concat(w.rows, 0), w.bias);
  }
  std::vector<int64_t> os = x.shape().vec();
  os.back() = w.N;
  if (w.K == 0) {  // an empty sum (R = numel / K divided by zero): every row is the bias, or 0
    Tensor out = Tensor::zeros(Shape(os), x.dtype());
    return w.bias.defined() ? add(out, w.bias) : out;
  }
  const int64_t R = x.numel() / w.K;
  Tensor x2 = reshape(x.detach(), {R, w.K});  // a view when x's rows are contiguous
  if (x2.strides()[1] != 1) x2 = x2.contiguous();
  Tensor out = Tensor::empty({R, w.N}, x.dtype());
  kernels::packed_linear(x2, w, out);
  return reshape(out, Shape(os));
}

// ---------------------------------------------------------------- PackedWeights

PackedWeights& PackedWeights::operator=(const PackedWeights& other) {
  if (this != &other) {
    const Layouts layouts = other.layouts();
    std::lock_guard<std::mutex> lock(mutex_);
    sources_.clear();
    for (auto& p : packed_) p.reset();
    layout_ = layouts;
  }
  return *this;
}

void PackedWeights::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  sources_.clear();
  for (auto& p : packed_) p.reset();
}

void PackedWeights::set_layout(kernels::PackLayout layout) {
  for (auto p : {kernels::MatmulPrecision::fp32, kernels::MatmulPrecision::bf16, kernels::MatmulPrecision::int8})
    set_layout(layout, p);
}

void PackedWeights::set_layout(kernels::PackLayout layout, kernels::MatmulPrecision precision) {
  const size_t i = size_t(precision);  // fp32 0, bf16 1, int8 2: packed_'s index too
  std::lock_guard<std::mutex> lock(mutex_);
  if (layout_[i] == layout) return;
  layout_[i] = layout;
  packed_[i].reset();  // made in the other layout
}

kernels::PackLayout PackedWeights::layout(kernels::MatmulPrecision precision) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return layout_[size_t(precision)];
}

PackedWeights::Layouts PackedWeights::layouts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return layout_;
}

PackedWeights::Source PackedWeights::source_of(const Tensor& t) {
  if (!t.defined()) return {};
  return {t.impl_ptr(), t.storage(), t.offset(), t.shape(), t.strides(), t.storage()->version()};
}

bool PackedWeights::Source::same_as(const Tensor& t) const {
  if (!t.defined()) return impl == nullptr;
  return impl == t.impl_ptr() && storage == t.storage() && offset == t.offset() && shape == t.shape() &&
         strides == t.strides() && version == t.storage()->version();
}

std::shared_ptr<const kernels::PackedLinear> PackedWeights::get(const std::vector<Tensor>& weights,
                                                                const std::vector<Tensor>& biases,
                                                                kernels::MatmulPrecision precision) const {
  QKV_CHECK(!weights.empty() && (biases.empty() || biases.size() == weights.size()), "PackedWeights",
            "expected one or more weights and a bias per weight (or none), got ", weights.size(), " weights and ",
            biases.size(), " biases");
  std::lock_guard<std::mutex> lock(mutex_);
  const bool held_int8 = weights[0].defined() && weights[0].dtype() == DType::i8;
  if (precision == kernels::MatmulPrecision::int8 && !held_int8) {  // a weight too small to pay keeps the fp32 form
    int64_t N = 0;
    for (const Tensor& w : weights) N += w.defined() && w.ndim() == 2 ? w.size(0) : 0;
    const int64_t K = weights[0].defined() && weights[0].ndim() == 2 ? weights[0].size(1) : 0;
    if (!kernels::int8_pays(N, K) && !kernels::int8_pays_from_rows(N, K)) precision = kernels::MatmulPrecision::fp32;
  }
  auto& packed = packed_[size_t(precision)];
  bool fresh = sources_.size() == weights.size() + biases.size();
  for (size_t i = 0; fresh && i < weights.size(); ++i) fresh = sources_[i].same_as(weights[i]);
  for (size_t i = 0; fresh && i < biases.size(); ++i) fresh = sources_[weights.size() + i].same_as(biases[i]);
  if (fresh && packed != nullptr) return packed;
  if (!fresh)
    for (auto& p : packed_) p.reset();  // every form was made from the old sources
  NoGradGuard ng;
  std::vector<Source> src;
  for (const Tensor& w : weights) src.push_back(source_of(w));
  for (const Tensor& b : biases) src.push_back(source_of(b));
  const bool has_bias = !biases.empty() && biases[0].defined();
  for (const Tensor& b : biases)
    QKV_CHECK(b.defined() == has_bias, "PackedWeights", "either every weight has a bias or none does");
  Tensor b = !has_bias ? Tensor() : biases.size() == 1 ? biases[0] : concat(biases, 0);  // (N)
  bool rows = layout_[size_t(precision)] == kernels::PackLayout::rows;
  for (const Tensor& w : weights)  // f32, or held in bf16 / int8 (their precision only: the kernels refuse the rest)
    rows = rows && w.defined() && (w.dtype() == DType::f32 || w.dtype() == DType::bf16 || w.dtype() == DType::i8) &&
           w.ndim() == 2 && w.is_contiguous();
  if (held_int8) {  // the rows read in place (or joined once); in the panels layout also oneDNN's blocked copy
    const bool blocked = layout_[size_t(precision)] == kernels::PackLayout::panels;
    packed = std::make_shared<const kernels::PackedLinear>(kernels::pack_linear_rows(weights, b, precision, blocked));
  } else if (rows) {  // fp32: the weights read where they are, nothing copied but the bias; bf16 / int8: one copy
    packed = std::make_shared<const kernels::PackedLinear>(kernels::pack_linear_rows(weights, b, precision));
  } else {
    Tensor w = weights.size() == 1 ? weights[0] : Tensor();  // (N, K)
    if (!w.defined()) {  // stacked; held in bf16: widened first (concat is for f32 / f64), a temporary
      std::vector<Tensor> parts;
      for (const Tensor& r : weights) parts.push_back(r.dtype() == DType::bf16 ? r.to(DType::f32) : r);
      w = concat(parts, 0);  // a bf16 pack rounds it back to the same bits
    }
    kernels::PackedLinear p = kernels::pack_linear(w, b, precision);
    if (weights.size() > 1 && (p.bf16 || p.bf16_panels || p.int8) && !p.panels.defined()) {
      // No product reads the joined copy (GPT-2's query, key and value in int8: 81 MiB): the
      // fallbacks join the originals when they need them (PackedLinear::original_weight).
      p.weight = Tensor();
      p.rows = weights;
    }
    packed = std::make_shared<const kernels::PackedLinear>(std::move(p));
  }
  sources_ = std::move(src);
  return packed;
}

bool use_cached_low_precision(const Tensor& x, const Tensor& w) {
  if (w.defined() && (w.dtype() == DType::bf16 || w.dtype() == DType::i8)) {  // held: no other product reads it
    const bool bf16 = w.dtype() == DType::bf16;
    const char* held = bf16 ? "bf16" : "int8";
    const kernels::MatmulPrecision p = kernels::matmul_precision();
    QKV_CHECK(p == (bf16 ? kernels::MatmulPrecision::bf16 : kernels::MatmulPrecision::int8), "product", "the weight ",
              w.str(), " is held in ", held, " (nn::Module::hold_weights_in_", held,
              "): products against it run at matmul precision ", held, ", got ", kernels::precision_name(p));
    QKV_CHECK(x.defined() && x.dtype() == DType::f32 && !(grad_enabled() && x.requires_grad()), "product",
              "a weight held in ", held, " is for inference: expected f32 x not recorded for backward, got ",
              x.defined() ? x.str() : std::string("undefined"), x.requires_grad() ? " requiring grad" : "");
    return true;
  }
  return kernels::matmul_precision() != kernels::MatmulPrecision::fp32 && x.defined() && x.dtype() == DType::f32 &&
         w.dtype() == DType::f32 && !(grad_enabled() && (x.requires_grad() || w.requires_grad()));
}

}  // namespace qkv
