#include "qkv/text/bpe_train.h"

#include <algorithm>
#include <cstdio>
#include <queue>

#include "qkv/text/pretokenize.h"
#include "qkv/util/utf8.h"
#include "qkv/util/error.h"

namespace qkv::text {

void WordCounter::add(std::string_view text) {
  auto count = [&](std::string_view w) {
    auto it = counts_.find(std::string(w));  // hot path: one lookup, one allocation on a miss
    if (it != counts_.end()) ++it->second;
    else counts_.emplace(std::string(w), 1);
  };
  if (byte_level_) gpt2_pretokenize(text, count);
  else for (auto w : whitespace_split(text)) count(w);
}

void WordCounter::add_file(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  QKV_CHECK(f, "text train " + path, "cannot open for reading");
  std::string buf, carry;
  buf.resize(16 << 20);
  size_t n;
  uint64_t line = 1;  // of carry's first line
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) {
    std::string_view chunk(buf.data(), n);
    size_t last_nl = chunk.rfind('\n');
    if (last_nl == std::string_view::npos) {
      carry.append(chunk);
      continue;
    }
    carry.append(chunk.substr(0, last_nl + 1));
    if (!byte_level_) {  // a word-level vocabulary holds the text's own bytes: they must be UTF-8
      try {
        line += utf8::check_lines(carry, path, line);
      } catch (...) {
        std::fclose(f);
        throw;
      }
    }
    add(carry);
    carry.assign(chunk.substr(last_nl + 1));
  }
  bool err = std::ferror(f);
  std::fclose(f);
  QKV_CHECK(!err, "text train " + path, "read error");
  if (!byte_level_) utf8::check_lines(carry, path, line);
  if (!carry.empty()) add(carry);
}

namespace {

using Pair = uint64_t;
Pair mk(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
int32_t left(Pair p) { return int32_t(p >> 32); }
int32_t right(Pair p) { return int32_t(p & 0xFFFFFFFFu); }

struct Trainer {
  const BpeTrainOptions& opt;
  std::vector<std::string> vocab;
  std::unordered_map<std::string, int32_t> ids;
  std::vector<std::vector<int32_t>> words;
  std::vector<int64_t> freq;
  std::unordered_map<Pair, int64_t> count;
  std::unordered_map<Pair, std::vector<int32_t>> where;

  struct Entry {
    int64_t count;
    Pair pair;
  };
  // Max-heap order: count, then the smaller (left, right) strings first.
  struct Less {
    const std::vector<std::string>* v;
    bool operator()(const Entry& x, const Entry& y) const {
      if (x.count != y.count) return x.count < y.count;
      const std::string &xl = (*v)[left(x.pair)], &yl = (*v)[left(y.pair)];
      if (xl != yl) return xl > yl;
      return (*v)[right(x.pair)] > (*v)[right(y.pair)];
    }
  };

  explicit Trainer(const BpeTrainOptions& o) : opt(o) {}

  int32_t intern(const std::string& s) {
    auto [it, fresh] = ids.emplace(s, int32_t(vocab.size()));
    if (fresh) vocab.push_back(s);
    return it->second;
  }
};

}  // namespace

BpeTrainResult learn_bpe(const std::unordered_map<std::string, int64_t>& word_counts,
                         const BpeTrainOptions& opt) {
  // A vocabulary smaller than the specials and the alphabet gives just those (as Hugging Face's
  // trainer does); a size below 1 is a mistake, and was taken silently.
  QKV_CHECK(opt.vocab_size >= 1, "text train_bpe", "vocab_size must be positive, got ", opt.vocab_size);
  Trainer t(opt);
  for (auto& s : opt.special_tokens) t.intern(s);
  // Words in a fixed order (byte-wise) so that everything below is deterministic.
  std::vector<const std::pair<const std::string, int64_t>*> sorted;
  sorted.reserve(word_counts.size());
  for (auto& wc : word_counts) sorted.push_back(&wc);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->first < b->first; });
  // Alphabet: symbols of every word, sorted, after the specials.
  std::vector<std::vector<std::string>> word_syms(sorted.size());
  std::vector<std::string> alphabet;
  if (opt.byte_level)
    for (int b = 0; b < 256; ++b) {
      std::string s;
      utf8::append(s, byte_to_unicode()[b]);
      alphabet.push_back(s);
    }
  for (size_t w = 0; w < sorted.size(); ++w) {
    const std::string& word = sorted[w]->first;
    auto& syms = word_syms[w];
    for (size_t i = 0; i < word.size();) {
      if (opt.byte_level) {
        std::string s;
        utf8::append(s, byte_to_unicode()[(unsigned char)word[i++]]);
        syms.push_back(std::move(s));
      } else {
        uint32_t cp;
        int len = utf8::decode(word, i, cp);
        std::string s(word.substr(i, len));
        i += len;
        if (i == word.size()) s += opt.end_of_word_suffix;
        syms.push_back(s);
        alphabet.push_back(std::move(s));
      }
    }
  }
  std::sort(alphabet.begin(), alphabet.end());
  alphabet.erase(std::unique(alphabet.begin(), alphabet.end()), alphabet.end());
  // A special token is never produced from text (decoding drops it): one that is also a symbol or
  // a merge of the text would take that token's id, and the text it stands for would be lost.
  const int32_t n_special = int32_t(t.vocab.size());
  const auto check_not_special = [&](const std::string& s, const char* as) {
    const auto it = t.ids.find(s);
    QKV_CHECK(it == t.ids.end() || it->second >= n_special, "text train_bpe", "special token '", s, "' is also ", as,
              " of the text: give special tokens that cannot occur in it (e.g. in angle brackets)");
  };
  for (auto& s : alphabet) {
    check_not_special(s, "a symbol");
    t.intern(s);
  }
  t.words.resize(sorted.size());
  t.freq.resize(sorted.size());
  for (size_t w = 0; w < sorted.size(); ++w) {
    t.freq[w] = sorted[w]->second;
    for (auto& s : word_syms[w]) t.words[w].push_back(t.ids.at(s));
    word_syms[w] = {};
    auto& ws = t.words[w];
    for (size_t i = 0; i + 1 < ws.size(); ++i) {
      Pair p = mk(ws[i], ws[i + 1]);
      t.count[p] += t.freq[w];
      auto& v = t.where[p];
      if (v.empty() || v.back() != int32_t(w)) v.push_back(int32_t(w));
    }
  }
  std::priority_queue<Trainer::Entry, std::vector<Trainer::Entry>, Trainer::Less> heap(Trainer::Less{&t.vocab});
  {
    std::vector<Pair> pairs;
    for (auto& [p, c] : t.count) pairs.push_back(p);
    std::sort(pairs.begin(), pairs.end());
    for (Pair p : pairs) heap.push({t.count[p], p});
  }
  BpeTrainResult res;
  std::vector<int32_t> merged;
  std::unordered_map<Pair, int64_t> delta;
  while (int(t.vocab.size()) < opt.vocab_size && !heap.empty()) {
    Trainer::Entry top = heap.top();
    heap.pop();
    auto cit = t.count.find(top.pair);
    int64_t cur = cit == t.count.end() ? 0 : cit->second;
    if (cur != top.count) {
      if (cur > 0 && cur < top.count) heap.push({cur, top.pair});  // decremented since pushed
      continue;  // cur > top.count: a fresher entry is in the heap
    }
    if (cur < opt.min_frequency || cur <= 0) break;
    int32_t a = left(top.pair), b = right(top.pair);
    std::string s = t.vocab[a] + t.vocab[b];
    check_not_special(s, ("the merge of '" + t.vocab[a] + "' and '" + t.vocab[b] + "'").c_str());
    auto [nit, fresh] = t.ids.emplace(s, int32_t(t.vocab.size()));
    if (fresh) t.vocab.push_back(s);
    int32_t z = nit->second;
    res.merges.emplace_back(t.vocab[a], t.vocab[b]);
    // Re-segment every word that contains (a, b); count changes go through `delta`.
    std::vector<int32_t> ws = std::move(t.where[top.pair]);
    t.where.erase(top.pair);
    std::sort(ws.begin(), ws.end());
    ws.erase(std::unique(ws.begin(), ws.end()), ws.end());
    delta.clear();
    for (int32_t w : ws) {
      auto& sym = t.words[w];
      bool has = false;
      for (size_t i = 0; i + 1 < sym.size() && !has; ++i) has = sym[i] == a && sym[i + 1] == b;
      if (!has) continue;
      const int64_t f = t.freq[w];
      for (size_t i = 0; i + 1 < sym.size(); ++i) delta[mk(sym[i], sym[i + 1])] -= f;
      merged.clear();
      for (size_t i = 0; i < sym.size();) {
        if (i + 1 < sym.size() && sym[i] == a && sym[i + 1] == b) merged.push_back(z), i += 2;
        else merged.push_back(sym[i++]);
      }
      sym.swap(merged);
      for (size_t i = 0; i + 1 < sym.size(); ++i) {
        Pair p = mk(sym[i], sym[i + 1]);
        delta[p] += f;
        if (sym[i] == z || sym[i + 1] == z) {
          auto& v = t.where[p];
          if (v.empty() || v.back() != w) v.push_back(w);
        }
      }
    }
    std::vector<std::pair<Pair, int64_t>> changes(delta.begin(), delta.end());
    std::sort(changes.begin(), changes.end());
    for (auto& [p, d] : changes) {
      if (d == 0) continue;
      int64_t& c = t.count[p];
      c += d;
      if (d > 0) heap.push({c, p});
      if (c <= 0) t.count.erase(p);
    }
  }
  res.vocab = std::move(t.vocab);
  return res;
}

bool guess_role(std::string_view tok, Role& role) {
  static const std::pair<const char*, Role> kKnown[] = {
      {"[PAD]", Role::Pad},     {"<pad>", Role::Pad},       {"[UNK]", Role::Unk},
      {"<unk>", Role::Unk},     {"[CLS]", Role::Cls},       {"[SEP]", Role::Sep},
      {"[MASK]", Role::Mask},   {"<mask>", Role::Mask},     {"<s>", Role::Bos},
      {"</s>", Role::Eos},      {"[START]", Role::Start},   {"[DELIM]", Role::Delim},
      {"[EXTRACT]", Role::Extract}, {"<|endoftext|>", Role::Eos}};
  for (auto& [name, r] : kKnown)
    if (tok == name) {
      role = r;
      return true;
    }
  return false;
}

std::unique_ptr<BpeTokenizer> train_bpe(const std::vector<std::string>& files, const BpeTrainOptions& opt) {
  QKV_CHECK(!files.empty(), "text train_bpe", "no input files");
  WordCounter wc(opt.byte_level);
  for (auto& f : files) wc.add_file(f);
  // Nothing counted would learn a vocabulary of the special tokens alone, one that reads every
  // text as <unk>: an error, as an empty training file is to qkv train.
  QKV_CHECK(!wc.counts().empty(), files.size() == 1 ? files[0] : files[0] + " (and the other inputs)",
            "no text to learn a tokenizer from: every input is empty or blank");
  BpeTrainResult r = learn_bpe(wc.counts(), opt);
  BpeOptions bo;
  bo.byte_level = opt.byte_level;
  if (!opt.byte_level) {
    bo.end_of_word_suffix = opt.end_of_word_suffix;
    bo.unk_token = opt.unk_token;
  }
  auto tok = std::make_unique<BpeTokenizer>(std::move(r.vocab), std::move(r.merges), bo);
  for (auto& s : opt.special_tokens) {
    Role role;
    if (guess_role(s, role)) tok->set_special(role, s);
    else tok->add_special_token(s);
    if (s == "<|endoftext|>") tok->set_special(Role::Bos, s);
  }
  return tok;
}

}  // namespace qkv::text
