// qkv/data/qa_examples.h - extractive QA examples in SQuAD's shape, one JSON object per line:
//
//   {"id": "...", "question": "...", "context": "...", "answers": [{"text": "...", "answer_start": N}]}
//
// answer_start counts characters (Unicode code points, as Python's str indexes in SQuAD), and
// context[answer_start : answer_start + len(text)] must be the answer text. "id" and "answers"
// are optional for inputs to answer (`qkv answer`), where a line may also be `question<TAB>context`;
// "title" (flattened SQuAD files) is accepted and ignored, any other key is an error.
// Errors name the file and line, the field and what was expected.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace qkv::data {

struct QaAnswer {
  std::string text;
  int64_t answer_start = 0;  // characters into the context
  int64_t byte_begin = 0, byte_end = 0;  // the same span in bytes (filled by the reader)
};

struct QaExample {
  std::string id, question, context;
  std::vector<QaAnswer> answers;
};

// One line (JSON, or question<TAB>context when allow_tsv). `where` is "file:line" for errors.
// require_answers: at least one answer, each checked against the context.
QaExample parse_qa_line(std::string_view line, const std::string& where, bool require_answers, bool allow_tsv);
// Every non-blank line of a file ("-" = stdin). With allow_tsv (questions to answer, one answer a
// line) a blank line is an error naming it: skipped, it would shift every later answer by one.
std::vector<QaExample> read_qa_file(const std::string& path, bool require_answers, bool allow_tsv = false);
// The JSON line of an example (answer_start in characters; no trailing newline).
std::string qa_example_json(const QaExample& e);

}  // namespace qkv::data
