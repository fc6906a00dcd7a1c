#!/usr/bin/python3
"""Writes the tokenizer test text: real text found on this Debian machine plus seeded synthetic
stress lines. Nothing of it is committed; tests build it at run time.

usage: make_test_text.py OUT [--bytes N] [--seed S] [--valid-only] [--real-only]
(--real-only: only whole real files, cycling through them, e.g. a 50 MB training corpus.)

Sources, in a fixed order: /usr/share/common-licenses/*, /usr/share/doc/*/copyright,
/usr/include/*.h, /usr/lib/python3.11/*.py (each file's bytes as they are), interleaved in
chunks with synthetic lines: accented Latin, Greek (with final sigma), Cyrillic, Arabic,
Devanagari, Hangul, CJK, emoji (incl. ZWJ sequences and astral planes), numbers in many scripts,
contractions, punctuation runs, runs of mixed white space (tab, NBSP, U+3000, U+2028, U+FEFF,
U+0085), control characters, and - unless --valid-only - invalid UTF-8 (stray continuation
bytes, truncated sequences, overlongs, surrogates, bytes F5..FF). Synthetic characters are drawn
only from code points assigned in Python's Unicode 14 database, outside plane 16 (the node
harness uses U+10FF00.. to carry invalid bytes).
"""
import argparse
import glob
import os
import random
import unicodedata

WORDS = ("the of and to in is was for that with as on by at from it an be are this which or "
         "have not has but were had they their one all can been would there who more will if "
         "about when other into some what only could these time two may then than first new").split()
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'x", "'", "''", "n't"]
PUNCT = list("!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~") + ["...", "--", "—", "–", "«", "»", "¿", "¡",
                                                      "“", "”", "‘", "’", "•", "·", "…", "※", "、", "。", "！"]
SPACES = [" ", "  ", "\t", "\u00a0", "\u3000", "\u2028", "\u2029", "\ufeff", "\u0085", "\u2009",
          "\u200b", "\r\n", "\u000b", "\u000c", "\u001c", "\u1680", "\u202f", "\u205f", "   \t "]
SCRIPTS = [(0x00C0, 0x024F), (0x0370, 0x03FF), (0x0400, 0x04FF), (0x0590, 0x05FF), (0x0600, 0x06FF),
           (0x0900, 0x097F), (0x0E00, 0x0E7F), (0x10A0, 0x10FF), (0x1E00, 0x1EFF), (0x3040, 0x30FF),
           (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0xF900, 0xFAFF),
           (0x1D400, 0x1D7FF), (0x0300, 0x036F), (0xFF00, 0xFFEF), (0x2150, 0x218F), (0x2460, 0x24FF)]
EMOJI = [(0x1F300, 0x1F5FF), (0x1F600, 0x1F64F), (0x1F900, 0x1F9FF), (0x2600, 0x26FF)]
NUMBERS = ["0", "42", "3.14159", "1,000,000", "2023-11-21", "0x7fff", "1e-9", "٣٤٥", "१२३",
           "Ⅻ", "½", "²³", "１２３", "𝟘𝟙", "一二三", "①②", "৪৫"]
INVALID = [b"\x80", b"\xbf", b"\xc0\xaf", b"\xc1\xbf", b"\xe0\x80\xaf", b"\xed\xa0\x80",
           b"\xf8\x88\x80\x80\x80", b"\xff", b"\xfe", b"\xf5\x80", b"\xe2\x82", b"\xf0\x9f\x98",
           b"\xc3", b"\xf4\x90\x80\x80", b"\xe2\x28\xa1", b"\xc3\x28", b"\xa0\xa1"]


def assigned(cp):
    return unicodedata.category(chr(cp)) not in ("Cn", "Cs") and not (0x100000 <= cp <= 0x10FFFF)


def rand_char(rng, ranges):
    while True:
        lo, hi = rng.choice(ranges)
        cp = rng.randint(lo, hi)
        if assigned(cp):
            return chr(cp)


def synthetic_line(rng, valid_only):
    parts = []
    for _ in range(rng.randint(3, 40)):
        r = rng.random()
        if r < 0.30:
            w = rng.choice(WORDS)
            parts.append(w.upper() if rng.random() < 0.1 else w.capitalize() if rng.random() < 0.2 else w)
        elif r < 0.40:
            parts.append(rng.choice(WORDS) + rng.choice(CONTRACTIONS))
        elif r < 0.55:
            parts.append("".join(rand_char(rng, SCRIPTS) for _ in range(rng.randint(1, 8))))
        elif r < 0.62:
            e = "".join(rand_char(rng, EMOJI) for _ in range(rng.randint(1, 3)))
            if rng.random() < 0.3:
                e += "\u200d" + rand_char(rng, EMOJI) + "\ufe0f"
            parts.append(e)
        elif r < 0.70:
            parts.append(rng.choice(NUMBERS))
        elif r < 0.80:
            parts.append("".join(rng.choice(PUNCT) for _ in range(rng.randint(1, 6))))
        elif r < 0.88:
            parts.append(rng.choice(SPACES) * rng.randint(1, 3))
        elif r < 0.92:
            parts.append(chr(rng.choice([0x01, 0x07, 0x1b, 0x7f, 0x9f, 0xad, 0x200d, 0xe000, 0x2066])))
        elif r < 0.95:
            parts.append("ΑΣ ΟΔΟΣ. ὈΔΥΣΣΕΎΣ' ΣΑ Σ" if rng.random() < 0.5 else "İstanbul ǅ ß ﬁ Å Ω K")
        else:
            parts.append("\0INVALID\0" if not valid_only else "x")
        parts.append(" " if rng.random() < 0.8 else "")
    line = "".join(parts).encode("utf-8")
    if not valid_only:
        while b"\0INVALID\0" in line:
            line = line.replace(b"\0INVALID\0", rng.choice(INVALID), 1)
    return line + b"\n"


def real_files():
    pats = ["/usr/share/common-licenses/*", "/usr/share/doc/*/copyright", "/usr/include/*.h",
            "/usr/lib/python3.11/*.py"]
    files = []
    for p in pats:
        files += sorted(f for f in glob.glob(p) if os.path.isfile(f) and not os.path.islink(f))
    return files


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--bytes", type=int, default=1 << 20)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--valid-only", action="store_true")
    ap.add_argument("--real-only", action="store_true")
    a = ap.parse_args()
    if a.real_only:
        files, out, n = real_files(), [], 0
        while n < a.bytes:
            for fn in files:
                with open(fn, "rb") as f:
                    data = f.read().decode("utf-8", "ignore").encode("utf-8")
                out.append(data)
                n += len(data)
                if n >= a.bytes:
                    break
        with open(a.out, "wb") as f:
            f.write(b"".join(out)[:a.bytes])
        return
    rng = random.Random(a.seed)
    files = real_files()
    rng.shuffle(files)
    out, n, fi = [], 0, 0
    while n < a.bytes:
        if fi < len(files) and rng.random() < 0.6:
            with open(files[fi], "rb") as f:
                data = f.read(40000)
            fi += 1
            if a.valid_only:
                data = data.decode("utf-8", "ignore").encode("utf-8")
            data = data.replace(b"<|endoftext|>", b"<|end|>")
            if data and not data.endswith(b"\n"):
                data += b"\n"
        else:
            data = b"".join(synthetic_line(rng, a.valid_only) for _ in range(50))
        out.append(data)
        n += len(data)
    with open(a.out, "wb") as f:
        f.write(b"".join(out))


if __name__ == "__main__":
    main()
