// `qkv info` and the start-up re-exec (util/blas_env.h): with neither OMP_WAIT_POLICY nor
// GOMP_SPINCOUNT set, qkv runs with GOMP_SPINCOUNT=5000 (and OPENBLAS_CORETYPE=SkylakeX on
// AVX-512 machines); a policy the user chose is left as it is.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include <unistd.h>

#include "qkv/kernels/int8.h"
#include "qkv/util/file.h"
#include "ref.h"
#include "run_qkv.h"

namespace fs = std::filesystem;
using qkv::testing::run_qkv;

namespace {
// Sets (or, for nullopt, unsets) environment variables for one scope, then restores them.
class ScopedEnv {
 public:
  explicit ScopedEnv(const std::map<std::string, std::optional<std::string>>& vars) {
    for (const auto& [name, value] : vars) {
      const char* old = std::getenv(name.c_str());
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
      value ? setenv(name.c_str(), value->c_str(), 1) : unsetenv(name.c_str());
    }
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : saved_) value ? setenv(name.c_str(), value->c_str(), 1) : unsetenv(name.c_str());
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

std::string info(const std::map<std::string, std::optional<std::string>>& vars) {
  ScopedEnv env(vars);
  // One directory per test process: ctest runs this binary's tests in parallel, and two of them
  // writing one shared out file read each other's (or an empty) output.
  fs::path dir = fs::path(::testing::TempDir()) / ("qkv_info_cli_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  EXPECT_EQ(run_qkv({"info"}, dir / "log", (dir / "out").string()), 0) << qkv::read_file((dir / "log").string());
  return qkv::read_file((dir / "out").string());
}

// The commands that take --precision, and their arguments with a model that does not exist (the
// eval commands also need --data, which is not read either).
const char* const kInferenceCommands[] = {"translate", "generate", "classify", "embed", "tag",
                                          "answer", "eval-classify", "eval-tag"};
std::vector<std::string> inference_args(const std::string& cmd, const fs::path& model, const char* precision) {
  std::vector<std::string> a{cmd, "--model", model.string(), "--precision", precision};
  if (cmd.rfind("eval-", 0) == 0) a.insert(a.end(), {"--data", (model / "test.tsv").string()});
  return a;
}

}  // namespace

TEST(InfoCli, ReexecAddsTheShortSpinUnlessThePolicyIsSet) {
  const std::string fresh = info({{"QKV_NO_REEXEC", std::nullopt},
                                  {"OMP_WAIT_POLICY", std::nullopt},
                                  {"GOMP_SPINCOUNT", std::nullopt},
                                  {"OPENBLAS_CORETYPE", std::nullopt}});
  EXPECT_NE(fresh.find("no OMP_WAIT_POLICY, GOMP_SPINCOUNT=5000; idle threads spin, then sleep"), std::string::npos)
      << fresh;
  if (__builtin_cpu_supports("avx512f")) {
    EXPECT_NE(fresh.find("OpenBLAS kernels SkylakeX (OPENBLAS_CORETYPE=SkylakeX)"), std::string::npos) << fresh;
  }

  const std::string passive = info({{"QKV_NO_REEXEC", std::nullopt},
                                    {"OMP_WAIT_POLICY", "PASSIVE"},
                                    {"GOMP_SPINCOUNT", std::nullopt}});
  EXPECT_NE(passive.find("OMP_WAIT_POLICY=PASSIVE, no GOMP_SPINCOUNT; idle threads sleep at once"), std::string::npos)
      << passive;

  const std::string own = info({{"QKV_NO_REEXEC", std::nullopt},
                                {"OMP_WAIT_POLICY", std::nullopt},
                                {"GOMP_SPINCOUNT", "0"}});
  EXPECT_NE(own.find("no OMP_WAIT_POLICY, GOMP_SPINCOUNT=0; idle threads sleep at once"), std::string::npos) << own;
}

// The CPU model and oneDNN's ISA with the bf16 kernel it implies; capped to AVX2 (as on a CPU
// without AVX-512), bf16 is reported unavailable.
TEST(InfoCli, ReportsTheCpuAndTheBf16Kernel) {
  const std::string fresh = info({{"ONEDNN_MAX_CPU_ISA", std::nullopt}});
  EXPECT_NE(fresh.find("cpu              "), std::string::npos) << fresh;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512bf16")) {
    EXPECT_TRUE(fresh.find("(detected); bf16 GEMM AVX512_BF16") != std::string::npos ||
                fresh.find("(detected); bf16 GEMM AMX") != std::string::npos)
        << fresh;
  }
  const std::string capped = info({{"ONEDNN_MAX_CPU_ISA", "AVX2"}});
  EXPECT_NE(capped.find("oneDNN ISA       avx2 (ONEDNN_MAX_CPU_ISA=AVX2); bf16 GEMM none (bf16 unavailable"),
            std::string::npos)
      << capped;
}

// Which library runs the fp32 products: oneDNN for the large ones it is faster at, where it has AVX-512, unless
// QKV_F32_GEMM says openblas; capped to AVX2 (a CPU without AVX-512) every product is OpenBLAS's.
TEST(InfoCli, ReportsTheFp32GemmBackend) {
  const std::string fresh = info({{"ONEDNN_MAX_CPU_ISA", std::nullopt}, {"QKV_F32_GEMM", std::nullopt}});
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) {
    EXPECT_NE(fresh.find("fp32 GEMM        oneDNN's f32 matmul for products of >= 2^23 multiply-adds with B "
                         "transposed or N <= 1024, OpenBLAS for the rest (default;"),
              std::string::npos)
        << fresh;
  }
  const std::string blas = info({{"ONEDNN_MAX_CPU_ISA", std::nullopt}, {"QKV_F32_GEMM", "openblas"}});
  EXPECT_NE(blas.find("fp32 GEMM        OpenBLAS for every product (QKV_F32_GEMM=openblas)"), std::string::npos) << blas;
  const std::string capped = info({{"ONEDNN_MAX_CPU_ISA", "AVX2"}, {"QKV_F32_GEMM", std::nullopt}});
  EXPECT_NE(capped.find("fp32 GEMM        OpenBLAS for every product (oneDNN has no AVX-512 here)"), std::string::npos)
      << capped;
}

// OPENBLAS_CORETYPE=SkylakeX (as in a command copied from an AVX-512 machine): where the CPU has
// AVX-512 qkv runs as ever; where it has not, qkv stops at once with the reason and the fix, where
// OpenBLAS would have died of an illegal instruction at the first product.
TEST(InfoCli, AnAvx512CoretypeOnACpuWithoutItIsAClearError) {
  ScopedEnv env({{"OPENBLAS_CORETYPE", std::optional<std::string>("SkylakeX")}});
  fs::path dir = fs::path(::testing::TempDir()) / ("qkv_info_coretype_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const int rc = run_qkv({"info"}, dir / "log", (dir / "out").string());
  const std::string log = qkv::read_file((dir / "log").string());
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) {
    EXPECT_EQ(rc, 0) << log;
  } else {
    EXPECT_EQ(rc, 2) << log;
    EXPECT_NE(log.find("qkv: error: OPENBLAS_CORETYPE=SkylakeX forces OpenBLAS kernels that need AVX-512, which "
                       "this CPU does not have"),
              std::string::npos)
        << log;
  }
}

// --precision bf16 on a CPU without AMX or AVX512_BF16 (oneDNN capped to AVX2, as on such a CPU):
// every inference command refuses before it loads anything, naming the command, the ISA and the
// fix (the model directory does not even exist: the precision is checked first).
TEST(InfoCli, Bf16OnACappedIsaIsAClearErrorInEveryInferenceCommand) {
  ScopedEnv env(std::map<std::string, std::optional<std::string>>{{"ONEDNN_MAX_CPU_ISA", "AVX2"}});
  fs::path dir = fs::path(::testing::TempDir()) / ("qkv_precision_cli_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const std::string cmd : kInferenceCommands) {
    const fs::path log = dir / (cmd + ".log");
    EXPECT_NE(run_qkv(inference_args(cmd, dir / "no-such-model", "bf16"), log), 0) << cmd;
    const std::string err = qkv::read_file(log.string());
    EXPECT_NE(err.find("qkv " + cmd + " --precision bf16: bf16 needs AMX or AVX512_BF16, but oneDNN runs 'avx2'"),
              std::string::npos) << err;
    EXPECT_NE(err.find("Use precision fp32"), std::string::npos) << err;
  }
}

// The measured product speeds: positive rates, and bf16 products as fp32 FMA on rounded operands
// exactly when the printed native bf16 rate is below the fp32 one (bf16 is slower than fp32 on some
// AVX512_BF16 CPUs); QKV_BF16_PRODUCTS chooses instead, and a bad value is an error naming it.
TEST(InfoCli, MeasuresTheProductSpeedAndSaysWhenBf16IsSlower) {
  const std::string out = info({{"QKV_BF16_PRODUCTS", std::nullopt}});
  const size_t at = out.find("matmul speed     fp32 ");
  ASSERT_NE(at, std::string::npos) << out;
  const std::string line = out.substr(at, out.find('\n', at) - at);
  double f32 = 0, b16 = 0;
  if (line.find("bf16 unavailable") != std::string::npos) {
    ASSERT_EQ(std::sscanf(line.c_str(), "matmul speed     fp32 %lf GFLOP/s", &f32), 1) << line;
    EXPECT_GT(f32, 0) << line;
    return;
  }
  ASSERT_EQ(std::sscanf(line.c_str(), "matmul speed     fp32 %lf GFLOP/s, bf16 %lf GFLOP/s", &f32, &b16), 2) << line;
  EXPECT_GT(f32, 0) << line;
  EXPECT_GT(b16, 0) << line;
  if (b16 != f32) {  // printed rounded: equal figures may hide either order
    const std::string want = std::string("bf16 products    ") + (b16 < f32 ? "fp32_fma" : "native") +
                             " (no QKV_BF16_PRODUCTS: the faster)";
    EXPECT_NE(out.find(want), std::string::npos) << out;
  }
  for (const char* how : {"native", "fp32_fma"}) {
    const std::string chosen = info({{"QKV_BF16_PRODUCTS", how}});
    EXPECT_NE(chosen.find(std::string("bf16 products    ") + how + " (QKV_BF16_PRODUCTS=" + how + ")"),
              std::string::npos)
        << chosen;
    // The attention tiles follow the choice: under native, AMX where oneDNN found it, else vdpbf16ps.
    const bool amx = chosen.find("bf16 GEMM AMX") != std::string::npos;
    const std::string tiles = std::string(how) == "fp32_fma" ? "fp32_fma" : amx ? "AMX" : "AVX512_BF16";
    EXPECT_NE(chosen.find("bf16 attention   " + tiles + " tiles"), std::string::npos) << chosen;
  }
  ScopedEnv bad(std::map<std::string, std::optional<std::string>>{{"QKV_BF16_PRODUCTS", "fast"}});
  const fs::path log = fs::path(::testing::TempDir()) / ("qkv_info_cli_bad_" + std::to_string(::getpid()));
  EXPECT_NE(run_qkv({"info"}, log), 0);
  const std::string err = qkv::read_file(log.string());
  EXPECT_NE(err.find("QKV_BF16_PRODUCTS: expected native, fp32_fma or auto, got 'fast'"), std::string::npos) << err;
}

// --precision int8 without AVX512-VNNI or AMX (oneDNN capped to plain AVX-512, whose int8 kernels
// sum pairs of products in saturating 16 bits): every inference command takes it (and fails only
// on the missing model), and `qkv info` names qkv's own kernel; uncapped on a VNNI CPU, oneDNN's.
TEST(InfoCli, Int8WithoutVnniRunsOnQkvsOwnKernelInEveryInferenceCommand) {
  if (!qkv::kernels::int8_supported()) GTEST_SKIP() << "no int8 kernel in this build";
  {
    ScopedEnv env(std::map<std::string, std::optional<std::string>>{{"ONEDNN_MAX_CPU_ISA", "AVX512_CORE"}});
    fs::path dir = fs::path(::testing::TempDir()) / ("qkv_int8_cli_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    for (const std::string cmd : kInferenceCommands) {
      const fs::path log = dir / (cmd + ".log");
      EXPECT_NE(run_qkv(inference_args(cmd, dir / "no-such-model", "int8"), log), 0) << cmd;
      const std::string err = qkv::read_file(log.string());
      EXPECT_EQ(err.find("int8 needs"), std::string::npos) << err;
      EXPECT_NE(err.find("no-such-model"), std::string::npos) << err;
    }
  }
  // The instructions qkv's kernel was built for (the build's -march, which this file shares).
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
  const std::string own = "AVX512-VNNI";
#else
  const std::string own = "AVX2";
#endif
  const std::string capped = info({{"ONEDNN_MAX_CPU_ISA", "AVX512_CORE"}});
  EXPECT_NE(capped.find("int8 products    qkv's own kernel for every batch, " + own + " (exact int32 sums)"),
            std::string::npos) << capped;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512vnni")) {
    const std::string fresh = info({{"ONEDNN_MAX_CPU_ISA", std::nullopt}, {"QKV_INT8_MIN_WEIGHT", "1000"}});
    EXPECT_TRUE(fresh.find("int8 products    AVX512-VNNI (exact int32 sums); --precision int8 quantizes weights of "
                           ">= 1000 values") != std::string::npos ||
                fresh.find("int8 products    AMX") != std::string::npos)
        << fresh;
    const std::string rows = info({{"ONEDNN_MAX_CPU_ISA", std::nullopt}, {"QKV_INT8_SMALL_WEIGHT_ROWS", "7"}});
    EXPECT_NE(rows.find("and those of >= 65536 for products of >= 7 rows\n"), std::string::npos) << rows;
    const std::string never = info({{"ONEDNN_MAX_CPU_ISA", std::nullopt}, {"QKV_INT8_SMALL_WEIGHT_ROWS", "0"}});
    EXPECT_NE(never.find("values; smaller ones stay fp32\n"), std::string::npos) << never;
    ScopedEnv bad({{"ONEDNN_MAX_CPU_ISA", std::nullopt}, {"QKV_INT8_SMALL_WEIGHT_ROWS", "many"}});
    const fs::path dir = fs::path(::testing::TempDir()) / ("qkv_info_cli_rows_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    EXPECT_NE(run_qkv({"info"}, dir / "log", (dir / "out").string()), 0);
    const std::string err = qkv::read_file((dir / "log").string());
    EXPECT_NE(err.find("QKV_INT8_SMALL_WEIGHT_ROWS: expected a row count >= 0 (0: never), got 'many'"),
              std::string::npos) << err;
  }
}

// Output that never arrived is a failure: stdout on a full device exits non-zero and says so,
// for a command's output and for --help alike.
TEST(CliOutput, AFullStdoutIsAnError) {
  const fs::path log = fs::path(::testing::TempDir()) / ("qkv_full_stdout_" + std::to_string(getpid()) + ".log");
  for (const std::vector<std::string>& args : {std::vector<std::string>{"info"}, {"--help"}, {"bleu", "--help"}}) {
    EXPECT_EQ(run_qkv(args, log, "/dev/full"), 1) << args[0];
    const std::string err = qkv::read_file(log.string());
    EXPECT_NE(err.find("stdout: write failed (No space left on device)"), std::string::npos) << args[0] << ": " << err;
    EXPECT_EQ(run_qkv(args, log, "/dev/null"), 0) << args[0];
  }
  fs::remove(log);
}
