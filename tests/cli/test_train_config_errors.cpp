// A new translation run's config mistakes: found before anything is written or learned, naming
// the config file and the field; and a new run that fails before its first step takes its
// directory with it, so that the corrected command may use the same --out (it used to meet
// "already holds a run", and --resume then found no checkpoint).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "qkv/util/file.h"
#include "reversal_corpus.h"
#include "run_qkv.h"

namespace fs = std::filesystem;
using qkv::read_file;
using qkv::testing::run_qkv;

namespace {

nlohmann::json good_config() {
  return nlohmann::json::parse(R"({
    "model_type": "transformer",
    "model": {"d_model": 16, "heads": 2, "enc_layers": 1, "dec_layers": 1, "d_ff": 32, "dropout": 0.1, "max_len": 32,
              "shared_embeddings": true, "tie_output": true},
    "tokenizer": {"kind": "bpe", "vocab_size": 60, "min_frequency": 1},
    "data": {"max_tokens": 64, "max_sentences": 16},
    "schedule": {"type": "noam", "warmup": 20, "factor": 1.0},
    "train": {"max_steps": 4, "save_every": 2, "valid_every": 0, "keep_last": 2},
    "valid": {"max_sentences": 10},
    "seed": 3
  })");
}

struct Attempt {
  int code;
  std::string log;
};

Attempt attempt_train(const fs::path& dir, const nlohmann::json& config) {
  const fs::path cfg = dir / "config.json", log = dir / "train.log";
  qkv::write_file_atomic(cfg.string(), config.dump(2));
  const int code = run_qkv({"train", "--config", cfg.string(), "--train", (dir / "train.tsv").string(), "--valid",
                            (dir / "valid.tsv").string(), "--out", (dir / "run").string()},
                           log);
  return {code, read_file(log.string())};
}

}  // namespace

TEST(TrainConfigErrors, NameTheFileAndFieldBeforeAnythingIsWritten) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("qkv_train_cfg_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  qkv::testing::write_reversal_corpus(dir, 60, 50, 777);
  const std::string file = (dir / "config.json").string();
  struct Case {
    const char* section;
    const char* key;
    nlohmann::json value;
    std::string want;
  };
  const std::vector<Case> cases = {
      {"train", "max_step", 5, file + ": field 'train.max_step': unknown key"},
      {"valid", "bogus", 1, file + ": field 'valid.bogus': unknown key"},
      {"data", "max_tokens", 0, file + ": field 'data.max_tokens': expected an integer in [1, "},
      {"schedule", "type", "linear9", file + ": section 'schedule': make_schedule: field 'type'"},
      {"schedule", "warmpu", 5, file + ": section 'schedule': make_schedule: field 'warmpu': unknown"},
      // decoding's limits for validation BLEU: once found at the first validation, naming no field
      {"valid", "patience", 0, file + ": field 'valid.patience': expected a number in (0, 64], got 0"},
      {"valid", "max_len_extra", -1, file + ": field 'valid.max_len_extra': expected an integer in [0, "},
      {"valid", "max_len_ratio", -1, file + ": field 'valid.max_len_ratio': expected a finite number >= 0, got -1"},
      {"tokenizer", "vocab_sise", 100, file + ": field 'tokenizer.vocab_sise': unknown key"},
      // the optimizer's own check: once found after run.json was written
      {"optimizer", "lr", -1, file + ": section 'optimizer': Adam: expected lr >= 0, got -1"},
  };
  for (const Case& c : cases) {
    nlohmann::json cfg = good_config();
    cfg[c.section][c.key] = c.value;
    const Attempt a = attempt_train(dir, cfg);
    EXPECT_EQ(a.code, 1) << c.key;
    EXPECT_NE(a.log.find(c.want), std::string::npos) << "expected \"" << c.want << "\" in:\n" << a.log;
    EXPECT_EQ(a.log.find("learning BPE"), std::string::npos) << c.key << ": the error came after the tokenizer";
    EXPECT_FALSE(fs::exists(dir / "run")) << c.key << ": a failed new run left its directory";
  }
  fs::remove_all(dir);
}

// "init_from": "" used to mean no init_from at all, so a template's blank left the run training
// from random weights without a word. It is an error naming the field, for every task that has it.
TEST(TrainConfigErrors, AnEmptyInitFromIsNamedNotIgnored) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("qkv_train_init_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  qkv::testing::write_reversal_corpus(dir, 60, 50, 777);
  for (const char* type : {"bert_tagger", "bert_classifier", "bert_qa"}) {
    const Attempt a = attempt_train(dir, {{"model_type", type}, {"init_from", ""}});
    EXPECT_EQ(a.code, 1) << type;
    const std::string want =
        (dir / "config.json").string() + ": field 'init_from': expected a path, got an empty string";
    EXPECT_NE(a.log.find(want), std::string::npos) << type << ": expected \"" << want << "\" in:\n" << a.log;
    EXPECT_FALSE(fs::exists(dir / "run")) << type;
  }
  fs::remove_all(dir);
}

// Every task's optimizer and schedule mistakes are named before its data is read (here it does
// not exist) or a tokenizer learned: the tagger, QA and classifier runs used to find them only
// once the model was built, the GPT and BERT pretraining runs the optimizer's.
TEST(TrainConfigErrors, EveryTaskNamesOptimizerAndScheduleMistakesBeforeReadingData) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("qkv_train_early_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string file = (dir / "config.json").string();
  struct Case {
    const char* section;
    nlohmann::json value;
    std::string want;
  };
  const std::vector<Case> cases = {
      {"optimizer", {{"type", "adagrad"}}, file + ": field 'optimizer.type': expected adam, adamw or sgd"},
      {"optimizer", {{"betas", {0.9, 1.5}}}, file + ": section 'optimizer': "},
      {"schedule", {{"type", "linear9"}}, file + ": section 'schedule': make_schedule: field 'type'"},
  };
  for (const char* type : {"gpt", "bert", "bert_tagger", "bert_qa", "bert_classifier", "gpt_classifier"})
    for (const Case& c : cases) {
      nlohmann::json cfg = {{"model_type", type}, {"model", nlohmann::json::object()}};
      if (std::string(type) == "gpt") cfg["data"] = {{"context", 16}};
      if (std::string(type) == "gpt" || std::string(type) == "bert") cfg["schedule"] = {{"warmup", 10}, {"lr", 1e-3}};
      for (auto& [k, v] : c.value.items()) cfg[c.section][k] = v;
      qkv::write_file_atomic(file, cfg.dump());
      const int code = run_qkv({"train", "--config", file, "--train", (dir / "missing.txt").string(), "--valid",
                                (dir / "missing.txt").string(), "--out", (dir / "run").string()},
                               dir / "train.log");
      const std::string log = read_file((dir / "train.log").string());
      EXPECT_EQ(code, 1) << type << " " << c.section;
      EXPECT_NE(log.find(c.want), std::string::npos) << type << ": expected \"" << c.want << "\" in:\n" << log;
      EXPECT_FALSE(fs::exists(dir / "run")) << type;
    }
  fs::remove_all(dir);
}

TEST(TrainConfigErrors, AFailedNewRunLeavesNoDirectoryAndTheFixedCommandRuns) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("qkv_train_retry_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  qkv::testing::write_reversal_corpus(dir, 60, 50, 777);
  // Found only once the tokenizer is learned, after run.json was written: no validation pair fits
  // the model (model.max_len 6). The error names the validation file, not "the training corpus".
  nlohmann::json bad = good_config();
  bad["data"]["max_len"] = 6;
  const std::string valid = read_file((dir / "valid.tsv").string());
  qkv::write_file_atomic((dir / "valid.tsv").string(), "a b c d e f g h\ta b c d e f g h\n");
  Attempt a = attempt_train(dir, bad);
  EXPECT_EQ(a.code, 1);
  EXPECT_NE(a.log.find((dir / "valid.tsv").string() + ": none of its 1 pairs fits: every one has more than 6 tokens "
                       "on a side (" + (dir / "config.json").string() + ": data.max_len)"),
            std::string::npos)
      << a.log;
  EXPECT_NE(a.log.find("removed " + (dir / "run").string() + ": the run failed before its first step"),
            std::string::npos)
      << a.log;
  EXPECT_FALSE(fs::exists(dir / "run"));
  // In an --out that was there, what the run wrote goes and what was there stays.
  fs::create_directories(dir / "run");
  qkv::write_file_atomic((dir / "run" / "notes.txt").string(), "mine\n");
  a = attempt_train(dir, bad);
  EXPECT_EQ(a.code, 1);
  EXPECT_NE(a.log.find("removed what the run wrote in " + (dir / "run").string()), std::string::npos) << a.log;
  EXPECT_EQ(read_file((dir / "run" / "notes.txt").string()), "mine\n");
  EXPECT_FALSE(fs::exists(dir / "run" / "run.json"));
  EXPECT_FALSE(fs::exists(dir / "run" / "work"));
  qkv::write_file_atomic((dir / "valid.tsv").string(), valid);
  a = attempt_train(dir, good_config());
  ASSERT_EQ(a.code, 0) << a.log;
  EXPECT_TRUE(fs::exists(dir / "run/model/model.safetensors"));

  // --attention-line is checked before any translating; nothing is written.
  qkv::write_file_atomic((dir / "in.txt").string(), "alpha beta\n");
  const fs::path log = dir / "t.log";
  EXPECT_EQ(run_qkv({"translate", "--model", (dir / "run/model").string(), "-i", (dir / "in.txt").string(), "-o",
                     (dir / "out.txt").string(), "--attention", (dir / "a.html").string(), "--attention-line", "2"},
                    log),
            1);
  EXPECT_NE(read_file(log.string()).find("--attention-line: must be in 1..1, got 2"), std::string::npos)
      << read_file(log.string());
  EXPECT_FALSE(fs::exists(dir / "out.txt"));

  // A tokenizer made for another model (a GPT's: no <pad>) is named when it cannot serve.
  ASSERT_EQ(run_qkv({"train-tokenizer", "--kind", "bytebpe", "--vocab-size", "300", "-i", (dir / "train.tsv").string(),
                     "-o", (dir / "gpt_tok.json").string()},
                    log),
            0)
      << read_file(log.string());
  const fs::path cfg = dir / "config.json";
  EXPECT_EQ(run_qkv({"train", "--config", cfg.string(), "--train", (dir / "train.tsv").string(), "--valid",
                     (dir / "valid.tsv").string(), "--out", (dir / "run_tok").string(), "--tokenizer",
                     (dir / "gpt_tok.json").string()},
                    log),
            1);
  const std::string named = (dir / "gpt_tok.json").string() + ": cannot be a translation model's tokenizer";
  EXPECT_NE(read_file(log.string()).find(named), std::string::npos)
      << read_file(log.string());
  EXPECT_FALSE(fs::exists(dir / "run_tok"));

  // A run that trained keeps its directory whatever happens next: here the same --out again is
  // refused and nothing in it is touched.
  a = attempt_train(dir, good_config());
  EXPECT_EQ(a.code, 1);
  EXPECT_NE(a.log.find("already holds a run"), std::string::npos) << a.log;
  EXPECT_TRUE(fs::exists(dir / "run/model/model.safetensors"));
  EXPECT_TRUE(fs::exists(dir / "run/metrics.jsonl"));
  // A run that never saved (its process killed before the first checkpoint, as MPI ends the other
  // ranks when one fails) says so, rather than advise --resume, which then finds no checkpoint.
  fs::remove_all(dir / "run/checkpoints");
  fs::create_directories(dir / "run/checkpoints");
  EXPECT_EQ(run_qkv({"train", "--config", cfg.string(), "--train", (dir / "train.tsv").string(), "--valid",
                     (dir / "valid.tsv").string(), "--out", (dir / "run").string()}, log), 1);
  EXPECT_NE(read_file(log.string()).find("holds a run that stopped before its first save (nothing to resume)"),
            std::string::npos) << read_file(log.string());
  EXPECT_EQ(run_qkv({"train", "--resume", (dir / "run").string()}, log), 1);
  EXPECT_NE(read_file(log.string()).find("the run stopped before its first save: delete the directory"),
            std::string::npos) << read_file(log.string());
  fs::remove_all(dir);
}

// Mistakes that are not errors but waste a run are said at the start: a tokenizer that maps the
// text to <unk> (the run then trains to BLEU 0 looking healthy), and a vocabulary size below what
// the alphabet alone needs.
TEST(TrainConfigErrors, WarnsWhenTheTokenizerDoesNotCoverTheText) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("qkv_train_unk_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  qkv::testing::write_reversal_corpus(dir, 60, 50, 777);
  const fs::path log = dir / "t.log";
  ASSERT_EQ(run_qkv({"train-tokenizer", "--kind", "word", "--vocab-size", "4", "-i", (dir / "train.tsv").string(),
                     "-o", (dir / "specials_only.json").string()},
                    log),
            0)
      << read_file(log.string());
  EXPECT_EQ(read_file(log.string()).find("warning"), std::string::npos) << read_file(log.string());
  ASSERT_EQ(run_qkv({"train-tokenizer", "--kind", "bpe", "--vocab-size", "1", "-i", (dir / "train.tsv").string(),
                     "-o", (dir / "tiny.json").string()},
                    log),
            0)
      << read_file(log.string());
  EXPECT_NE(read_file(log.string()).find("warning: the vocabulary has"), std::string::npos) << read_file(log.string());

  const fs::path cfg = dir / "config.json";
  qkv::write_file_atomic(cfg.string(), good_config().dump());
  ASSERT_EQ(run_qkv({"train", "--config", cfg.string(), "--train", (dir / "train.tsv").string(), "--valid",
                     (dir / "valid.tsv").string(), "--out", (dir / "run").string(), "--tokenizer",
                     (dir / "specials_only.json").string()},
                    log),
            0)
      << read_file(log.string());
  const std::string out = read_file(log.string());
  EXPECT_NE(out.find("% of the source training tokens are unknown to the tokenizer"), std::string::npos) << out;
  EXPECT_NE(out.find("% of the target training tokens are unknown to the tokenizer"), std::string::npos) << out;
  // A tokenizer learned on the text itself: no warning.
  fs::remove_all(dir / "run");
  const Attempt a = attempt_train(dir, good_config());
  ASSERT_EQ(a.code, 0) << a.log;
  EXPECT_EQ(a.log.find("warning"), std::string::npos) << a.log;
  fs::remove_all(dir);
}

// A run.json that is valid JSON of the wrong shape is refused naming the file and what was
// expected (it gave nlohmann's "type_error.304: cannot use at() with array").
TEST(TrainConfigErrors, AResumedRunJsonOfTheWrongShapeIsNamed) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("qkv_train_runjson_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string run_json = (dir / "run.json").string();
  struct Case {
    const char* text;
    const char* want;
  } cases[] = {{"[]", "expected an object whose field 'config' is the run's config object"},
               {R"({"config": {}, "train": 5, "valid": "v.tsv"})", "field 'train': expected a file name (a string)"}};
  for (const Case& c : cases) {
    qkv::write_file_atomic(run_json, c.text);
    EXPECT_EQ(run_qkv({"train", "--resume", dir.string()}, dir / "log"), 1);
    const std::string log = read_file((dir / "log").string());
    EXPECT_NE(log.find(run_json + ": " + c.want), std::string::npos) << log;
  }
  fs::remove_all(dir);
}

// With a tokenizer given (--tokenizer), the config's tokenizer section is still read: keys that
// describe learning one warn that they are unused, and an unknown key is an error (all three were
// ignored, and stored in run.json). train-tokenizer refuses input with no text: its vocabulary of
// special tokens alone read every text as <unk>.
TEST(TrainConfigErrors, TheTokenizerSectionIsReadWhenATokenizerIsGiven) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("qkv_train_given_tok_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  qkv::testing::write_reversal_corpus(dir, 60, 50, 777);
  const fs::path log = dir / "t.log";
  ASSERT_EQ(run_qkv({"train-tokenizer", "--kind", "bpe", "--vocab-size", "60", "-i", (dir / "train.tsv").string(),
                     "-o", (dir / "tok.json").string()},
                    log),
            0)
      << read_file(log.string());
  // A special token that is not UTF-8 is named before training (the JSON writer failed after it).
  EXPECT_EQ(run_qkv({"train-tokenizer", "--kind", "bpe", "--vocab-size", "60", "-i", (dir / "train.tsv").string(),
                     "-o", (dir / "bad.json").string(), "--special-tokens", "<unk>,\xff\xfe"},
                    log),
            1);
  EXPECT_NE(read_file(log.string()).find("--special-tokens: token 2 is not valid UTF-8"), std::string::npos)
      << read_file(log.string());
  EXPECT_FALSE(fs::exists(dir / "bad.json"));
  const fs::path cfg = dir / "config.json";
  auto train_with = [&](const nlohmann::json& tokenizer_section, const std::string& out) {
    nlohmann::json c = good_config();
    c["tokenizer"] = tokenizer_section;
    qkv::write_file_atomic(cfg.string(), c.dump());
    return run_qkv({"train", "--config", cfg.string(), "--train", (dir / "train.tsv").string(), "--valid",
                    (dir / "valid.tsv").string(), "--out", (dir / out).string(), "--tokenizer",
                    (dir / "tok.json").string()},
                   log);
  };
  EXPECT_EQ(train_with({{"vocab_sise", 8000}}, "bad"), 1);
  EXPECT_NE(read_file(log.string()).find(cfg.string() + ": field 'tokenizer.vocab_sise': unknown key"),
            std::string::npos)
      << read_file(log.string());
  EXPECT_FALSE(fs::exists(dir / "bad"));
  ASSERT_EQ(train_with({{"kind", "bpe"}, {"vocab_size", 8000}, {"shared", true}}, "ok"), 0) << read_file(log.string());
  EXPECT_NE(read_file(log.string()).find("warning: tokenizer.kind, tokenizer.vocab_size, tokenizer.shared not used: "
                                         "the tokenizer comes from --tokenizer " + (dir / "tok.json").string()),
            std::string::npos)
      << read_file(log.string());

  // Empty for every kind; blank lines too where whitespace is not text (a byte-level or character
  // vocabulary learns the spaces).
  // tokenizer.path does what --tokenizer does.
  nlohmann::json by_path = good_config();
  by_path["tokenizer"] = {{"path", (dir / "tok.json").string()}};
  qkv::write_file_atomic(cfg.string(), by_path.dump());
  ASSERT_EQ(run_qkv({"train", "--config", cfg.string(), "--train", (dir / "train.tsv").string(), "--valid",
                     (dir / "valid.tsv").string(), "--out", (dir / "by_path").string()},
                    log),
            0)
      << read_file(log.string());
  EXPECT_EQ(read_file(log.string()).find("learning BPE"), std::string::npos) << read_file(log.string());
  EXPECT_EQ(nlohmann::json::parse(read_file((dir / "by_path/model/tokenizer.json").string())),
            nlohmann::json::parse(read_file((dir / "ok/model/tokenizer.json").string())));

  for (const auto& [kind, text] : std::vector<std::pair<std::string, std::string>>{
           {"bpe", ""}, {"bytebpe", ""}, {"word", ""}, {"char", ""}, {"bpe", "\n  \n"}, {"word", "\n \t\n"}}) {
    qkv::write_file_atomic((dir / "blank.txt").string(), text);
    EXPECT_EQ(run_qkv({"train-tokenizer", "--kind", kind, "-i", (dir / "blank.txt").string(), "-o",
                       (dir / "blank.json").string()},
                      log),
              1)
        << kind;
    EXPECT_NE(read_file(log.string()).find((dir / "blank.txt").string() +
                                           ": no text to learn a tokenizer from: every input is empty or blank"),
              std::string::npos)
        << kind << ": " << read_file(log.string());
    EXPECT_FALSE(fs::exists(dir / "blank.json")) << kind;
  }
  fs::remove_all(dir);
}

// run.json's model must be the checkpoint's on --resume: an edited d_model was taken, and the
// checkpoints after it (weights of d_model 16 under a config.json saying 32) loaded nowhere.
TEST(TrainConfigErrors, AResumeWithAnEditedModelIsRefusedByField) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("qkv_train_edited_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  qkv::testing::write_reversal_corpus(dir, 60, 50, 777);
  ASSERT_EQ(attempt_train(dir, good_config()).code, 0);
  const std::string run_json = (dir / "run" / "run.json").string();
  const std::string original = read_file(run_json);
  struct Case {
    const char* section;
    const char* key;
    nlohmann::json value;
    const char* want;
  } cases[] = {{"model", "d_model", 32, "field 'model.d_model' is 32 but the checkpoint's ("},
               {"model", "dropout", 0.3, "field 'model.dropout' is 0.3 but the checkpoint's ("},
               {"tokenizer", "protect", true, "field 'tokenizer.protect' is true but the checkpoint's model was "}};
  for (const Case& c : cases) {
    nlohmann::json rj = nlohmann::json::parse(original);
    rj["config"][c.section][c.key] = c.value;
    qkv::write_file_atomic(run_json, rj.dump(2));
    EXPECT_EQ(run_qkv({"train", "--resume", (dir / "run").string(), "--max-steps", "6"}, dir / "log"), 1) << c.key;
    const std::string log = read_file((dir / "log").string());
    EXPECT_NE(log.find(run_json + ": " + c.want), std::string::npos) << log;
  }
  EXPECT_FALSE(fs::exists(qkv::testing::step_dir(dir / "run", 6)));
  qkv::write_file_atomic(run_json, original);
  EXPECT_EQ(run_qkv({"train", "--resume", (dir / "run").string(), "--max-steps", "6"}, dir / "log"), 0)
      << read_file((dir / "log").string());
  fs::remove_all(dir);
}
