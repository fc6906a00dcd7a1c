#include "qkv/text/char_word.h"

#include <algorithm>

#include "qkv/text/bpe_train.h"
#include "qkv/text/pretokenize.h"
#include "qkv/util/utf8.h"
#include "qkv/util/error.h"
#include "qkv/util/file.h"

namespace qkv::text {

namespace {
template <typename F>
void for_each_token(VocabTokenizer::Level level, std::string_view text, F&& f) {
  if (level == VocabTokenizer::Level::Word) {
    for (auto w : whitespace_split(text)) f(w);
    return;
  }
  uint32_t cp;
  for (size_t i = 0; i < text.size();) {
    int len = utf8::decode(text, i, cp);
    f(text.substr(i, len));
    i += len;
  }
}

std::unique_ptr<VocabTokenizer> from_counts(VocabTokenizer::Level level,
                                            const std::unordered_map<std::string, int64_t>& counts,
                                            const VocabBuildOptions& opt) {
  QKV_CHECK(std::find(opt.special_tokens.begin(), opt.special_tokens.end(), opt.unk_token) !=
                opt.special_tokens.end(),
            "text vocab build", "unk_token '", opt.unk_token, "' must be one of the special tokens");
  std::vector<std::pair<std::string, int64_t>> items;
  for (auto& [t, c] : counts)
    if (c >= opt.min_frequency &&
        std::find(opt.special_tokens.begin(), opt.special_tokens.end(), t) == opt.special_tokens.end())
      items.emplace_back(t, c);
  std::sort(items.begin(), items.end(), [](auto& a, auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  std::vector<std::string> vocab = opt.special_tokens;
  for (auto& [t, c] : items) {
    if (opt.max_size > 0 && int(vocab.size()) >= opt.max_size) break;
    vocab.push_back(t);
  }
  auto tok = std::make_unique<VocabTokenizer>(level, std::move(vocab), opt.unk_token);
  for (auto& s : opt.special_tokens) {
    Role r;
    if (guess_role(s, r)) tok->set_special(r, s);
    else tok->add_special_token(s);
  }
  return tok;
}
}  // namespace

VocabTokenizer::VocabTokenizer(Level level, std::vector<std::string> vocab, std::string unk_token)
    : ListVocabTokenizer(std::move(vocab), "text vocab"), level_(level), unk_(std::move(unk_token)) {
  auto it = token_id_.find(unk_);
  QKV_CHECK(it != token_id_.end(), "text vocab", "unk_token '", unk_, "' is not in the vocabulary");
  unk_id_ = it->second;
  set_special(Role::Unk, unk_);  // what every input outside the vocabulary becomes
}

std::unique_ptr<VocabTokenizer> VocabTokenizer::build_from_text(Level level, std::string_view text,
                                                               const VocabBuildOptions& opt) {
  std::unordered_map<std::string, int64_t> counts;
  for_each_token(level, text, [&](std::string_view t) { ++counts[std::string(t)]; });
  return from_counts(level, counts, opt);
}

std::unique_ptr<VocabTokenizer> VocabTokenizer::build(Level level, const std::vector<std::string>& files,
                                                     const VocabBuildOptions& opt) {
  std::unordered_map<std::string, int64_t> counts;
  for (auto& f : files) {
    std::string text = read_file(f);
    utf8::check_lines(text, f);
    for_each_token(level, text, [&](std::string_view t) { ++counts[std::string(t)]; });
  }
  QKV_CHECK(!counts.empty(), files.empty() ? std::string("text vocab build") : files.size() == 1 ? files[0]
                                                                 : files[0] + " (and the other inputs)",
            "no text to learn a tokenizer from: every input is empty or blank");
  return from_counts(level, counts, opt);
}

void VocabTokenizer::encode_model(std::string_view text, std::vector<int32_t>& out) const {
  std::string key;
  for_each_token(level_, text, [&](std::string_view t) {
    key.assign(t);
    auto it = token_id_.find(key);
    out.push_back(it == token_id_.end() ? unk_id_ : it->second);
  });
}

std::string VocabTokenizer::decode_model(std::span<const int32_t> ids) const {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (level_ == Level::Word && i) s += ' ';
    s += vocab_.at(ids[i]);
  }
  return s;
}

}  // namespace qkv::text
