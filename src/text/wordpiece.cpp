#include "qkv/text/wordpiece.h"

#include <nlohmann/json.hpp>
#include <cstring>
#include <sys/stat.h>

#include "qkv/util/utf8.h"
#include "qkv/util/error.h"
#include "qkv/util/error_context.h"
#include "qkv/util/file.h"

namespace qkv::text {

WordPieceTokenizer::WordPieceTokenizer(std::vector<std::string> vocab, WordPieceOptions opt)
    : ListVocabTokenizer(std::move(vocab), "text wordpiece"), opt_(std::move(opt)) {
  auto it = token_id_.find(opt_.unk_token);
  QKV_CHECK(it != token_id_.end(), "text wordpiece", "unk_token '", opt_.unk_token,
            "' is not in the vocabulary");
  unk_id_ = it->second;
  QKV_CHECK(opt_.max_input_chars_per_word > 0, "text wordpiece",
            "max_input_chars_per_word must be positive, got ", opt_.max_input_chars_per_word);
}

void WordPieceTokenizer::wordpiece_word(std::string_view word, std::vector<int32_t>& out) const {
  // Byte offset of each character (code point); the limit counts characters like Python's len().
  std::vector<size_t> off;
  uint32_t cp;
  for (size_t i = 0; i < word.size();) {
    off.push_back(i);
    i += utf8::decode(word, i, cp);
  }
  const size_t nchars = off.size();
  off.push_back(word.size());
  if (nchars > size_t(opt_.max_input_chars_per_word)) {
    out.push_back(unk_id_);
    return;
  }
  size_t mark = out.size();
  std::string key;
  for (size_t start = 0; start < nchars;) {
    int32_t found = -1;
    size_t end = nchars;
    for (; end > start; --end) {
      key.clear();
      if (start > 0) key = opt_.continuing_subword_prefix;
      key.append(word.substr(off[start], off[end] - off[start]));
      auto it = token_id_.find(key);
      if (it != token_id_.end()) {
        found = it->second;
        break;
      }
    }
    if (found < 0) {
      out.resize(mark);
      out.push_back(unk_id_);
      return;
    }
    out.push_back(found);
    start = end;
  }
}

void WordPieceTokenizer::encode_model(std::string_view text, std::vector<int32_t>& out) const {
  for (const std::string& w : bert_basic_tokenize(text, opt_.normalize)) wordpiece_word(w, out);
}

std::string WordPieceTokenizer::decode_model(std::span<const int32_t> ids) const {
  std::string s;
  const std::string& pre = opt_.continuing_subword_prefix;
  for (int32_t id : ids) {
    const std::string& t = vocab_.at(id);
    if (!pre.empty() && t.compare(0, pre.size(), pre) == 0) {
      s.append(t, pre.size());
    } else {
      if (!s.empty()) s += ' ';
      s += t;
    }
  }
  // Hugging Face clean_up_tokenization.
  static const std::pair<const char*, const char*> kFix[] = {
      {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
      {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (auto [from, to] : kFix) {
    std::string f(from);
    for (size_t p = s.find(f); p != std::string::npos; p = s.find(f, p + std::strlen(to)))
      s.replace(p, f.size(), to);
  }
  return s;
}

std::unique_ptr<WordPieceTokenizer> WordPieceTokenizer::load_vocab_txt(const std::string& path) {
  std::string data = read_file(path);
  std::vector<std::string> vocab;
  size_t pos = 0;
  while (pos < data.size()) {
    size_t nl = data.find('\n', pos);
    if (nl == std::string::npos) nl = data.size();
    std::string tok = data.substr(pos, nl - pos);
    if (!tok.empty() && tok.back() == '\r') tok.pop_back();
    vocab.push_back(std::move(tok));
    pos = nl + 1;
  }
  QKV_CHECK(!vocab.empty(), "text wordpiece " + path, "empty vocabulary file");
  std::unordered_map<std::string, size_t> seen;
  for (size_t i = 0; i < vocab.size(); ++i) {
    auto [it, fresh] = seen.emplace(vocab[i], i);
    QKV_CHECK(fresh, "text wordpiece " + path, "line ", i + 1, ": token '", vocab[i],
              "' already on line ", it->second + 1);
  }
  WordPieceOptions opt;
  std::string dir = path.substr(0, path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
  std::string cfg = dir + "tokenizer_config.json";
  struct stat st;
  bool lower;
  if (::stat(cfg.c_str(), &st) == 0) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(read_file(cfg));
    } catch (const nlohmann::json::exception& e) {
      fail("text wordpiece " + cfg, "invalid JSON: ", e.what());
    }
    QKV_CHECK(j.is_object(), "text wordpiece " + cfg, "expected a JSON object, got ", j.type_name());
    QKV_CHECK(!j.contains("do_lower_case") || j["do_lower_case"].is_boolean(),
              "text wordpiece " + cfg, "field 'do_lower_case': expected a boolean, got ",
              j.value("do_lower_case", nlohmann::json()).dump());
    lower = j.value("do_lower_case", true);
  } else {
    lower = true;
    for (auto& t : vocab) {
      if (t.size() > 2 && t.front() == '[' && t.back() == ']') continue;
      for (char c : t)
        if (c >= 'A' && c <= 'Z') lower = false;
      if (!lower) break;
    }
  }
  opt.normalize.lowercase = opt.normalize.strip_accents = lower;
  return with_context("text wordpiece " + path, [&] {  // the tokenizer's own checks name the file too
    auto tok = std::make_unique<WordPieceTokenizer>(std::move(vocab), opt);
    tok->set_special_tokens(SpecialTokens::bert());
    tok->set_template(PostTemplate::bert());
    tok->set_source(path);
    return tok;
  });
}

}  // namespace qkv::text
