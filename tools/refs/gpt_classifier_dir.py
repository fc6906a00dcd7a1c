"""Reference for tests/tasks/test_classifier_ref.cpp: a GPT classifier directory in Hugging Face's
GPT2ForSequenceClassification layout, written here (not by qkv), and the probabilities that
model class gives for a batch of texts.

The directory (<out dir>/gpt_classifier_dir/model/): config.json (GPT2Config keys,
"architectures": ["GPT2ForSequenceClassification"], id2label/label2id, pad_token_id),
model.safetensors (transformer.* in the published GPT-2 layout, score.weight (C, D), no bias) and
a word-level tokenizer.json whose added tokens are [START] [EXTRACT] [PAD] [DELIM].
The forward is transformers' GPT2ForSequenceClassification: each text becomes
[START] words [EXTRACT], right-padded with [PAD] under an attention mask; the logits are read at
the last token before the first [PAD] (argmax(ids == pad_token_id) - 1, modulo T), i.e. at
[EXTRACT]; probabilities = softmax. The GPT is models_gpt.py's (dropout 0, eval)."""
import json
import os

import torch
from models_gpt import gpt_hidden, init_params
from qkvref import Refs, save_safetensors

WORDS = ["[UNK]"] + [f"w{i}" for i in range(1, 37)]  # ids 0..36
START, EXTRACT, PAD, DELIM = 37, 38, 39, 40
CFG = {"model_type": "gpt2", "vocab_size": 41, "n_positions": 16, "n_embd": 24, "n_layer": 2, "n_head": 3,
       "n_inner": None, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "resid_pdrop": 0.0,
       "embd_pdrop": 0.0, "attn_pdrop": 0.0, "pre_norm": True}  # pre_norm: models_gpt.py's switch, not written
LABELS = ["negative", "neutral", "positive"]


def tokenizer_json():
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for t, i in (("[START]", START), ("[EXTRACT]", EXTRACT), ("[PAD]", PAD),
                                            ("[DELIM]", DELIM))]
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
            "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": None, "decoder": None,
            "model": {"type": "WordLevel", "vocab": {w: i for i, w in enumerate(WORDS)}, "unk_token": "[UNK]"}}


def main(out):
    gen = torch.Generator().manual_seed(2024)
    params = {k: v.detach() for k, v in init_params(CFG, gen).items()}
    score = torch.randn(len(LABELS), CFG["n_embd"], generator=gen) * 0.5
    d = os.path.join(os.path.dirname(out), "gpt_classifier_dir", "model")
    os.makedirs(d, exist_ok=True)
    sd = {"transformer." + k: v for k, v in params.items()}
    sd["score.weight"] = score
    save_safetensors(os.path.join(d, "model.safetensors"), sd, {"format": "pt"})
    cfg = dict({k: v for k, v in CFG.items() if k != "pre_norm"}, architectures=["GPT2ForSequenceClassification"], pad_token_id=PAD,
               id2label={str(i): l for i, l in enumerate(LABELS)}, label2id={l: i for i, l in enumerate(LABELS)})
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(d, "tokenizer.json"), "w") as f:
        json.dump(tokenizer_json(), f, indent=2)

    lengths = [5, 1, 9, 3, 12, 7]  # words per text: rows of 3 .. 14 tokens, padded to 14
    texts = [" ".join(WORDS[int(i)] for i in torch.randint(1, 37, (n,), generator=gen)) for n in lengths]
    T = max(lengths) + 2
    ids = torch.full((len(texts), T), PAD)
    mask = torch.zeros(len(texts), T, dtype=torch.uint8)  # 1 = real token
    for r, t in enumerate(texts):
        row = [START] + [WORDS.index(w) for w in t.split()] + [EXTRACT]
        ids[r, :len(row)] = torch.tensor(row)
        mask[r, :len(row)] = 1
    with torch.no_grad():
        h = gpt_hidden(CFG, params, ids, 1 - mask, torch.arange(T).expand_as(ids))  # (B, T, D)
        logits = h @ score.t()                                                       # (B, T, C)
        last = (torch.eq(ids, PAD).int().argmax(-1) - 1) % T                         # transformers' rule
        probs = torch.softmax(logits[torch.arange(len(texts)), last].double(), -1)  # (B, C)
    refs = Refs()
    refs.case("batch", {"dir": "gpt_classifier_dir/model", "texts": texts, "labels": LABELS}, probs=probs)
    refs.save(out)
