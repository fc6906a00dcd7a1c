#!/usr/bin/python3
"""Independent Python reference for sacreBLEU 2.x corpus BLEU and chrF / chrF++.

Written from the algorithm as sacreBLEU documents and implements it (metrics/bleu.py, chrf.py,
helpers.py, tokenizers/tokenizer_13a.py + tokenizer_re.py of github.com/mjpost/sacrebleu), not
copied from it: the Python package is not installable here. The qkv tests compare the C++ scorer
(src/eval/) to this file on many sentences; tests/eval also checks both against the expected values
published in sacreBLEU's own test suite.

Usage as a library: corpus_bleu(hyps, ref_streams, **opts) and corpus_chrf(...) return dicts.
"""
import math
import re
from collections import Counter

# ---------------------------------------------------------------- 13a tokenizer (mteval-v13a.pl)
# Each rule is (pattern, replacement) applied with Python's left-to-right, non-overlapping re.sub.
_SYMBOLS = r"[\{-\~\[-\` -\&\(-\+\:-\@\/]"  # ASCII punctuation except ' , - . and the digits
_RULES_13A = [
    (re.compile("(" + _SYMBOLS + ")"), r" \1 "),
    (re.compile(r"([^0-9])([\.,])"), r"\1 \2 "),  # period/comma not preceded by a digit
    (re.compile(r"([\.,])([^0-9])"), r" \1 \2"),  # period/comma not followed by a digit
    (re.compile(r"([0-9])(-)"), r"\1 \2 "),       # dash preceded by a digit
]


def tokenize_13a(line):
    for old, new in (("<skipped>", ""), ("-\n", ""), ("\n", " "), ("&quot;", '"'),
                     ("&amp;", "&"), ("&lt;", "<"), ("&gt;", ">")):
        line = line.replace(old, new)
    line = " " + line + " "
    for pat, rep in _RULES_13A:
        line = pat.sub(rep, line)
    return " ".join(line.split())


# ---------------------------------------------------------------- BLEU
SMOOTH_DEFAULT_VALUE = {"none": None, "floor": 0.1, "add-k": 1, "exp": None}


def _word_ngrams(tokens, max_order):
    grams = Counter()
    for n in range(1, max_order + 1):
        for i in range(len(tokens) - n + 1):
            grams[tuple(tokens[i:i + n])] += 1
    return grams


def _closest_length(hyp_len, ref_lens):
    # smallest |hyp - ref|; on a tie the shorter reference
    return min(ref_lens, key=lambda r: (abs(hyp_len - r), r))


def bleu_from_stats(correct, total, sys_len, ref_len, smooth="exp", smooth_value=None,
                    effective_order=False, max_order=4):
    if smooth_value is None:
        smooth_value = SMOOTH_DEFAULT_VALUE[smooth]
    correct, total = list(correct), list(total)
    if sys_len < ref_len:
        bp = math.exp(1.0 - ref_len / sys_len) if sys_len > 0 else 0.0
    else:
        bp = 1.0
    prec = [0.0] * max_order
    if all(c == 0 for c in correct):
        return dict(score=0.0, precisions=prec, bp=bp, counts=correct, totals=total)
    halvings = 1.0
    used = max_order
    for k in range(max_order):
        if smooth == "add-k" and k > 0:
            correct[k] += smooth_value
            total[k] += smooth_value
        if total[k] == 0:
            break
        if effective_order:
            used = k + 1
        if correct[k] != 0:
            prec[k] = 100.0 * correct[k] / total[k]
        elif smooth == "exp":
            halvings *= 2.0
            prec[k] = 100.0 / (halvings * total[k])
        elif smooth == "floor":
            prec[k] = 100.0 * smooth_value / total[k]
    logs = [math.log(p) if p > 0 else -9999999999.0 for p in prec[:used]]
    score = bp * math.exp(sum(logs) / used)
    return dict(score=score, precisions=prec, bp=bp, counts=correct, totals=total)


def _reference_lines(ref_streams, i):
    lines = [s[i] for s in ref_streams if s[i] is not None and s[i] != ""]
    if not lines:
        raise ValueError(f"segment {i}: every reference is empty")
    return lines


def corpus_bleu(hyps, ref_streams, lowercase=False, tokenize="13a", smooth="exp",
                smooth_value=None, effective_order=False, max_order=4):
    tok = tokenize_13a if tokenize == "13a" else (lambda s: s)

    def prep(s):
        if lowercase:
            s = s.lower()
        return tok(s.rstrip())

    sys_len = ref_len = 0
    correct, total = [0] * max_order, [0] * max_order
    nrefs = set()
    for i, hyp in enumerate(hyps):
        refs = [prep(r) for r in _reference_lines(ref_streams, i)]
        nrefs.add(len(refs))
        best = Counter()
        lens = []
        for r in refs:
            toks = r.split()
            lens.append(len(toks))
            for g, c in _word_ngrams(toks, max_order).items():
                best[g] = max(best[g], c)
        htoks = prep(hyp).split()
        sys_len += len(htoks)
        ref_len += _closest_length(len(htoks), lens)
        for g, c in _word_ngrams(htoks, max_order).items():
            total[len(g) - 1] += c
            correct[len(g) - 1] += min(c, best.get(g, 0))
    out = bleu_from_stats(correct, total, sys_len, ref_len, smooth, smooth_value,
                          effective_order, max_order)
    out.update(sys_len=sys_len, ref_len=ref_len, ratio=sys_len / ref_len if ref_len else 0.0,
               nrefs=nrefs.pop() if len(nrefs) == 1 else "var")
    return out


# ---------------------------------------------------------------- chrF / chrF++
_PUNCT = set("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def _chrf_words(sent):
    # split off one punctuation character at the end (else at the start) of each word
    words = []
    for w in sent.split():
        if len(w) > 1 and w[-1] in _PUNCT:
            words += [w[:-1], w[-1]]
        elif len(w) > 1 and w[0] in _PUNCT:
            words += [w[0], w[1:]]
        else:
            words.append(w)
    return words


def _chrf_ngrams(sent, char_order, word_order, whitespace):
    chars = sent if whitespace else "".join(sent.split())
    out = [Counter(chars[i:i + n] for i in range(len(chars) - n + 1))
           for n in range(1, char_order + 1)]
    if word_order > 0:
        words = _chrf_words(sent)
        for n in range(1, word_order + 1):
            out.append(Counter(" ".join(words[i:i + n]) for i in range(len(words) - n + 1)))
    return out


def chrf_from_stats(stats, beta=2, eps_smoothing=False):
    eps = 1e-16
    b2 = beta ** 2
    orders = len(stats) // 3
    f_sum = 0.0
    p_sum = r_sum = 0.0
    eff = 0
    for k in range(orders):
        nh, nr, nm = stats[3 * k:3 * k + 3]
        p = nm / nh if nh > 0 else eps
        r = nm / nr if nr > 0 else eps
        d = b2 * p + r
        f_sum += (1 + b2) * p * r / d if d > 0 else eps
        if nh > 0 and nr > 0:
            p_sum += p
            r_sum += r
            eff += 1
    if eps_smoothing:
        return 100.0 * f_sum / orders
    if eff == 0:
        return 0.0
    p_avg, r_avg = p_sum / eff, r_sum / eff
    if p_avg + r_avg == 0:
        return 0.0
    return 100.0 * (1 + b2) * p_avg * r_avg / (b2 * p_avg + r_avg)


def corpus_chrf(hyps, ref_streams, char_order=6, word_order=0, beta=2, lowercase=False,
                whitespace=False, eps_smoothing=False):
    def prep(s):
        return s.lower() if lowercase else s

    totals = [0] * (3 * (char_order + word_order))
    for i, hyp in enumerate(hyps):
        hgrams = _chrf_ngrams(prep(hyp), char_order, word_order, whitespace)
        best, best_f = None, -1.0
        for ref in _reference_lines(ref_streams, i):
            rgrams = _chrf_ngrams(prep(ref), char_order, word_order, whitespace)
            stats = []
            for h, r in zip(hgrams, rgrams):
                match = sum(min(c, r[g]) for g, c in h.items() if g in r)
                stats += [sum(h.values()) if r else 0, sum(r.values()), match]
            f = chrf_from_stats(stats, beta, eps_smoothing)
            if f > best_f:
                best, best_f = stats, f
        totals = [a + b for a, b in zip(totals, best)]
    return dict(score=chrf_from_stats(totals, beta, eps_smoothing), stats=totals)
