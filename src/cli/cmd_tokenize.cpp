// `qkv tokenize`: text lines on stdin -> token ids (or back with --decode).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <string>

#include "cli.h"
#include "qkv/text/tokenizer.h"
#include "qkv/util/error.h"
#include "qkv/util/error_context.h"
#include "qkv/util/utf8.h"

namespace {

int run_tokenize(int argc, char** argv) {
  CLI::App app{"Tokenize lines from stdin: one line of space-separated ids per input line",
               "qkv tokenize"};
  std::string path;
  bool decode = false, keep_special = false, add_special = false, pair = false, tokens = false;
  app.add_option("--tokenizer,-t", path, "tokenizer.json, vocab.txt, or a directory with "
                 "tokenizer.json or encoder.json + vocab.bpe")->required();
  app.add_flag("--decode,-d", decode, "read space-separated ids, print text");
  app.add_flag("--keep-special", keep_special, "with --decode: print special tokens too");
  app.add_flag("--add-special-tokens", add_special, "apply the tokenizer's template ([CLS] ... [SEP])");
  app.add_flag("--pair", pair, "each line is 'A<TAB>B'; prints ids, then a tab and the segment ids");
  app.add_flag("--tokens", tokens, "print token strings instead of ids");
  QKV_PARSE(app, argc, argv);
  auto tok = qkv::text::load_tokenizer(path);
  std::string line, out;
  size_t line_no = 0;
  while (std::getline(std::cin, line)) {
    ++line_no;
    out.clear();
    if (decode) {
      std::vector<int32_t> ids;
      size_t i = 0;
      while (i < line.size()) {
        while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
        if (i == line.size()) break;
        size_t j = i;
        while (j < line.size() && line[j] >= '0' && line[j] <= '9') ++j;
        QKV_CHECK(j > i && (j == line.size() || line[j] == ' ' || line[j] == '\t' || line[j] == '\r') && j - i < 10,
                  "tokenize --decode", "stdin line ", line_no, ": expected space-separated ids, got '",
                  line.substr(i, line.find(' ', i) - i), "'");
        ids.push_back(int32_t(std::stol(line.substr(i, j - i))));
        i = j;
      }
      out = qkv::with_context("tokenize --decode: stdin line " + std::to_string(line_no),
                              [&] { return tok->decode(ids, !keep_special); });  // an id past the vocabulary
    } else {
      QKV_CHECK(qkv::utf8::is_valid(line), "tokenize", "stdin line ", line_no, ": not valid UTF-8");
      qkv::text::Encoding e;
      if (pair) {
        size_t tab = line.find('\t');
        QKV_CHECK(tab != std::string::npos, "tokenize --pair", "stdin line ", line_no,
                  ": expected 'A<TAB>B', found no tab");
        e = tok->encode_pair(std::string_view(line).substr(0, tab), std::string_view(line).substr(tab + 1), add_special);
      } else {
        e = tok->encode_single(line, add_special);
      }
      for (size_t k = 0; k < e.ids.size(); ++k) {
        if (k) out += ' ';
        out += tokens ? tok->id_to_token(e.ids[k]) : std::to_string(e.ids[k]);
      }
      if (pair) {
        out += '\t';
        for (size_t k = 0; k < e.type_ids.size(); ++k) out += (k ? " " : "") + std::to_string(e.type_ids[k]);
      }
    }
    out += '\n';
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
  return 0;
}

qkv::cli::Register register_tokenize("tokenize", "text lines on stdin -> token ids (or --decode ids -> text)",
                                     run_tokenize);

}  // namespace
