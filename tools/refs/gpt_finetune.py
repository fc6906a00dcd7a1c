"""Reference for tests/lm/test_gpt_finetune.cpp: fine-tuning a GPT for classification as GPT-1
did (Radford et al. 2018, 3.3): inputs [START] text [EXTRACT] (padded on the right), a linear
layer (no bias, Hugging Face's "score") on the last hidden state at [EXTRACT], and the loss
    mean over examples of CE(class) + lm_weight * mean over counted tokens of CE(next token)
(the auxiliary language-modelling loss; a next token counts when it and its input are real).
The GPT of models_gpt.py (GPT-2 layout, pre-LN, dropout 0); 5 steps of AdamW (constant lr
1e-3, betas 0.9/0.999, eps 1e-8, no weight decay). Stores the model directory
(<out dir>/gpt_finetune/init/), the head's initial weight, the batch, the loss at every step and
the gradients of the first step (published names, plus "score.weight")."""
import os

import torch
import torch.nn.functional as F
from models_gpt import gpt_hidden, init_params, write_dir
from qkvref import Refs

CFG = {"model_type": "gpt2", "vocab_size": 40, "n_positions": 12, "n_embd": 24, "n_layer": 2, "n_head": 3,
       "n_inner": None, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "resid_pdrop": 0.0,
       "embd_pdrop": 0.0, "attn_pdrop": 0.0, "pre_norm": True}
START, EXTRACT, PAD, LABELS, LM_WEIGHT, STEPS = 37, 38, 39, 3, 0.5, 5


def batch(gen):
    lens = [7, 4, 9, 5]  # text tokens per row; row = [START] text [EXTRACT] pad...
    T = max(lens) + 2
    ids = torch.full((len(lens), T), PAD)
    key_pad = torch.ones(len(lens), T, dtype=torch.uint8)
    extract = []
    for r, n in enumerate(lens):
        ids[r, 0] = START
        ids[r, 1:n + 1] = torch.randint(0, 37, (n,), generator=gen)
        ids[r, n + 1] = EXTRACT
        key_pad[r, :n + 2] = 0
        extract.append(n + 1)
    labels = torch.randint(0, LABELS, (len(lens),), generator=gen)
    lm_targets = ids[:, 1:].clone()
    lm_targets[(key_pad[:, 1:] == 1) | (key_pad[:, :-1] == 1)] = -100
    return ids, key_pad, torch.tensor(extract), labels, lm_targets


def main(out):
    gen = torch.Generator().manual_seed(99)
    init = {k: v.detach() for k, v in init_params(CFG, gen).items()}
    score0 = torch.randn(LABELS, CFG["n_embd"], generator=gen) * 0.1
    ids, key_pad, extract, labels, lm_targets = batch(gen)
    write_dir(os.path.join(os.path.dirname(out), "gpt_finetune", "init"), CFG, init)

    p = {k: v.clone().requires_grad_(True) for k, v in init.items()}
    p["score.weight"] = score0.clone().requires_grad_(True)
    names = sorted(p)
    opt = torch.optim.AdamW([p[n] for n in names], lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    pos = torch.arange(ids.shape[1]).expand_as(ids)
    losses, grads = [], None
    for step in range(STEPS):
        h = gpt_hidden(CFG, p, ids, key_pad, pos)                  # (B, T, D)
        cls = h[torch.arange(len(ids)), extract] @ p["score.weight"].t()  # (B, C)
        lm = h[:, :-1] @ p["wte.weight"].t()                        # (B, T-1, V)
        loss = F.cross_entropy(cls, labels) + LM_WEIGHT * F.cross_entropy(
            lm.reshape(-1, CFG["vocab_size"]), lm_targets.reshape(-1), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        if grads is None:
            grads = {n: p[n].grad.clone() for n in names}
        opt.step()
        losses.append(loss.item())
    refs = Refs()
    tensors = {"ids": ids, "key_pad": key_pad, "extract": extract, "labels": labels, "score0": score0,
               "losses": torch.tensor(losses, dtype=torch.float64)}
    tensors.update({"grad." + n: g for n, g in grads.items()})
    refs.case("run", {"dir": "gpt_finetune/init", "labels": LABELS, "lm_weight": LM_WEIGHT, "steps": STEPS,
                      "lr": 1e-3}, **tensors)
    refs.save(out)
