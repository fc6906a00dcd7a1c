// bench_bert: a BERT-base-shaped encoder (vocab 30522, 12 layers, d 768, 12 heads, d_ff 3072,
// GELU erf, post-LN, random weights: Hugging Face's N(0, 0.02)) against the same model in PyTorch
// (tools/bench/bert_torch.py), in the same run: rounds alternate qkv and torch so that both see the
// same machine load. Two measurements, one per process (peak RSS is the process's):
//
//   train  forward + backward of models::Bert's last hidden states (embeddings + encoder; B 8,
//          T 128, random ids, two segments, dropout 0.1 as BERT's config, training mode) against
//          a random gradient: ms per iteration (wall and process CPU time), peak RSS.
//   embed  tasks::Embedder (`qkv embed`'s library path: tokenizing, batching by length, the
//          forward pass in eval mode without a tape, mean pooling) over N sentences of mixed
//          lengths (8-126 words of a synthetic WordPiece vocabulary: 10-128 tokens with [CLS]
//          and [SEP]), batch 32: sentences/s. torch embeds the same token ids in the same batches
//          (sorted by length, right-padded, padding mask), eval mode under torch.no_grad(). Both
//          torch implementations are timed: "hf" (BertModel's layers) and "nn"
//          (nn.TransformerEncoderLayer, whose inference takes torch's fused nested-tensor path).
//
// Run (OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE):
//   build/bench/bench_bert train [rounds=3] [iters=3] [dropout=0.1]
//   /usr/bin/python3 tools/bench/paired.py bert   (single iterations alternating with torch's)
//   build/bench/bench_bert embed [rounds=3] [passes=2] [sentences=256] [fp32|bf16|int8]
//   /usr/bin/python3 tools/bench/paired.py embed --impl hf|nn   (single passes alternating with torch's)
// OPENBLAS_CORETYPE=SkylakeX belongs in that line on an AVX-512 CPU only (README, "Threads").
// embed bf16: qkv's matrix products in bf16 (EmbedOptions::precision, `qkv embed --precision bf16`),
// torch's in fp32 as ever: a different computation, printed as such; the model holds its weights in
// bf16 (nn::Module::hold_weights_in_bf16), as the command does. embed int8: qkv's int8
// (`--precision int8`) against torch's fp32 and, like for like, torch's dynamic int8
// (tools/bench/bert_torch.py --int8: quantize_dynamic on every nn.Linear, oneDNN engine); the model
// holds its weights in int8 (nn::Module::hold_weights_in_int8), as the command does.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"
#include "qkv/autograd/node.h"
#include "qkv/io/bert.h"
#include "qkv/kernels/bf16.h"
#include "qkv/tasks/embedder.h"
#include "qkv/tensor/rng.h"
#include "qkv/text/wordpiece.h"
#include "qkv/train/cls_stream.h"
#include "qkv/util/file.h"

using namespace qkv;
namespace fs = std::filesystem;

namespace {

using bench::median;

struct Torch {
  double wall = -1, cpu = -1, rss = -1, sps = -1;
};

Torch run_torch(const std::string& args) {
  const std::string out = bench::run_capture(bench::torch_command("tools/bench/bert_torch.py", args));
  return {bench::find_number(out, "median_ms="), bench::find_number(out, "median_cpu_ms="),
          bench::find_number(out, "peak_rss_mib="), bench::find_number(out, "sentences_per_s=")};
}

models::BertConfig base_config(double dropout) {
  models::BertConfig cfg;  // the defaults are bert-base's: 30522, 768, 12 layers, 12 heads, 3072, gelu
  cfg.hidden_dropout_prob = cfg.attention_probs_dropout_prob = dropout;
  return cfg;
}

// The training measurement's model and data: B 8, T 128, random ids, two segments, a random
// gradient for the last hidden states; one() runs an iteration and returns its wall ms.
struct TrainCase {
  static constexpr int64_t B = 8, T = 128;
  models::BertConfig cfg;
  Generator g{1};
  models::Bert model;
  Tensor x, tt, gy;  // ids, segment ids (B, T); gradient (B, T, D)
  explicit TrainCase(double dropout)
      : cfg(base_config(dropout)), model(cfg, g, nn::init::Scheme::normal_002, /*add_pooling_layer=*/false) {
    model.train();
    std::vector<int64_t> ids(size_t(B * T)), types(size_t(B * T));
    for (int64_t i = 0; i < B * T; ++i) {
      ids[size_t(i)] = 1 + int64_t(g.randint(uint64_t(cfg.vocab_size - 1)));
      types[size_t(i)] = (i % T) >= T / 2;  // two segments
    }
    x = Tensor::from_vector(ids, {B, T}), tt = Tensor::from_vector(types, {B, T});
    gy = Tensor::empty({B, T, cfg.hidden_size});
    g.normal(gy.data<float>(), gy.numel());
  }
  double one(double* cpu_ms = nullptr) {
    model.zero_grad();
    const double c0 = bench::cpu_ms(), t0 = bench::now_ms();
    Tensor y = model.hidden(x, tt);  // (B, T, D)
    backward(y, gy);
    const double t1 = bench::now_ms();
    if (cpu_ms) *cpu_ms = bench::cpu_ms() - c0;
    return t1 - t0;
  }
};

// A paired mode's protocol (tools/bench/paired.py): "ready", then one() per line on stdin,
// answered with its wall ms; at the end of input, {"peak_rss_MiB": ...}.
template <typename Case>
int answer_steps(Case& c) {
  std::printf("ready\n");
  std::fflush(stdout);
  char line[64];
  while (std::fgets(line, sizeof line, stdin)) {
    std::printf("%.3f\n", c.one());
    std::fflush(stdout);
  }
  std::printf("{\"peak_rss_MiB\": %.1f}\n", bench::peak_rss_mib());
  return 0;
}

// train-paired: one warm-up iteration, then answer_steps. tools/bench/paired.py bert drives it.
int bench_train_paired(double dropout) {
  TrainCase c(dropout);
  c.one();
  return answer_steps(c);
}

int bench_train(int rounds, int iters, double dropout) {
  const int64_t B = TrainCase::B, T = TrainCase::T;
  const int threads = bench::env_threads();
  TrainCase c(dropout);

  std::printf("BERT-base encoder (embeddings + 12 post-LN layers, d 768, h 12, ff 3072, GELU erf), B %lld T %lld, "
              "dropout %.2f, fwd+bwd, %d threads\n",
              (long long)B, (long long)T, dropout, threads);
  const std::string targs = "train --dropout " + std::to_string(dropout) + " --iters " + std::to_string(iters) +
                            " --threads " + std::to_string(threads);
  std::vector<double> qw, qc, tw, tc, ratio;
  double trss = -1;
  for (int r = 0; r < rounds; ++r) {
    std::vector<double> wall, cpu;
    for (int i = 0; i < 1 + iters; ++i) {  // one warm-up iteration
      double c_ms = 0;
      const double w_ms = c.one(&c_ms);
      if (i > 0) wall.push_back(w_ms), cpu.push_back(c_ms);
    }
    const Torch t = run_torch(targs);
    qw.push_back(median(wall));
    qc.push_back(median(cpu));
    if (t.wall > 0) tw.push_back(t.wall), tc.push_back(t.cpu), ratio.push_back(t.cpu / qc.back()), trss = t.rss;
    std::printf("round %d: qkv wall %.1f ms cpu %.1f ms | torch wall %.1f ms cpu %.1f ms | torch/qkv cpu %.2fx\n", r,
                qw.back(), qc.back(), t.wall, t.cpu, t.cpu / qc.back());
    std::fflush(stdout);
  }
  if (tw.empty()) {
    std::printf("torch failed to run\n");
    return 1;
  }
  std::printf("| BERT-base fwd+bwd, B 8 T 128 | qkv cpu %.1f ms | torch cpu %.1f ms | torch/qkv cpu %.2fx (median per-round "
              "%.2fx) | qkv wall %.1f ms | torch wall %.1f ms | torch/qkv wall %.2fx | peak RSS qkv %.0f MiB, torch %.0f MiB |\n",
              median(qc), median(tc), median(tc) / median(qc), median(ratio), median(qw), median(tw),
              median(tw) / median(qw), bench::peak_rss_mib(), trss);
  return 0;
}

// The embedding measurement's model and data: a WordPiece vocabulary of bert-base's size (the
// special tokens, then whole words w5 ...), n sentences of 8-126 words (10-128 tokens with [CLS]
// and [SEP]), their token ids written one sentence a line to ids_path for the torch side.
struct EmbedCase {
  models::BertConfig cfg = base_config(0.1);
  Generator g{2};
  io::BertBundle bundle;
  std::unique_ptr<tasks::Embedder> embedder;
  std::vector<tasks::ClsInput> inputs;
  tasks::EmbedOptions opt;
  int64_t tokens = 0;
  EmbedCase(int n, kernels::MatmulPrecision precision, const std::string& dir, const std::string& ids_path) {
    std::string vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
    for (int64_t i = 5; i < cfg.vocab_size; ++i) vocab += "w" + std::to_string(i) + "\n";
    write_file_atomic(dir + "/vocab.txt", vocab);
    bundle = io::make_bert(cfg, io::BertHeads{false, false, false}, g);
    bundle.tokenizer = text::WordPieceTokenizer::load_vocab_txt(dir + "/vocab.txt");
    embedder = std::make_unique<tasks::Embedder>(bundle);
    if (precision == kernels::MatmulPrecision::bf16) embedder->hold_weights_in_bf16();  // as `qkv embed` does
    if (precision == kernels::MatmulPrecision::int8) embedder->hold_weights_in_int8();
    inputs.resize(static_cast<size_t>(n));
    std::string ids_text;
    for (auto& in : inputs) {
      const int64_t words = 8 + int64_t(g.randint(119));  // 8 .. 126
      for (int64_t w = 0; w < words; ++w)
        in.a += (w ? " w" : "w") + std::to_string(5 + g.randint(uint64_t(cfg.vocab_size - 5)));
      const train::ClsExample ex =
          train::encode_bert_cls_input(*bundle.tokenizer, in.a, nullptr, cfg.max_position_embeddings);
      for (size_t i = 0; i < ex.ids.size(); ++i) ids_text += (i ? " " : "") + std::to_string(ex.ids[i]);
      ids_text += "\n";
      tokens += int64_t(ex.ids.size());
    }
    write_file_atomic(ids_path, ids_text);
    opt.pooling = tasks::Pooling::mean;
    opt.batch_size = 32;
    opt.precision = precision;
    embedder->embed(inputs, opt);  // warm-up: first-touch of the buffers
  }
  double one(double* cpu_ms = nullptr) const {  // one pass over the sentences: wall ms
    const double c0 = bench::cpu_ms(), t0 = bench::now_ms();
    const auto v = embedder->embed(inputs, opt);
    const double t1 = bench::now_ms();
    if (cpu_ms) *cpu_ms = bench::cpu_ms() - c0;
    return t1 - t0;
  }
};

std::string make_temp_dir() {
  const fs::path dir = fs::temp_directory_path() / ("qkv_bench_bert_" + std::to_string(getpid()));
  fs::create_directories(dir);
  return dir.string();
}

// embed-paired: the EmbedCase (its ids written to ids_path), then answer_steps with one pass a
// step. tools/bench/paired.py embed drives it.
int bench_embed_paired(int n, const std::string& ids_path, kernels::MatmulPrecision precision) {
  const std::string tmp = make_temp_dir();
  const EmbedCase c(n, precision, tmp, ids_path);
  fs::remove_all(tmp);
  return answer_steps(c);
}

int bench_embed(int rounds, int passes, int n, kernels::MatmulPrecision precision) {
  const int threads = bench::env_threads();
  const std::string tmp = make_temp_dir();
  const EmbedCase c(n, precision, tmp, tmp + "/ids.txt");
  std::printf("BERT-base embeddings, %d sentences of 10-128 tokens (%lld tokens), batch 32, mean pooling, eval, %d threads, "
              "qkv %s\n", n, (long long)c.tokens, threads, kernels::precision_name(precision));
  const std::string targs = "embed --ids " + tmp + "/ids.txt --batch 32 --iters " + std::to_string(passes) +
                            " --threads " + std::to_string(threads);
  // With qkv in int8, torch's own int8 (quantize_dynamic on every nn.Linear) runs too: the
  // like-for-like comparison next to the fp32 ones.
  const bool int8 = precision == kernels::MatmulPrecision::int8;
  std::vector<double> qs, qc, hs, hc, ns, nc, is, ic;
  double rss_hf = -1, rss_nn = -1, rss_i8 = -1;
  for (int r = 0; r < rounds; ++r) {
    std::vector<double> wall, cpu;
    for (int p = 0; p < passes; ++p) {
      double cpu_ms = 0;
      wall.push_back(c.one(&cpu_ms)), cpu.push_back(cpu_ms);
    }
    qs.push_back(n / (median(wall) / 1e3));
    qc.push_back(n / (median(cpu) / 1e3));  // sentences per CPU-second (all threads)
    const Torch hf = run_torch(targs + " --impl hf"), nn = run_torch(targs + " --impl nn");
    if (hf.sps > 0) hs.push_back(hf.sps), hc.push_back(n / (hf.cpu / 1e3)), rss_hf = hf.rss;
    if (nn.sps > 0) ns.push_back(nn.sps), nc.push_back(n / (nn.cpu / 1e3)), rss_nn = nn.rss;
    std::printf("round %d: sentences/s (per CPU-s): qkv %.1f (%.1f) | torch hf %.1f (%.1f) | torch nn %.1f (%.1f)", r,
                qs.back(), qc.back(), hf.sps, n / (hf.cpu / 1e3), nn.sps, n / (nn.cpu / 1e3));
    if (int8) {
      const Torch i8 = run_torch(targs + " --impl hf --int8");
      if (i8.sps > 0) is.push_back(i8.sps), ic.push_back(n / (i8.cpu / 1e3)), rss_i8 = i8.rss;
      std::printf(" | torch hf int8 %.1f (%.1f)", i8.sps, n / (i8.cpu / 1e3));
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  fs::remove_all(tmp);
  if (hs.empty() || ns.empty()) {
    std::printf("torch failed to run\n");
    return 1;
  }
  std::printf("| BERT-base embed, %d sentences | qkv %s %.1f sent/s (%.1f per CPU-s) | torch hf %.1f (%.1f) | torch nn %.1f "
              "(%.1f) | qkv/hf wall %.2fx cpu %.2fx | qkv/nn wall %.2fx cpu %.2fx | peak RSS qkv %.0f MiB, torch hf %.0f, nn %.0f |\n",
              n, kernels::precision_name(precision), median(qs), median(qc), median(hs), median(hc), median(ns), median(nc), median(qs) / median(hs),
              median(qc) / median(hc), median(qs) / median(ns), median(qc) / median(nc), bench::peak_rss_mib(), rss_hf,
              rss_nn);
  if (int8 && !is.empty())
    std::printf("| int8 against int8 | qkv %.1f sent/s (%.1f per CPU-s) | torch hf int8 %.1f (%.1f) | qkv/torch wall %.2fx "
                "cpu %.2fx | peak RSS torch int8 %.0f MiB |\n",
                median(qs), median(qc), median(is), median(ic), median(qs) / median(is), median(qc) / median(ic), rss_i8);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 3;
  if (mode == "train-paired") return bench_train_paired(argc > 2 ? std::atof(argv[2]) : 0.1);
  if (mode == "train") return bench_train(rounds, argc > 3 ? std::atoi(argv[3]) : 3, argc > 4 ? std::atof(argv[4]) : 0.1);
  if (mode == "embed")
    return bench_embed(rounds, argc > 3 ? std::atoi(argv[3]) : 2, argc > 4 ? std::atoi(argv[4]) : 256,
                       kernels::parse_precision(argc > 5 ? argv[5] : "fp32"));
  if (mode == "embed-paired" && argc > 3)
    return bench_embed_paired(std::atoi(argv[2]), argv[3], kernels::parse_precision(argc > 4 ? argv[4] : "fp32"));
  std::fprintf(stderr,
               "usage: bench_bert train [rounds] [iters] [dropout] | train-paired [dropout] | embed [rounds] [passes] "
               "[sentences] [fp32|bf16|int8] | embed-paired SENTENCES IDS_OUT [fp32|bf16|int8]\n");
  return 2;
}
