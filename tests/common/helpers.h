// tests/common/helpers.h - small helpers shared by the test binaries (thread counts, strided
// views, reference leaves, error messages).
#pragma once
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "qkv/kernels/gemm.h"
#include "qkv/tensor/storage.h"
#include "qkv/tensor/tensor.h"
#include "qkv/util/error.h"
#include "ref.h"

namespace qkv::testing {

// Sets the OpenMP thread count for a scope: determinism tests compare runs at several counts.
struct ThreadGuard {
  int prev = omp_get_max_threads();
  explicit ThreadGuard(int n) { omp_set_num_threads(n); }
  ~ThreadGuard() { omp_set_num_threads(prev); }
  ThreadGuard(const ThreadGuard&) = delete;
  ThreadGuard& operator=(const ThreadGuard&) = delete;
};

// Sets the batch-1 rows product's streams per thread for a scope (kernels/gemm.h): the bits must
// not depend on it.
struct RowsStreamsGuard {
  explicit RowsStreamsGuard(int n) { kernels::set_rows_streams_per_thread(n); }
  ~RowsStreamsGuard() { kernels::set_rows_streams_per_thread(0); }
  RowsStreamsGuard(const RowsStreamsGuard&) = delete;
  RowsStreamsGuard& operator=(const RowsStreamsGuard&) = delete;
};

// The transpose of the last two axes as a strided view (no copy, not recorded).
inline Tensor transposed_view(const Tensor& x) {
  Shape s = x.shape(), st = x.strides();
  int n = s.ndim();
  std::swap(s[n - 1], s[n - 2]);
  std::swap(st[n - 1], st[n - 2]);
  return x.as_strided(s, st, x.offset());
}

// Runs `load` (which builds a model from a file and keeps it) and checks that the tensor memory
// it peaked at is at most `ratio` times what it kept: a loader reading the file tensor by tensor
// into the model stays near 1 (its temporaries are single tensors); one that read the whole file
// first peaks at about twice the model.
template <typename F>
void expect_load_peak_near_kept(F&& load, double ratio, const char* what) {
  allocator_reset_peak();
  const size_t before = allocator_stats().bytes_in_use;
  load();
  const AllocatorStats after = allocator_stats();
  ASSERT_GT(after.bytes_in_use, before) << what << ": the loaded model should be kept";
  EXPECT_LE(double(after.peak_bytes_in_use - before), ratio * double(after.bytes_in_use - before))
      << what << ": peak " << after.peak_bytes_in_use - before << " bytes to keep " << after.bytes_in_use - before;
}

// Reference tensor `name` of case `c` as a leaf that requires grad.
inline Tensor leaf(const RefFile& ref, const std::string& c, const std::string& name) {
  Tensor t = ref.get(c, name);
  t.set_requires_grad(true);
  return t;
}

// |a - b| <= 1e-5 max(1, |b|): fp32's relative tolerance, for a score or a log-probability.
inline bool near_fp32(double a, double b) { return std::fabs(a - b) <= 1e-5 * std::max(1.0, std::fabs(b)); }

inline bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// The message of the qkv::Error that fn throws ("" and a test failure if none).
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a qkv::Error";
  return "";
}

}  // namespace qkv::testing

#define EXPECT_MENTIONS(msg, text) EXPECT_NE((msg).find(text), std::string::npos) << "missing '" << (text) << "' in: " << (msg)
