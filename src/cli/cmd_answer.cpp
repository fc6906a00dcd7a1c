// qkv answer --model DIR [--input FILE] [--json] [--n-best N] [--precision P]: extractive question answering with
// a fine-tuned BertForQuestionAnswering (tasks::QuestionAnswerer). Input lines are JSON objects
// {"question", "context"[, "id", "answers"]} or question<TAB>context; output per input is
// "answer<TAB>start<TAB>end<TAB>score" (character offsets into the context; a tab, newline or
// backslash in the answer written as \t, \n, \\), with --n-best N the N best such lines and a
// blank line after each input, or with --json one JSON line
// {"answer", "start", "end", "score"[, "id"][, "n_best": [...]]}.
// qkv answer --model DIR --data FILE: SQuAD-shaped JSON lines with gold answers -> EM and F1.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli.h"
#include "qkv/tasks/question_answerer.h"

namespace qkv::cli {
namespace {

std::string escape_plain(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '\t') o += "\\t";
    else if (c == '\n') o += "\\n";
    else if (c == '\\') o += "\\\\";
    else o += c;
  }
  return o;
}

nlohmann::json span_json(const tasks::QaAnswerSpan& a) {
  return {{"answer", a.text}, {"start", a.start}, {"end", a.end}, {"score", a.score}};
}

int run_answer(int argc, char** argv) {
  CLI::App app{"Answer questions about contexts with a fine-tuned BERT question-answering model", "qkv answer"};
  std::string model_dir, input, data_file;
  bool json = false;
  int64_t n_best = 1, max_answer_length = -1, doc_stride = -1, max_len = -1, max_query_len = -1, top_k = 0,
          batch_size = 32;
  app.add_option("--model,-m", model_dir, "question-answering model directory (e.g. RUN/model)")->required();
  app.add_option("--input,-i", input, "JSON lines {\"question\", \"context\"} or question<TAB>context lines (default: stdin)");
  app.add_option("--data", data_file, "SQuAD-style JSON lines with gold answers: print exact match and F1");
  app.add_flag("--json", json, "print JSON lines");
  app.add_option("--n-best", n_best, "print the N best answers per question")->check(positive());
  app.add_option("--top-k", top_k, "pair only the top K starts and ends of each window (Hugging Face's heuristic; "
                 "default 0: every valid span)")->check(non_negative());
  app.add_option("--max-answer-length", max_answer_length, "longest answer in tokens (default: the model's qa.json)")
      ->check(positive());
  app.add_option("--max-len", max_len, "window length in tokens (default: the model's qa.json)")->check(positive());
  app.add_option("--doc-stride", doc_stride, "context tokens between window starts (default: the model's qa.json)")
      ->check(positive());
  app.add_option("--max-query-len", max_query_len, "question tokens kept, the rest cut (default: the model's qa.json)")
      ->check(positive());
  app.add_option("--batch-size", batch_size, "windows per forward pass")->check(positive());
  std::string precision = "fp32";
  add_precision_option(app, precision);
  QKV_PARSE(app, argc, argv);
  // bf16 / int8: the weights held so as they are read, options().precision set.
  tasks::QuestionAnswerer qa(model_dir, read_precision(precision, "qkv answer"));
  tasks::QaOptions& o = qa.options();
  o.n_best = n_best;
  o.top_k = top_k;
  o.batch_size = batch_size;
  if (max_answer_length > 0) o.max_answer_length = max_answer_length;
  if (max_len > 0) o.window.max_len = max_len;
  if (doc_stride > 0) o.window.doc_stride = doc_stride;
  if (max_query_len > 0) o.window.max_query_len = max_query_len;

  if (!data_file.empty()) {
    QKV_CHECK(input.empty(), "qkv answer", "give --data FILE (scored) or --input FILE (answered), not both");
    const auto examples = data::read_qa_file(data_file, true);
    const eval::SpanScores s = tasks::evaluate_qa(qa, examples);
    if (json)
      std::printf("%s\n", nlohmann::json{{"exact_match", s.exact_match}, {"f1", s.f1}, {"examples", examples.size()}}
                              .dump().c_str());
    else
      std::printf("exact_match\t%.2f\nf1\t%.2f\nexamples\t%zu\n", s.exact_match, s.f1, examples.size());
    return 0;
  }
  const auto examples = data::read_qa_file(input.empty() ? "-" : input, false, true);
  std::vector<std::pair<std::string, std::string>> inputs;
  std::vector<std::string> where;  // read_qa_file refuses blank lines here: input i is line i + 1
  for (auto& e : examples) {
    inputs.push_back({e.question, e.context});
    where.push_back((input.empty() ? std::string("stdin") : input) + ":" + std::to_string(where.size() + 1));
  }
  const auto answers = qa.answer(inputs, where);
  for (size_t i = 0; i < answers.size(); ++i) {
    const auto& list = answers[i];
    if (json) {
      nlohmann::json j = list.empty() ? nlohmann::json{{"answer", nullptr}} : span_json(list[0]);
      if (!examples[i].id.empty()) j["id"] = examples[i].id;
      if (n_best > 1) {
        j["n_best"] = nlohmann::json::array();
        for (auto& a : list) j["n_best"].push_back(span_json(a));
      }
      std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
      continue;
    }
    for (auto& a : list) {
      char fields[96];
      std::snprintf(fields, sizeof fields, "\t%lld\t%lld\t%.6f", (long long)a.start, (long long)a.end, a.score);
      print_line(escape_plain(a.text) + fields);
    }
    if (list.empty()) std::printf("\t-1\t-1\t0\n");
    if (n_best > 1) std::printf("\n");
  }
  return 0;
}

Register register_answer("answer",
                         "answer questions about contexts with a fine-tuned BERT QA model (answer, offsets, score)",
                         run_answer);

}  // namespace
}  // namespace qkv::cli
