// qkv/nn/module.h - Module: a tree of named parameters, buffers and child modules.
//
// Names are scoped and dotted ("encoder.layers.0.self_attn.q_proj.weight") so state dicts match
// Hugging Face checkpoints. A subclass registers its pieces in its constructor:
//   weight = register_parameter("weight", Tensor::empty({out, in}));
//   proj = register_module("proj", std::make_shared<Linear>(d, d));
// Parameters are leaf tensors with requires_grad; members alias the registered tensors, so
// load_state_dict() copies values into them in place and optimizers keep valid references.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "qkv/kernels/gemm.h"
#include "qkv/tensor/tensor.h"

namespace qkv::safetensors {
class Reader;
}

namespace qkv::nn {

class Module {
 public:
  virtual ~Module() = default;
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Parameters (deduplicated: a tied tensor appears once, under its first name).
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<Tensor> parameters() const;
  int64_t num_parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;  // persistent ones
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const { return children_; }

  // Parameters and persistent buffers by full name (tied tensors once).
  std::map<std::string, Tensor> state_dict() const;
  // Copies values in. strict: every expected name present and no unknown names. Shapes must
  // match exactly, and dtypes too except: f32 into a weight held in bf16 / int8 (rounded /
  // quantized), and a weight held in int8 into f32 (q * scale). Errors name the tensor, and
  // nothing is modified on error.
  void load_state_dict(const std::map<std::string, Tensor>& sd, bool strict = true,
                       const std::string& source = "state dict");

  // Safetensors files. save: an atomic write. load: the file's header is checked against the model
  // first (names under strict, shapes, dtypes: a file that does not fit changes nothing), then one
  // tensor at a time is read straight into its parameter, so the file is never held beside the
  // model. A tensor that fails its checksum, or cannot be read, stops the load naming it, with the
  // tensors before it already in place: into a model that must survive such a file, use
  // load_state_dict(safetensors::load(path).tensors), which checks every byte before writing any.
  void save(const std::string& path, const std::map<std::string, std::string>& metadata = {}) const;
  void load(const std::string& path, bool strict = true);

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  void zero_grad();

  // How the packed products of incremental decoding hold this module's weights, here and in every
  // module below (PackedWeights, ops/packed.h): kernels::PackLayout::panels (a packed copy next to
  // each weight, the default; in bf16 oneDNN's layout) or rows (fp32: the weights read in place, an
  // inference-only model holds each weight once; bf16: the rows converted to bf16; int8: quantized
  // s8 rows; tasks::Generator sets it). For every precision's form, or for the form of one.
  // Only speed and memory differ; packs stay in step with the weights.
  void set_pack_layout(kernels::PackLayout layout);
  void set_pack_layout(kernels::PackLayout layout, kernels::MatmulPrecision precision);

  // bf16 inference in half the weight memory: every Linear weight and Embedding table here and
  // below (a tied one once; MultiHeadAttention's query, key and value together in one storage) is
  // replaced, in place in every handle that shares it, by its bf16 rounding (kernels::to_bf16)
  // held as bf16; the f32 values and the packs made from them are freed, returned to the system
  // module by module, the largest last (so the peak stays about the f32 model's). Biases, norms
  // and every other tensor stay f32. Afterwards products against those weights run at matmul
  // precision bf16 in inference only (otherwise an error names the weight), and give the bits
  // that the f32 model with weights rounded to bf16 gives at bf16; embedding lookups read the
  // rounded rows. In the rows layout a product reads the held weight itself (no copy); in the
  // panels layout oneDNN's blocked copy sits next to it. save() writes the weights widened to
  // f32. Not undone; a weight already in bf16 is left as it is.
  void hold_weights_in_bf16();
  // int8 inference in a quarter of the weight memory, the same way: every Linear weight and
  // Embedding table here and below of at least kernels::int8_min_weight_elements() values (a
  // tied one once; MultiHeadAttention's query, key and value together) is replaced in place by
  // its quantization (kernels/int8.h's rule: per row, s8 values and an f32 scale) held as i8
  // (tensor/held_int8.h); the f32 values and their packs are freed. Smaller weights, biases and
  // norms stay f32. Afterwards products against held weights run at matmul precision int8 in
  // inference only (otherwise an error names the weight), with the bits the f32 model gives at
  // int8 (the same quantization); embedding lookups read q * scale, the rows the products use.
  // Holding sets the int8 pack layout to rows: products read the held rows themselves (qkv's
  // kernel below kernels::int8_rows_max_batch() rows, oneDNN over the plain rows above; no copy).
  // set_pack_layout(panels, int8) afterwards adds oneDNN's blocked copy of the rows for batches of
  // int8_rows_max_batch() rows or more (a byte a weight more; faster at 4-128 rows, where
  // translation's beam search multiplies).
  // save() writes q * scale in f32. Needs AVX512-VNNI or AMX (an error otherwise). Not undone; a
  // weight already held is left as it is.
  void hold_weights_in_int8();
  // hold_weights_in_bf16 or _in_int8 as `precision` says; nothing for fp32.
  void hold_weights(kernels::MatmulPrecision precision);

 protected:
  // What a module that owns packed weights (a PackedWeights) does with set_pack_layout.
  virtual void on_pack_layout(kernels::PackLayout, kernels::MatmulPrecision) {}
  // What a module does with hold_weights_in_bf16 / _in_int8 (`as` bf16 or i8; called once per
  // module, a module with fewer bytes of its own parameters before one with more, a parent
  // before its children among equals): hold_in() its weights.
  virtual void on_hold_weights(DType as) { (void)as; }
  Tensor register_parameter(const std::string& name, Tensor t);
  Tensor register_buffer(const std::string& name, Tensor t, bool persistent = true);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    check_name(name);
    children_.emplace_back(name, m);
    return m;
  }
  // Registers the children of `m` as this module's own, without a level for m: for checkpoint
  // layouts that keep a sub-layer's pieces flat (Marian/BART's fc1, fc2 directly in a layer).
  // `rename` maps a child's name to its name here; the others keep theirs.
  template <typename M>
  std::shared_ptr<M> register_flattened(std::shared_ptr<M> m, const std::map<std::string, std::string>& rename = {}) {
    for (auto& [name, child] : m->named_children()) {
      auto r = rename.find(name);
      register_module(r == rename.end() ? name : r->second, child);
    }
    return m;
  }
  // Points an existing parameter name at another tensor (weight tying).
  void tie_parameter(const std::string& name, const Tensor& t);

  bool training_ = true;

 private:
  void check_name(const std::string& name) const;
  std::vector<std::pair<std::string, Tensor>> tensors_to_load() const;  // parameters, then persistent buffers
  void hold_weights_as(DType as);
  void collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& params,
               std::vector<std::pair<std::string, Tensor>>& bufs) const;

  std::vector<std::pair<std::string, Tensor>> params_;
  struct Buffer {
    std::string name;
    Tensor t;
    bool persistent;
  };
  std::vector<Buffer> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

// Replaces the f32 tensors among `weights` (other dtypes and undefined ones are skipped) in place
// by their bf16 rounding, laid out one after another in one new bf16 storage in this order, no
// longer requiring grad: every handle that shares a tensor sees the change
// (Module::hold_weights_in_bf16).
void hold_in_bf16(const std::vector<Tensor>& weights);
// The same into int8 (Module::hold_weights_in_int8): the f32 tensors among `weights` ((N_i, K)
// each, the same K) quantized one after another into one held-int8 storage (tensor/held_int8.h),
// when together they have at least kernels::int8_min_weight_elements() values; otherwise they stay
// f32 (their products run in fp32 under int8).
void hold_in_int8(const std::vector<Tensor>& weights);
// hold_in_bf16 (as bf16) or hold_in_int8 (as i8).
void hold_in(const std::vector<Tensor>& weights, DType as);

// Reads the tensor `name` of `file` into dst, a model's tensor of the same shape: straight in when
// dst is contiguous and of the file's dtype; into a weight held in bf16 from an F32 entry, rounded
// (kernels::round_to_bf16) a piece at a time as it is read, so no f32 copy of it is made; into a
// weight held in int8, quantized a piece of whole rows at a time (kernels::quantize_int8_rows). What
// Module::load and the model-directory loaders fill parameters with.
// (Every f32 value it reads must be finite, as load_state_dict's: see check_finite_weight.)
void read_parameter(const safetensors::Reader& file, const std::string& name, Tensor& dst);
// Throws, naming `where` (a file), the tensor `name` and the element, unless every value of the f32
// tensor t is finite (other dtypes pass). A weight holding NaN or an infinity (a diverged run's
// checkpoint, a damaged export) loaded, and generation wrote NUL characters with exit code 0.
void check_finite_weight(const std::string& where, const std::string& name, const Tensor& t);

// Eval mode (dropout off) for the life of a scope, then the module's mode before it, also when an
// exception leaves the scope: every forward pass that is not training (validation, inference,
// attention maps) runs under one.
class EvalScope {
 public:
  explicit EvalScope(Module& m) : module_(m), was_training_(m.is_training()) { m.eval(); }
  ~EvalScope() { module_.train(was_training_); }
  EvalScope(const EvalScope&) = delete;
  EvalScope& operator=(const EvalScope&) = delete;

 private:
  Module& module_;
  bool was_training_;
};

}  // namespace qkv::nn
