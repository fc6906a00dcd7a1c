// The bf16 GEMM backend: oneDNN's matmul primitive (bf16 x bf16 -> f32, f32 accumulation), one
// primitive per (shape, layout, alpha, beta) created once and cached; plain row-major operands
// (a transposed operand is described by its strides, never copied). oneDNN picks its kernel for
// the CPU: AMX tiles, else AVX512_BF16; without either, gemm_bf16 refuses (oneDNN would emulate
// bf16 on plain AVX-512 or AVX2, slower than sgemm: never a silent slowdown).
// The same primitives with f32 operands are the fp32 backend for the large products oneDNN is
// faster at (gemm_f32_onednn; the front-end in gemm.cpp chooses it, see kernels/gemm.h).
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <atomic>
#include <fstream>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <vector>

#include "dnnl_common.h"
#include "qkv/kernels/bf16.h"
#include "qkv/kernels/bf16_step_weights.h"
#include "qkv/kernels/int8.h"
#include "qkv/tensor/tensor.h"
#include "qkv/util/buffer.h"
#include "qkv/util/error.h"
#include "transpose16.h"

namespace qkv::kernels {
namespace {

std::atomic<int64_t> g_created{0}, g_created_f32{0};  // primitives made: bf16 / f32 operands

using dnnl_detail::engine;
using dnnl_detail::OmpThreadsScope;

struct Key {
  bool f32;  // f32 operands (the fp32 backend) or bf16 ones
  bool ta, tb;
  int64_t M, N, K, lda, ldb, ldc;
  float alpha, beta;
  int threads;  // oneDNN partitions for the team size it was made with
  bool bias;    // a (N) f32 bias added to every row of C in the kernel's epilogue
  bool operator==(const Key& o) const {
    return f32 == o.f32 && ta == o.ta && tb == o.tb && M == o.M && N == o.N && K == o.K && lda == o.lda &&
           ldb == o.ldb && ldc == o.ldc && alpha == o.alpha && beta == o.beta && threads == o.threads &&
           bias == o.bias;
  }
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    uint32_t a, b;
    std::memcpy(&a, &k.alpha, 4);
    std::memcpy(&b, &k.beta, 4);
    return dnnl_detail::hash_key({int64_t(k.ta) | int64_t(k.tb) << 1 | int64_t(k.f32) << 2 | int64_t(k.bias) << 3,
                                  k.M, k.N, k.K, k.lda,
                                  k.ldb, k.ldc, int64_t(uint64_t(a) << 32 | b), int64_t(k.threads)});
  }
};

// A cached primitive with the memory descriptors it was made for.
// The scratchpad is the caller's (scratchpad_mode::user): with the library's mode, oneDNN built
// without DNNL_ENABLE_CONCURRENT_EXEC (Debian's) shares one scratchpad between executions, and
// the batched front-end runs this primitive on several OpenMP threads at once: results came out
// garbage under load. Each thread passes its own buffer instead.
struct Entry {
  dnnl::matmul prim;
  dnnl::memory::desc a, b, bias, c, scratch;
};

Entry make_entry(const Key& k) {
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  // op(A) (M, K): stored (M, K) with row stride lda, or (K, M) (column stride lda) when transposed.
  const dt in = k.f32 ? dt::f32 : dt::bf16;
  dnnl::memory::desc a({k.M, k.K}, in, k.ta ? dims{1, k.lda} : dims{k.lda, 1});
  dnnl::memory::desc b({k.K, k.N}, in, k.tb ? dims{1, k.ldb} : dims{k.ldb, 1});
  dnnl::memory::desc c({k.M, k.N}, dt::f32, dims{k.ldc, 1});
  dnnl::memory::desc bias = k.bias ? dnnl::memory::desc({1, k.N}, dt::f32, dims{k.N, 1}) : dnnl::memory::desc();
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (k.alpha != 1.f) attr.set_output_scales(0, {k.alpha});
  if (k.beta != 0.f) {
    dnnl::post_ops po;
    po.append_sum(k.beta);
    attr.set_post_ops(po);
  }
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, bias, c), attr, engine());
  (k.f32 ? g_created_f32 : g_created).fetch_add(1);
  return {dnnl::matmul(pd), a, b, bias, c, pd.scratchpad_desc()};
}

// The primitives made so far, one per key. Bounded: a translation run with token-budget batches
// meets new shapes at nearly every step (about 30 per step), and a primitive holds 55-170 KB, so
// at kMaxEntries the cache starts again (re-making one costs 0.2-0.3 ms; a fixed-shape run's few
// dozen come back within a step). Measured on the demo's training, 150 steps: peak RSS 577 MB with
// OpenBLAS; 768 MB with 1,024 entries here and oneDNN's own cache on, 599 MB with 256 and it off
// (dnnl_common.h). Entries are shared, so a product still running on another thread keeps its
// primitive alive through a reset.
constexpr size_t kMaxEntries = 256;

std::shared_ptr<const Entry> entry(const Key& k) {
  static std::mutex mu;
  static std::unordered_map<Key, std::shared_ptr<const Entry>, KeyHash> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(k);
  if (it != cache.end()) return it->second;
  if (cache.size() >= kMaxEntries) cache.clear();
  return cache.emplace(k, std::make_shared<const Entry>(make_entry(k))).first->second;
}

// Runs the product of `e` on A, B, C (f32 or bf16 operands, as the entry was made for), adding
// `bias` (N) to every row when the entry was made with one.
void execute(const Entry& e, const void* A, const void* B, float* C, const float* bias = nullptr) {
  dnnl::memory a(e.a, engine(), const_cast<void*>(A));
  dnnl::memory b(e.b, engine(), const_cast<void*>(B));
  dnnl::memory c(e.c, engine(), C);
  thread_local dnnl::stream stream(engine());
  thread_local std::vector<uint8_t> scratch_buf;  // this thread's scratchpad (see Entry)
  scratch_buf.resize(std::max<size_t>(scratch_buf.size(), e.scratch.get_size()));
  dnnl::memory scratch(e.scratch, engine(), scratch_buf.data());
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}, {DNNL_ARG_SCRATCHPAD, scratch}};
  if (bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(e.bias, engine(), const_cast<float*>(bias)));
  e.prim.execute(stream, args);
  stream.wait();
}

// The first "field : value" line of /proc/cpuinfo with this field ("model name", "vendor_id").
std::string read_cpuinfo(const std::string& field) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0) {
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

std::atomic<int64_t> g_weights_packed{0};

// The distinct weight layouts seen so far; a weight's index here is part of the primitive key.
int layout_id(const dnnl::memory::desc& md) {
  static std::mutex mu;
  static std::vector<dnnl::memory::desc> layouts;
  std::lock_guard<std::mutex> lock(mu);
  for (size_t i = 0; i < layouts.size(); ++i)
    if (layouts[i] == md) return int(i);
  layouts.push_back(md);
  return int(layouts.size() - 1);
}

// Products against a converted weight: one primitive per (M, N, K, weight layout, bias, ldo,
// threads).
struct PackedKey {
  int64_t M, N, K, ldo;
  int layout;
  bool bias;
  int threads;
  bool operator==(const PackedKey& o) const {
    return M == o.M && N == o.N && K == o.K && ldo == o.ldo && layout == o.layout && bias == o.bias &&
           threads == o.threads;
  }
};
struct PackedKeyHash {
  size_t operator()(const PackedKey& k) const {
    return dnnl_detail::hash_key({k.M, k.N, k.K, k.ldo, int64_t(k.layout), int64_t(k.bias), int64_t(k.threads)});
  }
};

struct PackedEntry {
  dnnl::matmul prim;
  dnnl::memory::desc x, bias, out, scratch;
};

}  // namespace

struct Bf16Weight {
  int64_t N = 0, K = 0;
  dnnl::memory::desc md;  // (K, N): W^T as matmul's weights argument, in the chosen layout
  int layout = 0;         // layout_id(md)
  // A wide weight on AMX (amx_padded_n): md's N columns are the first of n_padded, the rest zero;
  // md_padded (layout_padded) describes all n_padded. Otherwise n_padded == N and md_padded == md.
  int64_t n_padded = 0;
  dnnl::memory::desc md_padded;
  int layout_padded = 0;
  bool kn = false;        // made from B (K, N) rather than W (N, K) (make_bf16_weight)
  int64_t n_block = 0;    // make_bf16_weight's: > 0 when md is BA16a<n_block>b2a (see write_blocked)
  std::unique_ptr<uint8_t, BufferDeleter> data;
};

namespace {

// The layout matmul picks for the (K, N) weights given any layout, for products of `rows` rows (on
// AVX512_BF16 it does not depend on M; products at other M take it as given, or say they cannot).
dnnl::memory::desc blocked_layout(int64_t N, int64_t K, int64_t rows) {
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  dnnl::memory::desc x({rows, K}, dt::bf16, dims{K, 1});
  dnnl::memory::desc any({K, N}, dt::bf16, dnnl::memory::format_tag::any);
  dnnl::memory::desc b({1, N}, dt::f32, dims{N, 1});
  dnnl::memory::desc y({rows, N}, dt::f32, dims{N, 1});
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(x, any, b, y), engine()).weights_desc();
}

// oneDNN 2.6's AMX bf16 matmul writes output rows that do not start on 64-byte lines at 2/3 of its
// speed from about 256 rows on: x (1024, 256) @ W^T with W (30522, 256), BERT's vocabulary, takes
// 63-64 ms (the output's rows 122,088 bytes apart), where products of 256 rows against the weight
// padded with zero columns to 30720, into an aligned scratch whose first 30522 columns are copied
// out, take 43 ms; GPT-2's 50257: 106-111 -> 75-79 ms; N 8195 at 2048 rows 26.4 -> 18.8 ms. Padding
// to a multiple of 16, 64, 256 or 1024 came out level but for the extra columns (1024: 4100 takes
// 6.8 ms against 6.0-6.1); BENCHMARKS.md. Rows on 64-byte lines (N 8000, 16000, 32000) run at full
// speed as they are. So on AMX a wide weight (N >= 4096) whose output rows would be off the lines is
// laid out for N rounded up to 256, the extra columns zero.
int64_t amx_padded_n(int64_t N) {
  if (!dnnl_cpu_info().amx || N < 4096 || N % 16 == 0) return N;
  return (N + 255) / 256 * 256;
}

// The rows of one product against the padded columns; fewer rows use the weight as N columns.
constexpr int64_t kPaddedRows = 256;

// An unfilled (K, N) weight in the blocked layout oneDNN picks for products of `rows` rows, with
// N padded as amx_padded_n says; `plain` instead: W (N, K) row-major, never padded.
std::shared_ptr<Bf16Weight> allocate_weight(const char* who, int64_t N, int64_t K, int64_t rows, bool plain) {
  using dims = dnnl::memory::dims;
  auto out = std::make_shared<Bf16Weight>();
  out->N = N, out->K = K;
  out->n_padded = plain ? N : amx_padded_n(N);
  out->md_padded = plain ? dnnl::memory::desc({K, N}, dnnl::memory::data_type::bf16, dims{1, K})
                         : blocked_layout(out->n_padded, K, out->n_padded > N ? std::min(rows, kPaddedRows) : rows);
  out->md = out->md_padded;
  if (out->n_padded > N) {  // the same blocks seen as N columns (oneDNN's padded_dims keep the rest)
    dnnl_memory_desc_t d = out->md_padded.data;
    d.dims[1] = N;
    out->md = dnnl::memory::desc(d);
  }
  const size_t bytes = out->md_padded.get_size();
  out->data = {static_cast<uint8_t*>(buffer_alloc(bytes, BufferLife::kept)), BufferDeleter{bytes, BufferLife::kept}};
  QKV_CHECK(out->data != nullptr, who, "out of memory for ", bytes, " bytes");
  std::memset(out->data.get(), 0, bytes);  // the blocks' padding
  out->layout = layout_id(out->md);
  out->layout_padded = layout_id(out->md_padded);
  g_weights_packed.fetch_add(1);
  return out;
}

void check_weight_args(const char* who, bool kn, int64_t N, int64_t K, int64_t ld) {
  QKV_CHECK(N > 0 && K > 0 && ld >= (kn ? N : K), who, "expected a ", kn ? "(K, N)" : "(N, K)",
            " matrix with N, K > 0 and row stride >= its row length, got N = ", N, ", K = ", K, ", ld = ", ld);
  check_native(who);
}

}  // namespace

std::shared_ptr<const Bf16Weight> pack_bf16_weight(const float* w, int64_t N, int64_t K, int64_t ldw,
                                                   Bf16WeightLayout layout) {
  check_weight_args("pack_bf16_weight", false, N, K, ldw);
  auto w16 = std::make_unique<uint16_t[]>(size_t(N * K));
  round_to_bf16(w, N, K, ldw, w16.get());
  return pack_bf16_weight_bits(w16.get(), N, K, layout);
}

std::shared_ptr<const Bf16Weight> pack_bf16_weight_bits(const uint16_t* w, int64_t N, int64_t K,
                                                        Bf16WeightLayout layout) {
  check_weight_args("pack_bf16_weight_bits", false, N, K, K);
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  // W (N, K) row-major is W^T (K, N) with strides (1, K): the plain layout.
  const dnnl::memory::desc plain({K, N}, dt::bf16, dims{1, K});
  // 32 rows: a decoding batch.
  auto out = allocate_weight("pack_bf16_weight", N, K, 32, layout == Bf16WeightLayout::plain);
  if (layout == Bf16WeightLayout::plain) {
    std::memcpy(out->data.get(), w, out->md.get_size());
  } else {
    dnnl::memory from(plain, engine(), const_cast<uint16_t*>(w)), to(out->md, engine(), out->data.get());
    dnnl::stream s(engine());
    dnnl::reorder(from, to).execute(s, from, to);
    s.wait();
  }
  return out;
}

namespace {

// The N block of oneDNN's "BA16a<n>b2a" layout of a (K, N) bf16 weight (the one its bf16 matmul
// picks on AVX512_BF16: K in blocks of 32, N in blocks of n, inside a block pairs of consecutive k
// for each column), or 0 for any other layout.
int64_t ba16a_b2a_block(const dnnl::memory::desc& md) {
  const dnnl_memory_desc_t& d = md.data;
  if (d.ndims != 2 || d.format_kind != dnnl_blocked || d.offset0 != 0 || d.extra.flags != 0) return 0;
  const auto& b = d.format_desc.blocking;
  const bool ba = b.inner_nblks == 3 && b.inner_idxs[0] == 0 && b.inner_blks[0] == 16 && b.inner_idxs[1] == 1 &&
                  b.inner_idxs[2] == 0 && b.inner_blks[2] == 2;
  return ba ? b.inner_blks[1] : 0;
}

// w's blocks from f32 src, rounded by to_bf16: element (k, n) of the (K, N) matrix (src[k * ld + n]
// for B, src[n * ld + k] for W) goes to block (k / 32, n / nb), at (k % 32 / 2) * 2 nb + (n % nb) * 2
// + k % 2 inside it: each (k, k + 1) pair of a column is one 32-bit word. The padding (K to 32, N
// to nb) stays as make_bf16_weight zeroed it.
void write_blocked(const Bf16Weight& w, const float* src, int64_t ld) {
  const dnnl_memory_desc_t& d = w.md.data;
  const int64_t nb = w.n_block, ks = d.format_desc.blocking.strides[0], ns = d.format_desc.blocking.strides[1];
  const int64_t K = w.K, N = w.N, kblocks = (K + 31) / 32, nblocks = (N + nb - 1) / nb;
  auto* out = reinterpret_cast<uint16_t*>(w.data.get());
  auto pair = [](float lo, float hi) { return uint32_t(to_bf16(lo)) | uint32_t(to_bf16(hi)) << 16; };
#pragma omp parallel for collapse(2) schedule(static) if (K * N >= (int64_t(1) << 16) && !omp_in_parallel())
  for (int64_t kb = 0; kb < kblocks; ++kb)
    for (int64_t bn = 0; bn < nblocks; ++bn) {
      auto* blk = reinterpret_cast<uint32_t*>(out + kb * ks + bn * ns);  // (16, nb) words
      const int64_t k0 = kb * 32, n0 = bn * nb, kn = std::min<int64_t>(32, K - k0), nn = std::min(nb, N - n0);
      if (w.kn) {  // B: rows k and k + 1 side by side into a row of words
        for (int64_t r = 0; r < kn; r += 2) {
          const float* s0 = src + (k0 + r) * ld + n0;
          uint32_t* o = blk + (r / 2) * nb;
          if (r + 1 < kn) {
            const float* s1 = s0 + ld;
#pragma omp simd
            for (int64_t c = 0; c < nn; ++c) o[c] = pair(s0[c], s1[c]);
          } else {  // an odd last k: its pair's other half is padding
            for (int64_t c = 0; c < nn; ++c) o[c] = to_bf16(s0[c]);
          }
        }
      } else {  // W: a row n holds the column's k values, pairs adjacent
        int64_t c = 0;
#if defined(__AVX512F__)
        // A whole block's columns 16 at a time: 16 rows' 32 values rounded as vectors, then their
        // 16 x 16 words transposed into place, one 64-byte store per word row (the loop below
        // stores each word alone, 16 rows apart: 2.2% of a bf16 translation step, 5.5% of GPT cfg2's).
        if (kn == 32)
          for (; c + 16 <= nn; c += 16) {
            alignas(64) uint16_t half[16][32];
            for (int i = 0; i < 16; ++i) {
              const float* s = src + (n0 + c + i) * ld + k0;
#pragma omp simd
              for (int r = 0; r < 32; ++r) half[i][r] = to_bf16(s[r]);
            }
            transpose16(reinterpret_cast<const uint32_t*>(half), 16, blk + c, nb);  // word j of i: half[i][2j, 2j + 1]
          }
#endif
        for (; c < nn; ++c) {
          const float* s = src + (n0 + c) * ld + k0;
          uint32_t* o = blk + c;
          if (kn == 32) {  // a whole block: round the 32 values as a vector, then place the 16 words
            uint16_t half[32];
#pragma omp simd
            for (int r = 0; r < 32; ++r) half[r] = to_bf16(s[r]);
            uint32_t words[16];
            std::memcpy(words, half, sizeof words);  // word j = half[2j] | half[2j + 1] << 16 (little-endian x86)
            for (int j = 0; j < 16; ++j) o[j * nb] = words[j];
            continue;
          }
          int64_t r = 0;
          for (; r + 1 < kn; r += 2) o[(r / 2) * nb] = pair(s[r], s[r + 1]);
          if (r < kn) o[(r / 2) * nb] = to_bf16(s[r]);
        }
      }
    }
}

}  // namespace

std::shared_ptr<Bf16Weight> make_bf16_weight(int64_t N, int64_t K, bool kn, int64_t rows) {
  check_weight_args("make_bf16_weight", kn, N, K, kn ? N : K);
  auto out = allocate_weight("make_bf16_weight", N, K, std::max<int64_t>(rows, 1), false);
  out->kn = kn;
  out->n_block = ba16a_b2a_block(out->md);
  return out;
}

void refill_bf16_weight(Bf16Weight& w, const float* src, int64_t ld) {
  check_weight_args("refill_bf16_weight", w.kn, w.N, w.K, ld);
  if (w.n_block > 0) return write_blocked(w, src, ld);
  // Any other layout (AMX may pick its own): oneDNN's reorder, from the f32 source as (K, N): B
  // row-major, or W (N, K) row-major seen transposed.
  using dims = dnnl::memory::dims;
  const dnnl::memory::desc from_md({w.K, w.N}, dnnl::memory::data_type::f32, w.kn ? dims{ld, 1} : dims{1, ld});
  dnnl::memory from(from_md, engine(), const_cast<float*>(src)), to(w.md, engine(), w.data.get());
  thread_local dnnl::stream s(engine());
  dnnl::reorder(from, to).execute(s, from, to);
  s.wait();
}

const void* bf16_weight_data(const Bf16Weight& w) { return w.data.get(); }

size_t bf16_weight_bytes(const Bf16Weight& w) { return w.md.get_size(); }

int64_t bf16_weights_packed() { return g_weights_packed.load(); }
void count_bf16_weight_copy() { g_weights_packed.fetch_add(1); }

namespace {

// The primitive for products of M rows against a weight of layout `md` (layout id `layout`), N
// columns, output row stride ldo: made once per key and cached. Null where oneDNN has no kernel
// for this layout at this M (remembered, not asked again).
std::shared_ptr<const PackedEntry> packed_entry(int64_t M, int64_t N, int64_t K, int64_t ldo,
                                                const dnnl::memory::desc& md, int layout, bool bias, int threads) {
  const PackedKey key{M, N, K, ldo, layout, bias, threads};
  // Bounded like entry()'s cache: training products against a step's weight copies
  // (kernels/bf16_step_weights.h) meet a new M at nearly every step.
  static std::mutex mu;
  static std::unordered_map<PackedKey, std::shared_ptr<const PackedEntry>, PackedKeyHash> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  dnnl::memory::desc xd({M, K}, dt::bf16, dims{K, 1});
  dnnl::memory::desc bd = bias ? dnnl::memory::desc({1, N}, dt::f32, dims{N, 1}) : dnnl::memory::desc();
  dnnl::memory::desc yd({M, N}, dt::f32, dims{ldo, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  std::shared_ptr<const PackedEntry> made;
  try {  // the layout was chosen for one M; oneDNN takes it for every M on AVX512_BF16
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(xd, md, bd, yd), attr, engine());
    made = std::make_shared<const PackedEntry>(PackedEntry{dnnl::matmul(pd), xd, bd, yd, pd.scratchpad_desc()});
    g_created.fetch_add(1);
  } catch (const dnnl::error&) {
  }
  if (cache.size() >= kMaxEntries) cache.clear();
  return cache.emplace(key, std::move(made)).first->second;
}

// out = x16 (the entry's rows, bf16) @ the weight (data, of layout md) + bias.
void run_packed(const PackedEntry& e, const uint16_t* x16, const dnnl::memory::desc& md, void* data,
                const float* bias, float* out) {
  thread_local std::vector<uint8_t> scratch_buf;
  scratch_buf.resize(std::max<size_t>(scratch_buf.size(), e.scratch.get_size()));
  dnnl::memory xm(e.x, engine(), const_cast<uint16_t*>(x16)), wm(md, engine(), data);
  dnnl::memory ym(e.out, engine(), out);
  dnnl::memory sm(e.scratch, engine(), scratch_buf.data());
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, xm}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, ym}, {DNNL_ARG_SCRATCHPAD, sm}};
  if (bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(e.bias, engine(), const_cast<float*>(bias)));
  thread_local dnnl::stream stream(engine());
  e.prim.execute(stream, args);
  stream.wait();
}

// The first `rows` rows (a multiple of kPaddedRows) of a product against a padded weight
// (amx_padded_n): kPaddedRows at a time against all n_padded columns, into an aligned scratch whose
// first N columns are copied to out. Returns the rows done (0 where oneDNN has no kernel for that).
int64_t padded_products(int64_t rows, const uint16_t* x16, const Bf16Weight& w, const float* bias, float* out,
                        int64_t ldo, int threads) {
  const int64_t N = w.N, Np = w.n_padded, K = w.K;
  auto e = packed_entry(kPaddedRows, Np, K, Np, w.md_padded, w.layout_padded, bias != nullptr, threads);
  if (!e) return 0;
  // (kPaddedRows, Np), 64-byte aligned as every tensor; the caching allocator's block comes back
  // for the next product (31 MB for N 30522).
  Tensor scratch = Tensor::empty({kPaddedRows, Np});
  float* y = scratch.data<float>();
  thread_local std::vector<float> bias_padded;
  if (bias) {
    bias_padded.assign(size_t(Np), 0.f);
    std::copy(bias, bias + N, bias_padded.begin());
  }
  int64_t done = 0;
  for (; done + kPaddedRows <= rows; done += kPaddedRows) {
    run_packed(*e, x16 + done * K, w.md_padded, w.data.get(), bias ? bias_padded.data() : nullptr, y);
#pragma omp parallel for schedule(static) num_threads(threads) if (!omp_in_parallel())
    for (int64_t i = 0; i < kPaddedRows; ++i)
      std::memcpy(out + (done + i) * ldo, y + i * Np, size_t(N) * sizeof(float));
  }
  return done;
}

}  // namespace

bool try_gemm_bf16_packed(int64_t M, const float* x, int64_t ldx, const Bf16Weight& w, const float* bias, float* out,
                          int64_t ldo) {
  const int64_t N = w.N, K = w.K;
  QKV_CHECK(M >= 0 && ldx >= K && ldo >= N, "gemm_bf16_packed", "expected M >= 0, ldx >= K = ", K, ", ldo >= N = ", N,
            ", got M = ", M, ", ldx = ", ldx, ", ldo = ", ldo);
  if (M == 0) return true;
  check_native("gemm_bf16_packed");
  const int threads = dnnl_detail::product_threads(M, N, K);
  OmpThreadsScope team(threads);
  // The product of the rows left after the padded ones (all of them for most weights, and where
  // the output's rows are on 64-byte lines anyway): checked first, so that a false return has
  // written nothing.
  const bool aligned_out = ldo % 16 == 0 && reinterpret_cast<uintptr_t>(out) % 64 == 0;
  const int64_t padded_rows = w.n_padded > N && !aligned_out ? M - M % kPaddedRows : 0, rest = M - padded_rows;
  std::shared_ptr<const PackedEntry> e;
  if (rest > 0 && !(e = packed_entry(rest, N, K, ldo, w.md, w.layout, bias != nullptr, threads))) return false;
  thread_local std::vector<uint16_t> xbuf;
  const uint16_t* x16 = Bf16RoundedOperand::lookup(x, M, K, ldx);  // rounded once for several products
  if (x16 == nullptr) {
    xbuf.resize(std::max(xbuf.size(), size_t(M * K)));
    round_to_bf16(x, M, K, ldx, xbuf.data());
    x16 = xbuf.data();
  }
  int64_t done = padded_rows > 0 ? padded_products(padded_rows, x16, w, bias, out, ldo, threads) : 0;
  if (done < M) {  // the rest, or every row where the padded product has no kernel
    if (done == 0 && rest != M && !(e = packed_entry(M, N, K, ldo, w.md, w.layout, bias != nullptr, threads)))
      return false;
    run_packed(*e, x16 + done * K, w.md, w.data.get(), bias, out + done * ldo);
  }
  return true;
}

void gemm_bf16_packed(int64_t M, const float* x, int64_t ldx, const Bf16Weight& w, const float* bias, float* out,
                      int64_t ldo) {
  QKV_CHECK(try_gemm_bf16_packed(M, x, ldx, w, bias, out, ldo), "gemm_bf16_packed",
            "oneDNN has no bf16 matmul for the converted weight's layout at M = ", M, ", N = ", w.N, ", K = ", w.K,
            " on '", dnnl_cpu_info().isa, "'; use precision fp32");
}

void check_precision_supported(MatmulPrecision p, const char* who) {
  if (p == MatmulPrecision::bf16) {
    check_native(who);
    bf16_products();  // resolved here, at a command's start, rather than inside a parallel region
  }
  if (p == MatmulPrecision::int8)
    QKV_CHECK(int8_supported(), who,
              "int8 needs a CPU with AVX512-VNNI or AMX (exact int32 sums) or qkv built for AVX2, but oneDNN's "
              "ISA here ('", dnnl_cpu_info().isa, "') has neither and the build no AVX2: use precision fp32");
}

std::string DnnlCpuInfo::bf16_kernel() const {
  if (amx) return "AMX";
  if (avx512_bf16) return "AVX512_BF16";
  return "none (bf16 unavailable: no AMX or AVX512_BF16 in oneDNN's '" + isa + "')";
}

const DnnlCpuInfo& dnnl_cpu_info() {
  static const DnnlCpuInfo info = [] {
    DnnlCpuInfo i;
    i.cpu_model = read_cpuinfo("model name");
    i.vendor = read_cpuinfo("vendor_id");
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
  if (K == 0 || alpha == 0.f) {  // an empty sum, or BLAS's rule: A and B not read (a NaN there is not seen)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.f ? 0.f : beta * C[i * ldc + j];
    return;
  }
  QKV_CHECK(lda >= (ta ? M : K), "gemm (bf16)", "lda = ", lda, " is below the stored row length ", ta ? M : K);
  QKV_CHECK(ldb >= (tb ? K : N), "gemm (bf16)", "ldb = ", ldb, " is below the stored row length ", tb ? K : N);
  check_native("gemm (bf16)");
  execute(*entry(Key{false, ta, tb, M, N, K, lda, ldb, ldc, alpha, beta, omp_get_max_threads(), false}), A, B, C);
}

bool gemm_f32_onednn_available() { return dnnl_cpu_info().avx512; }

int64_t gemm_f32_onednn_primitives_created() { return g_created_f32.load(); }

void gemm_f32_onednn(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                     const float* B, int64_t ldb, float beta, float* C, int64_t ldc, const float* bias) {
  // The front-end (gemm.cpp) has checked the sizes and leading dimensions and chosen this backend.
  execute(*entry(Key{true, ta, tb, M, N, K, lda, ldb, ldc, alpha, beta, omp_get_max_threads(), bias != nullptr}), A,
          B, C, bias);
}

}  // namespace qkv::kernels
