// int8 products over oneDNN's matmul (u8 x s8 -> s32); the scheme is in kernels/int8.h.
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <omp.h>
#include "dnnl_common.h"
#include "gemm_int8_rows.h"
#include "qkv/kernels/bf16.h"
#include "qkv/kernels/int8.h"
#include "qkv/kernels/parallel.h"
#include "qkv/util/buffer.h"
#include "qkv/util/error.h"

namespace qkv::kernels {

using dnnl_detail::engine;
using dnnl_detail::OmpThreadsScope;

bool int8_native() {
  static const bool native = [] {
    const auto isa = unsigned(dnnl::get_effective_cpu_isa());
    auto has = [&](dnnl_cpu_isa_t want) { return (isa & unsigned(want)) == unsigned(want); };
    return has(dnnl_cpu_isa_avx512_core_vnni) || has(dnnl_cpu_isa_avx512_core_amx);
  }();
  return native;
}

bool int8_own_kernel_built() { return int8_rows_kernel_isa() != nullptr; }
bool int8_supported() { return int8_own_kernel_built() || int8_native(); }
const char* int8_kernel() {
  if (!int8_native()) return int8_rows_kernel_isa();
  return dnnl_cpu_info().amx ? "AMX" : "AVX512-VNNI";
}

namespace {

// The environment variable `name` as a count >= 0 (`what` names it in the error), or fallback()
// when it is unset or empty.
template <typename Fallback>
int64_t count_from_env(const char* name, const char* what, Fallback fallback) {
  const char* env = std::getenv(name);
  if (env == nullptr || *env == '\0') return fallback();
  char* end = nullptr;
  const long long v = std::strtoll(env, &end, 10);
  QKV_CHECK(end != env && *end == '\0' && v >= 0, name, "expected ", what, ", got '", env, "'");
  return int64_t(v);
}

std::atomic<int64_t>& min_weight_elements() {
  static std::atomic<int64_t> n =
      count_from_env("QKV_INT8_MIN_WEIGHT", "a count of weight values >= 0", [] { return int64_t(1) << 17; });
  return n;
}

std::atomic<int64_t>& small_weight_min_rows() {
  static std::atomic<int64_t> n = count_from_env("QKV_INT8_SMALL_WEIGHT_ROWS", "a row count >= 0 (0: never)", [] {
    const auto isa = unsigned(dnnl::get_effective_cpu_isa());
    const auto amx = unsigned(dnnl_cpu_isa_avx512_core_amx);
    return (isa & amx) == amx ? int64_t(32) : int64_t(0);
  });
  return n;
}

std::atomic<int64_t>& rows_max_batch() {
  static std::atomic<int64_t> n = count_from_env("QKV_INT8_ROWS_BATCH", "a row count >= 1", [] { return int64_t(4); });
  return n;
}

void check_supported(const char* where) {
  QKV_CHECK(int8_supported(), where,
            "int8 needs AVX512-VNNI or AMX (oneDNN's exact int32 sums), or qkv built for AVX2 (its own "
            "kernel), but this CPU or build has none of them. Use precision fp32");
}

int8_t quantize_weight(float w, float inv) { return int8_t(std::nearbyint(w * inv)); }

std::atomic<int64_t> g_weights_packed{0};  // pack_int8_weight calls (int8_weights_packed)

}  // namespace

int64_t int8_weights_packed() { return g_weights_packed.load(); }

int64_t int8_min_weight_elements() { return min_weight_elements().load(); }
void set_int8_min_weight_elements(int64_t n) {
  QKV_CHECK(n >= 0, "set_int8_min_weight_elements", "expected a count >= 0, got ", n);
  min_weight_elements().store(n);
}
bool int8_pays(int64_t N, int64_t K) { return N > 0 && K > 0 && N * K >= int8_min_weight_elements(); }

int64_t int8_small_weight_min_rows() { return small_weight_min_rows().load(); }
void set_int8_small_weight_min_rows(int64_t rows) {
  QKV_CHECK(rows >= 0, "set_int8_small_weight_min_rows", "expected a row count >= 0, got ", rows);
  small_weight_min_rows().store(rows);
}
int64_t int8_rows_max_batch() { return std::max<int64_t>(1, rows_max_batch().load()); }
void set_int8_rows_max_batch(int64_t rows) {
  QKV_CHECK(rows >= 1, "set_int8_rows_max_batch", "expected a row count >= 1, got ", rows);
  rows_max_batch().store(rows);
}

bool int8_pays_from_rows(int64_t N, int64_t K) {
  return !int8_pays(N, K) && N > 0 && K > 0 && N * K >= (int64_t(1) << 16) && int8_small_weight_min_rows() > 0;
}

struct Int8Weight {
  int64_t N = 0, K = 0;
  // (K, N): W^T as matmul's weights. Blocked: oneDNN's layout for this CPU, its values in `data`.
  // Rows: plain, over `rows` (what oneDNN reads for a batch of int8_rows_max_batch() rows or more).
  dnnl::memory::desc md;
  std::unique_ptr<uint8_t, BufferDeleter> data;  // blocked only
  const int8_t* rows = nullptr;                  // rows only: (N, K) s8, row stride ldq
  int64_t ldq = 0;
  std::shared_ptr<const void> keep;              // rows only: what owns `rows`
  std::vector<float> scale;                      // sw (N)
  std::vector<int32_t> zero_point_sum;           // c[n] = 128 sum_k qw[n,k]
  const void* values() const { return rows ? static_cast<const void*>(rows) : data.get(); }
};

float quantize_row_u8(const float* x, int64_t K, uint8_t* q) {
  if (K <= 0) return 0.f;
  // max |x| as the largest bit pattern with the sign cleared: for finite floats the order of the
  // patterns is the order of the values, and any pattern from 0x7F800000 up is an inf or a NaN.
  // An integer max vectorises (a float max with an isfinite test did not: 10% of int8 greedy
  // decoding's samples).
  uint32_t top = 0;
#pragma omp simd reduction(max : top)
  for (int64_t i = 0; i < K; ++i) {
    uint32_t u;
    std::memcpy(&u, x + i, sizeof u);
    u &= 0x7FFFFFFFu;
    top = u > top ? u : top;
  }
  float amax;
  std::memcpy(&amax, &top, sizeof amax);
  if (top >= 0x7F800000u) amax = NAN;
  if (!(amax > 0.f)) {  // zeros (scale 0), or NaN / inf (the scale carries NaN to every output)
    std::memset(q, 128, size_t(K));
    return amax == 0.f ? 0.f : NAN;
  }
  const float inv = 127.f / amax;
  if (!std::isfinite(inv)) {  // amax below 127 / FLT_MAX (denormal rows): the quotient taken in double
    for (int64_t k = 0; k < K; ++k) q[k] = uint8_t(int32_t(std::nearbyint(double(x[k]) * (127.0 / amax))) + 128);
    return amax / 127.f;
  }
  int64_t k = 0;
#if defined(__AVX512F__)
  const __m512 vinv = _mm512_set1_ps(inv);
  const __m512i v128 = _mm512_set1_epi32(128);
  constexpr __mmask16 all = 0xFFFF;  // the masked forms: GCC 12 warns on the unmasked ones' undefined lanes
  for (; k + 16 <= K; k += 16) {  // cvtps_epi32 rounds by the current mode: to nearest even
    __m512i i = _mm512_add_epi32(_mm512_maskz_cvtps_epi32(all, _mm512_mul_ps(_mm512_loadu_ps(x + k), vinv)), v128);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + k), _mm512_maskz_cvtepi32_epi8(all, i));
  }
#endif
  for (; k < K; ++k) q[k] = uint8_t(int32_t(std::nearbyint(x[k] * inv)) + 128);
  return amax / 127.f;
}

void quantize_int8_rows(const float* w, int64_t N, int64_t K, int64_t ldw, int8_t* q, int64_t ldq, float* scale,
                        int32_t* zero_point_sum) {
  for (int64_t n = 0; n < N; ++n) {
    const float* row = w + n * ldw;
    float amax = 0.f;
    for (int64_t k = 0; k < K; ++k) {
      QKV_CHECK(std::isfinite(row[k]), "pack_int8_weight", "weight row ", n, " has a non-finite value at column ", k);
      amax = std::max(amax, std::fabs(row[k]));
    }
    const float inv = amax > 0.f ? 127.f / amax : 0.f;
    int32_t sum = 0;
    int8_t* qn = q + n * ldq;
    if (std::isfinite(inv)) {
      for (int64_t k = 0; k < K; ++k) sum += (qn[k] = quantize_weight(row[k], inv));
    } else {  // amax below 127 / FLT_MAX (the float quotient was inf, and int8_t(inf) undefined): in double
      for (int64_t k = 0; k < K; ++k) sum += (qn[k] = int8_t(std::nearbyint(double(row[k]) * (127.0 / amax))));
    }
    scale[n] = amax / 127.f;
    zero_point_sum[n] = 128 * sum;
  }
}

namespace {

// A weight of N rows of K values: shape checks, and the scales' room.
std::shared_ptr<Int8Weight> new_weight(int64_t N, int64_t K, int64_t ld, const char* where) {
  QKV_CHECK(N > 0 && K > 0 && ld >= K, where,
            "expected a (N, K) weight with N, K > 0 and row stride >= K, got N = ", N, ", K = ", K,
            ", row stride ", ld);
  QKV_CHECK(K <= (int64_t(1) << 16), where, "K = ", K,
            " is above 65536: int32 sums of K products of 255 x 127 could overflow");
  check_supported(where);
  auto out = std::make_shared<Int8Weight>();
  out->N = N, out->K = K;
  out->scale.resize(size_t(N));
  out->zero_point_sum.resize(size_t(N));
  return out;
}

dnnl::memory::desc plain_desc(int64_t N, int64_t K, int64_t ldq) {  // W (N, K) row-major is W^T (K, N)
  return dnnl::memory::desc({K, N}, dnnl::memory::data_type::s8, dnnl::memory::dims{1, ldq});
}

}  // namespace

namespace {

// out's values: the (N, K) s8 rows q (row stride ldq) reordered into oneDNN's blocked layout for
// this CPU (the one its u8 x s8 matmul picks for W^T at 32 rows: a decoding batch).
void fill_blocked(Int8Weight& out, const int8_t* q, int64_t ldq, const char* where) {
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  const int64_t N = out.N, K = out.K;
  {
    dnnl::memory::desc x({32, K}, dt::u8, dims{K, 1});
    dnnl::memory::desc any({K, N}, dt::s8, dnnl::memory::format_tag::any);
    dnnl::memory::desc y({32, N}, dt::s32, dims{N, 1});
    out.md = dnnl::matmul::primitive_desc(dnnl::matmul::desc(x, any, y), engine()).weights_desc();
  }
  const size_t bytes = out.md.get_size();
  out.data = {static_cast<uint8_t*>(buffer_alloc(bytes, BufferLife::kept)), BufferDeleter{bytes, BufferLife::kept}};
  QKV_CHECK(out.data != nullptr, where, "out of memory for ", bytes, " bytes");
  dnnl::memory src(plain_desc(N, K, ldq), engine(), const_cast<int8_t*>(q)), dst(out.md, engine(), out.data.get());
  dnnl::stream s(engine());
  dnnl::reorder(src, dst).execute(s, src, dst);
  s.wait();
}

}  // namespace

std::shared_ptr<const Int8Weight> pack_int8_weight(const float* w, int64_t N, int64_t K, int64_t ldw) {
  if (!int8_native()) return pack_int8_weight_rows(w, N, K, ldw);  // qkv's own kernel reads the rows
  auto out = new_weight(N, K, ldw, "pack_int8_weight");
  std::vector<int8_t> qw(size_t(N * K));  // (N, K) row-major, reordered into the blocked layout
  quantize_int8_rows(w, N, K, ldw, qw.data(), K, out->scale.data(), out->zero_point_sum.data());
  fill_blocked(*out, qw.data(), K, "pack_int8_weight");
  g_weights_packed.fetch_add(1);
  return out;
}

std::shared_ptr<const Int8Weight> int8_weight_blocked_from_rows(const Int8Weight& rows) {
  QKV_CHECK(rows.rows != nullptr, "int8_weight_blocked_from_rows", "expected a weight in the rows form");
  if (!int8_native())  // no blocked form without oneDNN's kernels: the same rows again
    return int8_weight_over_rows(rows.rows, rows.ldq, rows.scale.data(), rows.zero_point_sum.data(), rows.N, rows.K,
                                 rows.keep);
  auto out = new_weight(rows.N, rows.K, rows.ldq, "int8_weight_blocked_from_rows");
  out->scale = rows.scale;
  out->zero_point_sum = rows.zero_point_sum;
  fill_blocked(*out, rows.rows, rows.ldq, "int8_weight_blocked_from_rows");
  return out;
}

std::shared_ptr<const Int8Weight> pack_int8_weight_rows(const float* w, int64_t N, int64_t K, int64_t ldw) {
  auto out = new_weight(N, K, ldw, "pack_int8_weight_rows");
  const size_t bytes = size_t(N * K);
  std::shared_ptr<int8_t> q(static_cast<int8_t*>(buffer_alloc(bytes, BufferLife::kept)),
                            BufferDeleter{bytes, BufferLife::kept});
  QKV_CHECK(q != nullptr, "pack_int8_weight_rows", "out of memory for ", bytes, " bytes");
  quantize_int8_rows(w, N, K, ldw, q.get(), K, out->scale.data(), out->zero_point_sum.data());
  out->rows = q.get(), out->ldq = K, out->keep = q;
  out->md = plain_desc(N, K, K);
  g_weights_packed.fetch_add(1);
  return out;
}

std::shared_ptr<const Int8Weight> int8_weight_over_rows(const int8_t* q, int64_t ldq, const float* scale,
                                                        const int32_t* zero_point_sum, int64_t N, int64_t K,
                                                        std::shared_ptr<const void> keep) {
  auto out = new_weight(N, K, ldq, "int8_weight_over_rows");
  for (int64_t n = 0; n < N; ++n)  // the scheme's range, which the kernels' exactness rests on (gemm_int8_rows.cpp)
    QKV_CHECK(std::memchr(q + n * ldq, 0x80, size_t(K)) == nullptr, "int8_weight_over_rows", "weight row ", n,
              " holds -128: quantized weights lie in [-127, 127]");
  std::copy(scale, scale + N, out->scale.begin());
  std::copy(zero_point_sum, zero_point_sum + N, out->zero_point_sum.begin());
  out->rows = q, out->ldq = ldq, out->keep = std::move(keep);
  out->md = plain_desc(N, K, ldq);
  return out;
}

namespace {

struct Key {
  int64_t M, N, K;
  int threads;
  int64_t ldq;  // the rows form's row stride (plain weights), or 0 (oneDNN's blocked layout)
  bool operator==(const Key& o) const {
    return M == o.M && N == o.N && K == o.K && threads == o.threads && ldq == o.ldq;
  }
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    return dnnl_detail::hash_key({k.M, k.N, k.K, int64_t(k.threads), k.ldq});
  }
};
struct Entry {
  dnnl::matmul prim;
  dnnl::memory::desc x, w, y, scratch;
};

// One primitive per (M, N, K, threads, layout). The blocked layout pack_int8_weight picks depends
// only on N, K and the CPU, so every blocked weight of a shape shares it (checked).
const Entry& entry(const Key& key, const dnnl::memory::desc& md) {
  static std::mutex mu;
  static std::unordered_map<Key, Entry, KeyHash> cache;  // node-based: references stay valid
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it == cache.end()) {
    using dt = dnnl::memory::data_type;
    using dims = dnnl::memory::dims;
    dnnl::memory::desc xd({key.M, key.K}, dt::u8, dims{key.K, 1});
    dnnl::memory::desc yd({key.M, key.N}, dt::s32, dims{key.N, 1});
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // per-thread buffers, as gemm_dnnl.cpp
    dnnl::matmul::primitive_desc pd;
    try {
      pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(xd, md, yd), attr, engine());
    } catch (const dnnl::error& err) {
      fail("gemm_int8_packed", "oneDNN has no u8 x s8 matmul for the packed weight's layout at M = ", key.M,
           ", N = ", key.N, ", K = ", key.K, " (", err.what(), "); use precision fp32");
    }
    it = cache.emplace(key, Entry{dnnl::matmul(pd), xd, md, yd, pd.scratchpad_desc()}).first;
  }
  QKV_CHECK(it->second.w == md, "gemm_int8_packed", "a weight of shape (", key.N, ", ", key.K,
            ") is in another layout than the first one packed: pack every weight with pack_int8_weight");
  return it->second;
}

// out[n] = fma(float(acc[n] - c[n]), sx * sw[n], bias[n]) for one row.
void dequantize_row(const int32_t* acc, const int32_t* c, float sx, const float* sw, const float* bias, int64_t N,
                    float* out) {
  int64_t n = 0;
#if defined(__AVX512F__)
  const __m512 vsx = _mm512_set1_ps(sx);
  for (; n + 16 <= N; n += 16) {
    const __m512 v = _mm512_maskz_cvtepi32_ps(
        0xFFFF, _mm512_sub_epi32(_mm512_loadu_si512(acc + n), _mm512_loadu_si512(c + n)));
    const __m512 s = _mm512_mul_ps(vsx, _mm512_loadu_ps(sw + n));
    const __m512 b = bias ? _mm512_loadu_ps(bias + n) : _mm512_setzero_ps();
    _mm512_storeu_ps(out + n, _mm512_fmadd_ps(v, s, b));
  }
#endif
  for (; n < N; ++n) out[n] = std::fma(float(acc[n] - c[n]), sx * sw[n], bias ? bias[n] : 0.f);
}

}  // namespace

void gemm_int8_packed(int64_t M, const float* x, int64_t ldx, const Int8Weight& w, const float* bias, float* out,
                      int64_t ldo) {
  const int64_t N = w.N, K = w.K;
  QKV_CHECK(M >= 0 && ldx >= K && ldo >= N, "gemm_int8_packed", "expected M >= 0, ldx >= K = ", K,
            ", ldo >= N = ", N, ", got M = ", M, ", ldx = ", ldx, ", ldo = ", ldo);
  if (M == 0) return;
  check_supported("gemm_int8_packed");
  // qkv's kernel: below int8_rows_max_batch() rows, and every batch where oneDNN's would saturate.
  const bool own_kernel = w.rows != nullptr && (M < int8_rows_max_batch() || !int8_native());
  const int threads = own_kernel ? omp_get_max_threads() : dnnl_detail::product_threads(M, N, K);
  OmpThreadsScope team(threads);
  thread_local std::vector<uint8_t> xq, scratch_buf;
  thread_local std::vector<float> sx;
  thread_local std::vector<int32_t> acc;
  xq.resize(std::max(xq.size(), size_t(M * K)));
  sx.resize(std::max(sx.size(), size_t(M)));
  // Rows are independent: the team quantizes and dequantizes them in parallel (the same bits for
  // any team size). Serial, these loops kept BERT's int8 embedding at 1.5 of 2 cores busy.
  uint8_t* const xqp = xq.data();
  float* const sxp = sx.data();
#pragma omp parallel for num_threads(threads) if (threads > 1 && M > 1) schedule(static)
  for (int64_t m = 0; m < M; ++m) sxp[m] = quantize_row_u8(x + m * ldx, K, xqp + m * K);
  if (own_kernel) {  // the same exact sums, read from the rows (gemm_int8_rows.h)
    const int64_t min_macs = idle_threads_spin() ? (int64_t(1) << 16) : (int64_t(1) << 22);  // as packed_linear
    int8_rows_product(M, xqp, sxp, w.rows, w.ldq, N, K, w.scale.data(), w.zero_point_sum.data(), bias, out, ldo,
                      min_macs);
    return;
  }
  const Entry& e = entry(Key{M, N, K, threads, w.rows ? w.ldq : 0}, w.md);
  acc.resize(std::max(acc.size(), size_t(M * N)));
  scratch_buf.resize(std::max<size_t>(scratch_buf.size(), e.scratch.get_size()));
  dnnl::memory xm(e.x, engine(), xq.data()), wm(w.md, engine(), const_cast<void*>(w.values()));
  dnnl::memory ym(e.y, engine(), acc.data()), sm(e.scratch, engine(), scratch_buf.data());
  thread_local dnnl::stream stream(engine());
  e.prim.execute(stream, {{DNNL_ARG_SRC, xm}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, ym}, {DNNL_ARG_SCRATCHPAD, sm}});
  stream.wait();
  const int32_t* const accp = acc.data();
#pragma omp parallel for num_threads(threads) if (threads > 1) schedule(static)
  for (int64_t m = 0; m < M; ++m)
    dequantize_row(accp + m * N, w.zero_point_sum.data(), sxp[m], w.scale.data(), bias, N, out + m * ldo);
}

void int8_weight_values(const Int8Weight& w, int8_t* q, float* scales) {
  if (w.rows) {
    for (int64_t n = 0; n < w.N; ++n) std::memcpy(q + n * w.K, w.rows + n * w.ldq, size_t(w.K));
  } else {
    dnnl::memory src(w.md, engine(), w.data.get()), dst(plain_desc(w.N, w.K, w.K), engine(), q);
    dnnl::stream s(engine());
    dnnl::reorder(src, dst).execute(s, src, dst);
    s.wait();
  }
  std::memcpy(scales, w.scale.data(), w.scale.size() * sizeof(float));
}
int64_t int8_weight_rows(const Int8Weight& w) { return w.N; }
int64_t int8_weight_cols(const Int8Weight& w) { return w.K; }
size_t int8_weight_bytes(const Int8Weight& w) { return w.rows ? size_t(w.N * w.K) : w.md.get_size(); }
bool int8_weight_in_rows(const Int8Weight& w) { return w.rows != nullptr; }

}  // namespace qkv::kernels
