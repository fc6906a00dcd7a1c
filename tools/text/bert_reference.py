#!/usr/bin/python3
"""Independent reference of BERT's tokenizer (google-research/bert tokenization.py, the published
algorithm: BasicTokenizer + WordpieceTokenizer), pure python3, no pip packages.

usage: bert_reference.py VOCAB_TXT IN OUT [--cased]
IN is split into lines at b'\\n'; each line is decoded as UTF-8 with errors="ignore" (BERT's
convert_to_unicode) and OUT gets its ids, space-separated, one line per input line.
Like Hugging Face, the special tokens [PAD] [UNK] [CLS] [SEP] [MASK] in the text are split out
first (leftmost occurrence, longest on a tie) and map to their own ids.
"""
import sys
import unicodedata

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def is_whitespace(ch):
    return ch in (" ", "\t", "\n", "\r") or unicodedata.category(ch) == "Zs"


def is_control(ch):
    if ch in ("\t", "\n", "\r"):
        return False
    return unicodedata.category(ch).startswith("C")


def is_punctuation(ch):
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def is_chinese_char(cp):
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF or
            0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF or
            0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def basic_tokenize(text, lower):
    cleaned = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD or is_control(ch):
            continue
        cleaned.append(" " if is_whitespace(ch) else ch)
    spaced = []
    for ch in cleaned:
        if is_chinese_char(ord(ch)):
            spaced += [" ", ch, " "]
        else:
            spaced.append(ch)
    out = []
    for tok in "".join(spaced).split():
        if lower:
            tok = tok.lower()
            tok = "".join(c for c in unicodedata.normalize("NFD", tok) if unicodedata.category(c) != "Mn")
        cur = []
        for ch in tok:
            if is_punctuation(ch):
                if cur:
                    out.append("".join(cur))
                    cur = []
                out.append(ch)
            else:
                cur.append(ch)
        if cur:
            out.append("".join(cur))
    return " ".join(out).split()


def wordpiece(tok, vocab, unk, max_chars=100):
    if len(tok) > max_chars:
        return [unk]
    pieces, start = [], 0
    while start < len(tok):
        end, cur = len(tok), None
        while start < end:
            sub = tok[start:end]
            if start > 0:
                sub = "##" + sub
            if sub in vocab:
                cur = sub
                break
            end -= 1
        if cur is None:
            return [unk]
        pieces.append(cur)
        start = end
    return pieces


def encode(text, vocab, lower):
    ids = []
    while text:
        best, best_tok = len(text), None
        for s in sorted(SPECIALS, key=len, reverse=True):
            p = text.find(s)
            if p != -1 and p < best:
                best, best_tok = p, s
        seg = text[:best]
        for w in basic_tokenize(seg, lower):
            ids += [vocab[p] for p in wordpiece(w, vocab, "[UNK]")]
        if best_tok is None:
            break
        ids.append(vocab[best_tok])
        text = text[best + len(best_tok):]
    return ids


def main():
    vocab_path, in_path, out_path = sys.argv[1:4]
    lower = "--cased" not in sys.argv[4:]
    vocab = {}
    with open(vocab_path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            vocab[line.rstrip("\n")] = i
    data = open(in_path, "rb").read()
    out = []
    for raw in data.split(b"\n")[: -1 if data.endswith(b"\n") else None]:
        out.append(" ".join(map(str, encode(raw.decode("utf-8", "ignore"), vocab, lower))))
    open(out_path, "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
