#include "qkv/nn/module.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "qkv/autograd/node.h"
#include "qkv/io/format/safetensors.h"
#include "qkv/io/format/safetensors_reader.h"
#include "qkv/kernels/bf16.h"
#include "qkv/kernels/int8.h"
#include "qkv/tensor/held_int8.h"

namespace qkv::nn {

void Module::check_name(const std::string& name) const {
  QKV_CHECK(!name.empty() && name.find('.') == std::string::npos, "Module", "invalid name '", name,
            "' (non-empty, no dots)");
  for (auto& [n, t] : params_) QKV_CHECK(n != name, "Module", "duplicate name '", name, "'");
  for (auto& b : buffers_) QKV_CHECK(b.name != name, "Module", "duplicate name '", name, "'");
  for (auto& [n, m] : children_) QKV_CHECK(n != name, "Module", "duplicate name '", name, "'");
}

Tensor Module::register_parameter(const std::string& name, Tensor t) {
  check_name(name);
  check_floating(t, "Module::register_parameter", name.c_str());
  t.set_requires_grad(true);
  params_.emplace_back(name, t);
  return t;
}

Tensor Module::register_buffer(const std::string& name, Tensor t, bool persistent) {
  check_name(name);
  buffers_.push_back({name, t, persistent});
  return t;
}

void Module::tie_parameter(const std::string& name, const Tensor& t) {
  for (auto& [n, p] : params_)
    if (n == name) {
      p = t;
      return;
    }
  fail("Module::tie_parameter", "no parameter named '", name, "'");
}

void Module::collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& params,
                     std::vector<std::pair<std::string, Tensor>>& bufs) const {
  for (auto& [n, t] : params_) params.emplace_back(prefix + n, t);
  for (auto& b : buffers_)
    if (b.persistent) bufs.emplace_back(prefix + b.name, b.t);
  for (auto& [n, m] : children_) m->collect(prefix + n + ".", params, bufs);
}

namespace {
std::vector<std::pair<std::string, Tensor>> dedupe(std::vector<std::pair<std::string, Tensor>> v) {
  std::set<const TensorImpl*> seen;
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& [n, t] : v)
    if (seen.insert(&t.impl()).second) out.emplace_back(n, t);
  return out;
}
}  // namespace

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> p, b;
  collect("", p, b);
  return dedupe(std::move(p));
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters()) out.push_back(t);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor>> p, b;
  collect("", p, b);
  return b;
}

std::map<std::string, Tensor> Module::state_dict() const {
  std::vector<std::pair<std::string, Tensor>> p, b;
  collect("", p, b);
  for (auto& x : b) p.push_back(x);
  std::map<std::string, Tensor> out;
  for (auto& [n, t] : dedupe(std::move(p))) out[n] = t;
  return out;
}

namespace {

// A tensor a source offers under a name: a state dict's tensor, or a file's header entry.
struct Offer {
  Shape shape;
  DType dtype;
};

// The model's tensors matched against what a source offers: shapes and dtypes exactly, and
// under strict every name of each side on the other (tied tensors are satisfied by any of their
// names). Returns the (model tensor, name) pairs to fill; throws naming the tensor, before
// anything is written.
std::vector<std::pair<Tensor, std::string>> match(const std::vector<std::pair<std::string, Tensor>>& model,
                                                  const std::map<std::string, Offer>& offered, bool strict,
                                                  const std::string& source) {
  std::set<std::string> expected;
  std::map<const TensorImpl*, bool> filled;
  std::vector<std::pair<Tensor, std::string>> fills;
  for (auto& [name, t] : model) {
    expected.insert(name);
    auto it = offered.find(name);
    if (it == offered.end()) {
      filled.try_emplace(&t.impl(), false);
      continue;
    }
    const Offer& o = it->second;
    QKV_CHECK(o.shape == t.shape(), source, "tensor '", name, "' has shape ", o.shape.str(), ", the model expects ",
              t.shape().str());
    // Converted: f32 into a held weight (rounded / quantized), a held int8 one into f32 (q * scale).
    const bool held = ((t.dtype() == DType::bf16 || t.dtype() == DType::i8) && o.dtype == DType::f32) ||
                      (t.dtype() == DType::f32 && o.dtype == DType::i8);
    QKV_CHECK(o.dtype == t.dtype() || held, source, "tensor '", name, "' has dtype ", dtype_name(o.dtype),
              ", the model expects ", dtype_name(t.dtype()));
    filled[&t.impl()] = true;
    fills.emplace_back(t, name);
  }
  if (strict) {
    for (auto& [name, t] : model)
      QKV_CHECK(filled[&t.impl()], source, "missing tensor '", name, "' (", t.str(), ")");
    for (auto& [name, o] : offered)
      QKV_CHECK(expected.count(name), source, "unexpected tensor '", name, "' (", dtype_name(o.dtype), o.shape.str(),
                ") that the model does not have");
  }
  return fills;
}

}  // namespace

std::vector<std::pair<std::string, Tensor>> Module::tensors_to_load() const {
  std::vector<std::pair<std::string, Tensor>> p, b;
  collect("", p, b);
  for (auto& x : b) p.push_back(x);
  return p;
}

namespace {

// A weight holding NaN or an infinity (a diverged run's checkpoint, a damaged export) loaded and
// generated NUL characters with exit code 0: refused, naming the file, the tensor and the element.
// `first` is the index of values[0] in the tensor.
void check_finite(const std::string& where, const std::string& name, const float* values, int64_t n,
                  int64_t first) {
  int bad = 0;
#pragma omp simd reduction(| : bad)
  for (int64_t i = 0; i < n; ++i) bad |= !std::isfinite(values[i]);
  if (!bad) return;
  int64_t i = 0;
  while (std::isfinite(values[i])) ++i;
  fail(where, "tensor '", name, "' holds ", values[i], " at element ", first + i,
       ": the weights are damaged (or their training diverged); a model needs finite weights");
}

}  // namespace

void check_finite_weight(const std::string& where, const std::string& name, const Tensor& t) {
  if (t.dtype() != DType::f32) return;
  const Tensor c = t.contiguous();
  check_finite(where, name, c.data<float>(), c.numel(), 0);
}

void Module::load_state_dict(const std::map<std::string, Tensor>& sd, bool strict, const std::string& source) {
  std::map<std::string, Offer> offered;
  for (auto& [name, t] : sd) offered[name] = {t.shape(), t.dtype()};
  const auto fills = match(tensors_to_load(), offered, strict, source);  // validated first: an error changes nothing
  NoGradGuard ng;
  for (auto& [dst, name] : fills) {
    Tensor d = dst;
    const Tensor& src = sd.at(name);
    check_finite_weight(source, name, src);
    if (d.dtype() == DType::bf16 && src.dtype() == DType::f32) {  // a weight held in bf16: its rounding
      const Tensor c = src.contiguous();
      QKV_CHECK(d.is_contiguous(), source, "tensor '", name, "': a weight held in bf16 is contiguous");
      kernels::round_to_bf16(c.data<float>(), static_cast<uint16_t*>(d.raw_data()), c.numel());
      d.mark_modified();
    } else if (is_held_int8(d) && src.dtype() == DType::f32) {  // a weight held in int8: its quantization
      const HeldInt8Rows r = held_int8_rows(d, source.c_str());
      const Tensor c = src.contiguous();
      kernels::quantize_int8_rows(c.data<float>(), r.rows, r.K, r.K, r.q, r.K, r.scale, r.zero_point_sum);
      d.mark_modified();
    } else if (is_held_int8(src)) {  // from a model holding int8: its rows, or the values they stand for
      if (is_held_int8(d)) copy_held_int8(d, src);
      else d.copy_from(dequantize_held_int8(src));
    } else {
      d.copy_from(src);
    }
  }
}

void Module::save(const std::string& path, const std::map<std::string, std::string>& metadata) const {
  safetensors::save(path, state_dict(), metadata);
}

void Module::load(const std::string& path, bool strict) {
  const safetensors::Reader file(path);  // the header, checked
  std::map<std::string, Offer> offered;
  for (const std::string& name : file.names()) offered[name] = {file.shape(name), file.dtype(name)};
  const auto fills = match(tensors_to_load(), offered, strict, path);
  NoGradGuard ng;
  for (auto& [dst, name] : fills) {
    Tensor d = dst;
    read_parameter(file, name, d);  // no copy of the file beside the model
  }
}

void read_parameter(const safetensors::Reader& file, const std::string& name, Tensor& dst) {
  QKV_CHECK(dst.defined() && file.shape(name) == dst.shape(), file.path(), "tensor '", name, "' is ",
            file.shape(name).str(), ", the model's is ", dst.defined() ? dst.str() : std::string("undefined"));
  if (dst.dtype() == DType::bf16 && file.dtype(name) == DType::f32) {
    QKV_CHECK(dst.is_contiguous(), file.path(), "tensor '", name, "': a weight held in bf16 is contiguous");
    uint16_t* out = static_cast<uint16_t*>(dst.raw_data());
    int64_t done = 0;
    file.read_pieces(name, size_t(1) << 20, [&](const void* bytes, size_t n) {  // whole floats: 2^20 % 4 == 0
      const int64_t k = int64_t(n / sizeof(float));
      check_finite(file.path(), name, static_cast<const float*>(bytes), k, done);
      done += k;
      kernels::round_to_bf16(static_cast<const float*>(bytes), out, k);
      out += k;
    });
    dst.mark_modified();
  } else if (is_held_int8(dst) && file.dtype(name) == DType::f32) {
    const HeldInt8Rows r = held_int8_rows(dst, file.path().c_str());
    const int64_t rows_per_piece = std::max<int64_t>(1, (int64_t(1) << 20) / (r.K * int64_t(sizeof(float))));
    int64_t row = 0;
    file.read_pieces(name, size_t(rows_per_piece * r.K) * sizeof(float), [&](const void* bytes, size_t n) {
      const int64_t rows = int64_t(n / sizeof(float)) / r.K;  // whole rows: pieces are whole but the last
      check_finite(file.path(), name, static_cast<const float*>(bytes), rows * r.K, row * r.K);
      kernels::quantize_int8_rows(static_cast<const float*>(bytes), rows, r.K, r.K, r.q + row * r.K, r.K,
                                  r.scale + row, r.zero_point_sum + row);
      row += rows;
    });
    dst.mark_modified();
  } else if (dst.is_contiguous()) {
    file.read_into(name, dst);
    if (dst.dtype() == DType::f32) check_finite(file.path(), name, dst.data<float>(), dst.numel(), 0);
  } else {
    const Tensor read = file.read(name);
    check_finite_weight(file.path(), name, read);
    dst.copy_from(read);
  }
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, m] : children_) m->train(on);
}

void Module::set_pack_layout(kernels::PackLayout layout) {
  for (auto p : {kernels::MatmulPrecision::fp32, kernels::MatmulPrecision::bf16, kernels::MatmulPrecision::int8})
    set_pack_layout(layout, p);
}

void Module::set_pack_layout(kernels::PackLayout layout, kernels::MatmulPrecision precision) {
  on_pack_layout(layout, precision);
  for (auto& [n, m] : children_) m->set_pack_layout(layout, precision);
}

void Module::hold_weights_in_bf16() { hold_weights_as(DType::bf16); }

void Module::hold_weights_in_int8() {
  kernels::check_precision_supported(kernels::MatmulPrecision::int8, "hold_weights_in_int8");
  hold_weights_as(DType::i8);
  set_pack_layout(kernels::PackLayout::rows, kernels::MatmulPrecision::int8);  // in place unless asked
}

void Module::hold_weights(kernels::MatmulPrecision precision) {
  if (precision == kernels::MatmulPrecision::bf16) hold_weights_in_bf16();
  if (precision == kernels::MatmulPrecision::int8) hold_weights_in_int8();
}

void Module::hold_weights_as(DType as) {
  std::vector<Module*> all{this};  // every module below, parents before children
  for (size_t i = 0; i < all.size(); ++i)
    for (auto& [n, m] : all[i]->children_) all.push_back(m.get());
  // Smallest own parameters first (a MultiHeadAttention, which owns none, before the Linears whose
  // weights it joins), each module's f32 weights returned to the system as soon as they are held
  // (not kept in the tensor cache): while a weight is converted the process holds the f32 model
  // and that weight's held copy, so the largest tables go last and the peak stays about the f32
  // model's.
  auto own_bytes = [](const Module* m) {
    size_t b = 0;
    for (auto& [n, t] : m->params_) b += t.defined() ? size_t(t.numel()) * dtype_size(t.dtype()) : 0;
    return b;
  };
  std::stable_sort(all.begin(), all.end(),
                   [&](const Module* a, const Module* b) { return own_bytes(a) < own_bytes(b); });
  for (Module* m : all) {
    m->on_hold_weights(as);
    allocator_empty_cache();
  }
}

void hold_in(const std::vector<Tensor>& weights, DType as) {
  QKV_CHECK(as == DType::bf16 || as == DType::i8, "hold_in", "weights are held in bf16 or i8, not ", dtype_name(as));
  if (as == DType::bf16) hold_in_bf16(weights);
  else hold_in_int8(weights);
}

namespace {

// The f32 tensors among `weights`, each once (a tied one may be listed twice).
std::vector<Tensor> f32_weights_once(const std::vector<Tensor>& weights) {
  std::vector<Tensor> out;
  for (const Tensor& w : weights) {
    bool seen = false;
    for (const Tensor& t : out) seen = seen || t.impl_ptr() == w.impl_ptr();
    if (w.defined() && w.dtype() == DType::f32 && !seen) out.push_back(w);
  }
  return out;
}

// Points every handle of w at its held copy (contiguous, `dtype`, from `offset` elements into
// `storage`), no longer requiring grad.
void replace_with_held(const Tensor& w, const std::shared_ptr<Storage>& storage, int64_t offset, DType dtype) {
  TensorImpl& impl = *w.impl_ptr();  // every handle of the weight shares this
  impl.storage = storage;
  impl.offset = offset;
  impl.strides = Shape::contiguous_strides(impl.shape);
  impl.dtype = dtype;
  impl.requires_grad = false;
  impl.grad.reset();
  impl.grad_accumulator.reset();
}

}  // namespace

void hold_in_int8(const std::vector<Tensor>& weights) {
  const std::vector<Tensor> to_hold = f32_weights_once(weights);
  if (to_hold.empty()) return;
  const int64_t K = to_hold[0].ndim() == 2 ? to_hold[0].size(1) : -1;
  int64_t rows = 0;
  for (const Tensor& w : to_hold) {
    QKV_CHECK(w.ndim() == 2 && w.size(1) == K, "hold_in_int8", "expected (N, K) weights",
              K > 0 ? " with K = " + std::to_string(K) : std::string(), " (held together), got ", w.str());
    rows += w.size(0);
  }
  if (!kernels::int8_pays(rows, K)) return;  // stays f32: its products run in fp32 under int8
  const std::shared_ptr<Storage> held = held_int8_storage(rows, K);
  int64_t row = 0;
  for (const Tensor& w : to_hold) {
    const int64_t n = w.size(0);
    const Tensor t = held_int8_tensor(held, row, n), c = w.detach().contiguous();
    const HeldInt8Rows r = held_int8_rows(t, "hold_in_int8");
    kernels::quantize_int8_rows(c.data<float>(), n, K, K, r.q, K, r.scale, r.zero_point_sum);
    replace_with_held(w, held, t.offset(), DType::i8);
    row += n;
  }
}

void hold_in_bf16(const std::vector<Tensor>& weights) {
  const std::vector<Tensor> to_hold = f32_weights_once(weights);
  if (to_hold.empty()) return;
  int64_t total = 0;
  for (const Tensor& w : to_hold) total += w.numel();
  // Apart from the tensor cache: the f32 weights freed below then leave whole segments idle.
  const std::shared_ptr<Storage> held = Storage::allocate_apart(size_t(total) * sizeof(uint16_t));
  int64_t offset = 0;
  for (const Tensor& w : to_hold) {
    const Tensor c = w.detach().contiguous();
    kernels::round_to_bf16(c.data<float>(), static_cast<uint16_t*>(held->data()) + offset, c.numel());
    replace_with_held(w, held, offset, DType::bf16);
    offset += w.numel();
  }
}

void Module::zero_grad() {
  for (auto& [n, t] : named_parameters()) t.zero_grad();
}

}  // namespace qkv::nn
