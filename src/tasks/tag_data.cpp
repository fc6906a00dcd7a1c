#include "qkv/tasks/tag_data.h"

#include <algorithm>
#include <fstream>
#include <set>

#include "qkv/eval/ner.h"
#include "qkv/util/error.h"
#include "qkv/util/utf8.h"

namespace qkv::tasks {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

bool has_space(const std::string& s) { return std::any_of(s.begin(), s.end(), is_space); }

// "B-PKG" -> ("PKG", 0), "I-PKG" -> ("PKG", 1), ... ; other names -> ("", 9).
std::pair<std::string, int> chunk_key(const std::string& tag) {
  static const std::string prefixes = "BIES";
  if (tag.size() > 2 && tag[1] == '-' && prefixes.find(tag[0]) != std::string::npos)
    return {tag.substr(2), int(prefixes.find(tag[0]))};
  return {"", 9};
}

}  // namespace

std::vector<TaggedSentence> read_conll(std::istream& in, const std::string& name) {
  std::vector<TaggedSentence> out;
  TaggedSentence cur;
  int64_t line_no = 0;
  auto flush = [&] {
    if (!cur.words.empty()) out.push_back(std::move(cur));
    cur = TaggedSentence();
  };
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string where = name + ":" + std::to_string(line_no);
    QKV_CHECK(utf8::is_valid(line), where, "invalid UTF-8");
    if (line.find_first_not_of(" \t") == std::string::npos) {
      flush();
      continue;
    }
    const size_t tab = line.find('\t');
    QKV_CHECK(tab != std::string::npos, where, "expected 'word<TAB>tag', got '", line, "' (no tab)");
    QKV_CHECK(line.find('\t', tab + 1) == std::string::npos, where,
              "expected 2 tab-separated fields (word, tag), got more: '", line, "'");
    std::string word = line.substr(0, tab), tag = line.substr(tab + 1);
    QKV_CHECK(!word.empty() && !has_space(word), where, "field 'word': expected a non-empty word without spaces, got '",
              word, "'");
    QKV_CHECK(!tag.empty() && !has_space(tag), where, "field 'tag': expected a non-empty tag without spaces, got '",
              tag, "'");
    if (word == "-DOCSTART-") {
      flush();
      continue;
    }
    if (cur.words.empty()) cur.line = line_no;
    cur.words.push_back(std::move(word));
    cur.tags.push_back(std::move(tag));
  }
  flush();
  return out;
}

std::vector<TaggedSentence> read_conll_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  QKV_CHECK(f.good(), path, "cannot open the tagged file (word<TAB>tag lines, a blank line between sentences)");
  std::vector<TaggedSentence> s = read_conll(f, path);
  QKV_CHECK(!s.empty(), path, "holds no sentence (expected word<TAB>tag lines, a blank line between sentences)");
  return s;
}

std::string conll_text(const std::vector<TaggedSentence>& sentences) {
  std::string out;
  for (const auto& s : sentences) {
    for (size_t i = 0; i < s.words.size(); ++i) out += s.words[i] + "\t" + s.tags[i] + "\n";
    out += "\n";
  }
  return out;
}

std::vector<std::vector<std::string>> read_word_lines(std::istream& in, const std::string& name,
                                                      std::vector<int64_t>* line_numbers) {
  std::vector<std::vector<std::string>> out;
  int64_t line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    QKV_CHECK(utf8::is_valid(line), name + ":" + std::to_string(line_no), "invalid UTF-8");
    std::vector<std::string> words;
    size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && is_space(line[i])) ++i;
      size_t j = i;
      while (j < line.size() && !is_space(line[j])) ++j;
      if (j > i) words.push_back(line.substr(i, j - i));
      i = j;
    }
    out.push_back(std::move(words));
    if (line_numbers) line_numbers->push_back(line_no);
  }
  QKV_CHECK(!out.empty(), name, "no sentences to tag (expected one sentence per line)");
  return out;
}

std::vector<std::string> tag_names(const std::vector<TaggedSentence>& sentences) {
  std::set<std::string> all;
  for (const auto& s : sentences) all.insert(s.tags.begin(), s.tags.end());
  std::vector<std::string> names(all.begin(), all.end());
  std::stable_sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
    if ((a == "O") != (b == "O")) return a == "O";
    const auto ka = chunk_key(a), kb = chunk_key(b);
    if (ka.second != 9 && kb.second != 9) return ka < kb;
    if ((ka.second != 9) != (kb.second != 9)) return ka.second != 9;  // chunk tags before others
    return a < b;
  });
  return names;
}

bool is_chunk_tagset(const std::vector<std::string>& names) {
  bool any_chunk = false;
  for (const auto& n : names) {
    if (n == "O") continue;
    if (chunk_key(n).second == 9) return false;
    any_chunk = true;
  }
  return any_chunk;
}

TagScores score_tags(const std::vector<std::vector<std::string>>& pred,
                     const std::vector<std::vector<std::string>>& gold) {
  QKV_CHECK(pred.size() == gold.size(), "score_tags", pred.size(), " predicted sentences for ", gold.size(), " gold");
  TagScores s;
  std::set<std::string> names;
  for (size_t i = 0; i < gold.size(); ++i) {
    QKV_CHECK(pred[i].size() == gold[i].size(), "score_tags", "sentence ", i + 1, ": ", pred[i].size(),
              " predicted tags for ", gold[i].size(), " words");
    for (size_t j = 0; j < gold[i].size(); ++j) s.correct += pred[i][j] == gold[i][j];
    s.words += int64_t(gold[i].size());
    // Predicted tags too: gold of "O" alone is still a BIO task when the tagger finds entities (its
    // false positives were dropped with the entity scores).
    names.insert(gold[i].begin(), gold[i].end());
    names.insert(pred[i].begin(), pred[i].end());
  }
  s.accuracy = s.words ? double(s.correct) / double(s.words) : 0.0;
  s.chunked = is_chunk_tagset(std::vector<std::string>(names.begin(), names.end()));
  if (s.chunked) {
    const eval::NerScores n = eval::ner_scores(pred, gold);
    s.precision = n.precision;
    s.recall = n.recall;
    s.f1 = n.f1;
    s.n_pred = n.n_pred;
    s.n_gold = n.n_gold;
    s.n_correct = n.n_correct;
  }
  return s;
}

}  // namespace qkv::tasks
