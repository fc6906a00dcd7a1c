#include "qkv/models/rnn_seq2seq.h"

#include <string_view>

#include "qkv/autograd/node.h"
#include "qkv/ops/elementwise.h"
#include "qkv/ops/shape.h"

namespace qkv::models {
namespace {

// Per-row source layout from the padding mask: true lengths (B) i64, and when reversing, the
// (B, S) gather index that reverses the first lengths[b] positions of row b (an involution, so
// it also maps attention columns back to source order).
struct SourceLayout {
  Tensor lengths;  // (B) i64
  Tensor reverse;  // (B, S) i64, or undefined
};

SourceLayout source_layout(const Tensor& src, const Tensor& src_pad, bool reverse) {
  const int64_t B = src.size(0), S = src.size(1);
  std::vector<int64_t> len(size_t(B), S);
  if (src_pad.defined()) {
    std::vector<uint8_t> pad = contiguous(src_pad).to_vector<uint8_t>();
    for (int64_t b = 0; b < B; ++b) {
      int64_t n = 0;
      while (n < S && !pad[size_t(b * S + n)]) ++n;
      for (int64_t t = n; t < S; ++t)
        QKV_CHECK(pad[size_t(b * S + t)], "RnnSeq2Seq", "src_pad row ", b, " has a real token at ", t,
                  " after padding at ", n, "; the encoder needs padding at the end of each row");
      QKV_CHECK(n >= 1, "RnnSeq2Seq", "src_pad row ", b, " is all padding; every source needs a token");
      len[size_t(b)] = n;
    }
  }
  SourceLayout l;
  l.lengths = Tensor::from_vector<int64_t>(len, {B});
  if (reverse) {
    std::vector<int64_t> idx(size_t(B * S));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < S; ++t) idx[size_t(b * S + t)] = t < len[size_t(b)] ? len[size_t(b)] - 1 - t : t;
    l.reverse = Tensor::from_vector<int64_t>(idx, {B, S});
  }
  return l;
}

// Row t of a (B, T, D) sequence as (B, D).
Tensor at_step(const Tensor& seq, int64_t t) { return reshape(slice(seq, 1, t, t + 1), {seq.size(0), seq.size(2)}); }

}  // namespace

// ---------------------------------------------------------------- state

void RnnSeq2SeqState::select_rows(const std::vector<int64_t>& rows) {
  for (int64_t r : rows)
    QKV_CHECK(r >= 0 && r < rows_, "RnnSeq2SeqState::select_rows", "row ", r, " out of range for ", rows_, " rows");
  NoGradGuard ng;
  Tensor index = Tensor::from_vector<int64_t>(rows, {int64_t(rows.size())});
  auto pick = [&](Tensor& t, int axis) {
    if (t.defined()) t = index_select(t, axis, index);
  };
  pick(memory.keys, 0);       // (R, S, Hk)
  pick(memory.projected, 0);  // (R, S, A)
  pick(memory.pad, 0);        // (R, S)
  pick(carry.h, 1);           // (L, R, Hd)
  pick(carry.c, 1);
  pick(carry.feed, 0);        // (R, Hd)
  rows_ = int64_t(rows.size());
}

// ---------------------------------------------------------------- model

RnnSeq2Seq::RnnSeq2Seq(const RnnSeq2SeqConfig& cfg, Generator& gen) : cfg_(cfg) {
  cfg_.validate();
  const int64_t E = cfg_.embed_dim, Hk = cfg_.key_dim(), Hd = cfg_.dec_hidden, A = cfg_.effective_attn_dim();
  const bool bahdanau = cfg_.attention == RnnAttentionKind::bahdanau, luong = cfg_.attention == RnnAttentionKind::luong;
  src_embed = register_module("src_embed", std::make_shared<nn::Embedding>(cfg_.src_vocab, E, cfg_.pad_id));
  tgt_embed = register_module("tgt_embed", std::make_shared<nn::Embedding>(cfg_.tgt_vocab, E, cfg_.pad_id));

  auto make_rnn = [&](int64_t in, int64_t hidden, int64_t layers, bool bidir) -> std::shared_ptr<nn::RnnBase> {
    nn::RnnOptions o;
    o.input_size = in;
    o.hidden_size = hidden;
    o.num_layers = layers;
    o.bidirectional = bidir;
    o.dropout = float(cfg_.dropout);
    if (cfg_.cell == RnnCell::lstm) return std::make_shared<nn::LSTM>(o);
    return std::make_shared<nn::GRU>(o);
  };
  encoder = register_module("encoder", make_rnn(E, cfg_.enc_hidden, cfg_.enc_layers, cfg_.bidirectional));
  // Decoder input: y, [y; c_t] (Bahdanau) or [y; h~_{t-1}] (Luong with input feeding).
  const int64_t dec_in = E + (bahdanau ? Hk : luong && cfg_.input_feeding ? Hd : 0);
  decoder = register_module("decoder", make_rnn(dec_in, Hd, cfg_.dec_layers, false));
  if (cfg_.bridge == RnnBridge::linear) {
    bridge_h = register_module("bridge_h", std::make_shared<nn::Linear>(Hk, cfg_.dec_layers * Hd));
    if (cfg_.cell == RnnCell::lstm)
      bridge_c = register_module("bridge_c", std::make_shared<nn::Linear>(Hk, cfg_.dec_layers * Hd));
  }
  if (bahdanau) {
    attention = register_module("attention", std::make_shared<attention::BahdanauAttention>(
                                                 Hd, Hk, A, attention::AdditiveForm::sum));
  } else if (luong) {
    attention = register_module("attention", std::make_shared<attention::LuongAttention>(Hd, Hk, cfg_.score, A,
                                                                                         cfg_.max_len));
    attn_out = register_module("attn_out", std::make_shared<nn::Linear>(Hk + Hd, Hd, false));
  }
  const int64_t out_dim = bahdanau ? Hd + Hk + E : Hd;  // o_t: [s_t; c_t; y] or s_t or h~_t
  generator = register_module("generator", std::make_shared<nn::Linear>(out_dim, cfg_.tgt_vocab));
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(cfg_.dropout));

  for (auto& [name, p] : named_parameters()) nn::init::uniform(p, -0.1, 0.1, gen);
  for (auto* emb : {src_embed.get(), tgt_embed.get()}) {
    float* row = emb->weight.data<float>() + cfg_.pad_id * E;
    std::fill(row, row + E, 0.f);
    emb->weight.mark_modified();
  }
}

nn::RnnOutput RnnSeq2Seq::run_rnn(nn::RnnBase& rnn, const Tensor& x, const Tensor& lengths, const Tensor& h0,
                                  const Tensor& c0) const {
  if (auto* lstm = dynamic_cast<nn::LSTM*>(&rnn)) return lstm->forward(x, lengths, h0, c0);
  return static_cast<nn::GRU&>(rnn).forward(x, lengths, h0);
}

Tensor RnnSeq2Seq::check_ids(const Tensor& ids, const char* what) const {
  QKV_CHECK(ids.defined() && ids.ndim() == 2 && (ids.dtype() == DType::i64 || ids.dtype() == DType::i32),
            "RnnSeq2Seq", what, " must be (B, T) i64, got ", ids.defined() ? ids.str() : std::string("undefined"));
  // Location attention has one row of W_a per source position: max_len of them.
  const bool location = cfg_.attention == RnnAttentionKind::luong && cfg_.score == attention::LuongScore::location &&
                        std::string_view(what) == "src";
  QKV_CHECK(ids.size(1) >= 1 && ids.size(1) <= cfg_.max_len, "RnnSeq2Seq", what, " length ", ids.size(1),
            " outside [1, max_len=", cfg_.max_len, "] (config field 'max_len'",
            location ? ", also the number of source positions location attention can score" : "", ")");
  return ids;
}

// s_0 from the encoder's final states h_n / c_n (enc_layers * dirs, B, He).
RnnDecoderCarry RnnSeq2Seq::bridge(const nn::RnnOutput& enc) const {
  const int64_t Le = cfg_.enc_layers, dirs = cfg_.bidirectional ? 2 : 1, B = enc.h_n.size(1);
  const int64_t He = cfg_.enc_hidden, Ld = cfg_.dec_layers, Hd = cfg_.dec_hidden;
  const bool lstm = cfg_.cell == RnnCell::lstm;
  auto per_layer = [&](const Tensor& t) {  // (Le * dirs, B, He) -> (Le, B, dirs * He): [fwd; bwd] per layer
    return reshape(permute(reshape(t, {Le, dirs, B, He}), {0, 2, 1, 3}), {Le, B, dirs * He});
  };
  auto to_layers = [&](const Tensor& t) {  // (B, Ld * Hd) -> (Ld, B, Hd)
    return contiguous(permute(reshape(t, {B, Ld, Hd}), {1, 0, 2}));
  };
  RnnDecoderCarry s;
  switch (cfg_.bridge) {
    case RnnBridge::copy:
      s.h = contiguous(per_layer(enc.h_n));
      if (lstm) s.c = contiguous(per_layer(enc.c_n));
      break;
    case RnnBridge::linear: {
      auto top = [&](const Tensor& t) { return reshape(slice(per_layer(t), 0, Le - 1, Le), {B, dirs * He}); };
      s.h = to_layers(tanh(bridge_h->forward(top(enc.h_n))));  // tanh(W_h [h_fwd; h_bwd] + b_h)
      if (lstm) s.c = to_layers(bridge_c->forward(top(enc.c_n)));
      break;
    }
    case RnnBridge::zeros:
      s.h = Tensor::zeros({Ld, B, Hd});
      if (lstm) s.c = Tensor::zeros({Ld, B, Hd});
      break;
  }
  if (cfg_.attention == RnnAttentionKind::luong && cfg_.input_feeding) s.feed = Tensor::zeros({B, Hd});  // h~_0
  return s;
}

RnnSeq2Seq::Encoded RnnSeq2Seq::encode(const Tensor& src, const Tensor& src_pad) const {
  check_ids(src, "src");
  if (src_pad.defined())
    QKV_CHECK(src_pad.shape() == src.shape() && (src_pad.dtype() == DType::u8 || src_pad.dtype() == DType::boolean),
              "RnnSeq2Seq", "src_pad must be u8 ", src.shape().str(), " like src, got ", src_pad.str());
  SourceLayout layout = source_layout(src, src_pad, cfg_.reverse_source);
  Tensor ids = cfg_.reverse_source ? gather(src, 1, layout.reverse) : src;  // x_n .. x_1, padding stays last
  Tensor x = dropout->forward(src_embed->forward(ids));                    // (B, S, E)
  nn::RnnOutput out = run_rnn(*encoder, x, layout.lengths, Tensor(), Tensor());  // output (B, S, Hk), 0 at padding
  Encoded e;
  e.memory = attention ? attention->prepare(out.output, src_pad) : attention::PreparedKeys{out.output, Tensor(), src_pad};
  e.init = bridge(out);
  return e;
}

Tensor RnnSeq2Seq::decode_step(const Tensor& y, RnnDecoderCarry& carry, const attention::PreparedKeys& memory,
                               Tensor* weights) const {
  const int64_t R = y.size(0), Hd = cfg_.dec_hidden;
  auto recur = [&](const Tensor& x) {  // s_t = RNN_dec(x, s_{t-1}): x (R, I) -> top layer's h (R, Hd)
    nn::RnnOutput r = run_rnn(*decoder, unsqueeze(x, 1), Tensor(), carry.h, carry.c);
    carry.h = r.h_n;
    carry.c = r.c_n;
    return reshape(r.output, {R, Hd});
  };
  switch (cfg_.attention) {
    case RnnAttentionKind::none: return recur(y);
    case RnnAttentionKind::bahdanau: {
      Tensor prev = reshape(slice(carry.h, 0, cfg_.dec_layers - 1, cfg_.dec_layers), {R, Hd});  // s_{t-1}
      attention::Alignment a = attention->forward(prev, memory);  // c_t (R, Hk), a_t (R, S)
      if (weights) *weights = a.weights;
      Tensor s = recur(concat({y, a.context}, 1));
      return concat({s, a.context, y}, 1);  // (R, Hd + Hk + E)
    }
    case RnnAttentionKind::luong: {
      Tensor s = recur(cfg_.input_feeding ? concat({y, carry.feed}, 1) : y);
      attention::Alignment a = attention->forward(s, memory);
      if (weights) *weights = a.weights;
      Tensor h_att = tanh(attn_out->forward(concat({a.context, s}, 1)));  // h~_t (R, Hd)
      if (cfg_.input_feeding) carry.feed = h_att;
      return h_att;
    }
  }
  return {};
}

Tensor RnnSeq2Seq::decode(const Tensor& tgt_in, const Encoded& enc, Tensor* weights) const {
  check_ids(tgt_in, "tgt_in");
  const int64_t B = tgt_in.size(0), T = tgt_in.size(1);
  QKV_CHECK(enc.memory.keys.size(0) == B, "RnnSeq2Seq", "batch of tgt_in ", tgt_in.str(), " differs from the source's ",
            enc.memory.keys.str());
  Tensor ys = dropout->forward(tgt_embed->forward(tgt_in));  // (B, T, E)
  RnnDecoderCarry carry = enc.init;
  std::vector<Tensor> outs, ws;
  const bool feeds_back = cfg_.attention == RnnAttentionKind::bahdanau || cfg_.input_feeding;
  if (!feeds_back) {
    // The recurrence never sees the attention: run it over the whole target at once.
    Tensor s = run_rnn(*decoder, ys, Tensor(), carry.h, carry.c).output;  // (B, T, Hd)
    if (cfg_.attention == RnnAttentionKind::none) return s;
    std::vector<Tensor> ctx;
    for (int64_t t = 0; t < T; ++t) {
      attention::Alignment a = attention->forward(at_step(s, t), enc.memory);
      ctx.push_back(unsqueeze(a.context, 1));
      ws.push_back(unsqueeze(a.weights, 1));
    }
    if (weights) *weights = concat(ws, 1);                       // (B, T, S)
    return tanh(attn_out->forward(concat({concat(ctx, 1), s}, 2)));  // h~ (B, T, Hd)
  }
  for (int64_t t = 0; t < T; ++t) {
    Tensor w;
    outs.push_back(unsqueeze(decode_step(at_step(ys, t), carry, enc.memory, &w), 1));
    ws.push_back(unsqueeze(w, 1));
  }
  if (weights) *weights = concat(ws, 1);
  return concat(outs, 1);  // (B, T, Do)
}

Tensor RnnSeq2Seq::forward(const Tensor& src, const Tensor& src_pad, const Tensor& tgt_in) {
  return generator->forward(dropout->forward(decode(tgt_in, encode(src, src_pad))));  // (B, T, V)
}

std::unique_ptr<DecoderState> RnnSeq2Seq::start(const Tensor& src, const Tensor& src_pad) {
  NoGradGuard ng;
  Encoded e = encode(src, src_pad);
  auto st = std::make_unique<RnnSeq2SeqState>();
  st->memory = e.memory;
  st->carry = e.init;
  st->rows_ = src.size(0);
  return st;
}

Tensor RnnSeq2Seq::step(DecoderState& state, const Tensor& last_tokens) {
  auto* st = dynamic_cast<RnnSeq2SeqState*>(&state);
  QKV_CHECK(st != nullptr, "RnnSeq2Seq::step", "the state was not made by RnnSeq2Seq::start");
  NoGradGuard ng;
  const int64_t R = st->rows();
  QKV_CHECK(last_tokens.defined() && last_tokens.numel() == R && (last_tokens.ndim() == 1 || last_tokens.ndim() == 2),
            "RnnSeq2Seq::step", "expected last_tokens (", R, ") or (", R, ", 1), got ",
            last_tokens.defined() ? last_tokens.str() : std::string("undefined"));
  QKV_CHECK(st->steps_ < cfg_.max_len, "RnnSeq2Seq::step", "target length would exceed max_len ", cfg_.max_len);
  Tensor y = dropout->forward(tgt_embed->forward(reshape(last_tokens, {R})));  // (R, E)
  Tensor o = decode_step(y, st->carry, st->memory);
  ++st->steps_;
  return generator->forward(dropout->forward(o));  // (R, V)
}

AttentionMaps RnnSeq2Seq::cross_attention(const Tensor& src, const Tensor& src_pad, const Tensor& tgt_in) {
  NoGradGuard ng;
  AttentionMaps maps;
  if (!attention) return maps;
  Tensor w;  // (B, T, S) over the encoder's (possibly reversed) positions
  {
    const nn::EvalScope eval_mode(*this);
    decode(tgt_in, encode(src, src_pad), &w);
  }
  if (cfg_.reverse_source) {  // back to source order: column j of row b is reversed position rev[b][j]
    Tensor rev = source_layout(src, src_pad, true).reverse;  // (B, S)
    w = gather(w, 2, contiguous(expand(unsqueeze(rev, 1), w.shape())));
  }
  maps.layers.push_back(unsqueeze(w, 1));  // (B, 1, T, S)
  return maps;
}

}  // namespace qkv::models
