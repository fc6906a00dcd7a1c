// bench_matmul's shared pieces: bench/matmul.cpp (the fp32 sections and main) and
// bench/matmul/low_precision.cpp (the bf16 and int8 sections) make one program.
#pragma once
#include <cblas.h>

#include "qkv/tensor/rng.h"
#include "qkv/tensor/tensor.h"

namespace qkv::bench::matmul_sections {

inline Tensor rand_t(const Shape& s, uint64_t seed) {  // N(0, 0.05^2) values
  Generator g(seed);
  Tensor t = Tensor::empty(s);
  g.normal(t.data<float>(), t.numel(), 0.f, 0.05f);
  return t;
}

// C (M, N) = op(A) op(B) + beta C, row-major, by OpenBLAS.
inline void sgemm(bool ta, bool tb, int M, int N, int K, const float* A, int lda, const float* B, int ldb, float beta,
                  float* C) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.f, A, lda, B,
              ldb, beta, C, N);
}

// The sections of low_precision.cpp (each named on the command line: see matmul.cpp's header).
void bench_bf16();                        // bf16
void bench_bf16_fma();                    // bf16fma
void bench_bf16_step();                   // bf16step
void bench_bf16_packed();                 // bf16packed
void bench_int8_forms(bool own_kernel);   // int8 (true), int8plain (false)
void bench_gpt2_stream(int tokens);       // gpt2stream

}  // namespace qkv::bench::matmul_sections
