// Fuzz target: the config.json of a fine-tuned model directory, which says more than the body's
// config (config_bert and config_gpt fuzz those keys alone): id2label / label2id, num_labels,
// qkv_classifier, and shapes that must agree with the weights beside it. The first byte picks the
// directory kind: a BERT sequence classifier, a BERT token classifier, a BERT span (QA) model or a
// GPT classifier, each written once with small random weights (tests/common/tiny_models.h); the
// rest replaces that directory's config.json, and the directory is loaded as its kind.
#include <filesystem>
#include <string>

#include "fuzz_target.h"
#include "qkv/io/bert_qa.h"
#include "qkv/io/bert_tagger.h"
#include "qkv/io/gpt2_cls.h"
#include "qkv/models/gpt_vocab.h"
#include "qkv/text/finetune_tokens.h"
#include "tiny_models.h"

namespace {

enum Kind { kSequence, kToken, kSpan, kGpt, kKinds };

// The four directories, written on first use.
const std::string& dir(Kind k) {
  static const std::string root = [] {
    using namespace qkv;
    const std::string r = fuzz::scratch_dir() + "/head_config";
    io::save_bert_classifier(r + "/sequence", qkv_test::tiny_bert_classifier({"neg", "pos"}, true, 41));
    const io::BertBundle enc = qkv_test::tiny_bert(42);
    io::BertTaggerBundle tagger = io::make_bert_tagger(enc.config, {"O", "B-PKG", "I-PKG"});
    tagger.tokenizer = enc.tokenizer;
    io::save_bert_tagger(r + "/token", tagger);
    io::BertQaBundle qa = io::make_bert_qa(enc.config);
    qa.tokenizer = enc.tokenizer;
    io::save_bert_qa(r + "/span", qa);
    io::GptBundle body = qkv_test::tiny_gpt(16, 43);
    io::GptClassifierBundle gpt;
    gpt.tokenizer = body.tokenizer;
    text::add_finetune_tokens(*gpt.tokenizer);
    auto grown = models::grow_vocab(*body.model, gpt.tokenizer->vocab_size());  // room for the fine-tuning tokens
    gpt.model = std::make_shared<models::GptClassifier>(grown, 3);
    gpt.labels = {"a", "b", "c"};
    io::save_gpt2_classifier(r + "/gpt", gpt);
    return r;
  }();
  static const std::string dirs[kKinds] = {root + "/sequence", root + "/token", root + "/span", root + "/gpt"};
  return dirs[k];
}

}  // namespace

QKV_FUZZ_TARGET(head_config) {
  if (size == 0) return 0;
  const Kind kind = Kind(data[0] % kKinds);
  const std::string& d = dir(kind);
  qkv::fuzz::scratch_file("head_config/" + std::filesystem::path(d).filename().string() + "/config.json", data + 1,
                          size - 1);
  qkv::fuzz::expect_clean(d, [&] {
    switch (kind) {
      case kSequence: qkv::io::load_bert_classifier(d); break;
      case kToken: qkv::io::load_bert_tagger(d); break;
      case kSpan: qkv::io::load_bert_qa(d); break;
      default: qkv::io::load_gpt2_classifier(d); break;
    }
  });
  return 0;
}
