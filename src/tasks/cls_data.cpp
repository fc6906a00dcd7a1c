#include "qkv/tasks/cls_data.h"

#include <algorithm>
#include <fstream>
#include <set>

#include "qkv/util/error.h"
#include "qkv/util/utf8.h"

namespace qkv::tasks {
namespace {

std::vector<std::string_view> split_tabs(std::string_view line) {
  std::vector<std::string_view> f;
  size_t s = 0;
  for (;;) {
    size_t t = line.find('\t', s);
    f.push_back(line.substr(s, t == std::string_view::npos ? std::string_view::npos : t - s));
    if (t == std::string_view::npos) return f;
    s = t + 1;
  }
}

std::string_view strip_cr(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

bool is_integer(const std::string& s) {
  size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  if (i >= s.size() || s.size() - i > 15) return false;
  return std::all_of(s.begin() + long(i), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

ClsInput parse_cls_input(std::string_view line, int fields, const std::string& where) {
  QKV_CHECK(utf8::is_valid(line), where, "not valid UTF-8");
  auto f = split_tabs(line);
  QKV_CHECK(int(f.size()) == fields, where, "expected ", fields == 2 ? "2 tab-separated fields (a<TAB>b) for a pair model"
                                                                     : "1 field (a text without tabs)",
            ", got ", f.size(), " fields");
  ClsInput in;
  in.a = std::string(f[0]);
  if (fields == 2) {
    in.b = std::string(f[1]);
    in.pair = true;
  }
  return in;
}

std::vector<ClsInput> read_cls_inputs(std::istream& in, const std::string& name, int pairs,
                                      std::vector<int64_t>* line_numbers) {
  std::vector<std::string> lines;  // every line is an input: answers line up with the lines
  for (std::string line; std::getline(in, line);) lines.emplace_back(strip_cr(line));
  int fields = pairs < 0 ? 0 : pairs ? 2 : 1;
  if (fields == 0) {  // the first line that is not blank decides (a blank one is the empty text, or a bad pair)
    auto first = std::find_if(lines.begin(), lines.end(), [](const std::string& l) { return !l.empty(); });
    fields = first != lines.end() && std::count(first->begin(), first->end(), '\t') == 1 ? 2 : 1;
  }
  std::vector<ClsInput> out;
  for (size_t i = 0; i < lines.size(); ++i) {
    out.push_back(parse_cls_input(lines[i], fields, name + ":" + std::to_string(i + 1)));
    if (line_numbers) line_numbers->push_back(int64_t(i + 1));
  }
  QKV_CHECK(!out.empty(), name, "no input lines (expected ", pairs > 0 ? "a<TAB>b pairs" : "texts", ", one per line)");
  return out;
}

LabelledSet read_labelled(std::istream& in, const std::string& name) {
  LabelledSet s;
  std::string line;
  int64_t n = 0;
  size_t fields = 0;
  while (std::getline(in, line)) {
    ++n;
    std::string_view l = strip_cr(line);
    if (l.empty()) continue;
    const std::string where = name + ":" + std::to_string(n);
    QKV_CHECK(utf8::is_valid(l), where, "not valid UTF-8");
    auto f = split_tabs(l);
    if (fields == 0) {
      QKV_CHECK(f.size() == 2 || f.size() == 3, where, "expected label<TAB>text or label<TAB>a<TAB>b, got ", f.size(),
                " tab-separated fields");
      fields = f.size();
      s.pairs = fields == 3;
    }
    QKV_CHECK(f.size() == fields, where, "expected ", fields, " tab-separated fields like the first line, got ",
              f.size());
    QKV_CHECK(!f[0].empty(), where, "empty label");
    s.gold.emplace_back(f[0]);
    s.lines.push_back(n);
    ClsInput x;
    x.a = std::string(f[1]);
    if (s.pairs) {
      x.b = std::string(f[2]);
      x.pair = true;
    }
    s.inputs.push_back(std::move(x));
  }
  QKV_CHECK(!s.gold.empty(), name, "no labelled examples");
  return s;
}

LabelledSet read_labelled_tsv(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  QKV_CHECK(f.good(), path, "cannot open for reading");
  return read_labelled(f, path);
}

std::vector<std::string> label_names(const std::vector<std::string>& gold) {
  std::set<std::string> distinct(gold.begin(), gold.end());
  std::vector<std::string> v(distinct.begin(), distinct.end());
  if (std::all_of(v.begin(), v.end(), is_integer))
    std::stable_sort(v.begin(), v.end(), [](const std::string& x, const std::string& y) { return std::stoll(x) < std::stoll(y); });
  return v;
}

}  // namespace qkv::tasks
