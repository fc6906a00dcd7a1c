// qkv/viz/attention_page.h - the interactive attention viewer: one self-contained HTML file (the
// data embedded as JSON, the page's JavaScript and CSS inline, no network access) with
//   - the head view: query tokens left, key tokens right, one line per (head, query, key) whose
//     opacity is the weight; a layer picker; heads shown or hidden by colour; hovering a token
//     shows only its lines;
//   - the model view: a small heatmap per layer and head, each clickable to enlarge;
//   - the matrix view: one layer/head with token labels on both axes and the weight on hover;
//   - a selector between the model's attention sets (encoder self, decoder self (causal), cross);
//   - a positional-encoding panel (the sinusoidal table and the dot products between positions),
//     when the model adds sinusoidal positions.
// What goes in the page (which model, which tokens, which weights) is decided in tasks/
// (attention_view.h); this file only lays the data out and writes it.
//
// Sizes. The embedded weights are written as the shortest decimal that reads back as the same
// float (std::to_chars), at most kMaxBytesPerWeight bytes each with the separator, so a page is
// at most kPageOverheadBytes + kMaxBytesPerWeight * (number of weights) + the token labels.
// Past kModelViewMaxCells query or key tokens, the model view's thumbnails are max-pooled to that
// many cells per axis and the page says so (head and matrix views stay exact).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace qkv::viz {

inline constexpr int64_t kMaxBytesPerWeight = 15;       // "-1.2345678e-05," is the longest
inline constexpr int64_t kPageOverheadBytes = 64 * 1024;  // HTML, CSS and JavaScript
inline constexpr int64_t kModelViewMaxCells = 48;

// One family of attention maps of the model, e.g. the decoder's cross-attention.
struct AttentionSet {
  std::string name;            // shown in the selector, e.g. "cross-attention (decoder -> encoder)"
  std::string queries, keys;   // names of the token sequences (AttentionPage::sequences)
  bool causal = false;         // a decoder's self-attention: key j > query i is masked (weight 0)
  std::vector<int64_t> layers, heads;  // the model's layer and head numbers the weights are of
  int64_t tq = 0, tk = 0;
  std::vector<float> weights;  // (layers, heads, tq, tk) row-major: softmax over the last axis
};

// The positional-encoding panel: the table added to the embeddings, and its Gram matrix.
struct PositionalPanel {
  std::string name;          // e.g. "sinusoidal (interleaved sin/cos), d_model 64"
  int64_t positions = 0, dim = 0;
  std::vector<float> table;  // (positions, dim)
  std::vector<float> dots;   // (positions, positions): PE[i] . PE[j]
};

struct AttentionPage {
  std::string title;       // e.g. "qkv attention: runs/demo/model"
  std::string model_type;  // "transformer" | "gpt" | "bert" | "rnn"
  std::vector<std::pair<std::string, std::string>> info;  // shown as a table: ("source", "..."), ...
  std::vector<std::string> notes;                          // warnings shown on the page
  std::vector<std::pair<std::string, std::vector<std::string>>> sequences;  // name -> token labels
  std::vector<std::pair<std::string, std::vector<int>>> segments;  // name -> segment id per token (BERT)
  std::vector<AttentionSet> sets;
  std::optional<PositionalPanel> positional;
};

// Checks the page is consistent (set shapes, sequence names and lengths; qkv::Error naming what).
void check_attention_page(const AttentionPage& page);
// An upper bound of the written size in bytes (the bound documented above).
int64_t attention_page_size_bound(const AttentionPage& page);
// The page's data as JSON text (format "qkv-attention-view-1"), as embedded in the HTML.
std::string attention_page_json(const AttentionPage& page);
// The whole HTML document.
std::string attention_page_html(const AttentionPage& page);
// Writes the HTML document to `path` atomically; returns its size in bytes.
int64_t write_attention_page(const std::string& path, const AttentionPage& page);
// The JSON embedded in an HTML document written above (for tests and tools); `where` names the
// source in errors.
nlohmann::json read_attention_page_json(const std::string& html, const std::string& where);

}  // namespace qkv::viz
