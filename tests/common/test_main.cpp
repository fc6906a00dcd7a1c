// main() of every test binary: GoogleTest's, after qkv's OpenBLAS settings (the qkv program's
// own re-exec), so that a bare `ctest` or `build/tests/test_x` computes with the same BLAS
// kernels, and so in the same summation order, as scripts/test.sh and the qkv command.
#include <gtest/gtest.h>

#include "qkv/util/blas_env.h"

int main(int argc, char** argv) {
  qkv::reexec_with_blas_settings(argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
