#include "qkv/data/corpus.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "qkv/data/corpus_mt.h"  // BuildResult
#include "qkv/util/error.h"
#include "qkv/util/file.h"
#include "qkv/util/hash.h"
#include "qkv/util/utf8.h"

namespace qkv::data {

std::string latin1_to_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size() + s.size() / 8);
  for (unsigned char c : s) {
    if (c < 0x80) {
      out += char(c);
    } else {
      out += char(0xc0 | (c >> 6));
      out += char(0x80 | (c & 0x3f));
    }
  }
  return out;
}

std::string to_utf8(std::string_view s) {
  return utf8::is_valid(s) ? std::string(s) : latin1_to_utf8(s);
}

std::string normalize_whitespace(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool pending = false;
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = s[i];
    bool space = c < 0x20 || c == ' ' || c == 0x7f;
    if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0xa0) {
      space = true;  // U+00A0 no-break space
      ++i;
    }
    if (space) {
      pending = !out.empty();
      continue;
    }
    if (pending) out += ' ';
    pending = false;
    out += char(c);
  }
  return out;
}

namespace {

bool is_ascii_alpha(unsigned char c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }
bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

// Length of a printf conversion starting at s[i] == '%' (0 if none): %[n$][flags][width][.prec]
// [length]conv, or Python's %(name)s.
size_t printf_spec(std::string_view s, size_t i) {
  size_t j = i + 1;
  if (j < s.size() && s[j] == '(') {
    size_t close = s.find(')', j);
    if (close == std::string_view::npos) return 0;
    j = close + 1;
  } else {
    size_t k = j;
    while (k < s.size() && is_digit(s[k])) ++k;
    if (k > j && k < s.size() && s[k] == '$') j = k + 1;
  }
  while (j < s.size() && std::string_view("-+ #0'I").find(s[j]) != std::string_view::npos) ++j;
  while (j < s.size() && (is_digit(s[j]) || s[j] == '*')) ++j;
  if (j < s.size() && s[j] == '.') {
    ++j;
    while (j < s.size() && (is_digit(s[j]) || s[j] == '*')) ++j;
  }
  while (j < s.size() && std::string_view("hlLqjzt").find(s[j]) != std::string_view::npos) ++j;
  if (j < s.size() && std::string_view("diouxXeEfFgGaAcCsSpnm%").find(s[j]) != std::string_view::npos)
    return j + 1 - i;
  if (j < s.size() && is_digit(s[i + 1])) return j - i;  // Qt-style %1
  return 0;
}

// Code point of a letter-bearing script (rough: Latin-1 letters, Latin Extended, Greek and
// beyond, minus the punctuation/symbol blocks).
bool is_letter_cp(uint32_t cp) {
  if (cp < 0x80) return is_ascii_alpha(static_cast<unsigned char>(cp));
  if (cp >= 0xc0 && cp <= 0x24f) return cp != 0xd7 && cp != 0xf7;
  if (cp < 0x370) return false;
  if (cp >= 0x2000 && cp <= 0x2bff) return false;  // punctuation, arrows, symbols, boxes
  if (cp >= 0x3000 && cp <= 0x303f) return false;  // CJK punctuation
  if (cp >= 0xfe00 && cp <= 0xfe6f) return false;  // variation selectors, small forms
  if (cp >= 0x1f000) return false;                  // emoji and pictographs
  return true;
}

}  // namespace

bool has_words(std::string_view s) {
  int letters = 0;
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = s[i];
    if (c == '%') {
      size_t n = printf_spec(s, i);
      i += n ? n : 1;
      continue;
    }
    if (c == '<' || c == '{' || (c == '$' && i + 1 < s.size() && s[i + 1] == '{')) {
      char close = c == '<' ? '>' : '}';
      size_t e = s.find(close, i + 1);
      if (e != std::string_view::npos && e - i < 200) {
        i = e + 1;
        continue;
      }
    }
    if (c == '&') {
      size_t e = s.find(';', i + 1);
      if (e != std::string_view::npos && e - i < 10 && e > i + 1) {
        bool ent = true;
        for (size_t k = i + 1; k < e; ++k)
          ent &= is_ascii_alpha(s[k]) || is_digit(s[k]) || s[k] == '#';
        if (ent) {
          i = e + 1;
          continue;
        }
      }
    }
    if (c < 0x80) {
      letters += is_ascii_alpha(c);
      ++i;
      continue;
    }
    int len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
    uint32_t cp = len == 1 ? c : c & (0x7f >> len);
    for (int k = 1; k < len && i + k < s.size(); ++k) cp = (cp << 6) | (s[i + k] & 0x3f);
    letters += is_letter_cp(cp);
    i += len;
  }
  return letters >= 2;
}

size_t count_tokens(std::string_view s) {
  size_t n = 0;
  bool in = false;
  for (unsigned char c : s) {
    bool sp = c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
    if (!sp && !in) ++n;
    in = !sp;
  }
  return n;
}

void TextStats::add(std::string_view line) {
  ++lines;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    size_t b = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > b) {
      ++tokens;
      ++types[std::string(line.substr(b, i - b))];
    }
  }
}

nlohmann::json TextStats::to_json() const {
  return {{"lines", lines}, {"tokens", tokens}, {"types", types.size()}};
}

uint64_t group_key(std::string_view name, uint64_t seed) {
  uint64_t st = fnv1a64(name) ^ seed;
  return splitmix64(st);
}

const char* split_name(Split s) {
  return s == Split::Train ? "train" : s == Split::Valid ? "valid" : "test";
}

std::map<std::string, Split> split_groups(const std::vector<std::string>& groups,
                                          double valid_frac, double test_frac, uint64_t seed) {
  std::vector<std::string> g(groups);
  std::sort(g.begin(), g.end());
  g.erase(std::unique(g.begin(), g.end()), g.end());
  std::stable_sort(g.begin(), g.end(), [&](const std::string& a, const std::string& b) {
    return group_key(a, seed) < group_key(b, seed);
  });
  auto count = [&](double frac) -> size_t {
    if (frac <= 0) return 0;
    size_t n = size_t(std::llround(frac * double(g.size())));
    return g.size() >= 3 ? std::max<size_t>(n, 1) : n;
  };
  const size_t n_test = count(test_frac), n_valid = count(valid_frac);
  QKV_CHECK(n_test + n_valid < g.size() || g.empty(), "split_groups", "valid+test would take all ",
            g.size(), " groups (valid_frac ", valid_frac, ", test_frac ", test_frac, ")");
  std::map<std::string, Split> out;
  for (size_t i = 0; i < g.size(); ++i)
    out[g[i]] = i < n_test ? Split::Test : i < n_test + n_valid ? Split::Valid : Split::Train;
  return out;
}

bool reuse_build(BuildResult& res, const nlohmann::json& key, const std::vector<std::string>& files, bool force) {
  if (force || !is_up_to_date(res.out_dir, key, files)) return false;
  try {
    res.stats = nlohmann::json::parse(read_file(res.out_dir + "/stats.json"));
  } catch (const nlohmann::json::exception&) {
    return false;  // a damaged stats.json (edited, or a disk that filled): the build runs again
  }
  return true;
}

bool is_up_to_date(const std::string& out_dir, const nlohmann::json& key,
                   const std::vector<std::string>& files) {
  namespace fs = std::filesystem;
  const std::string stamp = out_dir + "/stamp.json";
  if (!fs::exists(stamp)) return false;
  for (const auto& f : files)
    if (!fs::exists(out_dir + "/" + f)) return false;
  try {
    return nlohmann::json::parse(read_file(stamp)) == key;
  } catch (const std::exception&) {
    return false;  // unreadable stamp: rebuild
  }
}

void write_stamp(const std::string& out_dir, const nlohmann::json& key) {
  write_file_atomic(out_dir + "/stamp.json", key.dump(2) + "\n");
}

void remove_stamp(const std::string& out_dir) {
  const std::string stamp = out_dir + "/stamp.json";
  std::error_code ec;
  std::filesystem::remove(stamp, ec);
  QKV_CHECK(!ec, stamp, "cannot remove the old build's stamp before rebuilding: ", ec.message());
}


void LabelledTexts::add(int label, const std::string& text) {
  QKV_CHECK(label >= 0 && label < num_labels_, "labelled corpus", "label ", label, " outside [0, ", num_labels_, ")");
  auto [it, fresh] = label_of_.emplace(text, label);
  if (fresh) {
    items_.emplace_back(label, text);
    return;
  }
  ++duplicates_;
  if (it->second != label) it->second = -1;
}

uint64_t LabelledTexts::conflicting() const {
  uint64_t n = 0;
  for (auto& [text, label] : label_of_) n += label < 0;
  return n;
}

std::vector<std::vector<std::string>> LabelledTexts::by_class() const {
  std::vector<std::vector<std::string>> out(static_cast<size_t>(num_labels_));
  for (auto& [label, text] : items_)
    if (label_of_.at(text) >= 0) out[size_t(label)].push_back(text);
  return out;
}

void stratified_split(std::vector<std::vector<std::string>> by_class, double valid_frac, double test_frac,
                      uint64_t seed, SplitTexts& out, std::map<std::string, uint64_t> (&classes)[3]) {
  uint64_t rng = seed;
  for (size_t c = 0; c < by_class.size(); ++c) {
    auto& v = by_class[c];
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[splitmix64(rng) % i]);
    const size_t n_test = size_t(double(v.size()) * test_frac + 0.5);
    const size_t n_valid = size_t(double(v.size()) * valid_frac + 0.5);
    for (size_t i = 0; i < v.size(); ++i) {
      Split s = i < n_test ? Split::Test : i < n_test + n_valid ? Split::Valid : Split::Train;
      out.add(s, std::to_string(c) + "\t" + v[i], v[i]);
      ++classes[int(s)][std::to_string(c)];
    }
  }
}

uint64_t write_splits(const std::string& out_dir, const std::string& ext, const SplitTexts& splits,
                      nlohmann::json& stats, const std::function<void(Split, nlohmann::json&)>& extra) {
  remove_stamp(out_dir);
  uint64_t total = 0;
  for (Split s : {Split::Train, Split::Valid, Split::Test}) {
    const int k = int(s);
    write_file_atomic(out_dir + "/" + split_name(s) + "." + ext, splits.text[k]);
    nlohmann::json& entry = stats["splits"][split_name(s)];
    entry = {{"examples", splits.stats[k].lines}, {"text", splits.stats[k].to_json()}};
    if (extra) extra(s, entry);
    total += splits.stats[k].lines;
  }
  return total;
}

void finish_build(const std::string& out_dir, nlohmann::json& stats, const nlohmann::json& key,
                  std::chrono::steady_clock::time_point t0) {
  stats["seconds_total"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  write_file_atomic(out_dir + "/stats.json", stats.dump(2) + "\n");
  write_stamp(out_dir, key);
}

}  // namespace qkv::data
