"""Reference for tests/mt/test_trajectory.cpp: 200 training steps of token embeddings +
torch.nn.Transformer + generator (models_transformer.RefTransformer) with Adam (betas 0.9, 0.98,
eps 1e-6: EPS below), the Noam schedule, label-smoothed (0.1) cross-entropy over non-pad targets,
global-norm clipping at 1.0, dropout 0. Stores the initial parameters (qkv names), the 10 batches
cycled through, the loss at every step of the fp32 run and of the same run in fp64, and the
parameters after the last step of both runs ("final.<name>", "final64.<name>"): the test compares
qkv's final parameters with the fp32 ones, within what fp32 itself drifts from fp64."""
import math

import torch
import torch.nn.functional as F
from models_transformer import RefTransformer, randomize, padding_mask
from qkvref import Refs

STEPS, NBATCH, B, S, T = 200, 10, 8, 9, 8
CFG = dict(src_vocab=29, tgt_vocab=29, d_model=32, heads=4, enc_layers=2, dec_layers=2, d_ff=64,
           activation="relu", pre_norm=False, shared_embeddings=True, tie_output=True, positional="sinusoidal",
           scale_embeddings=True, dropout=0.0, attention_dropout=0.0, max_len=16, pad_id=0, bos_id=1, eos_id=2)
# Peak lr 0.0025 and Adam eps 1e-6 keep the fp32 run stable: PyTorch fp32 stays within 6e-6 of
# fp64 for all 200 steps. (With eps 1e-9 and a peak of 0.005-0.025 the trajectory turns chaotic
# after ~100 steps: PyTorch fp32 and fp64 then differ by 1e-3..4e-2, so no fp32 engine could be
# held to 1e-5; measured 2026-11-21.)
WARMUP, FACTOR, LS, CLIP, EPS = 50, 0.1, 0.1, 1.0, 1e-6


def noam(step):
    return FACTOR * CFG["d_model"] ** -0.5 * min(step ** -0.5, step * WARMUP ** -1.5)


def run(dtype):
    """The 200-step run in `dtype`; returns (initial params, batches, losses, final params)."""
    g = torch.Generator().manual_seed(17)
    torch.manual_seed(3)
    m = RefTransformer(CFG)
    randomize(m.tf, g)
    with torch.no_grad():
        m.src_embed.weight.mul_(0.3)
        m.src_embed.weight[CFG["pad_id"]] = 0
    init = {k: v.detach().clone() for k, v in m.named_qkv(lambda p: p).items()}
    batches = []
    for i in range(NBATCH):
        src_pad = padding_mask(B, S, g, min_len=2)
        src = torch.randint(3, CFG["src_vocab"], (B, S), generator=g).masked_fill(src_pad, 0)
        lens = torch.randint(2, T + 1, (B,), generator=g)
        body = torch.randint(3, CFG["tgt_vocab"], (B, T), generator=g)
        tgt_out = body.clone()
        for b in range(B):
            tgt_out[b, lens[b] - 1] = CFG["eos_id"]
            tgt_out[b, lens[b]:] = 0
        tgt_in = torch.cat([torch.full((B, 1), CFG["bos_id"]), tgt_out[:, :-1]], 1).masked_fill(tgt_out == 0, 0)
        batches.append((src, src_pad, tgt_in, tgt_out))
    m = m.to(dtype)
    m.pe = m.pe.to(dtype)
    params = list(m.parameters())
    opt = torch.optim.Adam(params, lr=1.0, betas=(0.9, 0.98), eps=EPS)
    losses = []
    for step in range(1, STEPS + 1):
        src, src_pad, tgt_in, tgt_out = batches[(step - 1) % NBATCH]
        opt.zero_grad(set_to_none=True)
        logits = m(src, src_pad, tgt_in)
        loss = F.cross_entropy(logits.reshape(-1, CFG["tgt_vocab"]), tgt_out.reshape(-1), ignore_index=0,
                               label_smoothing=LS)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, CLIP)
        for grp in opt.param_groups:
            grp["lr"] = noam(step)
        opt.step()
        losses.append(loss.item())
    return init, batches, losses, {k: v.detach().clone() for k, v in m.named_qkv(lambda p: p).items()}


def main(out):
    # The float64 run measures the reference's own fp32 error; the test checks it stays small.
    init, batches, losses, final = run(torch.float32)
    _, _, losses64, final64 = run(torch.float64)
    r = Refs()
    tensors = {"losses": torch.tensor(losses, dtype=torch.float64),
               "losses64": torch.tensor(losses64, dtype=torch.float64)}
    for k, v in init.items():
        tensors["init." + k] = v
    for k, v in final.items():
        tensors["final." + k] = v.float()
        tensors["final64." + k] = final64[k].double()
    for i, (src, src_pad, tgt_in, tgt_out) in enumerate(batches):
        tensors[f"src{i}"], tensors[f"pad{i}"] = src, src_pad.to(torch.uint8)
        tensors[f"tin{i}"], tensors[f"tout{i}"] = tgt_in, tgt_out
    r.case("run", {"config": CFG, "steps": STEPS, "batches": NBATCH, "warmup": WARMUP, "factor": FACTOR,
                   "label_smoothing": LS, "clip": CLIP, "eps": EPS}, **tensors)
    r.save(out)
