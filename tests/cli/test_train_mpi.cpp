// `mpirun -np 2 qkv train`: data-parallel training (qkv/train/distributed.h, docs/mpi.md).
// - Two ranks of one thread each take the steps one process takes with the same global batch:
//   after 50 SGD-with-momentum steps the weights agree within the rounding of the different
//   gradient summation order, and two runs on two ranks are bit-identical.
// - SIGKILL of the whole job (mpirun and its ranks) and --resume on two ranks ends bit-identical
//   to an uninterrupted two-rank run (with dropout: every rank's generator is restored); a resume
//   on another number of ranks is refused.
// - A rank killed, or one that hangs (SIGSTOP), ends the job with a non-zero status within the
//   stated timeout, and the last checkpoint stays loadable.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "qkv/io/format/safetensors.h"
#include "qkv/kernels/bf16.h"
#include "qkv/train/checkpoint.h"
#include "qkv/train/distributed.h"
#include "qkv/util/file.h"
#include "dependency_skip.h"
#include "lm_corpus.h"
#include "reversal_corpus.h"
#include "run_qkv.h"

namespace fs = std::filesystem;
using qkv::testing::qkv_bin;
using qkv::testing::spawn;
using qkv::testing::step_dir;
using qkv::testing::wait_exit;
using qkv::testing::wait_for;

namespace {

std::string find_mpirun() {
  for (const char* p : {"/usr/bin/mpirun", "/usr/local/bin/mpirun"})
    if (fs::exists(p)) return p;
  return "";
}

// Skips (saying why) when this build or machine cannot run MPI jobs, and fails instead where the test
// dependencies are installed (dependency_skip.h); sets what mpirun needs to run as root in a
// container, and one OpenMP thread per rank.
#define REQUIRE_MPI()                                                                                         \
  do {                                                                                                        \
    if (!qkv::train::Communicator::built_with_mpi())                                                          \
      QKV_SKIP_MISSING_DEPENDENCY()                                                                           \
          << "qkv was built without MPI (CMake option QKV_MPI off: libopenmpi-dev not installed)";            \
    if (find_mpirun().empty())                                                                                \
      QKV_SKIP_MISSING_DEPENDENCY() << "mpirun not found (Debian package openmpi-bin)";                       \
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);                                                                 \
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);                                                         \
    setenv("OMP_NUM_THREADS", "1", 1);                                                                        \
    /* containers often forbid the cross-process reads (CMA) of shared-memory transfers */                    \
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);                                            \
    set_leak_checking_for_mpi();                                                                              \
  } while (0)

// Under ASan, Open MPI's own allocations (kept until exit) are suppressed in the ranks
// (tests/cli/lsan_openmpi.supp); qkv's leaks are still reported. Without ASan this changes nothing.
void set_leak_checking_for_mpi() {
  setenv("OMPI_MCA_mca_base_component_disable_dlclose", "1", 1);  // so that leak stacks name the library
  setenv("PMIX_MCA_mca_base_component_disable_dlclose", "1", 1);
  static const std::string lsan = [] {
    const char* old = std::getenv("LSAN_OPTIONS");
    return std::string(old && *old ? std::string(old) + ":" : "") + "suppressions=" + QKV_SOURCE_DIR +
           "/tests/cli/lsan_openmpi.supp:fast_unwind_on_malloc=0";
  }();
  setenv("LSAN_OPTIONS", lsan.c_str(), 1);
}

// The reversal task and a small Transformer with the given optimizer section, constant lr, dropout
// and run length.
fs::path make_case(const std::string& name, const std::string& optimizer, double lr, double dropout, int max_steps,
                   int save_every) {
  fs::path dir = fs::path(::testing::TempDir()) / ("qkv_mpi_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  qkv::testing::write_reversal_corpus(dir, 320, 300, 12345);
  std::string config = R"({
    "model_type": "transformer",
    "model": {"d_model": 16, "heads": 2, "enc_layers": 1, "dec_layers": 1, "d_ff": 32, "dropout": DROPOUT,
              "max_len": 32, "shared_embeddings": true, "tie_output": true},
    "tokenizer": {"kind": "bpe", "vocab_size": 60, "min_frequency": 1},
    "data": {"max_tokens": 96, "max_sentences": 16},
    "optimizer": OPTIMIZER,
    "schedule": {"type": "constant", "lr": LR},
    "train": {"max_steps": MAX_STEPS, "save_every": SAVE_EVERY, "valid_every": 0, "keep_last": 100, "clip_norm": 0},
    "valid": {"max_sentences": 10},
    "seed": 5
  })";
  auto put = [&](const std::string& key, const std::string& value) { config.replace(config.find(key), key.size(), value); };
  put("DROPOUT", std::to_string(dropout));
  put("OPTIMIZER", optimizer);
  put("LR", std::to_string(lr));
  put("MAX_STEPS", std::to_string(max_steps));
  put("SAVE_EVERY", std::to_string(save_every));
  qkv::write_file_atomic((dir / "config.json").string(), config);
  return dir;
}

std::vector<std::string> mpi_train_args(const fs::path& dir, const std::string& out) {
  return {"train", "--config", (dir / "config.json").string(), "--train", (dir / "train.tsv").string(),
          "--valid", (dir / "valid.tsv").string(), "--out", (dir / out).string()};
}

// mpirun -np n qkv <args>
std::vector<std::string> mpirun(int n, const std::vector<std::string>& args) {
  std::vector<std::string> full{find_mpirun(), "-np", std::to_string(n), "--oversubscribe", qkv_bin()};
  full.insert(full.end(), args.begin(), args.end());
  return full;
}

std::vector<std::string> single(const std::vector<std::string>& args) {
  std::vector<std::string> full{qkv_bin()};
  full.insert(full.end(), args.begin(), args.end());
  return full;
}

std::string log_of(const fs::path& p) { return qkv::read_file(p.string()); }

// The processes whose parent is `pid` (mpirun's ranks).
std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(e.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    const size_t close = line.rfind(')');  // "pid (comm) state ppid ..."
    if (close == std::string::npos) continue;
    char state = 0;
    long ppid = 0;
    if (std::sscanf(line.c_str() + close + 1, " %c %ld", &state, &ppid) == 2 && ppid == pid)
      out.push_back(pid_t(std::stol(name)));
  }
  return out;
}

// The child of mpirun `job` that is rank `rank` (OMPI_COMM_WORLD_RANK in its environment).
pid_t rank_pid(pid_t job, int rank) {
  const std::string want = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
  for (pid_t c : children_of(job)) {
    std::ifstream env("/proc/" + std::to_string(c) + "/environ", std::ios::binary);
    std::string all((std::istreambuf_iterator<char>(env)), std::istreambuf_iterator<char>());
    for (size_t at = 0; at < all.size();) {
      const size_t end = all.find('\0', at);
      if (all.compare(at, (end == std::string::npos ? all.size() : end) - at, want) == 0) return c;
      if (end == std::string::npos) break;
      at = end + 1;
    }
  }
  return -1;
}

std::map<std::string, qkv::Tensor> weights(const std::string& checkpoint) {
  return qkv::safetensors::load(checkpoint + "/model.safetensors").tensors;
}

size_t count_lines_with(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The largest |a - b| over every weight of two checkpoints, against 1e-5 of the largest |a| (the
// bound and its reason: TwoRanksTakeTheStepsOfOneProcessAndRepeatBitExactly).
void expect_weights_close(const std::string& one_dir, const std::string& two_dir) {
  const auto one = weights(one_dir), two = weights(two_dir);
  ASSERT_EQ(one.size(), two.size());
  double max_diff = 0, max_abs = 0;
  for (const auto& [name, a] : one) {
    ASSERT_TRUE(two.count(name)) << name;
    const qkv::Tensor& b = two.at(name);
    ASSERT_EQ(a.numel(), b.numel()) << name;
    if (a.dtype() != qkv::DType::f32) continue;
    const float* x = a.data<float>();
    const float* y = b.data<float>();
    for (int64_t i = 0; i < a.numel(); ++i) {
      max_diff = std::max(max_diff, double(std::fabs(x[i] - y[i])));
      max_abs = std::max(max_abs, double(std::fabs(x[i])));
    }
  }
  std::printf("max |w_2ranks - w_1process| = %.3g (largest |w| %.3g)\n", max_diff, max_abs);
  std::fflush(stdout);  // before the next fork, which would copy the buffer
  EXPECT_LE(max_diff, 1e-5 * max_abs) << "2 ranks and 1 process disagree beyond fp32 summation rounding";
}

}  // namespace

TEST(TrainMpi, TwoRanksTakeTheStepsOfOneProcessAndRepeatBitExactly) {
  REQUIRE_MPI();
  // SGD with momentum and no clipping: an update is proportional to the gradient, so a shard
  // normalised by its own tokens, or counted twice, moves the weights visibly (Adam would hide a
  // constant factor). No dropout: the ranks' dropout streams differ from one process's.
  const fs::path dir = make_case("equal", R"({"type": "sgd", "momentum": 0.9})", 0.5, 0.0, 50, 50);
  ASSERT_EQ(wait_exit(spawn(single(mpi_train_args(dir, "one")), dir / "one.log")), 0) << log_of(dir / "one.log");
  ASSERT_EQ(wait_exit(spawn(mpirun(2, mpi_train_args(dir, "two_a")), dir / "two_a.log")), 0)
      << log_of(dir / "two_a.log");
  ASSERT_EQ(wait_exit(spawn(mpirun(2, mpi_train_args(dir, "two_b")), dir / "two_b.log")), 0)
      << log_of(dir / "two_b.log");
  EXPECT_NE(log_of(dir / "two_a.log").find("2 ranks; gradient all-reduce"), std::string::npos) << log_of(dir / "two_a.log");

  // Bit-identical from run to run (the reduction is ordered by rank).
  for (const char* file : {"/model.safetensors", "/training_state.safetensors"})
    EXPECT_TRUE(qkv::read_file(step_dir(dir / "two_a", 50) + file) == qkv::read_file(step_dir(dir / "two_b", 50) + file))
        << file << " differs between two runs on 2 ranks";

  // The same weights as one process within the gradient's rounding. Bound: the shards sum each
  // weight gradient over their own rows (B/2 terms each) and then add the two partial sums, one
  // process over all B rows at once; fp32 sums of this size differ by a few ulps (~1e-7 of the
  // gradient), which 50 steps of lr 0.5 with momentum 0.9 carry into the weights, through the
  // model's own sensitivity, at up to about 1e-5 of the largest weight (measured: 2.6e-6 with the
  // largest weight 3.0, i.e. 8.6e-7 of it). A wrong scale or a missing shard moves them by far more.
  expect_weights_close(step_dir(dir / "one", 50), step_dir(dir / "two_a", 50));

  // Rank 0 alone writes: one metrics line per step, and no second run directory anywhere.
  const std::string metrics = log_of(dir / "two_a" / "metrics.jsonl");
  EXPECT_EQ(count_lines_with(metrics, "\"train\""), 50u) << metrics;
  EXPECT_TRUE(fs::exists(dir / "two_a" / "model" / "model.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "two_a" / ".rank1")) << "rank 1's scratch directory was left behind";
  if (!HasFailure()) fs::remove_all(dir);
}

// Mixed precision on 2 ranks: every rank runs its bf16 products as rank 0 does (kernels/bf16.h:
// each rank would otherwise choose by its own timing or environment). Rank 1 is told to use the
// other kernel than rank 0; the weights must still equal, bit for bit, a run where both ranks use
// rank 0's (its shard's gradient, summed in another order, would move them otherwise).
TEST(TrainMpi, Bf16RanksRunTheirProductsAsRankZeroDoes) {
  REQUIRE_MPI();
  if (!qkv::kernels::dnnl_cpu_info().bf16_native())
    GTEST_SKIP() << "oneDNN has no bf16 kernel here (" << qkv::kernels::dnnl_cpu_info().isa << ")";
  const fs::path dir = make_case("bf16", R"({"type": "sgd", "momentum": 0.9})", 0.5, 0.0, 20, 20);
  std::string config = log_of(dir / "config.json");
  const std::string at = "\"clip_norm\": 0";
  config.replace(config.find(at), at.size(), at + ", \"precision\": \"bf16\"");
  qkv::write_file_atomic((dir / "config.json").string(), config);
  auto rank = [&](const char* products, const std::string& out) {  // one MPMD app context: 1 rank
    std::vector<std::string> ctx{"-np", "1", "-x", std::string("QKV_BF16_PRODUCTS=") + products, qkv_bin()};
    for (const auto& a : mpi_train_args(dir, out)) ctx.push_back(a);
    return ctx;
  };
  for (const auto& [out, second] : {std::pair<std::string, const char*>{"same", "native"}, {"mixed", "fp32_fma"}}) {
    std::vector<std::string> job{find_mpirun(), "--oversubscribe"};
    for (const auto& a : rank("native", out)) job.push_back(a);
    job.push_back(":");
    for (const auto& a : rank(second, out)) job.push_back(a);
    ASSERT_EQ(wait_exit(spawn(job, dir / (out + ".log"))), 0) << log_of(dir / (out + ".log"));
  }
  EXPECT_NE(log_of(dir / "mixed.log").find("bf16 products: native"), std::string::npos) << log_of(dir / "mixed.log");
  for (const char* file : {"/model.safetensors", "/training_state.safetensors"})
    EXPECT_TRUE(qkv::read_file(step_dir(dir / "same", 20) + file) == qkv::read_file(step_dir(dir / "mixed", 20) + file))
        << file << " differs when rank 1 was told to run its bf16 products otherwise";
  if (!HasFailure()) fs::remove_all(dir);
}

// The other families' row splits: a GPT language model, and a GPT classifier with its auxiliary LM
// loss (a mean over the whole batch's tokens, so its shards need the global count). 30 SGD steps
// without dropout on 2 ranks against 1 process, within the bound above.
TEST(TrainMpi, GptLanguageModelAndClassifierShardsMatchOneProcess) {
  REQUIRE_MPI();
  const fs::path dir = fs::path(::testing::TempDir()) / ("qkv_mpi_gpt_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  qkv::testing::write_lm_corpus(dir, 300, 30, 777);
  std::string cls_train, cls_valid;
  const char* fruit[] = {"apple", "banana", "cherry", "grape", "lemon", "mango"};
  const char* animal[] = {"dog", "cat", "horse", "sheep", "goat", "tiger"};
  uint64_t lcg = 11;
  for (int i = 0; i < 360; ++i) {
    auto draw = [&](int n) { return int(((lcg = lcg * 6364136223846793005ull + 1442695040888963407ull) >> 33) % uint64_t(n)); };
    const bool f = draw(2);
    std::string text;
    for (int w = 0, n = 1 + draw(8); w < n; ++w) text += std::string(w ? " " : "") + (f ? fruit : animal)[draw(6)];
    (i < 300 ? cls_train : cls_valid) += std::string(f ? "fruit" : "animal") + "\t" + text + "\n";
  }
  qkv::write_file_atomic((dir / "cls_train.tsv").string(), cls_train);
  qkv::write_file_atomic((dir / "cls_valid.tsv").string(), cls_valid);
  qkv::write_file_atomic((dir / "lm.json").string(), R"({
    "model_type": "gpt",
    "model": {"n_embd": 32, "n_layer": 2, "n_head": 2, "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0},
    "tokenizer": {"kind": "bytebpe", "vocab_size": 300, "min_frequency": 2},
    "data": {"context": 32, "batch_size": 8},
    "optimizer": {"type": "sgd", "momentum": 0.9},
    "schedule": {"type": "constant", "lr": 0.3},
    "train": {"max_steps": 30, "valid_every": 0, "save_every": 30, "clip_norm": 0},
    "valid": {"max_tokens": 512},
    "seed": 3
  })");
  qkv::write_file_atomic((dir / "cls.json").string(), R"({
    "model_type": "gpt_classifier",
    "model": {"n_positions": 32, "n_embd": 32, "n_layer": 2, "n_head": 2,
              "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0},
    "tokenizer": {"vocab_size": 300, "min_frequency": 1},
    "lm_weight": 0.5,
    "data": {"max_len": 24, "batch_size": 16},
    "optimizer": {"type": "sgd", "momentum": 0.9},
    "schedule": {"type": "constant", "lr": 0.3},
    "train": {"max_steps": 30, "valid_every": 0, "save_every": 30, "clip_norm": 0},
    "seed": 3
  })");
  struct Family {
    const char *config, *train, *valid;
  };
  for (const Family& f : {Family{"lm.json", "train.txt", "valid.txt"}, Family{"cls.json", "cls_train.tsv", "cls_valid.tsv"}}) {
    SCOPED_TRACE(f.config);
    auto args = [&](const std::string& out) {
      return std::vector<std::string>{"train", "--config", (dir / f.config).string(), "--train", (dir / f.train).string(),
                                      "--valid", (dir / f.valid).string(), "--out", (dir / out).string()};
    };
    const std::string one = std::string(f.config) + ".one", two = std::string(f.config) + ".two";
    ASSERT_EQ(wait_exit(spawn(single(args(one)), dir / (one + ".log"))), 0) << log_of(dir / (one + ".log"));
    ASSERT_EQ(wait_exit(spawn(mpirun(2, args(two)), dir / (two + ".log"))), 0) << log_of(dir / (two + ".log"));
    expect_weights_close(step_dir(dir / one, 30), step_dir(dir / two, 30));
  }
  if (!HasFailure()) fs::remove_all(dir);
}

TEST(TrainMpi, SigkillOfTheJobAndResumeOnTwoRanksIsBitIdentical) {
  REQUIRE_MPI();
  // Adam and dropout: the optimizer moments and every rank's own generator must come back.
  const fs::path dir = make_case("resume", R"({"type": "adam", "betas": [0.9, 0.98], "eps": 1e-9})", 0.003,
                                 0.1, 200, 10);
  ASSERT_EQ(wait_exit(spawn(mpirun(2, mpi_train_args(dir, "full")), dir / "full.log")), 0) << log_of(dir / "full.log");

  const pid_t job = spawn(mpirun(2, mpi_train_args(dir, "killed")), dir / "killed.log");
  ASSERT_TRUE(wait_for(step_dir(dir / "killed", 30), job, 600)) << log_of(dir / "killed.log");
  for (pid_t rank : children_of(job)) kill(rank, SIGKILL);  // the whole job at once
  kill(job, SIGKILL);
  EXPECT_EQ(wait_exit(job), 128 + SIGKILL);
  ASSERT_FALSE(fs::exists(step_dir(dir / "killed", 200))) << "the run finished before the kill; lengthen it";

  const std::vector<std::string> resume{"train", "--resume", (dir / "killed").string()};
  // Another number of ranks is refused, naming the one the run was trained on.
  EXPECT_NE(wait_exit(spawn(single(resume), dir / "one.log")), 0);
  EXPECT_NE(log_of(dir / "one.log").find("trained on 2 MPI ranks"), std::string::npos) << log_of(dir / "one.log");
  EXPECT_NE(wait_exit(spawn(mpirun(3, resume), dir / "three.log")), 0);
  EXPECT_NE(log_of(dir / "three.log").find("mpirun -np 2"), std::string::npos) << log_of(dir / "three.log");

  ASSERT_EQ(wait_exit(spawn(mpirun(2, resume), dir / "resume.log")), 0) << log_of(dir / "resume.log");
  EXPECT_NE(log_of(dir / "resume.log").find("resumed from"), std::string::npos);
  for (const char* file : {"/model.safetensors", "/training_state.safetensors"})
    EXPECT_TRUE(qkv::read_file(step_dir(dir / "full", 200) + file) ==
                qkv::read_file(step_dir(dir / "killed", 200) + file))
        << file << " after SIGKILL and resume differs from the uninterrupted run on 2 ranks";
  if (!HasFailure()) fs::remove_all(dir);
}

// Starts a long two-rank run, waits for its step-10 checkpoint, does `hurt` to rank 1 and returns
// (exit status, seconds from then until mpirun exited).
std::pair<int, double> hurt_rank_one(const fs::path& dir, const std::string& out, int signal) {
  const pid_t job = spawn(mpirun(2, mpi_train_args(dir, out)), dir / (out + ".log"));
  if (!wait_for(step_dir(dir / out, 10), job, 600)) {
    ADD_FAILURE() << "no checkpoint: " << log_of(dir / (out + ".log"));
    return {-1, 0};
  }
  const pid_t rank1 = rank_pid(job, 1);
  if (rank1 <= 0) {
    ADD_FAILURE() << "rank 1's process not found among mpirun's children";
    kill(job, SIGKILL);
    return {-1, 0};
  }
  const auto t0 = std::chrono::steady_clock::now();
  kill(rank1, signal);
  const int status = wait_exit(job);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  kill(rank1, SIGKILL);  // a stopped rank that mpirun left behind
  return {status, secs};
}

void expect_last_checkpoint_loads(const fs::path& run) {
  // A checkpoint being written when the job died stays a temporary directory; the newest
  // published one (what --resume takes) must load whole.
  const std::optional<std::string> last = qkv::train::CheckpointManager::latest(run.string());
  ASSERT_TRUE(last.has_value()) << "no checkpoint under " << run;
  EXPECT_NO_THROW(weights(*last)) << *last;
  EXPECT_NO_THROW(qkv::safetensors::load(*last + "/training_state.safetensors")) << *last;
}

TEST(TrainMpi, AKilledRankEndsTheJobWithAnError) {
  REQUIRE_MPI();
  const fs::path dir = make_case("killed", R"({"type": "adam"})", 0.003, 0.1, 100000, 10);
  const auto [status, secs] = hurt_rank_one(dir, "run", SIGKILL);
  EXPECT_NE(status, 0) << log_of(dir / "run.log");
  EXPECT_LT(secs, 30) << "mpirun took " << secs << " s to end the job after rank 1 died";
  expect_last_checkpoint_loads(dir / "run");
  if (!HasFailure()) fs::remove_all(dir);
}

TEST(TrainMpi, AHungRankEndsTheJobWithinTheCommunicationTimeout) {
  REQUIRE_MPI();
  setenv("QKV_COMM_TIMEOUT", "5", 1);  // the other rank gives up after 5 s without its partner
  const fs::path dir = make_case("hung", R"({"type": "adam"})", 0.003, 0.1, 100000, 10);
  const auto [status, secs] = hurt_rank_one(dir, "run", SIGSTOP);
  unsetenv("QKV_COMM_TIMEOUT");
  EXPECT_NE(status, 0) << log_of(dir / "run.log");
  EXPECT_GE(secs, 4.0) << "the job ended before the timeout: " << log_of(dir / "run.log");
  EXPECT_LT(secs, 30) << "the job took " << secs << " s to end after rank 1 stopped (timeout 5 s)";
  EXPECT_NE(log_of(dir / "run.log").find("did not complete within 5 s"), std::string::npos) << log_of(dir / "run.log");
  expect_last_checkpoint_loads(dir / "run");
  if (!HasFailure()) fs::remove_all(dir);
}

// Ranks started with another config or flag: refused at start-up, naming the rank and the field
// (an lr of 0.05 on rank 1 trained apart at exit 0; another save_every or --max-steps ended in
// MPI_ERR_TRUNCATE from mismatched collectives).
TEST(TrainMpi, RanksWithAnotherConfigOrFlagAreRefusedByName) {
  REQUIRE_MPI();
  const fs::path dir = make_case("config", R"({"type": "sgd"})", 0.5, 0.0, 4, 4);
  std::string other = log_of(dir / "config.json");
  const std::string lr = "\"lr\": 0.500000";
  ASSERT_NE(other.find(lr), std::string::npos) << other;
  other.replace(other.find(lr), lr.size(), "\"lr\": 0.050000");
  qkv::write_file_atomic((dir / "other.json").string(), other);
  auto job = [&](const std::string& out, const std::vector<std::string>& rank1) {
    std::vector<std::string> j{find_mpirun(), "--oversubscribe", "-np", "1", qkv_bin()};
    for (const auto& a : mpi_train_args(dir, out)) j.push_back(a);
    for (const auto& a : std::vector<std::string>{":", "-np", "1", qkv_bin()}) j.push_back(a);
    for (const auto& a : rank1) j.push_back(a);
    return j;
  };
  std::vector<std::string> lr_args = mpi_train_args(dir, "lr");
  lr_args[2] = (dir / "other.json").string();
  EXPECT_NE(wait_exit(spawn(job("lr", lr_args), dir / "lr.log")), 0);
  EXPECT_NE(log_of(dir / "lr.log").find("rank 1's config field 'schedule' differs from rank 0's"), std::string::npos)
      << log_of(dir / "lr.log");
  // Rank 1's scratch directory is not the run: its removal is not announced (it said "removed
  // .../.rank1: the run failed before its first step" whenever and wherever the job failed).
  EXPECT_EQ(log_of(dir / "lr.log").find(".rank1: the run failed"), std::string::npos) << log_of(dir / "lr.log");
  std::vector<std::string> steps_args = mpi_train_args(dir, "steps");
  steps_args.insert(steps_args.end(), {"--max-steps", "3"});
  EXPECT_NE(wait_exit(spawn(job("steps", steps_args), dir / "steps.log")), 0);
  EXPECT_NE(log_of(dir / "steps.log").find("rank 1's config field 'train' differs from rank 0's"), std::string::npos)
      << log_of(dir / "steps.log");
  if (!HasFailure()) fs::remove_all(dir);
}

// A scratch directory RUN/.rank1 left by a job whose rank 1 was killed (rank 0 failed; MPI ended
// the rest) is rank 1's own: the next job over that --out removes it (it met "RUN/.rank1: already
// holds a run" from rank 1, though the disk-full message had said to start the run again).
TEST(TrainMpi, AStaleScratchDirectoryOfARankIsNotARun) {
  REQUIRE_MPI();
  const fs::path dir = make_case("stale", R"({"type": "sgd"})", 0.5, 0.0, 2, 2);
  fs::create_directories(dir / "retry" / ".rank1");
  qkv::write_file_atomic((dir / "retry" / ".rank1" / "run.json").string(), log_of(dir / "config.json"));
  ASSERT_EQ(wait_exit(spawn(mpirun(2, mpi_train_args(dir, "retry")), dir / "retry.log")), 0)
      << log_of(dir / "retry.log");
  EXPECT_FALSE(fs::exists(dir / "retry" / ".rank1"));
  if (!HasFailure()) fs::remove_all(dir);
}
