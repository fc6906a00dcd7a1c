"""Reference for tests/train/test_bert_trajectory.cpp: BERT pretraining steps (MLM + NSP) of the
BERT of models_bert.py (Hugging Face BertForPreTraining layout, post-LN, gelu, dropout 0), with the
masking decisions fed in: the batches below are already masked ([MASK] / random / unchanged drawn
here with the paper's 15% and 80/10/10), so both sides predict the same tokens.

Loss per step = mean MLM cross-entropy over the labelled tokens + mean NSP cross-entropy (as
Hugging Face's BertForPreTraining sums them). AdamW (betas 0.9, 0.999, eps 1e-6, weight decay
0.01 on matrices and embeddings, none on biases and LayerNorms), linear warm-up then cosine decay,
global-norm clipping at 1.0.

Stores the initial model (<out dir>/bert_trajectory/init/), the NBATCH batches cycled through
(ids, token_type_ids, key_pad, mlm_labels, nsp_labels), the loss at every step of the fp32 run
("losses") and of the same run in fp64 ("losses64", to bound what fp32 itself can promise).
"""
import math
import os

import torch
import torch.nn.functional as F
from models_bert import BASE, CLS, PAD, SEP, SPECIALS, VOCAB, bert_forward, init_params, write_dir
from qkvref import Refs

STEPS, NBATCH, B = 100, 6, 4
MASK = 4
CFG = dict(BASE, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
BASE_LR, WARMUP, BETAS, EPS, WD, CLIP = 2e-3, 10, (0.9, 0.999), 1e-6, 0.01, 1.0


def lr_at(step):  # qkv's WarmupCosine(base, warmup, total = STEPS, min 0), steps counted from 1
    if step <= WARMUP:
        return BASE_LR * step / WARMUP
    return BASE_LR * (1 + math.cos(math.pi * (step - WARMUP) / (STEPS - WARMUP))) / 2


def no_decay(name):  # biases and LayerNorms (qkv's is_bias_or_norm)
    return name.endswith(".bias") or "LayerNorm" in name


def make_batches(gen):
    """Pairs [CLS] a [SEP] b [SEP] right-padded (T = max_position_embeddings), with structure to
    learn: b continues a's rule (w -> w + 1 mod 40) when nsp = 0, random words when nsp = 1."""
    n_words = len(VOCAB) - len(SPECIALS)
    T = CFG["max_position_embeddings"]
    out = []
    for _ in range(NBATCH):
        ids = torch.full((B, T), PAD)
        types = torch.zeros(B, T, dtype=torch.long)
        real = torch.zeros(B, T, dtype=torch.uint8)
        labels = torch.full((B, T), -100)
        nsp = torch.zeros(B, dtype=torch.long)
        for r in range(B):
            la = int(torch.randint(2, 7, (1,), generator=gen))
            lb = int(torch.randint(2, T - 3 - la + 1, (1,), generator=gen))
            w = int(torch.randint(0, n_words, (1,), generator=gen))
            a = [(w + i) % n_words for i in range(la)]
            nsp[r] = int(torch.rand(1, generator=gen) < 0.5)
            if nsp[r] == 0:
                b = [(w + la + i) % n_words for i in range(lb)]
            else:
                b = torch.randint(0, n_words, (lb,), generator=gen).tolist()
            row = [CLS] + [len(SPECIALS) + x for x in a] + [SEP] + [len(SPECIALS) + x for x in b] + [SEP]
            ids[r, :len(row)] = torch.tensor(row)
            types[r, la + 2:len(row)] = 1
            real[r, :len(row)] = 1
            for i, t in enumerate(row):  # the masking, decided here and fed to both sides
                if t in (CLS, SEP, PAD) or torch.rand(1, generator=gen) >= 0.15:
                    continue
                labels[r, i] = t
                u = float(torch.rand(1, generator=gen))
                if u < 0.8:
                    ids[r, i] = MASK
                elif u < 0.9:
                    ids[r, i] = int(torch.randint(len(SPECIALS), len(VOCAB), (1,), generator=gen))
            if (labels[r] == -100).all():  # at least one prediction per row
                labels[r, 1] = row[1]
                ids[r, 1] = MASK
        out.append((ids, types, real, labels, nsp))
    return out


def run(init, batches, dtype):
    p = {k: v.detach().to(dtype).clone().requires_grad_(True) for k, v in init.items()}
    names = sorted(p)
    groups = [{"params": [p[n] for n in names if not no_decay(n)], "weight_decay": WD},
              {"params": [p[n] for n in names if no_decay(n)], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=BASE_LR, betas=BETAS, eps=EPS)
    losses = []
    for step in range(1, STEPS + 1):
        ids, types, real, labels, nsp = batches[(step - 1) % NBATCH]
        _, _, mlm, nsp_logits = bert_forward(CFG, p, ids, types, real)
        loss = (F.cross_entropy(mlm.reshape(-1, CFG["vocab_size"]), labels.reshape(-1), ignore_index=-100) +
                F.cross_entropy(nsp_logits, nsp))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p[n] for n in names], CLIP)
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        opt.step()
        losses.append(loss.item())
    return losses


def main(out):
    gen = torch.Generator().manual_seed(1906)
    init = {k: v.detach() for k, v in init_params(CFG, gen).items()}
    batches = make_batches(gen)
    write_dir(os.path.join(os.path.dirname(out), "bert_trajectory", "init"), CFG, init)
    losses, losses64 = run(init, batches, torch.float32), run(init, batches, torch.float64)
    refs = Refs()
    tensors = {"losses": torch.tensor(losses, dtype=torch.float64), "losses64": torch.tensor(losses64, dtype=torch.float64)}
    for i, (ids, types, real, labels, nsp) in enumerate(batches):
        tensors.update({f"ids{i}": ids, f"types{i}": types, f"key_pad{i}": 1 - real, f"labels{i}": labels,
                        f"nsp{i}": nsp})
    refs.case("run", {"dir": "bert_trajectory/init", "steps": STEPS, "batches": NBATCH, "lr": BASE_LR,
                      "warmup": WARMUP, "betas": list(BETAS), "eps": EPS, "weight_decay": WD, "clip": CLIP}, **tensors)
    refs.save(out)
