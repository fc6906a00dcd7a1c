// qkv/text/word_alignment.h - words to subword pieces for token classification (tagging, NER),
// as Hugging Face's token-classification recipe aligns them:
//
//   words   Pierre    Vinken          ,    61
//   pieces  pierre    vin  ##ken      ,    61
//   label   B-PER     I-PER -100      O    O        the word's label on its first piece;
//                                                   later pieces -100 (not in the loss)
//   prediction per word = the prediction at its first piece.
//
// Each word is encoded on its own (tokenizer.encode(word)); a word the tokenizer turns into no
// piece at all (only characters it drops) becomes the unknown token, so that every word has a
// first piece and a prediction. A word of more pieces than a window holds keeps its first ones
// (only the first carries the label).
//
// Sentences longer than a window (max_len - 2 pieces, between [CLS] and [SEP]) are cut into
// windows of whole words that overlap: each window starts `stride` pieces after the previous
// one's start (at a word boundary; at least one word on), so no word is dropped, and each word's
// prediction is read from the window where it has the most context (the largest number of words
// on its shorter side; the earlier window on a tie). Training takes stride = the window (no
// overlap): every word is labelled exactly once.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "qkv/text/tokenizer.h"

namespace qkv::text {

struct WordPieces {
  std::vector<int32_t> ids;         // the pieces of every word, in order (no special tokens)
  std::vector<int64_t> word_start;  // (W + 1): word w's pieces are ids[word_start[w], word_start[w + 1])
  int64_t words_cut = 0;            // words that lost pieces to max_pieces_per_word
  int64_t words() const { return int64_t(word_start.size()) - 1; }
  int64_t pieces(int64_t w) const { return word_start[size_t(w) + 1] - word_start[size_t(w)]; }
};

// unk_id: the piece of a word that encodes to nothing (-1: such a word is an error naming it).
WordPieces split_words(const Tokenizer& tok, const std::vector<std::string>& words, int64_t max_pieces_per_word,
                       int32_t unk_id);

struct WordWindow {
  int64_t begin = 0, end = 0;  // words [begin, end)
};

// Windows of whole words of at most `budget` pieces each, covering every word, consecutive
// windows starting `stride` pieces apart (see above); one window when the sentence fits. Every
// word must have at most `budget` pieces (split_words' max_pieces_per_word). No words: no windows.
std::vector<WordWindow> word_windows(const WordPieces& wp, int64_t budget, int64_t stride);

// For each word, the index of the window its prediction is read from (see above).
std::vector<int64_t> window_of_word(const std::vector<WordWindow>& windows, int64_t words);

}  // namespace qkv::text
