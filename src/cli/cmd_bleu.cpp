// `qkv bleu`: corpus BLEU (and chrF / chrF++) exactly as sacreBLEU 2.x with default settings.
#include <CLI/CLI.hpp>
#include <cstdint>
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
#include "qkv/util/utf8.h"

namespace {

// Lines of a text file (a final newline does not start another line; "\r\n" is accepted).
// The lines of `text` (from file `name`), which must be UTF-8: an error names the file and line (the
// scorer's own check named only "reference, segment N", not which of several files).
std::vector<std::string> split_lines(const std::string& text, const std::string& name) {
  qkv::utf8::check_lines(text, name);
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

std::string format_fixed(double v, int width) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", width, v);
  return buf;
}

// Scores of the sentences whose source has [lo, hi] 13a tokens (an empty source counts as 1).
struct LengthBucket {
  const char* name;
  size_t lo, hi, sentences = 0;
  double bleu = 0, chrf = 0;
};

std::vector<LengthBucket> score_by_source_length(const std::vector<std::string>& sources,
                                                 const std::vector<std::string>& hyps,
                                                 const std::vector<std::vector<std::string>>& refs,
                                                 const qkv::eval::BleuOptions& bo, bool chrf, int chrf_word_order,
                                                 bool lowercase) {
  std::vector<LengthBucket> buckets{{"1-5", 0, 5}, {"6-10", 6, 10}, {"11-20", 11, 20}, {"21+", 21, SIZE_MAX}};
  std::vector<size_t> lengths;  // 13a tokens per source, counted once
  for (const auto& src : sources) {
    std::string tok = qkv::eval::tokenize_13a(src);
    size_t n = 0;
    for (size_t a = 0; a < tok.size();) {  // count space-separated tokens
      size_t b = tok.find(' ', a);
      if (b == std::string::npos) b = tok.size();
      n += b > a;
      a = b + 1;
    }
    lengths.push_back(n);
  }
  for (auto& k : buckets) {
    std::vector<std::string> h;
    std::vector<std::vector<std::string>> r(refs.size());
    for (size_t i = 0; i < sources.size(); ++i) {
      if (lengths[i] < k.lo || lengths[i] > k.hi) continue;
      h.push_back(hyps[i]);
      for (size_t j = 0; j < refs.size(); ++j) r[j].push_back(refs[j][i]);
    }
    k.sentences = h.size();
    if (h.empty()) continue;
    k.bleu = qkv::eval::corpus_bleu(h, r, bo).score;
    if (chrf) {
      qkv::eval::ChrfOptions co;
      co.lowercase = lowercase;
      co.word_order = chrf_word_order;
      k.chrf = qkv::eval::corpus_chrf(h, r, co).score;
    }
  }
  return buckets;
}

int run_bleu(int argc, char** argv) {
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
  std::string src_path;
  app.add_option("--by-source-length", src_path,
                 "source file (line-aligned): also score the sentences in source-length buckets of 1-5, 6-10, "
                 "11-20 and 21+ 13a tokens");
  QKV_PARSE(app, argc, argv);
  if (chrf_word_order > 0) chrf = true;

  const std::string hyp_name = hyp_path.empty() ? std::string("stdin") : hyp_path;
  std::string hyp_text;
  if (hyp_path.empty()) {
    hyp_text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    hyp_text = qkv::read_file(hyp_path);
  }
  const auto hyps = split_lines(hyp_text, hyp_name);
  QKV_CHECK(!hyps.empty(), "bleu", "no hypotheses in ", hyp_name);
  std::vector<std::vector<std::string>> refs;
  for (const auto& p : ref_paths) {
    refs.push_back(split_lines(qkv::read_file(p), p));
    QKV_CHECK(refs.back().size() == hyps.size(), "bleu", "line counts differ: ", hyp_name, " has ",
              hyps.size(), " lines but reference ", p, " has ", refs.back().size());
  }

  for (size_t i = 0; i < hyps.size(); ++i) {  // (corpus_bleu refuses it too, naming no file)
    bool any = false;
    for (const auto& r : refs) any = any || !r[i].empty();
    if (any) continue;
    std::string files;
    for (const auto& p : ref_paths) files += (files.empty() ? "" : ", ") + p;
    qkv::fail("bleu", "line ", i + 1, " is empty in every reference (", files, "): a segment needs a reference");
  }

  std::vector<std::string> sources;
  if (!src_path.empty()) {
    sources = split_lines(qkv::read_file(src_path), src_path);
    QKV_CHECK(sources.size() == hyps.size(), "bleu", "line counts differ: ", hyp_name, " has ", hyps.size(),
              " lines but source ", src_path, " has ", sources.size());
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
  std::vector<LengthBucket> buckets;
  if (!sources.empty()) buckets = score_by_source_length(sources, hyps, refs, bo, chrf, chrf_word_order, lowercase);
  if (json) {
    if (!buckets.empty()) {
      std::printf("{\"corpus\": %s,\n \"by_source_length\": [", chrf ? ("[" + b.json(width) + ", " + c.json(width) + "]").c_str()
                                                                       : b.json(width).c_str());
      for (size_t i = 0; i < buckets.size(); ++i)
        std::printf("%s\n  {\"bucket\": \"%s\", \"sentences\": %zu, \"bleu\": %.*f%s}", i ? "," : "",
                    buckets[i].name, buckets[i].sentences, width, buckets[i].bleu,
                    chrf ? (", \"chrf\": " + format_fixed(buckets[i].chrf, width)).c_str() : "");
      std::printf("\n]}\n");
      return 0;
    }
    std::printf(chrf ? "[\n%s,\n%s\n]\n" : "%s\n", b.json(width).c_str(), chrf ? c.json(width).c_str() : "");
  } else if (score_only) {
    std::printf("%.*f\n", width, b.score);
    if (chrf) std::printf("%.*f\n", width, c.score);
  } else {
    std::printf("%s\n", b.format(width).c_str());
    if (chrf) std::printf("%s\n", c.format(width).c_str());
  }
  if (!json)
    for (const auto& k : buckets) {
      std::printf("source length %-5s  %5zu sentences  BLEU %6.*f", k.name, k.sentences, width, k.bleu);
      if (chrf) std::printf("  chrF %6.*f", width, k.chrf);
      std::printf("\n");
    }
  return 0;
}

qkv::cli::Register register_bleu("bleu", "corpus BLEU / chrF of hypotheses against references (sacreBLEU-compatible)",
                                 run_bleu);

}  // namespace
