"""Reference for tests/io/test_lm_trajectory.cpp: 100 training steps of the GPT of models_gpt.py
(GPT-2 layout, pre-LN, gelu_new, dropout 0) as a causal language model: AdamW (betas 0.9, 0.95,
eps 1e-8, weight decay 0.1 on matrices and embeddings, none on biases and LayerNorms), linear
warm-up then cosine decay, global-norm clipping at 1.0, mean next-token cross-entropy.

Stores the initial model as a directory in the published layout (<out dir>/lm_trajectory/init/),
the 8 batches of packed windows (ids, targets) cycled through, the loss at every step of the fp32
run ("losses") and of the same run in fp64 ("losses64", to bound what fp32 itself can promise).
"""
import math
import os

import torch
import torch.nn.functional as F
from models_gpt import gpt_forward, init_params, write_dir
from qkvref import Refs

STEPS, NBATCH, B, T = 100, 8, 4, 10
CFG = {"model_type": "gpt2", "vocab_size": 53, "n_positions": 16, "n_embd": 32, "n_layer": 2, "n_head": 4,
       "n_inner": None, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "resid_pdrop": 0.0,
       "embd_pdrop": 0.0, "attn_pdrop": 0.0, "pre_norm": True}
BASE_LR, WARMUP, BETAS, EPS, WD, CLIP = 3e-3, 10, (0.9, 0.95), 1e-8, 0.1, 1.0


def lr_at(step):  # qkv's WarmupCosine(base, warmup, total = STEPS, min 0), steps counted from 1
    if step <= WARMUP:
        return BASE_LR * step / WARMUP
    return BASE_LR * (1 + math.cos(math.pi * (step - WARMUP) / (STEPS - WARMUP))) / 2


def no_decay(name):  # biases and LayerNorms (qkv's is_bias_or_norm on the published names)
    return name.endswith(".bias") or name.split(".")[-2].startswith("ln")


def corpus(gen):
    """Windows of T + 1 tokens from a stream with structure to learn: each token is most often
    (token * 7 + 3) mod V of the one before, sometimes random."""
    V = CFG["vocab_size"]
    n = NBATCH * B * T + 1
    s = [int(torch.randint(0, V, (1,), generator=gen))]
    for _ in range(n - 1):
        s.append((s[-1] * 7 + 3) % V if torch.rand(1, generator=gen) < 0.8 else int(torch.randint(0, V, (1,), generator=gen)))
    s = torch.tensor(s)
    batches = []
    for b in range(NBATCH):
        w = torch.stack([s[(b * B + r) * T:(b * B + r) * T + T + 1] for r in range(B)])  # (B, T + 1)
        batches.append((w[:, :T].contiguous(), w[:, 1:].contiguous()))
    return batches


def run(init, batches, dtype):
    p = {k: v.detach().to(dtype).clone().requires_grad_(True) for k, v in init.items()}
    names = sorted(p)
    groups = [{"params": [p[n] for n in names if not no_decay(n)], "weight_decay": WD},
              {"params": [p[n] for n in names if no_decay(n)], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=BASE_LR, betas=BETAS, eps=EPS)
    pad = torch.zeros(B, T, dtype=torch.uint8)
    pos = torch.arange(T).expand(B, T)
    losses = []
    for step in range(1, STEPS + 1):
        ids, tgt = batches[(step - 1) % NBATCH]
        logits = gpt_forward(CFG, p, ids, pad, pos)
        loss = F.cross_entropy(logits.reshape(-1, CFG["vocab_size"]), tgt.reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p[n] for n in names], CLIP)
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        opt.step()
        losses.append(loss.item())
    return losses


def main(out):
    gen = torch.Generator().manual_seed(2024)
    init = {k: v.detach() for k, v in init_params(CFG, gen).items()}
    batches = corpus(gen)
    write_dir(os.path.join(os.path.dirname(out), "lm_trajectory", "init"), CFG, init)
    losses, losses64 = run(init, batches, torch.float32), run(init, batches, torch.float64)
    refs = Refs()
    tensors = {"losses": torch.tensor(losses, dtype=torch.float64), "losses64": torch.tensor(losses64, dtype=torch.float64)}
    for i, (ids, tgt) in enumerate(batches):
        tensors[f"ids{i}"], tensors[f"targets{i}"] = ids, tgt
    refs.case("run", {"dir": "lm_trajectory/init", "steps": STEPS, "batches": NBATCH, "lr": BASE_LR,
                      "warmup": WARMUP, "betas": list(BETAS), "eps": EPS, "weight_decay": WD, "clip": CLIP}, **tensors)
    refs.save(out)
