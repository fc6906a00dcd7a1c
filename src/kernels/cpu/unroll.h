// QKV_UNROLL: unroll a loop over a register tile's rows or columns (a compile-time count) in full.
//
// GCC 12 at -O3 keeps an array of vector accumulators (`__m256 acc[G][2]`) in memory when a loop it
// has not yet unrolled indexes it, and then stores every accumulator to the stack on every step of
// the k loop as well as keeping it in a register. The fp32 panels' AVX2 tile_half<6> did 12 ymm
// stores per k step for its 12 FMAs (objdump), which bound it at about half of the FMA peak: on AMD
// EPYC Zen 1 it ran at 22 GFLOP/s on one core, with the pragma at 42-46 (OpenBLAS sgemm: 25-40).
// The pragma unrolls these loops before scalar replacement runs, so the array lives in registers.
// It changes no arithmetic: the same operations in the same order, the same bits.
#pragma once

#define QKV_UNROLL _Pragma("GCC unroll 16")
