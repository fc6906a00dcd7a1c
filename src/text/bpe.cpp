#include "qkv/text/bpe.h"

#include <nlohmann/json.hpp>

#include "qkv/text/pretokenize.h"
#include "qkv/util/utf8.h"
#include "qkv/util/error.h"
#include "qkv/util/error_context.h"
#include "qkv/util/file.h"

namespace qkv::text {

namespace {
constexpr size_t kCacheMax = 1 << 20;     // entries; the cache is cleared when it grows past this
constexpr size_t kCacheWordMax = 64;      // longer pre-tokens are not cached
constexpr size_t kScanSymbolsMax = 128;   // longer pre-tokens: the queue (bpe_merge.cpp), as fast at 128
}  // namespace

BpeTokenizer::BpeTokenizer(std::vector<std::string> vocab, std::vector<Merge> merges, BpeOptions opt)
    : ListVocabTokenizer(std::move(vocab), "text bpe"), opt_(std::move(opt)), merges_(std::move(merges)) {
  const char* where = "text bpe";
  auto id_of = [&](const std::string& t, size_t rank, const char* part) {
    auto it = token_id_.find(t);
    QKV_CHECK(it != token_id_.end(), where, "merge ", rank, " ('", merges_[rank].first, " ",
              merges_[rank].second, "'): ", part, " '", t, "' is not in the vocabulary");
    return it->second;
  };
  merge_of_.reserve(merges_.size() * 2);
  for (size_t r = 0; r < merges_.size(); ++r) {
    auto& [a, b] = merges_[r];
    int32_t ia = id_of(a, r, "left part"), ib = id_of(b, r, "right part");
    int32_t res = id_of(a + b, r, "result");
    merge_of_.emplace(key(ia, ib), MergeInfo{int32_t(r), res});  // first (lowest) rank wins
  }
  if (opt_.js_comma_key_quirk) {
    // gpt-3-encoder looks ranks up by `${left},${right}`: another split of a merge's key at a
    // different comma finds that merge's rank. The merged string is left + right.
    for (size_t r = 0; r < merges_.size(); ++r) {
      std::string k = merges_[r].first + "," + merges_[r].second;
      for (size_t c = 1; c + 1 < k.size(); ++c) {
        if (k[c] != ',' || c == merges_[r].first.size()) continue;
        auto x = token_id_.find(k.substr(0, c)), y = token_id_.find(k.substr(c + 1));
        if (x == token_id_.end() || y == token_id_.end()) continue;
        auto res = token_id_.find(x->first + y->first);
        QKV_CHECK(res != token_id_.end(), where, "quirk pair result not in vocabulary");
        merge_of_.emplace(key(x->second, y->second), MergeInfo{int32_t(r), res->second});
      }
    }
  }
  if (opt_.byte_level) {
    id_bytes_.resize(vocab_.size());
    for (int b = 0; b < 256; ++b) {
      std::string sym;
      utf8::append(sym, byte_to_unicode()[b]);
      auto it = token_id_.find(sym);
      QKV_CHECK(it != token_id_.end(), where, "byte-level vocabulary lacks the symbol of byte ", b);
      byte_id_[b] = it->second;
    }
    for (size_t i = 0; i < vocab_.size(); ++i) {
      const std::string& t = vocab_[i];
      std::string raw;
      bool ok = true;
      for (size_t p = 0; p < t.size();) {
        uint32_t cp;
        p += utf8::decode(t, p, cp);
        int b = cp == utf8::kInvalid ? -1 : unicode_to_byte(cp);
        if (b < 0) { ok = false; break; }
        raw += char(b);
      }
      id_bytes_[i] = ok ? raw : t;  // tokens outside the byte alphabet decode as written
    }
  }
  if (!opt_.unk_token.empty()) {
    auto it = token_id_.find(opt_.unk_token);
    QKV_CHECK(it != token_id_.end(), where, "unk_token '", opt_.unk_token, "' is not in the vocabulary");
    unk_id_ = it->second;
  }
}

void BpeTokenizer::initial_symbols(std::string_view word, std::vector<int32_t>& syms) const {
  syms.clear();
  if (opt_.byte_level) {
    for (unsigned char b : word) syms.push_back(byte_id_[b]);
    return;
  }
  std::string sym;
  for (size_t i = 0; i < word.size();) {
    uint32_t cp;
    int len = utf8::decode(word, i, cp);
    sym.assign(word.substr(i, len));
    i += len;
    if (i == word.size()) sym += opt_.end_of_word_suffix;
    auto it = token_id_.find(sym);
    if (it != token_id_.end()) {
      syms.push_back(it->second);
    } else {
      if (unk_id_ < 0)
        fail(source().empty() ? std::string("text bpe encode") : "text bpe encode, tokenizer " + source(),
             "character '", sym, "' is not in the vocabulary and the tokenizer has no unk_token");
      syms.push_back(unk_id_);
    }
  }
}

void BpeTokenizer::bpe_word(std::string_view word, std::vector<int32_t>& out) const {
  std::vector<int32_t> w;
  initial_symbols(word, w);
  if (w.size() <= kScanSymbolsMax) merge_by_scan(w);
  else merge_by_queue(w);
  out.insert(out.end(), w.begin(), w.end());
}

void BpeTokenizer::encode_word_cached(std::string_view word, std::vector<int32_t>& out) const {
  if (word.size() == 1 && opt_.byte_level) {
    out.push_back(byte_id_[(unsigned char)word[0]]);
    return;
  }
  if (word.size() > kCacheWordMax) {
    bpe_word(word, out);
    return;
  }
  std::string k(word);
  {
    std::lock_guard<std::mutex> lock(cache_mu_);
    auto it = cache_.find(k);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  size_t start = out.size();
  bpe_word(word, out);
  std::vector<int32_t> v(out.begin() + start, out.end());
  std::lock_guard<std::mutex> lock(cache_mu_);
  if (cache_.size() >= kCacheMax) cache_.clear();
  cache_.emplace(std::move(k), std::move(v));
}

void BpeTokenizer::encode_model(std::string_view text, std::vector<int32_t>& out) const {
  if (opt_.byte_level) {
    gpt2_pretokenize(text, [&](std::string_view w) { encode_word_cached(w, out); });
  } else {
    for (std::string_view w : whitespace_split(text)) encode_word_cached(w, out);
  }
}

std::string BpeTokenizer::decode_model(std::span<const int32_t> ids) const {
  std::string out;
  if (opt_.byte_level) {
    for (int32_t id : ids) out += id_bytes_.at(id);
    return out;
  }
  // Word-level: the suffix marks a word end -> a space between words.
  const std::string& suf = opt_.end_of_word_suffix;
  for (int32_t id : ids) {
    const std::string& t = vocab_.at(id);
    if (!suf.empty() && t.size() >= suf.size() && t.compare(t.size() - suf.size(), suf.size(), suf) == 0) {
      out.append(t, 0, t.size() - suf.size());
      out += ' ';
    } else {
      out += t;
    }
  }
  if (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

std::unique_ptr<BpeTokenizer> BpeTokenizer::load_gpt2(const std::string& encoder_json,
                                                      const std::string& vocab_bpe,
                                                      bool js_comma_key_quirk) {
  nlohmann::json enc;
  try {
    enc = nlohmann::json::parse(read_file(encoder_json));
  } catch (const nlohmann::json::exception& e) {
    fail("text gpt2 " + encoder_json, "invalid JSON: ", e.what());
  }
  QKV_CHECK(enc.is_object(), "text gpt2 " + encoder_json, "expected an object token -> id, got ",
            enc.type_name());
  std::vector<std::string> vocab(enc.size());
  std::vector<bool> seen(enc.size());
  for (auto& [tok, idv] : enc.items()) {
    QKV_CHECK(idv.is_number_integer() && idv.get<int64_t>() >= 0 && idv.get<int64_t>() < int64_t(enc.size()),
              "text gpt2 " + encoder_json, "field '", tok, "': expected an id in [0, ", enc.size(),
              "), got ", idv.dump());
    int64_t id = idv.get<int64_t>();
    QKV_CHECK(!seen[id], "text gpt2 " + encoder_json, "id ", id, " used twice (field '", tok, "')");
    seen[id] = true;
    vocab[id] = tok;
  }
  std::string bpe = read_file(vocab_bpe);
  std::vector<Merge> merges;
  size_t pos = 0, line_no = 0;
  while (pos < bpe.size()) {
    size_t nl = bpe.find('\n', pos);
    if (nl == std::string::npos) nl = bpe.size();
    std::string_view line(bpe.data() + pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
    size_t sp = line.find(' ');
    QKV_CHECK(sp != std::string_view::npos && sp > 0 && sp + 1 < line.size() &&
                  line.find(' ', sp + 1) == std::string_view::npos,
              "text gpt2 " + vocab_bpe, "line ", line_no, ": expected 'left right', got '",
              std::string(line), "'");
    merges.emplace_back(std::string(line.substr(0, sp)), std::string(line.substr(sp + 1)));
  }
  BpeOptions opt;
  opt.js_comma_key_quirk = js_comma_key_quirk;
  // The tokenizer's own checks (a merge whose parts or result are not in the vocabulary) name the files too.
  return with_context("text gpt2 " + encoder_json + " + " + vocab_bpe, [&] {
    auto tok = std::make_unique<BpeTokenizer>(std::move(vocab), std::move(merges), opt);
    tok->set_special_tokens(SpecialTokens::gpt2());
    tok->set_source(encoder_json);
    return tok;
  });
}

}  // namespace qkv::text
