"""References for BERT sentence(-pair) classification (models/bert_classifier.h, io/bert_cls.h,
tasks::Classifier, train::BertClassificationTask): tests/tasks/test_bert_classifier_ref.cpp.

The model is Hugging Face's BertForSequenceClassification written here from the paper (Devlin
et al. 2019, 4.1) and the published layout, over models_bert.py's BERT (float64 from float32
weights, dropout 0):
    pooled = tanh(W_p h[:, 0] + b_p)                      bert.pooler.dense
    logits = W_c pooled + b_c                             classifier.{weight, bias}   (B, C)
    loss   = mean over examples of cross_entropy(logits, label)
qkv's "mean" pooling variant (the from-scratch encoder classifier) replaces pooled by the average
of h over the non-padding tokens.

Inputs are [CLS] a [SEP] (segment 0) or [CLS] a [SEP] b [SEP] (b and its [SEP]: segment 1),
right-padded with [PAD] under an attention mask.

Cases (directories under <out dir>/bert_classifier/):
  "single", "pairs": a BertForSequenceClassification directory (config.json with id2label /
      label2id / classifier_dropout null, model.safetensors with bert.* + classifier.*, vocab.txt)
      and a right-padded batch of texts (or pairs): ids, token_type_ids, key_pad, labels,
      logits (B, C), probs (softmax, float64), loss, and the gradient of the loss for every
      parameter by published name.
  "mean": the "pairs" weights and batch with mean pooling: logits and loss.
  "steps": 5 steps of AdamW (lr 1e-3, betas 0.9/0.999, eps 1e-8, no weight decay) on the
      "pairs" batch from the "pairs" weights: the loss before each step.
  "pretrained": a BertForPreTraining directory (bert.* with the pooler, cls.predictions.*,
      cls.seq_relationship.*), no classifier: what fine-tuning starts from.
"""
import json
import os

import torch
import torch.nn.functional as F
from models_bert import BASE, CLS, PAD, SEP, SPECIALS, VOCAB, WORDS, bert_forward, f64, init_params, write_dir
from qkvref import Refs

LABELS = ["negative", "neutral", "positive"]
CFG = dict(BASE, architectures=["BertForSequenceClassification"], hidden_dropout_prob=0.0,
           attention_probs_dropout_prob=0.0, classifier_dropout=None,
           id2label={str(i): l for i, l in enumerate(LABELS)}, label2id={l: i for i, l in enumerate(LABELS)})


def rows(gen, lens):
    """Texts (or pairs) of the given word counts, the batch qkv builds from them."""
    texts, enc = [], []
    for a, b in lens:
        wa = [WORDS[int(i)] for i in torch.randint(0, len(WORDS), (a,), generator=gen)]
        wb = [WORDS[int(i)] for i in torch.randint(0, len(WORDS), (b,), generator=gen)] if b is not None else None
        texts.append((" ".join(wa), " ".join(wb) if wb is not None else None))
        row = [CLS] + [VOCAB.index(w) for w in wa] + [SEP]
        ty = [0] * len(row)
        if wb is not None:
            row += [VOCAB.index(w) for w in wb] + [SEP]
            ty += [1] * (len(wb) + 1)
        enc.append((row, ty))
    T = max(len(r) for r, _ in enc)
    ids = torch.full((len(enc), T), PAD)
    types = torch.zeros(len(enc), T, dtype=torch.long)
    real = torch.zeros(len(enc), T, dtype=torch.uint8)
    for r, (row, ty) in enumerate(enc):
        ids[r, :len(row)], types[r, :len(row)], real[r, :len(row)] = torch.tensor(row), torch.tensor(ty), 1
    return texts, ids, types, real


def logits_of(p, ids, types, real, pooling="pooler"):
    h, pooled, _, _ = bert_forward(CFG, p, ids, types, real)
    if pooling == "mean":
        m = real[:, :, None].to(h.dtype)
        pooled = (h * m).sum(1) / m.sum(1)
    return F.linear(pooled, p["classifier.weight"], p["classifier.bias"])  # (B, C)


def head(gen):
    return {"classifier.weight": (torch.randn(len(LABELS), CFG["hidden_size"], generator=gen) * 0.5).requires_grad_(True),
            "classifier.bias": (torch.randn(len(LABELS), generator=gen) * 0.1).requires_grad_(True)}


def main(out):
    refs = Refs()
    root = os.path.join(os.path.dirname(out), "bert_classifier")
    gen = torch.Generator().manual_seed(1504)
    p = init_params(CFG, gen, heads=False)
    p.update(head(gen))
    names = sorted(p)
    for case, lens in (("single", [(4, None), (1, None), (9, None), (2, None), (6, None)]),
                       ("pairs", [(3, 5), (1, 1), (6, 2), (2, 7)])):
        write_dir(os.path.join(root, case), dict(CFG, qkv_classifier={"pairs": case == "pairs", "max_len": 16,
                                                                    "pooling": "pooler"}),
                  {k: v.detach() for k, v in p.items()})
        texts, ids, types, real = rows(gen, lens)
        labels = torch.randint(0, len(LABELS), (len(lens),), generator=gen)
        logits = logits_of(f64(p), ids, types, real)
        loss = F.cross_entropy(logits, labels)
        gs = torch.autograd.grad(loss, [p[n] for n in names])
        t = {"ids": ids, "token_type_ids": types, "key_pad": 1 - real, "labels": labels, "logits": logits.float(),
             "probs": torch.softmax(logits.detach(), -1), "loss": loss.float()}
        t.update({"grad." + n: g.float() for n, g in zip(names, gs)})
        refs.case(case, {"dir": "bert_classifier/" + case, "labels": LABELS, "texts": [a for a, _ in texts],
                         "pairs": [b for _, b in texts] if case == "pairs" else None}, **t)
        if case == "pairs":
            with torch.no_grad():
                lm = logits_of(f64(p), ids, types, real, "mean")
            refs.case("mean", {"dir": "bert_classifier/pairs"}, logits=lm.float(),
                      loss=F.cross_entropy(lm, labels).float())
            q = {k: v.detach().clone().requires_grad_(True) for k, v in p.items()}
            opt = torch.optim.AdamW([q[n] for n in names], lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
            losses = []
            for _ in range(5):
                l = F.cross_entropy(logits_of(f64(q), ids, types, real), labels)
                opt.zero_grad()
                l.backward()
                opt.step()
                losses.append(l.item())
            refs.case("steps", {"dir": "bert_classifier/pairs", "lr": 1e-3}, losses=torch.tensor(losses, dtype=torch.float64))

    # A pretraining checkpoint (both heads, no classifier): the start of fine-tuning.
    pre = {k: v.detach() for k, v in init_params(dict(BASE), gen).items()}
    write_dir(os.path.join(root, "pretrained"), dict(BASE), pre)
    refs.case("pretrained", {"dir": "bert_classifier/pretrained"})
    refs.save(out)
