// bf16 products of f32 operands (kernels/bf16.h): the process's choice between oneDNN's native bf16
// kernel and the fp32 GEMM on bf16-rounded values, and the two paths.
#include <omp.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "qkv/kernels/bf16.h"
#include "qkv/kernels/bf16_step_weights.h"
#include "qkv/kernels/gemm.h"
#include "qkv/kernels/precision_speed.h"
#include "qkv/util/error.h"

namespace qkv::kernels {
namespace {

constexpr int kUnresolved = -1;
std::atomic<int> g_products{kUnresolved};

// QKV_BF16_PRODUCTS, else the measured rule (auto).
Bf16Products default_products() {
  const char* env = std::getenv("QKV_BF16_PRODUCTS");
  if (env != nullptr && *env != '\0' && std::string(env) != "auto")
    return parse_bf16_products(env, "QKV_BF16_PRODUCTS");
  return measured_precision_speed().bf16_slower() ? Bf16Products::fp32_fma : Bf16Products::native;
}

}  // namespace

Bf16Products bf16_products() {
  int v = g_products.load(std::memory_order_acquire);
  if (v == kUnresolved) {
    static std::mutex mu;  // one resolution (the measurement runs products of its own)
    const std::lock_guard<std::mutex> lock(mu);
    v = g_products.load(std::memory_order_acquire);
    if (v == kUnresolved) {
      v = int(default_products());
      g_products.store(v, std::memory_order_release);
    }
  }
  return Bf16Products(v);
}

void set_bf16_products(Bf16Products p) { g_products.store(int(p), std::memory_order_release); }

bool native_bf16_products() {
  return matmul_precision() == MatmulPrecision::bf16 && bf16_products() == Bf16Products::native;
}

const char* bf16_products_name(Bf16Products p) { return p == Bf16Products::fp32_fma ? "fp32_fma" : "native"; }

Bf16Products parse_bf16_products(const std::string& s, const char* who) {
  if (s == "native") return Bf16Products::native;
  if (s == "fp32_fma") return Bf16Products::fp32_fma;
  fail(who, "expected native, fp32_fma or auto, got '", s, "'");
}

void round_to_bf16_values(const float* x, int64_t rows, int64_t cols, int64_t ld, float* y) {
#pragma omp parallel for schedule(static) if (rows * cols >= (int64_t(1) << 18) && !omp_in_parallel())
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * ld;
    float* yr = y + r * cols;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) yr[c] = from_bf16(to_bf16(xr[c]));
  }
}

void gemm_bf16_rounded(Bf16Products how, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                       const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0 || K == 0)
    return gemm_bf16(ta, tb, M, N, K, alpha, (const uint16_t*)nullptr, lda, nullptr, ldb, beta, C, ldc);
  QKV_CHECK(lda >= (ta ? M : K) && ldb >= (tb ? K : N), "gemm (bf16)", "lda = ", lda, " / ldb = ", ldb,
            " below the stored row lengths");
  // fp32_fma runs on any CPU; precision bf16 is refused without AMX or AVX512_BF16 where it is
  // asked for (check_precision_supported) and by the native kernel.
  // The stored matrices, contiguous: A (M, K) or (K, M); B (K, N) or (N, K).
  const int64_t ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
  if (how == Bf16Products::fp32_fma) {
    thread_local std::vector<float> abuf, bbuf;
    abuf.resize(size_t(ar * ac));
    bbuf.resize(size_t(br * bc));
    round_to_bf16_values(A, ar, ac, lda, abuf.data());
    round_to_bf16_values(B, br, bc, ldb, bbuf.data());
    const MatmulPrecisionScope fp32(MatmulPrecision::fp32);
    return gemm(ta, tb, M, N, K, alpha, abuf.data(), ac, bbuf.data(), bc, beta, C, ldc);
  }
  thread_local std::vector<uint16_t> abuf, bbuf;
  // Each operand from a live copy rounded once for several products, else rounded here.
  const auto rounded = [](const float* x, int64_t rows, int64_t cols, int64_t ld, std::vector<uint16_t>& buf) {
    if (const uint16_t* once = Bf16RoundedOperand::lookup(x, rows, cols, ld)) return once;
    buf.resize(size_t(rows * cols));
    round_to_bf16(x, rows, cols, ld, buf.data());
    return static_cast<const uint16_t*>(buf.data());
  };
  const uint16_t* a16 = rounded(A, ar, ac, lda, abuf);
  const uint16_t* b16 = rounded(B, br, bc, ldb, bbuf);
  gemm_bf16(ta, tb, M, N, K, alpha, a16, ac, b16, bc, beta, C, ldc);
}

void gemm_bf16(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
               const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  gemm_bf16_rounded(bf16_products(), ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// check_precision_supported (gemm_dnnl.cpp) for a task's call.
void check_task_precision(MatmulPrecision p, const char* task) {
  check_precision_supported(p, (std::string(task) + " (precision " + precision_name(p) + ")").c_str());
}

}  // namespace qkv::kernels
