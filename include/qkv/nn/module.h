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
  // Copies values in. strict: every expected name present and no unknown names. Shapes and
  // dtypes must match exactly; errors name the tensor, and nothing is modified on error.
  void load_state_dict(const std::map<std::string, Tensor>& sd, bool strict = true,
                       const std::string& source = "state dict");

  // Safetensors files (atomic write; the loader checks everything).
  void save(const std::string& path, const std::map<std::string, std::string>& metadata = {}) const;
  void load(const std::string& path, bool strict = true);

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  void zero_grad();

  // How the packed products of incremental decoding hold this module's weights, here and in every
  // module below (PackedWeights, ops/packed.h): kernels::PackLayout::panels (a packed copy next to
  // each weight, the default; in bf16 oneDNN's layout) or rows (fp32: the weights read in place, an
  // inference-only model holds each weight once; bf16: the rows converted to bf16; tasks::Generator
  // sets it). For the fp32 and the bf16 form both, or for the form of one precision (fp32 or bf16).
  // Only speed and memory differ; packs stay in step with the weights.
  void set_pack_layout(kernels::PackLayout layout);
  void set_pack_layout(kernels::PackLayout layout, kernels::MatmulPrecision precision);

 protected:
  // What a module that owns packed weights (a PackedWeights) does with set_pack_layout.
  virtual void on_pack_layout(kernels::PackLayout, kernels::MatmulPrecision) {}
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
