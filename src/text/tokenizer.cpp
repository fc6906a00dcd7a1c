#include "qkv/text/tokenizer.h"

#include <algorithm>

#include "qkv/util/error.h"

namespace qkv::text {

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (special_longest_first_.empty()) {
    encode_model(text, out);
    return out;
  }
  // Leftmost occurrence of any special token; on a tie at one position the longest wins.
  size_t start = 0;
  while (start < text.size()) {
    size_t best = std::string_view::npos;
    const std::string* best_tok = nullptr;
    for (auto& t : special_longest_first_) {
      size_t p = text.find(t, start);
      if (p < best) best = p, best_tok = &t;
    }
    if (!best_tok) break;
    if (best > start) encode_model(text.substr(start, best - start), out);
    out.push_back(special_by_token_.at(*best_tok));
    start = best + best_tok->size();
  }
  if (start < text.size()) encode_model(text.substr(start), out);
  return out;
}

void Tokenizer::apply_template(const std::vector<TemplatePiece>& t,
                               const std::vector<int32_t>* seqs, Encoding& out) const {
  for (auto& p : t) {
    if (p.is_sequence) {
      const auto& s = seqs[p.sequence];
      out.ids.insert(out.ids.end(), s.begin(), s.end());
      out.type_ids.insert(out.type_ids.end(), s.size(), p.type_id);
      out.special_mask.insert(out.special_mask.end(), s.size(), 0);
    } else {
      auto it = special_by_token_.find(p.token);
      QKV_CHECK(it != special_by_token_.end(), "text template", "token '", p.token,
                "' is not a registered special token");
      out.ids.push_back(it->second);
      out.type_ids.push_back(p.type_id);
      out.special_mask.push_back(1);
    }
  }
}

Encoding Tokenizer::encode_single(std::string_view a, bool add_special) const {
  std::vector<int32_t> seqs[2] = {encode(a), {}};
  Encoding e;
  if (add_special && !template_.single.empty()) {
    apply_template(template_.single, seqs, e);
  } else {
    e.ids = seqs[0];
    e.type_ids.assign(e.ids.size(), 0);
    e.special_mask.assign(e.ids.size(), 0);
  }
  return e;
}

Encoding Tokenizer::encode_pair(std::string_view a, std::string_view b, bool add_special) const {
  std::vector<int32_t> seqs[2] = {encode(a), encode(b)};
  Encoding e;
  if (add_special && !template_.pair.empty()) {
    apply_template(template_.pair, seqs, e);
  } else {
    for (int s = 0; s < 2; ++s) {
      e.ids.insert(e.ids.end(), seqs[s].begin(), seqs[s].end());
      e.type_ids.insert(e.type_ids.end(), seqs[s].size(), s);
    }
    e.special_mask.assign(e.ids.size(), 0);
  }
  return e;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  for (size_t i = 0; i < ids.size(); ++i)
    QKV_CHECK(special_by_id_.count(ids[i]) || (ids[i] >= 0 && ids[i] < model_vocab_size()),
              "text decode", "id ", ids[i], " at position ", i, " is outside the vocabulary [0, ",
              vocab_size(), ")");
  std::vector<int32_t> run;
  run.reserve(ids.size());
  if (skip_special) {
    for (int32_t id : ids)
      if (!special_by_id_.count(id)) run.push_back(id);
    return decode_model(run);
  }
  // Specials kept: model runs decoded in between, pieces joined by a space where the model does.
  std::string out;
  auto piece = [&](const std::string& p) {
    if (!out.empty() && decode_joins_with_space()) out += ' ';
    out += p;
  };
  for (int32_t id : ids) {
    auto it = special_by_id_.find(id);
    if (it == special_by_id_.end()) {
      run.push_back(id);
      continue;
    }
    if (!run.empty()) piece(decode_model(run)), run.clear();
    piece(it->second);
  }
  if (!run.empty()) piece(decode_model(run));
  return out;
}

int32_t Tokenizer::vocab_size() const {
  int32_t n = model_vocab_size();
  for (auto& [id, t] : special_by_id_) n = std::max(n, id + 1);
  return n;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  auto it = special_by_token_.find(std::string(token));
  if (it != special_by_token_.end()) return it->second;
  return model_token_to_id(token);
}

std::string Tokenizer::id_to_token(int32_t id) const {
  auto it = special_by_id_.find(id);
  if (it != special_by_id_.end()) return it->second;
  QKV_CHECK(id >= 0 && id < model_vocab_size(), "text id_to_token", "id ", id,
            " outside the vocabulary [0, ", vocab_size(), ")");
  return model_id_to_token(id);
}

std::optional<int32_t> Tokenizer::special_id(Role r) const {
  auto it = specials_.tokens.find(r);
  if (it == specials_.tokens.end()) return std::nullopt;
  return special_by_token_.at(it->second);
}

int32_t Tokenizer::require_special_id(Role r) const {
  auto id = special_id(r);
  // Named by the file it came from, where there is one (`qkv embed` on a tokenizer.json without
  // [CLS] said only "this wordpiece tokenizer has no 'cls' token").
  QKV_CHECK(id.has_value(), source().empty() ? std::string("text special tokens") : source(), "this ", kind(),
            " tokenizer has no '", role_name(r), "' token");
  return *id;
}

void Tokenizer::add_special_token(const std::string& token) {
  QKV_CHECK(!token.empty(), "text special tokens", "empty special token");
  if (special_by_token_.count(token)) return;
  std::optional<int32_t> id = model_token_to_id(token);
  int32_t new_id = id ? *id : vocab_size();
  special_by_token_[token] = new_id;
  special_by_id_[new_id] = token;
  special_longest_first_.push_back(token);
  std::stable_sort(special_longest_first_.begin(), special_longest_first_.end(),
                   [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
}

void Tokenizer::set_special(Role r, const std::string& token) {
  add_special_token(token);
  specials_.tokens[r] = token;
}

void Tokenizer::set_special_tokens(const SpecialTokens& s) {
  for (auto& [r, t] : s.tokens) set_special(r, t);
}

void Tokenizer::set_template(const PostTemplate& t) {
  for (auto& tok : t.special_tokens()) add_special_token(tok);
  template_ = t;
}

std::vector<std::pair<std::string, int32_t>> Tokenizer::added_tokens() const {
  std::vector<std::pair<std::string, int32_t>> out(special_by_token_.begin(), special_by_token_.end());
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.second < b.second; });
  return out;
}

ListVocabTokenizer::ListVocabTokenizer(std::vector<std::string> vocab, const char* where)
    : vocab_(std::move(vocab)) {
  token_id_.reserve(vocab_.size() * 2);
  for (size_t i = 0; i < vocab_.size(); ++i) {
    auto [it, fresh] = token_id_.emplace(vocab_[i], int32_t(i));
    QKV_CHECK(fresh, where, "vocabulary token '", vocab_[i], "' appears twice (ids ", it->second, " and ", i, ")");
  }
}

std::optional<int32_t> ListVocabTokenizer::model_token_to_id(std::string_view token) const {
  auto it = token_id_.find(std::string(token));
  if (it == token_id_.end()) return std::nullopt;
  return it->second;
}

bool truncate_longest_first(std::vector<int32_t>& a, std::vector<int32_t>& b, int64_t budget) {
  QKV_CHECK(budget >= 0, "truncate_longest_first", "budget must be >= 0, got ", budget);
  bool cut = false;
  while (int64_t(a.size() + b.size()) > budget) {
    (a.size() > b.size() ? a : b).pop_back();
    cut = true;
  }
  return cut;
}

}  // namespace qkv::text
