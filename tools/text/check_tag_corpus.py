#!/usr/bin/python3
"""Independent check of a tagged corpus built by `qkv data pos-wsj` (data/corpus_tagged.h).

  check_tag_corpus.py OUT_DIR --wsj tagged-en-wsj.txt

Reads {train,valid,test}.conll (word<TAB>tag, a blank line after each sentence) and the source
file ("word/TAG" tokens, the tag after the last '/', one line per sentence) and checks that the
three splits together hold exactly the source's sentences (as a multiset), that no sentence is in
two splits, and that valid and test hold 10% of them each (rounded). Exit status 1 on a mismatch.
"""
import argparse
import collections
import sys


def read_conll(path):
    sents, cur = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                if cur:
                    sents.append(tuple(cur))
                cur = []
                continue
            word, tag = line.split("\t")
            cur.append((word, tag))
    if cur:
        sents.append(tuple(cur))
    return sents


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--wsj", required=True)
    a = ap.parse_args()
    source = []
    with open(a.wsj, encoding="utf-8") as f:
        for line in f:
            toks = line.split()
            if toks:
                source.append(tuple(tuple(t.rsplit("/", 1)) for t in toks))
    splits = {s: read_conll(f"{a.out_dir}/{s}.conll") for s in ("train", "valid", "test")}
    ok = True
    built = collections.Counter(x for s in splits.values() for x in s)
    if built != collections.Counter(source):
        print("check_tag_corpus: the splits do not hold exactly the source's sentences", file=sys.stderr)
        ok = False
    n = len(source)
    for s in ("valid", "test"):
        if len(splits[s]) != round(0.1 * n):
            print(f"check_tag_corpus: {s} has {len(splits[s])} sentences, expected {round(0.1 * n)}", file=sys.stderr)
            ok = False
    seen = set()
    for s, xs in splits.items():
        for x in set(xs):
            if x in seen:
                print(f"check_tag_corpus: a sentence is in two splits ({s})", file=sys.stderr)
                ok = False
            seen.add(x)
    print(f"check_tag_corpus: {n} sentences, {sum(len(x) for x in source)} words; "
          + ", ".join(f"{s} {len(xs)}" for s, xs in splits.items()))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
