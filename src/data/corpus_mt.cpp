// Parallel corpus from gettext catalogs: entry clean-up, package-level splits, output files.
#include "qkv/data/corpus_mt.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>
#include <unordered_set>

#include "qkv/data/corpus.h"
#include "qkv/text/line_reader.h"
#include "qkv/util/error.h"
#include "qkv/util/file.h"
#include "qkv/util/utf8.h"

namespace fs = std::filesystem;

namespace qkv::data {
namespace {

std::string lower(std::string_view s) {
  std::string o(s);
  for (char& c : o) c = char(std::tolower(static_cast<unsigned char>(c)));
  return o;
}

bool is_credits(std::string_view en) {
  static const std::set<std::string> names = {
      "translator-credits", "translator_credits", "translator credits", "translators",
      "your names",         "your emails",        "name of translators", "email of translators",
      "translated by",      "credits for translators"};
  std::string l = lower(en);
  return names.count(l) > 0 || (l.find("translator") != std::string::npos &&
                                l.find("credit") != std::string::npos);
}

// Positions of accelerator candidates of `mark` in s: mark followed by an ASCII letter/digit or a
// non-ASCII character, excluding doubled marks and (for '&') entities such as &amp; or &#39;.
// Also returns the total number of non-entity occurrences of mark.
std::vector<size_t> marker_positions(std::string_view s, char mark, size_t& total) {
  std::vector<size_t> out;
  total = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != mark) continue;
    if (mark == '&') {
      size_t semi = s.find(';', i + 1);
      if (semi != std::string_view::npos && semi - i <= 8 && semi > i + 1) {
        bool ent = true;
        for (size_t k = i + 1; k < semi; ++k)
          ent &= std::isalnum(static_cast<unsigned char>(s[k])) || s[k] == '#';
        if (ent) continue;
      }
    }
    ++total;
    if (i + 1 >= s.size()) continue;
    unsigned char n = s[i + 1];
    if (n == static_cast<unsigned char>(mark)) {
      ++i;
      ++total;
      continue;
    }
    if (std::isalnum(n) || n >= 0xc0) out.push_back(i);
  }
  return out;
}

std::string_view token_at(std::string_view s, size_t pos) {
  size_t b = pos, e = pos;
  while (b > 0 && s[b - 1] != ' ') --b;
  while (e < s.size() && s[e] != ' ') ++e;
  return s.substr(b, e - b);
}

bool has_token(std::string_view s, std::string_view tok) {
  size_t pos = 0;
  while ((pos = s.find(tok, pos)) != std::string_view::npos) {
    bool left = pos == 0 || s[pos - 1] == ' ';
    bool right = pos + tok.size() == s.size() || s[pos + tok.size()] == ' ';
    if (left && right) return true;
    ++pos;
  }
  return false;
}

void strip_one(std::string& a, std::string& b, char mark) {
  size_t ta = 0, tb = 0;
  auto pa = marker_positions(a, mark, ta), pb = marker_positions(b, mark, tb);
  auto strippable = [&](const std::string& s, const std::string& other, size_t total,
                        const std::vector<size_t>& p) {
    return total == 1 && p.size() == 1 && !has_token(other, token_at(s, p[0]));
  };
  bool sa = strippable(a, b, ta, pa), sb = strippable(b, a, tb, pb);
  if (sa) a.erase(pa[0], 1);
  if (sb) b.erase(pb[0], 1);
}

}  // namespace

std::pair<std::string, std::string> strip_accelerators(std::string_view en, std::string_view tgt) {
  std::string a(en), b(tgt);
  strip_one(a, b, '_');
  strip_one(a, b, '&');
  return {a, b};
}

MtEntryResult clean_mt_entry(const MoEntry& e, const MtFilterOptions& opt) {
  MtEntryResult r;
  auto drop = [&](const char* why) {
    r.reason = why;
    return r;
  };
  if (e.is_plural) return drop("plural");
  if (e.msgid.empty() && !e.has_context) return drop("header");
  if (e.msgstr.empty() || e.msgstr[0].empty() || e.msgid.empty()) return drop("empty");
  if (!utf8::is_valid(e.msgid) || !utf8::is_valid(e.msgstr[0])) return drop("encoding");
  if (is_credits(e.msgid)) return drop("credits");
  auto [en, tgt] = strip_accelerators(normalize_whitespace(e.msgid), normalize_whitespace(e.msgstr[0]));
  en = normalize_whitespace(en);
  tgt = normalize_whitespace(tgt);
  if (en.empty() || tgt.empty()) return drop("empty");
  if (!has_words(en) || !has_words(tgt)) return drop("no_words");
  if (en.size() > opt.max_bytes || tgt.size() > opt.max_bytes) return drop("too_long");
  if (en == tgt) return drop("identical");
  const double la = double(en.size()), lb = double(tgt.size());
  if (std::min(la, lb) >= 10 && std::max(la, lb) > opt.max_len_ratio * std::min(la, lb))
    return drop("length_ratio");
  r.keep = true;
  r.en = std::move(en);
  r.tgt = std::move(tgt);
  return r;
}

nlohmann::json write_mt_corpus(const std::vector<MtCatalogSource>& catalogs,
                               const MtCorpusConfig& cfg, const std::string& out_dir) {
  using Pair = std::pair<std::string, std::string>;
  fs::create_directories(out_dir);
  std::map<std::string, std::string> version;
  std::map<std::string, size_t> n_catalogs, n_kept;
  std::map<std::string, std::vector<Pair>> by_package;  // package -> kept pairs, in order
  std::map<std::string, uint64_t> dropped;
  uint64_t entries = 0;
  for (const auto& src : catalogs) {
    version[src.package] = src.version;
    ++n_catalogs[src.package];
    auto& out = by_package[src.package];
    for (const auto& e : src.catalog.entries) {
      ++entries;
      MtEntryResult r = clean_mt_entry(e, cfg.filter);
      if (!r.keep) {
        ++dropped[r.reason];
        continue;
      }
      out.emplace_back(std::move(r.en), std::move(r.tgt));
      ++n_kept[src.package];
    }
  }
  std::vector<std::string> packages;
  for (const auto& [p, _] : by_package) packages.push_back(p);
  auto split_of = split_groups(packages, cfg.valid_frac, cfg.test_frac, cfg.seed);

  // Train first (package name order), then valid, then test; dedup within each split, and drop
  // held-out pairs whose English side occurs in train (or, for test, in valid).
  std::vector<Pair> split_pairs[3];
  std::unordered_set<std::string> seen_en[3];
  uint64_t dup_dropped = 0, overlap_dropped[3] = {0, 0, 0};
  for (Split s : {Split::Train, Split::Valid, Split::Test}) {
    std::set<Pair> seen;
    const int k = int(s);
    for (const auto& p : packages) {
      if (split_of[p] != s) continue;
      for (const auto& pr : by_package[p]) {
        if (!seen.insert(pr).second) {
          ++dup_dropped;
          continue;
        }
        bool leak = (s != Split::Train && seen_en[0].count(pr.first)) ||
                    (s == Split::Test && seen_en[1].count(pr.first));
        if (leak) {
          ++overlap_dropped[k];
          continue;
        }
        split_pairs[k].push_back(pr);
      }
    }
    for (const auto& pr : split_pairs[k]) seen_en[k].insert(pr.first);
  }

  nlohmann::json stats;
  stats["src_lang"] = "en";
  stats["tgt_lang"] = cfg.tgt_lang;
  stats["packages"] = packages.size();
  stats["catalogs"] = catalogs.size();
  stats["entries"] = entries;
  stats["dropped"] = dropped;
  stats["dropped_duplicates"] = dup_dropped;
  stats["dropped_overlap"] = {{"valid", overlap_dropped[1]}, {"test", overlap_dropped[2]}};
  stats["seed"] = cfg.seed;
  uint64_t total = 0;
  remove_stamp(out_dir);  // the files below are another build's until the new stamp
  for (Split s : {Split::Train, Split::Valid, Split::Test}) {
    const int k = int(s);
    TextStats src, tgt;
    std::string text;
    for (const auto& [a, b] : split_pairs[k]) {
      src.add(a);
      tgt.add(b);
      text += a + "\t" + b + "\n";
    }
    write_file_atomic(out_dir + "/" + split_name(s) + ".tsv", text);
    std::vector<std::string> pk;
    for (const auto& p : packages)
      if (split_of[p] == s) pk.push_back(p);
    stats["splits"][split_name(s)] = {{"pairs", split_pairs[k].size()},
                                      {"packages", pk},
                                      {"src", src.to_json()},
                                      {"tgt", tgt.to_json()}};
    total += split_pairs[k].size();
  }
  stats["pairs"] = total;
  std::string ptsv = "package\tversion\tsplit\tcatalogs\tpairs_kept\n";
  for (const auto& p : packages)
    ptsv += p + "\t" + version[p] + "\t" + split_name(split_of[p]) + "\t" +
            std::to_string(n_catalogs[p]) + "\t" + std::to_string(n_kept[p]) + "\n";
  write_file_atomic(out_dir + "/packages.tsv", ptsv);
  write_file_atomic(out_dir + "/stats.json", stats.dump(2) + "\n");
  return stats;
}

std::vector<std::pair<std::string, std::string>> read_parallel_tsv(const std::string& path) {
  std::vector<std::pair<std::string, std::string>> out;
  text::LineReader rd(path);
  std::string_view line;
  while (rd.next(line)) {
    if (line.empty()) continue;
    auto f = text::split_tabs(line);
    QKV_CHECK(f.size() == 2, "parallel TSV '" + path + "'", "line ", rd.line_number(),
              ": expected 2 tab-separated fields (source<TAB>target), found ", f.size());
    QKV_CHECK(utf8::is_valid(line), "parallel TSV '" + path + "'", "line ", rd.line_number(), ": invalid UTF-8");
    out.emplace_back(std::string(f[0]), std::string(f[1]));
  }
  return out;
}

std::string find_corpus_list(const std::string& file) {
  std::vector<fs::path> tried;
  tried.push_back(fs::current_path() / "corpora" / file);
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec)
    for (fs::path d = exe.parent_path(); !d.empty() && d != d.root_path(); d = d.parent_path())
      if (fs::path c = d / "corpora" / file; std::find(tried.begin(), tried.end(), c) == tried.end())
        tried.push_back(c);
  for (const auto& p : tried)
    if (fs::exists(p)) return p.string();
  std::string list;
  for (const auto& p : tried) list += "\n  " + p.string();
  fail("find_corpus_list", "package list '", file, "' not found; tried:", list,
       "\n(run from the qkv source tree or pass an explicit list file)");
}

}  // namespace qkv::data
