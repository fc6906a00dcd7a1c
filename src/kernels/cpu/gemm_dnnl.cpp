// The bf16 GEMM backend: oneDNN's matmul primitive (bf16 x bf16 -> f32, f32 accumulation), one
// primitive per (shape, layout, alpha, beta) created once and cached; plain row-major operands
// (a transposed operand is described by its strides, never copied). oneDNN picks its kernel for
// the CPU: AMX tiles, else AVX512_BF16; without either, gemm_bf16 refuses (oneDNN would emulate
// bf16 on plain AVX-512 or AVX2, slower than sgemm: never a silent slowdown).
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <vector>

#include "qkv/kernels/bf16.h"
#include "qkv/util/error.h"

namespace qkv::kernels {
namespace {

std::atomic<int64_t> g_created{0};

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

struct Key {
  bool ta, tb;
  int64_t M, N, K, lda, ldb, ldc;
  float alpha, beta;
  bool operator==(const Key& o) const {
    return ta == o.ta && tb == o.tb && M == o.M && N == o.N && K == o.K && lda == o.lda && ldb == o.ldb &&
           ldc == o.ldc && alpha == o.alpha && beta == o.beta;
  }
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    uint64_t h = 1469598103934665603ull;
    auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
    mix(uint64_t(k.ta) | uint64_t(k.tb) << 1);
    for (int64_t v : {k.M, k.N, k.K, k.lda, k.ldb, k.ldc}) mix(uint64_t(v));
    uint32_t a, b;
    std::memcpy(&a, &k.alpha, 4);
    std::memcpy(&b, &k.beta, 4);
    mix(uint64_t(a) << 32 | b);
    return size_t(h);
  }
};

// A cached primitive with the memory descriptors it was made for.
// The scratchpad is the caller's (scratchpad_mode::user): with the library's mode, oneDNN built
// without DNNL_ENABLE_CONCURRENT_EXEC (Debian's) shares one scratchpad between executions, and
// the batched front-end runs this primitive on several OpenMP threads at once: results came out
// garbage under load. Each thread passes its own buffer instead.
struct Entry {
  dnnl::matmul prim;
  dnnl::memory::desc a, b, c, scratch;
};

Entry make_entry(const Key& k) {
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  // op(A) (M, K): stored (M, K) with row stride lda, or (K, M) (column stride lda) when transposed.
  dnnl::memory::desc a({k.M, k.K}, dt::bf16, k.ta ? dims{1, k.lda} : dims{k.lda, 1});
  dnnl::memory::desc b({k.K, k.N}, dt::bf16, k.tb ? dims{1, k.ldb} : dims{k.ldb, 1});
  dnnl::memory::desc c({k.M, k.N}, dt::f32, dims{k.ldc, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (k.alpha != 1.f) attr.set_output_scales(0, {k.alpha});
  if (k.beta != 0.f) {
    dnnl::post_ops po;
    po.append_sum(k.beta);
    attr.set_post_ops(po);
  }
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, engine());
  g_created.fetch_add(1);
  return {dnnl::matmul(pd), a, b, c, pd.scratchpad_desc()};
}

const Entry& entry(const Key& k) {
  static std::mutex mu;
  static std::unordered_map<Key, Entry, KeyHash> cache;  // node-based: references stay valid
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(k);
  if (it == cache.end()) it = cache.emplace(k, make_entry(k)).first;
  return it->second;
}

std::string read_cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      auto p = line.find(':');
      if (p != std::string::npos) return line.substr(line.find_first_not_of(" \t", p + 1));
    }
  return "unknown";
}

const char* isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_mic: return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "unknown";
  }
}

void check_native(const char* where) {
  const DnnlCpuInfo& info = dnnl_cpu_info();
  QKV_CHECK(info.bf16_native(), where,
            "bf16 needs AMX or AVX512_BF16, but oneDNN runs '", info.isa, "' on this CPU (", info.cpu_model,
            "; ONEDNN_MAX_CPU_ISA caps it): bf16 would be emulated, slower than fp32. Use precision fp32");
}

}  // namespace

std::string DnnlCpuInfo::bf16_kernel() const {
  if (amx) return "AMX";
  if (avx512_bf16) return "AVX512_BF16";
  return "none (bf16 unavailable: no AMX or AVX512_BF16 in oneDNN's '" + isa + "')";
}

const DnnlCpuInfo& dnnl_cpu_info() {
  static const DnnlCpuInfo info = [] {
    DnnlCpuInfo i;
    i.cpu_model = read_cpu_model();
    auto isa = dnnl::get_effective_cpu_isa();
    i.isa = isa_name(isa);
    auto has = [&](dnnl_cpu_isa_t want) { return (unsigned(isa) & unsigned(want)) == unsigned(want); };
    i.amx = has(dnnl_cpu_isa_avx512_core_amx);
    i.avx512_bf16 = has(dnnl_cpu_isa_avx512_core_bf16);
    i.avx512 = has(dnnl_cpu_isa_avx512_core);
    return i;
  }();
  return info;
}

int64_t gemm_bf16_primitives_created() { return g_created.load(); }

void gemm_bf16(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t* A, int64_t lda,
               const uint16_t* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  QKV_CHECK(M >= 0 && N >= 0 && K >= 0, "gemm (bf16)", "negative size M = ", M, ", N = ", N, ", K = ", K);
  if (M == 0 || N == 0) return;
  QKV_CHECK(ldc >= N, "gemm (bf16)", "ldc = ", ldc, " is below the stored row length ", N);
  if (K == 0) {  // an empty sum: C = beta * C
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.f ? 0.f : beta * C[i * ldc + j];
    return;
  }
  QKV_CHECK(lda >= (ta ? M : K), "gemm (bf16)", "lda = ", lda, " is below the stored row length ", ta ? M : K);
  QKV_CHECK(ldb >= (tb ? K : N), "gemm (bf16)", "ldb = ", ldb, " is below the stored row length ", tb ? K : N);
  check_native("gemm (bf16)");
  const Entry& e = entry(Key{ta, tb, M, N, K, lda, ldb, ldc, alpha, beta});
  dnnl::memory a(e.a, engine(), const_cast<uint16_t*>(A));
  dnnl::memory b(e.b, engine(), const_cast<uint16_t*>(B));
  dnnl::memory c(e.c, engine(), C);
  thread_local dnnl::stream stream(engine());
  thread_local std::vector<uint8_t> scratch_buf;  // this thread's scratchpad (see Entry)
  scratch_buf.resize(std::max<size_t>(scratch_buf.size(), e.scratch.get_size()));
  dnnl::memory scratch(e.scratch, engine(), scratch_buf.data());
  e.prim.execute(stream, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}, {DNNL_ARG_SCRATCHPAD, scratch}});
  stream.wait();
}

void gemm_bf16(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
               const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0 || K == 0) return gemm_bf16(ta, tb, M, N, K, alpha, (const uint16_t*)nullptr, lda, nullptr,
                                                   ldb, beta, C, ldc);
  QKV_CHECK(lda >= (ta ? M : K) && ldb >= (tb ? K : N), "gemm (bf16)", "lda = ", lda, " / ldb = ", ldb,
            " below the stored row lengths");
  check_native("gemm (bf16)");
  // The stored matrices, contiguous in bf16: A (M, K) or (K, M); B (K, N) or (N, K).
  const int64_t ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
  thread_local std::vector<uint16_t> abuf, bbuf;
  abuf.resize(size_t(ar * ac));
  bbuf.resize(size_t(br * bc));
  round_to_bf16(A, ar, ac, lda, abuf.data());
  round_to_bf16(B, br, bc, ldb, bbuf.data());
  gemm_bf16(ta, tb, M, N, K, alpha, abuf.data(), ac, bbuf.data(), bc, beta, C, ldc);
}

}  // namespace qkv::kernels
