// int8 products in the rows layout (kernels/int8.h's scheme, Int8Weight's rows form): each output
// an exact int32 dot product of a quantized x row (u8, zero point 128) with a weight row (s8),
// read where the rows lie, then scaled back. Internal to src/kernels/cpu (gemm_int8.cpp calls it).
#pragma once
#include <cstdint>

namespace qkv::kernels {

// out[m * ldo + n] = fma(float(acc - c[n]), sx[m] * sw[n], bias[n]) with acc = sum_k xq[m * K + k]
// * q[n * ldq + k] in int32, for the M quantized rows xq (row stride K) and the N weight rows q.
// Exact sums: the bits are those of any other order (oneDNN's too), whatever M or the thread
// count. bias may be null. The pool is used from min_macs multiply-adds.
// The instructions the kernel below was compiled for: "AVX512-VNNI", "AVX2" (the sign trick), or
// nullptr (scalar: still exact, but too slow to offer int8 with).
const char* int8_rows_kernel_isa();

void int8_rows_product(int64_t M, const uint8_t* xq, const float* sx, const int8_t* q, int64_t ldq, int64_t N,
                       int64_t K, const float* sw, const int32_t* c, const float* bias, float* out, int64_t ldo,
                       int64_t min_macs);

}  // namespace qkv::kernels
