"""References for models/rnn_seq2seq: RNN encoder-decoders (no attention / Bahdanau / Luong with
dot, general, concat or location scoring)
written with torch.nn.LSTM / GRU and hand-written attention, parameter names = qkv's.

fwd_<variant>: the config as qkv's RnnSeq2SeqConfig JSON, parameters p.<name>, a padded batch,
               logits, cross-entropy loss (ignore_index = pad), every parameter's gradient g.<name>
               and the attention weights (B, T, S) in source order.
The model mirrors include/qkv/models/rnn_seq2seq.h line by line; the decoder always steps
through time here (qkv runs the recurrence over the whole target where attention does not feed
back, so the two paths are compared).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from qkvref import Refs

# Small variants covering both cells, uni/bidirectional encoders, 1-2 layers, every bridge,
# every attention and score, input feeding and source reversal.
BASE = dict(src_vocab=29, tgt_vocab=31, embed_dim=16, dropout=0.0, max_len=16, pad_id=0, bos_id=1, eos_id=2)
VARIANTS = {
    "none": dict(cell="lstm", enc_hidden=24, enc_layers=2, bidirectional=False, dec_hidden=24, dec_layers=2,
                 attention="none", bridge="copy", reverse_source=True),
    "bahdanau": dict(cell="gru", enc_hidden=16, enc_layers=1, bidirectional=True, dec_hidden=24, dec_layers=1,
                     attention="bahdanau", attn_dim=20, bridge="linear"),
    "luong_dot": dict(cell="lstm", enc_hidden=12, enc_layers=1, bidirectional=True, dec_hidden=24, dec_layers=1,
                      attention="luong", score="dot", input_feeding=True, bridge="copy"),
    "luong_general": dict(cell="gru", enc_hidden=20, enc_layers=2, bidirectional=False, dec_hidden=24, dec_layers=2,
                          attention="luong", score="general", input_feeding=False, bridge="linear"),
    "luong_concat": dict(cell="lstm", enc_hidden=12, enc_layers=2, bidirectional=True, dec_hidden=24, dec_layers=2,
                         attention="luong", score="concat", attn_dim=16, input_feeding=True, bridge="copy"),
    # W_a (max_len = 16, 24) over 7-long padded sources, reversed, so positions are the encoder's. (A GRU
    # with a bidirectional encoder and input feeding makes the trajectory's fp32 run drift from fp64 by
    # 7e-5, chaotic loss spikes; this one stays within 4e-7.)
    "luong_location": dict(cell="lstm", enc_hidden=24, enc_layers=1, bidirectional=False, dec_hidden=24, dec_layers=1,
                           attention="luong", score="location", input_feeding=True, bridge="copy",
                           reverse_source=True),
}
# Forward/gradient-only extras: LSTM + zero initial state + Bahdanau; GRU without attention; location
# attention without input feeding (qkv's whole-target recurrence path) on a GRU with two decoder layers.
EXTRA = {
    "bahdanau_lstm_zeros": dict(cell="lstm", enc_hidden=10, enc_layers=1, bidirectional=True, dec_hidden=18,
                                dec_layers=2, attention="bahdanau", attn_dim=12, bridge="zeros", reverse_source=True),
    "none_gru_linear": dict(cell="gru", enc_hidden=14, enc_layers=1, bidirectional=True, dec_hidden=20, dec_layers=1,
                            attention="none", bridge="linear"),
    "luong_location_gru": dict(cell="gru", enc_hidden=10, enc_layers=1, bidirectional=True, dec_hidden=18, dec_layers=2,
                               attention="luong", score="location", input_feeding=False, bridge="linear"),
}


def config(name):
    c = dict(BASE)
    c.update(VARIANTS.get(name) or EXTRA[name])
    return c


class Additive(nn.Module):  # Bahdanau: v^T tanh(W1 s + W2 h_i)
    def __init__(self, qd, kd, ad):
        super().__init__()
        self.query_proj = nn.Linear(qd, ad)
        self.key_proj = nn.Linear(kd, ad, bias=False)
        self.v = nn.Linear(ad, 1, bias=False)

    def scores(self, q, keys):  # q (B, Ds), keys (B, S, Dh) -> (B, S)
        return self.v(torch.tanh(self.query_proj(q).unsqueeze(1) + self.key_proj(keys))).squeeze(2)


class Multiplicative(nn.Module):  # Luong: dot s^T h_i | general s^T W h_i | concat v^T tanh(W [s; h_i])
    def __init__(self, score, qd, kd, ad, max_len):  # | location (W_a s)_i, W_a (max_len, qd)
        super().__init__()
        self.score = score
        if score == "location":
            self.attn = nn.Linear(qd, max_len, bias=False)
        elif score == "general":
            self.attn = nn.Linear(kd, qd, bias=False)
        elif score == "concat":
            self.attn = nn.Linear(qd + kd, ad)
            self.v = nn.Linear(ad, 1, bias=False)

    def scores(self, q, keys):
        if self.score == "location":  # every position's score from s alone; the first S of them
            return self.attn(q)[:, :keys.size(1)]
        if self.score == "dot":
            return torch.bmm(keys, q.unsqueeze(2)).squeeze(2)
        if self.score == "general":
            return torch.bmm(self.attn(keys), q.unsqueeze(2)).squeeze(2)
        s = q.unsqueeze(1).expand(-1, keys.size(1), -1)
        return self.v(torch.tanh(self.attn(torch.cat([s, keys], 2)))).squeeze(2)


def reverse_index(lengths, S):
    """(B, S) gather index reversing the first lengths[b] positions of each row (an involution)."""
    idx = torch.arange(S).unsqueeze(0).repeat(len(lengths), 1)
    for b, n in enumerate(lengths.tolist()):
        idx[b, :n] = torch.arange(n - 1, -1, -1)
    return idx


class RefRnnSeq2Seq(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = c = cfg
        Cell = nn.LSTM if c["cell"] == "lstm" else nn.GRU
        E, He, Hd, Ld = c["embed_dim"], c["enc_hidden"], c["dec_hidden"], c["dec_layers"]
        self.dirs = 2 if c["bidirectional"] else 1
        Hk = self.dirs * He
        A = c.get("attn_dim", 0) or Hd
        att, feed = c["attention"], c.get("input_feeding", False)
        self.src_embed = nn.Embedding(c["src_vocab"], E, padding_idx=c["pad_id"])
        self.tgt_embed = nn.Embedding(c["tgt_vocab"], E, padding_idx=c["pad_id"])
        self.encoder = Cell(E, He, c["enc_layers"], batch_first=True, bidirectional=c["bidirectional"])
        dec_in = E + (Hk if att == "bahdanau" else Hd if feed else 0)
        self.decoder = Cell(dec_in, Hd, Ld, batch_first=True)
        if c["bridge"] == "linear":
            self.bridge_h = nn.Linear(Hk, Ld * Hd)
            if c["cell"] == "lstm":
                self.bridge_c = nn.Linear(Hk, Ld * Hd)
        if att == "bahdanau":
            self.attention = Additive(Hd, Hk, A)
            out_dim = Hd + Hk + E
        elif att == "luong":
            self.attention = Multiplicative(c["score"], Hd, Hk, A, c["max_len"])
            self.attn_out = nn.Linear(Hk + Hd, Hd, bias=False)
            out_dim = Hd
        else:
            out_dim = Hd
        self.generator = nn.Linear(out_dim, c["tgt_vocab"])

    def init_uniform(self, g, scale=0.1):
        with torch.no_grad():
            for p in self.parameters():
                p.uniform_(-scale, scale, generator=g)
            self.src_embed.weight[self.cfg["pad_id"]] = 0
            self.tgt_embed.weight[self.cfg["pad_id"]] = 0

    def encode(self, src, src_pad):
        c, B, S = self.cfg, src.size(0), src.size(1)
        lengths = (~src_pad).sum(1)
        if c.get("reverse_source", False):
            src = src.gather(1, reverse_index(lengths, S))
        x = self.src_embed(src)
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, hc = self.encoder(packed)
        keys, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=S)  # (B, S, Hk)
        return keys, self.bridge(hc), lengths

    def bridge(self, hc):
        c, Le, Ld, Hd = self.cfg, self.cfg["enc_layers"], self.cfg["dec_layers"], self.cfg["dec_hidden"]
        lstm = c["cell"] == "lstm"
        hs = list(hc) if lstm else [hc]
        B = hs[0].size(1)

        def per_layer(t):  # (Le*dirs, B, He) -> (Le, B, dirs*He)
            return t.view(Le, self.dirs, B, -1).permute(0, 2, 1, 3).reshape(Le, B, -1)

        if c["bridge"] == "copy":
            out = [per_layer(t) for t in hs]
        elif c["bridge"] == "zeros":
            out = [torch.zeros(Ld, B, Hd, dtype=hs[0].dtype) for _ in hs]
        else:
            top = [per_layer(t)[-1] for t in hs]  # (B, Hk)
            h0 = torch.tanh(self.bridge_h(top[0]))
            out = [h0] + ([self.bridge_c(top[1])] if lstm else [])
            out = [t.view(B, Ld, Hd).permute(1, 0, 2).contiguous() for t in out]
        return tuple(out) if lstm else out[0]

    def forward(self, src, src_pad, tgt_in):
        """logits (B, T, V) and attention weights (B, T, S) in source order (or None)."""
        c = self.cfg
        keys, hc, lengths = self.encode(src, src_pad)
        att, feed_on = c["attention"], c.get("input_feeding", False)
        B, T, S = tgt_in.size(0), tgt_in.size(1), src.size(1)
        ys = self.tgt_embed(tgt_in)
        feed = torch.zeros(B, c["dec_hidden"], dtype=keys.dtype)
        outs, ws = [], []
        for t in range(T):
            y = ys[:, t]
            if att == "bahdanau":
                q = (hc[0] if c["cell"] == "lstm" else hc)[-1]  # top layer s_{t-1}
                a = F.softmax(self.attention.scores(q, keys).masked_fill(src_pad, float("-inf")), 1)
                ctx = torch.bmm(a.unsqueeze(1), keys).squeeze(1)
                s, hc = self.decoder(torch.cat([y, ctx], 1).unsqueeze(1), hc)
                s = s.squeeze(1)
                o = torch.cat([s, ctx, y], 1)
            else:
                x = torch.cat([y, feed], 1) if feed_on else y
                s, hc = self.decoder(x.unsqueeze(1), hc)
                s = s.squeeze(1)
                if att == "luong":
                    a = F.softmax(self.attention.scores(s, keys).masked_fill(src_pad, float("-inf")), 1)
                    ctx = torch.bmm(a.unsqueeze(1), keys).squeeze(1)
                    o = feed = torch.tanh(self.attn_out(torch.cat([ctx, s], 1)))
                else:
                    a, o = None, s
            outs.append(o)
            ws.append(a)
        logits = self.generator(torch.stack(outs, 1))
        if att == "none":
            return logits, None
        w = torch.stack(ws, 1)  # (B, T, S) over the (possibly reversed) source
        if c.get("reverse_source", False):
            w = w.gather(2, reverse_index(lengths, S).unsqueeze(1).expand(-1, T, -1))
        return logits, w


def padding_mask(B, T, g, min_len=1):
    lengths = torch.randint(min_len, T + 1, (B,), generator=g)
    lengths[0] = T
    return torch.arange(T).unsqueeze(0) >= lengths.unsqueeze(1)


def make_batch(cfg, B, S, T, g):
    """src (B, S) right-padded, src_pad (B, S) bool, tgt_in / tgt_out (B, T) as qkv's data code makes them."""
    src_pad = padding_mask(B, S, g, min_len=2)
    src = torch.randint(3, cfg["src_vocab"], (B, S), generator=g).masked_fill(src_pad, 0)
    lens = torch.randint(2, T + 1, (B,), generator=g)
    body = torch.randint(3, cfg["tgt_vocab"], (B, T), generator=g)
    tgt_out = body.clone()
    for b in range(B):
        tgt_out[b, lens[b] - 1] = cfg["eos_id"]
        tgt_out[b, lens[b]:] = 0
    tgt_in = torch.cat([torch.full((B, 1), cfg["bos_id"]), tgt_out[:, :-1]], 1).masked_fill(tgt_out == 0, 0)
    return src, src_pad, tgt_in, tgt_out


def main(out):
    r = Refs()
    g = torch.Generator().manual_seed(23)
    for name in list(VARIANTS) + list(EXTRA):
        cfg = config(name)
        torch.manual_seed(5)
        m = RefRnnSeq2Seq(cfg)
        m.init_uniform(g, 0.3)  # larger than the default 0.1 so that every path carries signal
        src, src_pad, tgt_in, tgt_out = make_batch(cfg, 4, 7, 6, g)
        logits, w = m(src, src_pad, tgt_in)
        loss = F.cross_entropy(logits.reshape(-1, cfg["tgt_vocab"]), tgt_out.reshape(-1), ignore_index=cfg["pad_id"])
        names = [n for n, _ in m.named_parameters()]
        grads = torch.autograd.grad(loss, list(m.parameters()))
        t = {"src": src, "src_pad": src_pad.to(torch.uint8), "tgt_in": tgt_in, "tgt_out": tgt_out,
             "logits": logits, "loss": loss, "weights": w}
        for n, p, gr in zip(names, m.parameters(), grads):
            t["p." + n], t["g." + n] = p, gr
        r.case("fwd_" + name, {"config": cfg}, **t)
    r.save(out)
