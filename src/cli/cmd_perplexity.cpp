// qkv perplexity --model DIR --input FILE [--context N] [--stride S]
// The perplexity of a text under a GPT: the whole file is tokenized with the model's tokenizer
// and scored in windows of the context length moved by the stride (train::strided_nll); prints
// the token count, the mean negative log-likelihood (nats per token) and the perplexity.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>

#include "cli.h"
#include "qkv/io/gpt2.h"
#include "qkv/util/utf8.h"
#include "qkv/train/lm_task.h"
#include "qkv/util/error_context.h"
#include "qkv/util/file.h"

namespace qkv::cli {
namespace {

int run_perplexity(int argc, char** argv) {
  CLI::App app{"Perplexity of a text file under a GPT model", "qkv perplexity"};
  std::string model_dir, input;
  int64_t context = 0, stride = 0;
  app.add_option("--model,-m", model_dir, "GPT model directory (config.json, model.safetensors, tokenizer)")->required();
  app.add_option("--input,-i", input, "UTF-8 text file")->required();
  app.add_option("--context", context, "window length in tokens (default: the model's n_positions)")
      ->check(positive());
  app.add_option("--stride", stride, "tokens the window moves each time (default: half the context)")
      ->check(positive());
  QKV_PARSE(app, argc, argv);
  io::GptBundle b = io::load_gpt2(model_dir);
  QKV_CHECK(b.tokenizer != nullptr, model_dir, "has no tokenizer (tokenizer.json, or encoder.json + vocab.bpe)");
  const std::string text = read_file(input);
  QKV_CHECK(utf8::is_valid(text), input, "is not valid UTF-8");
  std::vector<int32_t> ids32 = b.tokenizer->encode(text);
  std::vector<int64_t> ids(ids32.begin(), ids32.end());
  if (context == 0) context = b.config.n_positions;
  if (stride == 0) stride = std::max<int64_t>(1, context / 2);
  QKV_CHECK(context >= 2 && context <= b.config.n_positions, "--context", "must be in [2, ", b.config.n_positions,
            "] (the model's n_positions), got ", context);
  QKV_CHECK(stride <= context, "--stride", "must be at most the context (", context, "), got ", stride);
  const train::NllSum r = with_context(input, [&] { return train::strided_nll(*b.model, ids, context, stride); });
  const double mean = r.total / double(r.tokens);
  // The first token is never predicted; with a stride of the whole context neither is the first of
  // each window (as Hugging Face's strided evaluation leaves it).
  std::printf("tokens      %lld (scored; %lld of %zu are context only)\n", (long long)r.tokens,
              (long long)(int64_t(ids.size()) - r.tokens), ids.size());
  std::printf("context     %lld, stride %lld\n", (long long)context, (long long)stride);
  std::printf("mean NLL    %.6f nats/token\n", mean);
  std::printf("perplexity  %.4f\n", std::exp(mean));
  return 0;
}

Register register_perplexity("perplexity", "perplexity of a text file under a GPT model", run_perplexity);

}  // namespace
}  // namespace qkv::cli
