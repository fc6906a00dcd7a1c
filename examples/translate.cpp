// examples/translate.cpp - qkv as a library: load a trained translation model, translate three
// sentences (greedy, then beam 4), print them. Uses only the installed public headers.
//
//   qkv_example_translate MODEL_DIR ["sentence" ...]
//
// Build it inside the qkv tree (it is a target there) or against an installed qkv:
//   cmake -S examples -B build-ex -DCMAKE_PREFIX_PATH=/usr/local && cmake --build build-ex
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "qkv/tasks/translator.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL_DIR [sentence ...]\n", argv[0]);
    return 2;
  }
  std::vector<std::string> lines(argv + 2, argv + argc);
  if (lines.empty()) lines = {"Cannot open file", "File not found", "Save the document?"};
  try {
    const qkv::tasks::Translator translator(argv[1]);  // loads config, weights and tokenizers once

    qkv::tasks::Translations greedy = translator.translate(lines);
    qkv::tasks::TranslateOptions beam;
    beam.search.beam = 4;
    qkv::tasks::Translations beamed = translator.translate(lines, beam);

    for (size_t i = 0; i < lines.size(); ++i)
      std::printf("%s\n  greedy: %s\n  beam 4: %s\n", lines[i].c_str(), greedy.text[i].c_str(), beamed.text[i].c_str());
  } catch (const std::exception& e) {  // qkv::Error names the file and field
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
