// Data-parallel training over Open MPI (qkv/train/distributed.h). Only this file sees mpi.h.
#include "qkv/train/distributed.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "qkv/util/error.h"

#ifdef QKV_HAVE_MPI
#define OMPI_SKIP_MPICXX 1  // the C API only: Open MPI's deprecated C++ bindings need libmpi_cxx
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace qkv::train {
namespace {

// A positive integer from the environment, or `fallback` when unset.
double env_seconds(const char* name, double fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  QKV_CHECK(end && *end == '\0' && s > 0, name, "expected a number of seconds > 0, got '", v, "'");
  return s;
}

int env_world_size() {  // Open MPI's mpirun sets OMPI_COMM_WORLD_SIZE in every rank's environment
  const char* v = std::getenv("OMPI_COMM_WORLD_SIZE");
  return v && *v ? std::atoi(v) : 1;
}

#ifdef QKV_HAVE_MPI
// Waits for a non-blocking collective, spinning on MPI_Test (which also drives its progress) for
// the first millisecond and then sleeping 50 us between tests, so that a rank waiting for a slow
// one does not take a core from it. timeout <= 0: no deadline.
void wait_for(MPI_Request* req, double timeout, int rank, const std::string& what) {
  const auto start = std::chrono::steady_clock::now();
  for (int64_t polls = 0;; ++polls) {
    int done = 0;
    MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (done) return;
    if ((polls & 63) == 0) {
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (timeout > 0 && waited > timeout)
        fail("distributed training", "rank ", rank, ": ", what, " did not complete within ", timeout,
             " s (QKV_COMM_TIMEOUT): another rank has died or hangs; ending the job");
      if (waited > 1e-3) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}
#endif

}  // namespace

Communicator& Communicator::world() {
  static Communicator c;
  return c;
}

bool Communicator::built_with_mpi() {
#ifdef QKV_HAVE_MPI
  return true;
#else
  return false;
#endif
}

void Communicator::init_from_environment() {
  const int n = env_world_size();
  if (n <= 1 || initialised_) return;
  timeout_s_ = env_seconds("QKV_COMM_TIMEOUT", timeout_s_);
#ifdef QKV_HAVE_MPI
  int provided = 0;  // only the main thread calls MPI (OpenMP workers never do)
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  initialised_ = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
#else
  fail("distributed training", "started by mpirun as one of ", n,
       " ranks, but this qkv was built without MPI (the CMake option QKV_MPI was off: install libopenmpi-dev "
       "and rebuild)");
#endif
}

void Communicator::finalize() {
#ifdef QKV_HAVE_MPI
  if (initialised_) MPI_Finalize();
#endif
  initialised_ = false;
  rank_ = 0;
  size_ = 1;
}

void Communicator::abort(int code) {
#ifdef QKV_HAVE_MPI
  if (initialised_) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  std::exit(code);
}

void Communicator::wait_for_main() {
#ifdef QKV_HAVE_MPI
  if (!distributed()) return;
  int go = 0;
  MPI_Request req;
  MPI_Ibcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD, &req);
  wait_for(&req, 0, rank_, "waiting for rank 0 to prepare the run");
#endif
}

void Communicator::release_followers() {
#ifdef QKV_HAVE_MPI
  if (!distributed() || !is_main()) return;  // the others were released before their setup
  int go = 1;
  MPI_Request req;
  MPI_Ibcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD, &req);
  wait_for(&req, timeout_s_, rank_, "releasing the other ranks after setup");
#endif
}

void Communicator::sum_ordered(float* data, int64_t n, const std::string& what) {
#ifdef QKV_HAVE_MPI
  if (!distributed() || n == 0) return;
  QKV_CHECK(n <= int64_t(1) << 30, "distributed training", what, ": a bucket of ", n, " floats is too large");
  // Chunk c = [start[c], start[c] + count[c]) is owned by rank c: everyone sends it chunk c, it
  // sums the N copies in rank order, and an all-gather hands every chunk back to everyone.
  const int N = size_;
  std::vector<int> count(static_cast<size_t>(N)), start(static_cast<size_t>(N));
  for (int c = 0; c < N; ++c) {
    start[size_t(c)] = int(n * c / N);
    count[size_t(c)] = int(n * (c + 1) / N) - start[size_t(c)];
  }
  const int mine = count[size_t(rank_)];
  std::vector<float> copies(size_t(N) * size_t(mine));  // (N, mine): rank r's copy of my chunk
  std::vector<int> rcount(static_cast<size_t>(N), mine), rstart(static_cast<size_t>(N));
  for (int r = 0; r < N; ++r) rstart[size_t(r)] = r * mine;
  MPI_Request req;
  MPI_Ialltoallv(data, count.data(), start.data(), MPI_FLOAT, copies.data(), rcount.data(), rstart.data(), MPI_FLOAT,
                 MPI_COMM_WORLD, &req);
  wait_for(&req, timeout_s_, rank_, what + " (all-to-all)");
  float* out = data + start[size_t(rank_)];
  std::memcpy(out, copies.data(), sizeof(float) * size_t(mine));
  for (int r = 1; r < N; ++r) {
    const float* x = copies.data() + size_t(r) * size_t(mine);
    for (int i = 0; i < mine; ++i) out[i] += x[i];
  }
  MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, data, count.data(), start.data(), MPI_FLOAT, MPI_COMM_WORLD, &req);
  wait_for(&req, timeout_s_, rank_, what + " (all-gather)");
#else
  (void)data, (void)n, (void)what;
#endif
}

void Communicator::sum_mpi(float* data, int64_t n, const std::string& what) {
#ifdef QKV_HAVE_MPI
  if (!distributed() || n == 0) return;
  QKV_CHECK(n <= int64_t(1) << 30, "distributed training", what, ": a bucket of ", n, " floats is too large");
  MPI_Request req;
  MPI_Iallreduce(MPI_IN_PLACE, data, int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
  wait_for(&req, timeout_s_, rank_, what + " (all-reduce)");
#else
  (void)data, (void)n, (void)what;
#endif
}

std::vector<int64_t> Communicator::all_gather(const std::vector<int64_t>& mine, const std::string& what,
                                              double timeout) {
  std::vector<int64_t> all(mine.size() * size_t(size_));
#ifdef QKV_HAVE_MPI
  if (distributed()) {
    MPI_Request req;
    MPI_Iallgather(mine.data(), int(mine.size()), MPI_INT64_T, all.data(), int(mine.size()), MPI_INT64_T,
                   MPI_COMM_WORLD, &req);
    wait_for(&req, timeout > 0 ? timeout : timeout_s_, rank_, what);
    return all;
  }
#endif
  (void)what, (void)timeout;
  return mine;
}

std::vector<double> Communicator::all_gather(const std::vector<double>& mine, const std::string& what) {
  std::vector<double> all(mine.size() * size_t(size_));
#ifdef QKV_HAVE_MPI
  if (distributed()) {
    MPI_Request req;
    MPI_Iallgather(mine.data(), int(mine.size()), MPI_DOUBLE, all.data(), int(mine.size()), MPI_DOUBLE,
                   MPI_COMM_WORLD, &req);
    wait_for(&req, timeout_s_, rank_, what);
    return all;
  }
#endif
  (void)what;
  return mine;
}

std::pair<int64_t, int64_t> shard_rows(const std::vector<int64_t>& row_units, int rank, int ranks) {
  QKV_CHECK(ranks >= 1 && rank >= 0 && rank < ranks, "shard_rows", "rank ", rank, " of ", ranks);
  const int64_t rows = int64_t(row_units.size());
  std::vector<int64_t> prefix(size_t(rows) + 1, 0);  // prefix[k] = units of rows [0, k)
  for (int64_t i = 0; i < rows; ++i) prefix[size_t(i) + 1] = prefix[size_t(i)] + row_units[size_t(i)];
  // Boundary b (0 < b < ranks): the row boundary whose prefix is closest to b / ranks of the
  // units (the earlier one on a tie), never before the previous boundary.
  auto boundary = [&](int b) -> int64_t {
    if (b <= 0) return 0;
    if (b >= ranks) return rows;
    const double target = double(prefix.back()) * b / ranks;
    int64_t k = int64_t(std::lower_bound(prefix.begin(), prefix.end(), int64_t(target)) - prefix.begin());
    k = std::min(k, rows);
    if (k > 0 && target - double(prefix[size_t(k - 1)]) <= double(prefix[size_t(k)]) - target) --k;
    return k;
  };
  int64_t lo = 0, hi = 0;
  for (int b = 1; b <= rank + 1; ++b) {  // monotone by construction, clamped for safety
    lo = hi;
    hi = std::max(lo, boundary(b));
  }
  return {lo, hi};
}

GradientAllReduce::GradientAllReduce(Communicator& comm, std::vector<Tensor> params, int64_t bucket_bytes)
    : comm_(comm), params_(std::move(params)), bucket_floats_(std::max<int64_t>(1, bucket_bytes / 4)) {
  for (const Tensor& p : params_) {
    QKV_CHECK(p.dtype() == DType::f32, "distributed training", "parameters must be f32 to be all-reduced, got ",
              dtype_name(p.dtype()), " of shape ", p.shape().str());
    offset_.push_back(total_);
    total_ += p.numel();
  }
  total_ += int64_t(params_.size());  // the 'defined' counts, after the gradients
  flat_.resize(size_t(total_));
  const char* mode = std::getenv("QKV_MPI_REDUCE");
  if (mode && *mode) {
    QKV_CHECK(!std::strcmp(mode, "ordered") || !std::strcmp(mode, "mpi"), "QKV_MPI_REDUCE",
              "expected 'ordered' or 'mpi', got '", mode, "'");
    ordered_ = !std::strcmp(mode, "ordered");
  }
}

void GradientAllReduce::run(int64_t step) {
  if (!comm_.distributed()) return;
  const auto t0 = std::chrono::steady_clock::now();
  const size_t np = params_.size();
  float* defined = flat_.data() + (total_ - int64_t(np));
  for (size_t i = 0; i < np; ++i) {  // pack: (this rank's gradient or zeros) and 1 / 0 for defined
    Tensor g = params_[i].grad();
    float* dst = flat_.data() + offset_[i];
    if (g.defined()) {
      Tensor c = g.contiguous();
      std::memcpy(dst, c.data<float>(), sizeof(float) * size_t(c.numel()));
    } else {
      std::fill(dst, dst + params_[i].numel(), 0.f);
    }
    defined[i] = g.defined() ? 1.f : 0.f;
  }
  for (int64_t b = 0; b < total_; b += bucket_floats_) {
    const int64_t n = std::min(bucket_floats_, total_ - b);
    const std::string what = "the gradient all-reduce of step " + std::to_string(step);
    if (ordered_) comm_.sum_ordered(flat_.data() + b, n, what);
    else comm_.sum_mpi(flat_.data() + b, n, what);
  }
  for (size_t i = 0; i < np; ++i) {  // unpack into every gradient that any rank had
    if (defined[i] == 0.f) continue;
    Tensor g = params_[i].grad();
    const float* src = flat_.data() + offset_[i];
    if (!g.defined() || !g.is_contiguous()) {
      Tensor sum = Tensor::empty(params_[i].shape(), DType::f32);
      std::memcpy(sum.data<float>(), src, sizeof(float) * size_t(sum.numel()));
      if (g.defined()) g.copy_from(sum);
      else params_[i].set_grad(sum);
    } else {
      std::memcpy(g.data<float>(), src, sizeof(float) * size_t(g.numel()));
      g.mark_modified();
    }
  }
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int64_t parameters_fingerprint(const std::vector<Tensor>& params) {
  uint64_t h = 1469598103934665603ull;
  for (const Tensor& p : params) {
    Tensor c = p.contiguous();
    const auto* bytes = static_cast<const unsigned char*>(c.raw_data());
    const size_t n = size_t(c.numel()) * dtype_size(c.dtype());
    for (size_t i = 0; i < n; ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  }
  return int64_t(h >> 1);
}

}  // namespace qkv::train
