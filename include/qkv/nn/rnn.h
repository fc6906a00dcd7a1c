// qkv/nn/rnn.h - LSTM and GRU: single-step cells and multi-layer, bidirectional, padding-aware
// sequence layers.
//
// Parameter names and layouts are exactly torch.nn.LSTM / GRU / LSTMCell / GRUCell, so state
// dicts interchange:
//   LSTM gates i, f, g, o stacked in weight_ih (4H, I), weight_hh (4H, H), bias_ih (4H), bias_hh (4H)
//     i = sig(.), f = sig(.), g = tanh(.), o = sig(.);  c' = f c + i g;  h' = o tanh(c')
//   GRU gates r, z, n stacked (3H, ...)
//     r = sig(.), z = sig(.), n = tanh(W_in x + b_in + r * (W_hn h + b_hn));  h' = (1 - z) n + z h
// A layer (one direction of one layer) runs as one autograd node: the input projection of the
// whole sequence is one GEMM, each step is one GEMM for the hidden projection plus one fused
// gate kernel, and the backward mirrors it (kernels/rnn.h).
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "qkv/kernels/rnn.h"
#include "qkv/nn/module.h"
#include "qkv/tensor/rng.h"

namespace qkv::nn {

class LSTMCell : public Module {
 public:
  LSTMCell(int64_t input_size, int64_t hidden_size, bool bias = true);
  // x (B, I), h/c (B, H) -> {h', c'} (B, H). Differentiable.
  std::pair<Tensor, Tensor> forward(const Tensor& x, const Tensor& h, const Tensor& c);
  int64_t input_size() const { return input_size_; }
  int64_t hidden_size() const { return hidden_size_; }
  Tensor weight_ih, weight_hh;  // (4H, I), (4H, H)
  Tensor bias_ih, bias_hh;      // (4H) each, undefined without bias

 private:
  int64_t input_size_, hidden_size_;
};

class GRUCell : public Module {
 public:
  GRUCell(int64_t input_size, int64_t hidden_size, bool bias = true);
  // x (B, I), h (B, H) -> h' (B, H). Differentiable.
  Tensor forward(const Tensor& x, const Tensor& h);
  int64_t input_size() const { return input_size_; }
  int64_t hidden_size() const { return hidden_size_; }
  Tensor weight_ih, weight_hh;  // (3H, I), (3H, H)
  Tensor bias_ih, bias_hh;      // (3H) each, undefined without bias

 private:
  int64_t input_size_, hidden_size_;
};

struct RnnOptions {
  int64_t input_size = 0, hidden_size = 0, num_layers = 1;
  bool bidirectional = false, bias = true;
  float dropout = 0.f;  // between layers (not after the last), training mode only, as torch
};

struct RnnOutput {
  Tensor output;  // (B, T, dirs*H), batch-first; exactly 0 at padded steps t >= lengths[b]
  Tensor h_n;     // (num_layers*dirs, B, H), torch order (layer-major, forward then reverse); the state
                  // after each sequence's last real step (the reverse direction ends at t = 0)
  Tensor c_n;     // same shape, LSTM only (undefined for GRU)
};

// The parameters of one direction of one layer of an LSTM or GRU.
struct RnnWeights {
  Tensor weight_ih, weight_hh;  // (G*H, I_layer), (G*H, H); G = 4 (LSTM) or 3 (GRU)
  Tensor bias_ih, bias_hh;      // (G*H) or undefined
};

using kernels::RnnKind;

// The functional forms the modules run (weights of x's dtype, f32 or f64; `who` names the
// caller in errors). w holds num_layers * dirs entries, layer-major, forward then reverse.
// Dropout between layers draws from gen, only when training.
RnnOutput rnn_forward(RnnKind kind, const RnnOptions& o, const std::vector<RnnWeights>& w, const Tensor& x,
                      const Tensor& lengths, const Tensor& h0, const Tensor& c0, bool training,
                      Generator& gen = default_generator(), const char* who = "rnn");
std::pair<Tensor, Tensor> lstm_cell(const Tensor& x, const Tensor& h, const Tensor& c, const RnnWeights& w,
                                    const char* who = "lstm_cell");
Tensor gru_cell(const Tensor& x, const Tensor& h, const RnnWeights& w, const char* who = "gru_cell");

// Shared machinery of LSTM and GRU (parameters, validation, the layer/direction loop).
class RnnBase : public Module {
 public:
  const RnnOptions& options() const { return opts_; }
  int num_directions() const { return opts_.bidirectional ? 2 : 1; }
  // The weights of `layer`, direction 0 (forward) or 1 (reverse).
  const RnnWeights& weights(int64_t layer, int direction = 0) const;

 protected:
  RnnBase(const char* name, RnnKind kind, const RnnOptions& o);
  // Runs every layer and direction (c0 must be undefined for the GRU).
  RnnOutput run(const Tensor& x, const Tensor& lengths, const Tensor& h0, const Tensor& c0);

 private:
  const char* name_;  // "LSTM" / "GRU", for errors
  RnnKind kind_;
  RnnOptions opts_;
  std::vector<RnnWeights> w_;  // [layer * dirs + direction]
};

class LSTM : public RnnBase {  // params weight_ih_l{k}[_reverse], weight_hh_l{k}.., bias_ih_l{k}.., bias_hh_l{k}..
 public:
  explicit LSTM(const RnnOptions& o);
  // x (B, T, I) f32; lengths: i64 (B) with 1 <= len <= T, or an undefined Tensor = all T.
  // h0/c0: (num_layers*dirs, B, H) or undefined = zeros.
  RnnOutput forward(const Tensor& x, const Tensor& lengths = {}, const Tensor& h0 = {}, const Tensor& c0 = {});
};

class GRU : public RnnBase {
 public:
  explicit GRU(const RnnOptions& o);
  // As LSTM::forward, without the cell state (c_n undefined).
  RnnOutput forward(const Tensor& x, const Tensor& lengths = {}, const Tensor& h0 = {});
};

}  // namespace qkv::nn
