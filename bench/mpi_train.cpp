// bench_mpi_train: data-parallel training throughput (qkv/train/distributed.h) on the translation
// bench's model (bench_seq2seq: d 256, 4 heads, 3 + 3 post-LN layers, d_ff 1024, vocab 8000,
// dropout 0.1, AdamW), global batch 64 x 32 random source and target tokens, through the real
// path: Seq2SeqTask, Trainer::train_step (label smoothing 0.1, clipping at 1), the gradient
// all-reduce. The same program runs as one process or under mpirun:
//   OMP_NUM_THREADS=2 build/bench/bench_mpi_train [steps=20]                      1 rank x 2 threads
//   OMP_NUM_THREADS=1 mpirun -np 2 build/bench/bench_mpi_train [steps=20]         2 ranks x 1 thread
// Rank 0 prints target tokens/s (median over the timed steps), the time spent in the gradient
// all-reduce (which includes waiting for the slower rank), and then the cost of the all-reduce
// alone: the same bytes summed after a barrier, with the rank-ordered sum (the default) and with
// MPI_Iallreduce, median of 20.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_util.h"
#include "qkv/kernels/gemm.h"
#include "qkv/models/transformer.h"
#include "qkv/tensor/rng.h"
#include "qkv/train/distributed.h"
#include "qkv/train/optim.h"
#include "qkv/train/schedule.h"
#include "qkv/train/seq2seq_data.h"
#include "qkv/train/seq2seq_task.h"
#include "qkv/util/error.h"

using namespace qkv;

namespace {

constexpr int64_t kVocab = 8000, kBatch = 64, kLen = 32;

// Endless batches of kBatch random pairs (31 tokens + </s> each side), the same on every rank.
class RandomPairs : public train::BatchStream {
 public:
  train::Seq2SeqBatch next() override {
    std::vector<train::Example> ex(static_cast<size_t>(kBatch));
    for (auto& e : ex)
      for (auto* seq : {&e.src, &e.tgt}) {
        for (int64_t i = 0; i + 1 < kLen; ++i) seq->push_back(3 + int64_t(g_.randint(uint64_t(kVocab - 3))));
        seq->push_back(2);  // </s>
      }
    std::vector<const train::Example*> rows;
    for (auto& e : ex) rows.push_back(&e);
    return train::make_batch(rows, {0, 1, 2});
  }
  int64_t epoch() const override { return 0; }
  std::map<std::string, int64_t> position() const override { return {}; }
  void restore(const std::map<std::string, int64_t>&) override {}

 private:
  Generator g_{1};
};

}  // namespace

int main(int argc, char** argv) {
  try {
    train::Communicator& comm = train::Communicator::world();
    comm.init_from_environment();
    const int steps = argc > 1 ? std::atoi(argv[1]) : 20, warmup = 3;

    Generator init(0);
    models::Transformer model(bench::reference_transformer_config(kVocab), init);
    model.train();
    AdamW opt(single_group(model.parameters()), 3e-4, {0.9, 0.999}, 1e-8, 0.01);
    ConstantLR schedule(3e-4);
    RandomPairs data;
    train::Seq2SeqTask task(model, data, 0);
    train::TrainOptions o;
    train::Trainer trainer(task, opt, schedule, o, "/tmp/qkv-bench-mpi-unused", {});
    if (comm.rank() > 0) default_generator().set_state(7 + uint64_t(comm.rank()), 0);  // own dropout

    std::vector<double> tok_s;
    double comm_before = 0, step_ms_total = 0;
    for (int i = 0; i < warmup + steps; ++i) {
      if (i == warmup) comm_before = trainer.communication_seconds();
      const double t0 = bench::now_ms();
      trainer.train_step();
      const double ms = bench::now_ms() - t0;
      if (i >= warmup) {
        tok_s.push_back(double(kBatch * kLen) / (ms * 1e-3));
        step_ms_total += ms;
      }
    }
    const double comm_ms = (trainer.communication_seconds() - comm_before) * 1e3;

    // The all-reduce alone, after a barrier, on the gradient buffer's size.
    const int64_t floats = trainer.all_reduce_bytes() / 4;
    std::vector<float> buf(size_t(std::max<int64_t>(floats, 1)), 1.f);
    auto timed = [&](bool ordered) {
      std::vector<double> ms;
      for (int r = 0; r < 20; ++r) {
        comm.all_gather(std::vector<int64_t>{0}, "barrier");
        const double t0 = bench::now_ms();
        if (ordered) comm.sum_ordered(buf.data(), floats, "bench");
        else comm.sum_mpi(buf.data(), floats, "bench");
        ms.push_back(bench::now_ms() - t0);
      }
      return bench::median(ms);
    };
    const double ordered_ms = comm.distributed() ? timed(true) : 0, mpi_ms = comm.distributed() ? timed(false) : 0;

    if (comm.is_main()) {
      std::printf("mpi_train: %d rank(s) x %d thread(s); %lld params, %.1f MB all-reduced per step; B %lld S %lld T %lld\n",
                  comm.size(), bench::env_threads(), (long long)model.num_parameters(),
                  double(trainer.all_reduce_bytes()) / 1e6, (long long)kBatch, (long long)kLen, (long long)kLen);
      std::printf("  tokens/s (median of %d steps): %.0f   step %.1f ms   in the gradient all-reduce: %.1f%% of step time\n",
                  steps, bench::median(tok_s), step_ms_total / steps, 100 * comm_ms / step_ms_total);
      if (comm.distributed())
        std::printf("  all-reduce alone (median of 20): rank-ordered %.2f ms, MPI_Iallreduce %.2f ms\n", ordered_ms,
                    mpi_ms);
    }
    comm.finalize();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_mpi_train: %s\n", e.what());
    train::Communicator::world().abort(1);
  }
  return 0;
}
