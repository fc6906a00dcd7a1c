"""Reference decoders for tests/decode: a fixed 'table model' and a plain beam search.

The model: logits(step t, previous token p) = W[p] + P[t] + S[b] (sentence bias), V = 12.
The beam search is the textbook one, written independently of qkv: at every step all
expansions of the live hypotheses except those by <pad> and <s> (never an output; their log-probabilities
stay in the softmax) are ranked by (score desc, row asc, token asc); walking down
that list, </s> endings become finished hypotheses (until K are finished) and the others fill the
K live slots; a sentence stops when round(patience * K) hypotheses finished (Kasai et al. 2022; patience 1 is
the plain rule), none is live, or the length limit is reached (then every ranked candidate within
the walk finishes). Finished hypotheses are ranked by logprob / ((5 + len) / 6) ** alpha.
"""
import math

import torch
from qkvref import Refs

V, T_MAX, B = 12, 9, 3
PAD, BOS, EOS = 0, 1, 2


def logp_row(W, P, S, b, t, prev):
    return torch.log_softmax((W[prev] + P[t] + S[b]).double(), -1)


def beam(W, P, S, b, K, alpha, limit, patience):
    n_finish = max(1, int(math.floor(patience * K + 0.5)))  # round half away from zero (K, p > 0)
    live = [([], 0.0)]  # (tokens, logprob)
    finished = []
    for t in range(limit):
        cands = []
        for r, (toks, s) in enumerate(live):
            prev = toks[-1] if toks else BOS
            lp = logp_row(W, P, S, b, t, prev)
            for v in range(V):
                if v in (PAD, BOS):
                    continue
                cands.append((s + lp[v].item(), r, v))
        cands.sort(key=lambda c: (-c[0], c[1], c[2]))
        at_limit = t + 1 >= limit
        new_live = []
        for s, r, v in cands:
            if len(new_live) >= K:
                break
            seq = live[r][0] + [v]
            if v == EOS or at_limit:
                if len(finished) < n_finish:
                    finished.append((seq, s))
                continue
            new_live.append((seq, s))
        live = new_live
        if len(finished) >= n_finish or not live or at_limit:
            break
    lp = lambda n: 1.0 if alpha == 0 else ((5.0 + n) / 6.0) ** alpha
    finished.sort(key=lambda h: -h[1] / lp(len(h[0])))  # stable, like qkv
    return finished


def main(out):
    g = torch.Generator().manual_seed(5)
    r = Refs()
    cases = [(1, 0.0, 1, 1.0), (2, 0.6, 2, 1.0), (4, 0.6, 3, 1.0), (5, 1.0, 5, 1.0), (3, 0.0, 1, 1.0),
             (3, 2.0, 1, 2.0), (4, 1.0, 2, 1.5), (2, 0.6, 1, 0.5), (2, 1.0, 2, 3.0)]  # (K, alpha, nbest, patience)
    # (nbest is at most the round(patience * K) endings kept: qkv refuses more, which returned fewer)
    for case, (K, alpha, nbest, patience) in enumerate(cases):
        W = torch.randn(V, V, generator=g) * 2.0
        W[:, EOS] -= 1.5  # keep </s> from dominating
        W[:, PAD] += 1.0 if case % 2 else 0.0  # and <pad>, <s> often the model's favourites
        W[:, BOS] += 1.0 if case % 2 else 0.0
        P = torch.randn(T_MAX + 1, V, generator=g)
        S = torch.randn(B, V, generator=g) * 0.5
        src_len = torch.tensor([3, 5, 2])
        limit = [min(int(math.ceil(1.5 * int(n))) + 1, T_MAX) for n in src_len]
        toks, scores, normed, counts = [], [], [], []
        for b in range(B):
            hyps = beam(W, P, S, b, K, alpha, limit[b], patience)[:nbest]
            counts.append(len(hyps))
            for seq, s in hyps:
                toks.append(seq + [-1] * (T_MAX - len(seq)))
                scores.append(s)
                normed.append(s / (1.0 if alpha == 0 else ((5.0 + len(seq)) / 6.0) ** alpha))
        r.case(f"beam{case}", {"beam": K, "alpha": alpha, "nbest": nbest, "patience": patience, "max_len_ratio": 1.5, "max_len_extra": 1,
                               "model_max_len": T_MAX + 1, "pad": PAD, "bos": BOS, "eos": EOS},
               W=W, P=P, S=S, src_len=src_len, tokens=torch.tensor(toks), logprob=torch.tensor(scores, dtype=torch.float64),
               score=torch.tensor(normed, dtype=torch.float64),
               counts=torch.tensor(counts))
    r.save(out)
