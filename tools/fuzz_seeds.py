#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora, tests/fuzz/corpus/<target>/ (issue 19).

Every seed is synthetic and made here from the formats' specifications (safetensors, GNU .mo,
Hugging Face's tokenizer.json / config.json keys, GPT-2's encoder.json + vocab.bpe) or from the
project's own configs/; no third-party file is copied. Deterministic: running it again rewrites
the same bytes. Usage: /usr/bin/python3 tools/fuzz_seeds.py [OUT_DIR=tests/fuzz/corpus]
"""
import json
import os
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli, reflected 0x82F63B78), bit by bit: the checksum qkv records."""
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    return c ^ 0xFFFFFFFF


def safetensors(tensors, metadata=None, checksums=False):
    """tensors: [(name, dtype, shape, raw bytes)] -> the file (spec: u64 LE length, JSON, data)."""
    header, buf = {}, b""
    meta = dict(metadata or {})
    for name, dtype, shape, raw in sorted(tensors):
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(buf), len(buf) + len(raw)]}
        if checksums:
            meta["qkv.crc32c." + name] = "%08x" % crc32c(raw)
        buf += raw
    if meta:
        header["__metadata__"] = meta
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - (8 + len(h)) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + buf


def f32(*v):
    return struct.pack("<%df" % len(v), *v)


def f64(*v):
    return struct.pack("<%dd" % len(v), *v)


def i64(*v):
    return struct.pack("<%dq" % len(v), *v)


def mo(messages, big_endian=False):
    """A GNU .mo catalog (gettext manual, 'The Format of GNU MO Files'), no hash table."""
    e = ">" if big_endian else "<"
    keys = sorted(messages)
    n = len(keys)
    orig_tab, trans_tab = 28, 28 + 8 * n
    pos = 28 + 16 * n
    origs, trans, strings = [], [], b""
    for k in keys:
        o = k.encode()
        origs.append((len(o), pos + len(strings)))
        strings += o + b"\0"
    for k in keys:
        t = messages[k].encode()
        trans.append((len(t), pos + len(strings)))
        strings += t + b"\0"
    out = struct.pack(e + "7I", 0x950412DE, 0, n, orig_tab, trans_tab, 0, 0)
    for length, off in origs + trans:
        out += struct.pack(e + "2I", length, off)
    return out + strings


def bytes_to_unicode():
    """GPT-2's byte -> printable character table (openai/gpt-2 encoder.py)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def gpt2_pair():
    table = bytes_to_unicode()
    vocab = [table[b] for b in range(256)]
    merges = [("H", "e"), ("l", "l"), ("He", "ll"), ("Hell", "o"), ("Ġ", "w"), ("o", "r"), ("Ġw", "or"), ("l", "d"),
              ("Ġwor", "ld")]
    for a, b in merges:
        vocab.append(a + b)
    vocab.append("<|endoftext|>")
    encoder = json.dumps({t: i for i, t in enumerate(vocab)}, ensure_ascii=False)
    bpe = "#version: 0.2\n" + "".join("%s %s\n" % m for m in merges)
    return (encoder + "\n#qkv-fuzz-split#\n" + bpe).encode()


def tokenizer_jsons():
    """Small tokenizer.json files in Hugging Face's layout (the models qkv reads)."""
    specials = [{"id": 0, "content": "[PAD]", "single_word": False, "lstrip": False, "rstrip": False,
                 "normalized": False, "special": True},
                {"id": 1, "content": "[UNK]", "single_word": False, "lstrip": False, "rstrip": False,
                 "normalized": False, "special": True}]
    wordpiece = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": specials,
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                       "strip_accents": None, "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"}, "post_processor": None,
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100,
                  "vocab": {"[PAD]": 0, "[UNK]": 1, "hello": 2, "world": 3, "##s": 4, ",": 5, "!": 6}}}
    bpe = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [dict(specials[1], id=0, content="<unk>")],
        "normalizer": None, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": None, "decoder": None,
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": "</w>", "fuse_unk": False,
                  "vocab": {"<unk>": 0, "h": 1, "e": 2, "l": 3, "o</w>": 4, "he": 5, "ll": 6, "hell": 7,
                            "hello</w>": 8},
                  "merges": ["h e", "l l", "he ll", "hell o</w>"]}}
    table = bytes_to_unicode()
    vocab = {table[b]: b for b in range(256)}
    vocab.update({"Ġw": 256, "or": 257, "<|endoftext|>": 258})
    bytebpe = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [dict(specials[1], id=258, content="<|endoftext|>")],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "vocab": vocab, "merges": ["Ġ w", "o r"]}}
    return {"wordpiece.json": wordpiece, "bpe.json": bpe, "bytebpe.json": bytebpe}


def training_state(data_extra=None):
    """What Trainer::training_state() holds for tests/fuzz/training_state.cpp's trainer: Adam over
    w (3) and b (1) after one step, and BatchOrder's position (4 batches, seed 7, plan 99)."""
    t = [("optim.param.0.step", "I64", [], i64(1)), ("optim.param.0.exp_avg", "F32", [3], f32(0.1, -0.1, 0.05)),
         ("optim.param.0.exp_avg_sq", "F32", [3], f32(1e-3, 1e-3, 2e-4)),
         ("optim.param.1.step", "I64", [], i64(1)), ("optim.param.1.exp_avg", "F32", [1], f32(0.1)),
         ("optim.param.1.exp_avg_sq", "F32", [1], f32(1e-3)),
         ("optim.group.0.lr", "F64", [], f64(1e-3)), ("optim.group.0.weight_decay", "F64", [], f64(0.0)),
         ("optim.lr", "F64", [], f64(1e-3)),
         ("step", "I64", [], i64(1)), ("best_step", "I64", [], i64(0)), ("bad_validations", "I64", [], i64(0)),
         ("best_bleu", "F64", [], f64(-1.0)), ("rng.seed", "I64", [], i64(5)), ("rng.offset", "I64", [], i64(12)),
         ("data.epoch", "I64", [], i64(0)), ("data.index", "I64", [], i64(1)), ("data.seed", "I64", [], i64(7)),
         ("data.batches", "I64", [], i64(4)), ("data.plan", "I64", [], i64(99))]
    return t


def config_file(name):
    with open(os.path.join(ROOT, "configs", name), "rb") as f:
        return f.read()


def seeds():
    s = {}
    s["safetensors"] = {
        "qkv_checksummed.safetensors": safetensors(
            [("encoder.weight", "F32", [2, 3], f32(1, -2, 3.5, 0, 1e-3, -7)), ("step", "I64", [1], i64(42))],
            {"format": "pt"}, checksums=True),
        "plain_f64_bool.safetensors": safetensors(
            [("x", "F64", [2], f64(0.25, -1)), ("mask", "BOOL", [3], b"\x01\x00\x01"), ("ids", "I32", [1], b"\x07\0\0\0")]),
        "empty.safetensors": safetensors([]),
        "zero_sized.safetensors": safetensors([("e", "F32", [0, 4], b""), ("u", "U8", [2], b"\xff\x00")],
                                             checksums=True),
    }
    s["mo"] = {
        "de.mo": mo({"": "Content-Type: text/plain; charset=UTF-8\n", "Hello": "Hallo", "Open file": "Datei öffnen",
                     "%d file\x00%d files": "%d Datei\x00%d Dateien"}),
        "big_endian.mo": mo({"": "Content-Type: text/plain; charset=UTF-8\n", "Save": "Speichern"}, big_endian=True),
    }
    s["tokenizer_json"] = {k: json.dumps(v, indent=1, ensure_ascii=False).encode() for k, v in tokenizer_jsons().items()}
    s["vocab_txt"] = {
        "bert_vocab.txt": "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "un", "##aff",
                                     "##able", ",", "!", "caf", "##e", "1", "##23"]).encode() + b"\n",
        "crlf_vocab.txt": b"[PAD]\r\n[UNK]\r\n[CLS]\r\n[SEP]\r\n[MASK]\r\nhello\r\n",
    }
    s["gpt2_bpe"] = {"gpt2_small.bin": gpt2_pair(),
                     "no_merges.bin": gpt2_pair().split(b"#qkv-fuzz-split#")[0] + b"#qkv-fuzz-split#\n#version: 0.2\n"}
    s["tsv"] = {
        "pairs.tsv": b"alpha beta\tbeta alpha\ngamma delta eps\teps delta gamma\n",
        "labelled.tsv": b"pos\ta great film\nneg\tdull and long\npos\tfine\n",
        "conll.txt": b"The\tDT\ncat\tNN\n\nsat\tVBD\n.\t.\n",
    }
    model_dir = lambda kind, model: json.dumps({"model_type": kind, "model": model,
                                                "tokenizer": {"shared": True}}, indent=1).encode()
    s["config_transformer"] = {"model_dir.json": model_dir("transformer", {
                                   "src_vocab": 60, "tgt_vocab": 60, "d_model": 16, "heads": 2, "enc_layers": 1,
                                   "dec_layers": 1, "d_ff": 32, "max_len": 32, "positional": "relative",
                                   "relative_clip": 4, "shared_embeddings": True, "tie_output": True}),
                               "transformer-en-de.json": config_file("transformer-en-de.json"),
                               "transformer-en-de-rope.json": config_file("transformer-en-de-rope.json")}
    s["config_rnn"] = {"model_dir.json": model_dir("rnn", {
                           "src_vocab": 60, "tgt_vocab": 60, "cell": "lstm", "embed_dim": 8, "enc_hidden": 8,
                           "dec_hidden": 16, "bidirectional": True, "attention": "luong", "score": "general",
                           "bridge": "linear"}),
                       "rnn-bahdanau-en-de.json": config_file("rnn-bahdanau-en-de.json"),
                       "rnn-luong-en-de.json": config_file("rnn-luong-en-de.json")}
    s["config_gpt"] = {
        "gpt2.json": json.dumps({"model_type": "gpt2", "vocab_size": 50257, "n_positions": 1024, "n_ctx": 1024,
                                 "n_embd": 768, "n_layer": 12, "n_head": 12, "n_inner": None,
                                 "activation_function": "gelu_new", "resid_pdrop": 0.1, "embd_pdrop": 0.1,
                                 "attn_pdrop": 0.1, "layer_norm_epsilon": 1e-5}).encode(),
        "gpt1_small.json": json.dumps({"model_type": "gpt2", "vocab_size": 40, "n_positions": 16, "n_embd": 8,
                                       "n_layer": 1, "n_head": 2, "n_inner": 32, "activation_function": "gelu",
                                       "pre_norm": False}).encode(),
    }
    s["config_bert"] = {
        "bert_base.json": json.dumps({"model_type": "bert", "vocab_size": 30522, "hidden_size": 768,
                                      "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
                                      "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
                                      "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 512,
                                      "type_vocab_size": 2, "layer_norm_eps": 1e-12, "pad_token_id": 0,
                                      "position_embedding_type": "absolute"}).encode(),
        "bert_tiny.json": json.dumps({"vocab_size": 50, "hidden_size": 8, "num_hidden_layers": 1,
                                      "num_attention_heads": 2, "intermediate_size": 16}).encode(),
    }
    no_override = struct.pack("<qd", -1, -1.0)
    s["config_overrides"] = {
        "transformer_steps.bin": struct.pack("<qd", 100, 2.5) + config_file("transformer-en-de.json"),
        "gpt_no_override.bin": no_override + config_file("gpt-lm-en.json"),
        "bert_cls.bin": struct.pack("<qd", 5, -1.0) + config_file("bert-cls-sentiment.json"),
    }
    s["training_state"] = {
        "checksummed.safetensors": safetensors(training_state(), {"format": "qkv-training-state-1"}, checksums=True),
        "plain.safetensors": safetensors(training_state(), {"format": "qkv-training-state-1"}),
    }
    s["serve_request"] = serve_requests()
    s["head_config"] = head_configs()
    return s


def head_configs():
    """tests/fuzz/head_config.cpp's inputs: a byte choosing the directory (0 BERT sequence
    classifier, 1 token classifier, 2 span (QA) model, 3 GPT classifier), then config.json: Hugging
    Face's BertConfig / GPT2Config keys and PretrainedConfig's id2label / label2id, for the shapes of
    the target's small models (tests/common/tiny_models.h: a 19-token vocabulary, width 32, 2 layers,
    4 heads, 16 positions), and qkv's own "qkv_classifier" section (include/qkv/io/labels.h)."""
    bert = {"model_type": "bert", "vocab_size": 19, "hidden_size": 32, "num_hidden_layers": 2,
            "num_attention_heads": 4, "intermediate_size": 64, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
            "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 16, "type_vocab_size": 2,
            "layer_norm_eps": 1e-12, "pad_token_id": 0, "position_embedding_type": "absolute"}
    gpt = {"model_type": "gpt2", "vocab_size": 19, "n_positions": 16, "n_embd": 32, "n_layer": 2, "n_head": 4,
           "n_inner": None, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5}

    def labels(*names):
        return {"id2label": {str(i): n for i, n in enumerate(names)}, "label2id": {n: i for i, n in enumerate(names)}}

    def seed(kind, cfg):
        return bytes([kind]) + json.dumps(cfg, indent=2).encode()

    return {
        "sequence.bin": seed(0, {**bert, "architectures": ["BertForSequenceClassification"], **labels("neg", "pos"),
                                 "num_labels": 2, "classifier_dropout": None,
                                 "qkv_classifier": {"pairs": True, "max_len": 16, "pooling": "pooler"}}),
        "sequence_mean_pooling.bin": seed(0, {**bert, **labels("neg", "pos"),
                                              "qkv_classifier": {"pairs": True, "pooling": "mean"}}),
        "sequence_num_labels_disagree.bin": seed(0, {**bert, **labels("neg", "pos"), "num_labels": 3}),
        "token.bin": seed(1, {**bert, "architectures": ["BertForTokenClassification"],
                              **labels("O", "B-PKG", "I-PKG")}),
        "token_id2label_gap.bin": seed(1, {**bert, "id2label": {"0": "O", "2": "B-PKG", "3": "I-PKG"}}),
        "span.bin": seed(2, {**bert, "architectures": ["BertForQuestionAnswering"]}),
        "gpt.bin": seed(3, {**gpt, "architectures": ["GPT2ForSequenceClassification"], **labels("a", "b", "c"),
                            "qkv_classifier": {"pairs": False, "max_len": 0}}),
        "gpt_pairs.bin": seed(3, {**gpt, **labels("a", "b", "c"), "qkv_classifier": {"pairs": True, "max_len": 12}}),
    }


def serve_requests():
    """tests/fuzz/serve_request.cpp's inputs: a byte choosing the endpoint (its order of kPaths),
    then the JSON body, as docs/serve.md documents each endpoint's fields. The served models are
    "mt", "gpt", "bert", "cls", "pair", "tag" and "qa" (word vocabularies of tests/common/tiny_models.h)."""
    paths = ["translate", "completions", "embeddings", "classify", "tokenize", "detokenize", "score", "tag", "answer"]
    bodies = {
        "translate_one.bin": ("translate", {"model": "mt", "text": "cannot open the file"}),
        "translate_beam.bin": ("translate", {"model": "mt", "texts": ["save the file", "read error"], "beam": 2,
                                             "alpha": 0.6, "max_length": 8, "no_repeat_ngram_size": 2,
                                             "n_best": 2}),
        "completions.bin": ("completions", {"model": "gpt", "prompt": "print the", "max_tokens": 5,
                                            "temperature": 0.7, "top_p": 0.9, "top_k": 5, "seed": 3,
                                            "stop": ["name"], "repetition_penalty": 1.2,
                                            "presence_penalty": 0.5, "frequency_penalty": -0.3,
                                            "no_repeat_ngram_size": 2, "min_tokens": 2,
                                            "logit_bias": {"3": 2.5, "7": -100}}),
        "completions_logprobs.bin": ("completions", {"model": "gpt", "prompt": ["print the", "user"], "max_tokens": 3,
                                                     "temperature": 0, "logprobs": 2, "echo": True}),
        "completions_stream.bin": ("completions", {"model": "gpt", "prompt": ["user", "file not"], "max_tokens": 3,
                                                   "stream": True}),
        "completions_n.bin": ("completions", {"model": "gpt", "prompt": ["user", "file"], "max_tokens": 3, "n": 3,
                                              "temperature": 0.8, "seed": 4}),
        "completions_beam.bin": ("completions", {"model": "gpt", "prompt": ["user", "file not"], "max_tokens": 4,
                                                 "use_beam_search": True, "best_of": 3, "n": 2,
                                                 "length_penalty": 0.5, "early_stopping": "never", "logprobs": 1,
                                                 "echo": True}),
        "completions_best_of.bin": ("completions", {"model": "gpt", "prompt": ["user", "file not"], "max_tokens": 3,
                                                    "n": 2, "best_of": 3, "temperature": 0.9, "seed": 5,
                                                    "logprobs": 1}),
        "completions_stream_logprobs.bin": ("completions", {"model": "gpt", "prompt": ["user", "file not"],
                                                            "max_tokens": 4, "stream": True, "logprobs": 1,
                                                            "echo": True, "stop": "file name", "temperature": 0}),
        "embeddings.bin": ("embeddings", {"model": "bert", "input": ["read write", "user name"], "pooling": "mean",
                                          "normalize": True}),
        "classify_texts.bin": ("classify", {"model": "cls", "texts": ["file not found", "save"]}),
        "classify_pair.bin": ("classify", {"model": "pair", "text": "cannot open", "text_pair": "the file"}),
        "tokenize.bin": ("tokenize", {"model": "mt", "text": "open the directory", "target": True,
                                      "add_special_tokens": True}),
        "score.bin": ("score", {"model": "mt", "sources": ["save the file", "read error"],
                                "targets": ["save", "error read"], "token_logprobs": True}),
        "score_truncate.bin": ("score", {"model": "mt", "source": "user name " * 10, "target": "name",
                                         "truncate": True}),
        "tag.bin": ("tag", {"model": "tag", "texts": ["cannot open the file", "user name"], "probabilities": True}),
        "answer.bin": ("answer", {"model": "qa", "questions": ["what cannot open"],
                                  "contexts": ["the user cannot open"], "n_best": 2}),
        "detokenize.bin": ("detokenize", {"model": "bert", "tokens": [2, 7, 8, 3], "skip_special_tokens": False}),
    }
    out = {name: bytes([paths.index(ep)]) + json.dumps(body).encode() for name, (ep, body) in bodies.items()}
    out["completions_truncated.bin"] = bytes([1]) + b'{"model": "gpt", "prompt": "us'
    out["translate_beam_too_wide.bin"] = bytes([0]) + json.dumps({"model": "mt", "text": "a", "beam": 99}).encode()
    return out


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "fuzz", "corpus")
    for target, files in seeds().items():
        d = os.path.join(out, target)
        os.makedirs(d, exist_ok=True)
        for name, data in files.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
    print("fuzz seeds: %d targets, %d files in %s" % (len(seeds()), sum(len(v) for v in seeds().values()), out))


if __name__ == "__main__":
    main()
