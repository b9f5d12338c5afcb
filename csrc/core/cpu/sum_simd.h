// Sums (and products, logsumexp, extrema) of contiguous runs and columns on the CPU with explicit
// vectors: float32, float16 and bfloat16 in float, float64 in double, int64 in int64; whole float32
// sums in double after groups of eight (f32_wide), whole float64 sums compensated
// (f64_compensated). GCC did not vectorise the generic loop well (16-bit floats stayed scalar;
// float32 reached 0.6-0.9x of torch.sum), so these loops name their vectors (GCC/Clang vector
// extensions). sum_simd.cpp builds them for the baseline x86-64 ISA and again for AVX2 + F16C, and
// picks at run time, as torch's own kernels do. Both builds add the same lanes in the same order
// (32 float lanes, 16 of double or int64; a cascade of 16 rows into a second level, 16 of those
// into a third, as torch's cascade_sum; then a fixed tree over the lanes), so the bits do not
// depend on the CPU, nor on the thread count.
#pragma once

#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define TREDUCE_MXCSR 1
#else
#define TREDUCE_MXCSR 0
#endif

namespace treduce {
struct ExactAcc;
}

namespace treduce::cpu::simd {

// Subnormals kept for a scope: x86's flush-to-zero and denormals-are-zero bits, which
// torch.set_flush_denormal(True) sets on its thread, cleared and then restored. The exact sum
// needs them off in its lanes and in its result's conversions: with them on, a float32 sum of
// subnormals came back 0. (Elsewhere no such mode is set: torch's call returns false.)
class KeepSubnormals {
 public:
  KeepSubnormals() {
#if TREDUCE_MXCSR
    if (csr_ & kBits) _mm_setcsr(csr_ & ~kBits);
#endif
  }
  ~KeepSubnormals() {
#if TREDUCE_MXCSR
    if (csr_ & kBits) _mm_setcsr(csr_);
#endif
  }
  KeepSubnormals(const KeepSubnormals&) = delete;
  KeepSubnormals& operator=(const KeepSubnormals&) = delete;

 private:
#if TREDUCE_MXCSR
  static constexpr unsigned kBits = 0x8040;  // FTZ (bit 15) and DAZ (bit 6)
  const unsigned csr_ = _mm_getcsr();
#endif
};

// A sum kept as two doubles, hi + lo (lo: the rounding errors of hi's additions).
struct DoubleDouble {
  double hi, lo;
};

// A run's sums of d = x - c and of d * d (var's second pass), in double.
struct Moments {
  double sum, sq;
};

template <class T>
struct Extrema {
  T min, max;
};

// logsumexp's parts of a run: its maximum and the sum of exp(x - max).
template <class T>
struct ExpSum {
  T max, sum;
};

inline constexpr int kExactShortLevels = 5;        // exact_short's levels at most
inline constexpr int64_t kExactShortMax = 2048;    // and its elements at most (one block)
// exact_columns' columns a group for elements of `bytes` bytes: a 64-byte line of a row (two for
// float64, whose stats take 128 bytes at a time).
constexpr int exact_columns_of(int bytes) { return bytes == 8 ? 16 : 64 / bytes; }

// The largest and smallest nonzero magnitude of the elements exact_columns has seen, as bit
// patterns of their format (amax 0: none yet): its guess of the next block's plan.
struct ExactColumnsSeen {
  uint64_t amax = 0, amin_nz = 0;
};

// The kernels of one element type: In its storage (16-bit floats as their bits), S the type its
// sums are taken in, E the type of its extrema. A null entry has no kernel (sums of 8- to 32-bit
// integers, exact sums of integers): reduce_cpu.cpp asks only for those its ops have.
template <class In, class S, class E>
struct TypeKernels {
  // Sums of `rows` runs of n elements, the r-th at x + r * ld, into out[r]; one run is rows = 1.
  // Short runs (rows of 128 elements) a call, not a call each: the call and the cascade's outer
  // levels cost as much as reading them. sum: the elements as they are (int64 wraps, as torch's
  // sum); nansum: NaN as 0; sumsq: squared (vector_norm, ord 2); sumabs: magnitudes (ord 1).
  // The same lanes and cascade each; prod the same lanes, multiplied.
  void (*sum)(const In*, int64_t n, int64_t rows, int64_t ld, S* out);
  void (*nansum)(const In*, int64_t n, int64_t rows, int64_t ld, S* out);
  void (*sumsq)(const In*, int64_t n, int64_t rows, int64_t ld, S* out);
  void (*sumabs)(const In*, int64_t n, int64_t rows, int64_t ld, S* out);
  void (*prod)(const In*, int64_t n, int64_t rows, int64_t ld, S* out);  // the product (floats)
  // Floating and int64 sums (nansum, floats: NaN as 0) of `width` adjacent columns over `rows`
  // rows, row r at x + r * ld, into out[0, width): each column's rows in groups of 16 added into a first level,
  // each group's sum then into out. reduce_cpu.cpp's generic columns loop adds in that order, so
  // the bits are the same; that loop converted 16-bit floats one element at a time (a sum over
  // dim 0 of (12, 272000) float16 at a quarter of torch's speed on 2 threads).
  void (*sum_columns)(const In*, int64_t ld, int64_t rows, int64_t width, S* out);
  void (*nansum_columns)(const In*, int64_t ld, int64_t rows, int64_t width, S* out);
  // The products of such columns (floating types): groups of 16 rows, then into out.
  void (*prod_columns)(const In*, int64_t ld, int64_t rows, int64_t width, S* out);
  // variant="exact": the run's elements added into *acc, exactly (exact.h), the same words on
  // every instruction set.
  void (*exact)(const In*, int64_t, ExactAcc*);
  // The same for a run of n <= kExactShortMax elements with no accumulator: its exact sum as at
  // most kExactShortLevels doubles (their count returned; 0: take `exact`), *in_double telling
  // whether adding them in order is exact (then that double is the run's exact sum).
  int (*exact_short)(const In*, int64_t n, double* levels, bool* in_double);
  // The same for each of exact_columns_of(sizeof(In)) adjacent columns over rows <= kExactShortMax
  // rows, row r at x + r * ld: column c's level s into levels[s * columns + c]; one count for all.
  // *seen: the range of the blocks before (zero-initialised for none), widened by this one.
  int (*exact_columns)(const In*, int64_t ld, int64_t rows, double* levels, bool* in_double, ExactColumnsSeen* seen);
  // Extrema of `rows` runs of n >= 1 elements (as sum), NaN winning (NaN, both halves, when the
  // run has one): [0] the minimum, [1] the maximum, [2] both (the others' unused half is the
  // type's top or bottom); 16-bit floats as floats. Lanes are free here: nothing rounds.
  void (*extremum[3])(const In*, int64_t n, int64_t rows, int64_t ld, Extrema<E>* out);
  // The same over `rows` rows of `width` adjacent columns, row r at x + r * ld, into out[0, width).
  void (*extremum_columns[3])(const In*, int64_t ld, int64_t rows, int64_t width, Extrema<E>* out);
  // The same, one extremum ([0] the minimum, [1] the maximum), each column's straight into
  // out[j] (amax and amin over columns: their accumulators, or the result itself).
  void (*extremum_columns_to[2])(const In*, int64_t ld, int64_t rows, int64_t width, E* out);
  // The first position of an element equal to v (of a NaN when v is NaN) in a run; n if none.
  int64_t (*find)(const In*, int64_t, E v);
  // logsumexp of a floating run of n >= 1 elements, in S (NaN winning the maximum; an infinite
  // or NaN maximum has the sum 1, or 0 for -inf).
  ExpSum<S> (*exp_sum)(const In*, int64_t);
  // The same for `rows` runs of n >= 1 elements, the r-th at x + r * ld, into out[r]: short runs
  // a block a call (the same bits as exp_sum on each).
  void (*exp_sum_rows)(const In*, int64_t n, int64_t rows, int64_t ld, ExpSum<S>* out);
  // The same over `rows` rows of `width` adjacent columns, row r at x + r * ld, into out[0, width).
  void (*exp_sum_columns)(const In*, int64_t ld, int64_t rows, int64_t width, ExpSum<S>* out);
  // var's second pass over a floating run about its first pass's mean c: 16 double lanes in
  // the cascade's levels, then their tree, then the last n % 16 elements in order.
  Moments (*deviations)(const In*, int64_t n, double c);
  // How many elements of each of `rows` runs (as sum) are not zero (any, all, count_nonzero):
  // compared as integers of the element's width, a float's sign bit masked off (-0.0 is zero,
  // NaN is not).
  void (*nonzero)(const In*, int64_t n, int64_t rows, int64_t ld, int64_t* out);
};

struct SumKernels {
  TypeKernels<float, float, float> f32;
  TypeKernels<double, double, double> f64;
  TypeKernels<uint16_t, float, float> f16, bf16;
  TypeKernels<int64_t, int64_t, int64_t> i64;
  TypeKernels<int32_t, int64_t, int32_t> i32;
  TypeKernels<int16_t, int64_t, int16_t> i16;
  TypeKernels<int8_t, int64_t, int8_t> i8;
  TypeKernels<uint8_t, int64_t, uint8_t> u8;
  // Whole tensors' sums of one run: float32 with a float32 result in double (sum_f32_wide),
  // float64 with a float64 result compensated (sum_f64_compensated).
  double (*f32_wide)(const float*, int64_t);
  DoubleDouble (*f64_compensated)(const double*, int64_t);
  // float32 to float16 bits, rounded to the nearest even (past the range to infinity, NaN to a
  // quiet NaN of its sign), as c10::Half's conversion: the results of float16 reductions. That
  // conversion, one element at a time, took 3 ns an element (amin over dim 0 of (12, 272000)
  // float16: most of its 1.5 ms on 2 threads).
  void (*f16_from_f32)(const float*, int64_t n, uint16_t* out);
  // The other way, float16 bits to float32 (exact): reduce_cpu.cpp's generic loops convert a
  // block of float16 elements through it before reducing them. Their own conversion, with no
  // F16C in the baseline build, took 0.6-2.7 ns an element (a 2-norm of a (256, 128,
  // 64)[..., ::3] float16, all of it, at half torch's speed on 2 threads).
  void (*f32_from_f16)(const uint16_t*, int64_t n, float* out);
};

// The kernels for this CPU, chosen once.
const SumKernels& sum_kernels();

}  // namespace treduce::cpu::simd
