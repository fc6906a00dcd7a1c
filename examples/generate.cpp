// examples/generate.cpp - qkv as a library: load a GPT model directory (Hugging Face GPT-2 layout),
// complete prompts greedily, with beam search (4 beams, Hugging Face's defaults) and by seeded
// sampling (top-p 0.9), and print them. Uses only the installed public headers.
//
//   qkv_example_generate MODEL_DIR ["prompt" ...]
//
// Build it inside the qkv tree (it is a target there) or against an installed qkv:
//   cmake -S examples -B build-ex -DCMAKE_PREFIX_PATH=/usr/local && cmake --build build-ex
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "qkv/tasks/generator.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL_DIR [prompt ...]\n", argv[0]);
    return 2;
  }
  std::vector<std::string> prompts(argv + 2, argv + argc);
  if (prompts.empty()) prompts = {"The file", "Once upon a time"};
  try {
    const qkv::tasks::Generator generator(argv[1]);  // config, weights and tokenizer, loaded once

    qkv::tasks::GenerateOptions greedy;
    greedy.max_new_tokens = 20;
    qkv::tasks::GenerateOptions beam = greedy;
    beam.num_beams = 4;  // the best of 4 beams, scored sum log p / length
    qkv::tasks::GenerateOptions sampled = greedy;
    sampled.sample = true, sampled.logits.top_p = 0.9, sampled.seed = 1;  // same seed, same text

    const auto g = generator.generate(prompts, greedy);
    const auto b = generator.generate(prompts, beam);
    const auto s = generator.generate(prompts, sampled);
    for (size_t i = 0; i < prompts.size(); ++i)
      std::printf("%s\n  greedy: %s\n  beam 4: %s\n  top-p:  %s\n", prompts[i].c_str(), g[i].text.c_str(),
                  b[i].text.c_str(), s[i].text.c_str());
  } catch (const std::exception& e) {  // qkv::Error names the file and field
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
