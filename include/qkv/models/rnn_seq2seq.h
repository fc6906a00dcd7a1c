// qkv/models/rnn_seq2seq.h - recurrent encoder-decoders as a Seq2Seq: Sutskever et al. 2014
// (no attention), Bahdanau et al. 2015 (additive attention) and Luong et al. 2015
// (multiplicative attention, input feeding). One class; the config picks the variant.
//
// Encoder (every variant). Source x_1..x_n (padding at the end of a row; with reverse_source the
// real tokens are reversed, x_n..x_1, padding stays at the end):
//   h_1..h_S = RNN_enc(Dropout(E_src[x]), lengths)        (B, S, Hk), Hk = dirs * enc_hidden,
//                                                          zero at padding, forward;backward concatenated
// Decoder initial state s_0 (per decoder layer, h and for the LSTM also c), the "bridge":
//   copy:   s_0 = the encoder's final state of the same layer, [fwd; bwd] concatenated
//           (needs dec_layers == enc_layers and dec_hidden == Hk)
//   linear: h_0 = tanh(W_h [h_fwd; h_bwd] + b_h), c_0 = W_c [c_fwd; c_bwd] + b_c, from the top
//           encoder layer's final states, one (dec_layers * dec_hidden) projection (Bahdanau: s_0 = tanh(W_s h_1<-))
//   zeros:  s_0 = 0 (attention variants only: without attention the decoder would never see the source)
// Decoder step t, with y = Dropout(E_tgt[y_{t-1}]) (B, E):
//   none:      s_t = RNN_dec(y, s_{t-1});                                  o_t = s_t
//   bahdanau:  a_t = softmax_i(v^T tanh(W_1 s_{t-1} + W_2 h_i)); c_t = sum_i a_ti h_i
//              s_t = RNN_dec([y; c_t], s_{t-1});                           o_t = [s_t; c_t; y]
//              (s_{t-1} is the top layer's h. The output layer reads [s_t; c_t; y] as the paper's
//              deep output t_i = U s + V E y + C c does, without its maxout, as in the widely used
//              PyTorch tutorials: one linear layer straight to the vocabulary.)
//   luong:     s_t = RNN_dec(y, s_{t-1})   or with input feeding   RNN_dec([y; h~_{t-1}], s_{t-1}), h~_0 = 0
//              a_t = softmax_i(score(s_t, h_i)); c_t = sum_i a_ti h_i       score: dot | general | concat
//              or location-based (section 3.1): a_t = softmax(W_a s_t) over source positions 0..S-1,
//              W_a (max_len, Hd): the weights come from s_t alone, the context still from h
//              h~_t = tanh(W_c [c_t; s_t]) (no bias, eq. 5);                o_t = h~_t
//   logits_t = W_out Dropout(o_t) + b_out                                   (B, V)
// Source padding is masked in the attention softmax and the encoder runs with the true lengths.
// Without attention and for Luong without input feeding the decoder recurrence never sees the
// attention, so forward() runs it over the whole target at once; the others step through time.
//
// Parameters are initialised U(-0.1, 0.1) (Luong et al.; Sutskever et al. used 0.08), padding
// embedding rows zero. Names: src_embed.weight, tgt_embed.weight, encoder.* and decoder.* (exactly
// torch.nn.LSTM / GRU: weight_ih_l0, weight_hh_l0_reverse, ...), bridge_h.* / bridge_c.* (linear
// bridge), attention.* (attention/rnn_attention.h: query_proj, key_proj, v / attn, v; location's W_a
// is attention.attn.weight (max_len, Hd)),
// attn_out.weight (Luong W_c), generator.weight / generator.bias.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "qkv/attention/rnn_attention.h"
#include "qkv/models/seq2seq.h"
#include "qkv/nn/rnn.h"

namespace qkv::models {

enum class RnnCell { lstm, gru };
enum class RnnAttentionKind { none, bahdanau, luong };
enum class RnnBridge { copy, linear, zeros };

struct RnnSeq2SeqConfig {
  int64_t src_vocab = 0, tgt_vocab = 0;
  RnnCell cell = RnnCell::lstm;
  int64_t embed_dim = 256;
  int64_t enc_hidden = 256, enc_layers = 1;  // per direction
  bool bidirectional = false;
  int64_t dec_hidden = 256, dec_layers = 1;
  double dropout = 0.0;  // embeddings, between RNN layers, before the output layer
  RnnAttentionKind attention = RnnAttentionKind::luong;
  attention::LuongScore score = attention::LuongScore::general;  // luong only (location: W_a has max_len rows)
  int64_t attn_dim = 0;         // bahdanau / luong concat: width of the scoring MLP (0 = dec_hidden)
  bool input_feeding = false;   // luong only: h~_{t-1} joins the next decoder input
  bool reverse_source = false;  // Sutskever et al.: feed the source backwards
  RnnBridge bridge = RnnBridge::copy;
  int64_t max_len = 256;        // longest source / target sequence (and location attention's positions)
  int64_t pad_id = 0, bos_id = 1, eos_id = 2;

  int64_t key_dim() const { return (bidirectional ? 2 : 1) * enc_hidden; }  // Hk
  int64_t effective_attn_dim() const { return attn_dim > 0 ? attn_dim : dec_hidden; }
  // Throws qkv::Error "<file>: field '<section>.<key>': ..." naming the offending key and what
  // would fit (e.g. a copy bridge from a bidirectional encoder into a narrower decoder).
  void validate(const std::string& file = "RnnSeq2SeqConfig", const std::string& section = "") const;
  // Strict parse: unknown keys, wrong types, and keys meaningless for the chosen variant
  // ("score" without Luong attention, ...) are errors naming file and key. Validates.
  static RnnSeq2SeqConfig parse(const nlohmann::json& j, const std::string& file, const std::string& section = "");
};

// Writes the fields that apply to the variant (so parse(to_json(c)) == c).
void to_json(nlohmann::json& j, const RnnSeq2SeqConfig& c);
void from_json(const nlohmann::json& j, RnnSeq2SeqConfig& c);  // parse(j, "RnnSeq2SeqConfig")

// The recurrent state between decoder steps; rows are sentences or hypotheses.
struct RnnDecoderCarry {
  Tensor h, c;  // (dec_layers, R, dec_hidden); c undefined for the GRU
  Tensor feed;  // (R, dec_hidden) h~_{t-1} with input feeding, else undefined
};

class RnnSeq2SeqState : public DecoderState {
 public:
  void select_rows(const std::vector<int64_t>& rows) override;
  int64_t rows() const override { return rows_; }
  int64_t steps() const override { return steps_; }

  attention::PreparedKeys memory;  // encoder states (R, S, Hk), projected keys, pad (R, S)
  RnnDecoderCarry carry;
  int64_t rows_ = 0, steps_ = 0;
};

class RnnSeq2Seq : public Seq2Seq {
 public:
  explicit RnnSeq2Seq(const RnnSeq2SeqConfig& cfg, Generator& gen = default_generator());

  // ---- Seq2Seq ----
  // src (B, S) i64 (padding at the end of each row), src_pad (B, S) u8 1 = padding (or
  // undefined), tgt_in (B, T) i64 -> logits (B, T, V).
  Tensor forward(const Tensor& src, const Tensor& src_pad, const Tensor& tgt_in) override;
  std::unique_ptr<DecoderState> start(const Tensor& src, const Tensor& src_pad) override;
  // last_tokens (rows) or (rows, 1) i64 -> logits (rows, V). Runs under no-grad.
  Tensor step(DecoderState& state, const Tensor& last_tokens) override;
  // One layer of one head (B, 1, T, S), columns in the order of `src` (also with reverse_source);
  // no layers without attention. Eval mode (training flag restored after).
  AttentionMaps cross_attention(const Tensor& src, const Tensor& src_pad, const Tensor& tgt_in) override;
  int64_t src_vocab() const override { return cfg_.src_vocab; }
  int64_t tgt_vocab() const override { return cfg_.tgt_vocab; }
  int64_t max_len() const override { return cfg_.max_len; }

  // ---- pieces ----
  struct Encoded {
    attention::PreparedKeys memory;  // keys (B, S, Hk), projected keys, pad (B, S)
    RnnDecoderCarry init;            // s_0
  };
  Encoded encode(const Tensor& src, const Tensor& src_pad) const;
  // Teacher-forced decoder outputs o_1..o_T (B, T, Do) before the output layer; attention
  // weights (B, T, S) into *weights if non-null.
  Tensor decode(const Tensor& tgt_in, const Encoded& enc, Tensor* weights = nullptr) const;
  // One decoder step: y (R, E) embedded previous tokens -> o_t (R, Do); advances carry.
  Tensor decode_step(const Tensor& y, RnnDecoderCarry& carry, const attention::PreparedKeys& memory,
                     Tensor* weights = nullptr) const;
  const RnnSeq2SeqConfig& config() const { return cfg_; }

  std::shared_ptr<nn::Embedding> src_embed, tgt_embed;
  std::shared_ptr<nn::RnnBase> encoder, decoder;  // nn::LSTM or nn::GRU
  std::shared_ptr<nn::Linear> bridge_h, bridge_c;  // linear bridge only (bridge_c: LSTM only)
  std::shared_ptr<attention::RnnAttention> attention;  // Bahdanau or Luong, or null
  std::shared_ptr<nn::Linear> attn_out;                // Luong W_c (Hd, Hk + Hd), no bias
  std::shared_ptr<nn::Linear> generator;               // (V, Do) + bias
  std::shared_ptr<nn::Dropout> dropout;

 private:
  nn::RnnOutput run_rnn(nn::RnnBase& rnn, const Tensor& x, const Tensor& lengths, const Tensor& h0,
                        const Tensor& c0) const;
  RnnDecoderCarry bridge(const nn::RnnOutput& enc) const;
  Tensor check_ids(const Tensor& ids, const char* what) const;
  RnnSeq2SeqConfig cfg_;
};

}  // namespace qkv::models
