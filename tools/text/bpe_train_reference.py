#!/usr/bin/python3
"""Naive BPE training (Sennrich et al. 2016, Algorithm 1): recount every pair after every merge.
Slow but obviously right; the reference for qkv's incremental trainer on small corpora.

usage: bpe_train_reference.py IN OUT --merges N [--min-frequency F]
Words: IN split on white space (the set qkv uses: JavaScript's \\s plus U+0085); each word's last
character carries "</w>". Tie-break: highest count, then the smallest (left, right) strings.
OUT gets one merge per line, "left right".
"""
import argparse
from collections import Counter

SPACE = set("\t\n\u000b\u000c\r \u00a0\u1680\u2028\u2029\u202f\u205f\u3000\ufeff\u0085") | \
    {chr(c) for c in range(0x2000, 0x200B)}


def words_of(text):
    cur = []
    for ch in text:
        if ch in SPACE:
            if cur:
                yield "".join(cur)
                cur = []
        else:
            cur.append(ch)
    if cur:
        yield "".join(cur)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("inp")
    ap.add_argument("out")
    ap.add_argument("--merges", type=int, required=True)
    ap.add_argument("--min-frequency", type=int, default=2)
    a = ap.parse_args()
    text = open(a.inp, encoding="utf-8").read()
    vocab = {tuple(w[:-1]) + (w[-1] + "</w>",): c for w, c in Counter(words_of(text)).items()}
    merges = []
    while len(merges) < a.merges:
        stats = Counter()
        for w, c in vocab.items():
            for i in range(len(w) - 1):
                stats[w[i], w[i + 1]] += c
        if not stats:
            break
        best = min(stats, key=lambda p: (-stats[p], p))
        if stats[best] < a.min_frequency:
            break
        merges.append(best)
        new = {}
        for w, c in vocab.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and w[i] == best[0] and w[i + 1] == best[1]:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new[tuple(out)] = new.get(tuple(out), 0) + c
        vocab = new
    open(a.out, "w", encoding="utf-8").write("".join(f"{l} {r}\n" for l, r in merges))


if __name__ == "__main__":
    main()
