// qkv/data/corpus_tagged.h - the tagging corpora, written CoNLL style (one "word<TAB>tag" per
// line, a blank line after each sentence; tasks/tag_data.h reads them):
//   pos-wsj     the 1,000 Penn Treebank part-of-speech-tagged Wall Street Journal lines that
//               Debian's python3-pattern ships (usr/share/doc/python3-pattern/test/corpora/
//               tagged-en-wsj.txt: "word/TAG word/TAG ...", tag after the last '/'), one line = one
//               example, seeded 80/10/10 split by line -> <data>/tag/pos-wsj/{train,valid,test}.conll
//   ner-debian  named entities in Debian package descriptions (bookworm main: the Packages and
//               Translation-en indexes), labelled by the rules below from each package's own
//               metadata, no person involved; splits grouped by source package
//               -> <data>/tag/ner-debian/{train,valid,test}.conll
// Each build writes stats.json (tag counts per split under "classes", entities under "entities")
// and a stamp; a second run does nothing.
//
// ner-debian's rules (docs/corpora.md): the text of a package is its short description, then its
// long description, cut into words (ner_tokenize) and sentences (ner_sentences). A word is
//   URL    it starts with http://, https://, ftp://, git:// or svn:// (and has more), or with "www."
//          followed by a name with a dot
//   EMAIL  local@domain: local of letters, digits and . _ % + -; domain of two or more dot-separated
//          labels of letters, digits and -, the last of two or more letters
//   PATH   it starts with "/" or "~/" followed by a letter, digit, '.' or '_', and holds only
//          letters, digits and . _ / + ~ * -  (not "//")
//   VER    a version number: an optional v/V, digits, one or more ".digits", then optionally one
//          lower-case letter or one of - + ~ followed by letters, digits, '.', '+' or '~'
//          (2.6, 1.0.2k, v3.11, 2.0-beta1; also a decimal like 1.5: the rule cannot tell)
//   PKG    exactly (case-sensitive) the package's own name or a name in its Depends, Pre-Depends
//          or Recommends fields, at least two characters long
// the first rule that matches in this order wins; every other word is O. Entities are single
// words, tagged B-<TYPE> (BIO; I- never occurs).
#pragma once
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "qkv/data/corpus_mono.h"  // ExtraBuildOptions, BuildResult

namespace qkv::data {

BuildResult build_pos_wsj_corpus(const ExtraBuildOptions& opt);
BuildResult build_ner_debian_corpus(const ExtraBuildOptions& opt);

// ---- the pieces, exposed for tests ----

struct TaggedWords {
  std::vector<std::string> words, tags;
};

// One line of tagged-en-wsj.txt ("word/TAG word/TAG ..."): a token without '/' or with an empty
// word or tag is an error naming `where`.
TaggedWords parse_slash_tagged(std::string_view line, const std::string& where);

// Words of a description: split at white space, then each of ( [ { " ' < ` at the start of a
// chunk and each of ) ] } " ' > , ; : ! ? . at its end becomes a word of its own.
std::vector<std::string> ner_tokenize(std::string_view text);
// Sentences: a word ".", "!" or "?" ends one when the next word starts with an upper-case
// ASCII letter (or there is none).
std::vector<std::vector<std::string>> ner_sentences(const std::vector<std::string>& words);
// The entity type of one word under the rules above ("" = none).
std::string ner_word_type(std::string_view word, const std::set<std::string>& package_names);
// The names a package's description may mention as PKG: its Package and the package names of
// its Depends, Pre-Depends and Recommends (alternatives "a | b" both; versions, architecture
// qualifiers, [arch] and <profile> lists removed).
std::set<std::string> package_names_of(const std::map<std::string, std::string>& record);
// A package's record -> its tagged sentences (Description = the short description; long: the
// long description text, or "").
std::vector<TaggedWords> ner_label_package(const std::map<std::string, std::string>& record,
                                           std::string_view long_description);

}  // namespace qkv::data
