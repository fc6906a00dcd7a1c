#!/usr/bin/python3
"""OpenAI GPT-2's BPE (encoder.py of openai/gpt-2, re-written here from its published algorithm):
merges looked up by the pair itself (a tuple), lowest rank first, all occurrences left to right.

usage: gpt2_reference.py GPT2_DIR PIECES OUT
GPT2_DIR holds encoder.json + vocab.bpe. PIECES has one line per text line with the
pre-tokeniser's matches as hex byte strings (from gpt2_js_encode.js --pieces); OUT gets the ids.
"""
import json
import sys


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def main(gpt2_dir, pieces_path, out_path):
    encoder = json.load(open(gpt2_dir + "/encoder.json", encoding="utf-8"))
    lines = open(gpt2_dir + "/vocab.bpe", encoding="utf-8").read().split("\n")[1:-1]
    ranks = {tuple(l.split()): i for i, l in enumerate(lines)}
    b2u = bytes_to_unicode()
    cache = {}

    def bpe(token):
        if token in cache:
            return cache[token]
        word = tuple(token)
        while len(word) > 1:
            pairs = {(word[i], word[i + 1]) for i in range(len(word) - 1)}
            best = min(pairs, key=lambda p: ranks.get(p, float("inf")))
            if best not in ranks:
                break
            first, second = best
            new, i = [], 0
            while i < len(word):
                if i < len(word) - 1 and word[i] == first and word[i + 1] == second:
                    new.append(first + second)
                    i += 2
                else:
                    new.append(word[i])
                    i += 1
            word = tuple(new)
        cache[token] = word
        return word

    out = []
    for line in open(pieces_path, encoding="ascii").read().split("\n")[:-1]:
        ids = []
        for h in line.split():
            tok = "".join(b2u[b] for b in bytes.fromhex(h))
            ids.extend(encoder[t] for t in bpe(tok))
        out.append(" ".join(map(str, ids)))
    open(out_path, "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:4])
