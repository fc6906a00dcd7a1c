// qkv/tasks/cls_data.h - text classification data as every front end reads it, for any
// classifier (GPT now, BERT later):
//
//   labelled files (training, evaluation):  label<TAB>text   or   label<TAB>a<TAB>b   (pairs)
//   inputs to classify (one per line):      text             or   a<TAB>b
//
// Every line of a file has the same number of fields; empty lines are skipped; text must be
// valid UTF-8. Errors name the file (or "stdin") and the 1-based line.
#pragma once
#include <istream>
#include <string>
#include <string_view>
#include <vector>

namespace qkv::tasks {

struct ClsInput {
  std::string a, b;  // b: the second text of a pair
  bool pair = false;
};

struct LabelledSet {
  std::vector<std::string> gold;  // label names, one per example
  std::vector<ClsInput> inputs;
  std::vector<int64_t> lines;     // each example's line in its file (blank lines are skipped), for errors
  bool pairs = false;
};

// One input line: `fields` = 1 (a text) or 2 (a<TAB>b); where = "FILE:LINE" for errors.
ClsInput parse_cls_input(std::string_view line, int fields, const std::string& where);
// Reads input lines (text or a<TAB>b), one input per line, a blank line being the empty text, so
// that answers line up with lines; pairs decides the expected fields (-1: the first line that is
// not blank decides, so a pair file whose first line is blank names that line as a bad pair).
// No line at all is an error naming `name`. Returns the inputs and their 1-based line numbers.
std::vector<ClsInput> read_cls_inputs(std::istream& in, const std::string& name, int pairs,
                                      std::vector<int64_t>* line_numbers = nullptr);
LabelledSet read_labelled_tsv(const std::string& path);
LabelledSet read_labelled(std::istream& in, const std::string& name);

// The label names of a training set in model order: sorted numerically if every name is an
// integer ("-1" < "0" < "10"), else byte-wise.
std::vector<std::string> label_names(const std::vector<std::string>& gold);

}  // namespace qkv::tasks
