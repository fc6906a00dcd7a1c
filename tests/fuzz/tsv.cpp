// Fuzz target: the line-oriented corpora: 'source<TAB>target' translation pairs, 'label<TAB>text'
// classification sets and CoNLL tagged sentences, each reader over the same bytes.
#include "fuzz_target.h"
#include "qkv/data/corpus_mt.h"
#include "qkv/tasks/cls_data.h"
#include "qkv/tasks/tag_data.h"

QKV_FUZZ_TARGET(tsv) {
  const std::string path = qkv::fuzz::scratch_file("corpus.tsv", data, size);
  qkv::fuzz::expect_clean(path, [&] { qkv::data::read_parallel_tsv(path); });
  qkv::fuzz::expect_clean(path, [&] { qkv::tasks::read_labelled_tsv(path); });
  qkv::fuzz::expect_clean(path, [&] { qkv::tasks::read_conll_file(path); });
  return 0;
}
