// OPENBLAS_CORETYPE against the CPU (qkv/util/blas_env.h): a forced kernel family the CPU cannot
// run is an error that names the setting, what it needs and the fix; anything it can run, or a
// name qkv does not judge, passes as before.
#include <gtest/gtest.h>

#include <string>

#include "qkv/util/blas_env.h"

namespace qkv {
namespace {

constexpr CpuVectorIsa kAvx2Cpu{true, true, false}, kAvx512Cpu{true, true, true}, kSseCpu{false, false, false};

TEST(BlasCoretype, AvxFiveTwelveFamiliesNeedAvxFiveTwelve) {
  for (const char* name : {"SkylakeX", "skylakex", "COOPERLAKE", "SapphireRapids"}) {
    const std::string e = blas_coretype_error(name, kAvx2Cpu);
    EXPECT_NE(e.find(std::string("OPENBLAS_CORETYPE=") + name + " forces OpenBLAS kernels that need AVX-512"),
              std::string::npos)
        << e;
    EXPECT_NE(e.find("unset OPENBLAS_CORETYPE"), std::string::npos) << e;
    EXPECT_EQ(blas_coretype_error(name, kAvx512Cpu), "") << name;
  }
}

TEST(BlasCoretype, AvxTwoAndAvxFamiliesNeedTheirExtensions) {
  for (const char* name : {"Haswell", "zen"}) {
    EXPECT_NE(blas_coretype_error(name, kSseCpu).find("need AVX2,"), std::string::npos) << name;
    EXPECT_EQ(blas_coretype_error(name, kAvx2Cpu), "") << name;
  }
  EXPECT_NE(blas_coretype_error("Sandybridge", kSseCpu).find("need AVX,"), std::string::npos);
  EXPECT_EQ(blas_coretype_error("Sandybridge", CpuVectorIsa{true, false, false}), "");
}

TEST(BlasCoretype, UnsetOrOtherNamesPass) {
  EXPECT_EQ(blas_coretype_error(nullptr, kSseCpu), "");
  for (const char* name : {"", "Prescott", "Nehalem", "SkylakeXX", "skylake"})
    EXPECT_EQ(blas_coretype_error(name, kSseCpu), "") << name;
}

TEST(BlasCoretype, ThisCpuIsReadConsistently) {
  const CpuVectorIsa cpu = this_cpu_vector_isa();
  EXPECT_TRUE(!cpu.avx512f || cpu.avx2) << "AVX-512 without AVX2";
  EXPECT_TRUE(!cpu.avx2 || cpu.avx) << "AVX2 without AVX";
}

}  // namespace
}  // namespace qkv
