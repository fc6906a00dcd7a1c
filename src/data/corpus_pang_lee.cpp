// Labelled sets that Debian's python3-pattern ships as samples under its test corpora
// (usr/share/doc/python3-pattern/test/corpora/), built into classification corpora:
//   pang-lee-reviews    polarity-en-pang&lee1.csv  Pang & Lee's whole movie reviews (polarity
//                       dataset v2.0 sample): 1 positive, -1 negative
//   pang-lee-sentences  polarity-en-pang&lee2.csv  review sentences (sentence polarity dataset
//                       v1.0 sample): 1 positive, -1 negative
//   conll2010           uncertainty-conll2010.csv  CoNLL-2010 shared task 1 Wikipedia sentences:
//                       1 certain, -1 uncertain (the package's test_en.py reads "certain" > 0)
// CSV records "label","text" (text may span lines, "" escapes a quote; the file starts with a
// byte-order mark). Labelled here 1 / 0, whitespace-normalised, duplicates once, contradicting
// texts dropped, stratified seeded 80/10/10 splits.
#include <chrono>
#include <filesystem>

#include "qkv/data/corpus.h"
#include "qkv/data/corpus_mono.h"
#include "qkv/data/debian.h"
#include "qkv/util/error.h"
#include "qkv/util/file.h"

namespace fs = std::filesystem;

namespace qkv::data {

std::vector<std::vector<std::string>> parse_csv(std::string_view text, const std::string& where) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // UTF-8 byte-order mark
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  size_t i = 0, line = 1;
  bool any = false;  // the current row has started
  auto end_field = [&] {
    row.push_back(std::move(field));
    field.clear();
  };
  while (i < text.size()) {
    char c = text[i];
    if (c == '"' && field.empty()) {  // a quoted field: up to the closing quote, "" is one quote
      const size_t open_line = line;
      for (++i;; ++i) {
        QKV_CHECK(i < text.size(), where, "line ", open_line, ": a quoted field is never closed");
        if (text[i] == '"') {
          if (i + 1 < text.size() && text[i + 1] == '"') {
            field += '"';
            ++i;
            continue;
          }
          ++i;
          break;
        }
        line += text[i] == '\n';
        field += text[i];
      }
      QKV_CHECK(i >= text.size() || text[i] == ',' || text[i] == '\n' || text[i] == '\r', where, "line ", line,
                ": expected ',' or the end of the line after a quoted field, got '", text[i], "'");
      any = true;
      continue;
    }
    if (c == ',') {
      end_field();
      any = true;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      if (any || !field.empty()) {
        end_field();
        rows.push_back(std::move(row));
        row.clear();
      }
      any = false;
      ++line;
    } else {
      field += c;
      any = true;
    }
    ++i;
  }
  if (any || !field.empty()) {
    end_field();
    rows.push_back(std::move(row));
  }
  return rows;
}

namespace {

// One labelled CSV file of python3-pattern's test corpora and what its labels mean.
struct PatternCsv {
  std::string name;     // the corpus: <data>/cls/<name>
  std::string file;     // under usr/share/doc/python3-pattern/test/corpora/
  std::string builder;  // the stamp key's builder (a change rebuilds)
  std::string positive, negative;  // label 1 / 0 (the file's 1 / -1)
};

BuildResult build_pattern_csv_corpus(const ExtraBuildOptions& opt, const PatternCsv& spec) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string& name = spec.name;
  const std::string member = "usr/share/doc/python3-pattern/test/corpora/" + spec.file;
  BuildResult res;
  res.out_dir = opt.data_dir + "/cls/" + name;
  const std::string cache = opt.cache_dir.empty() ? default_cache_dir() : opt.cache_dir;
  const std::string deb_dir = cache + "/debs";
  fs::create_directories(deb_dir);
  const double valid_frac = 0.1, test_frac = 0.1;
  auto key_for = [&](const std::string& deb) {
    return nlohmann::json{{"builder", spec.builder}, {"name", name}, {"deb", fs::path(deb).filename()},
                          {"valid_frac", valid_frac}, {"test_frac", test_frac}, {"seed", opt.seed}};
  };
  const std::vector<std::string> outputs = {"train.tsv", "valid.tsv", "test.tsv", "stats.json"};
  if (std::string cached = find_cached_deb(deb_dir, "python3-pattern");
      !cached.empty() && reuse_build(res, key_for(cached), outputs, opt.force))
    return res;
  const std::string deb = fetch_debs({"python3-pattern"}, deb_dir, opt.verbose).at("python3-pattern");
  std::string csv;
  extract_deb_files(deb, [&](const std::string& p) { return p == member; },
                    [&](const std::string&, std::string&& bytes) { csv = std::move(bytes); });
  QKV_CHECK(!csv.empty(), deb, "has no ", member);

  const std::string where = fs::path(deb).filename().string() + ":" + member;
  LabelledTexts items(2);
  uint64_t records = 0, empty = 0;
  for (const auto& row : parse_csv(csv, where)) {
    ++records;
    QKV_CHECK(row.size() == 2, where, "record ", records, ": expected 2 fields (label, text), got ", row.size());
    QKV_CHECK(row[0] == "1" || row[0] == "-1", where, "record ", records, ": label must be 1 or -1, got '", row[0],
              "'");
    std::string text = normalize_whitespace(to_utf8(row[1]));
    if (text.empty()) {
      ++empty;
      continue;
    }
    items.add(row[0] == "1" ? 1 : 0, text);
  }
  SplitTexts splits;
  std::map<std::string, uint64_t> classes[3];
  stratified_split(items.by_class(), valid_frac, test_frac, opt.seed, splits, classes);
  fs::create_directories(res.out_dir);
  nlohmann::json stats = {{"name", name}, {"source", where}, {"deb_version", deb_version(deb)},
                          {"records", records}, {"empty_items", empty}, {"duplicates", items.duplicates()},
                          {"dropped_conflicting", items.conflicting()},
                          {"labels", {{"0", spec.negative}, {"1", spec.positive}}}};
  stats["examples"] = write_splits(res.out_dir, "tsv", splits, stats,
                                   [&](Split s, nlohmann::json& entry) { entry["classes"] = classes[int(s)]; });
  finish_build(res.out_dir, stats, key_for(deb), t0);
  res.stats = stats;
  res.built = true;
  return res;
}

}  // namespace

BuildResult build_pang_lee_corpus(const ExtraBuildOptions& opt, PangLee which) {
  const bool reviews = which == PangLee::reviews;
  return build_pattern_csv_corpus(
      opt, {reviews ? "pang-lee-reviews" : "pang-lee-sentences",
            std::string("polarity-en-pang&lee") + (reviews ? "1" : "2") + ".csv", "qkv pang-lee corpus v1", "positive",
            "negative"});
}

BuildResult build_conll2010_corpus(const ExtraBuildOptions& opt) {
  return build_pattern_csv_corpus(
      opt, {"conll2010", "uncertainty-conll2010.csv", "qkv conll2010 corpus v1", "certain", "uncertain"});
}

}  // namespace qkv::data
