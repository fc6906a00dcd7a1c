// qkv/tasks/tag_data.h - tagged data as every front end reads it (qkv train's bert_tagger,
// qkv eval-tag, the corpora pos-wsj and ner-debian):
//
//   tagged files (CoNLL style)      word<TAB>tag          one word per line, a blank line between
//                                                         sentences (several blank lines = one;
//                                                         the file may or may not end with one)
//   inputs to tag (qkv tag)         w1 w2 w3 ...          one sentence per line, words separated
//                                                         by spaces or tabs; empty lines skipped
//
// Words and tags are non-empty and hold no whitespace; a "-DOCSTART-" line (CoNLL-2003's
// document separator) is skipped; '\r' before a newline is dropped; text must be valid UTF-8.
// Errors name the file (or "stdin") and the 1-based line, and what was expected.
#pragma once
#include <cstdint>
#include <istream>
#include <string>
#include <vector>

namespace qkv::tasks {

struct TaggedSentence {
  std::vector<std::string> words, tags;
  int64_t line = 0;  // the line of its first word
};

std::vector<TaggedSentence> read_conll(std::istream& in, const std::string& name);
std::vector<TaggedSentence> read_conll_file(const std::string& path);
// The CoNLL text of sentences (what the corpus builders and tests write).
std::string conll_text(const std::vector<TaggedSentence>& sentences);

// Sentences to tag: one per line, split at spaces and tabs (a blank line is a sentence of no
// words, so that answers line up with their inputs); no line at all is an error naming `name`.
std::vector<std::vector<std::string>> read_word_lines(std::istream& in, const std::string& name,
                                                      std::vector<int64_t>* line_numbers = nullptr);

// The tag names of a training set in model order: "O" first when present, then the others
// sorted by entity type and then by prefix (B- before I-), other names byte-wise.
std::vector<std::string> tag_names(const std::vector<TaggedSentence>& sentences);

// True when every name is "O" or a B-/I-/E-/S- prefix on a type: a chunk tag set (eval/ner.h).
bool is_chunk_tagset(const std::vector<std::string>& names);

struct TagScores {
  int64_t words = 0, correct = 0;
  double accuracy = 0;       // token (word) accuracy, 0..1
  bool chunked = false;      // gold and predicted tags form a chunk tag set: entity scores below are meaningful
  double precision = 0, recall = 0, f1 = 0;  // entity-level (eval/ner.h), 0..1
  int64_t n_pred = 0, n_gold = 0, n_correct = 0;
};
// pred[i], gold[i]: the tags of sentence i (same lengths, else qkv::Error naming the sentence).
TagScores score_tags(const std::vector<std::vector<std::string>>& pred,
                     const std::vector<std::vector<std::string>>& gold);

}  // namespace qkv::tasks
