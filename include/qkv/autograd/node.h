// qkv/autograd/node.h - the tape: a Node per recorded op, edges to the nodes of its inputs.
//
// An op that records itself (see ops/ for examples):
//   if (any_requires_grad({a, b})) {
//     auto node = make_node<MulBackward>({a, b});   // edges + input shapes
//     node->a = node->save(a); node->b = node->save(b);  // saved tensors (version-checked)
//     set_history(out, node);
//   }
// backward() receives one gradient per output (undefined = zero, only for multi-output nodes)
// and returns one per input, shaped exactly like that input (the engine checks). Undefined
// entries mean "no gradient" for that input.
//
// Saved tensors are version-checked: an op saves the inputs and outputs its backward reads with
// Node::save, which remembers their storage's version (Storage::version(): Tensor::copy_from,
// fill, mark_modified, the optimizer kernels and nn::init bump it). If that memory was written
// after the forward and before backward, backward() throws naming the op, as torch raises "a
// variable needed for gradient computation has been modified by an inplace operation", instead of
// computing gradients from the new values. Writes through raw data pointers are not seen; tensors
// an op makes for itself (statistics, masks) are not user-visible and are saved as they are.
#pragma once
#include <initializer_list>
#include <memory>
#include <vector>

#include "qkv/tensor/tensor.h"

namespace qkv {

struct Node;

struct Edge {
  std::shared_ptr<Node> fn;
  int input_nr = 0;
  bool valid() const { return fn != nullptr; }
};

struct Node {
  virtual ~Node() = default;
  virtual const char* name() const = 0;
  virtual std::vector<Tensor> backward(const std::vector<Tensor>& grad_outputs) = 0;
  // Frees saved activations once backward has run (unless retain_graph).
  virtual void release_saved() {}

  // A detached alias of t to keep for backward, its storage's version noted (see above).
  Tensor save(const Tensor& t) {
    if (!t.defined()) return Tensor();
    if (t.storage()) saved_versions.push_back({t.storage(), t.storage()->version()});
    return t.detach();
  }
  // Throws if a saved tensor's memory was written since it was saved, naming this node.
  void check_saved_versions() const;

  std::vector<Edge> next;           // one per input, invalid if that input needs no grad
  std::vector<Shape> input_shapes;  // to check the shapes backward() returns
  std::vector<DType> input_dtypes;
  int num_outputs = 1;
  bool released = false;
  // Storage and version of each tensor save() kept (weak: the saved tensors own the memory, and
  // a storage's use_count must not change: AccumulateGrad reads it).
  std::vector<std::pair<std::weak_ptr<const Storage>, uint64_t>> saved_versions;
  uint64_t sequence_nr = 0;  // creation order; later nodes run first
};

// Grad mode: when disabled (inference), ops record nothing.
bool grad_enabled();
void set_grad_enabled(bool on);
struct NoGradGuard {
  NoGradGuard() : prev_(grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;
 private:
  bool prev_;
};

// True if grad mode is on and any defined input requires grad.
bool any_requires_grad(std::initializer_list<Tensor> inputs);
bool any_requires_grad(const std::vector<Tensor>& inputs);

// The edge that a gradient for t flows along: its grad_fn, or its leaf accumulator.
Edge gradient_edge(const Tensor& t);

uint64_t next_sequence_nr();

template <typename N>
std::shared_ptr<N> make_node(const std::vector<Tensor>& inputs) {
  auto node = std::make_shared<N>();
  node->sequence_nr = next_sequence_nr();
  for (const Tensor& t : inputs) {
    node->next.push_back(t.defined() && t.requires_grad() ? gradient_edge(t) : Edge{});
    node->input_shapes.push_back(t.defined() ? t.shape() : Shape{});
    node->input_dtypes.push_back(t.defined() ? t.dtype() : DType::f32);
  }
  return node;
}
template <typename N>
std::shared_ptr<N> make_node(std::initializer_list<Tensor> inputs) {
  return make_node<N>(std::vector<Tensor>(inputs));
}

// Marks `out` as output `output_nr` of `node`: it now requires grad and has a history.
void set_history(Tensor& out, const std::shared_ptr<Node>& node, int output_nr = 0);

// Reverse-mode sweep from `root`. grad defaults to ones for a one-element root.
// Leaves accumulate into .grad(). Without retain_graph, saved tensors and edges are freed,
// and a second backward through the same nodes throws.
void backward(const Tensor& root, const Tensor& grad = Tensor(), bool retain_graph = false);

}  // namespace qkv
