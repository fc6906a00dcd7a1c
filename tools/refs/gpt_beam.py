"""References for GPT beam search (tasks/generator with num_beams > 1), as Hugging Face's
GenerationMixin._beam_search defines it (transformers 4.5x, the vectorised form), re-written here
for one prompt in float64 without a cache (a full forward per step over each beam's tokens):

  - running beams start as beam 0 at score 0 and the others at -1e9; finished beams as none;
  - each step, a beam's scores are log_softmax(logits) after the logit processors (the repetition
    penalty over prompt + beam, OpenAI's presence and frequency penalties over the beam's tokens,
    no_repeat_ngram_size over prompt + beam, eos at -inf until min_new_tokens), plus the beam's
    score; the 2K best (beam, token) of all K beams are ranked;
  - a candidate "hits" when its token is eos or it reaches the length limit; the next running
    beams are the K best after -1e9 is added to the hits;
  - among the first K candidates, each hit is a finished hypothesis scored
    sum / (generated tokens, eos included) ** length_penalty; the finished keep their K best;
    none is added once the search has decided to stop improving (early stopping True and K
    finished, or the heuristic below);
  - then the heuristic: with K finished, it is satisfied once the best running score divided by
    (generated length) ** length_penalty (early_stopping "never" with length_penalty > 0: by the
    length limit) is no better than the worst finished score;
  - the search stops when the heuristic is satisfied, when early_stopping is True and K are
    finished, or when every candidate hits.

Models as in gpt_generate.py (the same configuration, other random weights; model directories
<out dir>/gpt_beam/<case>/). The end-of-text id (eos_id) is the most frequent token of the plain
4-beam completions of a probe prompt, so that many hypotheses end with it. Prompts are drawn at random and kept only if every
configuration below separates its candidates: at every step, consecutive scores of the 2K + 1
best differ by > 1e-4, and so do the finished scores (so float32 ranks them the same).

Per case and configuration <name>: <name> (N, K, M) the K finished hypotheses best first, -1
after each one's end (eos kept); <name>_score (N, K) their scores; <name>_lp (N, K, M) each
token's log-probability under the model's own distribution (NaN after the end).
"""
import os

import torch
from gpt_generate import MODELS, model_dir, no_repeat_ngram, presence_frequency, rep_penalty
from models_gpt import gpt_forward
from qkvref import Refs

PROMPT_LENS = [1, 7, 12, 30]
MAX_NEW = 12
GAP = 1e-4
# name: (num_beams, length_penalty, early_stopping, repetition, presence, frequency, ngram, min_new)
CONFIGS = {
    "beam4": (4, 1.0, False, 1.0, 0.0, 0.0, 0, 0),
    "beam3_never": (3, 0.5, "never", 1.0, 0.0, 0.0, 0, 0),
    "beam2_early": (2, 2.0, True, 1.0, 0.0, 0.0, 0, 0),
    "beam3_short": (3, -1.0, False, 1.0, 0.0, 0.0, 0, 0),
    "beam4_processed": (4, 1.0, False, 1.3, 0.4, 0.3, 2, 3),
    "beam3_stops": (3, 2.0, False, 1.3, 0.4, 0.3, 2, 0),
    "beam3_never_stops": (3, 2.0, "never", 1.3, 0.4, 0.3, 2, 0),
}
# The last two differ only in early stopping. Where Hugging Face's heuristic stops the search
# before a better hypothesis is found, "never" finds it: a fifth prompt is drawn until they differ
# (within 150 draws; at least one of the two models must have one).


class TooClose(Exception):
    pass


def separated(values):
    v = sorted(values, reverse=True)
    v = [x for x in v if x > -1e8]  # -1e9 fillers never compete with real scores
    if any(a - b <= GAP for a, b in zip(v, v[1:])):
        raise TooClose()


def beam_search(cfg, p, prompt, eos, K, length_penalty, early, rep, pres, freq, ngram, min_new):
    V = cfg["vocab_size"]
    max_new = min(MAX_NEW, cfg["n_positions"] - len(prompt))
    running = [list(prompt) for _ in range(K)]
    run_lp = [[] for _ in range(K)]
    run_score = [0.0] + [-1e9] * (K - 1)
    finished = []  # (score, tokens, lps)
    unsatisfied = True
    for g in range(max_new):
        x = torch.tensor(running)
        T = x.shape[1]
        logits = gpt_forward(cfg, p, x, torch.zeros_like(x, dtype=torch.uint8), torch.arange(T)[None].expand(K, T))
        cands = []
        for k in range(K):
            lp = torch.log_softmax(logits[k, -1], -1)
            s = lp.clone()
            if rep != 1.0:
                s = rep_penalty(s, running[k], rep)
            if pres or freq:
                s = presence_frequency(s, running[k][len(prompt):], pres, freq)
            if ngram:
                s = no_repeat_ngram(s, running[k], ngram)
            if eos >= 0 and g < min_new:
                s[eos] = float("-inf")
            for v in range(V):
                cands.append((run_score[k] + float(s[v]), k * V + v, k, v, float(lp[v])))
        cands.sort(key=lambda c: (-c[0], c[1]))
        top = cands[:2 * K]
        separated([c[0] for c in cands[:2 * K + 1]])
        hits = [c[3] == eos or g + 1 >= max_new for c in top]
        adjusted = sorted([(c[0] - (1e9 if h else 0.0), i) for i, (c, h) in enumerate(zip(top, hits))],
                          key=lambda a: (-a[0], a[1]))[:K]
        if not ((early is True and len(finished) == K) or not unsatisfied):
            for i in range(K):
                if hits[i]:
                    c = top[i]
                    finished.append((c[0] / (g + 1) ** length_penalty, running[c[2]][len(prompt):] + [c[3]],
                                     run_lp[c[2]] + [c[4]]))
            finished.sort(key=lambda f: -f[0])
            finished = finished[:K]
            separated([f[0] for f in finished])
        new_running, new_lp = [], []
        for _, i in adjusted:
            c = top[i]
            new_running.append(running[c[2]] + [c[3]])
            new_lp.append(run_lp[c[2]] + [c[4]])
        running, run_lp, run_score = new_running, new_lp, [a for a, _ in adjusted]
        length = max_new if (early == "never" and length_penalty > 0) else g + 1
        if len(finished) == K:
            unsatisfied = unsatisfied and run_score[0] / length ** length_penalty > finished[-1][0]
        if not unsatisfied or (early is True and len(finished) == K) or all(hits):
            break
    assert len(finished) == K
    return finished


def main(out):
    refs = Refs()
    root = os.path.join(os.path.dirname(out), "gpt_beam")
    stops_differ = 0
    cases = {"beam_" + k: cfg for k, cfg in MODELS.items()}
    for c, cfg in cases.items():
        gen, pd = model_dir(root, c, cfg, len(c) * 7919)
        # eos: the most frequent token of the plain 4-beam completions of a probe prompt (these
        # random models repeat a few tokens), so that many hypotheses end there.
        probe = torch.randint(0, cfg["vocab_size"], (5,), generator=gen).tolist()
        eos = int(torch.tensor(sum((f[1] for f in beam_search(cfg, pd, probe, -1, *CONFIGS["beam4"])), [])).mode()[0])
        prompts, results = [], {name: [] for name in CONFIGS}
        for n in PROMPT_LENS:
            for _ in range(50):
                pr = torch.randint(0, cfg["vocab_size"], (n,), generator=gen).tolist()
                try:
                    res = {name: beam_search(cfg, pd, pr, eos, *conf) for name, conf in CONFIGS.items()}
                except TooClose:
                    continue
                break
            else:
                raise AssertionError("no prompt separates its candidates")
            prompts.append(pr)
            for name in CONFIGS:
                results[name].append(res[name])
        for _ in range(150):
            pr = torch.randint(0, cfg["vocab_size"], (int(torch.randint(1, 20, (1,), generator=gen)),),
                               generator=gen).tolist()
            try:
                pair = [beam_search(cfg, pd, pr, eos, *CONFIGS[n]) for n in ("beam3_stops", "beam3_never_stops")]
                if [f[1] for f in pair[0]] == [f[1] for f in pair[1]]:
                    continue
                res = {name: beam_search(cfg, pd, pr, eos, *conf) for name, conf in CONFIGS.items()}
            except TooClose:
                continue
            prompts.append(pr)
            for name in CONFIGS:
                results[name].append(res[name])
            stops_differ += 1
            break
        out_t = {}
        ended = 0
        for name, (K, *_rest) in CONFIGS.items():
            toks = torch.full((len(prompts), K, MAX_NEW), -1, dtype=torch.long)
            lps = torch.full((len(prompts), K, MAX_NEW), float("nan"), dtype=torch.float64)
            scores = torch.zeros(len(prompts), K, dtype=torch.float64)
            for i, fin in enumerate(results[name]):
                for j, (s, t, lp) in enumerate(fin):
                    toks[i, j, :len(t)] = torch.tensor(t)
                    lps[i, j, :len(lp)] = torch.tensor(lp, dtype=torch.float64)
                    scores[i, j] = s
                    ended += t[-1] == eos
            out_t.update({name: toks, name + "_score": scores, name + "_lp": lps})
        assert ended > 0, "no hypothesis ends at eos"
        refs.case(c, {"dir": os.path.join("gpt_beam", c), "max_new": MAX_NEW, "eos_id": eos,
                      "configs": {k: list(v) for k, v in CONFIGS.items()}},
                  prompts=torch.tensor(sum(prompts, [])), prompt_lens=torch.tensor([len(q) for q in prompts]), **out_t)
    assert stops_differ > 0, "no prompt where early stopping changes the hypotheses"
    refs.save(out)
