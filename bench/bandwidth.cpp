// bench/bandwidth.cpp - memory-bound kernels against a STREAM-like triad, in the same run.
//
// Triad a = b + s * c on 64 MB f32 arrays sets the machine's attainable bandwidth (STREAM
// counting: 3 x 64 MB per pass, write-allocate traffic not counted). Then, on 64 MB tensors:
// elementwise add (3 x 64 MB), gelu (erf and tanh forms), silu, sigmoid, tanh, softmax over rows
// of 1024 and layer_norm over rows of 1024 (2 x 64 MB each: read x, write y), all through the
// public ops under NoGradGuard, so output allocation (served by the caching allocator after the
// first pass) is included; and the gelu / silu backward kernels (kernels::unary_backward: read
// x, y, gy, write gx: 4 x 64 MB).
// Each figure is the best of `reps` passes after one warm-up (STREAM reports the best). On a
// shared machine wall time includes waiting for a core, so a second set of columns uses process
// CPU time: bytes / (CPU seconds / threads) estimates the rate with the cores to ourselves
// (OMP_WAIT_POLICY=PASSIVE keeps idle threads from spinning and inflating CPU time).
//
// Run: OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE build/bench/bench_bandwidth [reps]
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "bench_util.h"
#include "qkv/autograd/node.h"
#include "qkv/kernels/elementwise.h"
#include "qkv/ops/elementwise.h"
#include "qkv/ops/norm.h"
#include "qkv/ops/softmax.h"
#include "qkv/tensor/rng.h"
#include "qkv/tensor/tensor.h"
#include "qkv/util/buffer.h"

using namespace qkv;

namespace {

constexpr int64_t kBytes = 64ll << 20;               // 64 MB per array / tensor
constexpr int64_t kN = kBytes / int64_t(sizeof(float));  // 16 Mi floats
constexpr int64_t kRow = 1024;

struct Timing {
  double wall = 1e30, cpu = 1e30;  // best of the passes, each
};

Timing best_seconds(int reps, const std::function<void()>& fn) {
  fn();  // warm-up: page faults, allocator cache
  Timing best;
  for (int r = 0; r < reps; ++r) {
    const double c0 = bench::process_cpu_seconds(), t0 = bench::now_ms();
    fn();
    best.wall = std::min(best.wall, (bench::now_ms() - t0) * 1e-3);
    best.cpu = std::min(best.cpu, bench::process_cpu_seconds() - c0);
  }
  return best;
}

Tensor random_tensor(const Shape& s, uint64_t seed) {
  Tensor t = Tensor::empty(s);
  Generator g(seed);
  g.normal(t.data<float>(), t.numel());
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = argc > 1 ? std::atoi(argv[1]) : 10;
  NoGradGuard no_grad;
  std::printf("bench_bandwidth: %d OpenMP threads, arrays of %lld MB, best of %d\n", omp_get_max_threads(),
              (long long)(kBytes >> 20), reps);

  // STREAM-like triad on raw arrays, first-touched by the threads that use them, on 2 MiB pages
  // (buffer_alloc's kept buffers).
  const size_t array_bytes = size_t(kBytes);
  const BufferDeleter release{array_bytes, BufferLife::kept};
  std::unique_ptr<void, BufferDeleter> a_(buffer_alloc(array_bytes, BufferLife::kept), release),
      b_(buffer_alloc(array_bytes, BufferLife::kept), release),
      c_(buffer_alloc(array_bytes, BufferLife::kept), release);
  float *a = static_cast<float*>(a_.get()), *b = static_cast<float*>(b_.get()), *c = static_cast<float*>(c_.get());
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < kN; ++i) {
    a[i] = 0.f;
    b[i] = 1.f;
    c[i] = 2.f;
  }
  const float s = 3.f;
  Timing t_triad = best_seconds(reps, [&] {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < kN; ++i) a[i] = b[i] + s * c[i];
  });
  double threads = omp_get_max_threads();
  double triad = 3.0 * double(kBytes) / t_triad.wall / 1e9;
  double triad_cpu = 3.0 * double(kBytes) / (t_triad.cpu / threads) / 1e9;
  if (a[kN / 2] != 7.f) std::printf("triad check failed\n");

  Tensor x = random_tensor({kN / kRow, kRow}, 1), y = random_tensor({kN / kRow, kRow}, 2);
  Tensor w = random_tensor({kRow}, 3), bias = random_tensor({kRow}, 4);
  struct Row {
    std::string name;
    double bytes;
    Timing t;
  };
  std::vector<Row> rows;
  rows.push_back({"add (x + y)", 3.0 * kBytes, best_seconds(reps, [&] { add(x, y); })});
  rows.push_back({"gelu (erf)", 2.0 * kBytes, best_seconds(reps, [&] { gelu(x); })});
  rows.push_back({"gelu (tanh)", 2.0 * kBytes, best_seconds(reps, [&] { gelu(x, GeluApprox::tanh); })});
  rows.push_back({"silu", 2.0 * kBytes, best_seconds(reps, [&] { silu(x); })});
  rows.push_back({"sigmoid", 2.0 * kBytes, best_seconds(reps, [&] { sigmoid(x); })});
  rows.push_back({"tanh", 2.0 * kBytes, best_seconds(reps, [&] { tanh(x); })});
  {  // backward kernels: read x, y, gy, write gx
    Tensor gy = y, g_out = Tensor::empty(x.shape());
    Tensor ge = gelu(x), gt = gelu(x, GeluApprox::tanh), sl = silu(x);
    rows.push_back({"gelu (erf) backward", 4.0 * kBytes, best_seconds(reps, [&] {
                      kernels::unary_backward(kernels::Unary::gelu_erf, x, ge, gy, g_out);
                    })});
    rows.push_back({"gelu (tanh) backward", 4.0 * kBytes, best_seconds(reps, [&] {
                      kernels::unary_backward(kernels::Unary::gelu_tanh, x, gt, gy, g_out);
                    })});
    rows.push_back({"silu backward", 4.0 * kBytes, best_seconds(reps, [&] {
                      kernels::unary_backward(kernels::Unary::silu, x, sl, gy, g_out);
                    })});
  }
  rows.push_back({"softmax (rows 1024)", 2.0 * kBytes, best_seconds(reps, [&] { softmax(x); })});
  rows.push_back({"log_softmax (rows 1024)", 2.0 * kBytes, best_seconds(reps, [&] { log_softmax(x); })});
  rows.push_back({"layer_norm (rows 1024)", 2.0 * kBytes, best_seconds(reps, [&] { layer_norm(x, w, bias); })});

  std::printf("%-26s %9s %9s %9s | %9s %9s %9s\n", "kernel", "wall ms", "GB/s", "% triad", "cpu ms", "GB/s", "% triad");
  std::printf("%-26s %9.2f %9.2f %8.1f%% | %9.2f %9.2f %8.1f%%\n", "triad a = b + s*c", t_triad.wall * 1e3, triad,
              100.0, t_triad.cpu * 1e3, triad_cpu, 100.0);
  for (const Row& r : rows) {
    double gbs = r.bytes / r.t.wall / 1e9, gbs_cpu = r.bytes / (r.t.cpu / threads) / 1e9;
    std::printf("%-26s %9.2f %9.2f %8.1f%% | %9.2f %9.2f %8.1f%%\n", r.name.c_str(), r.t.wall * 1e3, gbs,
                100.0 * gbs / triad, r.t.cpu * 1e3, gbs_cpu, 100.0 * gbs_cpu / triad_cpu);
  }
  return 0;
}
