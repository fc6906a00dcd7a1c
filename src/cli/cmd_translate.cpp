// qkv translate --model DIR: source sentences (stdin or --input) -> one translation per line.
#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>

#include "cli.h"
#include "qkv/tasks/attention_view.h"
#include "qkv/tasks/translator.h"
#include "qkv/util/file.h"

namespace qkv::cli {
namespace {

int run_translate(int argc, char** argv) {
  CLI::App app{"Translate sentences with a trained encoder-decoder model", "qkv translate"};
  std::string model_dir, input, output, attention_png;
  tasks::TranslateOptions req;
  std::string on_long = "truncate";
  int64_t attention_line = 1;
  app.add_option("--model,-m", model_dir, "model directory (config.json, model.safetensors, tokenizer)")->required();
  app.add_option("--input,-i", input, "source file, one sentence per line (default: stdin)");
  app.add_option("--output,-o", output, "write translations here (default: stdout)");
  app.add_option("--beam,-b", req.search.beam, "beam size (1 = greedy)")->check(positive());
  app.add_option("--alpha", req.search.alpha, "GNMT length-penalty exponent for beam search");
  app.add_option("--patience", req.search.patience,
                 "beam search ends a sentence after patience x beam hypotheses have ended (1 = fairseq's rule)");
  app.add_option("--max-len-ratio", req.search.max_len_ratio, "maximum output length as a multiple of the source");
  app.add_option("--max-len-extra", req.search.max_len_extra, "tokens added to that maximum");
  app.add_option("--no-repeat-ngram", req.search.no_repeat_ngram_size,
                 "never repeat an n-gram of output tokens (0 = off)")->check(non_negative());
  app.add_flag("--allow-unk", req.search.allow_unk,
               "let the output contain the unknown token (by default search passes over it, as Marian's does)");
  app.add_option("--nbest", req.search.nbest, "print the n best hypotheses, tab-separated with scores (at most --beam)")
      ->check(positive());
  app.add_option("--batch-size", req.batch_size, "sentences per batch")->check(positive());
  app.add_flag("--sample", req.search.sample, "sample instead of searching");
  app.add_option("--temperature", req.search.temperature, "sampling temperature");
  app.add_option("--top-k", req.search.top_k, "sample from the k most likely tokens (0 = all)")->check(non_negative());
  app.add_option("--top-p", req.search.top_p, "nucleus sampling mass");
  app.add_option("--seed", req.search.seed, "sampling seed")->check(qkv::cli::seed_value());
  app.add_option("--on-long", on_long, "a line longer than the model allows: truncate (warn) or refuse")
      ->check(CLI::IsMember({"truncate", "refuse"}));
  app.add_option("--attention", attention_png, "write the attention of one sentence: FILE.png draws the cross-attention heatmaps, FILE.html the "
                 "interactive viewer (qkv viz)");
  app.add_option("--attention-line", attention_line, "which input line to draw (1-based)");
  std::string precision = "fp32";
  add_precision_option(app, precision);
  QKV_PARSE(app, argc, argv);
  req.precision = read_precision(precision, "qkv translate");
  req.refuse_long = on_long == "refuse";
  QKV_CHECK(req.search.nbest <= req.search.beam, "qkv translate", "--nbest ", req.search.nbest,
            " needs a beam at least as wide: give --beam ", req.search.nbest, " or more (now ", req.search.beam, ")");
  QKV_CHECK(req.search.beam == 1 || req.search.nbest <= decode::endings_kept(req.search), "qkv translate", "--nbest ",
            req.search.nbest, " needs round(--patience x --beam) >= ", req.search.nbest, " (now round(",
            req.search.patience, " x ", req.search.beam, ") = ", decode::endings_kept(req.search),
            "): beam search stops once that many hypotheses have ended; give --patience ",
            double(req.search.nbest) / req.search.beam, " or more");

  tasks::Translator translator(model_dir, req.precision);  // bf16: the weights held in bf16 as they are read
  const std::vector<std::string> lines = read_input_lines(input, "sentences to translate");
  QKV_CHECK(attention_png.empty() || (attention_line >= 1 && attention_line <= int64_t(lines.size())),
            "--attention-line", "must be in 1..", lines.size(), ", got ", attention_line);  // before the work
  tasks::Translations r = translator.translate(lines, req);

  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (req.search.nbest > 1) {
      for (size_t k = 0; k < r.hyps[i].size(); ++k)
        out += std::to_string(i) + "\t" + r.hyp_text[i][k] + "\t" + std::to_string(r.hyps[i][k].score) + "\n";
    } else {
      out += r.text[i] + "\n";
    }
  }
  if (output.empty()) {
    std::cout << out;
    std::cout.flush();
  } else {
    write_file_atomic(output, out);
  }
  auto ends_with = [](const std::string& s, const std::string& e) {
    return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
  };
  const kernels::MatmulPrecisionScope drawn_at(req.precision);  // the attention of the translation made
  if (ends_with(attention_png, ".html") || ends_with(attention_png, ".htm")) {
    tasks::ViewInput in;
    in.text = lines[size_t(attention_line - 1)];
    in.target_ids = r.hyps[size_t(attention_line - 1)].front().tokens;
    in.source_ids = r.src_ids[size_t(attention_line - 1)];  // as translated: cut to the model, placeholders
    auto page = tasks::translation_attention_page(translator, in, {}, "qkv attention: " + model_dir);
    int64_t bytes = viz::write_attention_page(attention_png, page);
    std::fprintf(stderr, "qkv translate: wrote the attention viewer (%lld bytes) to %s\n", (long long)bytes,
                 attention_png.c_str());
  } else if (!attention_png.empty()) {
    size_t panels = translator.draw_attention(r, lines, attention_line, attention_png);
    std::fprintf(stderr, "qkv translate: wrote %zu attention panels to %s\n", panels, attention_png.c_str());
  }
  return 0;
}

Register register_translate("translate", "translate sentences with a trained model (greedy, beam, sampling)",
                            run_translate);

}  // namespace
}  // namespace qkv::cli
