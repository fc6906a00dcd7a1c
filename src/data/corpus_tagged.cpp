// pos-wsj and ner-debian: the tagging corpora (qkv/data/corpus_tagged.h).
#include "qkv/data/corpus_tagged.h"

#include <chrono>
#include <filesystem>
#include <unordered_set>

#include "qkv/data/corpus.h"
#include "qkv/data/debian.h"
#include "qkv/util/error.h"
#include "qkv/util/file.h"

namespace fs = std::filesystem;

namespace qkv::data {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_alnum(char c) { return is_digit(c) || is_alpha(c); }
bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

bool is_url(std::string_view w) {
  for (std::string_view scheme : {"http://", "https://", "ftp://", "git://", "svn://"})
    if (starts_with(w, scheme)) return w.size() > scheme.size();
  if (starts_with(w, "www.")) {
    const std::string_view rest = w.substr(4);
    const size_t dot = rest.find('.');
    return dot != std::string_view::npos && dot > 0 && dot + 1 < rest.size();
  }
  return false;
}

bool is_email(std::string_view w) {
  const size_t at = w.find('@');
  if (at == std::string_view::npos || at == 0 || w.find('@', at + 1) != std::string_view::npos) return false;
  for (char c : w.substr(0, at))
    if (!(is_alnum(c) || c == '.' || c == '_' || c == '%' || c == '+' || c == '-')) return false;
  const std::string_view domain = w.substr(at + 1);
  size_t labels = 0, start = 0;
  std::string_view last;
  while (start <= domain.size()) {
    size_t dot = domain.find('.', start);
    if (dot == std::string_view::npos) dot = domain.size();
    const std::string_view label = domain.substr(start, dot - start);
    if (label.empty()) return false;
    for (char c : label)
      if (!(is_alnum(c) || c == '-')) return false;
    ++labels;
    last = label;
    start = dot + 1;
  }
  if (labels < 2 || last.size() < 2) return false;
  for (char c : last)
    if (!is_alpha(c)) return false;
  return true;
}

bool is_path(std::string_view w) {
  size_t i;
  if (starts_with(w, "~/")) i = 2;
  else if (starts_with(w, "/")) i = 1;
  else return false;
  if (i >= w.size() || !(is_alnum(w[i]) || w[i] == '.' || w[i] == '_')) return false;
  for (char c : w)
    if (!(is_alnum(c) || c == '.' || c == '_' || c == '/' || c == '+' || c == '~' || c == '*' || c == '-')) return false;
  return true;
}

bool is_version(std::string_view w) {
  size_t i = 0;
  if (i < w.size() && (w[i] == 'v' || w[i] == 'V')) ++i;
  auto digits = [&] {
    const size_t s = i;
    while (i < w.size() && is_digit(w[i])) ++i;
    return i > s;
  };
  if (!digits()) return false;
  int dotted = 0;
  while (i + 1 < w.size() && w[i] == '.' && is_digit(w[i + 1])) {
    ++i;
    digits();
    ++dotted;
  }
  if (dotted == 0) return false;
  if (i == w.size()) return true;
  if (w[i] >= 'a' && w[i] <= 'z') return i + 1 == w.size();
  if (w[i] != '-' && w[i] != '+' && w[i] != '~') return false;
  if (++i == w.size()) return false;
  for (; i < w.size(); ++i)
    if (!(is_alnum(w[i]) || w[i] == '.' || w[i] == '+' || w[i] == '~')) return false;
  return true;
}

// "libc6 (>= 2.34), python3:any | foo [amd64] <!nocheck>" -> libc6, python3, foo.
void relation_names(std::string_view field, std::set<std::string>& out) {
  size_t start = 0;
  while (start <= field.size()) {
    size_t end = field.find_first_of(",|", start);
    if (end == std::string_view::npos) end = field.size();
    std::string_view alt = field.substr(start, end - start);
    size_t b = 0;
    while (b < alt.size() && is_space(alt[b])) ++b;
    size_t e = b;
    while (e < alt.size() && !is_space(alt[e]) && alt[e] != '(' && alt[e] != '[' && alt[e] != '<' && alt[e] != ':') ++e;
    if (e > b) out.insert(std::string(alt.substr(b, e - b)));
    start = end + 1;
  }
}

}  // namespace

TaggedWords parse_slash_tagged(std::string_view line, const std::string& where) {
  TaggedWords t;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && is_space(line[i])) ++i;
    size_t j = i;
    while (j < line.size() && !is_space(line[j])) ++j;
    if (j == i) break;
    const std::string_view tok = line.substr(i, j - i);
    const size_t slash = tok.rfind('/');
    QKV_CHECK(slash != std::string_view::npos && slash > 0 && slash + 1 < tok.size(), where, "token ",
              t.words.size() + 1, " '", tok, "': expected word/TAG");
    t.words.emplace_back(tok.substr(0, slash));
    t.tags.emplace_back(tok.substr(slash + 1));
    i = j;
  }
  return t;
}

std::vector<std::string> ner_tokenize(std::string_view text) {
  static const std::string_view lead = "([{\"'<`", trail = ")]}\"'>,;:!?.";
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) ++i;
    size_t j = i;
    while (j < text.size() && !is_space(text[j])) ++j;
    std::string_view chunk = text.substr(i, j - i);
    i = j;
    while (!chunk.empty() && lead.find(chunk.front()) != std::string_view::npos) {
      out.emplace_back(1, chunk.front());
      chunk.remove_prefix(1);
    }
    size_t body = chunk.size();
    while (body > 0 && trail.find(chunk[body - 1]) != std::string_view::npos) --body;
    if (body > 0) out.emplace_back(chunk.substr(0, body));
    for (size_t k = body; k < chunk.size(); ++k) out.emplace_back(1, chunk[k]);
  }
  return out;
}

std::vector<std::vector<std::string>> ner_sentences(const std::vector<std::string>& words) {
  std::vector<std::vector<std::string>> out;
  std::vector<std::string> cur;
  for (size_t i = 0; i < words.size(); ++i) {
    cur.push_back(words[i]);
    const std::string& w = words[i];
    const bool stop = w == "." || w == "!" || w == "?";
    if (stop && (i + 1 == words.size() || (words[i + 1][0] >= 'A' && words[i + 1][0] <= 'Z'))) {
      out.push_back(std::move(cur));
      cur.clear();
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

std::string ner_word_type(std::string_view w, const std::set<std::string>& package_names) {
  if (is_url(w)) return "URL";
  if (is_email(w)) return "EMAIL";
  if (is_path(w)) return "PATH";
  if (is_version(w)) return "VER";
  if (w.size() >= 2 && package_names.count(std::string(w))) return "PKG";
  return "";
}

std::set<std::string> package_names_of(const std::map<std::string, std::string>& record) {
  std::set<std::string> names;
  if (auto it = record.find("Package"); it != record.end() && !it->second.empty()) names.insert(it->second);
  for (const char* field : {"Depends", "Pre-Depends", "Recommends"})
    if (auto it = record.find(field); it != record.end()) relation_names(it->second, names);
  return names;
}

std::vector<TaggedWords> ner_label_package(const std::map<std::string, std::string>& record,
                                           std::string_view long_description) {
  const std::set<std::string> names = package_names_of(record);
  std::string text;
  if (auto it = record.find("Description"); it != record.end())
    text = normalize_whitespace(to_utf8(it->second.substr(0, it->second.find('\n'))));  // the short description
  std::vector<std::vector<std::string>> sentences;
  if (!text.empty()) sentences.push_back(ner_tokenize(text));  // the summary line: one sentence
  for (auto& s : ner_sentences(ner_tokenize(normalize_whitespace(to_utf8(long_description)))))
    sentences.push_back(std::move(s));
  std::vector<TaggedWords> out;
  for (auto& words : sentences) {
    if (words.empty()) continue;
    TaggedWords t;
    for (auto& w : words) {
      const std::string type = ner_word_type(w, names);
      t.tags.push_back(type.empty() ? "O" : "B-" + type);
      t.words.push_back(std::move(w));
    }
    out.push_back(std::move(t));
  }
  return out;
}

namespace {

std::string conll_block(const TaggedWords& t) {
  std::string s;
  for (size_t i = 0; i < t.words.size(); ++i) s += t.words[i] + "\t" + t.tags[i] + "\n";
  return s;  // SplitTexts::add appends the blank line
}

std::string joined(const std::vector<std::string>& words) {
  std::string s;
  for (const auto& w : words) s += (s.empty() ? "" : " ") + w;
  return s;
}

}  // namespace

BuildResult build_pos_wsj_corpus(const ExtraBuildOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string member = "usr/share/doc/python3-pattern/test/corpora/tagged-en-wsj.txt";
  BuildResult res;
  res.out_dir = opt.data_dir + "/tag/pos-wsj";
  const std::string cache = opt.cache_dir.empty() ? default_cache_dir() : opt.cache_dir;
  const std::string deb_dir = cache + "/debs";
  fs::create_directories(deb_dir);
  const double valid_frac = 0.1, test_frac = 0.1;
  auto key_for = [&](const std::string& deb) {
    return nlohmann::json{{"builder", "qkv pos-wsj corpus v2"}, {"deb", fs::path(deb).filename()},
                          {"valid_frac", valid_frac}, {"test_frac", test_frac}, {"seed", opt.seed}};
  };
  const std::vector<std::string> outputs = {"train.conll", "valid.conll", "test.conll", "stats.json"};
  if (std::string cached = find_cached_deb(deb_dir, "python3-pattern");
      !cached.empty() && reuse_build(res, key_for(cached), outputs, opt.force))
    return res;
  const std::string deb = fetch_debs({"python3-pattern"}, deb_dir, opt.verbose).at("python3-pattern");
  std::string text;
  extract_deb_files(deb, [&](const std::string& p) { return p == member; },
                    [&](const std::string&, std::string&& bytes) { text = std::move(bytes); });
  QKV_CHECK(!text.empty(), deb, "has no ", member);
  const std::string where = fs::path(deb).filename().string() + ":" + member;

  std::vector<TaggedWords> lines;
  std::vector<std::string> groups;  // one group per line: a seeded split of the lines
  size_t line_no = 0, start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    ++line_no;
    TaggedWords t = parse_slash_tagged(std::string_view(text).substr(start, end - start),
                                       where + ":" + std::to_string(line_no));
    start = end + 1;
    if (t.words.empty()) continue;
    groups.push_back("line " + std::to_string(line_no));
    lines.push_back(std::move(t));
  }
  const auto split_of = split_groups(groups, valid_frac, test_frac, opt.seed);
  SplitTexts splits;
  std::map<std::string, uint64_t> tags[3];
  for (size_t i = 0; i < lines.size(); ++i) {
    const Split s = split_of.at(groups[i]);
    splits.add(s, conll_block(lines[i]), joined(lines[i].words));
    for (auto& t : lines[i].tags) ++tags[int(s)][t];
  }
  fs::create_directories(res.out_dir);
  nlohmann::json stats = {{"name", "pos-wsj"}, {"source", where}, {"deb_version", deb_version(deb)},
                          {"lines", lines.size()}, {"format", "word<TAB>tag, a blank line after each sentence"}};
  stats["examples"] = write_splits(res.out_dir, "conll", splits, stats,
                                   [&](Split s, nlohmann::json& entry) { entry["classes"] = tags[int(s)]; });
  finish_build(res.out_dir, stats, key_for(deb), t0);
  res.stats = stats;
  res.built = true;
  return res;
}

BuildResult build_ner_debian_corpus(const ExtraBuildOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  BuildResult res;
  res.out_dir = opt.data_dir + "/tag/ner-debian";
  const double valid_frac = 0.1, test_frac = 0.1;
  const nlohmann::json key = {{"builder", "qkv ner-debian corpus v2"}, {"indexes", description_indexes_key()},
                              {"valid_frac", valid_frac}, {"test_frac", test_frac}, {"seed", opt.seed}};
  const std::vector<std::string> outputs = {"train.conll", "valid.conll", "test.conll", "stats.json"};
  if (reuse_build(res, key, outputs, opt.force)) return res;
  const DescriptionIndexes idx = fetch_description_indexes(opt.cache_dir, opt.verbose);
  const auto long_desc = long_descriptions(idx.translations);  // Description-md5 -> long text

  struct Sentence {
    std::string source;
    TaggedWords t;
  };
  std::vector<Sentence> sentences;
  std::vector<std::string> sources;
  std::unordered_set<std::string> seen;  // a tagged sentence once (packages of a family share text)
  uint64_t packages = 0, duplicates = 0;
  for (auto& rec : parse_deb822(read_compressed(idx.packages))) {
    if (rec["Package"].empty()) continue;
    ++packages;
    const std::string source = source_package(rec);
    auto it = long_desc.find(rec["Description-md5"]);
    for (auto& t : ner_label_package(rec, it == long_desc.end() ? std::string_view() : std::string_view(it->second))) {
      if (!seen.insert(conll_block(t)).second) {
        ++duplicates;
        continue;
      }
      sources.push_back(source);
      sentences.push_back({source, std::move(t)});
    }
  }
  const auto split_of = split_groups(sources, valid_frac, test_frac, opt.seed);
  SplitTexts splits;
  std::map<std::string, uint64_t> tags[3], entities[3], all_entities;
  for (const auto& s : sentences) {
    const Split sp = split_of.at(s.source);
    splits.add(sp, conll_block(s.t), joined(s.t.words));
    for (auto& t : s.t.tags) {
      ++tags[int(sp)][t];
      if (t != "O") {
        ++entities[int(sp)][t.substr(2)];
        ++all_entities[t.substr(2)];
      }
    }
  }
  fs::create_directories(res.out_dir);
  nlohmann::json stats = {{"name", "ner-debian"}, {"packages", packages}, {"sentences", sentences.size()},
                          {"duplicate_sentences", duplicates}, {"entities", all_entities},
                          {"format", "word<TAB>tag, a blank line after each sentence"}};
  stats["examples"] = write_splits(res.out_dir, "conll", splits, stats, [&](Split s, nlohmann::json& entry) {
    entry["classes"] = tags[int(s)];
    entry["entities"] = entities[int(s)];
    uint64_t n_src = 0;
    for (auto& [src, sp] : split_of) n_src += sp == s;
    entry["source_packages"] = n_src;
  });
  finish_build(res.out_dir, stats, key, t0);
  res.stats = stats;
  res.built = true;
  return res;
}

}  // namespace qkv::data
