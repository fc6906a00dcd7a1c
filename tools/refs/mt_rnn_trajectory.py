"""Reference for tests/mt/test_rnn_trajectory.cpp: 100 training steps of each RNN encoder-decoder
variant (models_rnn.RefRnnSeq2Seq: none, bahdanau, luong_dot, luong_general, luong_concat,
luong_location) with
Adam (0.9, 0.98, eps 1e-6) at a constant learning rate, label-smoothed (0.1) cross-entropy over
non-pad targets, global-norm clipping at 1.0, dropout 0. The task is reversal (target = the
source's real tokens backwards, then </s>), so the attention has something to learn and every
parameter moves. Per variant: the initial parameters (qkv names), the 10 batches cycled through,
the loss at every step in fp32 and fp64 (the fp64 run measures the reference's own fp32 error)."""
import torch
import torch.nn.functional as F
from models_rnn import VARIANTS, RefRnnSeq2Seq, config, padding_mask
from qkvref import Refs

STEPS, NBATCH, B, S = 100, 10, 8, 8
LR, LS, CLIP, EPS = 3e-3, 0.1, 1.0, 1e-6


def reversal_batch(cfg, g):
    """src (B, S) right-padded, src_pad, tgt_in = <s> reversed, tgt_out = reversed </s> (B, S + 1)."""
    src_pad = padding_mask(B, S, g, min_len=2)
    src = torch.randint(3, cfg["src_vocab"], (B, S), generator=g).masked_fill(src_pad, 0)
    tgt_out = torch.zeros(B, S + 1, dtype=torch.long)
    for b in range(B):
        n = int((~src_pad[b]).sum())
        tgt_out[b, :n] = src[b, :n].flip(0)
        tgt_out[b, n] = cfg["eos_id"]
    tgt_in = torch.cat([torch.full((B, 1), cfg["bos_id"]), tgt_out[:, :-1]], 1).masked_fill(tgt_out == 0, 0)
    return src, src_pad, tgt_in, tgt_out


def run(name, dtype):
    cfg = config(name)
    g = torch.Generator().manual_seed(31)
    torch.manual_seed(7)
    m = RefRnnSeq2Seq(cfg)
    m.init_uniform(g, 0.1)  # qkv's default initialisation
    init = {k: v.detach().clone() for k, v in m.named_parameters()}
    batches = [reversal_batch(cfg, g) for _ in range(NBATCH)]
    m = m.to(dtype)
    params = list(m.parameters())
    opt = torch.optim.Adam(params, lr=LR, betas=(0.9, 0.98), eps=EPS)
    losses = []
    for step in range(STEPS):
        src, src_pad, tgt_in, tgt_out = batches[step % NBATCH]
        opt.zero_grad(set_to_none=True)
        logits, _ = m(src, src_pad, tgt_in)
        loss = F.cross_entropy(logits.reshape(-1, cfg["tgt_vocab"]), tgt_out.reshape(-1), ignore_index=cfg["pad_id"],
                               label_smoothing=LS)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, CLIP)
        opt.step()
        losses.append(loss.item())
    return cfg, init, batches, losses


def main(out):
    r = Refs()
    for name in VARIANTS:
        cfg, init, batches, losses = run(name, torch.float32)
        _, _, _, losses64 = run(name, torch.float64)
        t = {"losses": torch.tensor(losses, dtype=torch.float64), "losses64": torch.tensor(losses64, dtype=torch.float64)}
        for k, v in init.items():
            t["init." + k] = v
        for i, (src, src_pad, tgt_in, tgt_out) in enumerate(batches):
            t[f"src{i}"], t[f"pad{i}"], t[f"tin{i}"], t[f"tout{i}"] = src, src_pad.to(torch.uint8), tgt_in, tgt_out
        r.case(name, {"config": cfg, "steps": STEPS, "batches": NBATCH, "lr": LR, "label_smoothing": LS, "clip": CLIP,
                      "eps": EPS}, **t)
    r.save(out)
