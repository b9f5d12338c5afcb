// sum_simd.h's loops built twice: for the baseline instruction set, and (x86-64 with GCC) for
// AVX2 + F16C, chosen at run time. FMA stays off: the loops only add, and no build
// may contract differently from the other.
#include "sum_simd.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "../exact.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define TREDUCE_SIMD_X86 1
#else
#define TREDUCE_SIMD_X86 0
#endif

namespace treduce::cpu::simd {

namespace base {
#define TREDUCE_SIMD_BYTES 16
#define TREDUCE_SIMD_AVX2 0
#include "sum_simd_impl.h"
#undef TREDUCE_SIMD_AVX2
#undef TREDUCE_SIMD_BYTES
}  // namespace base

#if TREDUCE_SIMD_X86
#pragma GCC push_options
#pragma GCC target("avx2,f16c")
namespace avx2 {
#define TREDUCE_SIMD_BYTES 32
#define TREDUCE_SIMD_AVX2 1
#include "sum_simd_impl.h"
#undef TREDUCE_SIMD_AVX2
#undef TREDUCE_SIMD_BYTES
}  // namespace avx2
#pragma GCC pop_options
#endif

// TREDUCE_CPU_ISA=base in the environment keeps the baseline build (the tests compare the two).
const SumKernels& sum_kernels() {
  static const SumKernels chosen = [] {
#if TREDUCE_SIMD_X86
    const char* isa = std::getenv("TREDUCE_CPU_ISA");
    const bool base_only = isa != nullptr && std::strcmp(isa, "base") == 0;
    if (!base_only && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c")) return avx2::kernels();
#endif
    return base::kernels();
  }();
  return chosen;
}

}  // namespace treduce::cpu::simd
