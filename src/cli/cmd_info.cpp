// `qkv info`: the CPU, the threads, BLAS kernels, oneDNN's ISA (and so the bf16 kernel) and the
// OpenMP wait policy this process runs with, after the start-up re-exec (util/blas_env.h) - what
// a speed report needs next to its figures - and the measured speed of a training-sized product
// in fp32 and bf16: AVX512_BF16 is not faster than fp32 on every CPU that has it (on Intel Xeons
// without AMX it measured about 0.6x), so whether bf16 training pays is measured, not assumed.
#include <CLI/CLI.hpp>
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli.h"
#include "qkv/kernels/bf16.h"
#include "qkv/kernels/gemm.h"
#include "qkv/kernels/int8.h"
#include "qkv/kernels/parallel.h"
#include "qkv/kernels/precision_speed.h"

namespace {

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v ? std::string(name) + "=" + v : std::string(fallback);
}

int run_info(int argc, char** argv) {
  CLI::App app{"Print the CPU, threads, BLAS and oneDNN kernels and OpenMP wait policy qkv runs with", "qkv info"};
  QKV_PARSE(app, argc, argv);
  const bool avx512 = __builtin_cpu_supports("avx512f");
  std::printf("threads          %d (%s)\n", omp_get_max_threads(), env_or("OMP_NUM_THREADS", "all cores").c_str());
  const qkv::kernels::DnnlCpuInfo& dnnl = qkv::kernels::dnnl_cpu_info();
  std::printf("cpu              %s (%s)\n", dnnl.cpu_model.c_str(), avx512 ? "AVX-512" : "no AVX-512");
  std::printf("OpenBLAS kernels %s (%s)%s\n", qkv::kernels::blas_core(),
              env_or("OPENBLAS_CORETYPE", "detected").c_str(),
              qkv::kernels::blas_core_is_degraded() ? ": degraded, set OPENBLAS_CORETYPE=SkylakeX" : "");
  std::printf("oneDNN ISA       %s (%s); bf16 GEMM %s\n", dnnl.isa.c_str(),
              env_or("ONEDNN_MAX_CPU_ISA", "detected").c_str(), dnnl.bf16_kernel().c_str());
  if (std::string(qkv::kernels::f32_gemm_backend()) == "onednn")
    std::printf("fp32 GEMM        oneDNN's f32 matmul for products of >= 2^23 multiply-adds with B transposed or N <= "
                "1024, OpenBLAS for the rest (%s)\n",
                env_or("QKV_F32_GEMM", "default; QKV_F32_GEMM=openblas keeps every product in OpenBLAS").c_str());
  else {
    // The user's setting first (here it can only be openblas: onednn without AVX-512 is refused).
    const char* setting = std::getenv("QKV_F32_GEMM");
    const bool by_setting = (setting && *setting) || qkv::kernels::gemm_f32_onednn_available();
    std::printf("fp32 GEMM        OpenBLAS for every product (%s)\n",
                by_setting ? "QKV_F32_GEMM=openblas" : "oneDNN has no AVX-512 here");
  }
  if (qkv::kernels::int8_supported()) {
    std::printf("int8 products    %s%s (exact int32 sums); --precision int8 quantizes weights of >= %lld values",
                qkv::kernels::int8_native() ? "" : "qkv's own kernel for every batch, ", qkv::kernels::int8_kernel(),
                (long long)qkv::kernels::int8_min_weight_elements());
    if (const int64_t rows = qkv::kernels::int8_small_weight_min_rows(); rows > 0)
      std::printf(", and those of >= 65536 for products of >= %lld rows\n", (long long)rows);
    else
      std::printf("; smaller ones stay fp32\n");
  } else
    std::printf("int8 products    unavailable (no AVX512-VNNI or AMX in oneDNN's '%s', and qkv not built for AVX2)\n",
                dnnl.isa.c_str());
  std::printf("OpenMP wait      %s, %s; idle threads %s\n", env_or("OMP_WAIT_POLICY", "no OMP_WAIT_POLICY").c_str(),
              env_or("GOMP_SPINCOUNT", "no GOMP_SPINCOUNT").c_str(),
              qkv::kernels::idle_threads_spin() ? "spin, then sleep" : "sleep at once");
  std::printf("batch-1 rows     %d weight streams per thread (%s)\n", qkv::kernels::rows_streams_per_thread(),
              env_or("QKV_ROW_STREAMS", "no QKV_ROW_STREAMS: the CPU's count").c_str());
  const qkv::kernels::PrecisionSpeed& speed = qkv::kernels::measured_precision_speed();
  const double f32 = speed.fp32_gflops, b16 = speed.bf16_gflops;
  if (b16 == 0) {
    std::printf("matmul speed     fp32 %.0f GFLOP/s (512x1024x1024); bf16 unavailable\n", f32);
    return 0;
  }
  std::printf("matmul speed     fp32 %.0f GFLOP/s, bf16 %.0f GFLOP/s (512x1024x1024, operands rounded per call as "
              "in training): bf16 %.2fx fp32\n",
              f32, b16, b16 / f32);
  const qkv::kernels::Bf16Products how = qkv::kernels::bf16_products();
  std::printf("bf16 products    %s (%s)", qkv::kernels::bf16_products_name(how),
              env_or("QKV_BF16_PRODUCTS", "no QKV_BF16_PRODUCTS: the faster").c_str());
  if (how == qkv::kernels::Bf16Products::fp32_fma)
    std::printf(": training's bf16 products run as fp32 FMA on bf16-rounded operands; inference's against weights "
                "converted to bf16 once, below %lld rows, on qkv's bf16 panels widened to f32 (the rows layout: "
                "vdpbf16ps)",
                (long long)qkv::kernels::bf16_fma_min_rows);
  std::printf("\n");
  const qkv::kernels::Bf16TileKernel tiles = qkv::kernels::bf16_tile_kernel();
  std::printf("bf16 attention   %s tiles%s\n", qkv::kernels::bf16_tile_kernel_name(tiles),
              tiles == qkv::kernels::Bf16TileKernel::fp32_fma ? " (the fp32 GEMM on bf16-rounded operands)" : "");
  return 0;
}

qkv::cli::Register register_info("info", "CPU, threads, BLAS and oneDNN kernels, OpenMP wait policy in effect",
                                 run_info);

}  // namespace
