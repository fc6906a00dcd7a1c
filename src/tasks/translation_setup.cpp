#include "translation_setup.h"

#include <filesystem>
#include <limits>
#include <tuple>

#include "qkv/text/bpe_train.h"
#include "qkv/text/placeholders.h"
#include "qkv/data/corpus.h"
#include "qkv/data/corpus_mt.h"
#include "qkv/train/seq2seq_data.h"
#include "qkv/util/config.h"
#include "qkv/util/file.h"
#include "qkv/util/utf8.h"

namespace fs = std::filesystem;

namespace qkv::tasks {

ParallelText read_parallel_tsv(const std::string& path) {
  ParallelText t;
  for (auto& [src, tgt] : data::read_parallel_tsv(path)) {
    t.src.push_back(std::move(src));
    t.tgt.push_back(std::move(tgt));
  }
  QKV_CHECK(!t.src.empty(), path, "no sentence pairs");
  return t;
}

std::string ensure_mt_corpus(const std::string& name, const std::string& data_dir) {
  // "en-de-small" -> language "de", set "small"
  auto a = name.find('-'), b = name.rfind('-');
  QKV_CHECK(name.rfind("en-", 0) == 0 && a != b, "corpus", "unknown corpus '", name,
            "' (expected en-<lang>-<set>, e.g. en-de-small)");
  data::MtBuildOptions o;
  o.tgt_lang = name.substr(a + 1, b - a - 1);
  o.set = name.substr(b + 1);
  o.data_dir = data_dir;
  o.verbose = true;
  o.keep_explicit_list = true;  // a corpus `qkv data --list` built there is the one meant
  o.config.tgt_lang = o.tgt_lang;
  auto r = data::build_mt_corpus(o);
  return r.out_dir;
}

bool take_protect_flag(nlohmann::json& tokenizer_cfg, const std::string& where) {
  if (!tokenizer_cfg.is_object() || !tokenizer_cfg.contains("protect")) return false;
  ConfigReader r(tokenizer_cfg, where, "tokenizer");
  const bool protect = r.boolean("protect", false);
  tokenizer_cfg.erase("protect");
  return protect;
}

void protect_pairs(ParallelText& t) {
  for (size_t i = 0; i < t.src.size(); ++i) std::tie(t.src[i], t.tgt[i]) = text::protect_pair(t.src[i], t.tgt[i]);
}

TokenizerPlan read_tokenizer_plan(const nlohmann::json& cfg_json, const std::string& where) {
  ConfigReader r(cfg_json, where, "tokenizer");
  std::string kind = r.string("kind", "bpe");
  QKV_CHECK(kind == "bpe" || kind == "bytebpe", r.where("kind"), "expected \"bpe\" or \"bytebpe\", got \"", kind, "\"");
  TokenizerPlan plan;
  text::BpeTrainOptions& o = plan.bpe;
  o.byte_level = kind == "bytebpe";
  if (o.byte_level) {
    o.end_of_word_suffix.clear();
    o.unk_token.clear();
  }
  o.vocab_size = int(r.integer_in("vocab_size", 8000, 1, int64_t(1) << 24));
  o.min_frequency = r.integer_in("min_frequency", 2, 1, std::numeric_limits<int64_t>::max());
  plan.shared = r.boolean("shared", true);
  r.finish();
  return plan;
}

void train_tokenizers(const TokenizerPlan& plan, const ParallelText& train, const std::string& work_dir,
                      std::shared_ptr<text::Tokenizer>& src_tok, std::shared_ptr<text::Tokenizer>& tgt_tok) {
  const text::BpeTrainOptions& o = plan.bpe;
  const bool shared = plan.shared;
  fs::create_directories(work_dir);
  auto dump = [&](const std::string& file, std::initializer_list<const std::vector<std::string>*> cols) {
    std::string text;
    for (auto* c : cols)
      for (auto& s : *c) text += s + "\n";
    write_file_atomic(file, text);
    return file;
  };
  if (shared) {
    std::string f = dump((fs::path(work_dir) / "bpe_input.txt").string(), {&train.src, &train.tgt});
    src_tok = text::train_bpe({f}, o);
    tgt_tok = src_tok;
  } else {
    src_tok = text::train_bpe({dump((fs::path(work_dir) / "bpe_input.src.txt").string(), {&train.src})}, o);
    tgt_tok = text::train_bpe({dump((fs::path(work_dir) / "bpe_input.tgt.txt").string(), {&train.tgt})}, o);
  }
}

void complete_model_config(nlohmann::json& config, const text::Tokenizer& src, const text::Tokenizer& tgt) {
  auto& m = config["model"];
  m["src_vocab"] = src.vocab_size();
  m["tgt_vocab"] = tgt.vocab_size();
  m["pad_id"] = tgt.require_special_id(text::Role::Pad);
  m["bos_id"] = tgt.require_special_id(text::Role::Bos);
  m["eos_id"] = tgt.require_special_id(text::Role::Eos);
  QKV_CHECK(&src == &tgt || src.require_special_id(text::Role::Eos) == tgt.require_special_id(text::Role::Eos), "config",
            "source and target tokenizers must agree on the </s> id");
}

std::vector<train::Example> encode_pairs(const ParallelText& t, const text::Tokenizer& src_tok,
                                         const text::Tokenizer& tgt_tok, int64_t eos, int64_t max_len,
                                         int64_t* dropped) {
  std::vector<train::Example> out;
  int64_t drop = 0;
  for (size_t i = 0; i < t.src.size(); ++i) {
    bool cut_s = false, cut_t = false;
    train::Example e{train::encode_sentence(src_tok, t.src[i], eos, max_len, &cut_s),
                     train::encode_sentence(tgt_tok, t.tgt[i], eos, max_len - 1, &cut_t)};
    if (cut_s || cut_t) {
      ++drop;
      continue;
    }
    out.push_back(std::move(e));
  }
  if (dropped) *dropped = drop;
  return out;
}

}  // namespace qkv::tasks
