// bench_lstm: forward+backward time of one LSTM layer (input 256, hidden 512, B 64, T 32, training
// mode, x requiring grad) against torch.nn.LSTM with the same sizes, in the same run: rounds
// alternate qkv and torch so both see the same machine load. The GRU is timed the same way for
// information. torch runs as tools/bench/lstm_torch.py.
// Run: OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE build/bench/bench_lstm [rounds] [iters]
// OPENBLAS_CORETYPE=SkylakeX belongs in that line on an AVX-512 CPU only (README, "Threads").
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"
#include "qkv/autograd/node.h"
#include "qkv/kernels/gemm.h"
#include "qkv/nn/rnn.h"
#include "qkv/tensor/rng.h"

using namespace qkv;

namespace {

using bench::cpu_ms;
using bench::median;
using bench::now_ms;

constexpr int64_t kInput = 256, kHidden = 512, kBatch = 64, kLen = 32;

struct Times {
  std::vector<double> wall, cpu;  // ms per iteration
};

// Per-iteration times of qkv forward + backward (output.backward(gy)).
Times time_qkv(nn::RnnBase& rnn, bool lstm, const Tensor& x_data, const Tensor& gy, int iters, int warmup) {
  Times t;
  for (int i = 0; i < warmup + iters; ++i) {
    rnn.zero_grad();
    Tensor x = x_data.detach();
    x.set_requires_grad(true);
    double c0 = cpu_ms(), t0 = now_ms();
    nn::RnnOutput out = lstm ? static_cast<nn::LSTM&>(rnn).forward(x) : static_cast<nn::GRU&>(rnn).forward(x);
    backward(out.output, gy);  // (B, T, H)
    double t1 = now_ms(), c1 = cpu_ms();
    if (i >= warmup) {
      t.wall.push_back(t1 - t0);
      t.cpu.push_back(c1 - c0);
    }
  }
  return t;
}

// Runs the torch script; returns its median {wall, cpu} ms (-1 if it failed).
std::pair<double, double> time_torch(const char* cell, int iters, int threads) {
  std::string out = bench::run_capture(bench::torch_command(
      "tools/bench/lstm_torch.py",
      std::string("--cell ") + cell + " --iters " + std::to_string(iters) + " --threads " + std::to_string(threads)));
  return {bench::find_number(out, "median_ms="), bench::find_number(out, "median_cpu_ms=")};
}

// Alternating rounds of one cell type; prints per-round and summary lines. False if torch failed.
bool compare(const char* cell, int rounds, int iters, int threads) {
  const bool lstm = std::string(cell) == "lstm";
  nn::RnnOptions o;
  o.input_size = kInput, o.hidden_size = kHidden;
  std::unique_ptr<nn::RnnBase> rnn;
  if (lstm) rnn = std::make_unique<nn::LSTM>(o);
  else rnn = std::make_unique<nn::GRU>(o);
  rnn->train();
  Generator g(1);
  Tensor x = Tensor::empty({kBatch, kLen, kInput}), gy = Tensor::empty({kBatch, kLen, kHidden});
  g.normal(x.data<float>(), x.numel());
  g.normal(gy.data<float>(), gy.numel());
  std::vector<double> qw, qc, tw, tc;  // per-round medians: qkv/torch wall/cpu
  for (int r = 0; r < rounds; ++r) {
    Times q = time_qkv(*rnn, lstm, x, gy, iters, 2);
    auto [twall, tcpu] = time_torch(cell, iters, threads);
    qw.push_back(median(q.wall));
    qc.push_back(median(q.cpu));
    if (twall > 0) {
      tw.push_back(twall);
      tc.push_back(tcpu);
    }
    std::printf("%s round %d: qkv wall %.2f ms cpu %.2f ms | torch wall %.2f ms cpu %.2f ms\n", cell, r, qw.back(),
                qc.back(), twall, tcpu);
  }
  if (tw.empty()) {
    std::printf("torch failed to run\n");
    return false;
  }
  std::printf("| %s layer fwd+bwd | qkv cpu %.2f ms | torch cpu %.2f ms | torch/qkv cpu %.2fx | "
              "qkv wall %.2f ms | torch wall %.2f ms | torch/qkv wall %.2fx |\n",
              cell, median(qc), median(tc), median(tc) / median(qc), median(qw), median(tw), median(tw) / median(qw));
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 5;
  const int iters = argc > 2 ? std::atoi(argv[2]) : 10;
  const int threads = bench::env_threads();
  std::printf("1-layer RNN, input %lld hidden %lld, B %lld T %lld, fwd+bwd, %d threads, BLAS core %s\n",
              (long long)kInput, (long long)kHidden, (long long)kBatch, (long long)kLen, threads, kernels::blas_core());
  if (kernels::blas_core_is_degraded())
    std::printf("warning: OpenBLAS runs its SSE3 kernels on this AVX-512 CPU; set OPENBLAS_CORETYPE=SkylakeX\n");
  bool ok = compare("lstm", rounds, iters, threads);
  ok = compare("gru", rounds, iters, threads) && ok;
  return ok ? 0 : 1;
}
