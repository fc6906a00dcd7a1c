#include <atomic>
#include <queue>
#include <unordered_map>

#include "qkv/autograd/node.h"
#include "qkv/kernels/elementwise.h"

namespace qkv {
namespace {

thread_local bool g_grad_enabled = true;
std::atomic<uint64_t> g_sequence{0};

// A leaf's sink: adds incoming gradients into leaf.grad.
struct AccumulateGrad : Node {
  std::shared_ptr<TensorImpl> leaf;
  const char* name() const override { return "AccumulateGrad"; }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    Tensor incoming = g[0];
    Tensor current(leaf->grad);
    if (!current.defined()) {
      // Keep a private copy unless nobody else can see this buffer: optimizers and clipping
      // modify .grad in place, and one gradient tensor may flow to several leaves.
      bool sole_owner = incoming.impl_ptr().use_count() <= 2 && incoming.storage().use_count() == 1 &&
                        incoming.is_contiguous();
      leaf->grad = (sole_owner ? incoming.detach() : incoming.clone()).impl_ptr();
    } else {
      kernels::add_inplace(current, incoming);
    }
    return {};
  }
};

}  // namespace

void Node::check_saved_versions() const {
  for (size_t i = 0; i < saved_versions.size(); ++i) {
    const auto storage = saved_versions[i].first.lock();
    const uint64_t version = saved_versions[i].second;
    if (!storage) continue;  // the node has let that tensor go
    QKV_CHECK(storage->version() == version, "backward", name(), ": saved tensor ", i + 1, " of ",
              saved_versions.size(), " was modified in place after the forward pass (its memory is at version ",
              storage->version(), ", saved at ", version, "): a tensor that gradient computation needs was "
              "written (copy_from, fill, mark_modified, an optimizer step) between the forward and backward(); "
              "write into a clone, or call backward() first");
  }
}

bool grad_enabled() { return g_grad_enabled; }
void set_grad_enabled(bool on) { g_grad_enabled = on; }
uint64_t next_sequence_nr() { return g_sequence.fetch_add(1); }

bool any_requires_grad(std::initializer_list<Tensor> inputs) {
  if (!g_grad_enabled) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

bool any_requires_grad(const std::vector<Tensor>& inputs) {
  if (!g_grad_enabled) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

Edge gradient_edge(const Tensor& t) {
  TensorImpl& impl = t.impl();
  if (impl.grad_fn) return Edge{impl.grad_fn, impl.output_nr};
  if (!impl.requires_grad) return Edge{};
  auto acc = impl.grad_accumulator.lock();
  if (!acc) {
    auto a = std::make_shared<AccumulateGrad>();
    a->leaf = t.impl_ptr();
    a->sequence_nr = next_sequence_nr();
    a->input_shapes.push_back(t.shape());
    a->input_dtypes.push_back(t.dtype());
    impl.grad_accumulator = a;
    acc = a;
  }
  return Edge{acc, 0};
}

void set_history(Tensor& out, const std::shared_ptr<Node>& node, int output_nr) {
  TensorImpl& impl = out.impl();
  impl.requires_grad = true;
  impl.grad_fn = node;
  impl.output_nr = output_nr;
}

void backward(const Tensor& root, const Tensor& grad, bool retain_graph) {
  check_defined(root, "backward", "root");
  QKV_CHECK(root.requires_grad(), "backward", "tensor ", root.str(), " does not require grad (no graph to run)");
  Tensor g = grad;
  if (!g.defined()) {
    QKV_CHECK(root.numel() == 1, "backward", "an implicit gradient needs a one-element root, got ", root.str());
    g = Tensor::ones(root.shape(), root.dtype());
  }
  QKV_CHECK(g.shape() == root.shape() && g.dtype() == root.dtype(), "backward", "gradient ", g.str(),
            " does not match root ", root.str());  // a dtype was found by the first op ("mul: dtypes differ")

  NoGradGuard no_grad;  // backward functions use ops, which must not record (no double backward)
  Edge start = gradient_edge(root);
  // Count, for every reachable node, how many edges point at it.
  std::unordered_map<Node*, int> deps;
  std::vector<Node*> stack{start.fn.get()};
  deps[start.fn.get()] = 0;
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    QKV_CHECK(!n->released, "backward", "trying to backward through ", n->name(),
              " a second time: its saved tensors were freed by the first backward (pass retain_graph)");
    n->check_saved_versions();  // every node before any runs: a refused backward accumulates nothing
    for (const Edge& e : n->next) {
      if (!e.valid()) continue;
      auto [it, inserted] = deps.try_emplace(e.fn.get(), 0);
      it->second++;
      if (inserted) stack.push_back(e.fn.get());
    }
  }

  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  auto cmp = [](Node* a, Node* b) { return a->sequence_nr < b->sequence_nr; };
  std::priority_queue<Node*, std::vector<Node*>, decltype(cmp)> ready(cmp);
  buffers[start.fn.get()].resize(start.fn->num_outputs);
  buffers[start.fn.get()][start.input_nr] = g;
  ready.push(start.fn.get());
  std::vector<std::shared_ptr<Node>> keep_alive{start.fn};

  while (!ready.empty()) {
    Node* n = ready.top();
    ready.pop();
    std::vector<Tensor> grads_out;
    if (auto it = buffers.find(n); it != buffers.end()) {
      grads_out = std::move(it->second);
      buffers.erase(it);
    }
    bool any = false;
    for (const Tensor& t : grads_out) any = any || t.defined();
    // A node that no gradient reached still runs, as a no-op, so its inputs' counts drop.
    std::vector<Tensor> grads_in = any ? n->backward(grads_out) : std::vector<Tensor>{};
    grads_out.clear();
    QKV_CHECK(grads_in.empty() || grads_in.size() == n->next.size(), "backward", n->name(), " returned ",
              grads_in.size(), " gradients for ", n->next.size(), " inputs");
    for (size_t i = 0; i < grads_in.size(); ++i) {
      const Edge& e = n->next[i];
      if (!e.valid() || !grads_in[i].defined()) continue;
      QKV_CHECK(grads_in[i].shape() == n->input_shapes[i] && grads_in[i].dtype() == n->input_dtypes[i], "backward",
                n->name(), " returned a gradient ", grads_in[i].str(), " for input ", i, " of ",
                dtype_name(n->input_dtypes[i]), n->input_shapes[i].str());
      auto& buf = buffers[e.fn.get()];
      if (buf.empty()) buf.resize(e.fn->num_outputs);
      Tensor& slot = buf[e.input_nr];
      if (!slot.defined()) {
        slot = grads_in[i];
      } else {
        // A fresh sum (one pass; never in place: a gradient may be shared with other nodes).
        Tensor sum = Tensor::empty(slot.shape(), slot.dtype());
        kernels::binary(kernels::Binary::add, slot.contiguous(), grads_in[i].contiguous(), sum);
        slot = sum;
      }
    }
    for (const Edge& e : n->next) {
      if (!e.valid()) continue;
      if (--deps[e.fn.get()] == 0) {
        keep_alive.push_back(e.fn);
        ready.push(e.fn.get());
      }
    }
    if (!retain_graph && std::string_view(n->name()) != "AccumulateGrad") {
      n->release_saved();
      n->saved_versions.clear();
      n->released = true;
      n->next.clear();
    }
  }
}

}  // namespace qkv
