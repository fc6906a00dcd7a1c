#!/usr/bin/python3
"""Writes the BLEU / chrF / 13a test vectors for tests/eval (JSON) from the independent Python
reference in sacrebleu_ref.py. Text: /usr/share/common-licenses (real English prose, seeded
sample) plus synthetic punctuation, number, entity and Unicode edge cases; hypotheses are seeded
random edits of the references (drops, swaps, substitutions, case changes, punctuation noise).
Usage: /usr/bin/python3 tools/eval/make_vectors.py OUT.json
"""
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sacrebleu_ref as ref  # noqa: E402

EDGE = [
    "Hello, world. 3.14 and 1,000,000 people.",
    "Prices: $5.99-$7.50 (approx.), e.g. 10-20% off!",
    "a.b,c 1.a a.1 ,1 1, .5 5. -5 5- a-b 1-2",
    "&quot;quoted&quot; &amp; &lt;tag&gt; &amp;amp; <skipped> text",
    "line-\nbreak and\nnewline",
    "Tab\tseparated\u00a0nbsp\u2003emspace\u3000ideographic  end   ",
    "Ärger über Öl: Straße, Grüße & Maß – 12,5 % „Zitat“ …",
    "Co nás nejvíc trápí, protože lékaři si vybírají, kdo bude žít?",
    "URL http://example.com/a_b?x=1&y=2#frag {brace} [sq] ~tilde~ `tick` ^caret|pipe\\",
    "It's John's \"book\"; isn't it? Yes: it's @home #1 *star* +plus =eq <lt> >gt",
    "...,,,..1..2,,3.,.4",
    "ΑΒΓ Δέλτα ΣΊΣΥΦΟΣ σοφία İstanbul ǅemal ﬁle",
    "",
    "   ",
    "single",
    "100-year-old 2-3 a- -b ---",
]
WORDS_DE = "der die das und nicht ist ein eine Haus Katze läuft schnell über Brücke".split()


def licenses_lines(rng, n):
    lines = []
    base = "/usr/share/common-licenses"
    for fn in sorted(os.listdir(base)):
        path = os.path.join(base, fn)
        if os.path.isfile(path):
            with open(path, encoding="utf-8", errors="replace") as f:
                lines += [l.rstrip("\n") for l in f if len(l.split()) >= 3]
    rng.shuffle(lines)
    return lines[:n]


def perturb(rng, s):
    toks = s.split(" ")
    out = []
    for t in toks:
        r = rng.random()
        if r < 0.08:
            continue                                  # drop
        if r < 0.14:
            t = rng.choice(WORDS_DE)                  # substitute
        elif r < 0.18:
            t = t.upper()
        elif r < 0.22:
            t = t + rng.choice([",", ".", "!", "?", ";", "-", "'s", ")"])
        elif r < 0.24:
            t = rng.choice(["(", "\"", "&quot;", "&amp;"]) + t
        out.append(t)
        if rng.random() < 0.05:
            out.append(rng.choice(["3.5", "1,200", "2-3", "e.g.", "—"]))
    if len(out) > 3 and rng.random() < 0.3:
        i = rng.randrange(len(out) - 1)
        out[i], out[i + 1] = out[i + 1], out[i]
    return " ".join(out)


def main(path):
    rng = random.Random(1234)
    real = licenses_lines(rng, 400)
    cases = []
    opts_bleu = [dict(), dict(lowercase=True), dict(smooth="none"), dict(smooth="floor"),
                 dict(smooth="floor", smooth_value=0.3), dict(smooth="add-k"),
                 dict(smooth="add-k", smooth_value=2), dict(tokenize="none"),
                 dict(effective_order=True)]
    opts_chrf = [dict(), dict(word_order=2), dict(lowercase=True), dict(whitespace=True),
                 dict(eps_smoothing=True), dict(beta=3, word_order=1)]

    def add(name, hyps, refs, lowercase_safe=True):
        case = dict(name=name, hyps=hyps, refs=refs, bleu=[], chrf=[])
        for o in opts_bleu:
            if o.get("lowercase") and not lowercase_safe:
                continue
            r = ref.corpus_bleu(hyps, refs, **o)
            case["bleu"].append(dict(opts=o, score=r["score"], counts=r["counts"],
                                     totals=r["totals"], sys_len=r["sys_len"],
                                     ref_len=r["ref_len"], bp=r["bp"],
                                     precisions=r["precisions"], nrefs=str(r["nrefs"])))
        for o in opts_chrf:
            if o.get("lowercase") and not lowercase_safe:
                continue
            r = ref.corpus_chrf(hyps, refs, **o)
            case["chrf"].append(dict(opts=o, score=r["score"], stats=r["stats"]))
        cases.append(case)

    # real prose, one reference, in corpora of 1..40 segments
    for k in range(30):
        n = rng.randint(1, 40)
        refs = rng.sample(real, n)
        add(f"licenses_{k}", [perturb(rng, r) for r in refs], [refs])
    # two and three references (one stream with some empty lines: per-segment variable count)
    for k in range(10):
        n = rng.randint(2, 20)
        r1 = rng.sample(real, n)
        r2 = [perturb(rng, r) for r in r1]
        r3 = [perturb(rng, r) if rng.random() < 0.7 else "" for r in r1]
        streams = [r1, r2] if k % 2 else [r1, r2, r3]
        add(f"multiref_{k}", [perturb(rng, r) for r in r1], streams)
    # edge cases: each edge line against a perturbed copy, and as a corpus
    edge_refs = [e for e in EDGE if e.strip()]
    for k, e in enumerate(edge_refs):
        add(f"edge_{k}", [perturb(rng, e), e], [[e, perturb(rng, e)]],
            lowercase_safe="Σ" not in e)
    add("edge_corpus_empty_hyps", EDGE, [[e if e.strip() else "x" for e in EDGE]],
        lowercase_safe=False)
    add("short_segments", ["a", "b c", "", "d e f"], [["a", "b d", "x", "d e f g"]])

    tok = [dict(line=s, tokens=ref.tokenize_13a(s)) for s in EDGE + real[:150]]
    rnd = []  # random strings over a punctuation-heavy alphabet
    alpha = "ab1 2.,-'\"&;<>()[]{}:/@!?$%*+=|\\^_`~#äß€\u00a0"
    for _ in range(300):
        rnd.append("".join(rng.choice(alpha) for _ in range(rng.randint(0, 40))))
    tok += [dict(line=s, tokens=ref.tokenize_13a(s)) for s in rnd]
    with open(path, "w", encoding="utf-8") as f:
        json.dump(dict(cases=cases, tokenize_13a=tok), f, ensure_ascii=False)


if __name__ == "__main__":
    main(sys.argv[1])
