// qkv/kernels/rnn.h - one direction of one LSTM / GRU layer over a padded, batch-first batch
// (f32, f64): forward and hand-written backward.
//
// Forward: the input projection of the whole sequence is one GEMM, (B*T, I) x (I, G*H) (G = 4 for
// the LSTM, 3 for the GRU), with the biases fused; each step adds h_{t-1} W_hh^T with one GEMM
// and runs one fused, vectorised gate kernel (sigmoid/tanh, cell update) that overwrites the
// pre-activations with the gate activations, which the backward reuses.
// Backward: the reverse time loop runs the gate kernel's derivative and one GEMM per step for
// dh_{t-1} = dpre_t W_hh; dW_hh, dW_ih and dx are then one GEMM each over all T*B rows.
//
// Padding: row b is active at step t iff t < len[b]. An inactive step leaves the row's state as
// it was and writes y = 0, so the forward direction's state after its last real step, and the
// reverse direction (t = T-1 .. 0) starts from h0 at t = len[b]-1: exactly what torch gives for
// pack_padded_sequence. Inactive steps get zero gradients.
#pragma once
#include <cstdint>

#include "qkv/tensor/tensor.h"

namespace qkv::kernels {

enum class RnnKind { lstm, gru };
constexpr int64_t rnn_gates(RnnKind k) { return k == RnnKind::lstm ? 4 : 3; }

struct RnnLayerDims {
  RnnKind kind = RnnKind::lstm;
  bool reverse = false;
  int64_t B = 0, T = 0, I = 0, H = 0;
  const int64_t* len = nullptr;  // (B) with 1 <= len[b] <= T, or nullptr = all T
};

// What the backward needs (filled by the forward when save is set). Time-major, so that each
// step's rows are one contiguous GEMM operand.
struct RnnSaved {
  Tensor x_tm;   // (T, B, I): the input
  Tensor gates;  // (T, B, G*H): gate activations (LSTM i f g o; GRU r z n)
  Tensor hprev;  // (T, B, H): the state h_{t-1} each step started from
  Tensor aux;    // (T, B, H): LSTM c_{t-1}; GRU W_hn h_{t-1} + b_hn
};

// x (B, T, I), h0 / c0 (B, H) (c0 LSTM only), w_ih (G*H, I), w_hh (G*H, H), b_ih / b_hh (G*H) or
// undefined; all contiguous and of one dtype. Writes y (B, T, H), h_n and (LSTM) c_n (B, H),
// all preallocated and contiguous. Without save, `saved` holds only scratch afterwards.
void rnn_layer_forward(const RnnLayerDims& d, const Tensor& x, const Tensor& h0, const Tensor& c0,
                       const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh, bool save,
                       Tensor& y, Tensor& h_n, Tensor& c_n, RnnSaved& saved);

// Gradients wanted (a null pointer is not computed); each is preallocated, contiguous, and
// overwritten. g_y (B, T, H), g_hn, g_cn (B, H) may be undefined (= zero).
struct RnnLayerGrads {
  Tensor *x = nullptr, *h0 = nullptr, *c0 = nullptr;
  Tensor *w_ih = nullptr, *w_hh = nullptr, *b_ih = nullptr, *b_hh = nullptr;
};
void rnn_layer_backward(const RnnLayerDims& d, const Tensor& w_ih, const Tensor& w_hh, const RnnSaved& saved,
                        const Tensor& g_y, const Tensor& g_hn, const Tensor& g_cn, const RnnLayerGrads& out);

}  // namespace qkv::kernels
