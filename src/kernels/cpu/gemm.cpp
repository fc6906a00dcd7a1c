// GEMM front-end over OpenBLAS (cblas_sgemm / cblas_dgemm) and the batched, broadcast matmul.
// f32 products go to the bf16 backend (gemm_dnnl.cpp) when the calling thread's matmul precision
// is bf16 (kernels/bf16.h); the front-end reads it once per call and passes it to its workers.
// Large fp32 ones go to oneDNN's f32 matmul (gemm_dnnl.cpp) where it measured faster (kernels/gemm.h).
#include "qkv/kernels/gemm.h"

#include "qkv/kernels/bf16.h"
#include "qkv/kernels/bf16_step_weights.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace qkv::kernels {
namespace {

std::atomic<int64_t> g_operand_copies{0};

// True for "onednn", false for "openblas"; anything else, or onednn without AVX-512, throws naming `who`.
bool parse_f32_backend(const std::string& v, const char* who) {
  QKV_CHECK(v == "onednn" || v == "openblas", who, "expected onednn or openblas, got '", v, "'");
  QKV_CHECK(v == "openblas" || gemm_f32_onednn_available(), who, "onednn needs AVX-512 in oneDNN's ISA ('",
            dnnl_cpu_info().isa, "' here): use openblas");
  return v == "onednn";
}

// f32_gemm_backend(): onednn unless QKV_F32_GEMM says openblas or oneDNN has no AVX-512 here.
// Resolved at the first large f32 product (a bad QKV_F32_GEMM then throws to that caller).
std::atomic<bool>& f32_onednn() {
  static std::atomic<bool> flag{[] {
    const char* env = std::getenv("QKV_F32_GEMM");
    return env == nullptr || *env == '\0' ? gemm_f32_onednn_available() : parse_f32_backend(env, "QKV_F32_GEMM");
  }()};
  return flag;
}

// Per-GEMM work (M*N*K multiply-adds) up to which a batch runs one single-threaded GEMM per
// OpenMP thread rather than one multi-threaded GEMM after another (thread start-up and the
// per-call partitioning cost more than they gain on matrices this small).
constexpr int64_t kSmallGemm = int64_t(1) << 22;

int blas_int(int64_t v, const char* what) {
  QKV_CHECK(v >= 0 && v <= INT_MAX, "gemm", what, " = ", v, " does not fit BLAS's 32-bit int");
  return int(v);
}

void check_ld(bool trans, int64_t rows, int64_t cols, int64_t ld, const char* what) {
  // Row-major: the stored matrix is (rows, cols), or (cols, rows) when transposed.
  int64_t need = std::max<int64_t>(1, trans ? rows : cols);
  QKV_CHECK(ld >= need, "gemm", what, " = ", ld, " is below the stored row length ", need);
}

template <typename T>
void scale_c(int64_t M, int64_t N, T beta, T* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == T(0) ? T(0) : beta * C[i * ldc + j];
}

// True when an f32 product of this shape goes to oneDNN (the rule in kernels/gemm.h).
bool routes_to_onednn(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha) {
  static const bool amd = dnnl_cpu_info().vendor == "AuthenticAMD";
  const bool plain_pays = N <= f32_onednn_max_plain_n && (ta || !amd || K <= f32_onednn_amd_nn_max_k);
  const bool pays = (tb || plain_pays) && M * N * K >= f32_onednn_min_macs;
  return pays && alpha != 0.f && !omp_in_parallel() && f32_onednn().load(std::memory_order_relaxed);
}

// C = alpha op(A) op(B) + beta C, plus `bias` (N) on every row when not null (with beta 0: a
// Linear). A product that goes to oneDNN adds the bias in its epilogue; otherwise C starts as the
// bias rows and the product runs with beta = 1.
template <typename T>
void gemm_impl(MatmulPrecision prec, bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
               int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc, const T* bias = nullptr) {
  if (M == 0 || N == 0) return;
  check_ld(false, M, N, ldc, "ldc");
  if constexpr (std::is_same_v<T, float>) {  // against a training step's bf16 weight copy, if B is one
    if (prec == MatmulPrecision::bf16 && !ta && alpha == 1.f && beta == 0.f && K > 0) {
      check_ld(false, M, K, lda, "lda");
      check_ld(tb, K, N, ldb, "ldb");
      if (gemm_bf16_step_weight(tb, M, N, K, A, lda, B, ldb, C, ldc, bias)) return;
    }
  }
  if (bias) {
    if constexpr (std::is_same_v<T, float>) {
      if (prec != MatmulPrecision::bf16 && K > 0 && routes_to_onednn(ta, tb, M, N, K, alpha)) {
        check_ld(ta, M, K, lda, "lda");
        check_ld(tb, K, N, ldb, "ldb");
        return gemm_f32_onednn(ta, tb, M, N, K, alpha, A, lda, B, ldb, T(0), C, ldc, bias);
      }
    }
#pragma omp parallel for schedule(static) if (M * N >= (int64_t(1) << 18))
    for (int64_t i = 0; i < M; ++i) std::memcpy(C + i * ldc, bias, size_t(N) * sizeof(T));
    beta = T(1);
  }
  if (K == 0) {  // an empty sum: C = beta * C (BLAS would reject lda = 0 here)
    scale_c(M, N, beta, C, ldc);
    return;
  }
  check_ld(ta, M, K, lda, "lda");
  check_ld(tb, K, N, ldb, "ldb");
  if constexpr (std::is_same_v<T, float>) {
    if (prec == MatmulPrecision::bf16) return gemm_bf16(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    if (routes_to_onednn(ta, tb, M, N, K, alpha))
      return gemm_f32_onednn(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  }
  CBLAS_TRANSPOSE fa = ta ? CblasTrans : CblasNoTrans, fb = tb ? CblasTrans : CblasNoTrans;
  int m = blas_int(M, "M"), n = blas_int(N, "N"), k = blas_int(K, "K");
  int la = blas_int(lda, "lda"), lb = blas_int(ldb, "ldb"), lc = blas_int(ldc, "ldc");
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, fa, fb, m, n, k, alpha, A, la, B, lb, beta, C, lc);
  else
    cblas_dgemm(CblasRowMajor, fa, fb, m, n, k, alpha, A, la, B, lb, beta, C, lc);
}

// One operand of batched_matmul: its (R, C) matrices' BLAS layout and its batch strides
// aligned to the broadcast batch (0 on broadcast axes).
struct Operand {
  Tensor t;
  int64_t rows = 0, cols = 0, rs = 0, cs = 0;
  BlasLayout layout;
  std::vector<int64_t> bstride;
};

Operand make_operand(const Tensor& t_in, const Shape& batch) {
  Operand o;
  o.t = t_in;
  int nd = t_in.ndim();
  o.rows = t_in.shape()[nd - 2];
  o.cols = t_in.shape()[nd - 1];
  o.layout = blas_layout(o.rows, o.cols, t_in.strides()[nd - 2], t_in.strides()[nd - 1]);
  if (!o.layout.ok) {  // e.g. a stride-2 slice or a broadcast row: GEMM needs a real matrix
    o.t = t_in.clone();
    g_operand_copies.fetch_add(1);
    o.layout = blas_layout(o.rows, o.cols, o.t.strides()[nd - 2], o.t.strides()[nd - 1]);
  }
  o.rs = o.t.strides()[nd - 2];
  o.cs = o.t.strides()[nd - 1];
  int nb = batch.ndim(), lead = nb - (nd - 2);
  o.bstride.assign(size_t(nb), 0);
  for (int d = 0; d < nb; ++d) {
    int td = d - lead;
    if (td >= 0 && o.t.shape()[td] != 1) o.bstride[size_t(d)] = o.t.strides()[td];
  }
  return o;
}

// True if the batch axes (those with extent > 1) walk like one axis of stride `unit`.
bool collapses(const Shape& batch, const std::vector<int64_t>& bs, int64_t unit) {
  int64_t expect = unit;
  for (int d = batch.ndim() - 1; d >= 0; --d) {
    if (batch[d] == 1) continue;
    if (bs[size_t(d)] != expect) return false;
    expect *= batch[d];
  }
  return true;
}

int64_t innermost_stride(const Shape& batch, const std::vector<int64_t>& bs) {
  for (int d = batch.ndim() - 1; d >= 0; --d)
    if (batch[d] != 1) return bs[size_t(d)];
  return 0;
}

template <typename T>
void batched_impl(const Operand& x, const Operand& y, const Shape& batch, Tensor& out) {
  const int64_t M = x.rows, K = x.cols, N = y.cols, nb = batch.numel();
  const T* xp = x.t.data<T>();
  const T* yp = y.t.data<T>();
  T* op = out.data<T>();
  const int64_t nslots = out.numel() / std::max<int64_t>(1, M * N);
  if (M == 0 || N == 0) return;
  if (nb == 0 || K == 0) {  // empty sums; out may be a batch-summed (M, N) with no batch to sum
    std::fill(op, op + out.numel(), T(0));
    return;
  }
  const MatmulPrecision prec = matmul_precision();  // the caller's, for every worker thread
  auto one = [&](const T* a, const BlasLayout& la, const T* b, const BlasLayout& lb, int64_t m, int64_t k, T beta,
                 T* c) { gemm_impl<T>(prec, la.trans, lb.trans, m, N, k, T(1), a, la.ld, b, lb.ld, beta, c, N); };

  if (nb > 1) {
    bool y_shared = std::all_of(y.bstride.begin(), y.bstride.end(), [](int64_t s) { return s == 0; });
    // Fold 1: y is the same matrix for every batch and nothing is reduced -> stack x's batch
    // into its rows: one (nb*M, K) @ (K, N) GEMM, the output rows are already in that order.
    if (y_shared && nslots == nb) {
      int64_t rs = M > 1 ? x.rs : innermost_stride(batch, x.bstride);
      BlasLayout l = blas_layout(nb * M, K, rs, x.cs);
      if (l.ok && collapses(batch, x.bstride, M * rs)) return one(xp, l, yp, y.layout, nb * M, K, T(0), op);
    }
    // Fold 2: everything is reduced -> the batch joins the contraction: one
    // (M, nb*K) @ (nb*K, N) GEMM (the weight gradient of a batched x @ W).
    if (nslots == 1) {
      int64_t xcs = K > 1 ? x.cs : innermost_stride(batch, x.bstride);
      int64_t yrs = K > 1 ? y.rs : innermost_stride(batch, y.bstride);
      BlasLayout lx = blas_layout(M, nb * K, x.rs, xcs), ly = blas_layout(nb * K, N, yrs, y.cs);
      if (lx.ok && ly.ok && collapses(batch, x.bstride, K * xcs) && collapses(batch, y.bstride, K * yrs))
        return one(xp, lx, yp, ly, M, nb * K, T(0), op);
    }
  }

  // General case: one GEMM per batch index, grouped by the output matrix it lands in; a group
  // accumulates in batch order (beta = 1 after its first product), so results are deterministic.
  std::vector<int64_t> xo(static_cast<size_t>(nb)), yo(static_cast<size_t>(nb)), slot(static_cast<size_t>(nb));
  {
    int nd = batch.ndim(), tnd = out.ndim() - 2, lead = nd - tnd;
    std::vector<int64_t> ostride(static_cast<size_t>(nd), 0);
    for (int d = 0; d < nd; ++d) {
      int td = d - lead;
      if (td >= 0 && out.shape()[td] != 1) ostride[size_t(d)] = out.strides()[td] / (M * N);
    }
    std::vector<int64_t> idx(static_cast<size_t>(nd), 0);
    int64_t a = 0, b = 0, s = 0;
    for (int64_t i = 0; i < nb; ++i) {
      xo[size_t(i)] = a;
      yo[size_t(i)] = b;
      slot[size_t(i)] = s;
      for (int d = nd - 1; d >= 0; --d) {  // odometer over the batch axes
        if (++idx[size_t(d)] < batch[d]) {
          a += x.bstride[size_t(d)], b += y.bstride[size_t(d)], s += ostride[size_t(d)];
          break;
        }
        a -= x.bstride[size_t(d)] * (batch[d] - 1);
        b -= y.bstride[size_t(d)] * (batch[d] - 1);
        s -= ostride[size_t(d)] * (batch[d] - 1);
        idx[size_t(d)] = 0;
      }
    }
  }
  // Counting sort of the batch indices by slot (stable: keeps batch order within a slot).
  std::vector<int64_t> start(static_cast<size_t>(nslots) + 1, 0), order(static_cast<size_t>(nb));
  for (int64_t i = 0; i < nb; ++i) ++start[size_t(slot[size_t(i)]) + 1];
  for (int64_t s = 0; s < nslots; ++s) start[size_t(s) + 1] += start[size_t(s)];
  {
    std::vector<int64_t> fill(start.begin(), start.end() - 1);
    for (int64_t i = 0; i < nb; ++i) order[size_t(fill[size_t(slot[size_t(i)])]++)] = i;
  }
  auto run_slot = [&](int64_t s) {
    T* c = op + s * M * N;
    if (start[size_t(s)] == start[size_t(s) + 1]) {  // no batch index lands here
      std::fill(c, c + M * N, T(0));
      return;
    }
    for (int64_t j = start[size_t(s)]; j < start[size_t(s) + 1]; ++j) {
      int64_t i = order[size_t(j)];
      one(xp + xo[size_t(i)], x.layout, yp + yo[size_t(i)], y.layout, M, K, j == start[size_t(s)] ? T(0) : T(1), c);
    }
  };
  int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  bool over_batch = threads > 1 && nslots >= threads && (M * N * K <= kSmallGemm || nslots >= 4 * threads);
  if (over_batch) {
    // Inside this region OpenBLAS (OpenMP build) runs each call on the calling thread only.
#pragma omp parallel for schedule(static)
    for (int64_t s = 0; s < nslots; ++s) run_slot(s);
  } else {
    for (int64_t s = 0; s < nslots; ++s) run_slot(s);
  }
}

}  // namespace

const char* f32_gemm_backend() { return f32_onednn().load() ? "onednn" : "openblas"; }

void set_f32_gemm_backend(const char* name) {
  f32_onednn().store(parse_f32_backend(name ? name : "", "set_f32_gemm_backend"));
}

void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
          int64_t ldb, float beta, float* C, int64_t ldc) {
  gemm_impl<float>(matmul_precision(), ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
          const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  gemm_impl<double>(MatmulPrecision::fp32, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

BlasLayout blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if (rows == 0 || cols == 0) return {true, false, std::max<int64_t>(cols, 1)};  // nothing is read
  if (cols == 1 || cs == 1) {  // row-major: rows rs apart
    int64_t ld = rows <= 1 ? std::max<int64_t>(cols, 1) : rs;
    if (ld >= std::max<int64_t>(cols, 1)) return {true, false, ld};
  }
  if (rows == 1 || rs == 1) {  // column-major = transpose of a row-major (cols, rows)
    int64_t ld = cols <= 1 ? std::max<int64_t>(rows, 1) : cs;
    if (ld >= std::max<int64_t>(rows, 1)) return {true, true, ld};
  }
  return {};
}

void batched_matmul(const Tensor& x, const Tensor& y, const Shape& batch, Tensor& out) {
  QKV_CHECK(x.ndim() >= 2 && y.ndim() >= 2 && out.ndim() >= 2, "batched_matmul", "operands must be matrices, got ",
            x.str(), ", ", y.str(), " -> ", out.str());
  QKV_CHECK(x.dtype() == y.dtype() && x.dtype() == out.dtype(), "batched_matmul", "dtypes differ: ", x.str(), ", ",
            y.str(), " -> ", out.str());
  QKV_CHECK(x.size(-1) == y.size(-2) && out.size(-2) == x.size(-2) && out.size(-1) == y.size(-1), "batched_matmul",
            "shapes ", x.shape().str(), " @ ", y.shape().str(), " -> ", out.shape().str(), " do not chain");
  QKV_CHECK(out.is_contiguous(), "batched_matmul", "output must be contiguous");
  Operand ox = make_operand(x, batch), oy = make_operand(y, batch);
  if (x.dtype() == DType::f32) batched_impl<float>(ox, oy, batch, out);
  else if (x.dtype() == DType::f64) batched_impl<double>(ox, oy, batch, out);
  else fail("batched_matmul", "dtype ", dtype_name(x.dtype()), " is not supported (f32, f64)");
}

namespace {

// matmul_2d, plus a contiguous bias (N) of out's dtype on every row when defined (beta 0).
void matmul_2d_bias(const Tensor& x, const Tensor& y, Tensor& out, double beta, const Tensor& bias) {
  QKV_CHECK(x.ndim() == 2 && y.ndim() == 2 && out.ndim() == 2 && x.size(1) == y.size(0) && out.size(0) == x.size(0) &&
                out.size(1) == y.size(1),
            "matmul_2d", "shapes ", x.shape().str(), " @ ", y.shape().str(), " -> ", out.shape().str(), " do not chain");
  QKV_CHECK(x.dtype() == y.dtype() && x.dtype() == out.dtype(), "matmul_2d", "dtypes differ: ", x.str(), ", ",
            y.str(), " -> ", out.str());
  QKV_CHECK(out.is_contiguous(), "matmul_2d", "output must be contiguous");
  Shape none;
  Operand ox = make_operand(x, none), oy = make_operand(y, none);
  int64_t M = ox.rows, K = ox.cols, N = oy.cols;
  if (x.dtype() == DType::f32)
    gemm_impl<float>(matmul_precision(), ox.layout.trans, oy.layout.trans, M, N, K, 1.f, ox.t.data<float>(),
                     ox.layout.ld, oy.t.data<float>(), oy.layout.ld, float(beta), out.data<float>(), N,
                     bias.defined() ? bias.data<float>() : nullptr);
  else if (x.dtype() == DType::f64)
    gemm_impl<double>(MatmulPrecision::fp32, ox.layout.trans, oy.layout.trans, M, N, K, 1.0, ox.t.data<double>(),
                      ox.layout.ld, oy.t.data<double>(), oy.layout.ld, beta, out.data<double>(), N,
                      bias.defined() ? bias.data<double>() : nullptr);
  else
    fail("matmul_2d", "dtype ", dtype_name(x.dtype()), " is not supported (f32, f64)");
}

}  // namespace

void matmul_2d(const Tensor& x, const Tensor& y, Tensor& out, double beta) { matmul_2d_bias(x, y, out, beta, {}); }

void linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& out) {
  // w^T as a strided view: (K, N) with w's strides swapped (a transpose flag for BLAS).
  Tensor wt = w.as_strided(Shape{w.size(1), w.size(0)}, Shape{w.strides()[1], w.strides()[0]}, w.offset());
  Tensor b = bias.defined() ? bias.contiguous() : bias;
  QKV_CHECK(!b.defined() || (b.numel() == wt.size(1) && b.dtype() == out.dtype()), "linear", "bias ", b.str(),
            " does not match the output ", out.str());
  matmul_2d_bias(x, wt, out, 0.0, b);
}

namespace {
// column_sums, and with Round (f32 only) x rounded to bf16 into `rounded` ((R, N), contiguous) in
// the same pass: one read of x for both.
template <typename T, bool Round>
void column_sums_pass(const Tensor& x, Tensor& out, uint16_t* rounded) {
  // Columns per task: each thread an equal share of whole 16-column groups, at most kMaxTile (acc,
  // 16 KiB, stays in L1), so that a thread reads each row as one long run (the hardware prefetcher
  // follows it): a standalone copy of this loop summed and rounded a (2048, 8000) dY in 4.7 ms against
  // 6.7 with tasks of 512 columns and 11.1 with 128 (Intel Xeon, 2 threads; the library itself 7.4
  // against 8.6 in a busier minute). Each column is summed in row order either way.
  constexpr int64_t kMaxTile = 4096;
  const int64_t R = x.size(0), N = x.size(1), nt = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (N == 0) return;  // no columns (a Linear without outputs): no tasks to divide them among
  const int64_t groups = (N + 15) / 16, per_thread = (groups + nt - 1) / nt;
  const int64_t tasks = nt * ((per_thread * 16 + kMaxTile - 1) / kMaxTile);  // a multiple of the threads
  const int64_t tile = std::min(kMaxTile, (groups + tasks - 1) / tasks * 16), tiles = (N + tile - 1) / tile;
  const T* xp = x.data<T>();
  T* op = out.data<T>();
#pragma omp parallel for schedule(static) if (R * N >= (int64_t(1) << 16) && tiles > 1)
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t j0 = t * tile, n = std::min(tile, N - j0);
    T acc[kMaxTile] = {};
    for (int64_t r = 0; r < R; ++r) {
      const T* row = xp + r * N + j0;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) acc[j] += row[j];
      if constexpr (Round) {
        uint16_t* rr = rounded + r * N + j0;
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) rr[j] = to_bf16(row[j]);
      }
    }
    std::copy(acc, acc + n, op + j0);
  }
}

void check_column_sums(const Tensor& x, const Tensor& out, const char* who) {
  QKV_CHECK(x.ndim() == 2 && x.is_contiguous() && out.is_contiguous() && out.numel() == x.size(1) &&
                out.dtype() == x.dtype(),
            who, "expected contiguous x (R, N) and out (N), got ", x.str(), " and ", out.str());
}
}  // namespace

void column_sums(const Tensor& x, Tensor& out) {
  check_column_sums(x, out, "column_sums");
  if (x.dtype() == DType::f32) column_sums_pass<float, false>(x, out, nullptr);
  else if (x.dtype() == DType::f64) column_sums_pass<double, false>(x, out, nullptr);
  else fail("column_sums", "dtype ", dtype_name(x.dtype()), " is not supported (f32, f64)");
}

void column_sums_and_bf16(const Tensor& x, Tensor& out, uint16_t* rounded) {
  check_column_sums(x, out, "column_sums_and_bf16");
  QKV_CHECK(x.dtype() == DType::f32, "column_sums_and_bf16", "expected f32, got ", x.str());
  column_sums_pass<float, true>(x, out, rounded);
}

int64_t gemm_operand_copies() { return g_operand_copies.load(); }

const char* blas_core() { return openblas_get_corename(); }

bool blas_core_is_degraded() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && std::strcmp(blas_core(), "Prescott") == 0;
}

}  // namespace qkv::kernels
