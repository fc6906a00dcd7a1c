// tests/common/tiny_models.h - small random models with a word tokenizer, built in memory in a
// few milliseconds: a translation Transformer, a GPT, a BERT encoder and a BERT classifier. For
// tests of what runs a model (the attention viewer, the server), not of what a model computes.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "qkv/io/bert.h"
#include "qkv/io/bert_cls.h"
#include "qkv/io/bert_qa.h"
#include "qkv/io/bert_tagger.h"
#include "qkv/io/gpt2.h"
#include "qkv/io/model_dir.h"
#include "qkv/tensor/rng.h"
#include "qkv/text/char_word.h"

namespace qkv_test {

inline const char* kTinyWords = "cannot open the file directory not found save print error read write user name";

// The specials, then the words of kTinyWords.
inline std::shared_ptr<qkv::text::VocabTokenizer> word_tokenizer(std::vector<std::string> specials) {
  std::vector<std::string> vocab = std::move(specials);
  std::string w;
  for (const char* p = kTinyWords;; ++p) {
    if (*p == ' ' || *p == 0) {
      vocab.push_back(w), w.clear();
      if (!*p) break;
    } else {
      w += *p;
    }
  }
  return std::make_shared<qkv::text::VocabTokenizer>(qkv::text::VocabTokenizer::Level::Word, vocab, "<unk>");
}

// A small random Transformer (2 + 2 layers, 4 heads, sinusoidal positions) with a word tokenizer.
inline qkv::io::Seq2SeqBundle tiny_translation_model(uint64_t seed, int64_t max_len = 16,
                                                    const std::string& positional = "sinusoidal") {
  using namespace qkv;
  io::Seq2SeqBundle b;
  b.src_tok = b.tgt_tok = word_tokenizer({"<pad>", "<unk>", "<s>", "</s>"});
  const int64_t V = b.src_tok->vocab_size();
  b.config = {{"model_type", "transformer"},
              {"model", {{"src_vocab", V}, {"tgt_vocab", V}, {"d_model", 32}, {"heads", 4}, {"enc_layers", 2},
                         {"dec_layers", 2}, {"d_ff", 64}, {"max_len", max_len}, {"pad_id", 0}, {"bos_id", 2},
                         {"eos_id", 3}, {"shared_embeddings", true}, {"positional", positional}}}};
  default_generator().manual_seed(seed);
  b.model = io::make_seq2seq(b.config, "test config");
  b.model->eval();
  return b;
}

// A small random GPT (2 layers, 4 heads, n_positions positions).
inline qkv::io::GptBundle tiny_gpt(int64_t n_positions = 12, uint64_t seed = 5) {
  using namespace qkv;
  io::GptBundle b;
  b.tokenizer = word_tokenizer({"<|endoftext|>", "<unk>"});
  b.config.vocab_size = b.tokenizer->vocab_size();
  b.config.n_positions = n_positions, b.config.n_embd = 32, b.config.n_layer = 2, b.config.n_head = 4;
  default_generator().manual_seed(seed);
  b.model = std::make_shared<models::Gpt>(b.config);
  return b;
}

// A small random BERT (2 layers, 4 heads, 16 positions) with [CLS] and [SEP].
inline qkv::io::BertBundle tiny_bert(uint64_t seed = 6) {
  using namespace qkv;
  models::BertConfig cfg;
  auto tok = word_tokenizer({"[PAD]", "<unk>", "[CLS]", "[SEP]", "[MASK]"});
  tok->set_special(text::Role::Cls, "[CLS]");
  tok->set_special(text::Role::Sep, "[SEP]");
  cfg.vocab_size = tok->vocab_size();
  cfg.hidden_size = 32, cfg.num_hidden_layers = 2, cfg.num_attention_heads = 4, cfg.intermediate_size = 64;
  cfg.max_position_embeddings = 16;
  default_generator().manual_seed(seed);
  io::BertBundle b = io::make_bert(cfg);
  b.tokenizer = tok;
  return b;
}

// tiny_bert's encoder with a random classifier head over `labels` (single texts or pairs).
inline qkv::io::BertClassifierBundle tiny_bert_classifier(std::vector<std::string> labels, bool pairs,
                                                          uint64_t seed = 7) {
  using namespace qkv;
  io::BertBundle enc = tiny_bert(seed);
  io::BertClassifierSpec spec;
  spec.labels = std::move(labels);
  spec.pairs = pairs;
  default_generator().manual_seed(seed);
  return io::make_bert_classifier(enc.config, spec, enc.tokenizer);
}

// tiny_bert's encoder with a random token-classification head over `labels`; its tokenizer has
// [PAD].
inline qkv::io::BertTaggerBundle tiny_bert_tagger(std::vector<std::string> labels, uint64_t seed = 8) {
  using namespace qkv;
  io::BertBundle enc = tiny_bert(seed);
  enc.tokenizer->set_special(text::Role::Pad, "[PAD]");
  default_generator().manual_seed(seed);
  io::BertTaggerBundle b = io::make_bert_tagger(enc.config, std::move(labels));
  b.tokenizer = enc.tokenizer;
  return b;
}

// tiny_bert's encoder with a random span head (start and end logits); its tokenizer has [PAD].
inline qkv::io::BertQaBundle tiny_bert_qa(uint64_t seed = 9) {
  using namespace qkv;
  io::BertBundle enc = tiny_bert(seed);
  enc.tokenizer->set_special(text::Role::Pad, "[PAD]");
  default_generator().manual_seed(seed);
  io::BertQaBundle b = io::make_bert_qa(enc.config);
  b.tokenizer = enc.tokenizer;
  return b;
}

// The seven small models `qkv serve` is tested with, written under root (tests/serve's fixture and
// the serve_request fuzz target): translation (max_len 16), gpt (32 positions), bert (an encoder),
// cls (a BERT classifier of single texts, labels neg/pos), pair (a BERT classifier of pairs), tag
// (a BERT tagger, labels O/B-X/I-X), qa (a BERT span model).
struct TinyModelDirs {
  std::string root, translation, gpt, bert, cls, pair, tag, qa;
};
inline TinyModelDirs write_tiny_model_dirs(const std::string& root) {
  TinyModelDirs d;
  d.root = root;
  d.translation = root + "/translation", d.gpt = root + "/gpt", d.bert = root + "/bert";
  d.cls = root + "/cls", d.pair = root + "/pair", d.tag = root + "/tag", d.qa = root + "/qa";
  qkv::io::save_seq2seq(d.translation, tiny_translation_model(31, 16));
  qkv::io::save_gpt2(d.gpt, tiny_gpt(32, 32));
  qkv::io::save_bert(d.bert, tiny_bert(33));
  qkv::io::save_bert_classifier(d.cls, tiny_bert_classifier({"neg", "pos"}, false, 34));
  qkv::io::save_bert_classifier(d.pair, tiny_bert_classifier({"same", "different", "unrelated"}, true, 35));
  qkv::io::save_bert_tagger(d.tag, tiny_bert_tagger({"O", "B-X", "I-X"}, 36));
  qkv::io::save_bert_qa(d.qa, tiny_bert_qa(37));
  return d;
}

}  // namespace qkv_test
