// The attention viewer page: data checks, the embedded JSON, the HTML document around it.
#include "qkv/viz/attention_page.h"

#include <charconv>
#include <cmath>
#include <set>

#include "attention_page_assets.h"
#include "qkv/util/error.h"
#include "qkv/util/file.h"

namespace qkv::viz {
namespace {

constexpr const char* kFormat = "qkv-attention-view-1";
constexpr const char* kDataOpen = "<script type=\"application/json\" id=\"qkv-data\">";
constexpr const char* kDataClose = "</script>";

const std::vector<std::string>* find_sequence(const AttentionPage& p, const std::string& name) {
  for (const auto& [n, toks] : p.sequences)
    if (n == name) return &toks;
  return nullptr;
}

// The shortest decimal that reads back as the same float; non-finite values (none in softmax
// weights) as null.
void append_float(std::string& out, float v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  if (v == 0.0f) {  // also -0
    out += '0';
    return;
  }
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void append_floats(std::string& out, const std::vector<float>& v) {
  out += '[';
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    append_float(out, v[i]);
  }
  out += ']';
}

std::string str(const std::string& s) { return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

}  // namespace

void check_attention_page(const AttentionPage& p) {
  std::set<std::string> names;
  for (const auto& [n, toks] : p.sequences) {
    QKV_CHECK(names.insert(n).second, "attention page", "sequence \"", n, "\" given twice");
    QKV_CHECK(!toks.empty(), "attention page", "sequence \"", n, "\" has no tokens");
  }
  for (const auto& [n, seg] : p.segments) {
    const auto* toks = find_sequence(p, n);
    QKV_CHECK(toks && toks->size() == seg.size(), "attention page", "segments of \"", n,
              "\" must give one id per token of a sequence of that name");
  }
  for (const AttentionSet& s : p.sets) {
    const auto* q = find_sequence(p, s.queries);
    const auto* k = find_sequence(p, s.keys);
    QKV_CHECK(q && k, "attention page", "set \"", s.name, "\" names sequences \"", s.queries, "\" and \"", s.keys,
              "\"; the page has no sequence of one of those names");
    QKV_CHECK(int64_t(q->size()) == s.tq && int64_t(k->size()) == s.tk, "attention page", "set \"", s.name,
              "\" is ", s.tq, " x ", s.tk, " but its sequences have ", q->size(), " and ", k->size(), " tokens");
    QKV_CHECK(!s.layers.empty() && !s.heads.empty(), "attention page", "set \"", s.name, "\" has no layers or heads");
    const size_t n = s.layers.size() * s.heads.size() * size_t(s.tq) * size_t(s.tk);
    QKV_CHECK(s.weights.size() == n, "attention page", "set \"", s.name, "\" needs ", n, " weights (layers x heads x ",
              s.tq, " x ", s.tk, "), got ", s.weights.size());
  }
  QKV_CHECK(!p.sets.empty(), "attention page", "no attention to show");
  if (p.positional) {
    const PositionalPanel& pe = *p.positional;
    QKV_CHECK(pe.table.size() == size_t(pe.positions * pe.dim) && pe.dots.size() == size_t(pe.positions * pe.positions),
              "attention page", "positional panel: table must be (", pe.positions, ", ", pe.dim, ") and dots (",
              pe.positions, ", ", pe.positions, ")");
  }
}

int64_t attention_page_size_bound(const AttentionPage& p) {
  int64_t bytes = kPageOverheadBytes;
  for (const auto& [n, toks] : p.sequences) {
    bytes += int64_t(n.size()) + 8;
    for (const auto& t : toks) bytes += 6 * int64_t(t.size()) + 3;  // worst case: every byte \u-escaped
  }
  for (const auto& [n, seg] : p.segments) bytes += int64_t(n.size()) + 8 + 12 * int64_t(seg.size());
  for (const auto& [k, v] : p.info) bytes += 6 * int64_t(k.size() + v.size()) + 8;
  for (const auto& n : p.notes) bytes += 6 * int64_t(n.size()) + 3;
  for (const AttentionSet& s : p.sets)
    bytes += 512 + 6 * int64_t(s.name.size()) + 22 * int64_t(s.layers.size() + s.heads.size()) +
             kMaxBytesPerWeight * int64_t(s.weights.size());
  if (p.positional)
    bytes += 512 + kMaxBytesPerWeight * int64_t(p.positional->table.size() + p.positional->dots.size());
  return bytes;
}

std::string attention_page_json(const AttentionPage& p) {
  check_attention_page(p);
  std::string o = "{\"format\":" + str(kFormat) + ",\"title\":" + str(p.title) + ",\"model_type\":" + str(p.model_type);
  o += ",\"info\":[";
  for (size_t i = 0; i < p.info.size(); ++i) o += (i ? ",[" : "[") + str(p.info[i].first) + "," + str(p.info[i].second) + "]";
  o += "],\"notes\":[";
  for (size_t i = 0; i < p.notes.size(); ++i) o += (i ? "," : "") + str(p.notes[i]);
  o += "],\"sequences\":{";
  for (size_t i = 0; i < p.sequences.size(); ++i) {
    o += (i ? "," : "") + str(p.sequences[i].first) + ":[";
    for (size_t t = 0; t < p.sequences[i].second.size(); ++t) o += (t ? "," : "") + str(p.sequences[i].second[t]);
    o += "]";
  }
  o += "},\"segments\":{";
  for (size_t i = 0; i < p.segments.size(); ++i) {
    o += (i ? "," : "") + str(p.segments[i].first) + ":[";
    for (size_t t = 0; t < p.segments[i].second.size(); ++t) o += (t ? "," : "") + std::to_string(p.segments[i].second[t]);
    o += "]";
  }
  o += "},\"sets\":[";
  for (size_t i = 0; i < p.sets.size(); ++i) {
    const AttentionSet& s = p.sets[i];
    o += (i ? ",{" : "{") + std::string("\"name\":") + str(s.name) + ",\"queries\":" + str(s.queries) +
         ",\"keys\":" + str(s.keys) + ",\"causal\":" + (s.causal ? "true" : "false") + ",\"layers\":[";
    for (size_t l = 0; l < s.layers.size(); ++l) o += (l ? "," : "") + std::to_string(s.layers[l]);
    o += "],\"heads\":[";
    for (size_t h = 0; h < s.heads.size(); ++h) o += (h ? "," : "") + std::to_string(s.heads[h]);
    o += "],\"tq\":" + std::to_string(s.tq) + ",\"tk\":" + std::to_string(s.tk) + ",\"weights\":";
    o.reserve(o.size() + s.weights.size() * 11);
    append_floats(o, s.weights);
    o += "}";
  }
  o += "],\"positional\":";
  if (p.positional) {
    const PositionalPanel& pe = *p.positional;
    o += "{\"name\":" + str(pe.name) + ",\"positions\":" + std::to_string(pe.positions) +
         ",\"dim\":" + std::to_string(pe.dim) + ",\"table\":";
    append_floats(o, pe.table);
    o += ",\"dots\":";
    append_floats(o, pe.dots);
    o += "}";
  } else {
    o += "null";
  }
  o += "}";
  return o;
}

std::string attention_page_html(const AttentionPage& p) {
  std::string data = attention_page_json(p);
  // Inside <script> no '<' of the data may reach the HTML parser: "</" could close the element, and
  // "<!--<script" (an input text, say) switched it into its "double-escaped" state, in which the
  // element's own "</script>" closed nothing, the viewer's script became data and the page stayed
  // blank. JSON has '<' and '>' only inside strings, where "\u003c" and "\u003e" stand for them.
  std::string safe;
  safe.reserve(data.size() + 16);
  for (char c : data) {
    if (c == '<') safe += "\\u003c";
    else if (c == '>') safe += "\\u003e";
    else safe += c;
  }
  std::string html_title;
  for (char c : p.title) {
    if (c == '<') html_title += "&lt;";
    else if (c == '>') html_title += "&gt;";
    else if (c == '&') html_title += "&amp;";
    else html_title += c;
  }
  std::string o;
  o.reserve(safe.size() + 64 * 1024);
  o += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>" + html_title + "</title>\n";
  o += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'unsafe-inline'; "
       "style-src 'unsafe-inline'; img-src data:\">\n";
  o += "<style>\n";
  o += detail::kAttentionPageCss;
  o += "</style></head>\n<body>\n";
  o += detail::kAttentionPageBody;
  o += kDataOpen;
  o += safe;
  o += kDataClose;
  o += "\n<script>\n";
  o += detail::kAttentionPageJs;
  o += "</script>\n</body></html>\n";
  return o;
}

int64_t write_attention_page(const std::string& path, const AttentionPage& p) {
  std::string html = attention_page_html(p);
  write_file_atomic(path, html);
  return int64_t(html.size());
}

nlohmann::json read_attention_page_json(const std::string& html, const std::string& where) {
  auto b = html.find(kDataOpen);
  QKV_CHECK(b != std::string::npos, where, "no embedded attention data (", kDataOpen, ")");
  b += std::string(kDataOpen).size();
  auto e = html.find(kDataClose, b);
  QKV_CHECK(e != std::string::npos, where, "the embedded attention data is not closed by ", kDataClose);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(html.substr(b, e - b));
  } catch (const std::exception& ex) {
    fail(where, "the embedded attention data is not valid JSON: ", ex.what());
  }
  QKV_CHECK(j.value("format", "") == kFormat, where, "expected format \"", kFormat, "\"");
  return j;
}

}  // namespace qkv::viz
