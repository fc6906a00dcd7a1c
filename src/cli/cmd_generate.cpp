// qkv generate --model DIR: text completions from a GPT model directory (tasks::Generator).
// One prompt (--prompt, or a one-line input): the completion streams to stdout token by token.
// Several prompts (--input FILE or stdin, one per line): one completion per line, in input order,
// with newlines and backslashes escaped (\n, \\) so that line i answers prompt i.
// --logprobs N (and --prompt-logprobs): a JSON line per prompt instead, {"text", "finish",
// "logprobs"} with OpenAI's legacy logprobs object (tasks::logprobs_json), nothing streamed.
// --beams K: beam search (Hugging Face's num_beams), printed when it ends; --num-return N: N
// completions per prompt (beam search's N best, or N samples), prompt i's j-th on line i * N + j + 1
// (0-based i, j); with --logprobs, beam search's lines carry the hypothesis's "score".
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli.h"
#include "qkv/tasks/generator.h"
#include "qkv/util/file.h"
#include "qkv/util/utf8.h"

namespace qkv::cli {
namespace {

std::string one_line(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '\n') o += "\\n";
    else if (c == '\\') o += "\\\\";
    else o += c;
  }
  return o;
}

int run_generate(int argc, char** argv) {
  CLI::App app{"Generate text with a GPT model (greedy or sampled continuations of prompts)", "qkv generate"};
  std::string model_dir, prompt, input;
  bool have_prompt = false, greedy = false;
  tasks::GenerateOptions opt;
  app.add_option("--model,-m", model_dir, "GPT model directory (config.json, model.safetensors, tokenizer)")->required();
  auto* p = app.add_option("--prompt,-p", prompt, "the prompt (else --input or stdin, one prompt per line)");
  app.add_option("--input,-i", input, "file of prompts, one per line (default: stdin; prompt N = line N)")->excludes(p);
  app.add_option("--max-new-tokens,-n", opt.max_new_tokens, "tokens to generate per prompt (clamped to the context)")
      ->capture_default_str();
  app.add_option("--min-new-tokens", opt.min_new_tokens, "hold the end-of-text token back until this many are out")
      ->check(non_negative());
  auto* s = app.add_flag("--sample", opt.sample, "sample (temperature, top-k, top-p) instead of greedy");
  app.add_flag("--greedy", greedy, "greedy decoding (the default)")->excludes(s);
  app.add_option("--temperature,-t", opt.logits.temperature, "sampling temperature")->capture_default_str();
  app.add_option("--top-k", opt.logits.top_k, "sample among the k most probable tokens (0 = off)")->capture_default_str();
  app.add_option("--top-p", opt.logits.top_p, "nucleus: the smallest set reaching probability p (1 = off)")
      ->capture_default_str();
  app.add_option("--repetition-penalty", opt.logits.repetition_penalty,
                 "CTRL penalty on tokens already in the text (1 = off)")->capture_default_str();
  app.add_option("--presence-penalty", opt.logits.presence_penalty,
                 "OpenAI's: subtracted from the logit of every token generated so far (0 = off)")
      ->capture_default_str();
  app.add_option("--frequency-penalty", opt.logits.frequency_penalty,
                 "OpenAI's: subtracted once per time a token was generated so far (0 = off)")
      ->capture_default_str();
  app.add_option("--no-repeat-ngram", opt.no_repeat_ngram_size,
                 "never repeat an n-gram of the text, prompt included (Hugging Face's no_repeat_ngram_size; 0 = off)")
      ->check(non_negative());
  std::vector<std::string> biases;
  app.add_option("--logit-bias", biases, "ID=BIAS: add BIAS to token ID's logit before the penalties (OpenAI's "
                 "logit_bias; -100 all but bans it, 100 all but forces it; repeatable)");
  app.add_option("--stop", opt.stop, "stop when the completion contains this string (repeatable; cut from the output)");
  app.add_option("--eos-id", opt.eos_id, "end-of-text token (default: config.json's eos_token_id; -1 = none)");
  app.add_option("--seed", opt.seed, "sampling seed (same seed, same output)")
      ->capture_default_str()
      ->check(qkv::cli::seed_value());
  app.add_option("--batch-size,-b", opt.batch_size, "prompts decoded together")->capture_default_str();
  app.add_flag("--truncate", opt.truncate_long, "keep the last tokens of a prompt too long for the context (else error)");
  app.add_flag("--quiet,-q", opt.quiet, "no warnings");
  auto* lp = app.add_option("--logprobs", opt.logprobs,
                            "JSON lines with each generated token's log-probability (the model's, before penalty and "
                            "filters) and the N most likely tokens at each step (0: none)")
                 ->check(non_negative());
  app.add_flag("--prompt-logprobs", opt.prompt_logprobs, "with --logprobs: the prompt's tokens' too")->needs(lp);
  auto* beams = app.add_option("--beams", opt.num_beams, "beam search with this many beams (Hugging Face's "
                               "num_beams; 1 = off)")->check(positive())->excludes(s);
  app.add_option("--length-penalty", opt.length_penalty, "beam search: hypotheses scored sum log p / "
                 "length^this (> 0 favours longer ones)")->capture_default_str()->needs(beams);
  std::string early = "heuristic";
  app.add_option("--early-stopping", early, "beam search stops: heuristic (Hugging Face's False: when no running "
                 "beam can beat the worst of K finished at its length), first (True: at K finished), never")
      ->check(CLI::IsMember({"heuristic", "first", "never"}))->capture_default_str()->needs(beams);
  app.add_option("--num-return", opt.num_return_sequences, "completions per prompt: beam search's best N (N <= "
                 "--beams) or N samples (Hugging Face's num_return_sequences)")->check(positive());
  std::string precision = "fp32";
  add_precision_option(app, precision);
  QKV_PARSE(app, argc, argv);
  opt.precision = read_precision(precision, "qkv generate");
  for (const std::string& b : biases) {
    const size_t eq = b.find('=');
    size_t used_id = 0, used_bias = 0;
    int64_t id = -1;
    double bias = 0;
    try {
      id = std::stoll(b.substr(0, eq), &used_id);
      bias = std::stod(b.substr(eq + 1), &used_bias);
    } catch (const std::exception&) {
      used_id = 0;
    }
    QKV_CHECK(eq != std::string::npos && used_id == eq && used_id > 0 && used_bias == b.size() - eq - 1,
              "--logit-bias", "expected TOKEN_ID=BIAS (an integer and a number), got '", b, "'");
    opt.logits.logit_bias.emplace_back(id, bias);
  }
  using ES = tasks::GenerateOptions::EarlyStopping;
  opt.early_stopping = early == "first" ? ES::first : early == "never" ? ES::never : ES::heuristic;
  have_prompt = app.count("--prompt") > 0;
  // -2 is the library's "config.json's id" (GenerateOptions::kModelEos), not an option value.
  QKV_CHECK(app.count("--eos-id") == 0 || opt.eos_id >= -1, "--eos-id", "expected a token id or -1 (none), got ",
            opt.eos_id);
  QKV_CHECK(std::filesystem::is_directory(model_dir), model_dir, "model directory not found");
  tasks::Generator gen(model_dir, opt.precision);  // bf16: the weights held in bf16 as they are read

  std::vector<std::string> prompts;
  if (have_prompt) {
    QKV_CHECK(utf8::is_valid(prompt), "--prompt", "not valid UTF-8 (as a line of --input would be refused)");
    prompts = {prompt};
  } else {
    prompts = read_input_lines(input, "prompts");
  }

  if (opt.logprobs >= 0) {  // JSON lines
    for (const tasks::Generation& g : gen.generate(prompts, opt)) {
      nlohmann::json line{{"text", g.text}, {"finish", g.finish},
                          {"logprobs", tasks::logprobs_json(*gen.bundle().tokenizer, g, opt.prompt_logprobs)}};
      if (opt.num_beams > 1) line["score"] = g.score;
      std::cout << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    }
    std::cout.flush();
    return 0;
  }
  if (prompts.size() == 1 && opt.num_beams == 1 && opt.num_return_sequences == 1) {  // stream
    opt.on_token = [](const tasks::TokenEvent& e) {
      if (!e.text.empty()) std::fwrite(e.text.data(), 1, e.text.size(), stdout);
      std::fflush(stdout);
    };
    gen.generate(prompts, opt);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    return 0;
  }
  std::vector<tasks::Generation> r = gen.generate(prompts, opt);
  for (auto& g : r) std::cout << one_line(g.text) << "\n";
  std::cout.flush();
  return 0;
}

Register register_generate("generate",
                           "generate text with a GPT model (greedy, sampling, top-k/top-p, beam search, stop strings)",
                           run_generate);

}  // namespace
}  // namespace qkv::cli
