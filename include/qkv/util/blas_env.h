// qkv/util/blas_env.h - the OpenBLAS / OpenMP settings qkv programs run with.
#pragma once

namespace qkv {

// OpenBLAS 0.3.21 (Debian 12) does not recognise recent Xeons and falls back to its SSE3
// kernels, about 4x slower (and summing in another order); it reads OPENBLAS_CORETYPE when it
// loads, before main(). So on an AVX-512 machine where the user set neither OPENBLAS_CORETYPE
// nor QKV_NO_REEXEC, this re-executes the program (/proc/self/exe, same argv) once with
// OPENBLAS_CORETYPE=SkylakeX and, unless set, OMP_WAIT_POLICY=PASSIVE (spinning threads lose
// badly on shared or busy machines). Otherwise, or if exec fails, it returns. Call it first in main().
void reexec_with_blas_settings(char** argv);

}  // namespace qkv
