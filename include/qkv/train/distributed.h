// qkv/train/distributed.h - synchronous data-parallel training over Open MPI (docs/mpi.md).
//
// `mpirun -np N qkv train ...` starts N copies of the program. Every rank builds the same model
// (same seed), the same batch plan and the same data order; at each step it takes the same global
// micro-batches, computes the summed loss of its own rows of each (shard_rows: a contiguous split
// by the rows' token counts), seeds backward with 1 / (the global batch's tokens), and the
// gradients are summed over the ranks (GradientAllReduce) before the identical clipping and
// optimizer step on every rank. So N ranks take the steps one process takes with the whole
// batch, up to the rounding of the different summation order.
//
// Determinism: the sum is ordered by rank (((g0 + g1) + g2) + ...), computed by the owner of each
// chunk after an all-to-all and shared with an all-gather (both pure data movement), so the bits
// do not depend on which all-reduce algorithm Open MPI picks. QKV_MPI_REDUCE=mpi uses
// MPI_Iallreduce instead (for measuring; deterministic for 2 ranks only, where a + b = b + a).
//
// Failure: every collective waits with a deadline (QKV_COMM_TIMEOUT seconds, default 300); past
// it the rank throws an error naming the operation and the step, and `qkv train` aborts the job
// (MPI_Abort), so a hung rank ends the job instead of hanging it. A rank that dies is noticed by
// mpirun itself, which kills the others (exit status non-zero).
//
// Without MPI (the build option QKV_MPI off, or not started by mpirun) the world is one rank and
// none of this runs.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "qkv/tensor/tensor.h"

namespace qkv::train {

// The processes of this job: MPI_COMM_WORLD under mpirun, else a world of one.
class Communicator {
 public:
  static Communicator& world();
  static bool built_with_mpi();
  // Started by mpirun (Open MPI's OMPI_COMM_WORLD_SIZE > 1 in the environment): initialises MPI;
  // an error if this qkv was built without it. Otherwise the world stays one rank.
  void init_from_environment();
  void finalize();  // MPI_Finalize if initialised (normal exit only)
  [[noreturn]] void abort(int code);  // MPI_Abort: ends every rank of the job

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool distributed() const { return size_ > 1; }
  bool is_main() const { return rank_ == 0; }
  double timeout_seconds() const { return timeout_s_; }
  // The deadline of the first collective after setup, which waits for the other ranks to repeat
  // rank 0's setup (reading corpora, learning tokenizers): the larger of the timeout and an hour.
  double setup_timeout_seconds() const { return timeout_s_ > 3600 ? timeout_s_ : 3600; }

  // Setup hand-over: rank 0 prepares the run (corpora, tokenizers, run directory) alone and calls
  // release_followers() when its trainer starts; ranks > 0 call wait_for_main() first and then
  // repeat the (now cached) setup. The wait has no deadline: building a corpus may take long.
  // release_followers() does nothing on ranks > 0.
  void wait_for_main();
  void release_followers();

  // Collectives: every rank calls them in the same order. `what` names the operation in errors.
  // Sum of `data` over ranks, in rank order, in place (the same bits on every rank).
  void sum_ordered(float* data, int64_t n, const std::string& what);
  void sum_mpi(float* data, int64_t n, const std::string& what);  // MPI_Iallreduce(MPI_SUM)
  // Every rank's `mine` (all of the same length), concatenated in rank order; timeout <= 0: the
  // communication timeout.
  std::vector<int64_t> all_gather(const std::vector<int64_t>& mine, const std::string& what, double timeout = 0);
  std::vector<double> all_gather(const std::vector<double>& mine, const std::string& what);

 private:
  int rank_ = 0, size_ = 1;
  bool initialised_ = false;
  double timeout_s_ = 300;
};

// Rows [begin, end) of a batch for `rank` of `ranks`: contiguous, in order, each rank's share of
// the rows' units (tokens) as close as a row boundary allows to units / ranks. A rank may get no
// rows when a batch has fewer rows than there are ranks.
std::pair<int64_t, int64_t> shard_rows(const std::vector<int64_t>& row_units, int rank, int ranks);

// Sums the parameters' gradients over the ranks, in buckets of at most bucket_bytes each. A
// gradient that is undefined on a rank (no rows, or a parameter its rows did not reach) counts
// as zeros; it is defined after the sum if it was defined on any rank, as in one process.
class GradientAllReduce {
 public:
  GradientAllReduce(Communicator& comm, std::vector<Tensor> params, int64_t bucket_bytes = 16 << 20);
  void run(int64_t step);
  double seconds() const { return seconds_; }  // wall time spent in it, cumulative
  int64_t bytes_per_step() const { return int64_t(sizeof(float)) * total_; }

 private:
  Communicator& comm_;
  std::vector<Tensor> params_;
  std::vector<int64_t> offset_;  // params_[i]'s place in the flat buffer
  int64_t total_ = 0;            // floats: every gradient + one 'defined' count per parameter
  int64_t bucket_floats_;
  bool ordered_ = true;  // QKV_MPI_REDUCE: "ordered" (default) or "mpi"
  std::vector<float> flat_;
  double seconds_ = 0;
};

// An FNV-1a hash of the parameters' bytes, for checking that every rank starts from the same weights.
int64_t parameters_fingerprint(const std::vector<Tensor>& params);

}  // namespace qkv::train
