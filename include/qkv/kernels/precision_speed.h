// qkv/kernels/precision_speed.h - how fast this CPU runs a training-sized matrix product in each
// precision, measured rather than assumed: AVX512_BF16 is not faster than fp32 on every CPU that
// has it (an Intel Xeon without AMX measured 0.35-0.7x; an AMD EPYC about 2x).
#pragma once

namespace qkv::kernels {

struct PrecisionSpeed {
  double fp32_gflops = 0;
  double bf16_gflops = 0;  // oneDNN's native bf16 kernel; 0 when the CPU has none (AMX or AVX512_BF16)
  bool bf16_slower() const { return bf16_gflops > 0 && bf16_gflops < fp32_gflops; }
};

// Times C (512, 1024) = A (512, 1024) @ B^T, B (1024, 1024) in each precision: fp32 through the
// GEMM front-end, bf16 through oneDNN's native kernel (gemm_bf16_rounded), rounding both operands
// per call as mixed-precision training does. The best of 5 runs after a warm-up. About 0.1 s,
// measured on the first call and then kept. bf16_products() (kernels/bf16.h) decides by it.
const PrecisionSpeed& measured_precision_speed();

}  // namespace qkv::kernels
