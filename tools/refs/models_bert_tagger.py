"""References for models/bert_tagger and io/bert_tagger: Hugging Face's BertForTokenClassification
written in plain PyTorch from its published layout, computed in float64 from float32 weights:

  h      = BertModel(add_pooling_layer=False)(ids, attention_mask)      bert.* (models_bert.bert_forward)
  logits = classifier(dropout(h))                                       classifier.{weight, bias}, (B, T, C)
  loss   = CrossEntropyLoss()(logits.view(-1, C), labels.view(-1))     mean over labels != -100

Case "tagger" (<out dir>/models_bert_tagger/tagger/: config.json with id2label/label2id,
model.safetensors without bert.pooler.*, vocab.txt): three right-padded rows of words split into
one to three pieces each; each word's label on its first piece, -100 on later pieces, on [CLS],
[SEP] and padding (the alignment of Hugging Face's token-classification recipe). Stores ids,
key_pad, labels, logits (B, T, C), loss and the gradient of the loss for every parameter.
"""
import json
import os

import torch
import torch.nn.functional as F
from models_bert import BASE, CLS, PAD, SEP, SPECIALS, VOCAB, bert_forward, init_params, write_dir
from qkvref import Refs

LABELS = ["O", "B-PKG", "I-PKG", "B-VER", "B-URL"]


def main(out):
    refs = Refs()
    root = os.path.join(os.path.dirname(out), "models_bert_tagger")
    C = len(LABELS)
    cfg = dict(BASE, architectures=["BertForTokenClassification"],
               id2label={str(i): n for i, n in enumerate(LABELS)}, label2id={n: i for i, n in enumerate(LABELS)})
    gen = torch.Generator().manual_seed(2003)
    p = init_params(cfg, gen, heads=False, pooler=False)
    D = cfg["hidden_size"]
    p["classifier.weight"] = (torch.randn(C, D, generator=gen) * D ** -0.5).requires_grad_(True)
    p["classifier.bias"] = (torch.randn(C, generator=gen) * 0.1).requires_grad_(True)

    # words as piece counts per row; labels drawn per word
    rows = [[1, 2, 1, 3, 1], [2, 1], [1, 1, 3, 1, 2, 1]]
    T = max(2 + sum(r) for r in rows)
    B = len(rows)
    ids = torch.full((B, T), PAD)
    labels = torch.full((B, T), -100)
    real = torch.zeros(B, T, dtype=torch.uint8)
    for b, words in enumerate(rows):
        seq, lab = [CLS], [-100]
        for n in words:
            pieces = torch.randint(len(SPECIALS), len(VOCAB), (n,), generator=gen).tolist()
            y = int(torch.randint(0, C, (1,), generator=gen))
            seq += pieces
            lab += [y] + [-100] * (n - 1)  # the label on the first piece only
        seq.append(SEP)
        lab.append(-100)
        ids[b, :len(seq)] = torch.tensor(seq)
        labels[b, :len(lab)] = torch.tensor(lab)
        real[b, :len(seq)] = 1

    P = {k: v.double() for k, v in p.items()}
    types = torch.zeros(B, T, dtype=torch.long)
    hidden, pooled, mlm, nsp = bert_forward(cfg, P, ids, types, real)
    assert pooled is None and mlm is None
    logits = F.linear(hidden, P["classifier.weight"], P["classifier.bias"])  # (B, T, C); dropout is identity in eval
    loss = F.cross_entropy(logits.reshape(-1, C), labels.reshape(-1), ignore_index=-100)
    names = sorted(p)
    gs = torch.autograd.grad(loss, [p[n] for n in names])
    stored = {k: v.detach() for k, v in p.items()}
    stored["bert.embeddings.position_ids"] = torch.arange(cfg["max_position_embeddings"])[None]
    write_dir(os.path.join(root, "tagger"), cfg, stored)
    t = {"ids": ids, "key_pad": 1 - real, "labels": labels, "logits": logits.float(), "loss": loss.float()}
    t.update({"grad." + n: g.float() for n, g in zip(names, gs)})
    refs.case("tagger", {"dir": "models_bert_tagger/tagger", "labels": LABELS}, **t)
    refs.save(out)
