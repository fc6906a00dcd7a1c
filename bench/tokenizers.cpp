// Tokenizer throughput on one thread: GPT-2 byte-level BPE and BERT WordPiece encoding in MB/s,
// and BPE training time. Measures and prints; asserts nothing (see BENCHMARKS.md).
//   bench_tokenizers --gpt2 DIR --bert VOCAB_TXT --text FILE [--train FILE --merges N]
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstring>
#include <string>

#include "qkv/text/bpe.h"
#include "qkv/text/bpe_train.h"
#include "qkv/text/wordpiece.h"
#include "qkv/util/file.h"

using namespace qkv::text;

namespace {
double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
// CPU time of this thread: on a shared, loaded machine it is the fair single-thread figure.
double cpu() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

std::vector<std::string_view> lines_of(const std::string& text) {
  std::vector<std::string_view> out;
  size_t s = 0;
  while (s < text.size()) {
    size_t e = text.find('\n', s);
    e = e == std::string::npos ? text.size() : e + 1;
    out.emplace_back(text.data() + s, e - s);
    s = e;
  }
  return out;
}

void time_encode(const char* name, const Tokenizer& tok, const std::string& text) {
  auto lines = lines_of(text);
  for (int pass = 0; pass < 2; ++pass) {  // pass 0: empty word cache; pass 1: warm
    size_t n = 0;
    double t0 = now(), c0 = cpu();
    for (auto l : lines) n += tok.encode(l).size();
    double s = now() - t0, c = cpu() - c0;
    std::printf("%-10s %s: %.2f MB, %zu tokens, wall %.3f s, cpu %.3f s, %.2f MB/s (cpu)\n", name,
                pass ? "warm" : "cold", text.size() / 1e6, n, s, c, text.size() / 1e6 / c);
  }
}
}  // namespace

int main(int argc, char** argv) {
  std::string gpt2, bert, text_path, train_path;
  int merges = 20000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--gpt2")) gpt2 = argv[i + 1];
    else if (!std::strcmp(argv[i], "--bert")) bert = argv[i + 1];
    else if (!std::strcmp(argv[i], "--text")) text_path = argv[i + 1];
    else if (!std::strcmp(argv[i], "--train")) train_path = argv[i + 1];
    else if (!std::strcmp(argv[i], "--merges")) merges = std::atoi(argv[i + 1]);
  }
  if (!text_path.empty()) {
    std::string text = qkv::read_file(text_path);
    if (!gpt2.empty()) {
      auto tok = BpeTokenizer::load_gpt2(gpt2 + "/encoder.json", gpt2 + "/vocab.bpe");
      time_encode("gpt2", *tok, text);
    }
    if (!bert.empty()) time_encode("wordpiece", *WordPieceTokenizer::load_vocab_txt(bert), text);
  }
  if (!train_path.empty()) {
    for (bool byte_level : {false, true}) {
      BpeTrainOptions o;
      o.byte_level = byte_level;
      o.special_tokens = byte_level ? std::vector<std::string>{"<|endoftext|>"} : o.special_tokens;
      o.unk_token = byte_level ? "" : o.unk_token;
      double t0 = now();
      WordCounter wc(byte_level);
      wc.add_file(train_path);
      double t1 = now();
      // Target: the specials + alphabet + `merges` merges.
      BpeTrainOptions probe = o;
      probe.vocab_size = 0;
      size_t base = learn_bpe(wc.counts(), probe).vocab.size();
      o.vocab_size = int(base) + merges;
      double t2 = now();
      BpeTrainResult r = learn_bpe(wc.counts(), o);
      double t3 = now();
      std::printf("train %-8s %.1f MB: %zu distinct words, count %.1f s, %zu merges %.1f s\n",
                  byte_level ? "bytebpe" : "bpe", qkv::read_file(train_path).size() / 1e6,
                  wc.counts().size(), t1 - t0, r.merges.size(), t3 - t2);
    }
  }
  return 0;
}
