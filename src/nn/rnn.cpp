// LSTM / GRU cells and layers. One autograd node per layer and direction (RnnLayerBackward)
// wraps kernels::rnn_layer_forward / _backward; layers, directions and inter-layer dropout are
// composed from differentiable ops (concat, dropout, slice).
#include "qkv/nn/rnn.h"

#include <cmath>
#include <functional>
#include <string>

#include "qkv/autograd/node.h"
#include "qkv/nn/init.h"
#include "qkv/ops/dropout.h"
#include "qkv/ops/shape.h"

namespace qkv::nn {
namespace {

struct RnnLayerBackward : Node {
  kernels::RnnLayerDims d;
  std::vector<int64_t> len;  // (B) or empty; d.len points here
  Tensor w_ih, w_hh;         // contiguous, detached
  kernels::RnnSaved saved;
  const char* name() const override { return d.kind == kernels::RnnKind::lstm ? "LstmLayerBackward" : "GruLayerBackward"; }
  // inputs: x, h0, c0, w_ih, w_hh, b_ih, b_hh;  outputs: y (B, T, H), h_n, c_n (B, H)
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    auto grad_out = [&](size_t i) { return i < g.size() && g[i].defined() ? g[i].contiguous() : Tensor(); };
    std::vector<Tensor> res(next.size());
    auto want = [&](size_t i) -> Tensor* {
      if (!next[i].valid()) return nullptr;
      res[i] = Tensor::empty(input_shapes[i], input_dtypes[i]);
      return &res[i];
    };
    kernels::RnnLayerGrads out;
    out.x = want(0), out.h0 = want(1), out.c0 = want(2);
    out.w_ih = want(3), out.w_hh = want(4), out.b_ih = want(5), out.b_hh = want(6);
    kernels::rnn_layer_backward(d, w_ih, w_hh, saved, grad_out(0), grad_out(1), grad_out(2), out);
    return res;
  }
  void release_saved() override {
    w_ih = w_hh = Tensor();
    saved = {};
  }
};

struct LayerResult {
  Tensor y, h, c;  // (B, T, H), (B, H), (B, H) (c: LSTM only)
};

// One direction of one layer: x (B, T, I), h0 / c0 (B, H) or undefined (zeros).
LayerResult run_layer(kernels::RnnKind kind, bool reverse, const Tensor& x, const std::vector<int64_t>& len,
                      const Tensor& h0, const Tensor& c0, const RnnWeights& w) {
  const bool lstm = kind == kernels::RnnKind::lstm;
  kernels::RnnLayerDims d;
  d.kind = kind, d.reverse = reverse;
  d.B = x.size(0), d.T = x.size(1), d.I = x.size(2), d.H = w.weight_hh.size(1);
  d.len = len.empty() ? nullptr : len.data();
  DType dt = x.dtype();
  auto contig = [](const Tensor& t) { return t.defined() ? t.contiguous() : Tensor(); };
  Tensor xc = x.contiguous(), wih = w.weight_ih.contiguous(), whh = w.weight_hh.contiguous();
  Tensor h0c = h0.defined() ? h0.contiguous() : Tensor::zeros({d.B, d.H}, dt);
  Tensor c0c = !lstm ? Tensor() : c0.defined() ? c0.contiguous() : Tensor::zeros({d.B, d.H}, dt);
  LayerResult r;
  r.y = Tensor::empty({d.B, d.T, d.H}, dt);
  r.h = Tensor::empty({d.B, d.H}, dt);
  if (lstm) r.c = Tensor::empty({d.B, d.H}, dt);
  bool grad = any_requires_grad({x, h0, c0, w.weight_ih, w.weight_hh, w.bias_ih, w.bias_hh});
  kernels::RnnSaved saved;
  kernels::rnn_layer_forward(d, xc, h0c, c0c, wih, whh, contig(w.bias_ih), contig(w.bias_hh), grad, r.y, r.h, r.c,
                             saved);
  if (grad) {
    auto node = make_node<RnnLayerBackward>({x, h0, lstm ? c0 : Tensor(), w.weight_ih, w.weight_hh, w.bias_ih,
                                             w.bias_hh});
    node->d = d;
    node->len = len;
    node->d.len = node->len.empty() ? nullptr : node->len.data();
    node->w_ih = node->save(wih);
    node->w_hh = node->save(whh);
    node->saved = std::move(saved);
    node->num_outputs = lstm ? 3 : 2;
    set_history(r.y, node, 0);
    set_history(r.h, node, 1);
    if (lstm) set_history(r.c, node, 2);
  }
  return r;
}

int64_t gate_count(kernels::RnnKind kind) { return kernels::rnn_gates(kind); }

// Shapes and dtypes of one direction's weights for input width `in`.
void check_weights(const RnnWeights& w, kernels::RnnKind kind, int64_t in, int64_t H, DType dt, const char* who,
                   const std::string& what) {
  const int64_t GH = gate_count(kind) * H;
  auto expect = [&](const Tensor& t, const Shape& s, const char* name) {
    QKV_CHECK(t.defined() && t.shape() == s && t.dtype() == dt, who, what, name, " must be ", dtype_name(dt),
              s.str(), ", got ", t.defined() ? t.str() : std::string("undefined"));
  };
  expect(w.weight_ih, Shape{GH, in}, "weight_ih");
  expect(w.weight_hh, Shape{GH, H}, "weight_hh");
  QKV_CHECK(w.bias_ih.defined() == w.bias_hh.defined(), who, what, "bias_ih and bias_hh must both be given or both not");
  if (w.bias_ih.defined()) {
    expect(w.bias_ih, Shape{GH}, "bias_ih");
    expect(w.bias_hh, Shape{GH}, "bias_hh");
  }
}

void check_floating_x(const Tensor& x, const RnnWeights& w, const char* who) {
  QKV_CHECK(x.defined(), who, "input x is undefined");
  QKV_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::f64, who, "x must be f32 or f64, got ", x.str());
  QKV_CHECK(w.weight_ih.defined() && x.dtype() == w.weight_ih.dtype(), who, "x ", x.str(), " must have the parameters' dtype (",
            w.weight_ih.defined() ? dtype_name(w.weight_ih.dtype()) : "undefined", ")");
}

// (B, H) state of a cell: the given one, checked.
void check_state(const Tensor& s, int64_t B, int64_t H, DType dt, const char* who, const char* name, const Tensor& x) {
  QKV_CHECK(s.defined(), who, name, " is undefined");
  QKV_CHECK(s.ndim() == 2 && s.size(0) == B && s.size(1) == H && s.dtype() == dt, who, name, " must be ",
            dtype_name(dt), "(", B, ", ", H, ") for x ", x.str(), ", got ", s.str());
}

}  // namespace

// ---- functional forms ----

RnnOutput rnn_forward(RnnKind kind, const RnnOptions& o, const std::vector<RnnWeights>& w, const Tensor& x,
                      const Tensor& lengths, const Tensor& h0, const Tensor& c0, bool training, Generator& gen,
                      const char* who) {
  const bool lstm = kind == RnnKind::lstm;
  const int64_t L = o.num_layers, dirs = o.bidirectional ? 2 : 1, H = o.hidden_size;
  QKV_CHECK(L >= 1 && H > 0 && o.input_size > 0, who, "bad options: input_size ", o.input_size, ", hidden_size ", H,
            ", num_layers ", L);
  QKV_CHECK(int64_t(w.size()) == L * dirs, who, "expected ", L * dirs, " weight sets (layers x directions), got ",
            w.size());
  check_floating_x(x, w[0], who);
  QKV_CHECK(x.ndim() == 3 && x.size(2) == o.input_size && x.size(0) > 0 && x.size(1) > 0, who,
            "x must be (B, T, input_size = ", o.input_size, ") batch-first with B, T >= 1, got ", x.str());
  const int64_t B = x.size(0), T = x.size(1);
  DType dt = x.dtype();
  for (int64_t k = 0; k < L * dirs; ++k)
    check_weights(w[size_t(k)], kind, k < dirs ? o.input_size : H * dirs, H, dt, who,
                  "layer " + std::to_string(k / dirs) + (k % dirs ? " reverse " : " "));

  std::vector<int64_t> len;  // empty = every row has all T steps
  if (lengths.defined()) {
    QKV_CHECK(lengths.ndim() == 1 && lengths.size(0) == B && (lengths.dtype() == DType::i64 || lengths.dtype() == DType::i32),
              who, "lengths must be i64 (B = ", B, ") for x ", x.str(), ", got ", lengths.str());
    len = lengths.to(DType::i64).to_vector<int64_t>();
    for (int64_t b = 0; b < B; ++b)
      QKV_CHECK(len[size_t(b)] >= 1 && len[size_t(b)] <= T, who, "lengths[", b, "] = ", len[size_t(b)],
                " is outside [1, T = ", T, "] for x ", x.str());
    bool all_full = true;
    for (int64_t v : len) all_full = all_full && v == T;
    if (all_full) len.clear();
  }
  auto check_init = [&](const Tensor& s, const char* name) {
    if (!s.defined()) return;
    QKV_CHECK(s.ndim() == 3 && s.size(0) == L * dirs && s.size(1) == B && s.size(2) == H && s.dtype() == dt, who, name,
              " must be ", dtype_name(dt), "(num_layers * directions = ", L * dirs, ", B = ", B, ", hidden = ", H,
              ") for x ", x.str(), ", got ", s.str());
  };
  check_init(h0, "h0");
  if (lstm) check_init(c0, "c0");
  else QKV_CHECK(!c0.defined(), who, "a GRU has no cell state, but c0 was given");
  const float p = o.dropout;
  QKV_CHECK(p >= 0.f && p < 1.f, who, "dropout must be in [0, 1), got ", p);

  auto state_k = [](const Tensor& s, int64_t k) { return s.defined() ? squeeze(slice(s, 0, k, k + 1), 0) : Tensor(); };
  Tensor in = x;  // (B, T, I) for layer 0, then (B, T, dirs * H)
  std::vector<Tensor> hs, cs;  // (1, B, H) each
  for (int64_t l = 0; l < L; ++l) {
    std::vector<Tensor> ys;
    for (int64_t dir = 0; dir < dirs; ++dir) {
      int64_t k = l * dirs + dir;
      LayerResult r = run_layer(kind, dir == 1, in, len, state_k(h0, k), state_k(c0, k), w[size_t(k)]);
      ys.push_back(r.y);
      hs.push_back(unsqueeze(r.h, 0));
      if (lstm) cs.push_back(unsqueeze(r.c, 0));
    }
    in = dirs == 1 ? ys[0] : concat(ys, 2);  // (B, T, dirs * H): forward then reverse features
    if (training && p > 0.f && l + 1 < L) in = dropout(in, p, true, gen);  // padded steps stay 0
  }
  RnnOutput out;
  out.output = in;
  out.h_n = hs.size() == 1 ? hs[0] : concat(hs, 0);
  if (lstm) out.c_n = cs.size() == 1 ? cs[0] : concat(cs, 0);
  return out;
}

std::pair<Tensor, Tensor> lstm_cell(const Tensor& x, const Tensor& h, const Tensor& c, const RnnWeights& w,
                                    const char* who) {
  check_floating_x(x, w, who);
  QKV_CHECK(x.ndim() == 2 && x.size(0) > 0, who, "x must be (B, input_size) with B >= 1, got ", x.str());
  const int64_t B = x.size(0), H = w.weight_hh.defined() ? w.weight_hh.size(-1) : 0;
  QKV_CHECK(x.size(1) == w.weight_ih.size(-1), who, "x must be (B, input_size = ", w.weight_ih.size(-1), "), got ",
            x.str());
  check_weights(w, RnnKind::lstm, x.size(1), H, x.dtype(), who, "");
  check_state(h, B, H, x.dtype(), who, "h", x);
  check_state(c, B, H, x.dtype(), who, "c", x);
  LayerResult r = run_layer(RnnKind::lstm, false, unsqueeze(x, 1), {}, h, c, w);  // T = 1
  return {r.h, r.c};
}

Tensor gru_cell(const Tensor& x, const Tensor& h, const RnnWeights& w, const char* who) {
  check_floating_x(x, w, who);
  QKV_CHECK(x.ndim() == 2 && x.size(0) > 0, who, "x must be (B, input_size) with B >= 1, got ", x.str());
  const int64_t B = x.size(0), H = w.weight_hh.defined() ? w.weight_hh.size(-1) : 0;
  QKV_CHECK(x.size(1) == w.weight_ih.size(-1), who, "x must be (B, input_size = ", w.weight_ih.size(-1), "), got ",
            x.str());
  check_weights(w, RnnKind::gru, x.size(1), H, x.dtype(), who, "");
  check_state(h, B, H, x.dtype(), who, "h", x);
  return run_layer(RnnKind::gru, false, unsqueeze(x, 1), {}, h, Tensor(), w).h;
}

// ---- modules ----

namespace {
// torch.nn.RNNBase / RNNCellBase: every parameter U(-1/sqrt(H), 1/sqrt(H)).
// reg: the module's register_parameter (protected, hence passed in).
RnnWeights make_weights(const std::function<Tensor(const std::string&, Tensor)>& reg, int64_t gates, int64_t in,
                        int64_t H, bool bias, const std::string& suffix) {
  RnnWeights w;
  w.weight_ih = reg("weight_ih" + suffix, Tensor::empty({gates * H, in}));
  w.weight_hh = reg("weight_hh" + suffix, Tensor::empty({gates * H, H}));
  if (bias) {
    w.bias_ih = reg("bias_ih" + suffix, Tensor::empty({gates * H}));
    w.bias_hh = reg("bias_hh" + suffix, Tensor::empty({gates * H}));
  }
  const double a = 1.0 / std::sqrt(double(H));
  for (Tensor* t : {&w.weight_ih, &w.weight_hh, &w.bias_ih, &w.bias_hh})
    if (t->defined()) init::uniform(*t, -a, a);
  return w;
}
}  // namespace

LSTMCell::LSTMCell(int64_t input_size, int64_t hidden_size, bool bias)
    : input_size_(input_size), hidden_size_(hidden_size) {
  QKV_CHECK(input_size > 0 && hidden_size > 0, "LSTMCell", "sizes must be positive, got input_size ", input_size,
            ", hidden_size ", hidden_size);
  RnnWeights w = make_weights([&](const std::string& n, Tensor t) { return register_parameter(n, t); }, 4,
                              input_size, hidden_size, bias, "");
  weight_ih = w.weight_ih, weight_hh = w.weight_hh, bias_ih = w.bias_ih, bias_hh = w.bias_hh;
}

std::pair<Tensor, Tensor> LSTMCell::forward(const Tensor& x, const Tensor& h, const Tensor& c) {
  return lstm_cell(x, h, c, {weight_ih, weight_hh, bias_ih, bias_hh}, "LSTMCell");
}

GRUCell::GRUCell(int64_t input_size, int64_t hidden_size, bool bias)
    : input_size_(input_size), hidden_size_(hidden_size) {
  QKV_CHECK(input_size > 0 && hidden_size > 0, "GRUCell", "sizes must be positive, got input_size ", input_size,
            ", hidden_size ", hidden_size);
  RnnWeights w = make_weights([&](const std::string& n, Tensor t) { return register_parameter(n, t); }, 3,
                              input_size, hidden_size, bias, "");
  weight_ih = w.weight_ih, weight_hh = w.weight_hh, bias_ih = w.bias_ih, bias_hh = w.bias_hh;
}

Tensor GRUCell::forward(const Tensor& x, const Tensor& h) {
  return gru_cell(x, h, {weight_ih, weight_hh, bias_ih, bias_hh}, "GRUCell");
}

RnnBase::RnnBase(const char* name, RnnKind kind, const RnnOptions& o) : name_(name), kind_(kind), opts_(o) {
  QKV_CHECK(o.input_size > 0 && o.hidden_size > 0 && o.num_layers >= 1, name, "sizes must be positive, got input_size ",
            o.input_size, ", hidden_size ", o.hidden_size, ", num_layers ", o.num_layers);
  QKV_CHECK(o.dropout >= 0.f && o.dropout < 1.f, name, "dropout must be in [0, 1), got ", o.dropout);
  const int64_t dirs = num_directions();
  for (int64_t l = 0; l < o.num_layers; ++l)
    for (int64_t dir = 0; dir < dirs; ++dir)
      w_.push_back(make_weights([&](const std::string& n, Tensor t) { return register_parameter(n, t); },
                                kernels::rnn_gates(kind), l == 0 ? o.input_size : o.hidden_size * dirs, o.hidden_size,
                                o.bias, "_l" + std::to_string(l) + (dir ? "_reverse" : "")));
}

const RnnWeights& RnnBase::weights(int64_t layer, int direction) const {
  QKV_CHECK(layer >= 0 && layer < opts_.num_layers && direction >= 0 && direction < num_directions(), name_,
            "no weights for layer ", layer, " direction ", direction, " (", opts_.num_layers, " layers, ",
            num_directions(), " directions)");
  return w_[size_t(layer * num_directions() + direction)];
}

RnnOutput RnnBase::run(const Tensor& x, const Tensor& lengths, const Tensor& h0, const Tensor& c0) {
  return rnn_forward(kind_, opts_, w_, x, lengths, h0, c0, is_training(), default_generator(), name_);
}

LSTM::LSTM(const RnnOptions& o) : RnnBase("LSTM", RnnKind::lstm, o) {}

RnnOutput LSTM::forward(const Tensor& x, const Tensor& lengths, const Tensor& h0, const Tensor& c0) {
  return run(x, lengths, h0, c0);
}

GRU::GRU(const RnnOptions& o) : RnnBase("GRU", RnnKind::gru, o) {}

RnnOutput GRU::forward(const Tensor& x, const Tensor& lengths, const Tensor& h0) {
  return run(x, lengths, h0, Tensor());
}

}  // namespace qkv::nn
