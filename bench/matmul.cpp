// bench_matmul: GFLOP/s of qkv::matmul / qkv::linear forward against raw cblas_sgemm on the same
// buffers, the cost of a 2-layer MLP training step against its six GEMMs alone, and a check that
// OpenBLAS (OpenMP build) runs single-threaded inside an OpenMP parallel region.
// `bench_matmul bf16` (not in the default run): the bf16 GEMM (kernels/bf16.h) on the model shapes
// against OpenBLAS sgemm and against oneDNN's own bf16 matmul, timed in the same run.
// `bench_matmul bf16fma`: native bf16 against fp32 FMA on rounded operands, decoding to batch rows.
// `bench_matmul bf16step`: training products against a step's bf16 weight copy, against per call.
// `bench_matmul bf16packed`: decoding's skinny products against a weight converted once to bf16,
// oneDNN's blocked layout against plain row-major bf16, qkv's bf16 rows and qkv's bf16 panels (the
// fp32_fma form, widened in registers), beside fp32 panels.
// `bench_matmul int8`: the same products with the weight quantized once to int8 (kernels/int8.h).
// `bench_matmul int8plain`: at batch sizes (16-512 rows), oneDNN over plain s8 rows (weights held
// in int8) against its blocked form.
// `bench_matmul gpt2stream`: a GPT-2 124M decoding step's products, weights streamed, per form.
// `bench_matmul f32backends`: the two fp32 backends of kernels::gemm (kernels/gemm.h), oneDNN's f32
// matmul against OpenBLAS's sgemm, at M = 1024 over N, K in 256..3072, for each transpose case the
// models use (NT: a Linear's forward x @ W^T; NN: its input gradient; TN: its weight gradient).
// Run: OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE build/bench/bench_matmul
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"
#include "matmul/matmul_bench.h"
#include "qkv/autograd/node.h"
#include "qkv/kernels/bf16.h"
#include "qkv/kernels/gemm.h"
#include "qkv/kernels/int8.h"
#include "qkv/ops/elementwise.h"
#include "qkv/ops/matmul.h"
#include "qkv/ops/reduce.h"

using namespace qkv;
using namespace qkv::bench;  // Timed, timed, timed_pair, timed_all
using namespace qkv::bench::matmul_sections;  // rand_t, sgemm, the low-precision sections

namespace {

int process_threads() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  return -1;
}

void row(const char* name, double flops, Timed q, Timed r) {
  std::printf("| %-34s | %9.1f | %10.1f | %8.1f%% | %9.1f | %10.1f | %8.1f%% |\n", name, flops / q.wall * 1e-9,
              flops / r.wall * 1e-9, 100.0 * r.wall / q.wall, flops / q.cpu * 1e-9, flops / r.cpu * 1e-9,
              100.0 * r.cpu / q.cpu);
}

// `bench_matmul f32backends`: time ratio OpenBLAS / oneDNN (above 1: oneDNN is faster) per (K, N),
// alternating the two.
void bench_f32_backends() {
  // Without AVX-512 oneDNN is not the default f32 backend (kernels/gemm.h); measured anyway, as that choice's evidence.
  if (!kernels::gemm_f32_onednn_available())
    std::printf("f32backends: oneDNN runs '%s' here, without AVX-512 (OpenBLAS is the default)\n",
                kernels::dnnl_cpu_info().isa.c_str());
  const int64_t M = 1024;
  const int64_t sizes[] = {256, 512, 768, 1024, 1536, 2048, 2304, 3072};
  std::printf("\nfp32 backends on %s: OpenBLAS time / oneDNN time (above 1: oneDNN faster), M = %lld, median of 7\n",
              kernels::dnnl_cpu_info().cpu_model.c_str(), (long long)M);
  for (const char* tr : {"NT", "NN", "TN"}) {
    const bool ta = tr[0] == 'T', tb = tr[1] == 'T';
    std::printf("\n%s   K \\ N", tr);
    for (int64_t n : sizes) std::printf(" %6lld", (long long)n);
    std::printf("\n");
    for (int64_t K : {256, 512, 768, 1024, 2048, 3072}) {
      std::printf("%10lld", (long long)K);
      for (int64_t N : sizes) {
        const int64_t lda = ta ? M : K, ldb = tb ? K : N;
        Tensor a = rand_t({M * K}, 1), b = rand_t({K * N}, 2), c = Tensor::empty({M * N});
        const float *ap = a.data<float>(), *bp = b.data<float>();
        float* cp = c.data<float>();
        auto [tq, tr2] = timed_pair(
            [&] { kernels::gemm_f32_onednn(ta, tb, M, N, K, 1.f, ap, lda, bp, ldb, 0.f, cp, N); },
            [&] {
              cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(M), int(N),
                          int(K), 1.f, ap, int(lda), bp, int(ldb), 0.f, cp, int(N));
            },
            7, 1);
        std::printf(" %6.2f", tr2.wall / tq.wall);
        std::fflush(stdout);
      }
      std::printf("\n");
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Optional section names on the command line run just those: gemm batched linear mlp omp packed.
  auto want = [&](const char* name) {
    if (argc < 2) return true;
    for (int i = 1; i < argc; ++i)
      if (std::string(argv[i]) == name) return true;
    return false;
  };
  NoGradGuard no_grad;
  const int reps = 30;  // per side, alternating
  std::printf("OpenMP threads: %d, OpenBLAS threads: %d, OpenBLAS core: %s (%s)\n\n", omp_get_max_threads(),
              openblas_get_num_threads(), kernels::blas_core(), openblas_get_config());
  if (kernels::blas_core_is_degraded())
    std::printf(
        "WARNING: AVX-512 CPU but OpenBLAS runs its Prescott (SSE3) kernels: set OPENBLAS_CORETYPE=SkylakeX\n\n");
  std::printf("GF/s per wall second and per CPU second (process CPU time, all threads); qkv/cblas = time ratio\n");
  std::printf("| %-34s | qkv wall  | cblas wall | qkv/cblas | qkv cpu   | cblas cpu  | qkv/cblas |\n"
              "|%s|-----------|------------|-----------|-----------|------------|-----------|\n", "case",
              std::string(36, '-').c_str());

  // Plain 2-D products: (M, K) @ (K, N).
  for (auto [M, K, N] : {std::array<int, 3>{4096, 512, 2048}, {4096, 2048, 512}}) {
    if (!want("gemm")) break;
    Tensor a = rand_t({M, K}, 1), b = rand_t({K, N}, 2), c = Tensor::empty({M, N});
    auto [tq, tr] = timed_pair(
        [&] { Tensor y = matmul(a, b); },
        [&] { sgemm(false, false, M, N, K, a.data<float>(), K, b.data<float>(), N, 0.f, c.data<float>()); }, reps);
    char name[64];
    std::snprintf(name, sizeof name, "matmul %dx%d @ %dx%d", M, K, K, N);
    row(name, 2.0 * M * N * K, tq, tr);
  }

  // Batched small products: 64 x (128, 64) @ (64, 128).
  if (want("batched")) {
    const int B = 64, M = 128, K = 64, N = 128;
    Tensor a = rand_t({B, M, K}, 3), b = rand_t({B, K, N}, 4), c = Tensor::empty({B, M, N});
    double flops = 2.0 * B * M * N * K;
    Timed tq = timed([&] { Tensor y = matmul(a, b); }, 50);
    const float *ap = a.data<float>(), *bp = b.data<float>();
    float* cp = c.data<float>();
    Timed tr = timed(
        [&] {
          for (int i = 0; i < B; ++i)
            sgemm(false, false, M, N, K, ap + i * M * K, K, bp + i * K * N, N, 0.f, cp + i * M * N);
        },
        50);
    Timed tp = timed(
        [&] {
#pragma omp parallel for schedule(static)
          for (int i = 0; i < B; ++i)
            sgemm(false, false, M, N, K, ap + i * M * K, K, bp + i * K * N, N, 0.f, cp + i * M * N);
        },
        50);
    row("batched 64 x (128x64 @ 64x128)", flops, tq, tr);
    row("  same, cblas in omp parallel for", flops, tq, tp);
  }

  // linear with bias: x (4096, 512), w (2048, 512), b (2048); raw = one sgemm x @ w^T (no bias).
  if (want("linear")) {
    const int R = 4096, K = 512, N = 2048;
    Tensor x = rand_t({R, K}, 5), w = rand_t({N, K}, 6), bias = rand_t({N}, 7), c = Tensor::empty({R, N});
    auto [tq, tr] = timed_pair(
        [&] { Tensor y = linear(x, w, bias); },
        [&] { sgemm(false, true, R, N, K, x.data<float>(), K, w.data<float>(), K, 0.f, c.data<float>()); }, reps);
    row("linear+bias 4096x512 -> 2048", 2.0 * R * N * K, tq, tr);
  }

  // 2-layer MLP training step: x (256, 4096) -> linear+relu -> linear -> mse; backward for x,
  // both weights and both biases. Six GEMMs: 2 forward, dh/dW2 and dx/dW1 backward.
  if (want("mlp")) {
    const int Bt = 256, D = 4096;
    Tensor x = rand_t({Bt, D}, 8), w1 = rand_t({D, D}, 9), b1 = rand_t({D}, 10), w2 = rand_t({D, D}, 11),
           b2 = rand_t({D}, 12), target = rand_t({Bt, D}, 13);
    for (Tensor* p : {&x, &w1, &b1, &w2, &b2}) p->set_requires_grad(true);
    auto step = [&] {
      set_grad_enabled(true);
      for (Tensor* p : {&x, &w1, &b1, &w2, &b2}) p->zero_grad();
      Tensor h = relu(linear(x, w1, b1));   // (256, 4096)
      Tensor y = linear(h, w2, b2);         // (256, 4096)
      Tensor loss = mean(square(sub(y, target)));
      backward(loss);
      set_grad_enabled(false);
    };
    std::vector<Tensor> bufs;
    for (int i = 0; i < 6; ++i) bufs.push_back(rand_t({D, D}, 20 + uint64_t(i)));
    auto gemms = [&] {
      const float* X = x.data<float>();
      const float* W = bufs[0].data<float>();
      float *H = bufs[1].data<float>(), *Y = bufs[2].data<float>(), *G = bufs[3].data<float>();
      float *GW = bufs[4].data<float>(), *GX = bufs[5].data<float>();
      sgemm(false, true, Bt, D, D, X, D, W, D, 0.f, H);  // h = x W1^T
      sgemm(false, true, Bt, D, D, H, D, W, D, 0.f, Y);  // y = h W2^T
      sgemm(true, false, D, D, Bt, Y, D, H, D, 0.f, GW);  // dW2 = dy^T h
      sgemm(false, false, Bt, D, D, Y, D, W, D, 0.f, G);  // dh = dy W2
      sgemm(true, false, D, D, Bt, G, D, X, D, 0.f, GW);  // dW1 = dz^T x
      sgemm(false, false, Bt, D, D, G, D, W, D, 0.f, GX);  // dx = dz W1
    };
    Timed ts = timed(step, 5, 1), tg = timed(gemms, 5, 1);
    double flops = 6 * 2.0 * Bt * D * D;
    std::printf("\nMLP step 256 x (4096 -> 4096 -> 4096), fwd+bwd: wall %.1f ms, cpu %.1f ms; its 6 GEMMs alone: "
                "wall %.1f ms, cpu %.1f ms (%.0f GF/s per CPU s); step/GEMMs: wall %.3f, cpu %.3f\n",
                ts.wall * 1e3, ts.cpu * 1e3, tg.wall * 1e3, tg.cpu * 1e3, flops / tg.cpu * 1e-9, ts.wall / tg.wall,
                ts.cpu / tg.cpu);
  }

  // OpenBLAS inside an OpenMP parallel region: each thread's call must run on that thread only.
  // Skinny decoding products (kernels::packed_linear, weights packed once) against cblas x @ W^T on the same
  // buffers: 32 rows (a greedy batch) through the bench_seq2seq_decode model's layers. Not in the default run.
  if (argc > 1 && want("packed")) {
    const int M = 32;
    for (auto [K, N] : {std::array<int, 2>{256, 256}, {256, 768}, {256, 1024}, {1024, 256}, {256, 8000}}) {
      Tensor x = rand_t({M, K}, 30), w = rand_t({N, K}, 31), bias = rand_t({N}, 32), c = Tensor::empty({M, N});
      const kernels::PackedLinear pw = kernels::pack_linear(w, bias);
      auto [tq, tr] = timed_pair(
          [&] { kernels::packed_linear(x, pw, c); },
          [&] { sgemm(false, true, M, N, K, x.data<float>(), K, w.data<float>(), K, 0.f, c.data<float>()); }, 200);
      char name[64];
      std::snprintf(name, sizeof name, "packed %dx%d @ (%dx%d)^T", M, K, N, K);
      row(name, 2.0 * M * N * K, tq, tr);
    }
  }

  using Section = std::pair<const char*, void (*)()>;  // run only when named
  for (const auto& [name, run] :
       {Section{"bf16", bench_bf16}, Section{"bf16packed", bench_bf16_packed}, Section{"bf16fma", bench_bf16_fma},
        Section{"bf16step", bench_bf16_step}, Section{"int8", [] { bench_int8_forms(true); }},
        Section{"int8plain", [] { bench_int8_forms(false); }}, Section{"f32backends", bench_f32_backends},
        Section{"gpt2stream", [] { bench_gpt2_stream(20); }}})
    if (argc > 1 && want(name)) run();

  if (want("omp")) {
    const int n = 768;
    std::vector<Tensor> a, c;
    for (int i = 0; i < 2; ++i) a.push_back(rand_t({n, n}, 30 + uint64_t(i))), c.push_back(Tensor::empty({n, n}));
    auto one = [&](int i) {
      sgemm(false, false, n, n, n, a[size_t(i)].data<float>(), n, a[size_t(i)].data<float>(), n, 0.f,
            c[size_t(i)].data<float>());
    };
    double t_out = timed([&] { one(0); }, 5).wall;  // BLAS's own threads
    int omp_threads = omp_get_max_threads();
    openblas_set_num_threads(1);
    double t_single = timed([&] { one(0); }, 5).wall;
    openblas_set_num_threads(omp_threads);
    omp_set_num_threads(omp_threads);
    int threads_before = process_threads();
    double t_in = timed([&] {
#pragma omp parallel num_threads(2)
      one(omp_get_thread_num() % 2);
    }, 5).wall;
    std::printf("\nOpenBLAS in a parallel region (%dx%dx%d sgemm): alone with %d BLAS threads %.1f ms, alone\n"
                "single-threaded %.1f ms, two at once (one per OpenMP thread) %.1f ms; process threads\n"
                "before %d, after %d; omp max active levels %d\n",
                n, n, n, omp_threads, t_out * 1e3, t_single * 1e3, t_in * 1e3, threads_before, process_threads(),
                omp_get_max_active_levels());
  }
  return 0;
}
