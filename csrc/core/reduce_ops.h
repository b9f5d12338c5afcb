// The reduction operators, for the CPU and the CUDA code alike, in the pattern of ATen's
// SharedReduceOps.h. Kernels are written against these members only, so the same kernels (full,
// rows, columns, on either device) run every reduction:
//   value_t                  what each element is converted to (through the call's Mid type)
//   acc_t                    the accumulator: one number, or a struct (Welford's mean, M2, n)
//   identity()               the accumulator of no elements
//   enter(v)                 the accumulator of one element
//   reduce(a, v)             element v into accumulator a (may be cheaper than combine(a, enter(v)))
//   combine(a, b)            two accumulators into one; associative up to rounding
//   project(a, args)         the stored result (a scalar, converted to the result dtype)
//   kOutputs, project2(a)    a second result of the same call (var_mean's mean); only with 2
//   kPlain                   project(a, {}) == a: a result of the accumulator's dtype is stored as is
// Indexed operators (kIndexed: max and min over a dim with their indices, argmax, argmin) take
// each element with its position along the reduced dim, reduce_at(a, v, i), in increasing
// positions within a thread, and never a group of values at once; their second result is the
// int64 position (kSecondIsIndex).
// An operator may define reduce_values(t) for N values held in registers (default: enter each,
// combine pairwise), where a form over all of them saves work (var: two passes, no division).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>  // std::declval

#include "convert.h"  // TREDUCE_HOST_DEVICE

namespace treduce {

// any and all are counts of the non-zero elements (each entered as x != 0), stored as truth
// values: any where the count is not 0, all where it is the element count.
enum class Logic : int8_t { None, Any, All };

// What a projection reads besides the accumulator; the same for every result of a call.
struct ProjectArgs {
  int64_t count = 0;  // elements reduced into each result; mean divides by it (0: no division)
  // Copies of each element the result stands for (an expanded reduced dim, stride 0, is read
  // once): a sum's k-fold, var's M2 k-fold, logsumexp's + log k, a product's k-th power.
  int64_t repeats = 1;
  double scalar = 0;  // var/std: the correction; vector_norm: the order
  bool root = false;  // std: the square root of the variance
  Logic logic = Logic::None;  // integer sums only
};

// The value stored for a sum-like accumulator: divided by the element count for mean.
template <class A>
TREDUCE_HOST_DEVICE A finalize(A v, int64_t divisor) {
  if constexpr (std::is_floating_point_v<A>) {
    if (divisor > 0) return v / A(divisor);
  }
  return v;
}

// Sum v taken `k` times: integers wrap as k additions would.
template <class A>
TREDUCE_HOST_DEVICE A repeated_sum(A v, int64_t k) {
  if constexpr (std::is_integral_v<A>) return A(uint64_t(v) * uint64_t(k));
  else return v * A(k);
}

// One-number accumulators whose element is its own accumulator.
template <class A>
struct ScalarOp {
  using value_t = A;
  using acc_t = A;
  static constexpr int kOutputs = 1;
  static constexpr bool kPlain = true;
  TREDUCE_HOST_DEVICE static A enter(A v) { return v; }
  TREDUCE_HOST_DEVICE static A project(A v, const ProjectArgs& a) {
    return finalize(repeated_sum(v, a.repeats), a.count);
  }
};

template <class A>
struct SumOp : ScalarOp<A> {
  TREDUCE_HOST_DEVICE static A identity() { return A(0); }
  TREDUCE_HOST_DEVICE static A combine(A a, A b) { return a + b; }
  TREDUCE_HOST_DEVICE static A reduce(A a, A v) { return a + v; }
  TREDUCE_HOST_DEVICE static A project(A v, const ProjectArgs& a) {
    if constexpr (std::is_integral_v<A>) {
      if (a.logic == Logic::Any) return A(v != 0);
      if (a.logic == Logic::All) return A(v == a.count);
    }
    return finalize(repeated_sum(v, a.repeats), a.count);
  }
};

// NaN wins, as in torch.amax / torch.amin: a comparison with NaN is false, so `b` is taken
// whenever `a` is not NaN and does not beat it.
template <class A, bool kMax>
struct ExtremumOp : ScalarOp<A> {
  static constexpr A kIdentity =
      std::numeric_limits<A>::has_infinity
          ? (kMax ? -std::numeric_limits<A>::infinity() : std::numeric_limits<A>::infinity())
          : (kMax ? std::numeric_limits<A>::lowest() : std::numeric_limits<A>::max());
  TREDUCE_HOST_DEVICE static A identity() { return kIdentity; }
  TREDUCE_HOST_DEVICE static A combine(A a, A b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if constexpr (std::is_same_v<A, float>) {  // one instruction where the device has it
      float r;
      if constexpr (kMax) asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
      else asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
      return r;
    }
#endif
    bool keep_a = kMax ? a > b : a < b;
    if constexpr (std::is_floating_point_v<A>) keep_a = keep_a || a != a;
    return keep_a ? a : b;
  }
  TREDUCE_HOST_DEVICE static A reduce(A a, A v) { return combine(a, v); }
};
template <class A> using MaxOp = ExtremumOp<A, true>;
template <class A> using MinOp = ExtremumOp<A, false>;

// aminmax: both extrema in one read (NaN wins both); the minimum is the first result.
template <class A>
struct MinMax {
  A min, max;
};

template <class A>
struct MinMaxOp {
  using value_t = A;
  using acc_t = MinMax<A>;
  static constexpr int kOutputs = 2;
  static constexpr bool kPlain = false;
  TREDUCE_HOST_DEVICE static acc_t identity() { return {MinOp<A>::identity(), MaxOp<A>::identity()}; }
  TREDUCE_HOST_DEVICE static acc_t enter(A v) { return {v, v}; }
  TREDUCE_HOST_DEVICE static acc_t combine(const acc_t& a, const acc_t& b) {
    return {MinOp<A>::combine(a.min, b.min), MaxOp<A>::combine(a.max, b.max)};
  }
  TREDUCE_HOST_DEVICE static acc_t reduce(const acc_t& a, A v) {
    return {MinOp<A>::combine(a.min, v), MaxOp<A>::combine(a.max, v)};
  }
  TREDUCE_HOST_DEVICE static A project(const acc_t& a, const ProjectArgs&) { return a.min; }
  TREDUCE_HOST_DEVICE static A project2(const acc_t& a, const ProjectArgs&) { return a.max; }
};

template <class Op>
inline constexpr bool is_sum_op = std::is_same_v<Op, SumOp<typename Op::acc_t>>;

// max, min over a dim (values and indices), argmax, argmin: the extremum and its position along
// the reduced dim. NaN wins (the first NaN), ties go to the lower position: combine's answer does
// not depend on how the elements were split, so neither does the result. The identity's
// position is kNone, which any element replaces.
template <class A>
struct ValueIndex {
  A value;
  int64_t index;
};

template <class A, bool kMax>
struct ArgExtremumOp {
  using value_t = A;
  using acc_t = ValueIndex<A>;
  static constexpr int kOutputs = 2;
  static constexpr bool kPlain = false;
  static constexpr bool kIndexed = true;
  static constexpr bool kSecondIsIndex = true;
  static constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  // Whether value a beats value b outright (NaN beats every number).
  TREDUCE_HOST_DEVICE static bool beats(A a, A b) {
    bool r = kMax ? a > b : a < b;
    if constexpr (std::is_floating_point_v<A>) r = r || (a != a && b == b);
    return r;
  }
  TREDUCE_HOST_DEVICE static acc_t identity() { return {ExtremumOp<A, kMax>::identity(), kNone}; }
  TREDUCE_HOST_DEVICE static acc_t combine(const acc_t& a, const acc_t& b) {
    const bool keep_a = beats(a.value, b.value) || (!beats(b.value, a.value) && a.index < b.index);
    return keep_a ? a : b;
  }
  // Element v at position i, past every position in a: a tie keeps a's (the first).
  TREDUCE_HOST_DEVICE static acc_t reduce_at(const acc_t& a, A v, int64_t i) {
    return beats(v, a.value) || a.index == kNone ? acc_t{v, i} : a;
  }
  // The extremum of x and y, NaN propagating: one instruction on devices that have it.
  TREDUCE_HOST_DEVICE static A pick(A x, A y) { return ExtremumOp<A, kMax>::combine(x, y); }
  // N elements at positions i, i + step, ...: the same as N reduce_at, from their extremum (N -
  // 1 picks) and one test against a; only when that wins (rare once a has seen a few vectors of
  // data) the first element equal to it (or NaN) is looked for. Rows of bfloat16 were bound by
  // the instructions of a reduce_at an element (argmax over 4096 x 32000: 1.16x the read time).
  template <int N>
  TREDUCE_HOST_DEVICE static acc_t reduce_run_at(const acc_t& a, const A (&t)[N], int64_t i, int64_t step = 1) {
    A m = t[0];
    TREDUCE_UNROLL
    for (int j = 1; j < N; ++j) m = pick(m, t[j]);
    if (!(beats(m, a.value) || a.index == kNone)) return a;
    // (Selects, not t[first]: an array indexed at run time goes to local memory.)
    int first = N - 1;
    A value = t[N - 1];
    TREDUCE_UNROLL
    for (int j = N - 2; j >= 0; --j) {
      if (t[j] == m || (t[j] != t[j] && m != m)) {
        first = j;
        value = t[j];
      }
    }
    return {value, i + first * step};
  }
  TREDUCE_HOST_DEVICE static A project(const acc_t& a, const ProjectArgs&) { return a.value; }
  TREDUCE_HOST_DEVICE static int64_t project2(const acc_t& a, const ProjectArgs&) { return a.index; }
};

template <class A> using ArgMaxOp = ArgExtremumOp<A, true>;
template <class A> using ArgMinOp = ArgExtremumOp<A, false>;

template <class Op, class = void>
struct IsIndexed : std::false_type {};
template <class Op>
struct IsIndexed<Op, std::void_t<decltype(Op::kIndexed)>> : std::bool_constant<Op::kIndexed> {};
template <class Op>
inline constexpr bool is_indexed_v = IsIndexed<Op>::value;

// Whether the operator has a two-pass form for a whole row held across lanes (row_mean and
// from_deviations; var).
template <class Op, class = void>
struct HasRowPasses : std::false_type {};
template <class Op>
struct HasRowPasses<Op, std::void_t<decltype(Op::from_deviations(std::declval<typename Op::value_t>(),
                                                                  std::declval<typename Op::value_t>(),
                                                                  std::declval<typename Op::value_t>(),
                                                                  std::declval<typename Op::value_t>()))>>
    : std::true_type {};

// Whether the operator has its own form for N values at once (reduce_values; var, logsumexp).
template <class Op, class = void>
struct HasReduceValues : std::false_type {};
template <class Op>
struct HasReduceValues<Op, std::void_t<decltype(Op::template reduce_values<2>(
                               std::declval<const typename Op::value_t (&)[2]>()))>> : std::true_type {};

// The dtype of an operator's second result: the int64 position, or the first result's dtype.
template <class Op, class = void>
struct SecondIsIndex : std::false_type {};
template <class Op>
struct SecondIsIndex<Op, std::void_t<decltype(Op::kSecondIsIndex)>> : std::bool_constant<Op::kSecondIsIndex> {};
template <class Op, class DT>
constexpr DT second_dtype(DT first, DT index) { return SecondIsIndex<Op>::value ? index : first; }

// Welford's running mean and sum of squared deviations (M2), for var, std, var_mean and
// std_mean: one read of the input, and no cancellation when the mean is large against the
// spread (the sum-of-squares formula loses every digit there). The mean is kept about a pivot
// taken from the data (the first element or group mean an accumulator saw): a running mean of
// 1e4 rounded at 1e4's ulp at every combine put an error of the spread's 1e-3 into each later
// M2 update, and float32 variances came out up to 4x less accurate than torch's; about the
// pivot it is of the spread's size and so is its rounding, and the difference of two pivots
// near one another is exact. The count is kept in A: exact up to 2^24 in float, and only the
// weights of a combine read it; the projection divides by the exact count of the call.
template <class A>
struct WelfordAcc {
  A pivot, mean, m2, n;  // mean: of the elements minus pivot
};

// The sum of N values (a power of two) as a balanced tree, in registers: halves added
// recursively, so every index is a constant once inlined. (A loop over the levels, w /= 2, was
// left rolled by nvcc and put the values in local memory: 224 bytes of stack in the grid kernel
// for float.)
template <int N, class A>
TREDUCE_HOST_DEVICE A tree_sum(const A* t) {
  if constexpr (N == 1) return t[0];
  else return tree_sum<N / 2>(t) + tree_sum<N / 2>(t + N / 2);
}

// num / den for the weights of a combine: the device's fast float division (within 2 ulp;
// a weight's last bits move the result far less than its own rounding), elsewhere exact.
template <class A>
TREDUCE_HOST_DEVICE A weight_ratio(A num, A den) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<A, float>) return __fdividef(num, den);
#endif
  return num / den;
}

template <class A>
struct VarOp {
  using value_t = A;
  using acc_t = WelfordAcc<A>;
  static constexpr int kOutputs = 2;  // var (or std), then the mean
  static constexpr bool kPlain = false;
  TREDUCE_HOST_DEVICE static acc_t identity() { return {A(0), A(0), A(0), A(0)}; }
  TREDUCE_HOST_DEVICE static acc_t enter(A v) { return {v, A(0), A(0), A(1)}; }
  // Chan et al.'s pairwise update, about a's pivot; an empty a takes b's pivot (and then b's
  // mean, M2 and count, its weight being 1). With b empty the weight is 0 and a comes back
  // unchanged; both empty stay empty. (Selects, not branches.)
  TREDUCE_HOST_DEVICE static acc_t combine(const acc_t& a, const acc_t& b) {
    const A n = a.n + b.n;
    const A w = n > A(0) ? weight_ratio(b.n, n) : A(0);
    const A pivot = a.n > A(0) ? a.pivot : b.pivot;
    const A delta = (b.pivot - pivot) + (b.mean - a.mean);
    const A t = delta * w;
    return {pivot, a.mean + t, a.m2 + b.m2 + t * delta * a.n, n};
  }
  // One element: combine(a, enter(v)) without the terms of an empty b (the CPU's loop, the
  // kernels' single elements; -0.0 + 0 and the weight's guard kept the compiler from dropping them).
  TREDUCE_HOST_DEVICE static acc_t reduce(const acc_t& a, A v) {
    const A n = a.n + A(1);
    const A pivot = a.n > A(0) ? a.pivot : v;
    const A delta = (v - pivot) - a.mean;
    const A t = delta * weight_ratio(A(1), n);
    return {pivot, a.mean + t, a.m2 + t * delta * a.n, n};
  }
  // N values held in registers (a few loaded vectors): their mean, then the squared deviations
  // from it, two passes with no division (N is a power of two), with the corrected two-pass
  // formula's term (Chan, Golub and LeVeque) that removes the error of the rounded mean from M2.
  // The rounded mean is the group's pivot and the same sum of deviations its mean about it.
  // The kernels take a group of loads this way and combine the group into their accumulator once.
  template <int N>
  TREDUCE_HOST_DEVICE static acc_t reduce_values(const A (&t)[N]) {
    static_assert(N > 0 && (N & (N - 1)) == 0, "a power of two");
    const A mean = tree_sum<N>(t) * (A(1) / A(N));
    A m2 = A(0), c = A(0);
    TREDUCE_UNROLL
    for (int j = 0; j < N; ++j) {
      const A d = t[j] - mean;
      m2 += d * d;
      c += d;
    }
    return from_deviations(mean, c, m2, A(N));
  }
  // A whole row of `count` values (a power of two) held in registers across a team of lanes, in
  // two passes whose sums the kernel takes over the team: the first adds each value minus a
  // pivot from the row (a sum that overflows only where the spread does), giving the mean; the
  // second the deviations from that mean and their squares, which from_deviations makes the
  // corrected two-pass formula's accumulator, as reduce_values over the whole row. No combine.
  // (1 / count by the device's fast division for float, two instructions against an IEEE
  // division's dozen and its slow-path branch, once a row: the mean is the pivot of the
  // deviations, whose sum then corrects the mean and M2 for its last bits.)
  TREDUCE_HOST_DEVICE static A row_mean(A pivot, A sum_minus_pivot, A count) {
    return pivot + sum_minus_pivot * weight_ratio(A(1), count);
  }
  // (An infinity among the values makes the deviations' sum NaN, and so the mean, as torch's
  // Welford's makes it.)
  TREDUCE_HOST_DEVICE static acc_t from_deviations(A mean, A sum_dev, A sum_sq_dev, A count) {
    const A inv = weight_ratio(A(1), count);
    return {mean, sum_dev * inv, sum_sq_dev - sum_dev * sum_dev * inv, count};
  }
  // torch's divisor: count - correction, or 0 (a NaN or inf result) when that is not positive.
  // An infinite element makes the mean infinite (or NaN) and the variance NaN, as torch's
  // x - mean does; M2 alone could come out inf where an infinity met finite values last.
  TREDUCE_HOST_DEVICE static A project(const acc_t& a, const ProjectArgs& args) {
    const A d = A(args.count) - A(args.scalar);
    const A mean = a.pivot + a.mean;
    const A m2 = a.m2 * A(args.repeats);
    const A var = mean - mean == A(0) ? m2 / (d > A(0) ? d : A(0)) : mean - mean;
    return args.root ? std::sqrt(var) : var;
  }
  TREDUCE_HOST_DEVICE static A project2(const acc_t& a, const ProjectArgs&) { return a.pivot + a.mean; }
};

// nansum: a NaN counts as zero.
template <class A>
struct NanSumOp : ScalarOp<A> {
  TREDUCE_HOST_DEVICE static A identity() { return A(0); }
  TREDUCE_HOST_DEVICE static A enter(A v) { return v != v ? A(0) : v; }
  TREDUCE_HOST_DEVICE static A combine(A a, A b) { return a + b; }
  TREDUCE_HOST_DEVICE static A reduce(A a, A v) { return a + enter(v); }
};

// nanmean: the sum and the count of the elements that are not NaN (the count in A: exact up to
// 2^24 in float, and a partial never counts more one element at a time).
template <class A>
struct SumCount {
  A sum, n;
};

template <class A>
struct NanMeanOp {
  using value_t = A;
  using acc_t = SumCount<A>;
  static constexpr int kOutputs = 1;
  static constexpr bool kPlain = false;
  TREDUCE_HOST_DEVICE static acc_t identity() { return {A(0), A(0)}; }
  TREDUCE_HOST_DEVICE static acc_t enter(A v) { return v != v ? acc_t{A(0), A(0)} : acc_t{v, A(1)}; }
  TREDUCE_HOST_DEVICE static acc_t combine(const acc_t& a, const acc_t& b) { return {a.sum + b.sum, a.n + b.n}; }
  TREDUCE_HOST_DEVICE static acc_t reduce(const acc_t& a, A v) { return combine(a, enter(v)); }
  TREDUCE_HOST_DEVICE static A project(const acc_t& a, const ProjectArgs&) { return a.sum / a.n; }  // 0/0: NaN
};

// e^(v - m) for v <= m, the terms of logsumexp. On the device in float: 2^((v - m) log2(e)) with
// the hardware's ex2 (relative error about 2^-22, and (v - m)'s rounding, about |v - m| 2^-24,
// small where the terms are large), against a dozen instructions for expf's range reduction:
// float logsumexp over bfloat16 rows of 32000 was bound by them. ftz flushes terms under 2^-126
// to 0, invisible beside the maximum's 1.
template <class A>
TREDUCE_HOST_DEVICE A exp_below(A v, A m) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<A, float>) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"((v - m) * 1.4426950408889634f));
    return r;
  }
#endif
  return std::exp(v - m);
}

// logsumexp: the running maximum and the sum of exp(x - maximum), rescaled when the maximum
// grows. A NaN wins the maximum; an infinite or NaN maximum is the result (torch's masking of
// infinite maxima), so the sum is not read then. An all -inf accumulator has the sum 0, and a
// combine of equal maxima scales by exactly 1, which keeps inf - inf out of the sums.
template <class A>
struct MaxSum {
  A max, sum;
};

template <class A>
struct LogSumExpOp {
  using value_t = A;
  using acc_t = MaxSum<A>;
  static constexpr int kOutputs = 1;
  static constexpr bool kPlain = false;
  TREDUCE_HOST_DEVICE static A max_nan(A a, A b) { return (a != a || a > b) ? a : b; }
  TREDUCE_HOST_DEVICE static A scale(A v, A m) { return v == m ? A(1) : exp_below(v, m); }
  TREDUCE_HOST_DEVICE static acc_t identity() { return {-std::numeric_limits<A>::infinity(), A(0)}; }
  TREDUCE_HOST_DEVICE static acc_t enter(A v) { return {v, A(1)}; }
  // The larger maximum keeps its sum and the other's is rescaled to it: one exp.
  TREDUCE_HOST_DEVICE static acc_t combine(const acc_t& a, const acc_t& b) {
    const bool a_wins = a.max != a.max || a.max > b.max;
    const A m = a_wins ? a.max : b.max, other = a_wins ? b.max : a.max;
    return {m, (a_wins ? a.sum : b.sum) + (a_wins ? b.sum : a.sum) * scale(other, m)};
  }
  TREDUCE_HOST_DEVICE static acc_t reduce(const acc_t& a, A v) {
    if (v > a.max) return {v, a.sum * exp_below(a.max, v) + A(1)};
    if (v != v) return {v, a.sum};
    return {a.max, a.sum + scale(v, a.max)};
  }
  // N values in registers: their maximum, then one exp each. With a finite maximum every term is
  // right as it is (the maximum's own is exactly 1); an infinite or NaN one is the result whatever
  // the sum, except -inf (all N are -inf), whose sum is 0. double keeps scale's select: without
  // it ptxas spilled 48 bytes a thread in the double kernels.
  template <int N>
  TREDUCE_HOST_DEVICE static acc_t reduce_values(const A (&t)[N]) {
    A m = t[0];
    TREDUCE_UNROLL
    for (int j = 1; j < N; ++j) m = max_nan(m, t[j]);
    A s = A(0);
    TREDUCE_UNROLL
    for (int j = 0; j < N; ++j) s += std::is_same_v<A, float> ? exp_below(t[j], m) : scale(t[j], m);
    return {m, m == -std::numeric_limits<A>::infinity() ? A(0) : s};
  }
  TREDUCE_HOST_DEVICE static A project(const acc_t& a, const ProjectArgs& args) {
    if (a.max != a.max || a.max == std::numeric_limits<A>::infinity() ||
        a.max == -std::numeric_limits<A>::infinity())
      return a.max;
    return a.max + std::log(a.sum * A(args.repeats));
  }
};

// prod: the product; integers in int64, which wraps to the same bits in any order.
template <class A>
struct ProdOp : ScalarOp<A> {
  TREDUCE_HOST_DEVICE static A identity() { return A(1); }
  TREDUCE_HOST_DEVICE static A combine(A a, A b) { return a * b; }
  TREDUCE_HOST_DEVICE static A reduce(A a, A v) { return a * v; }
  // v to the power k (square and multiply; integers wrap as k - 1 products would).
  TREDUCE_HOST_DEVICE static A project(A v, const ProjectArgs& a) {
    int64_t k = a.repeats;
    if (k == 1) return v;
    if constexpr (std::is_integral_v<A>) {
      uint64_t r = 1, b = uint64_t(v);
      for (; k > 0; k >>= 1, b *= b)
        if (k & 1) r *= b;
      return A(r);
    } else {
      // Two copies, one product: torch's bits, which the device's pow missed for float32
      // results near the subnormal range (H100), and on the host no libm call, 10 ns an element
      // (prod over a dim of 2 expanded, (49152, 2) bfloat16: 480 us on 16 threads against
      // torch's 25).
      if (k == 2) return v * v;
      return std::pow(v, A(k));
    }
  }
};

// vector_norm, one operator per order, as torch's NormTwoOps, NormOneOps, AbsMaxOps, AbsMinOps,
// NormZeroOps and NormOps: a sum of x^2 (root taken when stored), of |x|, of x != 0 (NaN
// counts), the largest or smallest |x| (NaN wins); Pow sums values already raised to |x|^p
// (the one order that needs a parameter per element: the host makes that pass) and stores the
// sum^(1/p) (ProjectArgs::scalar is p).
enum class NormOrd : int8_t { Two, One, Inf, NegInf, Zero, Pow };

template <class A, NormOrd K>
struct NormOp {
  using value_t = A;
  using acc_t = A;
  static constexpr int kOutputs = 1;
  static constexpr bool kPlain = K != NormOrd::Two && K != NormOrd::Pow;
  TREDUCE_HOST_DEVICE static A identity() {
    return K == NormOrd::NegInf ? std::numeric_limits<A>::infinity() : A(0);
  }
  TREDUCE_HOST_DEVICE static A enter(A v) {
    if constexpr (K == NormOrd::Two) return v * v;
    else if constexpr (K == NormOrd::Zero) return v != A(0) ? A(1) : A(0);
    else if constexpr (K == NormOrd::Pow) return v;
    else return std::abs(v);
  }
  TREDUCE_HOST_DEVICE static A combine(A a, A b) {
    if constexpr (K == NormOrd::Inf) return (a != a || a > b) ? a : b;
    else if constexpr (K == NormOrd::NegInf) return (a != a || a < b) ? a : b;
    else return a + b;
  }
  TREDUCE_HOST_DEVICE static A reduce(A a, A v) { return combine(a, enter(v)); }
  TREDUCE_HOST_DEVICE static A project(A a, const ProjectArgs& args) {
    if constexpr (K != NormOrd::Inf && K != NormOrd::NegInf) a *= A(args.repeats);
    if constexpr (K == NormOrd::Two) return std::sqrt(a);
    else if constexpr (K == NormOrd::Pow) return std::pow(a, A(1) / A(args.scalar));
    else return a;
  }
};

constexpr NormOrd norm_ord(double ord) {
  if (ord == 2) return NormOrd::Two;
  if (ord == 1) return NormOrd::One;
  if (ord == 0) return NormOrd::Zero;
  if (ord == std::numeric_limits<double>::infinity()) return NormOrd::Inf;
  if (ord == -std::numeric_limits<double>::infinity()) return NormOrd::NegInf;
  return NormOrd::Pow;
}

}  // namespace treduce
