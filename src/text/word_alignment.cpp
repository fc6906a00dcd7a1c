#include "qkv/text/word_alignment.h"

#include <algorithm>

#include "qkv/util/error.h"

namespace qkv::text {

WordPieces split_words(const Tokenizer& tok, const std::vector<std::string>& words, int64_t max_pieces_per_word,
                       int32_t unk_id) {
  QKV_CHECK(max_pieces_per_word >= 1, "split_words", "max_pieces_per_word must be >= 1, got ", max_pieces_per_word);
  WordPieces wp;
  wp.word_start.reserve(words.size() + 1);
  wp.word_start.push_back(0);
  for (size_t w = 0; w < words.size(); ++w) {
    std::vector<int32_t> p = tok.encode(words[w]);
    if (p.empty()) {
      QKV_CHECK(unk_id >= 0, "split_words", "word ", w + 1, " '", words[w],
                "' gives no token and the tokenizer has no unknown token");
      p.push_back(unk_id);
    }
    if (int64_t(p.size()) > max_pieces_per_word) {
      p.resize(size_t(max_pieces_per_word));
      ++wp.words_cut;
    }
    wp.ids.insert(wp.ids.end(), p.begin(), p.end());
    wp.word_start.push_back(int64_t(wp.ids.size()));
  }
  return wp;
}

std::vector<WordWindow> word_windows(const WordPieces& wp, int64_t budget, int64_t stride) {
  QKV_CHECK(budget >= 1 && stride >= 1, "word_windows", "budget and stride must be >= 1, got ", budget, " and ",
            stride);
  const int64_t W = wp.words();
  std::vector<WordWindow> out;
  int64_t s = 0;
  while (s < W) {
    int64_t e = s;
    while (e < W && wp.word_start[size_t(e) + 1] - wp.word_start[size_t(s)] <= budget) ++e;
    QKV_CHECK(e > s, "word_windows", "word ", s + 1, " has ", wp.pieces(s), " pieces, more than the window's ", budget);
    out.push_back({s, e});
    if (e == W) break;
    // The next window starts at the first word at least `stride` pieces after this start, and
    // no later than this window's end (no word skipped), at least one word on.
    int64_t next = s + 1;
    while (next < e && wp.word_start[size_t(next)] - wp.word_start[size_t(s)] < stride) ++next;
    s = next;
  }
  return out;
}

std::vector<int64_t> window_of_word(const std::vector<WordWindow>& windows, int64_t words) {
  std::vector<int64_t> owner(size_t(words), -1);
  std::vector<int64_t> best(size_t(words), -1);
  for (size_t k = 0; k < windows.size(); ++k)
    for (int64_t i = windows[k].begin; i < windows[k].end; ++i) {
      const int64_t context = std::min(i - windows[k].begin, windows[k].end - 1 - i);
      if (context > best[size_t(i)]) {  // strictly better: the earlier window wins a tie
        best[size_t(i)] = context;
        owner[size_t(i)] = int64_t(k);
      }
    }
  for (int64_t i = 0; i < words; ++i)
    QKV_CHECK(owner[size_t(i)] >= 0, "window_of_word", "word ", i + 1, " is in no window");
  return owner;
}

}  // namespace qkv::text
