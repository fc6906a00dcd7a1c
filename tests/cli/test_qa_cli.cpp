// Extractive QA end to end (tasks/qa_training.h, tasks/question_answerer.h, `qkv answer`): `qkv
// train` with model_type bert_qa trains a tiny BERT from scratch (a WordPiece vocabulary learned
// on the data) on a synthetic learnable task whose contexts are longer than the window, and
// reaches a high validation F1; `qkv answer --data` scores its model/ at high EM; `qkv answer`
// prints answers whose character offsets spell them in the context (non-ASCII text before them),
// n-best lists best first, for JSON and question<TAB>context lines alike; malformed lines and
// answers that do not match their context are errors naming the file, line and field; init_from a
// BertForPreTraining directory reports the new head and the ignored pooler and cls.* and
// publishes a BertForQuestionAnswering directory; a run stopped and resumed ends with the same
// bits as one run straight through.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "qkv/data/qa_examples.h"
#include "qkv/util/file.h"
#include "qkv/util/utf8.h"
#include "qkv/io/bert_qa.h"
#include "qkv/kernels/bf16.h"
#include "qkv/kernels/int8.h"
#include "ref.h"
#include "run_qkv.h"

using namespace qkv;
using namespace qkv::testing;
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kColor = {"red", "blue", "green", "yellow", "purple", "orange"};
const std::vector<std::string> kQaFruit = {"apple", "banana", "cherry", "grape", "lemon", "mango"};
const std::vector<std::string> kFiller = {"dog", "cat", "horse", "über", "sheep", "goat", "mouse", "tiger", "zebra", "owl"};

// A context of 20-34 filler words holding one colour (sometimes "dark X" or "light X") and one
// fruit; the question asks for one of them. About 50 tokens: longer than the 32-token window.
data::QaExample example(std::mt19937& rng, int i) {
  const int n = 20 + int(rng() % 15);
  std::vector<std::string> w;
  for (int k = 0; k < n; ++k) w.push_back(kFiller[rng() % kFiller.size()]);
  const int shade = int(rng() % 3);
  std::string color = (shade == 1 ? "dark " : shade == 2 ? "light " : "") + kColor[rng() % kColor.size()];
  const std::string fruit = kQaFruit[rng() % kQaFruit.size()];
  const size_t cpos = rng() % w.size();
  size_t fpos = rng() % w.size();
  if (fpos == cpos) fpos = (fpos + 1) % w.size();
  w[cpos] = color, w[fpos] = fruit;
  std::string ctx;
  for (size_t k = 0; k < w.size(); ++k) ctx += (k ? " " : "") + w[k];
  ctx += ".";
  const bool ask_color = rng() % 2;
  const std::string ans = ask_color ? color : fruit;
  data::QaExample e;
  e.id = "q" + std::to_string(i);
  e.question = ask_color ? "which colour is named ?" : "which fruit is named ?";
  e.context = ctx;
  // the answer is the word at its position: find it as a whole word
  size_t at = 0;
  for (size_t k = 0; k < (ask_color ? cpos : fpos); ++k) at += w[k].size() + 1;
  e.answers.push_back({ans, int64_t(utf8::to_u32_strict(ctx.substr(0, at), "ctx").size()), 0, 0});
  return e;
}

std::string jsonl(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string out;
  for (int i = 0; i < n; ++i) out += data::qa_example_json(example(rng, i)) + "\n";
  return out;
}

const char* kQaConfig = R"({
  "model_type": "bert_qa",
  "model": {"hidden_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 96,
            "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0, "max_position_embeddings": 32},
  "tokenizer": {"kind": "wordpiece", "vocab_size": 300, "min_frequency": 1},
  "data": {"max_len": 32, "doc_stride": 12, "max_query_len": 8, "batch_size": 16},
  "optimizer": {"type": "adamw", "lr": 0.003, "weight_decay": 0.0},
  "schedule": {"type": "warmup_cosine", "lr": 0.003, "warmup": 30, "min_lr": 0.0003},
  "train": {"max_steps": 500, "valid_every": 250, "save_every": 250, "log_every": 100},
  "valid": {"max_examples": 100, "max_answer_length": 4},
  "seed": 5
})";

struct QaRun {
  fs::path dir, model;
};

const QaRun& trained() {
  static const QaRun r = [] {
    QaRun q;
    q.dir = fs::path(::testing::TempDir()) / ("qkv_qa_cli_" + std::to_string(::getpid()));
    fs::remove_all(q.dir);
    fs::create_directories(q.dir);
    write_file_atomic((q.dir / "train.jsonl").string(), jsonl(1200, 1));
    write_file_atomic((q.dir / "valid.jsonl").string(), jsonl(100, 2));
    write_file_atomic((q.dir / "config.json").string(), kQaConfig);
    const int code = run_qkv({"train", "--config", (q.dir / "config.json").string(), "--train",
                              (q.dir / "train.jsonl").string(), "--valid", (q.dir / "valid.jsonl").string(), "--out",
                              (q.dir / "run").string()},
                             q.dir / "train.log");
    EXPECT_EQ(code, 0) << read_file((q.dir / "train.log").string());
    q.model = q.dir / "run" / "model";
    return q;
  }();
  return r;
}

std::vector<nlohmann::json> json_lines(const std::string& text) {
  std::vector<nlohmann::json> out;
  size_t p = 0;
  while (p < text.size()) {
    const size_t nl = text.find('\n', p);
    const std::string line = text.substr(p, nl - p);
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
    p = nl == std::string::npos ? text.size() : nl + 1;
  }
  return out;
}

}  // namespace

TEST(QaCli, TrainsATinyBertToHighExactMatchOnWindowedContexts) {
  const QaRun& r = trained();
  ASSERT_TRUE(fs::exists(r.model / "model.safetensors"));
  ASSERT_TRUE(fs::exists(r.model / "qa.json"));
  const std::string log = read_file((r.dir / "train.log").string());
  EXPECT_NE(log.find("train to [CLS]"), std::string::npos) << log;  // contexts span several windows
  const fs::path out = r.dir / "score.json";
  ASSERT_EQ(run_qkv({"answer", "--model", r.model.string(), "--data", (r.dir / "valid.jsonl").string(), "--json"},
                    r.dir / "score.log", out.string()),
            0)
      << read_file((r.dir / "score.log").string());
  const auto j = nlohmann::json::parse(read_file(out.string()));
  EXPECT_GE(j["exact_match"].get<double>(), 90.0) << j.dump() << "\n" << log;
  EXPECT_GE(j["f1"].get<double>(), j["exact_match"].get<double>());
  EXPECT_EQ(j["examples"], 100);
}

TEST(QaCli, AnswersCarryCharacterOffsetsAndNBestLists) {
  const QaRun& r = trained();
  std::mt19937 rng(9);
  std::vector<data::QaExample> es;
  for (int i = 0; i < 6; ++i) es.push_back(example(rng, i));
  std::string input;
  for (size_t i = 0; i < es.size(); ++i)  // JSON lines and question<TAB>context lines mixed
    input += (i % 2 ? es[i].question + "\t" + es[i].context : nlohmann::json{{"question", es[i].question}, {"context", es[i].context}}.dump()) + "\n";
  write_file_atomic((r.dir / "in.txt").string(), input);
  const fs::path out = r.dir / "answers.jsonl";
  ASSERT_EQ(run_qkv({"answer", "-m", r.model.string(), "--input", (r.dir / "in.txt").string(), "--json", "--n-best",
                     "3"},
                    r.dir / "answer.log", out.string()),
            0)
      << read_file((r.dir / "answer.log").string());
  const auto lines = json_lines(read_file(out.string()));
  ASSERT_EQ(lines.size(), es.size());
  int right = 0;
  for (size_t i = 0; i < es.size(); ++i) {
    SCOPED_TRACE(lines[i].dump());
    const std::u32string ctx = utf8::to_u32_strict(es[i].context, "ctx");
    const auto& nb = lines[i]["n_best"];
    ASSERT_EQ(nb.size(), 3u);
    for (size_t k = 0; k < nb.size(); ++k) {
      const int64_t s = nb[k]["start"], e = nb[k]["end"];
      ASSERT_TRUE(s >= 0 && s < e && e <= int64_t(ctx.size()));
      EXPECT_EQ(utf8::from_u32(ctx.substr(size_t(s), size_t(e - s))), nb[k]["answer"].get<std::string>());
      if (k) {
        EXPECT_GE(nb[k - 1]["score"].get<double>(), nb[k]["score"].get<double>());
      }
    }
    EXPECT_EQ(lines[i]["answer"], nb[0]["answer"]);
    right += lines[i]["answer"] == es[i].answers[0].text;
  }
  EXPECT_GE(right, 5);
  // --precision: the weights held in bf16 / int8 (where this CPU runs them) answer as well.
  for (const std::string p : {"bf16", "int8"}) {
    if (p == "bf16" ? !kernels::dnnl_cpu_info().bf16_native() : !kernels::int8_supported()) continue;
    ASSERT_EQ(run_qkv({"answer", "-m", r.model.string(), "--input", (r.dir / "in.txt").string(), "--json",
                       "--precision", p},
                      r.dir / "answer.log", out.string()),
              0)
        << read_file((r.dir / "answer.log").string());
    const auto reduced = json_lines(read_file(out.string()));
    ASSERT_EQ(reduced.size(), es.size());
    int same = 0;
    for (size_t i = 0; i < es.size(); ++i) same += reduced[i]["answer"] == es[i].answers[0].text;
    EXPECT_GE(same, 5) << p;
  }
  // plain output: answer<TAB>start<TAB>end<TAB>score, one line per input
  const fs::path plain = r.dir / "answers.txt";
  ASSERT_EQ(run_qkv({"answer", "-m", r.model.string(), "--input", (r.dir / "in.txt").string()}, r.dir / "plain.log",
                    plain.string()),
            0);
  const std::string text = read_file(plain.string());
  const std::string first = text.substr(0, text.find('\n'));
  EXPECT_EQ(first.substr(0, first.find('\t')), lines[0]["answer"].get<std::string>());
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), int64_t(es.size()));
}

TEST(QaCli, MalformedInputNamesFileLineAndField) {
  const QaRun& r = trained();
  auto expect_error = [&](const std::vector<std::string>& args, const std::string& content,
                          const std::vector<std::string>& parts) {
    const fs::path f = r.dir / "bad.jsonl";
    write_file_atomic(f.string(), content);
    std::vector<std::string> full = {"answer", "-m", r.model.string()};
    full.insert(full.end(), args.begin(), args.end());
    full.push_back(f.string());
    EXPECT_NE(run_qkv(full, r.dir / "bad.log"), 0);
    const std::string log = read_file((r.dir / "bad.log").string());
    EXPECT_NE(log.find(f.string() + ":2"), std::string::npos) << log;
    for (auto& p : parts) EXPECT_NE(log.find(p), std::string::npos) << log;
  };
  const std::string good = R"({"question": "which fruit ?", "context": "a mango here", "answers": [{"text": "mango", "answer_start": 2}]})";
  expect_error({"--input"}, good + "\n{\"question\": \"x\"\n", {"not a valid JSON line"});
  expect_error({"--input"}, good + "\nno tab on this line\n", {"question<TAB>context"});
  // A question that leaves a window of 8 no room for its context: the line is named, not just the window.
  expect_error({"--max-len", "8", "--input"}, good + "\nwhich fruit is here and there ?\ta mango here\n",
               {"leaves no room for the context", "qkv answer --max-query-len"});
  // ... and --max-query-len makes room: the question is cut to 2 tokens, the context gets 3.
  write_file_atomic((r.dir / "long_q.txt").string(), "which fruit is here and there ?\ta mango here\n");
  EXPECT_EQ(run_qkv({"answer", "-m", r.model.string(), "--max-len", "8", "--max-query-len", "2", "--input",
                     (r.dir / "long_q.txt").string()}, r.dir / "long_q.log"), 0)
      << read_file((r.dir / "long_q.log").string());
  // Invalid UTF-8 in a question<TAB>context line (JSON lines are refused by the parser).
  expect_error({"--input"}, good + "\nwho\tthe owner \xf0\x9f is bob\n", {"not valid UTF-8"});
  expect_error({"--data"}, good + "\n" + R"({"question": "q", "context": "a mango", "answers": [{"text": "mango", "answer_start": 3}]})",
               {"answers[0].answer_start", "'ango'", "'mango'"});
  expect_error({"--data"}, good + "\n" + R"({"question": "q", "context": "a mango"})", {"'answers'", "at least one"});
}

// A model directory's qa.json out of bounds names the file and the key, when it is loaded (a
// doc_stride of 0 used to surface later as "QA windows: doc_stride must be >= 1").
TEST(QaCli, BadWindowSettingsInQaJsonNameTheFileAndKey) {
  const QaRun& r = trained();
  const fs::path copy = r.dir / "bad_qa_model";
  fs::remove_all(copy);
  fs::copy(r.model, copy, fs::copy_options::recursive);
  write_file_atomic((r.dir / "one.txt").string(), "which fruit ?\ta mango here\n");
  for (const char* key : {"doc_stride", "max_query_len", "max_answer_length"}) {
    SCOPED_TRACE(key);
    auto j = nlohmann::json::parse(read_file((r.model / "qa.json").string()));
    j[key] = 0;
    write_file_atomic((copy / "qa.json").string(), j.dump());
    EXPECT_NE(run_qkv({"answer", "-m", copy.string(), "--input", (r.dir / "one.txt").string()}, r.dir / "qa.log"), 0);
    const std::string log = read_file((r.dir / "qa.log").string());
    EXPECT_NE(log.find((copy / "qa.json").string()), std::string::npos) << log;
    EXPECT_NE(log.find(key), std::string::npos) << log;
  }
}

TEST(QaCli, InitFromAPretrainingDirectoryReportsTheNewHead) {
  RefFile ref("models_bert");  // a BertForPreTraining directory: words w0..w39, 16 positions
  const std::string pre = (fs::path(ref_dir()) / ref.params("pretraining")["dir"].get<std::string>()).string();
  const fs::path dir = fs::path(::testing::TempDir()) / ("qkv_qa_init_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string lines;
  std::mt19937 rng(4);
  for (int i = 0; i < 40; ++i) {  // context: 12 words; the answer: the word after w0
    std::vector<std::string> w;
    for (int k = 0; k < 12; ++k) w.push_back("w" + std::to_string(1 + rng() % 39));
    const size_t at = rng() % 11;
    w[at] = "w0";
    std::string ctx, before;
    for (size_t k = 0; k < w.size(); ++k) {
      ctx += (k ? " " : "") + w[k];
      if (k == at) before = ctx + " ";
    }
    data::QaExample e{"e" + std::to_string(i), "w0 w1", ctx, {{w[at + 1], int64_t(before.size()), 0, 0}}};
    lines += data::qa_example_json(e) + "\n";
  }
  write_file_atomic((dir / "qa.jsonl").string(), lines);
  write_file_atomic((dir / "config.json").string(), R"({"model_type": "bert_qa", "init_from": ")" + pre + R"(",
    "data": {"max_len": 16, "doc_stride": 4, "max_query_len": 4, "batch_size": 8},
    "train": {"max_steps": 4, "valid_every": 4, "save_every": 4}, "valid": {"max_answer_length": 3}})");
  auto train = [&](const std::string& valid, const std::string& out, std::vector<std::string> more) {
    std::vector<std::string> a{"train", "--config", (dir / "config.json").string(), "--train",
                               (dir / "qa.jsonl").string(), "--valid", valid, "--out", (dir / out).string()};
    a.insert(a.end(), more.begin(), more.end());
    return run_qkv(a, dir / (out + ".log"));
  };
  // --tokenizer with init_from is refused (it was not used, silently); a validation file of blank
  // lines is named before anything is learned (it ended the run after its steps, "no examples");
  // one step with the default schedule runs (its warmup of 1 step equalled the total).
  EXPECT_EQ(train((dir / "qa.jsonl").string(), "tok", {"--tokenizer", (dir / "qa.jsonl").string()}), 1);
  EXPECT_NE(read_file((dir / "tok.log").string()).find("--tokenizer is not used with init_from"), std::string::npos)
      << read_file((dir / "tok.log").string());
  write_file_atomic((dir / "blank.jsonl").string(), "\n \n\n");
  EXPECT_EQ(train((dir / "blank.jsonl").string(), "blank", {}), 1);
  EXPECT_NE(read_file((dir / "blank.log").string()).find((dir / "blank.jsonl").string() + ": no questions"),
            std::string::npos)
      << read_file((dir / "blank.log").string());
  EXPECT_FALSE(fs::exists(dir / "blank"));
  EXPECT_EQ(train((dir / "qa.jsonl").string(), "one", {"--max-steps", "1"}), 0) << read_file((dir / "one.log").string());
  ASSERT_EQ(run_qkv({"train", "--config", (dir / "config.json").string(), "--train", (dir / "qa.jsonl").string(),
                     "--valid", (dir / "qa.jsonl").string(), "--out", (dir / "run").string()},
                    dir / "train.log"),
            0)
      << read_file((dir / "train.log").string());
  const std::string log = read_file((dir / "train.log").string());
  EXPECT_NE(log.find("newly initialised: qa_outputs.weight"), std::string::npos) << log;
  EXPECT_NE(log.find("ignored: bert.pooler.dense.weight"), std::string::npos) << log;
  EXPECT_NE(log.find("ignored: cls.seq_relationship.weight"), std::string::npos) << log;
  io::BertQaBundle b = io::load_bert_qa((dir / "run" / "model").string());
  EXPECT_TRUE(b.report.initialised.empty() && b.report.ignored.empty()) << b.report.summary();
  ASSERT_NE(b.tokenizer, nullptr);
  EXPECT_EQ(b.tokenizer->vocab_size(), 45);
  fs::remove_all(dir);
}

TEST(QaCli, ResumedRunEndsWithTheBitsOfAStraightRun) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("qkv_qa_resume_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_file_atomic((dir / "train.jsonl").string(), jsonl(120, 3));
  write_file_atomic((dir / "valid.jsonl").string(), jsonl(10, 4));
  std::string cfg = kQaConfig;  // dropout on, so the resumed generator state matters; a constant lr
  auto replace = [&](const std::string& from, const std::string& to) {
    const size_t at = cfg.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    cfg.replace(at, from.size(), to);
  };
  replace("\"hidden_dropout_prob\": 0.0", "\"hidden_dropout_prob\": 0.1");
  replace("\"type\": \"warmup_cosine\", \"lr\": 0.003, \"warmup\": 30, \"min_lr\": 0.0003", "\"type\": \"constant\", \"lr\": 0.003");
  replace("\"max_steps\": 500, \"valid_every\": 250, \"save_every\": 250",
          "\"max_steps\": 8, \"valid_every\": 4, \"save_every\": 4, \"keep_last\": 5");
  write_file_atomic((dir / "config.json").string(), cfg);
  auto train = [&](const std::string& run, const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"train"};
    args.insert(args.end(), extra.begin(), extra.end());
    const int code = run_qkv(args, dir / (run + ".log"));
    ASSERT_EQ(code, 0) << read_file((dir / (run + ".log")).string());
  };
  const std::vector<std::string> data = {"--train", (dir / "train.jsonl").string(), "--valid", (dir / "valid.jsonl").string()};
  std::vector<std::string> a = {"--config", (dir / "config.json").string(), "--out", (dir / "a").string()};
  a.insert(a.end(), data.begin(), data.end());
  train("a", a);
  std::vector<std::string> b = {"--config", (dir / "config.json").string(), "--out", (dir / "b").string(), "--max-steps", "4"};
  b.insert(b.end(), data.begin(), data.end());
  train("b", b);
  train("b2", {"--resume", (dir / "b").string(), "--max-steps", "8"});
  const std::string wa = read_file((dir / "a" / "checkpoints" / "step-000000008" / "model.safetensors").string());
  const std::string wb = read_file((dir / "b" / "checkpoints" / "step-000000008" / "model.safetensors").string());
  EXPECT_FALSE(wa.empty());
  EXPECT_TRUE(wa == wb) << "the resumed run's weights differ from the straight run's";
  const std::string sa = read_file((dir / "a" / "checkpoints" / "step-000000004" / "model.safetensors").string());
  EXPECT_FALSE(sa == wa);  // training moved the weights between the checkpoints
  fs::remove_all(dir);
}
