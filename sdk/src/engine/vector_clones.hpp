#pragma once
// PRIVDIFF_VECTOR_CLONES before a hot loop function: GCC compiles it three times (AVX-512, AVX2 and
// the x86-64 baseline the build targets) and the loader picks the one the CPU runs (function
// multiversioning). The noise generator is ~4x faster with AVX-512 than with baseline SSE2. Every
// version computes the same bits: integer operations, and IEEE-exact floating-point ones with no
// contraction into fused multiply-adds (normal_transform.cpp is built with -ffp-contract=off).
// Elsewhere (other compilers, other CPUs) the baseline alone.

#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11 && defined(__x86_64__) && defined(__linux__)
#define PRIVDIFF_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define PRIVDIFF_VECTOR_CLONES
#endif
