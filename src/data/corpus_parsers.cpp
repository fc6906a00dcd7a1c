// Parsers for the Debian/dictd/WordNet sources of the monolingual corpora.
#include <algorithm>
#include <set>

#include "qkv/data/corpus.h"
#include "qkv/data/corpus_mono.h"
#include "qkv/data/debian.h"
#include "qkv/text/line_reader.h"
#include "qkv/util/error.h"

namespace qkv::data {

std::vector<std::map<std::string, std::string>> parse_deb822(std::string_view text) {
  std::vector<std::map<std::string, std::string>> out;
  std::map<std::string, std::string> rec;
  std::string* last = nullptr;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.empty()) {
      if (!rec.empty()) out.push_back(std::move(rec));
      rec.clear();
      last = nullptr;
      if (nl >= text.size()) break;
      continue;
    }
    if (line[0] == ' ' || line[0] == '\t') {
      if (last) *last += "\n" + std::string(line);
    } else if (size_t colon = line.find(':'); colon != std::string_view::npos) {
      std::string_view v = line.substr(colon + 1);
      while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
      last = &(rec[std::string(line.substr(0, colon))] = std::string(v));
    }
    if (nl >= text.size()) break;
  }
  if (!rec.empty()) out.push_back(std::move(rec));
  return out;
}

std::vector<std::string> description_paragraphs(std::string_view desc) {
  std::vector<std::string> out;
  std::string cur;
  auto flush = [&] {
    std::string p = normalize_whitespace(cur);
    if (!p.empty()) out.push_back(std::move(p));
    cur.clear();
  };
  size_t pos = 0;
  while (pos < desc.size()) {
    size_t nl = desc.find('\n', pos);
    if (nl == std::string_view::npos) nl = desc.size();
    std::string_view line = desc.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.empty()) continue;
    if (line == " ." || line == ".") {
      flush();
      continue;
    }
    const bool verbatim = line.size() > 1 && line[0] == ' ' && line[1] == ' ';
    std::string_view body = line;
    while (!body.empty() && body.front() == ' ') body.remove_prefix(1);
    const bool bullet = body.size() > 2 && (body[0] == '*' || body[0] == '-' || body[0] == 'o' ||
                                            body[0] == '+') && body[1] == ' ';
    if (verbatim || bullet) flush();
    cur += " ";
    cur += body;
  }
  flush();
  return out;
}

uint64_t dictd_b64(std::string_view s) {
  static const std::string_view alpha =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  uint64_t v = 0;
  for (char c : s) {
    size_t d = alpha.find(c);
    QKV_CHECK(d != std::string_view::npos, "dictd index", "bad base64 digit '", c, "' in '", s, "'");
    v = v * 64 + d;
  }
  return v;
}

std::vector<std::string> dictd_entries(std::string_view index, std::string_view dict) {
  std::set<std::pair<uint64_t, uint64_t>> spans;
  size_t pos = 0, line_no = 0;
  while (pos < index.size()) {
    size_t nl = index.find('\n', pos);
    if (nl == std::string_view::npos) nl = index.size();
    std::string_view line = index.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (line.empty()) continue;
    auto f = text::split_tabs(line);
    QKV_CHECK(f.size() >= 3, "dictd index", "line ", line_no, ": expected 3 tab-separated fields, found ",
              f.size());
    if (f[0].rfind("00-database", 0) == 0 || f[0].rfind("00database", 0) == 0) continue;
    uint64_t off = dictd_b64(f[1]), len = dictd_b64(f[2]);
    QKV_CHECK(off + len <= dict.size(), "dictd index", "line ", line_no, ": entry '", f[0],
              "' at ", off, "+", len, " runs past the end of the dictionary (", dict.size(), " bytes)");
    spans.insert({off, len});
  }
  std::vector<std::string> out;
  out.reserve(spans.size());
  for (auto [off, len] : spans) out.emplace_back(dict.substr(off, len));
  return out;
}

std::vector<std::string> dictd_paragraphs(std::string_view entry) {
  std::vector<std::string> out;
  size_t first_nl = entry.find('\n');
  if (first_nl == std::string_view::npos) return out;
  std::string cur;
  auto flush = [&] {
    std::string t;
    for (char c : cur)
      if (c != '{' && c != '}') t += c;
    t = normalize_whitespace(to_utf8(t));
    if (!t.empty()) out.push_back(std::move(t));
    cur.clear();
  };
  size_t pos = first_nl + 1;
  while (pos < entry.size()) {
    size_t nl = entry.find('\n', pos);
    if (nl == std::string_view::npos) nl = entry.size();
    std::string_view line = entry.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) {
      flush();
      continue;
    }
    cur += " ";
    cur += line;
  }
  flush();
  return out;
}

std::vector<std::string> wordnet_glosses(std::string_view data) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < data.size()) {
    size_t nl = data.find('\n', pos);
    if (nl == std::string_view::npos) nl = data.size();
    std::string_view line = data.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.empty() || line[0] == ' ') continue;  // license header lines start with spaces
    size_t bar = line.find(" | ");
    if (bar == std::string_view::npos) continue;
    std::string g = normalize_whitespace(to_utf8(line.substr(bar + 3)));
    if (!g.empty()) out.push_back(std::move(g));
  }
  return out;
}

std::string source_package(const std::map<std::string, std::string>& rec) {
  const auto src = rec.find("Source");
  const auto pkg = rec.find("Package");
  std::string name = src != rec.end() ? src->second : (pkg != rec.end() ? pkg->second : "");
  if (size_t sp = name.find(' '); sp != std::string::npos) name.resize(sp);  // "src (ver)"
  return name;
}

std::unordered_map<std::string, std::string> long_descriptions(const std::string& translation_index) {
  std::unordered_map<std::string, std::string> out;
  for (auto& rec : parse_deb822(read_compressed(translation_index))) {
    const std::string& d = rec["Description-en"];
    const size_t nl = d.find('\n');
    std::string text;
    if (nl != std::string::npos)
      for (const auto& p : description_paragraphs(std::string_view(d).substr(nl + 1)))
        text += (text.empty() ? "" : " ") + p;
    out[rec["Description-md5"]] = to_utf8(text);
  }
  return out;
}

DescriptionIndexes fetch_description_indexes(const std::string& cache_dir, bool verbose) {
  const std::string cache = cache_dir.empty() ? default_cache_dir() : cache_dir;
  return {fetch_archive_index("main/binary-amd64/Packages.xz", cache, "bookworm", verbose),
          fetch_archive_index("main/i18n/Translation-en.xz", cache, "bookworm", verbose)};
}

nlohmann::json description_indexes_key() {
  return {"bookworm main/binary-amd64/Packages.xz", "bookworm main/i18n/Translation-en.xz"};
}

}  // namespace qkv::data
