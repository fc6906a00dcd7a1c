// qkv/data/corpus_pairs.h - a sentence-pair classification corpus from package data:
//
//   pairs-debian   does this one-line summary belong to this long description?
//                  -> <data>/cls/debian-summary-pairs/{train,valid,test}.tsv
//                     ("label<TAB>summary<TAB>long description", label yes | no)
//
// From the same indexes as cls-debian (bookworm main Packages + Translation-en): every package
// with a long description gives a positive (its own summary and description) and a negative (its
// summary with the description of another package of the same Section, in the same split, from
// another source package and with a different text), so the section alone never tells. Splits
// are grouped by source package (80/10/10, seeded), as cls-debian's.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "qkv/data/corpus_mono.h"

namespace qkv::data {

BuildResult build_summary_pairs_corpus(const ExtraBuildOptions& opt);

// ---- the pairing (exposed for tests) ----
struct PackageText {
  std::string section, source, summary, description;  // description non-empty
};
struct SummaryPair {
  bool match = false;
  size_t summary_of = 0, description_of = 0;  // indices into the packages
};
// One positive per package, then (where the package's section and split hold a usable partner) one
// negative whose description comes from the partner: the candidate at a seeded pseudo-random
// offset in the package's (section, split) group, the next usable one if it shares the source or
// the description text. split[i] is package i's split (any small integer).
std::vector<SummaryPair> make_summary_pairs(const std::vector<PackageText>& packages, const std::vector<int>& split,
                                            uint64_t seed);

}  // namespace qkv::data
