// `qkv train-tokenizer`: learn a BPE / byte-level BPE / char / word vocabulary, save tokenizer.json.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"
#include "qkv/text/bpe_train.h"
#include "qkv/text/char_word.h"
#include "qkv/util/error.h"
#include "qkv/util/utf8.h"

namespace {

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ','))
    if (!x.empty()) out.push_back(x);
  return out;
}

int run_tokenizer_train(int argc, char** argv) {
  using namespace qkv::text;
  CLI::App app{"Train a tokenizer on text files and save it as a Hugging Face tokenizer.json",
               "qkv train-tokenizer"};
  std::string kind = "bpe", out, specials_opt, unk, templ = "none";
  std::vector<std::string> inputs;
  int vocab_size = 8000;
  int64_t min_freq = -1;
  app.add_option("--kind", kind, "bpe (word-level, </w>) | bytebpe (GPT-2 style) | char | word")
      ->check(CLI::IsMember({"bpe", "bytebpe", "char", "word"}));
  app.add_option("--vocab-size", vocab_size, "target vocabulary size (char/word: maximum)")
      ->check(CLI::Range(1, 1 << 24));
  app.add_option("--min-frequency", min_freq, "bpe: minimum pair count (default 2); char/word: "
                 "minimum token count (default 1)")
      ->check(qkv::cli::positive());
  app.add_option("--input,-i", inputs, "training text files")->required()->expected(1, -1);
  app.add_option("--out,-o", out, "output tokenizer.json")->required();
  app.add_option("--special-tokens", specials_opt, "comma-separated special tokens (default "
                 "<pad>,<unk>,<s>,</s>; bytebpe: <|endoftext|>)");
  app.add_option("--unk", unk, "unknown token (bpe/char/word; default <unk> or [UNK] if listed)");
  app.add_option("--template", templ, "add-special-tokens template")
      ->check(CLI::IsMember({"none", "bert", "roberta", "bos-eos", "gpt-finetune"}));
  QKV_PARSE(app, argc, argv);
  std::vector<std::string> specials = specials_opt.empty()
      ? (kind == "bytebpe" ? std::vector<std::string>{"<|endoftext|>"}
                           : std::vector<std::string>{"<pad>", "<unk>", "<s>", "</s>"})
      : split_commas(specials_opt);
  for (size_t i = 0; i < specials.size(); ++i)  // (json output would fail on it, after the training)
    QKV_CHECK(qkv::utf8::is_valid(specials[i]), "qkv train-tokenizer", "--special-tokens: token ", i + 1,
              " is not valid UTF-8");
  QKV_CHECK(qkv::utf8::is_valid(unk), "qkv train-tokenizer", "--unk is not valid UTF-8");
  if (unk.empty())
    for (auto& s : specials)
      if (s == "<unk>" || s == "[UNK]") unk = s;
  auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<Tokenizer> tok;
  if (kind == "bpe" || kind == "bytebpe") {
    BpeTrainOptions o;
    o.vocab_size = vocab_size;
    o.byte_level = kind == "bytebpe";
    if (min_freq >= 0) o.min_frequency = min_freq;
    o.special_tokens = specials;
    o.unk_token = o.byte_level ? "" : unk;
    QKV_CHECK(o.byte_level || !unk.empty(), "train-tokenizer", "--kind bpe needs an unknown token "
              "among the special tokens (or --unk)");
    tok = train_bpe(inputs, o);
  } else {
    VocabBuildOptions o;
    o.max_size = vocab_size;
    if (min_freq >= 0) o.min_frequency = min_freq;
    o.special_tokens = specials;
    QKV_CHECK(!unk.empty(), "train-tokenizer", "--kind ", kind, " needs an unknown token among the "
              "special tokens (or --unk)");
    o.unk_token = unk;
    tok = VocabTokenizer::build(kind == "char" ? VocabTokenizer::Level::Char : VocabTokenizer::Level::Word,
                                inputs, o);
  }
  if (templ == "bert") tok->set_template(PostTemplate::bert());
  else if (templ == "roberta") tok->set_template(PostTemplate::roberta());
  else if (templ == "bos-eos") tok->set_template(PostTemplate::bos_eos());
  else if (templ == "gpt-finetune") tok->set_template(PostTemplate::gpt_finetune());
  tok->save(out);
  if (tok->vocab_size() > vocab_size)
    std::fprintf(stderr, "train-tokenizer: warning: the vocabulary has %d entries, more than --vocab-size %d: the "
                 "special tokens and the symbols of the text come first\n", tok->vocab_size(), vocab_size);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "train-tokenizer: %s, vocabulary %d, %.2f s -> %s\n", kind.c_str(),
               tok->vocab_size(), secs, out.c_str());
  return 0;
}

qkv::cli::Register register_tokenizer_train("train-tokenizer",
                                            "learn a BPE/byte-BPE/char/word tokenizer -> tokenizer.json",
                                            run_tokenizer_train);

}  // namespace
