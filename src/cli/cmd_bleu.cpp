// `qkv bleu`: corpus BLEU (and chrF / chrF++) exactly as sacreBLEU 2.x with default settings.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "cli.h"
#include "qkv/eval/bleu.h"
#include "qkv/eval/chrf.h"
#include "qkv/util/error.h"
#include "qkv/util/file.h"

namespace {

// Lines of a text file (a final newline does not start another line; "\r\n" is accepted).
std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t a = 0;
  while (a < text.size()) {
    size_t b = text.find('\n', a);
    if (b == std::string::npos) b = text.size();
    std::string line = text.substr(a, b - a);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
    a = b + 1;
  }
  return lines;
}

int run(int argc, char** argv) {
  CLI::App app{"Corpus BLEU and chrF, identical to sacreBLEU 2.x defaults (see docs/metrics.md)",
               "qkv bleu"};
  std::string hyp_path, smooth = "exp", tokenize = "13a";
  std::vector<std::string> ref_paths;
  bool chrf = false, lowercase = false, json = false, score_only = false;
  int chrf_word_order = 0, width = 2;
  app.add_option("--hyp", hyp_path, "hypotheses, one per line (default: stdin)");
  app.add_option("--ref", ref_paths, "reference file, line-aligned (repeat for more references)")
      ->required();
  app.add_flag("--chrf", chrf, "also compute chrF2");
  app.add_option("--chrf-word-order", chrf_word_order, "word n-gram order for chrF (2 = chrF++)")
      ->check(CLI::Range(0, 6));
  app.add_flag("--lowercase,-l", lowercase, "case-insensitive scores");
  app.add_option("--tokenize", tokenize, "BLEU tokenizer")->check(CLI::IsMember({"13a", "none"}));
  app.add_option("--smooth", smooth, "BLEU smoothing (sacreBLEU default: exp)")
      ->check(CLI::IsMember({"exp", "none", "floor", "add-k"}));
  app.add_flag("--json", json, "print sacreBLEU-style JSON");
  app.add_flag("--score-only,-b", score_only, "print only the score(s)");
  app.add_option("--width,-w", width, "decimals")->check(CLI::Range(0, 10));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (chrf_word_order > 0) chrf = true;

  const std::string hyp_name = hyp_path.empty() ? std::string("stdin") : hyp_path;
  std::string hyp_text;
  if (hyp_path.empty()) {
    hyp_text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    hyp_text = qkv::read_file(hyp_path);
  }
  const auto hyps = split_lines(hyp_text);
  QKV_CHECK(!hyps.empty(), "bleu", "no hypotheses in ", hyp_name);
  std::vector<std::vector<std::string>> refs;
  for (const auto& p : ref_paths) {
    refs.push_back(split_lines(qkv::read_file(p)));
    QKV_CHECK(refs.back().size() == hyps.size(), "bleu", "line counts differ: ", hyp_name, " has ",
              hyps.size(), " lines but reference ", p, " has ", refs.back().size());
  }

  qkv::eval::BleuOptions bo;
  bo.lowercase = lowercase;
  bo.tokenize = tokenize;
  bo.smooth = smooth == "none" ? qkv::eval::BleuSmooth::None
            : smooth == "floor" ? qkv::eval::BleuSmooth::Floor
            : smooth == "add-k" ? qkv::eval::BleuSmooth::AddK : qkv::eval::BleuSmooth::Exp;
  const qkv::eval::BleuScore b = qkv::eval::corpus_bleu(hyps, refs, bo);
  qkv::eval::ChrfScore c;
  if (chrf) {
    qkv::eval::ChrfOptions co;
    co.lowercase = lowercase;
    co.word_order = chrf_word_order;
    c = qkv::eval::corpus_chrf(hyps, refs, co);
  }
  if (json) {
    std::printf(chrf ? "[\n%s,\n%s\n]\n" : "%s\n", b.json(width).c_str(), chrf ? c.json(width).c_str() : "");
  } else if (score_only) {
    std::printf("%.*f\n", width, b.score);
    if (chrf) std::printf("%.*f\n", width, c.score);
  } else {
    std::printf("%s\n", b.format(width).c_str());
    if (chrf) std::printf("%s\n", c.format(width).c_str());
  }
  return 0;
}

qkv::cli::Register reg("bleu", "corpus BLEU / chrF of hypotheses against references (sacreBLEU-compatible)", run);

}  // namespace
