// bench_encoder_layer: forward+backward time of one pre-LN Transformer encoder layer (d 512, h 8,
// ff 2048, ReLU, dropout 0.1, training mode; B 8, T 128) against torch.nn.TransformerEncoderLayer
// (norm_first=True) with the same sizes, in the same run: rounds alternate qkv and torch so both
// see the same machine load. torch runs as tools/bench/encoder_layer_torch.py.
// Run: OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE build/bench/bench_encoder_layer [rounds] [iters]
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_util.h"
#include "qkv/autograd/node.h"
#include "qkv/models/transformer_blocks.h"
#include "qkv/tensor/rng.h"

using namespace qkv;

namespace {

using bench::cpu_ms;
using bench::median;
using bench::now_ms;

struct Times {
  std::vector<double> wall, cpu;  // ms per iteration
};

// Per-iteration times of qkv forward + backward.
Times time_qkv(models::EncoderBlock& layer, const Tensor& x_data, const Tensor& gy, int iters, int warmup) {
  Times t;
  for (int i = 0; i < warmup + iters; ++i) {
    layer.zero_grad();
    Tensor x = x_data.detach();
    x.set_requires_grad(true);
    double c0 = cpu_ms(), t0 = now_ms();
    Tensor y = layer.forward(x);  // (B, T, D)
    backward(y, gy);
    double t1 = now_ms(), c1 = cpu_ms();
    if (i >= warmup) {
      t.wall.push_back(t1 - t0);
      t.cpu.push_back(c1 - c0);
    }
  }
  return t;
}

// Runs the torch script; returns its median {wall, cpu} ms (-1 if it failed).
std::pair<double, double> time_torch(int iters, int threads) {
  std::string out = bench::run_capture(bench::torch_command(
      "tools/bench/encoder_layer_torch.py", "--iters " + std::to_string(iters) + " --threads " + std::to_string(threads)));
  return {bench::find_number(out, "median_ms="), bench::find_number(out, "median_cpu_ms=")};
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 3;
  const int iters = argc > 2 ? std::atoi(argv[2]) : 10;
  const int64_t B = 8, T = 128, D = 512, H = 8, FF = 2048;
  const int threads = bench::env_threads();

  models::BlockOptions o;
  o.d_model = D;
  o.heads = H;
  o.d_ff = FF;
  o.dropout = 0.1;
  o.attention_dropout = 0.1;   // torch's layer uses `dropout` on the attention weights too
  o.activation_dropout = 0.1;  // and inside the FFN
  o.pre_norm = true;
  models::EncoderBlock layer(o);
  layer.train();
  Generator g(1);
  Tensor x = Tensor::empty({B, T, D}), gy = Tensor::empty({B, T, D});
  g.normal(x.data<float>(), x.numel());
  g.normal(gy.data<float>(), gy.numel());

  std::printf("pre-LN encoder layer, d %lld h %lld ff %lld, B %lld T %lld, dropout 0.1, fwd+bwd, %d threads\n",
              (long long)D, (long long)H, (long long)FF, (long long)B, (long long)T, threads);
  std::vector<double> qw, qc, tw, tc;  // per-round medians: qkv/torch wall/cpu
  for (int r = 0; r < rounds; ++r) {
    Times q = time_qkv(layer, x, gy, iters, 2);
    auto [twall, tcpu] = time_torch(iters, threads);
    qw.push_back(median(q.wall));
    qc.push_back(median(q.cpu));
    if (twall > 0) {
      tw.push_back(twall);
      tc.push_back(tcpu);
    }
    std::printf("round %d: qkv wall %.2f ms cpu %.2f ms | torch wall %.2f ms cpu %.2f ms\n", r, qw.back(), qc.back(),
                twall, tcpu);
  }
  if (tw.empty()) {
    std::printf("torch failed to run\n");
    return 1;
  }
  std::printf("| pre-LN encoder layer fwd+bwd | qkv cpu %.2f ms | torch cpu %.2f ms | torch/qkv cpu %.2fx | "
              "qkv wall %.2f ms | torch wall %.2f ms | torch/qkv wall %.2fx |\n",
              median(qc), median(tc), median(tc) / median(qc), median(qw), median(tw), median(tw) / median(qw));
  return 0;
}
