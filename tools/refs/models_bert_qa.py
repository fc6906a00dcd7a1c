"""References for models/bert_qa (BertForQuestionAnswering) through io/bert_qa.

Hugging Face's BertForQuestionAnswering written from its published layout: models_bert.py's BERT
(no pooler: add_pooling_layer=False), then
  logits = qa_outputs(h)                (B, T, 2): start = logits[..., 0], end = logits[..., 1]
  loss   = (CE(start, s) + CE(end, e)) / 2, s and e clamped to [0, T], T ignored (ignore_index),
           each cross-entropy the mean over its counted rows.
Computed in float64 from float32 weights.

Case "qa" (writes <out dir>/models_bert_qa/qa/ with config.json, model.safetensors and vocab.txt,
random weights): the right-padded two-segment batch of models_bert.py; start positions (3, 0, 20)
with 20 past the window (T = 13: clamped to 13 and ignored), end positions (5, 12, 2); the start
and end logits, the loss and the gradient of every parameter by published name.
"""
import os

import torch
import torch.nn.functional as F
from models_bert import BASE, batch, bert_forward, f64, init_params, write_dir
from qkvref import Refs


def main(out):
    refs = Refs()
    root = os.path.join(os.path.dirname(out), "models_bert_qa")
    cfg = dict(BASE, architectures=["BertForQuestionAnswering"])
    gen = torch.Generator().manual_seed(1606)
    p = init_params(cfg, gen, heads=False, pooler=False)
    D = cfg["hidden_size"]
    p["qa_outputs.weight"] = (torch.randn(2, D, generator=gen) * D ** -0.5).requires_grad_(True)
    p["qa_outputs.bias"] = (torch.randn(2, generator=gen) * 0.1).requires_grad_(True)
    ids, types, real = batch(gen)
    T = ids.shape[1]
    start_positions = torch.tensor([3, 0, 20])
    end_positions = torch.tensor([5, T - 1, 2])
    P = f64(p)
    hidden, _, _, _ = bert_forward(cfg, P, ids, types, real)
    logits = F.linear(hidden, P["qa_outputs.weight"], P["qa_outputs.bias"])  # (B, T, 2)
    start, end = logits[..., 0], logits[..., 1]
    s = start_positions.clamp(0, T)
    e = end_positions.clamp(0, T)
    loss = (F.cross_entropy(start, s, ignore_index=T) + F.cross_entropy(end, e, ignore_index=T)) / 2
    names = sorted(p)
    gs = torch.autograd.grad(loss, [p[n] for n in names])
    write_dir(os.path.join(root, "qa"), cfg, {k: v.detach() for k, v in p.items()})
    t = {"ids": ids, "token_type_ids": types, "key_pad": 1 - real, "start_positions": start_positions,
         "end_positions": end_positions, "start_logits": start.float(), "end_logits": end.float(),
         "loss": loss.float()}
    t.update({"grad." + n: g.float() for n, g in zip(names, gs)})
    refs.case("qa", {"dir": "models_bert_qa/qa"}, **t)
    refs.save(out)
