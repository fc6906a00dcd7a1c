// qkv/data/documents.h - a text file of documents, for language modelling.
//
// Two layouts, told apart by the file itself:
//   - blank-line separated: if any line is blank (empty or only spaces/tabs), every run of
//     non-blank lines is one document, its lines joined with "\n" (what `qkv data lm-en` writes);
//   - otherwise one document per line.
// The file must be UTF-8 (an error names the file and the line) and hold at least one document.
#pragma once
#include <string>
#include <vector>

namespace qkv::data {

std::vector<std::string> read_documents(const std::string& path);

}  // namespace qkv::data
