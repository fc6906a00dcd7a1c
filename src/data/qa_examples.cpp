// SQuAD-shaped JSON lines (qkv/data/qa_examples.h).
#include "qkv/data/qa_examples.h"

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "qkv/text/qa_features.h"
#include "qkv/util/error.h"
#include "qkv/util/utf8.h"

namespace qkv::data {

namespace {

std::string string_field(const nlohmann::json& j, const char* key, const std::string& where, bool required) {
  auto it = j.find(key);
  if (it == j.end()) {
    QKV_CHECK(!required, where, "field '", key, "' is missing");
    return "";
  }
  QKV_CHECK(it->is_string(), where, "field '", key, "': expected a string, got ", it->type_name());
  return it->get<std::string>();
}

}  // namespace

QaExample parse_qa_line(std::string_view line, const std::string& where, bool require_answers, bool allow_tsv) {
  QaExample e;
  if (allow_tsv && (line.empty() || line.front() != '{')) {
    const size_t tab = line.find('\t');
    QKV_CHECK(tab != std::string_view::npos && line.find('\t', tab + 1) == std::string_view::npos, where,
              "expected a JSON object or 'question<TAB>context'");
    QKV_CHECK(utf8::is_valid(line), where, "not valid UTF-8 (answer offsets count code points)");
    e.question = std::string(line.substr(0, tab));
    e.context = std::string(line.substr(tab + 1));
    QKV_CHECK(!require_answers, where, "a 'question<TAB>context' line has no answers; give SQuAD-style JSON lines");
  } else {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& x) {
      fail(where, "not a valid JSON line: ", x.what());
    }
    QKV_CHECK(j.is_object(), where, "expected a JSON object, got ", j.type_name());
    for (auto& [k, v] : j.items())
      QKV_CHECK(k == "id" || k == "question" || k == "context" || k == "answers" || k == "title", where,
                "unknown field '", k, "' (expected id, question, context, answers)");
    if (j.contains("id")) e.id = j["id"].is_string() ? j["id"].get<std::string>() : j["id"].dump();
    e.question = string_field(j, "question", where, true);
    e.context = string_field(j, "context", where, true);
    if (j.contains("answers")) {
      QKV_CHECK(j["answers"].is_array(), where, "field 'answers': expected an array, got ", j["answers"].type_name());
      for (size_t i = 0; i < j["answers"].size(); ++i) {
        const nlohmann::json& a = j["answers"][i];
        const std::string field = "answers[" + std::to_string(i) + "]";
        QKV_CHECK(a.is_object(), where, "field '", field, "': expected {\"text\", \"answer_start\"}");
        QaAnswer ans;
        ans.text = string_field(a, "text", where + ": field '" + field + "'", true);
        QKV_CHECK(a.contains("answer_start") && a["answer_start"].is_number_integer(), where, "field '", field,
                  ".answer_start': expected an integer (characters into the context)");
        ans.answer_start = a["answer_start"].get<int64_t>();
        QKV_CHECK(ans.answer_start >= 0, where, "field '", field, ".answer_start': expected >= 0, got ",
                  ans.answer_start);
        QKV_CHECK(!ans.text.empty(), where, "field '", field, ".text': the answer is empty");
        ans.byte_begin = text::utf8_byte_offset(e.context, ans.answer_start,
                                                where + ": field '" + field + ".answer_start'");
        ans.byte_end = ans.byte_begin + int64_t(ans.text.size());
        const std::string found = e.context.substr(size_t(ans.byte_begin), ans.text.size());
        QKV_CHECK(found == ans.text, where, "field '", field, ".answer_start': the context at character ",
                  ans.answer_start, " reads '", found, "', not the answer text '", ans.text, "'");
        e.answers.push_back(std::move(ans));
      }
    }
    QKV_CHECK(!require_answers || !e.answers.empty(), where, "field 'answers': expected at least one answer");
  }
  QKV_CHECK(!e.question.empty(), where, "the question is empty");
  QKV_CHECK(!e.context.empty(), where, "the context is empty");
  return e;
}

std::vector<QaExample> read_qa_file(const std::string& path, bool require_answers, bool allow_tsv) {
  std::ifstream file;
  std::istream* in = &std::cin;
  if (path != "-") {
    file.open(path, std::ios::binary);
    QKV_CHECK(file.good(), path, "cannot open the file");
    in = &file;
  }
  std::vector<QaExample> out;
  std::string line;
  for (int64_t n = 1; std::getline(*in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string where = (path == "-" ? "stdin" : path) + ":" + std::to_string(n);
    if (line.find_first_not_of(" \t") == std::string::npos) {
      QKV_CHECK(!allow_tsv, where, "a blank line: expected a question (a JSON object or question<TAB>context), "
                "one a line, each answered on its own line");
      continue;
    }
    out.push_back(parse_qa_line(line, where, require_answers, allow_tsv));
  }
  // An empty file (or one of blank lines) is an error here: training on it learned a tokenizer from
  // nothing, and an empty validation file ended the run after its steps with "no examples".
  QKV_CHECK(!out.empty(), path == "-" ? "stdin" : path, "no questions (expected one a line: a JSON object with "
            "question and context", allow_tsv ? ", or question<TAB>context)" : ")");
  return out;
}

std::string qa_example_json(const QaExample& e) {
  nlohmann::json j = {{"id", e.id}, {"question", e.question}, {"context", e.context}};
  j["answers"] = nlohmann::json::array();
  for (auto& a : e.answers) j["answers"].push_back({{"text", a.text}, {"answer_start", a.answer_start}});
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace qkv::data
