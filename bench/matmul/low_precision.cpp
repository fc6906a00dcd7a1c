// bench_matmul's bf16 and int8 sections (bench/matmul.cpp's header lists them): bf16, bf16fma,
// bf16step, bf16packed, int8, int8plain and gpt2stream.
#include "matmul/matmul_bench.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "bench_util.h"
#include "qkv/autograd/node.h"
#include "qkv/kernels/bf16.h"
#include "qkv/kernels/gemm.h"
#include "qkv/kernels/int8.h"
#include "qkv/ops/elementwise.h"
#include "qkv/ops/matmul.h"
#include "qkv/ops/reduce.h"
#include "qkv/tensor/rng.h"

namespace qkv::bench::matmul_sections {

// oneDNN's own bf16 matmul, the reference the bf16 GEMM is measured against: one primitive made
// once, src and dst plain row-major, weights in the layout oneDNN prefers (format_tag::any,
// reordered once outside the timing) - what a framework holding pre-packed weights gets.
struct DnnlReference {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{eng};
  dnnl::matmul prim;
  dnnl::memory src, wei, dst;
  DnnlReference(bool ta, bool tb, int M, int N, int K, const uint16_t* A, const uint16_t* B, float* C) {
    using dt = dnnl::memory::data_type;
    using dims = dnnl::memory::dims;
    dnnl::memory::desc a({M, K}, dt::bf16, ta ? dims{1, M} : dims{K, 1});
    dnnl::memory::desc b_plain({K, N}, dt::bf16, tb ? dims{1, K} : dims{N, 1});
    dnnl::memory::desc b_any({K, N}, dt::bf16, dnnl::memory::format_tag::any);
    dnnl::memory::desc c({M, N}, dt::f32, dims{N, 1});
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b_any, c), eng);
    prim = dnnl::matmul(pd);
    src = dnnl::memory(a, eng, const_cast<uint16_t*>(A));
    dst = dnnl::memory(c, eng, C);
    dnnl::memory b_user(b_plain, eng, const_cast<uint16_t*>(B));
    wei = dnnl::memory(pd.weights_desc(), eng);
    dnnl::reorder(b_user, wei).execute(stream, b_user, wei);
    stream.wait();
  }
  void run() {
    prim.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}});
    stream.wait();
  }
};

// The model shapes: C (M, N) = op(A) op(B). Forward products are x (tokens, K) @ W^T (tb); the
// backward ones dX = dY W (nn) and dW = dY^T X (tn).
struct Bf16Case {
  const char* name;
  bool ta, tb;
  int M, N, K;
};
void bench_bf16() {
  const auto& info = kernels::dnnl_cpu_info();
  std::printf("\nbf16 GEMM. CPU: %s; oneDNN ISA %s; bf16 GEMM %s. GF/s per wall second (per CPU second).\n"
              "qkv bf16 = kernels::gemm_bf16 on f32 operands (rounding them included); qkv bf16 pre = on operands\n"
              "already bf16; dnnl = oneDNN's matmul with its preferred weight layout; %% = qkv bf16 pre / dnnl.\n",
              info.cpu_model.c_str(), info.isa.c_str(), info.bf16_kernel().c_str());
  if (!info.bf16_native()) {
    std::printf("no bf16 kernel on this CPU: skipped\n");
    return;
  }
  std::printf("| %-52s | sgemm         | qkv bf16      | qkv bf16 pre  | dnnl bf16     | pre/dnnl | bf16/sgemm |\n"
              "|%s|---------------|---------------|---------------|---------------|----------|------------|\n",
              "case (M x N x K)", std::string(54, '-').c_str());
  const std::vector<Bf16Case> cases = {
      {"mt d192: x @ Wqkv^T", false, true, 2000, 576, 192},
      {"mt d192: x @ W1^T (d_ff 768)", false, true, 2000, 768, 192},
      {"mt d192: h @ W2^T", false, true, 2000, 192, 768},
      {"mt d192: x @ Wvocab^T (3000)", false, true, 2000, 3000, 192},
      {"mt d192: dH = dY W2 (nn)", false, false, 2000, 768, 192},
      {"mt d192: dW1 = dH^T X (tn)", true, false, 768, 192, 2000},
      {"gpt cfg1 d256: x @ Wqkv^T", false, true, 4096, 768, 256},
      {"gpt cfg1 d256: x @ W1^T (d_ff 1024)", false, true, 4096, 1024, 256},
      {"gpt cfg1 d256: h @ W2^T", false, true, 4096, 256, 1024},
      {"gpt cfg1 d256: dW1 = dH^T X (tn)", true, false, 1024, 256, 4096},
      {"gpt2 decode: x @ Wvocab^T (N = 1 token)", false, true, 1, 50257, 768},
      {"gpt2 decode: x @ W1^T (1 token)", false, true, 1, 3072, 768},
  };
  for (const auto& c : cases) {
    const int64_t an = int64_t(c.M) * c.K, bn = int64_t(c.K) * c.N;
    Tensor a = rand_t({an}, 40), b = rand_t({bn}, 41), out = Tensor::empty({int64_t(c.M) * c.N});
    std::vector<uint16_t> a16(static_cast<size_t>(an)), b16(static_cast<size_t>(bn));
    kernels::round_to_bf16(a.data<float>(), a16.data(), an);
    kernels::round_to_bf16(b.data<float>(), b16.data(), bn);
    const int lda = c.ta ? c.M : c.K, ldb = c.tb ? c.K : c.N;
    float* C = out.data<float>();
    DnnlReference ref(c.ta, c.tb, c.M, c.N, c.K, a16.data(), b16.data(), C);
    const double flops = 2.0 * c.M * c.N * c.K;
    const int reps = std::clamp(int(2e10 / flops), 10, 200);
    auto t = timed_all(
        {[&] { sgemm(c.ta, c.tb, c.M, c.N, c.K, a.data<float>(), lda, b.data<float>(), ldb, 0.f, C); },
         [&] {
           kernels::gemm_bf16_rounded(kernels::Bf16Products::native, c.ta, c.tb, c.M, c.N, c.K, 1.f, a.data<float>(),
                                      lda, b.data<float>(), ldb, 0.f, C, c.N);
         },
         [&] { kernels::gemm_bf16(c.ta, c.tb, c.M, c.N, c.K, 1.f, a16.data(), lda, b16.data(), ldb, 0.f, C, c.N); },
         [&] { ref.run(); }},
        reps);
    char name[96];
    std::snprintf(name, sizeof name, "%s %dx%dx%d", c.name, c.M, c.N, c.K);
    std::printf("| %-52s |", name);
    for (const Timed& x : t) std::printf(" %5.0f (%5.0f) |", flops / x.wall * 1e-9, flops / x.cpu * 1e-9);
    std::printf(" %7.0f%% | %9.2fx |\n", 100.0 * t[3].wall / t[2].wall, t[0].wall / t[1].wall);
  }
}

// Decoding's skinny products against a weight converted once (kernels::pack_bf16_weight): bf16 in
// oneDNN's preferred (blocked) layout against plain row-major bf16, beside the fp32 packed panels
// (kernels::packed_linear) the fp32 decoder uses; x is f32 and rounded per call in both bf16 cases.
// The weights of decoding's products: the translation bench model (d 256) and GPT-2 124M.
struct DecodeShape {
  const char* name;
  int64_t N, K;
};
const std::vector<DecodeShape>& decode_shapes() {
  static const std::vector<DecodeShape> shapes = {
      {"mt d256 Wqkv", 768, 256}, {"mt d256 Wo", 256, 256},     {"mt d256 W1", 1024, 256},
      {"mt d256 W2", 256, 1024},  {"mt d256 Wvocab", 8000, 256}, {"gpt2 Wqkv", 2304, 768},
      {"gpt2 W1", 3072, 768},     {"gpt2 W2", 768, 3072},        {"gpt2 Wvocab", 50257, 768}};
  return shapes;
}

// `bench_matmul bf16fma`: a converted bf16 weight (oneDNN's blocked layout, native bf16) against the
// fp32 GEMM on bf16-rounded operands (kernels::Bf16Products::fp32_fma, the weight rounded per call),
// from decoding's rows to an encoder batch's: where the second wins, batch inference would use it.
void bench_bf16_fma() {
  const auto& info = kernels::dnnl_cpu_info();
  std::printf("\nbf16 products x (M, K) @ W^T: native (W converted once, blocked) against fp32_fma (x and W\n"
              "rounded per call, fp32 GEMM). CPU: %s; oneDNN ISA %s. Microseconds per product, wall (CPU).\n",
              info.cpu_model.c_str(), info.isa.c_str());
  if (!info.bf16_native()) {
    std::printf("no bf16 kernel on this CPU: skipped\n");
    return;
  }
  std::printf("| %-34s | bf16 native       | fp32_fma          | native/fma |\n|%s|-------------------|"
              "-------------------|------------|\n", "case (M x N x K)", std::string(36, '-').c_str());
  for (const DecodeShape& sh : decode_shapes())
    for (int64_t M : {8, 32, 64, 128, 256, 512, 2048}) {
      if (sh.N > 10000 && M > 128) continue;
      Tensor w = rand_t({sh.N, sh.K}, 50), x = rand_t({M, sh.K}, 51), out = Tensor::empty({M, sh.N});
      auto blocked = kernels::pack_bf16_weight(w.data<float>(), sh.N, sh.K, sh.K, kernels::Bf16WeightLayout::blocked);
      const double macs = double(M) * double(sh.N) * double(sh.K);
      const int reps = std::clamp(int(2e9 / macs), 10, 400);
      float* y = out.data<float>();
      auto t = timed_all({[&] { kernels::gemm_bf16_packed(M, x.data<float>(), sh.K, *blocked, nullptr, y, sh.N); },
                          [&] {
                            kernels::gemm_bf16_rounded(kernels::Bf16Products::fp32_fma, false, true, M, sh.N, sh.K,
                                                       1.f, x.data<float>(), sh.K, w.data<float>(), sh.K, 0.f, y, sh.N);
                          }},
                         reps);
      char name[96];
      std::snprintf(name, sizeof name, "%s %lldx%lldx%lld", sh.name, (long long)M, (long long)sh.N, (long long)sh.K);
      std::printf("| %-34s |", name);
      for (const Timed& x : t) std::printf(" %7.1f (%7.1f) |", x.wall * 1e6, x.cpu * 1e6);
      std::printf(" %9.2fx |\n", t[0].wall / t[1].wall);
    }
}

// `bench_matmul bf16step`: a training step's products against its weights (kernels/
// bf16_step_weights.h) at the GPT and translation benches' shapes: both operands rounded per call
// (plain layouts) against the weight's step copy in oneDNN's blocked layout (x rounded per call; on
// AMX an odd-width vocabulary's padded to 256 columns), and the refill of it. Microseconds, wall (CPU).
void bench_bf16_step() {
  const auto& info = kernels::dnnl_cpu_info();
  std::printf("\nbf16 training products against a weight: per call vs the step's copy. CPU: %s; oneDNN ISA %s.\n"
              "Microseconds per product, wall (CPU).\n", info.cpu_model.c_str(), info.isa.c_str());
  if (!info.bf16_native()) {
    std::printf("no bf16 kernel on this CPU: skipped\n");
    return;
  }
  std::printf("| %-36s | per call          | step copy         | copy/per call | refill            |\n"
              "|%s|-------------------|-------------------|---------------|-------------------|\n",
              "case (M x N x K)", std::string(38, '-').c_str());
  struct Case {
    const char* name;
    bool kn;  // dY @ W (B = W, (K, N)) rather than x @ W^T
    int64_t M, N, K;
  };
  const std::vector<Case> cases = {
      {"cfg2 x @ Wqkv^T", false, 1024, 1536, 512}, {"cfg2 x @ W1^T", false, 1024, 2048, 512},
      {"cfg2 h @ W2^T", false, 1024, 512, 2048},   {"cfg2 x @ Wvocab^T", false, 1024, 8192, 512},
      {"cfg2 dY @ Wqkv (nn)", true, 1024, 512, 1536}, {"cfg2 dY @ W2 (nn)", true, 1024, 2048, 512},
      {"cfg2 dY @ Wvocab (nn)", true, 1024, 512, 8192}, {"cfg1 x @ W1^T", false, 4096, 1024, 256},
      {"cfg1 h @ W2^T", false, 4096, 256, 1024},    {"cfg1 dY @ W1 (nn)", true, 4096, 256, 1024},
      {"mt x @ Wvocab^T", false, 2048, 8000, 256},  {"BERT-vocab x @ Wvocab^T", false, 1024, 30522, 256}};
  for (const Case& c : cases) {
    // W (out, in): for x @ W^T out = N, in = K; for dY @ W out = K, in = N.
    const int64_t out = c.kn ? c.K : c.N, in = c.kn ? c.N : c.K;
    Tensor w = rand_t({out, in}, 60), x = rand_t({c.M, c.K}, 61), y = Tensor::empty({c.M, c.N});
    auto copy = kernels::make_bf16_weight(c.N, c.K, c.kn, c.M);
    kernels::refill_bf16_weight(*copy, w.data<float>(), in);
    const double macs = double(c.M) * double(c.N) * double(c.K);
    const int reps = std::clamp(int(4e9 / macs), 10, 200);
    auto t = timed_all({[&] {
                          kernels::gemm_bf16_rounded(kernels::Bf16Products::native, false, !c.kn, c.M, c.N, c.K, 1.f,
                                                     x.data<float>(), c.K, w.data<float>(), in, 0.f, y.data<float>(),
                                                     c.N);
                        },
                        [&] {
                          kernels::gemm_bf16_packed(c.M, x.data<float>(), c.K, *copy, nullptr, y.data<float>(), c.N);
                        },
                        [&] { kernels::refill_bf16_weight(*copy, w.data<float>(), in); }},
                       reps);
    char name[96];
    std::snprintf(name, sizeof name, "%s %lldx%lldx%lld", c.name, (long long)c.M, (long long)c.N, (long long)c.K);
    std::printf("| %-36s |", name);
    for (size_t i = 0; i < 2; ++i) std::printf(" %7.1f (%7.1f) |", t[i].wall * 1e6, t[i].cpu * 1e6);
    std::printf(" %12.2fx | %7.1f (%7.1f) |\n", t[1].wall / t[0].wall, t[2].wall * 1e6, t[2].cpu * 1e6);
  }
}

void bench_bf16_packed() {
  const auto& info = kernels::dnnl_cpu_info();
  std::printf(
      "\nDecode products x (M, K) @ W^T, W (N, K) converted once. CPU: %s; oneDNN ISA %s. Microseconds per\n"
      "product, wall (CPU); blocked/plain = plain time / blocked time.\n",
      info.cpu_model.c_str(), info.isa.c_str());
  if (!info.bf16_native()) {
    std::printf("no bf16 kernel on this CPU: skipped\n");
    return;
  }
  std::printf("| %-34s | fp32 panels       | bf16 plain        | bf16 blocked      | bf16 rows         "
              "| bf16 panels       | blocked/plain | fp32/blocked | rows/blocked | panels/blocked |\n|%s|%s|"
              "---------------|--------------|--------------|----------------|\n",
              "case (M x N x K)", std::string(36, '-').c_str(), std::string(99, '-').c_str());
  for (const DecodeShape& sh : decode_shapes())
    for (int64_t M : {1, 8, 32, 128}) {
      if (sh.N > 10000 && M > 8) continue;
      Tensor w = rand_t({sh.N, sh.K}, 50), x = rand_t({M, sh.K}, 51), out = Tensor::empty({M, sh.N});
      const kernels::PackedLinear f32 = kernels::pack_linear(w, Tensor());
      const kernels::PackedLinear rows = kernels::pack_linear_rows({w}, Tensor(), kernels::MatmulPrecision::bf16);
      const kernels::Bf16Products process = kernels::bf16_products();
      kernels::set_bf16_products(kernels::Bf16Products::fp32_fma);  // the pack's form follows it
      const kernels::PackedLinear panels16 = kernels::pack_linear(w, Tensor(), kernels::MatmulPrecision::bf16);
      kernels::set_bf16_products(process);
      auto plain = kernels::pack_bf16_weight(w.data<float>(), sh.N, sh.K, sh.K, kernels::Bf16WeightLayout::plain);
      auto blocked = kernels::pack_bf16_weight(w.data<float>(), sh.N, sh.K, sh.K, kernels::Bf16WeightLayout::blocked);
      const double macs = double(M) * double(sh.N) * double(sh.K);
      const int reps = std::clamp(int(2e9 / macs), 10, 400);
      float* y = out.data<float>();
      auto t = timed_all({[&] { kernels::packed_linear(x, f32, out); },
                          [&] { kernels::gemm_bf16_packed(M, x.data<float>(), sh.K, *plain, nullptr, y, sh.N); },
                          [&] { kernels::gemm_bf16_packed(M, x.data<float>(), sh.K, *blocked, nullptr, y, sh.N); },
                          [&] { kernels::packed_linear(x, rows, out); },
                          [&] { kernels::packed_linear(x, panels16, out); }},
                         reps);
      char name[96];
      std::snprintf(name, sizeof name, "%s %lldx%lldx%lld", sh.name, (long long)M, (long long)sh.N, (long long)sh.K);
      std::printf("| %-34s |", name);
      for (const Timed& x : t) std::printf(" %7.1f (%7.1f) |", x.wall * 1e6, x.cpu * 1e6);
      std::printf(" %12.2fx | %11.2fx | %11.2fx | %13.2fx |\n", t[1].wall / t[2].wall, t[0].wall / t[2].wall,
                  t[3].wall / t[2].wall, t[4].wall / t[2].wall);
    }
}

// `bench_matmul int8`: the same decode products with the weight quantized once to int8
// (kernels/int8.h: per-channel weight scales, per-row activation scales, int32 sums), beside fp32
// panels and bf16 blocked; err = max |int8 - fp32| / max |fp32| on that product.
// own_kernel: the "int8 rows" column runs qkv's kernel at every M (to place
// int8_rows_max_batch()); else oneDNN over the plain s8 rows at every M, what weights held in int8
// (nn::Module::hold_weights_in_int8) take for batches, against oneDNN's blocked form
// (`bench_matmul int8plain`, at batch sizes).
void bench_int8_forms(bool own_kernel) {
  const auto& info = kernels::dnnl_cpu_info();
  std::printf("\nDecode products x (M, K) @ W^T, W (N, K) quantized / converted once. CPU: %s; oneDNN ISA %s.\n"
              "Microseconds per product, wall (CPU).\n", info.cpu_model.c_str(), info.isa.c_str());
  if (!kernels::int8_supported()) {
    std::printf("no int8 kernel on this CPU: skipped\n");
    return;
  }
  if (!own_kernel && !kernels::int8_native()) {
    std::printf("no oneDNN int8 kernel (AVX512-VNNI or AMX) on this CPU: skipped\n");
    return;
  }
  const bool bf16 = info.bf16_native();
  const int64_t rows_max_batch = kernels::int8_rows_max_batch();
  kernels::set_int8_rows_max_batch(own_kernel ? int64_t(1) << 40 : 1);
  const std::vector<int64_t> batches = own_kernel ? std::vector<int64_t>{1, 4, 8, 16, 32, 128}
                                                  : std::vector<int64_t>{16, 128, 512};
  if (kernels::int8_native())
    std::printf("int8 = oneDNN's blocked form; int8 rows = %s at every M.\n",
                own_kernel ? "qkv's kernel" : "oneDNN over the plain s8 rows");
  else  // pack_int8_weight gives the rows form too
    std::printf("int8 and int8 rows = qkv's %s kernel at every M (no oneDNN int8 kernel here).\n",
                kernels::int8_kernel());
  std::printf("| %-34s | fp32 panels       | bf16 blocked      | int8              | int8 rows         | fp32/int8 | "
              "bf16/int8 | int8/rows | err     |\n"
              "|%s|-------------------|-------------------|-------------------|-------------------|-----------|"
              "-----------|-----------|---------|\n",
              "case (M x N x K)", std::string(36, '-').c_str());
  for (const DecodeShape& sh : decode_shapes())
    for (int64_t M : batches) {
      if (sh.N > 10000 && M > (own_kernel ? 8 : 16)) continue;
      Tensor w = rand_t({sh.N, sh.K}, 50), x = rand_t({M, sh.K}, 51), out = Tensor::empty({M, sh.N});
      Tensor ref = Tensor::empty({M, sh.N});
      const kernels::PackedLinear f32 = kernels::pack_linear(w, Tensor());
      const kernels::PackedLinear rows = kernels::pack_linear_rows({w}, Tensor(), kernels::MatmulPrecision::bf16);
      const kernels::Bf16Products process = kernels::bf16_products();
      kernels::set_bf16_products(kernels::Bf16Products::fp32_fma);  // the pack's form follows it
      const kernels::PackedLinear panels16 = kernels::pack_linear(w, Tensor(), kernels::MatmulPrecision::bf16);
      kernels::set_bf16_products(process);
      auto b16 = bf16 ? kernels::pack_bf16_weight(w.data<float>(), sh.N, sh.K, sh.K) : nullptr;
      auto i8 = kernels::pack_int8_weight(w.data<float>(), sh.N, sh.K, sh.K);
      auto i8_rows = kernels::pack_int8_weight_rows(w.data<float>(), sh.N, sh.K, sh.K);
      const double macs = double(M) * double(sh.N) * double(sh.K);
      const int reps = std::clamp(int(2e9 / macs), 10, 400);
      float* y = out.data<float>();
      kernels::packed_linear(x, f32, ref);
      kernels::gemm_int8_packed(M, x.data<float>(), sh.K, *i8, nullptr, y, sh.N);
      double err = 0, big = 0;
      for (int64_t i = 0; i < M * sh.N; ++i) {
        err = std::max(err, double(std::fabs(y[i] - ref.data<float>()[i])));
        big = std::max(big, double(std::fabs(ref.data<float>()[i])));
      }
      std::vector<std::function<void()>> runs = {
          [&] { kernels::packed_linear(x, f32, out); },
          [&] { kernels::gemm_int8_packed(M, x.data<float>(), sh.K, *i8, nullptr, y, sh.N); },
          [&] { kernels::gemm_int8_packed(M, x.data<float>(), sh.K, *i8_rows, nullptr, y, sh.N); }};
      if (b16)
        runs.insert(runs.begin() + 1,
                    [&] { kernels::gemm_bf16_packed(M, x.data<float>(), sh.K, *b16, nullptr, y, sh.N); });
      auto t = timed_all(runs, reps);
      if (!b16) t.insert(t.begin() + 1, Timed{0, 0});
      char name[96];
      std::snprintf(name, sizeof name, "%s %lldx%lldx%lld", sh.name, (long long)M, (long long)sh.N, (long long)sh.K);
      std::printf("| %-34s |", name);
      for (const Timed& x : t) std::printf(" %7.1f (%7.1f) |", x.wall * 1e6, x.cpu * 1e6);
      std::printf(" %8.2fx | %8.2fx | %8.2fx | %.1e |\n", t[0].wall / t[2].wall, b16 ? t[1].wall / t[2].wall : 0.0,
                  t[2].wall / t[3].wall, err / big);
    }
  kernels::set_int8_rows_max_batch(rows_max_batch);
}

// `bench_matmul gpt2stream`: one batch-1 decoding step's products for GPT-2 124M (12 layers of
// Wqkv 2304x768, Wo 768x768, W1 3072x768, W2 768x3072, then the 50257x768 vocabulary), every
// weight distinct, so each "token" streams all of them from memory as generation does: fp32 rows
// (in place: the Generator's fp32 form), fp32 panels, bf16 blocked (oneDNN), bf16 rows (the
// Generator's bf16 form) and int8, alternating. Weight bytes over time is the bandwidth each
// reaches; attention, layer norms and the rest of a real step are not included.
void bench_gpt2_stream(int tokens) {
  const auto& info = kernels::dnnl_cpu_info();
  std::printf("\nGPT-2 124M batch-1 products, all weights streamed per token. CPU: %s; oneDNN ISA %s.\n",
              info.cpu_model.c_str(), info.isa.c_str());
  struct W {
    int64_t N, K;
  };
  std::vector<W> shapes;
  for (int l = 0; l < 12; ++l) shapes.insert(shapes.end(), {{2304, 768}, {768, 768}, {3072, 768}, {768, 3072}});
  shapes.push_back({50257, 768});
  std::vector<Tensor> w, x, y;
  std::vector<kernels::PackedLinear> rows, panels, rows16;
  std::vector<std::shared_ptr<const kernels::Bf16Weight>> b16;
  std::vector<std::shared_ptr<const kernels::Int8Weight>> i8, i8_rows;
  double f32_bytes = 0, b16_bytes = 0, i8_bytes = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const W& s = shapes[i];
    w.push_back(rand_t({s.N, s.K}, 300 + i));
    x.push_back(rand_t({1, s.K}, 700 + i));
    y.push_back(Tensor::empty({1, s.N}));
    rows.push_back(kernels::pack_linear_rows({w.back()}, Tensor()));
    panels.push_back(kernels::pack_linear(w.back(), Tensor()));
    if (info.bf16_native()) b16.push_back(kernels::pack_bf16_weight(w.back().data<float>(), s.N, s.K, s.K));
    if (info.bf16_native()) rows16.push_back(kernels::pack_linear_rows({w.back()}, {}, kernels::MatmulPrecision::bf16));
    if (kernels::int8_native()) i8.push_back(kernels::pack_int8_weight(w.back().data<float>(), s.N, s.K, s.K));
    if (kernels::int8_native())
      i8_rows.push_back(kernels::pack_int8_weight_rows(w.back().data<float>(), s.N, s.K, s.K));
    f32_bytes += 4.0 * double(s.N * s.K);
    if (!b16.empty()) b16_bytes += double(kernels::bf16_weight_bytes(*b16.back()));
    if (!i8.empty()) i8_bytes += double(kernels::int8_weight_bytes(*i8.back()));
  }
  std::vector<std::function<void()>> runs = {
      [&] { for (size_t i = 0; i < shapes.size(); ++i) kernels::packed_linear(x[i], rows[i], y[i]); },
      [&] { for (size_t i = 0; i < shapes.size(); ++i) kernels::packed_linear(x[i], panels[i], y[i]); }};
  std::vector<std::string> names = {"fp32 rows", "fp32 panels"};
  std::vector<double> bytes = {f32_bytes, f32_bytes};
  if (!b16.empty()) {
    runs.push_back([&] {
      for (size_t i = 0; i < shapes.size(); ++i)
        kernels::gemm_bf16_packed(1, x[i].data<float>(), shapes[i].K, *b16[i], nullptr, y[i].data<float>(),
                                  shapes[i].N);
    });
    runs.push_back([&] { for (size_t i = 0; i < shapes.size(); ++i) kernels::packed_linear(x[i], rows16[i], y[i]); });
    names.insert(names.end(), {"bf16 blocked", "bf16 rows"});
    bytes.insert(bytes.end(), {b16_bytes, f32_bytes / 2});
  }
  if (!i8.empty()) {
    runs.push_back([&] {
      for (size_t i = 0; i < shapes.size(); ++i)
        kernels::gemm_int8_packed(1, x[i].data<float>(), shapes[i].K, *i8[i], nullptr, y[i].data<float>(), shapes[i].N);
    });
    runs.push_back([&] {
      for (size_t i = 0; i < shapes.size(); ++i)
        kernels::gemm_int8_packed(1, x[i].data<float>(), shapes[i].K, *i8_rows[i], nullptr, y[i].data<float>(),
                                  shapes[i].N);
    });
    names.insert(names.end(), {"int8 blocked", "int8 rows"});
    bytes.insert(bytes.end(), {i8_bytes, f32_bytes / 4});
  }
  auto t = timed_all(runs, tokens);
  std::printf(
      "| form | weight MB read per token | ms per token, wall (CPU) | GB/s | fp32 rows / form "
      "|\n|---|---:|---:|---:|---:|\n");
  for (size_t i = 0; i < t.size(); ++i)
    std::printf("| %s | %.1f | %.2f (%.2f) | %.1f | %.2fx |\n", names[i].c_str(), bytes[i] / 1e6, t[i].wall * 1e3,
                t[i].cpu * 1e3, bytes[i] / t[i].wall / 1e9, t[0].wall / t[i].wall);
}

}  // namespace qkv::bench::matmul_sections
