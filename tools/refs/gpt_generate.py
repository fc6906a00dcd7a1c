"""References for GPT generation (tasks/generator, decode/logits_process).

Models: the GPT of models_gpt.py (written from the papers, published GPT-2 layout, random weights)
in two variants, GPT-2 pre-LN ("gen_gpt2") and GPT-1 post-LN ("gen_gpt1"), each written as a model
directory <out dir>/gpt_generate/<case>/ (no eos_token_id: generation runs to its length limit).
For each, five prompts of different lengths are completed one at a time, without any cache (a full
forward over prompt + generated tokens per step, float64), greedily:
  gen      (5, 16): plain greedy, max 16 new tokens, clamped to n_positions - prompt length (the
           35-token prompt gets 5); -1 after the end.
  gen_rep  (5, 16): greedy after Hugging Face's repetition penalty 1.5 over prompt + generated.
  gen_pf   (5, 16): greedy after OpenAI's presence (0.7) and frequency (0.5) penalties, as its API
           reference defines them: logit - count * frequency - (count > 0) * presence, count =
           how often the token was generated before (the prompt not counted).
  gen_ngram (5, 16): greedy with Hugging Face's no_repeat_ngram_size 2 over prompt + generated
           (NoRepeatNGramLogitsProcessor: a token completing an n-gram already in the text is -inf).
  gen_min  (5, 16): greedy with an end-of-text id (eos_id) that stops a completion (eos kept, -1
           after it) but is -inf until min_new_tokens 3 tokens are out
           (MinNewTokensLengthLogitsProcessor). eos_id: the lowest id with which some completion
           ends at eos and plain greedy chose it within a first 3 tokens (min_new_tokens matters),
           else the lowest with which some completion ends (these random models repeat a token
           forever once it is chosen: on GPT-1 no id meets both).
Every step's best logit beats the second by > 1e-3 (asserted), so float32 must choose the same.
With each: <name>_lp (5, 16) float64, the chosen token's log-probability under the model's own
distribution (log_softmax of the raw logits: no penalty), NaN after the end; <name>_top_ids and
<name>_top_lp (5, 16, 3), the three most likely tokens there and theirs (-1 / NaN after the end;
consecutive log-probabilities of the four most likely differ by > 1e-4, asserted, so float32 ranks
them the same). prompt_lp / prompt_top_ids / prompt_top_lp: each prompt token after the first,
prompts concatenated (sum(L) - 5 rows), from one forward pass over the prompt.

Case "filters": fixed logits (6, 50) f32 and histories (6, 8); for each configuration
(temperature, top_k, top_p, repetition_penalty, presence_penalty, frequency_penalty[, logit_bias])
the processed logits (-inf = removed) computed as OpenAI's logit_bias ([token, bias] pairs added to
the logits, first, as vLLM applies it), then Hugging Face's RepetitionPenaltyLogitsProcessor, then OpenAI's
presence and frequency penalties over the history taken as generated tokens (vLLM's order), then
TemperatureLogitsWarper, TopKLogitsWarper and TopPLogitsWarper do (float32, their code paths
re-written here). No cumulative probability is within
1e-5 of a top-p boundary (asserted), so the kept sets are exact.
"""
import os

import torch
from models_gpt import gpt_forward, init_params, write_dir
from qkvref import Refs

# The reference models (gpt_beam.py's too): GPT-2 (pre-LN, tanh GELU) and GPT-1 (post-LN, erf GELU).
_BASE = {"model_type": "gpt2", "vocab_size": 97, "n_positions": 40, "n_embd": 32, "n_layer": 2, "n_head": 4,
         "n_inner": None, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "resid_pdrop": 0.1,
         "embd_pdrop": 0.1, "attn_pdrop": 0.1, "pre_norm": True}
MODELS = {"gpt2": dict(_BASE), "gpt1": dict(_BASE, pre_norm=False, activation_function="gelu")}
PROMPT_LENS = [1, 6, 11, 3, 35]
MAX_NEW = 16
PRESENCE, FREQUENCY = 0.7, 0.5
NGRAM = 2
MIN_NEW = 3


def rep_penalty(scores, history, penalty):  # HF RepetitionPenaltyLogitsProcessor, one row
    ids = torch.tensor(history, dtype=torch.long)
    s = scores.gather(0, ids)
    s = torch.where(s < 0, s * penalty, s / penalty)
    return scores.scatter(0, ids, s)


def presence_frequency(scores, generated, presence, frequency):  # OpenAI's definition, one row
    counts = torch.bincount(torch.tensor(generated, dtype=torch.long), minlength=scores.shape[-1]).to(scores.dtype)
    return scores - counts * frequency - (counts > 0).to(scores.dtype) * presence


def no_repeat_ngram(scores, ids, n):  # HF NoRepeatNGramLogitsProcessor, one row
    s = scores.clone()
    if len(ids) + 1 < n:
        return s
    last = tuple(ids[len(ids) - n + 1:])
    for i in range(len(ids) - n + 1):
        if tuple(ids[i:i + n - 1]) == last:
            s[ids[i + n - 1]] = float("-inf")
    return s


def top_k_warp(scores, k):  # HF TopKLogitsWarper, one row
    k = min(k, scores.shape[-1])
    return scores.masked_fill(scores < torch.topk(scores, k)[0][-1], float("-inf"))


def top_p_warp(scores, p):  # HF TopPLogitsWarper, one row
    sorted_logits, sorted_idx = torch.sort(scores, descending=False)
    cum = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    finite = cum[sorted_logits > float("-inf")]
    assert (finite - (1 - p)).abs().min() > 1e-5, "a top-p boundary too close to call"
    remove = cum <= (1 - p)
    remove[-1:] = False
    return scores.masked_fill(remove.scatter(0, sorted_idx, remove), float("-inf"))


TOP = 3


def top_of(lp):  # the TOP most likely (ids, log-probabilities) of one row, ranks well separated
    v, i = torch.topk(lp, TOP + 1)
    assert (v[:-1] - v[1:]).min() > 1e-4, "log-probabilities too close to rank in float32"
    return i[:TOP], v[:TOP]


def forward(cfg, p, ids):  # (len(ids), V) logits, float64
    x = torch.tensor([ids])
    return gpt_forward(cfg, p, x, torch.zeros_like(x, dtype=torch.uint8), torch.arange(len(ids))[None])[0]


def greedy(cfg, p, prompt, max_new, penalty, scores, presence=0.0, frequency=0.0, ngram=0, eos=-1, min_new=0):
    # scores: gets (logprob, top ids, top logprobs) per step
    ids = list(prompt)
    n = min(max_new, cfg["n_positions"] - len(prompt))
    for _ in range(n):
        logits = forward(cfg, p, ids)[-1]
        lp = torch.log_softmax(logits, -1)
        if penalty != 1.0:
            logits = rep_penalty(logits, ids, penalty)
        if presence or frequency:
            logits = presence_frequency(logits, ids[len(prompt):], presence, frequency)
        if ngram:
            logits = no_repeat_ngram(logits, ids, ngram)
        if eos >= 0 and len(ids) - len(prompt) < min_new:
            logits = logits.clone()
            logits[eos] = float("-inf")
        top2 = torch.topk(logits, 2)[0]
        assert top2[0] - top2[1] > 1e-3, "greedy choice too close to call in float32"
        ids.append(int(logits.argmax()))
        scores.append((float(lp[ids[-1]]),) + top_of(lp))
        if ids[-1] == eos:
            break
    return ids[len(prompt):]


def pick_eos(cfg, p, prompts, plain):
    ends_only = None
    for e in range(cfg["vocab_size"]):
        try:
            outs = [greedy(cfg, p, pr, MAX_NEW, 1.0, [], eos=e, min_new=MIN_NEW) for pr in prompts]
        except AssertionError:  # a choice too close to call in float32
            continue
        if any(o[-1] == e for o in outs):
            if bool((plain[:, :MIN_NEW] == e).any()):
                return e
            ends_only = e if ends_only is None else ends_only
    assert ends_only is not None, "no token ends a completion after min_new_tokens"
    return ends_only


def model_dir(root, c, cfg, seed):
    """Random weights for case c, written as the model directory root/c; returns the generator
    (to draw more from) and the weights in float64."""
    gen = torch.Generator().manual_seed(seed)
    p = init_params(cfg, gen)
    write_dir(os.path.join(root, c), cfg, {k: v.detach() for k, v in p.items()})
    return gen, {k: v.detach().double() for k, v in p.items()}


def main(out):
    refs = Refs()
    root = os.path.join(os.path.dirname(out), "gpt_generate")
    cases = {"gen_" + k: cfg for k, cfg in MODELS.items()}
    for c, cfg in cases.items():
        gen, pd = model_dir(root, c, cfg, len(c) * 104729)
        prompts = [torch.randint(0, cfg["vocab_size"], (n,), generator=gen).tolist() for n in PROMPT_LENS]
        out_t = {}
        runs = (("gen", 1.0, 0, 0, 0), ("gen_rep", 1.5, 0, 0, 0), ("gen_pf", 1.0, PRESENCE, FREQUENCY, 0),
                ("gen_ngram", 1.0, 0, 0, NGRAM), ("gen_min", 1.0, 0, 0, 0))
        eos = -1
        for name, pen, pres, freq, ngram in runs:
            if name == "gen_min":
                eos = pick_eos(cfg, pd, prompts, out_t["gen"])
            g = torch.full((len(prompts), MAX_NEW), -1, dtype=torch.long)
            lp = torch.full((len(prompts), MAX_NEW), float("nan"), dtype=torch.float64)
            top_ids = torch.full((len(prompts), MAX_NEW, TOP), -1, dtype=torch.long)
            top_lp = torch.full((len(prompts), MAX_NEW, TOP), float("nan"), dtype=torch.float64)
            for i, pr in enumerate(prompts):
                scores = []
                toks = greedy(cfg, pd, pr, MAX_NEW, pen, scores, pres, freq, ngram, eos, MIN_NEW if eos >= 0 else 0)
                g[i, :len(toks)] = torch.tensor(toks)
                for j, (v, ti, tv) in enumerate(scores):
                    lp[i, j], top_ids[i, j], top_lp[i, j] = v, ti, tv
            out_t.update({name: g, name + "_lp": lp, name + "_top_ids": top_ids, name + "_top_lp": top_lp})
        rows = []
        for pr in prompts:
            lps = torch.log_softmax(forward(cfg, pd, pr), -1)
            rows += [(float(lps[j - 1, pr[j]]),) + top_of(lps[j - 1]) for j in range(1, len(pr))]
        out_t.update({"prompt_lp": torch.tensor([r[0] for r in rows], dtype=torch.float64),
                      "prompt_top_ids": torch.stack([r[1] for r in rows]),
                      "prompt_top_lp": torch.stack([r[2] for r in rows])})
        refs.case(c, {"dir": os.path.join("gpt_generate", c), "max_new": MAX_NEW, "repetition_penalty": 1.5,
                      "presence_penalty": PRESENCE, "frequency_penalty": FREQUENCY, "no_repeat_ngram_size": NGRAM,
                      "min_new_tokens": MIN_NEW, "eos_id": eos},
                  prompts=torch.tensor(sum(prompts, [])), prompt_lens=torch.tensor(PROMPT_LENS), **out_t)

    gen = torch.Generator().manual_seed(1234)
    R, V = 6, 50
    logits = (torch.randn(R, V, generator=gen) * 3).float()
    history = torch.randint(0, V, (R, 8), generator=gen)
    configs = [(1.0, 0, 1.0, 1.3, 0, 0), (0.7, 0, 1.0, 1.0, 0, 0), (1.0, 5, 1.0, 1.0, 0, 0), (1.0, 0, 0.9, 1.0, 0, 0),
               (0.8, 10, 0.75, 1.2, 0, 0), (1.5, 3, 0.5, 2.0, 0, 0), (1.0, 0, 0.05, 1.0, 0, 0),
               (1.0, 60, 0.999, 1.0, 0, 0), (1.0, 0, 1.0, 1.0, 0.8, 0.3), (1.0, 0, 1.0, 1.0, -0.5, 1.1),
               (0.9, 8, 0.8, 1.3, 0.4, 0.6), (1.0, 0, 1.0, 1.3, 0, 0, [[3, 5.0], [7, -100.0], [20, 2.5]]),
               (0.8, 5, 0.9, 1.0, 0.4, 0.3, [[0, 10.0], [49, -3.0], [12, 0.5]])]
    outs = {}
    for i, (t, k, tp, pen, pres, freq, *bias) in enumerate(configs):
        rows = []
        for r in range(R):
            s = logits[r].clone()
            for tok, b in (bias[0] if bias else []):
                s[tok] += b
            if pen != 1.0:
                s = rep_penalty(s, history[r].tolist(), pen)
            if pres or freq:
                s = presence_frequency(s, history[r].tolist(), pres, freq)
            if t != 1.0:
                s = s / t
            if k > 0:
                s = top_k_warp(s, k)
            if tp < 1.0:
                s = top_p_warp(s, tp)
            rows.append(s)
        outs[f"out{i}"] = torch.stack(rows)
    refs.case("filters", {"configs": [list(c) for c in configs]}, logits=logits, history=history, **outs)
    refs.save(out)
