// The reduction operators, for the CPU and the CUDA code alike: an identity and a combine.
// Kernels are written against these two members only, so one kernel template serves sum,
// mean (a sum divided at the end), amax and amin.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "convert.h"  // TREDUCE_HOST_DEVICE

namespace treduce {

template <class A>
struct SumOp {
  using acc_t = A;
  TREDUCE_HOST_DEVICE static A identity() { return A(0); }
  TREDUCE_HOST_DEVICE static A combine(A a, A b) { return a + b; }
};

// NaN wins, as in torch.amax / torch.amin: a comparison with NaN is false, so `b` is taken
// whenever `a` is not NaN and does not beat it.
template <class A, bool kMax>
struct ExtremumOp {
  using acc_t = A;
  static constexpr A kIdentity =
      std::numeric_limits<A>::has_infinity
          ? (kMax ? -std::numeric_limits<A>::infinity() : std::numeric_limits<A>::infinity())
          : (kMax ? std::numeric_limits<A>::lowest() : std::numeric_limits<A>::max());
  TREDUCE_HOST_DEVICE static A identity() { return kIdentity; }
  TREDUCE_HOST_DEVICE static A combine(A a, A b) {
    bool keep_a = kMax ? a > b : a < b;
    if constexpr (std::is_floating_point_v<A>) keep_a = keep_a || a != a;
    return keep_a ? a : b;
  }
};
template <class A> using MaxOp = ExtremumOp<A, true>;
template <class A> using MinOp = ExtremumOp<A, false>;

template <class Op>
inline constexpr bool is_sum_op = std::is_same_v<Op, SumOp<typename Op::acc_t>>;

// The value stored for an output: the accumulator, divided by the element count for mean.
template <class A>
TREDUCE_HOST_DEVICE A finalize(A v, int64_t divisor) {
  if constexpr (std::is_floating_point_v<A>) {
    if (divisor > 0) return v / A(divisor);
  }
  return v;
}

}  // namespace treduce
