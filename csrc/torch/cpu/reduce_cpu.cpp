// The ops on CPU tensors: the seeds' serial loop and seed 003's pairwise recursion (full sums),
// and `auto`, our multi-threaded, vectorisable version of every op, over any dims.
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "../../core/convert.h"
#include "../../core/exact.h"
#include "../reduce_common.h"
#include "../../core/reduce_ops.h"
#include "../../core/reductions.h"
#include "../../core/cpu/sum_simd.h"
#include "lowp.h"

namespace treduce {

namespace cpu {
namespace {

template <DType D> using ctype_t = ctype_with<D, c10::Half, c10::BFloat16>;

enum class Variant { Serial, Pairwise, Auto, Exact };

constexpr VariantDoc kDocs[] = {
    {"serial", "serial_sum (torch/cpu/reduce_cpu.cpp)", "one loop, one accumulator",
     "000, 002, 003 (the CPU loop)", "first rung", false},
    {"pairwise", "pairwise_sum (torch/cpu/reduce_cpu.cpp)",
     "recursive halving: each half summed recursively, then the two added",
     "003 recursiveReduce", "rounding error grows with log n instead of n", false},
    {"auto", "reduce_auto (torch/cpu/reduce_cpu.cpp), sum_simd.cpp",
     "64K-element chunks on all threads, each a cascade of independent lanes (sums of float, "
     "16-bit float, double and int64 runs in explicit vectors, AVX2 + F16C where the CPU has them; "
     "whole float32 sums in double lanes after groups of eight in float, whole float64 sums "
     "compensated by two-sums; nansum, 2-norms, products, logsumexp, extrema, non-zero counts and var "
     "(two passes: the sum, then the deviations and their squares in double lanes) of runs in vectors "
     "too, short rows a block a call); over other dims, strips of 16 KB of outputs by segments of 256 rows, "
     "16 rows at a time into registers (logsumexp and extrema: vector kernels of columns); partials "
     "combined in a fixed order",
     "-", "threads and SIMD; whole float sums more accurate than torch's cascade (float32 0.2-0.8x "
     "its error), over dims as accurate; the same bits on any thread count and instruction set; "
     "every op, any dims", false},
    {"exact", "exact_sum (torch/cpu/reduce_cpu.cpp), ExactAcc (exact.h)",
     "floats: each element added into a fixed-point accumulator as wide as the doubles (no rounding), "
     "the sum rounded once to the result dtype, to nearest even; integers: auto, which is exact",
     "-", "correctly rounded: the same bits for any order, split or thread count; any dims", false},
};

template <class In, class Mid, class Acc>
Acc serial_sum(const In* x, int64_t n) {
  Acc s = Acc(0);
  for (int64_t i = 0; i < n; ++i) s += Load<In, Mid, Acc>::apply(x[i]);
  return s;
}

// Seed 003 folded the upper half onto the lower half in place, overwriting
// the input and dropping the last element of odd sizes. Recursing on the two
// halves builds the same kind of balanced tree from a read-only input; the
// recursion stops at 8 elements so calls do not dominate.
template <class In, class Mid, class Acc>
Acc pairwise_sum(const In* x, int64_t n) {
  if (n <= 8) return serial_sum<In, Mid, Acc>(x, n);
  const int64_t half = n / 2;
  return pairwise_sum<In, Mid, Acc>(x, half) + pairwise_sum<In, Mid, Acc>(x + half, n - half);
}

// The same tree over values already in the accumulator, for any operator: n partial results
// spaced `stride` apart, combined in index order.
template <class Op, class Acc>
Acc pairwise_combine(const Acc* x, int64_t n, int64_t stride = 1) {
  if (n == 1) return x[0];
  const int64_t half = n / 2;
  return Op::combine(pairwise_combine<Op>(x, half, stride), pairwise_combine<Op>(x + half * stride, n - half, stride));
}

// Elements per parallel task. Partial results are combined in a fixed order,
// so the result is the same bits whatever the number of threads.
constexpr int64_t kChunk = int64_t(1) << 16;

// A float32 sum with a float32 result, whole tensors: accumulated in double (sum_simd.h's
// sum_f32_wide on runs; element by element otherwise), rounded to float once. Its own type, not
// SumOp<double>: a float64 result (dtype=torch.float64) converts every element before adding.
struct WideFloatSumOp : SumOp<double> {};

// A float64 sum with a float64 result, whole tensors: hi + lo pairs (sum_simd.h's
// sum_f64_compensated on runs), combined across chunks by two-sums, rounded once at the end.
// Plain double partials of N(0, 1) data lost up to a few ulps where they grew (2^22 to 2^26
// elements; the chunks' combine most); these keep them.
struct CompensatedSumOp {
  using value_t = double;
  using acc_t = simd::DoubleDouble;
  static constexpr int kOutputs = 1;
  static acc_t identity() { return {0.0, 0.0}; }
  static acc_t combine(acc_t a, acc_t b) {
    const double s = a.hi + b.hi, bb = s - a.hi;
    return {s, (a.hi - (s - bb)) + (b.hi - bb) + (a.lo + b.lo)};
  }
  static acc_t reduce(acc_t a, double v) { return combine(a, {v, 0.0}); }
  // An infinite hi makes its two-sums' errors NaN: then hi alone (inf, or NaN for inf - inf).
  static double project(acc_t v, const ProjectArgs& a) {
    return finalize(repeated_sum(std::isfinite(v.hi) ? v.hi + v.lo : v.hi, a.repeats), a.count);
  }
};

// A contiguous run of a sum that sum_simd.h has a kernel for (the elements read as they are).
template <class In, class Mid, class Op>
inline constexpr bool kSimdSum =
    std::is_same_v<In, Mid> &&
    ((std::is_same_v<Op, WideFloatSumOp> && std::is_same_v<In, float>) ||
     (std::is_same_v<Op, CompensatedSumOp> && std::is_same_v<In, double>) ||
     (std::is_same_v<Op, SumOp<float>> &&
      (std::is_same_v<In, float> || std::is_same_v<In, c10::Half> || std::is_same_v<In, c10::BFloat16>)) ||
     (std::is_same_v<Op, SumOp<double>> && std::is_same_v<In, double>) ||
     (std::is_same_v<Op, SumOp<int64_t>> && std::is_same_v<In, int64_t>));

// The type sum_simd's float kernels work in for a floating element type: double for double,
// float for the others.
template <class In>
using simd_float_t = std::conditional_t<std::is_same_v<In, double>, double, float>;

// A floating element type with A the type sum_simd's float kernels work in for it.
template <class In, class A>
inline constexpr bool kSimdFloat =
    (std::is_same_v<In, float> || std::is_same_v<In, c10::Half> || std::is_same_v<In, c10::BFloat16> ||
     std::is_same_v<In, double>) &&
    std::is_same_v<A, simd_float_t<In>>;

// nansum and vector_norm (ord 2 and 1) of contiguous floating runs: sum_simd's cascade over
// NaN-as-0, squared or absolute elements (the generic loop: 0.5-0.8x torch.nansum's and
// vector_norm's speed; ord 1 of 65536 float16, 2 threads: 61 us, a vector of 4 converted without
// F16C and 16 scalar sums, torch 49-62).
template <class In, class Mid, class Op>
inline constexpr bool kSimdSumOf =
    std::is_same_v<In, Mid> &&
    (std::is_same_v<Op, NanSumOp<typename Op::acc_t>> || std::is_same_v<Op, NormOp<typename Op::acc_t, NormOrd::Two>> ||
     std::is_same_v<Op, NormOp<typename Op::acc_t, NormOrd::One>>) &&
    kSimdFloat<In, typename Op::acc_t>;

// Floating sums and nansums of columns (the same order as the generic loop's: the same bits),
// and int64 sums (wrapping: any order).
template <class In, class Mid, class Op>
inline constexpr bool kSimdColumnSums =
    (std::is_same_v<In, Mid> && kSimdFloat<In, typename Op::acc_t> &&
     (std::is_same_v<Op, SumOp<typename Op::acc_t>> || std::is_same_v<Op, NanSumOp<typename Op::acc_t>>)) ||
    (std::is_same_v<In, int64_t> && std::is_same_v<Mid, int64_t> && std::is_same_v<Op, SumOp<int64_t>>);

// A contiguous floating run's product: sum_simd's Product.
template <class In, class Mid, class Op>
inline constexpr bool kSimdProd =
    std::is_same_v<In, Mid> && std::is_same_v<Op, ProdOp<typename Op::acc_t>> &&
    kSimdFloat<In, typename Op::acc_t>;

// A contiguous run of a sum that sum_simd.h takes `rows` runs at a time (whole tensors' float32
// and float64 sums excepted: one run each).
template <class In, class Mid, class Op>
inline constexpr bool kSimdRows = (kSimdSum<In, Mid, Op> && !std::is_same_v<Op, WideFloatSumOp> &&
                                   !std::is_same_v<Op, CompensatedSumOp>) ||
                                  kSimdSumOf<In, Mid, Op> || kSimdProd<In, Mid, Op>;

// This CPU's sum_simd kernels for elements of type In, and a run of In as they take it (16-bit
// floats as their bits, bool as its bytes: uint8's table): one table a type, for every entry
// point below.
template <class In>
const auto& kernels_of() {
  const simd::SumKernels& k = simd::sum_kernels();
  if constexpr (std::is_same_v<In, float>) return k.f32;
  else if constexpr (std::is_same_v<In, double>) return k.f64;
  else if constexpr (std::is_same_v<In, c10::Half>) return k.f16;
  else if constexpr (std::is_same_v<In, c10::BFloat16>) return k.bf16;
  else if constexpr (std::is_same_v<In, int64_t>) return k.i64;
  else if constexpr (std::is_same_v<In, int32_t>) return k.i32;
  else if constexpr (std::is_same_v<In, int16_t>) return k.i16;
  else if constexpr (std::is_same_v<In, int8_t>) return k.i8;
  else return k.u8;
}
template <class In>
auto simd_run(const In* x) {
  if constexpr (Lowp<In>::value) return reinterpret_cast<const uint16_t*>(x);
  else if constexpr (std::is_same_v<In, bool>) return reinterpret_cast<const uint8_t*>(x);
  else return x;
}

// Op's kernel for `rows` runs (kSimdRows): the sum, nansum, sum of squares or product of its type.
template <class In, class Op>
auto rows_kernel() {
  const auto& t = kernels_of<In>();
  if constexpr (std::is_same_v<Op, NanSumOp<typename Op::acc_t>>) return t.nansum;
  else if constexpr (std::is_same_v<Op, NormOp<typename Op::acc_t, NormOrd::Two>>) return t.sumsq;
  else if constexpr (std::is_same_v<Op, NormOp<typename Op::acc_t, NormOrd::One>>) return t.sumabs;
  else if constexpr (std::is_same_v<Op, ProdOp<typename Op::acc_t>>) return t.prod;
  else return t.sum;
}

template <class In, class Op>
typename Op::acc_t simd_sum(const In* x, int64_t n) {
  const simd::SumKernels& k = simd::sum_kernels();
  if constexpr (std::is_same_v<Op, WideFloatSumOp>) return k.f32_wide(x, n);
  else if constexpr (std::is_same_v<Op, CompensatedSumOp>) return k.f64_compensated(x, n);
  else {
    typename Op::acc_t s;
    rows_kernel<In, Op>()(simd_run(x), n, 1, n, &s);
    return s;
  }
}

// any, all and count_nonzero of contiguous runs (sums of x != 0, ChunkOp's int32 a chunk or the
// int64 of the whole): sum_simd's nonzero, for every dtype.
template <class In, class Mid, class Op>
inline constexpr bool kSimdNonzero =
    std::is_same_v<Mid, bool> && (std::is_same_v<Op, SumOp<int32_t>> || std::is_same_v<Op, SumOp<int64_t>>);

// Columns of non-zero counts of 1-byte inputs (reduce_columns): byte counters a group of rows.
template <class In, class Mid, class Op>
inline constexpr bool kByteCounts = sizeof(In) == 1 && std::is_same_v<Mid, bool> && std::is_same_v<Op, SumOp<int64_t>>;

// var of contiguous floating runs (var, std, var_mean, std_mean) in two passes: the run's sum
// (the sum kernel) gives the pivot c = sum / n, then sum_simd's deviations the sums of x - c and
// of their squares in double, with the corrected two-pass term, as VarOp::reduce_values. A chunk
// is at most 512 KB, so the second pass reads it from the cache. A first sum that is not finite
// (an infinity or NaN, or the float cascade's overflow) leaves the chunk to Welford's loop, whose
// mean and NaN are torch's.
template <class In, class Mid, class Op>
inline constexpr bool kSimdVar =
    std::is_same_v<In, Mid> && std::is_same_v<Op, VarOp<double>> &&
    kSimdFloat<In, simd_float_t<In>>;

template <class In>
std::optional<WelfordAcc<double>> two_pass_var(const In* x, int64_t n) {
  const auto& t = kernels_of<In>();
  simd_float_t<In> sum;
  t.sum(simd_run(x), n, 1, n, &sum);
  if (!std::isfinite(sum)) return std::nullopt;
  const double c = double(sum) / double(n);
  const simd::Moments m = t.deviations(simd_run(x), n, c);
  const double inv = 1.0 / double(n);
  return WelfordAcc<double>{c, m.sum * inv, m.sq - m.sum * m.sum * inv, double(n)};
}

// logsumexp of contiguous floating runs: sum_simd's exp_sum (the maximum, then exp in vectors).
template <class In, class Mid, class Op>
inline constexpr bool kSimdExpSum =
    std::is_same_v<In, Mid> && std::is_same_v<Op, LogSumExpOp<typename Op::value_t>> &&
    kSimdFloat<In, typename Op::value_t>;

// Extrema of contiguous runs of floating and integer elements: sum_simd.h's vector kernels. amax and amin take the
// extremum; max and min over a dim, argmax and argmin take it and then the first position
// holding it (the same answer as an element at a time: NaN wins, the first of equals); aminmax
// both extrema. A second read of a chunk (64K elements) mostly hits the caches.
template <class In>
inline constexpr bool kSimdExtremum =
    std::is_same_v<In, float> || std::is_same_v<In, double> || std::is_same_v<In, c10::Half> ||
    std::is_same_v<In, c10::BFloat16> || std::is_same_v<In, int8_t> || std::is_same_v<In, uint8_t> ||
    std::is_same_v<In, int16_t> || std::is_same_v<In, int32_t> || std::is_same_v<In, int64_t>;
enum class Extremum { None, Value, Position, Both };
template <class Op> struct ExtremumOf { static constexpr Extremum kind = Extremum::None; };
template <class A, bool kMax> struct ExtremumOf<ExtremumOp<A, kMax>> {
  static constexpr Extremum kind = Extremum::Value;
  static constexpr bool max = kMax;
};
template <class A, bool kMax> struct ExtremumOf<ArgExtremumOp<A, kMax>> {
  static constexpr Extremum kind = Extremum::Position;
  static constexpr bool max = kMax;
};
template <class A> struct ExtremumOf<MinMaxOp<A>> {
  static constexpr Extremum kind = Extremum::Both;
  static constexpr bool max = true;  // (both: which = 2)
};

// The extrema of a run of In as sum_simd gives them (16-bit floats as floats).
template <class In>
using ExtremaOf = simd::Extrema<std::conditional_t<Lowp<In>::value, float, In>>;

// which: 0 the minimum, 1 the maximum, 2 both.
template <class In>
ExtremaOf<In> simd_extrema(const In* x, int64_t n, int which) {
  ExtremaOf<In> e;
  kernels_of<In>().extremum[which](simd_run(x), n, 1, n, &e);
  return e;
}

template <class In, class T>
int64_t simd_find(const In* x, int64_t n, T v) {
  return kernels_of<In>().find(simd_run(x), n, v);
}

// Any extremum operator (values, positions or both) of a type sum_simd's extrema take.
template <class In, class Mid, class Op>
inline constexpr bool kSimdExtremumOp = kSimdExtremum<In> && std::is_same_v<In, Mid> && ExtremumOf<Op>::kind != Extremum::None;

// Short rows of amax, amin and aminmax take sum_simd's extrema a block of rows a call (reduce_rows).
template <class In, class Mid, class Op>
inline constexpr bool kSimdExtremaRows = kSimdExtremum<In> && std::is_same_v<In, Mid> &&
                                         (ExtremumOf<Op>::kind == Extremum::Value || ExtremumOf<Op>::kind == Extremum::Both);

// Columns of max and min over a dim, argmax and argmin: sum_simd's extrema, then the positions
// (reduce_columns).
template <class In, class Mid, class Op>
inline constexpr bool kSimdExtremaPositions = kSimdExtremum<In> && std::is_same_v<In, Mid> &&
                                              ExtremumOf<Op>::kind == Extremum::Position;

template <class In, class Op>
typename Op::acc_t extremum_chunk(const In* x, int64_t n, int64_t first) {
  using A = typename Op::value_t;
  using E = ExtremumOf<Op>;
  if constexpr (E::kind == Extremum::Value) {
    const auto e = simd_extrema(x, n, E::max);
    return A(E::max ? e.max : e.min);
  } else if constexpr (E::kind == Extremum::Position) {
    const auto e = simd_extrema(x, n, E::max);
    const int64_t i = simd_find(x, n, E::max ? e.max : e.min);
    return {Load<In, In, A>::apply(x[i]), first + i};
  } else {
    const auto e = simd_extrema(x, n, 2);
    return {A(e.min), A(e.max)};
  }
}

// Extrema an element at a time without branches. ExtremumOp::combine compiles to compares and
// jumps, which random data mispredicts about half the time: amin over rows of 3 of (64, 256, 3)
// float32 took 70 us on 2 threads against torch's 29 (a loop of rows of 3, four side by side:
// 2.8 ns an element as the operator's combine, 0.5 through SSE's min and a NaN mask). Positions
// over short rows: the extremum first, then its position (side_positions); reduce_at's test, the
// value and the position chosen by SSE masks element by element, made max with positions over
// rows of 5 of (50257, 17, 5) float32 6.0 -> 3.9 ms (torch 5.9) but over the 384 rows of 14 of
// (8, 3, 16, 14).transpose(2, 1) 6.4 -> 10.8 us (torch 8.6): the masks' chain is longer.

// pick<kMax>(a, v): ExtremumOp<A, kMax>::combine(a, v), a where it beats v or is NaN, else v.
template <bool kMax, class A>
inline A pick(A a, A v) {
#if defined(__SSE2__)
  if constexpr (std::is_same_v<A, float>) {
    const __m128 x = _mm_set_ss(a), y = _mm_set_ss(v);
    const __m128 m = kMax ? _mm_max_ss(x, y) : _mm_min_ss(x, y);  // y where either is NaN
    const __m128 nan = _mm_cmpunord_ss(x, x);
    return _mm_cvtss_f32(_mm_or_ps(_mm_and_ps(nan, x), _mm_andnot_ps(nan, m)));
  } else if constexpr (std::is_same_v<A, double>) {
    const __m128d x = _mm_set_sd(a), y = _mm_set_sd(v);
    const __m128d m = kMax ? _mm_max_sd(x, y) : _mm_min_sd(x, y);
    const __m128d nan = _mm_cmpunord_sd(x, x);
    return _mm_cvtsd_f64(_mm_or_pd(_mm_and_pd(nan, x), _mm_andnot_pd(nan, m)));
  }
#endif
  return ExtremumOp<A, kMax>::combine(a, v);
}

#if defined(__SSE2__)
// pick in four float lanes: v where it beats e or is NaN, e where e is NaN.
template <bool kMax>
inline __m128 pick4(__m128 e, __m128 v) {
  const __m128 m = kMax ? _mm_max_ps(e, v) : _mm_min_ps(e, v);  // v where either is NaN
  const __m128 nan = _mm_cmpunord_ps(e, e);
  return _mm_or_ps(_mm_and_ps(nan, e), _mm_andnot_ps(nan, m));
}
#endif

// float16 elements in the generic loops: a row's block converted first, then reduced, in two
// loops. Fused, GCC 12 vectorised neither Lowp<c10::Half>'s branch-free conversion nor the
// operator when the operator picks (vector_norm's inf and -inf orders: NaN-winning maxima of
// |x|): scalar code, acc in memory, ~3 ns an element; apart, both loops vectorise (as bfloat16's
// shift does fused). Inf-norm of (1024, 5120) float16 on 2 threads, ms, over dim 0: 14.4 -> 2.1,
// dim 1: 8.0 -> 2.7 (torch 7.7-10 and 7.7-8.9).
// The block's conversion is sum_simd's f32_from_f16 where the values are floating (F16C where
// the CPU has it; the generic loop's conversion, with no F16C in this unit's ISA, took 0.6-2.7
// ns an element): 2 threads, us (torch), the 2-norm of all of (256, 128, 64)[..., ::3] float16
// 692 -> 286 (328). Not for gathers of a few strided elements a row (amax over dim 0 of (2048,
// 28)[:, ::3] float16, 10 a row: 39 -> 65 through it).
template <class In>
inline constexpr bool kConvertFirst = std::is_same_v<In, c10::Half>;

// n <= kMax contiguous elements of In from p as values V (Load<In, Mid, V>'s): float16 into
// floating values in bulk (above), else one at a time.
template <class In, class Mid, class V, int64_t kMax>
inline void convert_block(const In* p, int64_t n, V* v) {
  if constexpr (kConvertFirst<In> && std::is_floating_point_v<V> &&
                (std::is_same_v<Mid, c10::Half> || std::is_same_v<Mid, float>)) {
    const uint16_t* bits = reinterpret_cast<const uint16_t*>(p);
    if constexpr (std::is_same_v<V, float>) {
      simd::sum_kernels().f32_from_f16(bits, n, v);
    } else {
      float f[kMax];
      simd::sum_kernels().f32_from_f16(bits, n, f);
      for (int64_t j = 0; j < n; ++j) v[j] = V(f[j]);
    }
  } else {
    using L = Load<In, Mid, V>;
    for (int64_t j = 0; j < n; ++j) v[j] = L::apply(p[j]);
  }
}

// Value v at position i of the reduced dim into accumulator a (indexed operators keep i).
template <class Op, class A, class V>
A reduce_one(const A& a, V v, int64_t i) {
  if constexpr (ExtremumOf<Op>::kind == Extremum::Value) {
    return pick<ExtremumOf<Op>::max>(a, A(v));
  } else if constexpr (ExtremumOf<Op>::kind == Extremum::Both) {
    using T = typename Op::value_t;
    return {pick<false>(a.min, T(v)), pick<true>(a.max, T(v))};
  } else if constexpr (is_indexed_v<Op>) {
    return Op::reduce_at(a, v, i);
  } else {
    return Op::reduce(a, v);
  }
}

// float16 elements as floats through a table of all 65536 (256 KB, made at first use), for loops
// too short to vectorise: Lowp<c10::Half>'s branch-free conversion is about a dozen scalar
// operations an element there. Short rows (2 threads): amin over rows of 3 of (8, 197, 3)
// float16 took 15.1 us against bfloat16's 9.4 (a shift), sum 12.8 against 5.2.
inline const float* half_table() {
  static const std::unique_ptr<float[]> table = [] {
    std::unique_ptr<float[]> t(new float[65536]);
    c10::Half v;
    for (uint32_t h = 0; h < 65536; ++h) {
      v.x = uint16_t(h);
      t[h] = Lowp<c10::Half>::to_float(v);
    }
    return t;
  }();
  return table.get();
}

// Load<In, Mid, V>::apply, float16 through the table where that gives the same value (Mid float16
// or float, V a float type: one exact conversion either way).
template <class In, class Mid, class V>
V short_load(In v) {
  if constexpr (std::is_same_v<In, c10::Half> && (std::is_same_v<Mid, c10::Half> || std::is_same_v<Mid, float>) &&
                std::is_floating_point_v<V>) {
    return V(half_table()[v.x]);
  } else {
    return Load<In, Mid, V>::apply(v);
  }
}

// The first of the n elements x[k * stride] equal to e (a NaN where e is NaN): the position of
// an extremum found by pick.
template <class In, class Mid, class V>
int64_t first_equal(const In* x, int64_t n, int64_t stride, V e) {
  bool nan = false;
  if constexpr (std::is_floating_point_v<V>) nan = e != e;
  int64_t k = 0;
  for (; k < n; ++k) {
    const V v = short_load<In, Mid, V>(x[k * stride]);
    if (nan ? v != v : v == e) break;
  }
  return k;
}

// A run's extremum and its first position, for runs the vector kernels do not take (strided,
// or of types without them: bool): the extremum by pick in 8 lanes, then the first element equal
// to it (the first NaN where it is NaN), a second read from the cache. The same value and
// position as ArgExtremumOp::reduce_at over the run in order, whose compares and jumps random
// data mispredicts: 2 threads, min over rows of 171 of (224, 512)[:, ::3] float32 66.8 -> 24.4
// us (torch 18.1), max over rows of 1025 of (8, 31, 1025) bool 111 -> 29 (55).
template <class In, class Mid, class Op>
typename Op::acc_t position_run(const In* x, int64_t n, int64_t stride, int64_t first) {
  using V = typename Op::value_t;
  constexpr bool kMax = ExtremumOf<Op>::max;
  constexpr int kL = 8;
  V m[kL];
  for (V& v : m) v = ExtremumOp<V, kMax>::identity();
  int64_t i = 0;
  for (; i + kL <= n; i += kL)
    for (int j = 0; j < kL; ++j) m[j] = pick<kMax>(m[j], short_load<In, Mid, V>(x[(i + j) * stride]));
  for (int j = 0; i < n; ++i, ++j) m[j] = pick<kMax>(m[j], short_load<In, Mid, V>(x[i * stride]));
  V e = m[0];
  for (int j = 1; j < kL; ++j) e = pick<kMax>(e, m[j]);
  const int64_t k = first_equal<In, Mid>(x, n, stride, e);
  return {short_load<In, Mid, V>(x[k * stride]), first + k};  // (n > 0: e is one of the elements)
}

// Whether chunk_reduce has a vector kernel for contiguous runs of Op (the branches below).
template <class In, class Mid, class Op>
inline constexpr bool kVectorChunk =
    kSimdSum<In, Mid, Op> || kSimdSumOf<In, Mid, Op> || kSimdProd<In, Mid, Op> || kSimdNonzero<In, Mid, Op> ||
    kSimdVar<In, Mid, Op> || kSimdExpSum<In, Mid, Op> || kSimdExtremumOp<In, Mid, Op>;

// x[0], x[stride], ..., x[(m - 1) * stride] into out. Every second element of 1- to 4-byte
// types as the low halves of words twice as wide (x86 is little-endian), which GCC vectorises,
// where it does not the strided loads (a standalone test, bfloat16: 0.09 ns an element against
// 0.28); every fourth of 1- and 2-byte types and every eighth byte the same way, as the low
// quarters (eighths) of their words; the last element alone, the rest of its word possibly past
// the tensor.
template <class In, int64_t kStride>
void gather_words(const In* x, int64_t m, In* out) {
  using W = std::conditional_t<sizeof(In) * kStride == 2, uint16_t,
                               std::conditional_t<sizeof(In) * kStride == 4, uint32_t, uint64_t>>;
  using H = std::conditional_t<sizeof(In) == 1, uint8_t, std::conditional_t<sizeof(In) == 2, uint16_t, uint32_t>>;
  static_assert(sizeof(W) == sizeof(In) * kStride && sizeof(H) == sizeof(In), "a word of kStride elements");
  for (int64_t j = 0; j + 1 < m; ++j) {
    W w;
    std::memcpy(&w, x + kStride * j, sizeof(W));
    const H low = H(w);
    std::memcpy(out + j, &low, sizeof(In));
  }
  out[m - 1] = x[kStride * (m - 1)];
}

// Whether gather_run reads a stride as words: every 2nd, 4th or 8th element, a word of `stride`
// elements at most 8 bytes.
constexpr bool gathers_words(int64_t stride, size_t bytes) {
  return (stride == 2 || stride == 4 || stride == 8) && stride * int64_t(bytes) <= 8;
}

template <class In>
void gather_run(const In* x, int64_t m, int64_t stride, In* out) {
  // (Each instance only where gathers_words holds for it: no word of more than 8 bytes.)
  if constexpr (gathers_words(2, sizeof(In))) {
    if (stride == 2) return gather_words<In, 2>(x, m, out);
  }
  if constexpr (gathers_words(4, sizeof(In))) {
    if (stride == 4) return gather_words<In, 4>(x, m, out);
  }
  if constexpr (gathers_words(8, sizeof(In))) {
    if (stride == 8) return gather_words<In, 8>(x, m, out);
  }
  for (int64_t j = 0; j < m; ++j) out[j] = x[j * stride];
}

// Sixteen independent accumulators: no loop-carried dependence between lanes, so the compiler
// vectorises the loop without reassociating. Each lane adds in a cascade, as torch's
// cascade_sum: 16 elements into a first level, 16 of those into a second, the rest into a
// third, so a lane's rounding error grows with about 48 additions, not with the 4096 of a 64K
// chunk (float32 2^24: relative error 4.7e-6 -> torch's 7e-7). `stride` is 1 for contiguous
// runs (the case that vectorises); sums sum_simd.h has a kernel for go there.
template <class In, class Mid, class Op>
typename Op::acc_t chunk_reduce(const In* x, int64_t n, int64_t stride, int64_t first = 0) {
  // A strided run of an operator with a vector kernel: gathered a piece at a time into a buffer
  // (gather_run), each piece through that kernel, the pieces combined in order. Element by
  // element (the cascade below), NaN-aware extrema cost a compare and a select an element: 2
  // threads, aminmax over rows of 112 of (32000, 224)[:, ::2] bfloat16 took 3630 us, gathered
  // element by element 996, the same rows contiguous 231 (torch 3205). Sums only every second
  // element (words) but float16's, whose conversions cost the cascade most: gathered element by
  // element, the gather cost more than the cascade saved (bfloat16 sum of the same 690 -> 904
  // us, torch 612; as words 488).
  if constexpr (kVectorChunk<In, Mid, Op>) {
    constexpr bool kDear = kSimdExpSum<In, Mid, Op> || std::is_same_v<In, c10::Half> || kSimdExtremumOp<In, Mid, Op>;
    constexpr int64_t kPiece = 1024;
    if (stride != 1 && n >= 16 && (kDear || gathers_words(stride, sizeof(In)))) {
      In piece[kPiece];
      auto acc = Op::identity();
      for (int64_t i = 0; i < n; i += kPiece) {
        const int64_t m = std::min(kPiece, n - i);
        gather_run(x + i * stride, m, stride, piece);
        acc = Op::combine(acc, chunk_reduce<In, Mid, Op>(piece, m, 1, first + i));
      }
      return acc;
    }
  }
  if constexpr (kSimdSum<In, Mid, Op> || kSimdSumOf<In, Mid, Op> || kSimdProd<In, Mid, Op>) {
    if (stride == 1) return simd_sum<In, Op>(x, n);
  }
  if constexpr (kSimdNonzero<In, Mid, Op>) {
    if (stride == 1) {
      int64_t count;
      kernels_of<In>().nonzero(simd_run(x), n, 1, n, &count);
      return typename Op::acc_t(count);
    }
  }
  if constexpr (kSimdVar<In, Mid, Op>) {
    if (stride == 1 && n > 0) {
      if (const auto a = two_pass_var(x, n)) return *a;
    }
  }
  if constexpr (kSimdExpSum<In, Mid, Op>) {
    if (stride == 1 && n > 0) {
      const auto r = kernels_of<In>().exp_sum(simd_run(x), n);
      return {r.max, r.sum};
    }
  }
  if constexpr (kSimdExtremumOp<In, Mid, Op>) {
    if (stride == 1 && n > 0) return extremum_chunk<In, Op>(x, n, first);
  }
  if constexpr (ExtremumOf<Op>::kind == Extremum::Position) {
    if (n > 0) return position_run<In, Mid, Op>(x, n, stride, first);
  }
  using Acc = typename Op::acc_t;
  using L = Load<In, Mid, typename Op::value_t>;
  constexpr int kLanes = 16;
  constexpr int64_t kStep = 16;
  Acc top[kLanes], mid[kLanes], low[kLanes];
  for (Acc& l : top) l = Op::identity();
  const int64_t rows = n / kLanes;  // whole rows of kLanes elements
  // Operators with a form for a group of values (var, logsumexp) take each row of kLanes values
  // at once into one accumulator a level: var's division (logsumexp's rescaling) once a row, not
  // once an element. (var of 2^24 float32, one element at a time: 0.67x torch.var's speed.)
  constexpr bool kGroup = HasReduceValues<Op>::value && !is_indexed_v<Op>;
  constexpr int kAccs = kGroup ? 1 : kLanes;  // accumulators of each level
  const auto cascade = [&](auto load) {
    for (int64_t r2 = 0; r2 < rows; r2 += kStep * kStep) {
      for (int j = 0; j < kAccs; ++j) mid[j] = Op::identity();
      for (int64_t r1 = r2; r1 < std::min(rows, r2 + kStep * kStep); r1 += kStep) {
        for (int j = 0; j < kAccs; ++j) low[j] = Op::identity();
        const int64_t end = std::min(rows, r1 + kStep);
        for (int64_t r = r1; r < end; ++r) {
          if constexpr (kGroup) {
            typename Op::value_t t[kLanes];
            for (int j = 0; j < kLanes; ++j) t[j] = L::apply(load(r * kLanes + j));
            low[0] = Op::combine(low[0], Op::template reduce_values<kLanes>(t));
          } else if constexpr (kConvertFirst<In>) {
            typename Op::value_t t[kLanes];
            for (int j = 0; j < kLanes; ++j) t[j] = L::apply(load(r * kLanes + j));
            for (int j = 0; j < kLanes; ++j) low[j] = reduce_one<Op>(low[j], t[j], first + r * kLanes + j);
          } else {
            for (int j = 0; j < kLanes; ++j)
              low[j] = reduce_one<Op>(low[j], L::apply(load(r * kLanes + j)), first + r * kLanes + j);
          }
        }
        for (int j = 0; j < kAccs; ++j) mid[j] = Op::combine(mid[j], low[j]);
      }
      for (int j = 0; j < kAccs; ++j) top[j] = Op::combine(top[j], mid[j]);
    }
  };
  if (stride == 1) cascade([x](int64_t i) { return x[i]; });
  else cascade([x, stride](int64_t i) { return x[i * stride]; });
  for (int64_t i = rows * kLanes, j = 0; i < n; ++i, ++j) top[j] = reduce_one<Op>(top[j], L::apply(x[i * stride]), first + i);
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int j = 0; j < w; ++j) top[j] = Op::combine(top[j], top[j + w]);
  return top[0];
}

// A chunk of 1- and 2-byte integers is summed in 32 bits (twice as many lanes
// per vector as 64): 2^16 elements of at most 2^15 in magnitude cannot leave
// the int32 range.
template <class Mid, class Op>
using ChunkOp = std::conditional_t<std::is_same_v<Op, SumOp<int64_t>> && std::is_integral_v<Mid> &&
                                       sizeof(Mid) <= 2,
                                   SumOp<int32_t>, Op>;
static_assert(kChunk * 32768 <= int64_t(1) << 31, "int16 chunk sums must fit in int32");

// The DType whose C++ type is T.
template <class T>
constexpr DType dtype_of_ctype() {
#define TREDUCE_DTYPE_OF(D) if constexpr (std::is_same_v<T, ctype_t<DType::D>>) return DType::D; else
  TREDUCE_DTYPES(TREDUCE_DTYPE_OF)
#undef TREDUCE_DTYPE_OF
  static_assert(!std::is_same_v<T, T>, "not a dtype's C++ type");
}

template <class T>
void store(void* out, DType dtype, int64_t i, T v) {
  switch (dtype) {
#define TREDUCE_STORE_CASE(D)                                                            \
  case DType::D:                                                                         \
    static_cast<ctype_t<DType::D>*>(out)[i] = element_cast<ctype_t<DType::D>>(v);        \
    break;
    TREDUCE_DTYPES(TREDUCE_STORE_CASE)
#undef TREDUCE_STORE_CASE
  }
}

// Where the results go: result i (layout.h's output offset) in the result dtype, through the
// operator's projection (mean's division, var's divisor), and the second result of var_mean
// and std_mean into `second`; or, with `partials` set, the accumulator as it is, for a second
// pass to combine (Layout3::combine).
struct Sink {
  void* ptr;
  DType dtype;
  ProjectArgs args;
  void* second = nullptr;
  void* partials = nullptr;
  template <class Op, class A>
  void put(int64_t i, const A& v) const {
    if (partials) {
      static_cast<A*>(partials)[i] = v;
      return;
    }
    store(ptr, dtype, i, Op::project(v, args));
    if constexpr (Op::kOutputs == 2) {
      if (second) store(second, second_dtype<Op>(dtype, DType::Int64), i, Op::project2(v, args));
    }
  }
  // put(i0 + k * step, v[k]) for k < m, the dtype's switch once (short rows: it was per element,
  // with the sink's fields reloaded after every store, about a third of amax's time over rows of
  // 32).
  template <class Op, class A>
  void put_block(int64_t i0, int64_t step, const A* v, int64_t m) const {
    if (partials) {
      for (int64_t k = 0; k < m; ++k) put<Op>(i0 + k * step, v[k]);
      return;
    }
    const ProjectArgs a = args;
    store_block(ptr, dtype, i0, step, m, [&](int64_t k) { return Op::project(v[k], a); });
    if constexpr (Op::kOutputs == 2) {
      if (second)
        store_block(second, second_dtype<Op>(dtype, DType::Int64), i0, step, m,
                    [&](int64_t k) { return Op::project2(v[k], a); });
    }
  }

 private:
  // out[i0 + k * step] = value(k) for k < m in the dtype, its switch once.
  template <class F>
  static void store_block(void* out, DType dtype, int64_t i0, int64_t step, int64_t m, const F& value) {
    if constexpr (std::is_same_v<decltype(value(0)), float>) {
      if (dtype == DType::Half && step == 1) {  // float16 results through sum_simd's conversion
        constexpr int64_t kBuffer = 256;
        float buffer[kBuffer];
        auto* p = static_cast<uint16_t*>(out) + i0;
        for (int64_t k0 = 0; k0 < m; k0 += kBuffer) {
          const int64_t n = std::min(kBuffer, m - k0);
          for (int64_t k = 0; k < n; ++k) buffer[k] = value(k0 + k);
          simd::sum_kernels().f16_from_f32(buffer, n, p + k0);
        }
        return;
      }
    }
    switch (dtype) {
#define TREDUCE_STORE_BLOCK(D)                                                           \
  case DType::D: {                                                                      \
    auto* p = static_cast<ctype_t<DType::D>*>(out) + i0;                                \
    for (int64_t k = 0; k < m; ++k) p[k * step] = element_cast<ctype_t<DType::D>>(value(k)); \
    break;                                                                              \
  }
      TREDUCE_DTYPES(TREDUCE_STORE_BLOCK)
#undef TREDUCE_STORE_BLOCK
    }
  }
};

inline constexpr int64_t kShortRow = 16;
// logsumexp's contiguous rows of more elements than this take sum_simd's exp_sum_rows, a block
// of rows a call, whose short rows' exps are in vectors (the loop below: a scalar exp an
// element). Over the last dim of (40, 80, 128, 16) float32, 19.3-20.5 ms -> 5.5 on 2 threads
// (torch 11.7-12.4); of (2^20 / n, n): rows of 3 float32 0.84-0.91x torch's speed ->
// 0.92-1.07x, float64 1.36x -> 1.73x; rows of 2 float32 1.0x -> 0.83-1.2x (4.6 ms -> 5.8-6.7),
// bfloat16 1.6-1.7x -> 1.3x: rows of 2 stay here.
inline constexpr int64_t kShortExpRow = 2;

// The last outer run (the innermost; with one run, the whole outer dim): its length and its
// steps in the input and in the result. Short rows and maps go along it in blocks.
struct LastRun {
  int64_t along, in_step, out_step;
};
inline LastRun last_outer_run(const Layout3& l) {
  const RunIndex& runs = l.outer_runs;
  if (runs.runs <= 1) return {l.outer, l.in_outer, l.out_outer};
  return {runs.size[runs.runs - 1], runs.in[runs.runs - 1], runs.out[runs.runs - 1]};
}

// How reduce_rows goes through rows a few elements long: `grain` rows a task at least, in
// blocks along the last outer run.
struct RowBlocks {
  int64_t grain;
  LastRun run;
};
inline RowBlocks row_blocks(const Layout3& l) {
  // Short rows: several per task, so that a task reads at least ~32K elements, a row counted as
  // at least 16 (its accumulator, position and store cost as much): rows of 5 took 6553 a task,
  // so 20480 of them (max over dim 2 of (4, 5120, 5) int32) ran on 4 of 16 threads, 123 us against
  // torch's 43.
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 15) / std::max<int64_t>(16, std::min(l.reduced, kChunk)));
  // Blocks of short rows go along the last outer run, where rows are evenly spaced in the input
  // and in the result: a block starts at outer index o and holds at most `along - o % along`
  // rows. Through several runs, a row at a time with its results one store call each, a sum over
  // rows of 32 int64 of (14, 17, 64, 32).transpose(0, 3) took 2.4x torch's time on 2 threads.
  return {grain, last_outer_run(l)};
}

// Whether element v is the extremum e of its row (e found by pick: NaN if the row has one, and
// then every NaN is), as a flag without jumps. GCC made (v == e) | (v != v) of floats a jump
// each: a select of side_positions below took 3.6 ns against SSE's masks' 1.1.
template <class V>
inline bool holds(V v, V e) {
#if defined(__SSE2__)
  if constexpr (std::is_same_v<V, float>) {
    const __m128 x = _mm_set_ss(v);
    return _mm_movemask_ps(_mm_or_ps(_mm_cmpeq_ss(x, _mm_set_ss(e)), _mm_cmpunord_ss(x, x))) & 1;
  } else if constexpr (std::is_same_v<V, double>) {
    const __m128d x = _mm_set_sd(v);
    return _mm_movemask_pd(_mm_or_pd(_mm_cmpeq_sd(x, _mm_set_sd(e)), _mm_cmpunord_sd(x, x))) & 1;
  }
#endif
  if constexpr (std::is_floating_point_v<V>) return (v == e) | (v != v);
  return v == e;
}

// Positions over kSide short rows side by side (row j at p + j * step, its elements `along`
// apart) without jumps: each row's extremum by pick, then, from its last element back, the first
// position holding it by a select an element. The same value and position as reduce_at in order,
// whose compares and jumps fresh data mispredicts: 2 threads, argmax over rows of 8 of (128256, 8)
// int16 1180 -> 263 us (torch 480), min over rows of 8 of (256, 80, 8) uint8 190 -> 59 (185).
template <class In, class Mid, class Op, int64_t kSide>
void side_positions(const In* p, int64_t step, int64_t n, int64_t along, typename Op::acc_t* acc) {
  using V = typename Op::value_t;
  constexpr bool kMax = ExtremumOf<Op>::max;
#if defined(__SSE2__)
  if constexpr (kSide == 4 && std::is_same_v<V, float>) {
    // Floats: the four rows in the lanes of one vector, pick's and holds' masks four at a time
    // (a third of the instructions of four scalar chains). 2 threads, us, reduce_at -> scalar
    // selects -> these (torch): max over rows of 5 of (50257, 17, 5) float32 6560 -> 3300 -> 1700
    // (6100-6400); argmax over rows of 12 of (65536, 12) bfloat16 1020 -> 590 -> 420 (930-1020);
    // max over rows of 16 of (20000, 16) float16 560 -> 500 -> 250 (370-430); max over the 384
    // rows of 14 of (8, 3, 16, 14).transpose(2, 1) 7.0 (its jumps learnt) -> 9.7 -> 6.4 (7.2).
    const auto load = [&](int64_t r) {
      const In* q = p + r * along;
      return _mm_setr_ps(short_load<In, Mid, V>(q[0]), short_load<In, Mid, V>(q[step]),
                         short_load<In, Mid, V>(q[2 * step]), short_load<In, Mid, V>(q[3 * step]));
    };
    __m128 e = _mm_set1_ps(ExtremumOp<V, kMax>::identity());
    for (int64_t r = 0; r < n; ++r) e = pick4<kMax>(e, load(r));
    __m128i at = _mm_setzero_si128();  // (int32 lanes: rows of at most 64 elements)
    for (int64_t r = n - 1; r >= 0; --r) {
      const __m128 v = load(r);
      const __m128i hit = _mm_castps_si128(_mm_or_ps(_mm_cmpeq_ps(v, e), _mm_cmpunord_ps(v, v)));
      at = _mm_or_si128(_mm_and_si128(hit, _mm_set1_epi32(int32_t(r))), _mm_andnot_si128(hit, at));
    }
    alignas(16) int32_t pos[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(pos), at);
    for (int64_t j = 0; j < kSide; ++j) acc[j] = {short_load<In, Mid, V>(p[j * step + pos[j] * along]), pos[j]};
    return;
  }
#endif
  // bool as bytes: as bool, GCC's picks and selects were jumps (min over rows of 14 of (2048,
  // 14).t() bool, 72 us against uint8's 19 on one thread, once the repeated data's jumps were
  // more than the predictor learnt).
  using W = std::conditional_t<std::is_same_v<V, bool>, uint8_t, V>;
  const auto load = [&](int64_t j, int64_t r) { return W(short_load<In, Mid, V>(p[j * step + r * along])); };
  W e[kSide];
  int64_t at[kSide];
  for (int64_t j = 0; j < kSide; ++j) {
    e[j] = W(ExtremumOp<V, kMax>::identity());
    at[j] = 0;
  }
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < kSide; ++j) e[j] = pick<kMax>(e[j], load(j, r));
  for (int64_t r = n - 1; r >= 0; --r)
    for (int64_t j = 0; j < kSide; ++j) at[j] = holds(load(j, r), e[j]) ? r : at[j];
  for (int64_t j = 0; j < kSide; ++j) acc[j] = {short_load<In, Mid, V>(p[j * step + at[j] * along]), at[j]};
}

template <class In, class Mid, class Op>
void short_rows(const In* x, const Layout3& l, const Sink& out, const RowBlocks& b) {
  using Acc = typename Op::acc_t;
  const int64_t grain = b.grain, along = b.run.along, in_step = b.run.in_step, out_step = b.run.out_step;
  // Rows of up to kShortRow elements (up to 64 without a vector kernel for them): each row's
  // elements into one accumulator, one after another, 64 rows a store call. chunk_reduce's 16
  // lanes and their tree, or sum_simd's vector kernels, set up for each row of 3 cost more
  // than the row; prod over rows of 17 int64 of an expanded (4096, 8, 17), 770 -> 428 us on 2
  // threads (torch 225-383). Rows of 17-31 with a vector kernel measured mixed one at a time
  // (2 threads: float32 sums of rows of 28 0.54x -> 1.04x torch's speed, but float16 nansum
  // 0.68x -> 0.24x, bfloat16 sums of rows of 24 1.23x -> 0.64x, float32 amax of rows of 20
  // 1.32x -> 0.45x): they keep the vector kernels.
  using V = typename Op::value_t;
  at::parallel_for(0, l.outer, grain, [&](int64_t begin, int64_t end) {
    constexpr int64_t kBlock = 64;
    Acc acc[kBlock];
    for (int64_t o0 = begin, m; o0 < end; o0 += m) {
      m = std::min({kBlock, end - o0, along - o0 % along});
      const In* first = x + l.outer_in(o0);
      // Four rows side by side, an element of each at a time, in registers: each row's
      // elements still in order (the same bits), four independent chains of compares or adds
      // instead of one (2 threads: amin over rows of 12 of (65536, 12) float32, a row at a time
      // 1034 us, four 135, torch 378-464; aminmax over rows of 4, 715 -> 107, torch 495; var
      // over rows of 16, 872 -> 500, torch 7200).
      constexpr int64_t kSide = 4;
      int64_t k = 0;
      if constexpr (ExtremumOf<Op>::kind == Extremum::Position) {
        for (; k + kSide <= m; k += kSide)
          side_positions<In, Mid, Op, kSide>(first + k * in_step, in_step, l.reduced, l.in_reduced, acc + k);
        for (; k < m; ++k) side_positions<In, Mid, Op, 1>(first + k * in_step, in_step, l.reduced, l.in_reduced, acc + k);
      }
#if defined(__SSE2__)
      // Float extrema: the four rows' elements as one vector's lanes, pick4 on it (the same
      // compares as pick's, a lane each). pick on each lane by itself was ~12 scalar SSE
      // operations an element for aminmax: over rows of 3 of (14336, 3) float32 45.9 us on 2
      // threads against torch's 31.3.
      if constexpr ((ExtremumOf<Op>::kind == Extremum::Value || ExtremumOf<Op>::kind == Extremum::Both) &&
                    std::is_same_v<V, float>) {
        constexpr bool kBoth = ExtremumOf<Op>::kind == Extremum::Both;
        for (; k + kSide <= m; k += kSide) {
          const Acc id = Op::identity();
          __m128 lo, hi;
          if constexpr (kBoth) lo = _mm_set1_ps(id.min), hi = _mm_set1_ps(id.max);
          else lo = hi = _mm_set1_ps(id);
          const In* p = first + k * in_step;
          for (int64_t r = 0; r < l.reduced; ++r, p += l.in_reduced) {
            const __m128 v = _mm_setr_ps(short_load<In, Mid, V>(p[0]), short_load<In, Mid, V>(p[in_step]),
                                         short_load<In, Mid, V>(p[2 * in_step]), short_load<In, Mid, V>(p[3 * in_step]));
            if constexpr (kBoth) lo = pick4<false>(lo, v), hi = pick4<true>(hi, v);
            else hi = pick4<ExtremumOf<Op>::max>(hi, v);
          }
          alignas(16) float a_lo[kSide], a_hi[kSide];
          if constexpr (kBoth) _mm_store_ps(a_lo, lo);  // (one-sided: hi alone)
          _mm_store_ps(a_hi, hi);
          for (int64_t j = 0; j < kSide; ++j) {
            if constexpr (kBoth) acc[k + j] = Acc{a_lo[j], a_hi[j]};
            else acc[k + j] = Acc(a_hi[j]);
          }
        }
      }
#endif
      for (; k + kSide <= m; k += kSide) {
        Acc a[kSide];
        for (int64_t j = 0; j < kSide; ++j) a[j] = Op::identity();
        const In* p = first + k * in_step;
        for (int64_t r = 0; r < l.reduced; ++r)
          for (int64_t j = 0; j < kSide; ++j)
            a[j] = reduce_one<Op>(a[j], short_load<In, Mid, V>(p[j * in_step + r * l.in_reduced]), r);
        for (int64_t j = 0; j < kSide; ++j) acc[k + j] = a[j];
      }
      for (; k < m; ++k) {
        const In* p = first + k * in_step;
        Acc a = Op::identity();
        for (int64_t r = 0; r < l.reduced; ++r) a = reduce_one<Op>(a, short_load<In, Mid, V>(p[r * l.in_reduced]), r);
        acc[k] = a;
      }
      out.put_block<Op>(l.outer_out(o0), out_step, acc, m);
    }
  });
}

// Contiguous rows of up to kShortRow elements that the vector kernels' blocks of rows take
// rather than short_rows: extrema over rows of whole 32-byte vectors of sum_simd's lanes (8 of
// float, in which 16-bit floats are taken, 4 of double, 16 of int16, 32 of int8; int64 from 4
// vectors, its compares being emulated), and float16 sums and extrema from 8 elements (short_rows
// converts each element by itself). 2 threads, rows of (3, 4096, w), us, element at a time ->
// vector rows (torch): aminmax float32 w 16 278 -> 34-38 (179-223), float16 w 8 299 -> 35-38
// (115-138), float64 w 8 231 -> 36 (about 80); amax bfloat16 w 16 99 -> 30-36 (223-240), int32 w 8
// 25 -> 22-30 (32-44); float16 sum w 16 193 -> 78 (66-75). Not rows of parts of vectors: amax
// float32 w 12 70 -> 106, int32 w 12 18 -> 82, int8 w 16 39 -> 92; nor sums of other types (float32
// w 8 15 -> 162: the short rows' sum is of doubles, the vector kernel's wide).
template <class In, class Mid, class Op, class Chunk>
bool vector_short_rows(int64_t n) {
  constexpr bool kExtrema = kSimdExtremaRows<In, Mid, Op>;
  if (std::is_same_v<In, c10::Half> && (kExtrema || kSimdRows<In, Mid, Chunk>)) return n >= 8;
  if constexpr (!kExtrema) {
    return false;
  } else {
    constexpr int64_t kLanes = 32 / int64_t(sizeof(In) == 2 && !std::is_integral_v<In> ? 4 : sizeof(In));
    const int64_t least = std::is_same_v<In, int64_t> ? 4 * kLanes : kLanes;
    return n >= least && n % kLanes == 0;
  }
}

// Rows (inner == 1; a full reduction is one row): each row in chunks of kChunk on all threads,
// then each row's chunk results combined pairwise in chunk order.
template <class In, class Mid, class Op>
void reduce_rows(const In* x, const Layout3& l, const Sink& out) {
  using Acc = typename Op::acc_t;
  using Chunk = ChunkOp<Mid, Op>;
  const int64_t chunks = (l.reduced + kChunk - 1) / kChunk;
  const int64_t tasks = l.outer * chunks;
  const auto chunk = [&](int64_t o, int64_t c) {  // chunk c of row o
    const int64_t begin = c * kChunk;
    return Acc(chunk_reduce<In, Mid, Chunk>(x + l.outer_in(o) + begin * l.in_reduced,
                                            std::min(kChunk, l.reduced - begin), l.in_reduced, begin));
  };
  RowBlocks b = row_blocks(l);
  // Positions read a short row twice and select an element at a time: a quarter of the rows a
  // task (2 threads, min over rows of 14 of (2048, 14).t() bool, all 2048 rows one task: 20 us,
  // torch 18).
  if constexpr (ExtremumOf<Op>::kind == Extremum::Position) b.grain = std::max<int64_t>(1, b.grain / 4);
  [[maybe_unused]] const int64_t grain = b.grain, along = b.run.along, in_step = b.run.in_step,
                                 out_step = b.run.out_step;
  int64_t short_row = 4 * kShortRow;
  if (kVectorChunk<In, Mid, Chunk> && l.in_reduced == 1) short_row = kSimdExpSum<In, Mid, Op> ? kShortExpRow : kShortRow;
  if (l.in_reduced == 1 && vector_short_rows<In, Mid, Op, Chunk>(l.reduced)) short_row = 0;
  if (l.reduced <= short_row) return short_rows<In, Mid, Op>(x, l, out, b);
  if constexpr (kSimdRows<In, Mid, Chunk> || kSimdExtremaRows<In, Mid, Op> || kSimdNonzero<In, Mid, Chunk> ||
                kSimdExpSum<In, Mid, Op>) {
    // Contiguous short rows of the sums, amax, amin, aminmax, any, all, count_nonzero and
    // logsumexp sum_simd has: a block of rows along the last outer run a kernel call.
    if (chunks == 1 && l.in_reduced == 1) {
      at::parallel_for(0, l.outer, grain, [&](int64_t begin, int64_t end) {
        constexpr int64_t kBlock = 64;
        for (int64_t o = begin, m; o < end; o += m) {
          m = std::min({kBlock, end - o, along - o % along});
          const auto run = simd_run(x + l.outer_in(o));
          Acc acc[kBlock];
          if constexpr (kSimdNonzero<In, Mid, Chunk>) {
            int64_t counts[kBlock];
            kernels_of<In>().nonzero(run, l.reduced, m, in_step, counts);
            for (int64_t i = 0; i < m; ++i) acc[i] = Acc(counts[i]);
          } else if constexpr (kSimdExpSum<In, Mid, Op>) {
            simd::ExpSum<typename Op::value_t> e[kBlock];
            kernels_of<In>().exp_sum_rows(run, l.reduced, m, in_step, e);
            for (int64_t i = 0; i < m; ++i) acc[i] = Acc{e[i].max, e[i].sum};
          } else if constexpr (kSimdRows<In, Mid, Chunk>) {
            typename Chunk::acc_t sums[kBlock];
            rows_kernel<In, Chunk>()(run, l.reduced, m, in_step, sums);
            for (int64_t i = 0; i < m; ++i) acc[i] = Acc(sums[i]);
          } else {
            using E = ExtremumOf<Op>;
            constexpr int kWhich = E::kind == Extremum::Both ? 2 : int(E::max);
            ExtremaOf<In> e[kBlock];
            kernels_of<In>().extremum[kWhich](run, l.reduced, m, in_step, e);
            using A = typename Op::value_t;
            for (int64_t i = 0; i < m; ++i) {
              if constexpr (E::kind == Extremum::Both) acc[i] = Acc{A(e[i].min), A(e[i].max)};
              else acc[i] = Acc(A(E::max ? e[i].max : e[i].min));
            }
          }
          out.put_block<Op>(l.outer_out(o), out_step, acc, m);
        }
      });
      return;
    }
  }
  if (chunks == 1) {  // a row a task, with no division of the task index (short rows: ~15% of the time)
    at::parallel_for(0, tasks, grain, [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) out.put<Op>(l.outer_out(o), chunk(o, 0));
    });
    return;
  }
  const std::unique_ptr<Acc[]> partial(new Acc[tasks]);  // not a vector: Acc may be bool
  at::parallel_for(0, tasks, grain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) partial[t] = chunk(t / chunks, t % chunks);
  });
  for (int64_t o = 0; o < l.outer; ++o)
    out.put<Op>(l.outer_out(o), pairwise_combine<Op>(partial.get() + o * chunks, chunks));
}

// reduce_columns' last outputs of a strip, fewer than kB: `rest` outputs (x[0, rest), acc[0, rest))
// over `rows` rows `stride` apart, row r0 first, a row of them at a time, as its blocks of kB.
// Out of line: inlined, the code around it (columns of fewer outputs, one at a time) ran slower,
// 30 -> 38-41 us for sums over dim 2 of (28, 7, 112) bfloat16 on 2 threads.
template <class In, class Mid, class Op, int64_t kB>
[[gnu::noinline]] void columns_rest(const In* x, int64_t stride, int64_t rows, int64_t rest, int64_t r0,
                                    typename Op::acc_t* acc) {
  using Acc = typename Op::acc_t;
  Acc lo[kB];
  for (int64_t b = 0; b < rest; ++b) lo[b] = Op::identity();
  for (int64_t k = 0; k < rows; ++k) {
    const In* row = x + k * stride;
    for (int64_t b = 0; b < rest; ++b) lo[b] = reduce_one<Op>(lo[b], short_load<In, Mid, typename Op::value_t>(row[b]), r0 + k);
  }
  for (int64_t b = 0; b < rest; ++b) acc[b] = Op::combine(acc[b], lo[b]);
}

// One strip: r[j] = any (or all) of rows[k][j] != 0 over k < rows. Groups of 16 rows walked
// across the strip 64 outputs at a time (16 sequential streams, as the counters below), each
// block's truth values in a local array that the compiler keeps in vector registers. Rows one
// at a time into the result (no local block) ran the permuted case below at 0.75-0.83x torch's
// speed on 2 threads; a block down all of a column's rows before the next walked (4096, 4096)
// 64 bytes a row, 0.85x.
template <bool kAny, class In>
void byte_logic_strip(const In* x, int64_t stride, int64_t rows, int64_t width, uint8_t* r) {
  constexpr int64_t kBlock = 64, kGroup = 16;
  for (int64_t k0 = 0; k0 < rows; k0 += kGroup) {
    const int64_t group = std::min(kGroup, rows - k0);
    for (int64_t j0 = 0; j0 < width; j0 += kBlock) {
      const int64_t n = std::min(kBlock, width - j0);
      uint8_t acc[kBlock];
      std::fill(acc, acc + kBlock, uint8_t(kAny ? 0 : 1));
      if (k0 > 0) std::memcpy(acc, r + j0, size_t(n));
      const uint8_t* first = reinterpret_cast<const uint8_t*>(x + k0 * stride + j0);
      // The group's rows into acc[0, cols): a constant count for whole blocks, so that the loop
      // over them is unrolled into vector operations. any ORs the bytes themselves (acc is 0 or 1
      // between groups; nonzero tested once a group), all their nonzero tests. (The bytes'
      // unsigned minimum for all was not vectorised by GCC: 60x slower.)
      const auto rows_into = [&](auto cols) {
        for (int64_t k = 0; k < group; ++k) {
          const uint8_t* row = first + k * stride;
          for (int64_t j = 0; j < int64_t(cols); ++j) {
            if constexpr (kAny) acc[j] |= row[j];
            else acc[j] &= uint8_t(row[j] != 0);
          }
        }
      };
      if (n == kBlock) rows_into(std::integral_constant<int64_t, kBlock>{});
      else rows_into(n);
      for (int64_t j = 0; j < n; ++j) r[j0 + j] = uint8_t(acc[j] != 0);
    }
  }
}

// The width of strips of at most `most` results that share a run of n equally (to 64 results).
// The remainder as the last strip put four fifths of the work on one of two threads over dim 0
// of (128, 5120) float32 (a strip of 4096 and one of 1024), and made a strip of one column of
// (200, 4097). 2 threads, us, torch in the same run: sum of (128, 5120) 72 -> 24 (36), amax 85
// -> 51 (55-67); sum of (200, 4097) 155 -> 50 (61-68), of (1000, 4100) 645 -> 358 (418-463).
inline int64_t equal_strip(int64_t n, int64_t most) {
  const int64_t count = (n + most - 1) / most;
  return std::min(most, ((n + count - 1) / count + 63) / 64 * 64);
}

// any and all of 1-byte columns whose results are contiguous bytes (bool, or uint8 for uint8
// inputs): each strip's truth values OR-ed (any) or AND-ed (all) over the rows in the result
// itself, a byte an output. Through counters (below) the int64 accumulators and their
// projection were most of the time: any over dim 0 of (1025, 16, 3072).permute(1, 0, 2) uint8,
// 2 threads, 3716 us against torch's 1389-1632. Strips narrow down to 2048 outputs to give
// every thread a task; where that is still too few tasks (long columns of few outputs), false:
// the counters' path splits the rows instead (strips of 256 bytes down all 4096 rows of (4096,
// 4096) uint8 on 16 threads took 499 us, torch 184).
template <class In>
bool byte_logic_columns(const In* x, const Layout3& l, bool any, uint8_t* out) {
  int64_t strip = 4096;
  const int64_t wanted = std::min<int64_t>(at::get_num_threads(), l.outer * l.inner * l.reduced >> 15);
  if (l.outer * ((l.inner + strip - 1) / strip) < wanted) {
    const int64_t strips_wanted = (wanted + l.outer - 1) / l.outer;
    strip = std::clamp<int64_t>(((l.inner + strips_wanted - 1) / strips_wanted + 63) / 64 * 64, 2048, strip);
  }
  strip = equal_strip(l.inner, strip);
  const int64_t strips = (l.inner + strip - 1) / strip;
  if (l.outer * strips < wanted) return false;
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 15) / (std::min(strip, l.inner) * l.reduced));
  at::parallel_for(0, l.outer * strips, grain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t o = t / strips, i0 = t % strips * strip, width = std::min(strip, l.inner - i0);
      const In* base = x + l.outer_in(o) + i0;
      uint8_t* r = out + l.outer_out(o) + i0;
      if (any) byte_logic_strip<true>(base, l.in_reduced, l.reduced, width, r);
      else byte_logic_strip<false>(base, l.in_reduced, l.reduced, width, r);
    }
  });
  return true;
}

// reduce_columns' segment of one strip: rows [r0, end) of the strip's `width` columns from
// base (its first element) into acc[0, width). First the vector kernels of sum_simd where the
// op and a contiguous strip have one (simd_column_segment says whether it took the segment),
// else the generic loop (generic_column_segment).

// amax and amin whose accumulator is the type sum_simd gives their extrema in: its
// extremum_columns_to writes them into the accumulators (or the result) directly.
template <class In, class Mid, class Op>
constexpr bool extremum_into() {
  if constexpr (kSimdExtremaRows<In, Mid, Op>) {
    return ExtremumOf<Op>::kind == Extremum::Value &&
           std::is_same_v<typename Op::acc_t, decltype(ExtremaOf<In>::max)>;
  } else {
    return false;
  }
}

template <class In, class Mid, class Op, int64_t kWidth>
bool simd_column_segment(const In* first, int64_t stride, int64_t rows, int64_t width, int64_t r0,
                         typename Op::acc_t* acc) {
  using Acc = typename Op::acc_t;
  using A = typename Op::value_t;
  using L = Load<In, Mid, A>;
  if constexpr (kSimdExtremaRows<In, Mid, Op>) {  // amax, amin, aminmax: sum_simd's columns kernel
    using E = ExtremumOf<Op>;
    constexpr int kWhich = E::kind == Extremum::Both ? 2 : int(E::max);
    if constexpr (extremum_into<In, Mid, Op>()) {  // amax, amin: into acc itself
      kernels_of<In>().extremum_columns_to[kWhich](simd_run(first), stride, rows, width, acc);
      return true;
    }
    ExtremaOf<In> e[kWidth];
    kernels_of<In>().extremum_columns[kWhich](simd_run(first), stride, rows, width, e);
    for (int64_t j = 0; j < width; ++j) {
      if constexpr (E::kind == Extremum::Both) acc[j] = Acc{A(e[j].min), A(e[j].max)};
      else acc[j] = Acc(A(E::max ? e[j].max : e[j].min));
    }
    return true;
  }
  if constexpr (kSimdExtremaPositions<In, Mid, Op>) {  // max and min over a dim, argmax, argmin
    // sum_simd's extrema of the columns, then the first row holding each column's extremum (its
    // first NaN, when that is NaN) in one pass of compares and selects over the rows, left once
    // every column has its row. A position accumulator an element, as in the generic loop, had
    // max over dim 2 of (14, 16, 224, 64) float16 at 7.0 ms on 2 threads, torch's 2.0; now 1.37
    // (bfloat16 0.74, torch 1.82; float32 0.66, torch 1.42). bfloat16 (4096, 256) over dim 0:
    // 1.22 ms -> 0.24, torch 0.60.
    using E = ExtremumOf<Op>;
    constexpr int32_t kStep = 16;
    ExtremaOf<In> e[kWidth];
    kernels_of<In>().extremum_columns[int(E::max)](simd_run(first), stride, rows, width, e);
    // (32-bit rows and a NaN flag a column, selects and no branches, so that the row's loop
    // vectorises; without `omp simd` it did not: bfloat16 above 4.1 ms on one thread, 1.5 with
    // it. rows <= kSegment.)
    A want[kWidth];
    int32_t row_of[kWidth], want_nan[kWidth];
    const int32_t none = int32_t(rows);
    for (int64_t j = 0; j < width; ++j) {
      want[j] = A(E::max ? e[j].max : e[j].min);
      want_nan[j] = want[j] != want[j];
      row_of[j] = none;
    }
    for (int32_t k0 = 0; k0 < none; k0 += kStep) {
      for (int32_t r = k0; r < std::min(none, k0 + kStep); ++r) {
        const In* row = first + r * stride;
#pragma omp simd
        for (int64_t j = 0; j < width; ++j) {
          const A v = L::apply(row[j]);
          const int32_t hit = int32_t(v == want[j]) | (int32_t(v != v) & want_nan[j]);
          row_of[j] = std::min(row_of[j], hit ? r : none);
        }
      }
      int32_t last = 0;
      for (int64_t j = 0; j < width; ++j) last = std::max(last, row_of[j]);
      if (last < none) break;
    }
    for (int64_t j = 0; j < width; ++j) {
      TORCH_INTERNAL_ASSERT(row_of[j] < none, "a column's extremum was not found among its rows");
      acc[j] = Acc{L::apply(first[row_of[j] * stride + j]), r0 + row_of[j]};
    }
    return true;
  }
  if constexpr (kSimdExpSum<In, Mid, Op>) {  // logsumexp: sum_simd's columns kernel
    simd::ExpSum<A> e[kWidth];
    kernels_of<In>().exp_sum_columns(simd_run(first), stride, rows, width, e);
    for (int64_t j = 0; j < width; ++j) acc[j] = {e[j].max, e[j].sum};
    return true;
  }
  // sum, mean, nansum: sum_simd's columns kernels, any width. From 32 columns only, while the
  // kernel copied each row's last columns into a padded vector (the generic loop: sum over dim 1
  // of (196, 80, 7) float32 at 31-33 us on 2 threads, torch 21-23; 7-column rows, one column at a
  // time, a chain of dependent adds each: 0.67-0.80x torch's speed); now those read the row
  // itself: 13-20 us, 1.6-2.2x (float16 0.27x -> 2.0x, float64 0.77x -> 1.6x; widths 2 to 33 of
  // the four float types 1.0-3.1x torch, 0.25-1.3x before).
  if constexpr (kSimdColumnSums<In, Mid, Op>) {
    const auto& k = kernels_of<In>();
    const auto columns = std::is_same_v<Op, SumOp<Acc>> ? k.sum_columns : k.nansum_columns;
    columns(simd_run(first), stride, rows, width, acc);
    return true;
  }
  // prod: the same kernel multiplying. The generic loop's float16 columns ran at 0.3x torch's
  // speed (prod over dim 0 of (512, 256) float16, 2 threads: 46 us, torch 14.4; bfloat16 13.4).
  if constexpr (kSimdProd<In, Mid, Op>) {
    kernels_of<In>().prod_columns(simd_run(first), stride, rows, width, acc);
    return true;
  }
  (void)first, (void)stride, (void)rows, (void)width, (void)r0, (void)acc;
  return false;
}

// Plain int64 sums of 1- and 2-byte integers (count_nonzero and the logic ops' are kByteCounts).
template <class In, class Mid, class Op>
inline constexpr bool kNarrowGroupSums = std::is_integral_v<In> && sizeof(In) <= 2 && std::is_same_v<In, Mid> &&
                                         std::is_same_v<Op, SumOp<int64_t>>;

// max, min, argmax and argmin over a group of `rows` rows (row k at x + k * stride) of n <= 64
// columns `step` apart, their results joined into acc[0, n): each column's extremum by pick,
// then its first row (first_equal), from the cache; the same value and position as reduce_at
// row by row, without its jumps.
template <class In, class Mid, class Op>
void column_positions(const In* x, int64_t stride, int64_t step, int64_t rows, int64_t n, int64_t r0,
                      typename Op::acc_t* acc) {
  using V = typename Op::value_t;
  constexpr bool kMax = ExtremumOf<Op>::max;
  V m[64];
  for (int64_t b = 0; b < n; ++b) m[b] = ExtremumOp<V, kMax>::identity();
  for (int64_t k = 0; k < rows; ++k) {
    const In* row = x + k * stride;
    for (int64_t b = 0; b < n; ++b) m[b] = pick<kMax>(m[b], short_load<In, Mid, V>(row[b * step]));
  }
  for (int64_t b = 0; b < n; ++b) {
    const int64_t k = first_equal<In, Mid>(x + b * step, rows, stride, m[b]);  // (rows > 0)
    acc[b] = Op::combine(acc[b], {short_load<In, Mid, V>(x[k * stride + b * step]), r0 + k});
  }
}

// max, min, argmax and argmin of bool columns: the first row holding the extremum (true for
// max, false for min) is each column's answer, and no later row can change it. A block of up to
// 256 columns walks down its rows marking the columns found, a byte each, in vector operations,
// and stops once all are: random data ends after a few dozen rows. A column that never holds it
// has !extremum at its first row. 2 threads, us, a row at a time through reduce_at -> this
// (torch): max over dim 1 of (4096, 1025).permute(1, 0) 2300-2600 -> 126-140 (1640-1800); min
// over dim 0 of (4096, 1025) all true (no early end) 1230 -> 190 (1500-1620); max over dim 1 of
// (64, 1000, 4) 156 -> 10 (59-64), 0.2% true 107 -> 87-92 (60-65).
template <class Op>
void bool_column_positions(const bool* x, int64_t stride, int64_t rows, int64_t width, int64_t r0,
                           typename Op::acc_t* acc) {
  constexpr bool kMax = ExtremumOf<Op>::max;
  constexpr int64_t kB = 256;
  const uint8_t flip = kMax ? 0 : 1;  // (bool's bytes are 0 and 1)
  for (int64_t j = 0; j < width; j += kB) {
    const int64_t n = std::min(kB, width - j);
    uint8_t found[kB] = {};
    int64_t first[kB];
    int64_t left = n;
    for (int64_t k = 0; k < rows && left > 0; ++k) {
      const uint8_t* row = reinterpret_cast<const uint8_t*>(x + k * stride + j);
      uint8_t hit[kB], any = 0;
      for (int64_t b = 0; b < n; ++b) {
        hit[b] = (row[b] ^ flip) & ~found[b];
        any |= hit[b];
      }
      if (!any) continue;
      for (int64_t b = 0; b < n; ++b) {
        if (!hit[b]) continue;
        found[b] = 1;
        first[b] = r0 + k;
        --left;
      }
    }
    for (int64_t b = 0; b < n; ++b)
      acc[j + b] = Op::combine(acc[j + b], found[b] ? typename Op::acc_t{kMax, first[b]} : typename Op::acc_t{!kMax, r0});
  }
}

// Strided columns (generic_column_segment): outputs j of a row at x[j * kS], rows `stride`
// apart, `rows` of them from row r0; blocks of kB dense elements (kB / kS outputs), then the
// outputs the last whole block left (a part block, or one at a time where one is left).
inline constexpr int64_t kDenseStrideMost = 4;
template <class In, class Mid, class Op, int64_t kS>
void dense_strided_group(const In* x, int64_t stride, int64_t rows, int64_t width, int64_t r0,
                         typename Op::acc_t* acc) {
  using Acc = typename Op::acc_t;
  using L = Load<In, Mid, typename Op::value_t>;
  constexpr int64_t kB = 128 / sizeof(Acc) > 0 ? 128 / sizeof(Acc) : 1;
  const int64_t dense = (width - 1) * kS + 1;  // the last output's element ends the run
  // n dense elements from d (n: kB, or a last part block's count): the rows into lo, then the
  // outputs among them into acc.
  const auto block = [&](int64_t d, auto n) {
    Acc lo[kB];
    for (int64_t b = 0; b < n; ++b) lo[b] = Op::identity();
    for (int64_t k = 0; k < rows; ++k) {
      const In* row = x + k * stride + d;
      if constexpr (kConvertFirst<In>) {  // float16: the block converted, then reduced (above)
        typename Op::value_t v[kB];
        convert_block<In, Mid, typename Op::value_t, kB>(row, n, v);
        for (int64_t b = 0; b < n; ++b) lo[b] = reduce_one<Op>(lo[b], v[b], r0 + k);
      } else {
        for (int64_t b = 0; b < n; ++b) lo[b] = reduce_one<Op>(lo[b], L::apply(row[b]), r0 + k);
      }
    }
    for (int64_t b = (kS - d % kS) % kS; b < n; b += kS) acc[(d + b) / kS] = Op::combine(acc[(d + b) / kS], lo[b]);
  };
  int64_t d = 0;
  for (; d + kB <= dense; d += kB) block(d, std::integral_constant<int64_t, kB>{});
  // A last part block of two outputs or more as a block: one at a time, nansum over dim 0 of
  // (2048, 28)[:, ::3] float16 (10 outputs in 28 elements, under a block) took 55 us on 2
  // threads, now 42 (torch 20; sums now take sum_simd's columns kernel, reduce_columns).
  if (width - (d + kS - 1) / kS >= 2) return block(d, dense - d);
  for (int64_t j = (d + kS - 1) / kS; j < width; ++j) {
    Acc lo = Op::identity();
    for (int64_t k = 0; k < rows; ++k) lo = reduce_one<Op>(lo, L::apply(x[k * stride + j * kS]), r0 + k);
    acc[j] = Op::combine(acc[j], lo);
  }
}

// A group of `rows` <= 16 contiguous rows (row k at x + k * stride) of `width` adjacent columns
// into acc[0, width): a block of kB outputs (128 bytes of accumulators, held in registers) takes
// the group's rows, then joins acc. The same operations in the same order as a row at a time
// (strided_column_group), so the same bits; but an accumulator array read and written for every
// element had float32 (4096, 4096) over dim 0 at 9.5 ms on one Xeon thread (torch.sum 8.9), now
// 4.4, and amax over it at 70 ms (torch.amax 12), now 7.2. A group shorter than 16 rows (a short
// reduced dim, a segment's last rows) too: sum over dim 0 of (8, 131072) int64 took 290 us a row
// at a time, torch.sum 67.
template <class In, class Mid, class Op>
void contiguous_column_group(const In* x, int64_t stride, int64_t rows, int64_t width, int64_t r0,
                             typename Op::acc_t* acc) {
  using Acc = typename Op::acc_t;
  using L = Load<In, Mid, typename Op::value_t>;
  if constexpr (kByteCounts<In, Mid, Op>) {
    // Non-zero 1-byte elements (any, all, count_nonzero): a group's rows into byte counters (at
    // most 16 a column), 128 columns a block, which stay in vector registers, then into the int64
    // accumulators; integer counts, the same in any order. On 2 threads, int64 blocks -> byte
    // counters: any over dim 0 of (1025, 16, 3072).permute(1, 0, 2) uint8 7073 -> 3716 us (torch
    // 1389-1632; what is left is the int64 accumulators and the store), over dim 0 of (16, 49152)
    // uint8 171 -> 49 (24-39), of (4096, 4096) bool 2874 -> 584 (7162).
    for (int64_t j = 0; j < width; j += 128) {
      const int64_t n = std::min<int64_t>(128, width - j);
      uint8_t counts[128] = {};
      for (int64_t k = 0; k < rows; ++k) {
        const In* row = x + k * stride + j;
        for (int64_t b = 0; b < n; ++b) counts[b] += uint8_t(row[b] != In(0));
      }
      for (int64_t b = 0; b < n; ++b) acc[j + b] += Acc(counts[b]);
    }
    return;
  }
  constexpr int64_t kB = 128 / sizeof(Acc) > 0 ? 128 / sizeof(Acc) : 1;
  int64_t j = 0;
  if constexpr (kNarrowGroupSums<In, Mid, Op>) {
    // Sums of 1- and 2-byte integers, groups of 8 to 16 rows: in 32-bit lanes, twice as many a
    // vector as int64's, then into the int64 accumulators (integers: the same sums). 2 threads,
    // us over dim 0, three runs each way (torch): (64, 16384) int16 147-259 -> 62-91 (200-306);
    // (16, 49152) int16 118-159 -> 54-94 (110-790); (4096, 1024) uint8 296-438 -> 205-236
    // (12000-13700). Not for fewer rows: (3, 65536) int8 37 -> 50-63.
    constexpr int64_t kN = 32;
    for (; rows >= 8 && j + kN <= width; j += kN) {
      int32_t lo[kN] = {};
      for (int64_t k = 0; k < rows; ++k) {
        const In* row = x + k * stride + j;
        for (int64_t b = 0; b < kN; ++b) lo[b] += int32_t(row[b]);
      }
      for (int64_t b = 0; b < kN; ++b) acc[j + b] += Acc(lo[b]);
    }
  }
  for (; j + kB <= width; j += kB) {
    Acc lo[kB];
    for (int64_t b = 0; b < kB; ++b) lo[b] = Op::identity();
    for (int64_t k = 0; k < rows; ++k) {
      const In* row = x + k * stride + j;
      if constexpr (kConvertFirst<In>) {
        typename Op::value_t v[kB];
        convert_block<In, Mid, typename Op::value_t, kB>(row, kB, v);
        for (int64_t b = 0; b < kB; ++b) lo[b] = reduce_one<Op>(lo[b], v[b], r0 + k);
      } else {
        for (int64_t b = 0; b < kB; ++b) lo[b] = reduce_one<Op>(lo[b], L::apply(row[b]), r0 + k);
      }
    }
    for (int64_t b = 0; b < kB; ++b) acc[j + b] = Op::combine(acc[j + b], lo[b]);
  }
  // The rest of the strip, from a quarter of kB outputs, the same way, a row of them at a time:
  // one at a time, sum over dim 1 of (56, 4097) transposed float32, 56 outputs, took 81 us on 2
  // threads (24 of them alone), torch.sum 26; now 26-41 (torch 25-31). Fewer stay one at a time:
  // 7 outputs of bfloat16 this way were 0.70-0.73x torch's speed against 0.78-0.80x.
  if (const int64_t rest = width - j; rest >= kB / 4 && rest > 1) {
    columns_rest<In, Mid, Op, kB>(x + j, stride, rows, rest, r0, acc + j);
    j = width;
  }
  for (; j < width; ++j) {
    Acc lo = Op::identity();
    for (int64_t k = 0; k < rows; ++k)
      lo = reduce_one<Op>(lo, short_load<In, Mid, typename Op::value_t>(x[k * stride + j]), r0 + k);
    acc[j] = Op::combine(acc[j], lo);
  }
}

// The same for columns `step` elements apart, a row at a time through kWidth accumulators.
template <class In, class Mid, class Op, int64_t kWidth>
void strided_column_group(const In* x, int64_t stride, int64_t step, int64_t rows, int64_t width, int64_t r0,
                          typename Op::acc_t* acc) {
  using Acc = typename Op::acc_t;
  using L = Load<In, Mid, typename Op::value_t>;
  Acc low[kWidth];
  std::fill(low, low + width, Op::identity());
  for (int64_t k = 0; k < rows; ++k) {
    const In* row = x + k * stride;
    if constexpr (kConvertFirst<In>) {
      typename Op::value_t v[kWidth];
      for (int64_t j = 0; j < width; ++j) v[j] = L::apply(row[j * step]);
      for (int64_t j = 0; j < width; ++j) low[j] = reduce_one<Op>(low[j], v[j], r0 + k);
    } else {
      for (int64_t j = 0; j < width; ++j) low[j] = reduce_one<Op>(low[j], L::apply(row[j * step]), r0 + k);
    }
  }
  for (int64_t j = 0; j < width; ++j) acc[j] = Op::combine(acc[j], low[j]);
}

template <class In, class Mid, class Op, int64_t kWidth>
void generic_column_segment(const In* base, const Layout3& l, int64_t r_begin, int64_t end, int64_t width,
                            typename Op::acc_t* acc) {
  constexpr int64_t kStep = 16;
  std::fill(acc, acc + width, Op::identity());
  if constexpr (ExtremumOf<Op>::kind == Extremum::Position && std::is_same_v<In, bool>) {
    if (l.in_inner == 1)
      return bool_column_positions<Op>(base + r_begin * l.in_reduced, l.in_reduced, end - r_begin, width, r_begin, acc);
  } else if constexpr (ExtremumOf<Op>::kind == Extremum::Position) {
    // Float positions over columns the vector kernels do not take (float16's narrow ones), and
    // any type's over strided columns: the segment's rows at once, 64 columns at a time, a
    // column's first_equal ending once a segment, not once every 16 rows. 2 threads, us (torch):
    // min over dim -2 of (512, 40, 3) float16, by 16 rows 90-102 -> 67-77 (58-67); min over dim
    // 0 of (256, 3, 1023)[:, :, ::2] float32, reduce_at a row at a time 505-591 -> by 16 rows 381
    // -> 274-283 (154-190; the rest, three tasks on two threads, reduce_columns' strips); argmax
    // over it as int32 488 -> 150 (480-530). (A pick of four columns in SSE lanes: 283 -> 274,
    // noise: not kept.)
    if (std::is_floating_point_v<typename Op::value_t> || l.in_inner != 1) {
      for (int64_t j = 0; j < width; j += 64)
        column_positions<In, Mid, Op>(base + r_begin * l.in_reduced + j * l.in_inner, l.in_reduced, l.in_inner,
                                      end - r_begin, std::min<int64_t>(64, width - j), r_begin, acc + j);
      return;
    }
  }
  // Groups of 16 rows (the order sum_simd's columns kernels add in: the same bits).
  for (int64_t r1 = r_begin; r1 < end; r1 += kStep) {
    const int64_t rows = std::min(kStep, end - r1);
    const In* group = base + r1 * l.in_reduced;
    if (l.in_inner == 1) {
      contiguous_column_group<In, Mid, Op>(group, l.in_reduced, rows, width, r1, acc);
      continue;
    }
    // Outputs 2 to 4 elements apart: the dense run from the first to the last, in the
    // contiguous case's blocks (each row's block one vector loop), every in_inner-th
    // accumulator kept, the others dropped (whatever they hold: lanes are independent). Each
    // output's rows in the same order as a row at a time: the same bits. One thread, ms, a row
    // at a time -> dense: sum over dim 1 of (8, 5120, 512)[..., ::3] float32 9.5 -> 7.0,
    // bfloat16 8.7 -> 4.9, its full sum (columns, then their combine) 9.0 -> 6.9 and 8.7 -> 5.0.
    // Not extrema, whose picks do not vectorise (amax over dim 1, 13.0 -> 20.1, float32), nor
    // integers (uint8 sums into int64 lanes, 4.2 -> 4.7).
    if (ExtremumOf<Op>::kind == Extremum::None && std::is_floating_point_v<typename Op::value_t> && l.in_inner >= 2 &&
        l.in_inner <= kDenseStrideMost && width > 1) {
      switch (l.in_inner) {
        case 2: dense_strided_group<In, Mid, Op, 2>(group, l.in_reduced, rows, width, r1, acc); break;
        case 3: dense_strided_group<In, Mid, Op, 3>(group, l.in_reduced, rows, width, r1, acc); break;
        default: dense_strided_group<In, Mid, Op, 4>(group, l.in_reduced, rows, width, r1, acc); break;
      }
      continue;
    }
    strided_column_group<In, Mid, Op, kWidth>(group, l.in_reduced, l.in_inner, rows, width, r1, acc);
  }
}

// Narrower float16 columns of max and min over a dim, argmax and argmin go to the generic loop,
// its elements through half_table: sum_simd's extrema pad each row's columns into a vector, then
// the positions' pass converts every element in scalar code. On 2 threads, us: min over dim -2
// of (512, 40, 3) 208 -> 110 (torch 35-54), max over dim 1 of (64, 300, 5) 240 -> 97 (torch
// 43-73). Not float32 or bfloat16: argmin over dim 1 of (224, 512, 7) float32 342-574 -> 909-954,
// argmax over dim 1 of (4096, 64, 4) bfloat16 800-1232 -> 1527-1846.
inline constexpr int64_t kSimdLeastWidth = 8;

// Columns (inner > 1): a task owns a strip of up to kWidth adjacent outputs of one outer index
// (16 KB of accumulators; each row of the strip a contiguous read when the inner run is) and one
// segment of kSegment rows of the reduced dim, added as a cascade: 16 rows into a first level,
// the 16 of those into a second. Segments (a fixed split, whatever the thread count) are then
// combined pairwise in order. (4096, 4096) float32 over dim 0, one thread, against torch.sum:
// 0.4x with strips of 256 outputs walking all 4096 rows; strips of 1, 4, 8, 16 and 32 KB of
// float32 then 0.36x, 0.84x, 1.0x, 1.1-1.4x, 1.5x (each row's read is a strip: short reads
// waste the prefetcher's ramp).
template <class In, class Mid, class Op>
void reduce_columns(const In* x, const Layout3& l, const Sink& out) {
  using Acc = typename Op::acc_t;
  if constexpr (kByteCounts<In, Mid, Op>) {
    if (out.args.logic != Logic::None && !out.partials && l.in_inner == 1 && l.out_inner == 1 &&
        (out.dtype == DType::Bool || out.dtype == DType::UInt8)) {
      if (byte_logic_columns(x, l, out.args.logic == Logic::Any, static_cast<uint8_t*>(out.ptr))) return;
    }
  }
  constexpr int64_t kWidth = std::max<int64_t>(16, 16384 / sizeof(Acc));
  constexpr int64_t kStep = 16, kSegment = kStep * kStep;
  const int64_t segments = (l.reduced + kSegment - 1) / kSegment;
  // Strips of up to kWidth outputs; narrower (down to 64) where that leaves threads idle, as long
  // as each task keeps ~32K elements: (32, 4096) float32 over dim 0 was one strip, on one of two
  // threads. An output is reduced the same way whatever its strip's width: the same bits.
  int64_t strip = kWidth;
  int64_t wanted = std::min<int64_t>(at::get_num_threads(), l.outer * l.inner * l.reduced >> 15);
  const int64_t wide_tasks = l.outer * ((l.inner + kWidth - 1) / kWidth) * segments;  // in strips of kWidth
  if constexpr (ExtremumOf<Op>::kind == Extremum::Position) {
    // Positions take more time an element than a read: where the tasks do not share evenly
    // among the threads, four a thread (min over dim 0 of (256, 3, 1023)[:, :, ::2] float32,
    // three strips on 2 threads: 273 us, torch 186; one thread 425, torch 403). Not where they
    // do: max over dim 0 of (1000, 300, 3)[..., 0] float16, four segments, 218 -> 287-318 (171-240).
    // (The float32 case above: 274-283 -> 220-236.)
    if (wanted > 1 && wide_tasks < 4 * wanted && wide_tasks % wanted != 0) wanted *= 4;
  }
  if (wide_tasks < wanted) {
    const int64_t strips_wanted = (wanted + l.outer * segments - 1) / (l.outer * segments);
    strip = std::clamp<int64_t>(((l.inner + strips_wanted - 1) / strips_wanted + 63) / 64 * 64, 64, kWidth);
  }
  strip = equal_strip(l.inner, strip);
  const int64_t width_max = std::min(strip, l.inner);  // of any strip
  constexpr bool kExtremumInto = extremum_into<In, Mid, Op>();
  constexpr bool kNarrowGeneric = kSimdExtremaPositions<In, Mid, Op> && std::is_same_v<In, c10::Half>;
  const int64_t strips = (l.inner + strip - 1) / strip;
  // The accumulators of segment g of strip s of outer index o, into acc[0, width).
  const auto segment = [&](int64_t o, int64_t s, int64_t g, Acc* acc) {
    const int64_t i0 = s * strip, width = std::min(strip, l.inner - i0);
    const In* base = x + l.outer_in(o) + i0 * l.in_inner;
    const int64_t r0 = g * kSegment, end = std::min(l.reduced, r0 + kSegment);
    if (l.in_inner == 1 && (width >= kSimdLeastWidth || !kNarrowGeneric) &&
        simd_column_segment<In, Mid, Op, kWidth>(base + r0 * l.in_reduced, l.in_reduced, end - r0, width, r0, acc))
      return width;
    if constexpr (kSimdColumnSums<In, Mid, Op> || kSimdProd<In, Mid, Op>) {
      // Sums and products of columns 2 to 4 elements apart: sum_simd's columns kernel over the
      // dense run from the first to the last (as dense_strided_group, in the same groups of 16
      // rows: the same bits), every in_inner-th result kept. 2 threads, us (torch), dense_strided
      // -> this: nansum over dim 0 of (2048, 28)[:, ::3] float16 42 -> 6.8 (20), bfloat16 18 ->
      // 8.2, float32 16 -> 6.3; the float16 sum of all of (256, 128, 64)[..., ::3] (these
      // columns, then their combine) 649 -> 68 (352).
      if (l.in_inner >= 2 && l.in_inner <= kDenseStrideMost && width > 1) {
        std::vector<Acc> dense(size_t((width - 1) * l.in_inner + 1));
        simd_column_segment<In, Mid, Op, kWidth>(base + r0 * l.in_reduced, l.in_reduced, end - r0,
                                                 int64_t(dense.size()), r0, dense.data());
        for (int64_t j = 0; j < width; ++j) acc[j] = dense[j * l.in_inner];
        return width;
      }
    }
    generic_column_segment<In, Mid, Op, kWidth>(base, l, r0, end, width, acc);
    return width;
  };
  const auto store = [&](int64_t o, int64_t s, int64_t j, const Acc& v) {
    out.put<Op>(l.outer_out(o) + (s * strip + j) * l.out_inner, v);
  };
  // A task reads at least ~32K elements.
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 15) / (width_max * std::min(kSegment, l.reduced)));
  if (segments == 1) {
    // amax and amin with results of the accumulator's type, each strip's contiguous: the kernel
    // writes the results themselves, not acc for put_block to copy (2 threads, amax over dim 2 of
    // (14, 256, 3, 5120) float32: into acc 0.91-0.96x torch's speed, into the result 0.98-1.05x;
    // amin over dim 1 of (1025, 8, 1024): 0.82-0.89x -> 1.02-1.10x). Most of that amax's time,
    // torch's too, is the first touch of its fresh 73 MB result: torch.amax into an out= tensor
    // already written took 14 ms of its 37-45.
    // Sums, means and nansums with results of the accumulator's type likewise, a mean's division
    // then in place while the strip is in L1, vectorised: put_block's division a result at a
    // time was 35% of mean over dim 1 of (80, 3, 512, 14) float32 (perf, 2 threads).
    bool into_result = false, project = false;
    if constexpr (kExtremumInto) {
      into_result = !out.partials && out.dtype == dtype_of_ctype<Acc>() && l.out_inner == 1 && out.args.count == 0;
    }
    if constexpr (kSimdColumnSums<In, Mid, Op>) {
      into_result = !out.partials && out.dtype == dtype_of_ctype<Acc>() && l.out_inner == 1;
      project = out.args.count > 0 || out.args.repeats != 1 || out.args.logic != Logic::None;
    }
    at::parallel_for(0, l.outer * strips, grain, [&](int64_t begin, int64_t end) {
      Acc acc[kWidth];
      for (int64_t t = begin; t < end; ++t) {
        const int64_t o = t / strips, s = t % strips;
        if (into_result) {
          Acc* r = static_cast<Acc*>(out.ptr) + l.outer_out(o) + s * strip;
          const int64_t width = segment(o, s, 0, r);
          if constexpr (kSimdColumnSums<In, Mid, Op>) {
            if (project) {
              const ProjectArgs a = out.args;
              if (std::is_floating_point_v<Acc> && a.repeats == 1 && a.logic == Logic::None) {
                // A mean: project's bits (finalize's division), in a loop that vectorises;
                // project's own branches kept it to one division at a time.
                const Acc d = Acc(a.count);
                for (int64_t j = 0; j < width; ++j) r[j] = r[j] / d;
              } else {
                for (int64_t j = 0; j < width; ++j) r[j] = Op::project(r[j], a);
              }
            }
          }
          continue;
        }
        const int64_t width = segment(o, s, 0, acc);
        // The dtype's switch once a strip (a store at a time was most of the time of short
        // columns: (8, 131072) float32 over dim 0, 510 us on one thread, torch.sum 79).
        out.put_block<Op>(l.outer_out(o) + s * strip * l.out_inner, l.out_inner, acc, width);
      }
    });
    return;
  }
  // partial[((o * strips + s) * segments + g) * width_max + j]
  const int64_t tasks = l.outer * strips * segments;
  const std::unique_ptr<Acc[]> partial(new Acc[tasks * width_max]);
  at::parallel_for(0, tasks, grain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t)
      segment(t / (strips * segments), t / segments % strips, t % segments, partial.get() + t * width_max);
  });
  // The combine by blocks of kCombineWidth outputs of a strip, on every thread: a strip a task
  // left (4096, 4096) with one task, 16 x 4096 partials on one thread while the others waited.
  constexpr int64_t kCombineWidth = 256;
  const int64_t blocks = (width_max + kCombineWidth - 1) / kCombineWidth;  // of a strip
  at::parallel_for(0, l.outer * strips * blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const int64_t t = b / blocks, o = t / strips, s = t % strips;
      const int64_t width = std::min(strip, l.inner - s * strip);
      const int64_t j1 = std::min(width, (b % blocks + 1) * kCombineWidth);
      const Acc* p = partial.get() + t * segments * width_max;
      for (int64_t j = b % blocks * kCombineWidth; j < j1; ++j) store(o, s, j, pairwise_combine<Op>(p + j, segments, width_max));
    }
  });
}

// Maps (one element a result, inner > 1) whose results are transposed against the input, or
// whose inner runs are short (then a block of outer indexes a store where their results follow
// one another; see reduce_auto): each
// output its element through the operator, a run along inner at a time, outer indexes on all
// threads; along the result's contiguous run where that is longer than inner (its stores one
// run, its reads strided, the next outer indexes reading on from the same lines). The columns
// kernel took maps as columns of one row, a task a strip of inner's outputs: any over the size-1
// dim of (112, 151936, 1, 3).transpose(0, 3) float32, 3 outputs 17 M apart a task for each of 17
// M outer indexes, 552 ms on 2 threads (torch 113); amax over the size-1 dim of (8, 100000, 1,
// 5).transpose(0, 3) float32 31.9 ms (torch 4.6).
inline constexpr int64_t kMapRun = 256;
inline constexpr int64_t kMapTile = 32;  // reduce_map's transposed tiles
template <class In, class Mid, class Op>
void reduce_map(const In* x, const Layout3& l0, const Sink& out) {
  using Acc = typename Op::acc_t;
  using L = Load<In, Mid, typename Op::value_t>;
  Layout3 l = l0;
  if (l0.out_inner != 1) {
    const RunIndex r = outer_run_index(l0);
    int k = -1;
    for (int q = 0; q < r.runs; ++q)
      if (r.out[q] == 1 && r.size[q] > l0.inner) k = q;
    Layout3 by_result;
    if (k >= 0 && run_as_inner(l0, r, k, &by_result)) l = by_result;
  }
  if (l.out_inner == 1 && l.outer_runs.runs > 1) {
    // The outer run whose results continue inner's as the fastest digit (a map's outer indexes
    // are independent, any order will do): (3, 3072) of the permuted (3072, 3, 1, 3) above
    // stepped through its run of 3, results 9216 apart, a store call a run of 3.
    const RunIndex r = l.outer_runs;
    int k = -1;
    for (int q = 0; q < r.runs; ++q)
      if (r.out[q] == l.inner && r.size[q] > 1) k = q;
    if (k >= 0 && k != r.runs - 1) {
      RunIndex o;
      for (int q = 0; q < r.runs; ++q)
        if (q != k) o.add(r.size[q], r.in[q], r.out[q]);
      o.add(r.size[k], r.in[k], r.out[k]);
      l.outer_runs = o;
    }
  }
  constexpr int64_t kRun = kMapRun;
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 15) / l.inner);  // ~32K elements a task
  // Short inner runs whose results continue from one outer index to the next (the last outer
  // run's out step is inner): a block of outer indexes' results one store call. A store a run of
  // 3 was most of the time of all over the size-1 dim of (3072, 3, 1, 3).permute(1, 0, 3, 2)
  // float32 (9216 outer indexes through two runs): 212 us on 2 threads, now 36 (torch 24; sum 20,
  // torch 12: what is left is the call's fixed cost, on one thread).
  const LastRun run = last_outer_run(l);
  const int64_t along = run.along, in_step = run.in_step, out_step = run.out_step;
  const int64_t per_store = l.out_inner == 1 && out_step == l.inner ? std::max<int64_t>(1, kRun / l.inner) : 1;
  if (per_store == 1 && l.out_inner != 1 && out_step == 1 && along >= kMapTile) {
    // Results transposed against the input, consecutive along the last outer run: tiles of
    // kMapTile outer indexes x kMapTile inner ones, read along inner, stored along outer (a
    // store call a run of kMapTile results), each task's tiles whole runs of results. An
    // output at a time along inner had each task write a byte into each of 1023 lines, the
    // lines shared with the next task's: aminmax over the size-1 dim of (1, 256,
    // 1023).transpose(1, 2) uint8 took 1569 us on 16 threads (torch 92).
    const int64_t per_run = (along + kMapTile - 1) / kMapTile, tiles = l.outer / along * per_run;
    const int64_t tile_grain = std::max<int64_t>(1, grain / kMapTile);
    at::parallel_for(0, tiles, tile_grain, [&](int64_t begin, int64_t end) {
      Acc v[kMapTile * kMapTile];
      for (int64_t t = begin; t < end; ++t) {
        const int64_t o0 = t / per_run * along + t % per_run * kMapTile;
        const int64_t b = std::min(kMapTile, along - t % per_run * kMapTile);
        const In* base = x + l.outer_in(o0);
        const int64_t at = l.outer_out(o0);
        for (int64_t i0 = 0; i0 < l.inner; i0 += kMapTile) {
          const int64_t m = std::min(kMapTile, l.inner - i0);
          for (int64_t k = 0; k < b; ++k) {
            const In* row = base + k * in_step + i0 * l.in_inner;
            for (int64_t i = 0; i < m; ++i)
              v[i * kMapTile + k] = reduce_one<Op>(Op::identity(), L::apply(row[i * l.in_inner]), 0);
          }
          for (int64_t i = 0; i < m; ++i) out.put_block<Op>(at + (i0 + i) * l.out_inner, 1, v + i * kMapTile, b);
        }
      }
    });
    return;
  }
  at::parallel_for(0, l.outer, grain, [&](int64_t begin, int64_t end) {
    Acc v[kRun];
    for (int64_t o0 = begin, b; o0 < end; o0 += b) {
      const int64_t at = l.outer_out(o0);
      if (per_store > 1) {
        b = std::min({per_store, end - o0, along - o0 % along});
        const In* base = x + l.outer_in(o0);
        for (int64_t k = 0; k < b; ++k)
          for (int64_t i = 0; i < l.inner; ++i)
            v[k * l.inner + i] = reduce_one<Op>(Op::identity(), L::apply(base[k * in_step + i * l.in_inner]), 0);
        out.put_block<Op>(at, 1, v, b * l.inner);
        continue;
      }
      b = 1;
      const In* base = x + l.outer_in(o0);
      for (int64_t i0 = 0; i0 < l.inner; i0 += kRun) {
        const int64_t m = std::min(kRun, l.inner - i0);
        for (int64_t i = 0; i < m; ++i)
          v[i] = reduce_one<Op>(Op::identity(), L::apply(base[(i0 + i) * l.in_inner]), 0);
        out.put_block<Op>(at + i0 * l.out_inner, l.out_inner, v, m);
      }
    }
  });
}

// Any layout: rows or columns; with several reduced runs (Layout3::combine), partials first,
// then each output's partials combined pairwise in order, the outputs on all threads.
template <class In, class Mid, class Op>
void reduce_auto(const In* x, const Layout3& l, const Sink& out) {
  if (l.combine > 1) {
    using Acc = typename Op::acc_t;
    const int64_t outputs = l.outputs();
    const std::unique_ptr<Acc[]> partial(new Acc[l.combine * outputs]);
    Layout3 first = l;
    first.combine = 1;
    Sink to_partials = out;
    to_partials.partials = partial.get();
    reduce_auto<In, Mid, Op>(x, first, to_partials);
    at::parallel_for(0, outputs, std::max<int64_t>(1, (int64_t(1) << 15) / l.combine), [&](int64_t begin, int64_t end) {
      for (int64_t k = begin; k < end; ++k) out.put<Op>(k, pairwise_combine<Op>(partial.get() + k, l.combine, outputs));
    });
    return;
  }
  // Maps of transposed results, and of short inner runs (the columns kernel's strips of a few
  // outputs cost a task and a store each).
  if (l.reduced == 1 && l.inner > 1 && (l.out_inner != 1 || l.inner < kMapRun)) {
    reduce_map<In, Mid, Op>(x, l, out);
    return;
  }
  // Positions over columns of 2 to 4 results an outer index: each column a strided row
  // (layout.h's inner_as_rows), gathered for the vector kernels (chunk_reduce). 2 threads, us,
  // columns -> rows (torch), argmax over dim 1 of (n, 77, inner): inner 2 float32 3530 -> 1980
  // (8820), bfloat16 4120 -> 1920; inner 5 1920 -> 2010; inner 8 1005 -> 2030 (the columns'
  // lanes pay from there); min over dim 1 of (2048, 77, 3) float16 486 -> 285 (404).
  if constexpr (kSimdExtremaPositions<In, Mid, Op>) {
    Layout3 rows;
    if (l.inner > 1 && l.inner <= 4 && l.reduced >= 16 && inner_as_rows(l, &rows)) {
      reduce_rows<In, Mid, Op>(x, rows, out);
      return;
    }
  }
  // Short rows of results under 4 bytes transposed against the input: as columns along the
  // result's contiguous run (layout.h's rows_in_result_order), so that each thread's results are
  // whole runs of the result. Along the input's last run, the threads' results interleaved
  // within cache lines: 1-byte results 96 apart, all over rows of 3 of (96, 256,
  // 3).transpose(0, 1) bool, took 374 us on 2 threads, 6.7 ns a store (the lines bouncing
  // between the cores), now 47 (torch 86-88); amax of it as uint8 257 -> 19 (torch 40). Not
  // results of 4 bytes and more, whose threads' shares met at line boundaries there: the sum's
  // int64 30 -> 37 us as columns, float32 amax 23 -> 41.
  const auto result_bytes = [](DType d) {
    switch (d) {
#define TREDUCE_DTYPE_BYTES(D) \
  case DType::D:               \
    return int(sizeof(ctype_t<DType::D>));
      TREDUCE_DTYPES(TREDUCE_DTYPE_BYTES)
#undef TREDUCE_DTYPE_BYTES
    }
    return 8;
  };
  if (Layout3 columns; l.inner == 1 && l.reduced <= kShortRow && !out.partials && result_bytes(out.dtype) < 4 &&
                       rows_in_result_order(l, &columns)) {
    reduce_columns<In, Mid, Op>(x, columns, out);
    return;
  }
  if (l.inner == 1) reduce_rows<In, Mid, Op>(x, l, out);
  else reduce_columns<In, Mid, Op>(x, l, out);
}

// Where the kernels write: the result, or the distinct results of kept dims expanded in the
// input (prepare_reduce), which repeat_distinct then copies along the repeats.
Sink sink_of(const Prepared& p) {
  const at::Tensor& out = p.distinct.defined() ? p.distinct : p.out;
  const at::Tensor& out2 = p.distinct.defined() ? p.distinct2 : p.out2;
  return {out.mutable_data_ptr(), p.types.out, p.project, out2.defined() ? out2.mutable_data_ptr() : nullptr,
          nullptr};
}

void repeat_distinct(const Prepared& p) {
  if (!p.distinct.defined()) return;
  p.out.copy_(p.distinct.expand_as(p.out));
  if (p.out2.defined()) p.out2.copy_(p.distinct2.expand_as(p.out2));
}

// The CPU's side of the dtype switch (reductions.h): var in double for every input dtype, as
// torch's CPU kernel.
struct CpuSide {
  using Half = c10::Half;
  using BFloat16 = c10::BFloat16;
  template <class A>
  using Sum = SumOp<A>;
  template <class A>
  using VarAcc = double;
};

// auto for a prepared call of any op but the sums' variants: its operator over its layout on
// all threads.
void run_auto(const Prepared& p) {
  const bool found = visit_reduction<CpuSide>(p.op, p.types, norm_ord(p.project.scalar), [&](auto types) {
    using T = decltype(types);
    reduce_auto<typename T::In, typename T::Mid, typename T::Op>(p.input.const_data_ptr<typename T::In>(),
                                                                 p.layout, sink_of(p));
  });
  TORCH_INTERNAL_ASSERT(found, "no instantiation for ", op_name(p.op), " of ", dtype_name(p.types.in));
  repeat_distinct(p);
}

template <class In, class Mid, class Acc>
void run_sum(Variant v, const Prepared& p) {
  const In* x = p.input.const_data_ptr<In>();
  const Sink out = sink_of(p);
  switch (v) {  // serial and pairwise: a full reduction of a contiguous input (prepare_reduce)
    case Variant::Serial: return out.put<SumOp<Acc>>(0, serial_sum<In, Mid, Acc>(x, p.layout.reduced));
    case Variant::Pairwise: return out.put<SumOp<Acc>>(0, pairwise_sum<In, Mid, Acc>(x, p.layout.reduced));
    case Variant::Auto:
      // One result (a whole tensor): float32 in double, float64 compensated. Over dims the plain
      // cascades stay: their error is torch's there (tests/test_cpu_sum.py), and short rows would
      // pay the wider trees once an output.
      if constexpr (std::is_same_v<In, float> && std::is_same_v<Mid, float> && std::is_same_v<Acc, float>) {
        if (p.layout.outer == 1 && p.layout.inner == 1) return reduce_rows<In, Mid, WideFloatSumOp>(x, p.layout, out);
      }
      if constexpr (std::is_same_v<In, double> && std::is_same_v<Acc, double>) {
        if (p.layout.outer == 1 && p.layout.inner == 1) return reduce_rows<In, Mid, CompensatedSumOp>(x, p.layout, out);
      }
      return reduce_auto<In, Mid, SumOp<Acc>>(x, p.layout, out);
    case Variant::Exact: break;  // exact_sum_cpu takes it before the dtype dispatch
  }
}

// A prepared sum or mean, by its variant.
at::Tensor run_sum_or_mean(const Prepared& p) {
  if (p.done) return p.out;
  const auto v = static_cast<Variant>(p.variant);
  const bool found = visit_sum<CpuSide>(p.types, [&](auto types) {
    using T = decltype(types);
    run_sum<typename T::In, typename T::Mid, typename T::Op::acc_t>(v, p);
  });
  TORCH_INTERNAL_ASSERT(found, "no instantiation for this dtype combination");
  repeat_distinct(p);
  return p.out;
}

// A contiguous run into an accumulator: the vector windows of sum_simd (about 20x faster than
// an element at a time on data of moderate range), the same words.
template <class T>
void exact_run(const T* x, int64_t n, ExactAcc* a) {
  kernels_of<T>().exact(simd_run(x), n, a);
}

// A short run's levels (sum_simd's exact_short: exact partial sums of elements not all zero)
// into an accumulator, as its elements would leave it.
void add_levels(const double* levels, int m, ExactAcc* a) {
  for (int k = 0; k < m; ++k)
    if (levels[k] != 0) a->add(levels[k]);
  a->any = true;
  a->not_neg_zero |= 1;
}

constexpr int64_t kExactRows = int64_t(1) << 14;  // reduced elements a work item
constexpr int64_t kExactCopy = 2048;               // strided elements copied at a time (one block)
static_assert(kExactCopy == simd::kExactShortMax);  // (a short run is one copy, a group's block one call)

// Strided outputs reduced together: exact_columns' group (a line of a row; two of float64).
template <class T>
constexpr int64_t kExactGroup = simd::exact_columns_of(sizeof(T));
// The levels of such a group (exact_columns'), as namespace constants: GCC 12 failed on array
// bounds from the function's own constants inside its generic lambdas.
template <class T>
constexpr int64_t kExactGroupLevels = simd::kExactShortLevels * kExactGroup<T>;

// Whether a run of n elements `step` apart has one other than -0.0 (the exact sum's zero rule).
template <class T>
bool any_but_negative_zero(const T* p, int64_t n, int64_t step) {
  using B = std::conditional_t<sizeof(T) == 8, uint64_t, std::conditional_t<sizeof(T) == 4, uint32_t, uint16_t>>;
  constexpr B kNegZero = B(B(1) << (8 * sizeof(B) - 1));
  for (int64_t i = 0; i < n; ++i) {
    B b;
    std::memcpy(&b, p + i * step, sizeof b);
    if (b != kNegZero) return true;
  }
  return false;
}

// exact_sum's work: groups of outputs (kExactGroup<T> adjacent ones where elements are strided, else
// one), and each group's elements as contiguous runs (in place, or copied a block at a time) or,
// for a whole group of adjacent outputs, as column blocks in place (sum_simd's exact_columns).
template <class T>
struct ExactGroups {
  // Copies a line apart more than their size: at a multiple of 4 KB apart, the stores of a row
  // all fell in one set of L1 (4.6x the time: 17.9 ms against 3.9 for (65536, 128) float32 over dim 0).
  static constexpr int64_t kStride = kExactCopy + kExactGroup<T>;
  struct Group {
    int64_t o, i, count;  // its outer index, its first inner index, its outputs
  };
  const T* x;
  const Layout3& l;
  const bool strided = l.in_reduced != 1;
  const int64_t width = strided && l.outer * l.inner > 1 ? kExactGroup<T> : 1;  // outputs a group
  const int64_t per_outer = (l.inner + width - 1) / width, count = l.outer * per_outer;
  const int64_t step = l.in_reduced, across = l.in_inner;

  Group group(int64_t g) const {
    const int64_t o = g / per_outer, i = g % per_outer * width;
    return Group{o, i, std::min(width, l.inner - i)};
  }
  int64_t out(const Group& gr, int64_t k) const { return l.outer_out(gr.o) + (gr.i + k) * l.out_inner; }

  // Group g's elements [r0, r1) of each output: run(k, p, m) for output k's next m elements at p
  // (in place or copied), or columns(levels, nl, in_double, p, m) for the next m rows of a whole
  // group of adjacent outputs (exact_columns' levels; the rows at p, step apart). seen: the range
  // of the work item's column blocks so far (exact_columns' guess).
  template <class Run, class Columns>
  void for_runs(int64_t g, int64_t r0, int64_t r1, std::vector<T>& copy, simd::ExactColumnsSeen& seen, const Run& run,
                const Columns& columns) const {
    const Group gr = group(g);
    const T* base = x + l.outer_in(gr.o) + gr.i * across;
    if (!strided) return run(0, base + r0, r1 - r0);
    for (int64_t r = r0; r < r1; r += kExactCopy) {
      const int64_t m = std::min(kExactCopy, r1 - r);
      const T* row = base + r * step;
      if (gr.count == kExactGroup<T> && across == 1) {
        double levels[kExactGroupLevels<T>];
        bool in_double = false;
        const int nl = kernels_of<T>().exact_columns(simd_run(row), step, m, levels, &in_double, &seen);
        if (nl > 0) {
          columns(levels, nl, in_double, row, m);
          continue;
        }
      }
      copy.resize(size_t(kExactGroup<T> * kStride));
      T* const dst = copy.data();
      for (int64_t e = 0; e < m; ++e, row += step) {
        __builtin_prefetch(row + 16 * step);  // (rows a page apart: no hardware prefetch)
        for (int64_t k = 0; k < gr.count; ++k) dst[k * kStride + e] = row[k * across];
      }
      for (int64_t k = 0; k < gr.count; ++k) run(k, dst + k * kStride, m);
    }
  }
};

// The exact sum of floating elements (exact.h), over any layout. Work items are a group of
// outputs by a range of kExactRows reduced elements, each with its own accumulators, merged
// where a result spans several ranges (an exact sum has no order). Contiguous runs go to
// sum_simd's block windows in place. Strided elements: a group of kExactGroup adjacent outputs
// (a line of a row) goes through sum_simd's column windows in place, a block of rows a call; other
// groups are copied a block at a time into contiguous runs first (one exact add an element was
// 10 ns and more: 2 cores, (65536, 128) float32 over dim 0, 79 ms against auto's 0.7).
// emit(j, acc) takes output j's accumulator (j: the output's offset in the contiguous result).
// Results of at most kExactShortMax elements come as their windows' levels first (exact_short,
// exact_columns): emit_levels(j, levels, m, in_double) takes them where it can do without an
// accumulator (returns true), as a row of 128 float32 elements spent ten times its adds in its
// accumulator and the rounding.
template <class T, class Emit, class EmitLevels>
void exact_sum(const T* x, const Layout3& l, const Emit& emit, const EmitLevels& emit_levels) {
  constexpr int64_t kGroup = kExactGroup<T>;
  const ExactGroups<T> w{x, l};
  const int64_t ranges = std::max<int64_t>(1, (l.reduced + kExactRows - 1) / kExactRows);
  // Output k's levels of a group's block (m rows from p) into its accumulator; the zero rule from
  // the elements when all its levels are zero.
  const auto add_column = [&](const double* levels, int nl, const T* p, int64_t m, int64_t k, ExactAcc* a) {
    for (int s = 0; s < nl; ++s)
      if (levels[s * kGroup + k] != 0) a->add(levels[s * kGroup + k]);
    a->any = true;
    if (a->not_neg_zero == 0 && any_but_negative_zero(p + k, m, w.step)) a->not_neg_zero = 1;
  };
  const auto add_run = [&](ExactAcc* a) { return [a](int64_t k, const T* p, int64_t m) { exact_run(p, m, &a[k]); }; };
  const auto add_columns = [&](ExactAcc* a) {
    return [&, a](const double* levels, int nl, bool, const T* p, int64_t m) {
      for (int64_t k = 0; k < kGroup; ++k) add_column(levels, nl, p, m, k, &a[k]);
    };
  };
  if (ranges == 1) {
    const bool short_runs = l.reduced <= simd::kExactShortMax;
    at::parallel_for(0, w.count, 1, [&](int64_t b, int64_t e) {
      const simd::KeepSubnormals keep;  // (emit's conversions, on this thread)
      std::vector<T> copy;
      simd::ExactColumnsSeen seen;
      ExactAcc a[kExactGroup<T>];  // (552 bytes each: reset only where used)
      for (int64_t g = b; g < e; ++g) {
        const auto gr = w.group(g);
        if (!short_runs) {
          std::fill(a, a + gr.count, ExactAcc{});
          w.for_runs(g, 0, l.reduced, copy, seen, add_run(a), add_columns(a));
          for (int64_t k = 0; k < gr.count; ++k) emit(w.out(gr, k), a[k]);
          continue;
        }
        // Short results: their levels rounded where emit_levels can, else an accumulator each.
        w.for_runs(
            g, 0, l.reduced, copy, seen,
            [&](int64_t k, const T* p, int64_t n) {
              double levels[simd::kExactShortLevels];
              bool in_double = false;
              const int m = kernels_of<T>().exact_short(simd_run(p), n, levels, &in_double);
              if (m > 0 && emit_levels(w.out(gr, k), levels, m, in_double)) return;
              a[k] = ExactAcc{};
              if (m > 0) add_levels(levels, m, &a[k]);
              else exact_run(p, n, &a[k]);
              emit(w.out(gr, k), a[k]);
            },
            [&](const double* levels, int nl, bool in_double, const T* p, int64_t m) {
              for (int64_t k = 0; k < kGroup; ++k) {
                double own[simd::kExactShortLevels];
                bool nonzero = false;  // (all zero: the elements decide the zero's sign)
                for (int s = 0; s < nl; ++s) own[s] = levels[s * kGroup + k], nonzero |= own[s] != 0;
                if (nonzero && emit_levels(w.out(gr, k), own, nl, in_double)) continue;
                a[k] = ExactAcc{};
                add_column(levels, nl, p, m, k, &a[k]);
                emit(w.out(gr, k), a[k]);
              }
            });
      }
    });
    return;
  }
  // Results over several ranges: each range's accumulators kept, merged after.
  std::vector<ExactAcc> acc(size_t(w.count * ranges * w.width));
  at::parallel_for(0, w.count * ranges, 1, [&](int64_t b, int64_t e) {
    std::vector<T> copy;
    simd::ExactColumnsSeen seen;
    for (int64_t t = b; t < e; ++t) {
      const int64_t g = t / ranges, c = t % ranges;
      ExactAcc* a = &acc[size_t(t * w.width)];
      w.for_runs(g, c * kExactRows, std::min(l.reduced, (c + 1) * kExactRows), copy, seen, add_run(a), add_columns(a));
    }
  });
  at::parallel_for(0, w.count, 1, [&](int64_t b, int64_t e) {
    const simd::KeepSubnormals keep;
    for (int64_t g = b; g < e; ++g) {
      ExactAcc* a = &acc[size_t(g * ranges * w.width)];
      for (int64_t c = 1; c < ranges; ++c)
        for (int64_t k = 0; k < w.width; ++k) a[k].merge(a[c * w.width + k]);
      const auto gr = w.group(g);
      for (int64_t k = 0; k < gr.count; ++k) emit(w.out(gr, k), a[k]);
    }
  });
}

// The rounded sum (exact in T, or past T's range: then inf) into T.
template <class T>
T exact_store(double v) {
  if constexpr (std::is_same_v<T, double>) return v;
  else return static_cast<T>(static_cast<float>(v));
}

// Calls f(T{}, format) with the C++ type and exact format of a floating dtype.
template <class F>
void exact_dispatch(DType t, const F& f) {
  switch (t) {
    case DType::Half: return f(c10::Half{}, kExactHalf);
    case DType::BFloat16: return f(c10::BFloat16{}, kExactBFloat16);
    case DType::Float: return f(float{}, kExactFloat);
    case DType::Double: return f(double{}, kExactDouble);
    default: TORCH_INTERNAL_ASSERT(false, "exact sums take floating inputs");
  }
}

at::Tensor exact_sum_cpu(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                         std::optional<at::ScalarType> dtype) {
  if (!exact_applies(self, dtype)) return run_sum_or_mean(prepare_reduce(ReduceOp::Sum, self, "auto", dim, keepdim, dtype));
  const Prepared p = prepare_exact(self, dim, keepdim, dtype);
  if (p.done) return p.out;
  const simd::KeepSubnormals keep;  // the results' conversions (the runs keep their own)
  exact_dispatch(p.types.in, [&](auto tag, ExactFormat f) {
    using T = decltype(tag);
    T* out = p.out.mutable_data_ptr<T>();
    exact_sum(
        p.input.const_data_ptr<T>(), p.layout, [&](int64_t j, const ExactAcc& a) { out[j] = exact_store<T>(a.result(f)); },
        [&](int64_t j, const double* levels, int m, bool in_double) {
          double v;
          if (!exact_round_levels(levels, m, in_double, f, &v)) return false;
          out[j] = exact_store<T>(v);
          return true;
        });
  });
  return p.out;
}

at::Tensor exact_state_cpu(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                           std::optional<at::ScalarType> dtype) {
  const Prepared p = prepare_exact_state(self, dim, keepdim, dtype);
  at::Tensor state = exact_state_tensor(p);
  if (p.done) return state;
  int64_t* words = state.mutable_data_ptr<int64_t>();
  exact_dispatch(p.types.in, [&](auto tag, ExactFormat) {
    using T = decltype(tag);
    const auto emit = [&](int64_t j, const ExactAcc& a) { a.to_state(words + j * kExactStateWords); };
    exact_sum(p.input.const_data_ptr<T>(), p.layout, emit, [](int64_t, const double*, int, bool) { return false; });
  });
  return state;
}

at::Tensor exact_round_cpu(const at::Tensor& state, at::ScalarType dtype) {
  at::Tensor out = exact_round_result(state, dtype);
  const at::Tensor s = state.contiguous();
  const int64_t* words = s.const_data_ptr<int64_t>();
  const int64_t n = out.numel();
  exact_dispatch(dtype_of_scalar(dtype), [&](auto tag, ExactFormat f) {
    using T = decltype(tag);
    T* o = out.mutable_data_ptr<T>();
    at::parallel_for(0, n, 256, [&](int64_t b, int64_t e) {
      const simd::KeepSubnormals keep;
      for (int64_t j = b; j < e; ++j) {
        int64_t w[kExactStateWords];
        std::memcpy(w, words + j * kExactStateWords, sizeof w);
        o[j] = exact_store<T>(exact_round(w, f));
      }
    });
  });
  return out;
}

at::Tensor sum_or_mean(ReduceOp op, const at::Tensor& self, c10::string_view variant,
                       at::OptionalIntArrayRef dim, bool keepdim, std::optional<at::ScalarType> dtype) {
  return run_sum_or_mean(prepare_reduce(op, self, variant, dim, keepdim, dtype));
}

at::Tensor sum_cpu(const at::Tensor& self, c10::string_view variant, at::OptionalIntArrayRef dim,
                   bool keepdim, std::optional<at::ScalarType> dtype) {
  if (variant == "exact") return exact_sum_cpu(self, dim, keepdim, dtype);
  return sum_or_mean(ReduceOp::Sum, self, variant, dim, keepdim, dtype);
}

at::Tensor mean_cpu(const at::Tensor& self, c10::string_view variant, at::OptionalIntArrayRef dim,
                    bool keepdim, std::optional<at::ScalarType> dtype) {
  return sum_or_mean(ReduceOp::Mean, self, variant, dim, keepdim, dtype);
}

template <ReduceOp kOp>
at::Tensor logic_cpu(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim);

template <bool kMax>
at::Tensor extremum_cpu(const at::Tensor& self, c10::string_view variant, at::OptionalIntArrayRef dim,
                        bool keepdim) {
  // amax and amin of bool are any and all (the same bool result), whose non-zero counts have
  // vector kernels: the extremum's loop took amin over all of a (128256, 1025) bool 302 ms on 2
  // threads against torch's 29. Not over an empty list of dims (every dim for amax, none for
  // any), nor without elements (amax's error).
  if (variant == "auto" && self.scalar_type() == at::kBool && self.numel() > 0 && !(dim && dim->empty()))
    return logic_cpu<kMax ? ReduceOp::Any : ReduceOp::All>(self, dim, keepdim);
  const Prepared p = prepare_reduce(kMax ? ReduceOp::Max : ReduceOp::Min, self, variant, dim, keepdim,
                                    std::nullopt);
  if (p.done) return p.out;
  run_auto(p);
  return p.out;
}

template <ReduceOp kOp>
at::Tensor nan_cpu(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                   std::optional<at::ScalarType> dtype) {
  const Prepared p = prepare_nan_or_lse(kOp, self, dim, keepdim, dtype);
  if (p.done) return p.out;
  if (p.op == ReduceOp::Sum) return run_sum_or_mean(p);  // an integer nansum
  run_auto(p);
  return p.out;
}

at::Tensor logsumexp_cpu(const at::Tensor& self, at::IntArrayRef dim, bool keepdim) {
  const Prepared p = prepare_nan_or_lse(ReduceOp::LogSumExp, self, dim, keepdim, std::nullopt);
  if (!p.done) run_auto(p);
  return p.out;
}

at::Tensor prod_cpu(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                    std::optional<at::ScalarType> dtype) {
  const Prepared p = prepare_prod(self, dim, keepdim, dtype);
  if (p.done) return p.out;
  run_auto(p);
  return p.out;
}

at::Tensor norm_cpu(const at::Tensor& self, const at::Scalar& ord, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<at::ScalarType> dtype) {
  const Prepared p = prepare_norm(self, ord, dim, keepdim, dtype);
  if (p.done) return p.out;
  run_auto(p);
  return p.out;
}

// any, all and count_nonzero: the int64 sum of x != 0 (prepare_logic), any dtype.
template <ReduceOp kOp>
at::Tensor logic_cpu(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim) {
  const Prepared p = prepare_logic(kOp, self, dim, keepdim);
  if (p.done) return p.out;
  run_auto(p);
  return p.out;
}

at::Tensor count_nonzero_cpu(const at::Tensor& self, at::OptionalIntArrayRef dim) {
  return logic_cpu<ReduceOp::CountNonzero>(self, dim, false);
}

std::tuple<at::Tensor, at::Tensor> aminmax_cpu(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  // bool as its bytes (0 and 1): uint8's vector kernels, the results viewed back as bool. The
  // extremum's loop took aminmax over dim -2 of (14336, 1023, 8) bool 221 ms on 2 threads against
  // torch's 35; as bytes 19.0 (torch 52 in that run). (Without elements, torch's error, from the
  // bool path.)
  if (self.scalar_type() == at::kBool && self.numel() > 0) {
    auto [lo, hi] = aminmax_cpu(self.view(at::kByte), dim, keepdim);
    return {lo.view(at::kBool), hi.view(at::kBool)};
  }
  const Prepared p = prepare_aminmax(self, dim, keepdim);
  if (p.done) return {p.out, p.out2};
  run_auto(p);
  return {p.out, p.out2};
}

// Over one element every position is 0 (the result is contiguous), written by all threads, as
// torch's fill: most of a large result's time is the first touch of its pages (argmin over dim 0
// of (8192, 1, 128).transpose(1, 0), 8 MB of positions: one thread's memset took 244 us on 2
// threads, torch 136; 412 on 16, torch 34).
void zero_positions(const at::Tensor& positions) {
  auto* data = static_cast<int64_t*>(positions.mutable_data_ptr());
  at::parallel_for(0, positions.numel(), int64_t(1) << 15, [&](int64_t begin, int64_t end) {
    std::memset(data + begin, 0, size_t(end - begin) * sizeof(int64_t));
  });
}

// max and min over a dim, argmax and argmin: one operator a direction, values and positions.
template <ReduceOp kOp>
std::tuple<at::Tensor, at::Tensor> max_dim_cpu(const at::Tensor& self, int64_t dim, bool keepdim) {
  const Prepared p = prepare_indexed(kOp, self, dim, keepdim);
  if (p.done) return {p.out, p.out2};
  // Over a dim of size 1: the values are the elements themselves (a copy; removing a dim of size
  // 1 is a view) and every position 0. Reduced as rows of one element, min over the size-1 dim of
  // (16, 256, 1024, 1) int64 took 36 ms on 2 threads, torch 24-28 (mostly the first touch of the
  // two 32 MB results, which torch's copy and fill make on all threads too). (Not where the
  // layout has one element a result because the dim is expanded: its values are not the input's
  // elements one to one.)
  if (self.dim() == 0 || self.size(dim) == 1) {
    p.out.copy_(self.view(p.out.sizes()));
    zero_positions(p.out2);
    return {p.out, p.out2};
  }
  run_auto(p);
  return {p.out, p.out2};
}

template <ReduceOp kOp>
at::Tensor arg_cpu(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  const Prepared p = prepare_indexed(kOp, self, dim, keepdim);
  if (p.done) return p.out2;
  // (argmax over dim 0 of a transposed (4097, 1) float16 read its elements as columns, 72 us on
  // 2 threads, torch 4.)
  if (p.layout.reduced == 1 && p.layout.combine == 1) {
    zero_positions(p.out2);
    return p.out2;
  }
  run_auto(p);
  return p.out2;
}

template <ReduceOp kOp>
at::Tensor var_cpu(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction,
                   bool keepdim) {
  const Prepared p = prepare_var(kOp, self, dim, correction, keepdim);
  if (!p.done) run_auto(p);
  return p.out;
}

template <ReduceOp kOp>
std::tuple<at::Tensor, at::Tensor> var_mean_cpu(const at::Tensor& self, at::OptionalIntArrayRef dim,
                                                const std::optional<at::Scalar>& correction, bool keepdim) {
  const Prepared p = prepare_var(kOp, self, dim, correction, keepdim);
  if (!p.done) run_auto(p);
  return {p.out, p.out2};
}

}  // namespace
}  // namespace cpu

VariantTable cpu_variants() {
  return {cpu::kDocs, int(sizeof(cpu::kDocs) / sizeof(cpu::kDocs[0]))};
}

const DeviceKernels& cpu_kernels() {
  static const DeviceKernels table = [] {
    DeviceKernels k;
    k.sum = &cpu::sum_cpu;
    k.mean = &cpu::mean_cpu;
    k.amax = &cpu::extremum_cpu<true>;
    k.amin = &cpu::extremum_cpu<false>;
    k.var = &cpu::var_cpu<ReduceOp::Var>;
    k.std = &cpu::var_cpu<ReduceOp::Std>;
    k.var_mean = &cpu::var_mean_cpu<ReduceOp::VarMean>;
    k.std_mean = &cpu::var_mean_cpu<ReduceOp::StdMean>;
    k.nansum = &cpu::nan_cpu<ReduceOp::NanSum>;
    k.nanmean = &cpu::nan_cpu<ReduceOp::NanMean>;
    k.logsumexp = &cpu::logsumexp_cpu;
    k.prod = &cpu::prod_cpu;
    k.vector_norm = &cpu::norm_cpu;
    k.any = &cpu::logic_cpu<ReduceOp::Any>;
    k.all = &cpu::logic_cpu<ReduceOp::All>;
    k.count_nonzero = &cpu::count_nonzero_cpu;
    k.aminmax = &cpu::aminmax_cpu;
    k.max = &cpu::max_dim_cpu<ReduceOp::MaxDim>;
    k.min = &cpu::max_dim_cpu<ReduceOp::MinDim>;
    k.argmax = &cpu::arg_cpu<ReduceOp::ArgMax>;
    k.argmin = &cpu::arg_cpu<ReduceOp::ArgMin>;
    cpu::set_normalizing_kernels(k);
    return k;
  }();
  return table;
}

}  // namespace treduce

TORCH_LIBRARY_IMPL(treduce, CPU, m) {
  treduce::register_kernels(m, treduce::cpu_kernels());
  m.impl("_exact_state", &treduce::cpu::exact_state_cpu);
  m.impl("_exact_round", &treduce::cpu::exact_round_cpu);
}
