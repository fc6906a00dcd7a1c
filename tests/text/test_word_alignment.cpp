// Words -> pieces for token classification (text/word_alignment.h): the first-piece alignment of
// Hugging Face's token-classification recipe, words that give no piece, words cut to a window,
// and the overlapping windows of whole words with the window each word is read from (worked by
// hand from the rule in the header, and properties over random sentences).
#include "qkv/text/word_alignment.h"

#include <gtest/gtest.h>

#include <random>

#include "qkv/text/wordpiece.h"
#include "qkv/util/error.h"

using namespace qkv::text;

namespace {

const WordPieceTokenizer& tok() {
  static const auto t = [] {
    auto w = std::make_unique<WordPieceTokenizer>(
        std::vector<std::string>{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "pierre", "vin", "##ken", ",", "61",
                                 "years", "old", "un", "##believ", "##able"},
        WordPieceOptions{});
    w->set_special(Role::Unk, "[UNK]");
    return w;
  }();
  return *t;
}

WordPieces pieces_of(const std::vector<int64_t>& counts) {
  WordPieces wp;
  wp.word_start.push_back(0);
  for (int64_t n : counts) {
    for (int64_t i = 0; i < n; ++i) wp.ids.push_back(5);
    wp.word_start.push_back(int64_t(wp.ids.size()));
  }
  return wp;
}

}  // namespace

TEST(WordAlignment, EachWordsPiecesInOrderWithItsFirstPieceMarked) {
  const WordPieces wp = split_words(tok(), {"Pierre", "Vinken", ",", "61", "unbelievable"}, 100, 1);
  EXPECT_EQ(wp.ids, (std::vector<int32_t>{5, 6, 7, 8, 9, 12, 13, 14}));
  EXPECT_EQ(wp.word_start, (std::vector<int64_t>{0, 1, 3, 4, 5, 8}));
  EXPECT_EQ(wp.words(), 5);
  EXPECT_EQ(wp.pieces(4), 3);
  EXPECT_EQ(wp.words_cut, 0);
}

TEST(WordAlignment, AWordWithoutPiecesIsUnknownAndALongWordKeepsItsFirstPieces) {
  // "\x01" is a control character BERT's clean-up drops: no piece, so the unknown token.
  WordPieces wp = split_words(tok(), {"61", "\x01", "unbelievable"}, 2, 1);
  EXPECT_EQ(wp.ids, (std::vector<int32_t>{9, 1, 12, 13}));
  EXPECT_EQ(wp.word_start, (std::vector<int64_t>{0, 1, 2, 4}));
  EXPECT_EQ(wp.words_cut, 1);
  try {
    split_words(tok(), {"61", "\x01"}, 2, -1);
    FAIL() << "no error for a word without pieces and no unknown token";
  } catch (const qkv::Error& e) {
    EXPECT_NE(std::string(e.what()).find("word 2"), std::string::npos) << e.what();
  }
}

TEST(WordAlignment, OverlappingWindowsOfWholeWordsWorkedByHand) {
  // pieces per word 1 2 1 1 3; windows of 4 pieces starting 2 pieces apart:
  // [0,3) (4 pieces); the next starts at the first word >= 2 pieces on: word 2 -> [2,4);
  // then word 3 is < 2 pieces after word 2, the window's end (4) bounds it -> [4,5).
  const WordPieces wp = pieces_of({1, 2, 1, 1, 3});
  const auto w = word_windows(wp, 4, 2);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[0].begin, 0);
  EXPECT_EQ(w[0].end, 3);
  EXPECT_EQ(w[1].begin, 2);
  EXPECT_EQ(w[1].end, 4);
  EXPECT_EQ(w[2].begin, 4);
  EXPECT_EQ(w[2].end, 5);
  // word 2 has context 0 in both windows: the earlier wins; word 3 only in window 1 ... and 4 in 2.
  EXPECT_EQ(window_of_word(w, 5), (std::vector<int64_t>{0, 0, 0, 1, 2}));
  // Training: stride = the window, no overlap.
  const auto t = word_windows(wp, 4, 4);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].end, 3);
  EXPECT_EQ(t[1].begin, 3);
  EXPECT_EQ(t[1].end, 5);
  // A sentence that fits: one window.
  const auto one = word_windows(wp, 8, 4);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].end, 5);
  EXPECT_TRUE(word_windows(pieces_of({}), 4, 2).empty());
}

TEST(WordAlignment, MostContextWins) {
  // 6 one-piece words, windows of 4 starting 2 apart: [0,4) [2,6).
  const auto w = word_windows(pieces_of({1, 1, 1, 1, 1, 1}), 4, 2);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[1].begin, 2);
  // word 2: context min(2,1)=1 in window 0, min(0,3)=0 in window 1 -> 0; word 3: 0 vs 1 -> 1.
  EXPECT_EQ(window_of_word(w, 6), (std::vector<int64_t>{0, 0, 0, 1, 1, 1}));
}

TEST(WordAlignment, WindowsCoverEveryWordWithinTheBudgetOnRandomSentences) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    const int64_t budget = 3 + int64_t(rng() % 10), stride = 1 + int64_t(rng() % uint32_t(budget));
    std::vector<int64_t> counts(rng() % 40);
    for (auto& c : counts) c = 1 + int64_t(rng() % uint32_t(std::min<int64_t>(budget, 4)));
    const WordPieces wp = pieces_of(counts);
    const auto w = word_windows(wp, budget, stride);
    const auto owner = window_of_word(w, wp.words());
    int64_t covered_to = 0;
    for (size_t k = 0; k < w.size(); ++k) {
      EXPECT_LE(wp.word_start[size_t(w[k].end)] - wp.word_start[size_t(w[k].begin)], budget);
      EXPECT_LT(w[k].begin, w[k].end);
      EXPECT_LE(w[k].begin, covered_to) << "a gap before window " << k;  // no word skipped
      if (k) {
        EXPECT_GT(w[k].begin, w[k - 1].begin);
      }
      if (stride == budget && k) {
        EXPECT_EQ(w[k].begin, w[k - 1].end);  // training: no overlap
      }
      covered_to = w[k].end;
    }
    EXPECT_EQ(covered_to, wp.words());
    for (int64_t i = 0; i < wp.words(); ++i) {
      const auto& o = w[size_t(owner[size_t(i)])];
      EXPECT_TRUE(o.begin <= i && i < o.end);
    }
  }
}
