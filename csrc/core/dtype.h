// Scalar-type tags and the type rules of a sum, shared by the CPU and CUDA
// code. Torch-free on purpose: the .cu files include this and nothing of
// torch, which keeps their compile time down.
#pragma once

#include <cstdint>
#include <tuple>

namespace treduce {

enum class DType : int8_t {
  Bool, UInt8, Int8, Int16, Int32, Int64, Half, BFloat16, Float, Double,
};
inline constexpr int kNumDTypes = 10;

// X(name) for every DType, in order.
#define TREDUCE_DTYPES(X) \
  X(Bool) X(UInt8) X(Int8) X(Int16) X(Int32) X(Int64) X(Half) X(BFloat16) X(Float) X(Double)

constexpr bool is_integral(DType t) { return t <= DType::Int64; }  // bool too

// The C++ type of each DType, given the side's 16-bit float types (c10's on the CPU, CUDA's
// on the GPU).
template <class Half, class BFloat16>  // in DType order
using ctypes = std::tuple<bool, uint8_t, int8_t, int16_t, int32_t, int64_t, Half, BFloat16, float, double>;
static_assert(std::tuple_size_v<ctypes<void, void>> == kNumDTypes);
template <DType D, class Half, class BFloat16>
using ctype_with = std::tuple_element_t<static_cast<int>(D), ctypes<Half, BFloat16>>;

// What a sum reads (in), converts each element to before accumulating (mid),
// accumulates in (acc) and returns (out). Each element is turned into
// acc(mid(x)), exactly as torch.sum(x, dtype=out) first casts x to out.
struct SumTypes {
  DType in, mid, acc, out;
};

constexpr DType default_sum_dtype(DType in) {
  return is_integral(in) ? DType::Int64 : in;
}

// As torch: integers and bool in 64 bits, half and bfloat16 in float.
constexpr DType sum_acc_dtype(DType out) {
  if (is_integral(out)) return DType::Int64;
  return out == DType::Double ? DType::Double : DType::Float;
}

// Whether every value of `from` converts to `to` exactly (so the cast to
// `mid` can be skipped). Only the cases plan_sum_types asks about.
constexpr bool converts_exactly(DType from, DType to) {
  if (from == to) return true;
  if (to == DType::Half || to == DType::BFloat16) {
    // 8 significant bits hold every bool, uint8 and int8 value.
    return from == DType::Bool || from == DType::UInt8 || from == DType::Int8;
  }
  return false;
}

// The reductions are instantiated for a fixed set of (in, mid, acc)
// combinations: this folds every (in, out) pair onto one of them.
constexpr SumTypes plan_sum_types(DType in, DType out) {
  const DType acc = sum_acc_dtype(out);
  DType mid = in;
  if (out == DType::Bool) {
    // A bool sum is "any non-zero". For bool and uint8 input the int64 sum is
    // non-zero exactly then; other inputs must be cast to bool first
    // (1 + -1, or 0.5, would otherwise give the wrong answer).
    if (in != DType::Bool && in != DType::UInt8) mid = DType::Bool;
  } else if (is_integral(out)) {
    // Integer to integer: casting each element to `out` and summing wraps to
    // the same bits as summing in int64 and casting once at the end.
    // Floating to integer: truncate through int64, wrap at the end.
    if (!is_integral(in)) mid = DType::Int64;
  } else if (out != acc && !converts_exactly(in, out)) {
    mid = out;  // half / bfloat16 results round each element first
  }
  return {in, mid, acc, out};
}

// Every (in, mid, acc) that plan_sum_types can produce, as an X-macro list,
// grouped so that instantiations can be split across translation units.
#define TREDUCE_SUM_COMBOS_INT64(X)                                          \
  X(Bool, Bool, Int64) X(UInt8, UInt8, Int64) X(Int8, Int8, Int64)           \
  X(Int16, Int16, Int64) X(Int32, Int32, Int64) X(Int64, Int64, Int64)       \
  X(Half, Int64, Int64) X(BFloat16, Int64, Int64) X(Float, Int64, Int64)     \
  X(Double, Int64, Int64)
#define TREDUCE_SUM_COMBOS_TO_BOOL(X)                                        \
  X(Int8, Bool, Int64) X(Int16, Bool, Int64) X(Int32, Bool, Int64)           \
  X(Int64, Bool, Int64) X(Half, Bool, Int64) X(BFloat16, Bool, Int64)        \
  X(Float, Bool, Int64) X(Double, Bool, Int64)
#define TREDUCE_SUM_COMBOS_FLOAT(X)                                          \
  X(Bool, Bool, Float) X(UInt8, UInt8, Float) X(Int8, Int8, Float)           \
  X(Int16, Int16, Float) X(Int32, Int32, Float) X(Int64, Int64, Float)       \
  X(Half, Half, Float) X(BFloat16, BFloat16, Float) X(Float, Float, Float)   \
  X(Double, Double, Float)
#define TREDUCE_SUM_COMBOS_VIA_LOWP(X)                                       \
  X(Int16, Half, Float) X(Int32, Half, Float) X(Int64, Half, Float)          \
  X(BFloat16, Half, Float) X(Float, Half, Float) X(Double, Half, Float)      \
  X(Int16, BFloat16, Float) X(Int32, BFloat16, Float)                        \
  X(Int64, BFloat16, Float) X(Half, BFloat16, Float)                         \
  X(Float, BFloat16, Float) X(Double, BFloat16, Float)
#define TREDUCE_SUM_COMBOS_DOUBLE(X)                                         \
  X(Bool, Bool, Double) X(UInt8, UInt8, Double) X(Int8, Int8, Double)        \
  X(Int16, Int16, Double) X(Int32, Int32, Double) X(Int64, Int64, Double)    \
  X(Half, Half, Double) X(BFloat16, BFloat16, Double)                        \
  X(Float, Float, Double) X(Double, Double, Double)
#define TREDUCE_SUM_COMBOS(X)                                                \
  TREDUCE_SUM_COMBOS_INT64(X) TREDUCE_SUM_COMBOS_TO_BOOL(X)                  \
  TREDUCE_SUM_COMBOS_FLOAT(X) TREDUCE_SUM_COMBOS_VIA_LOWP(X)                 \
  TREDUCE_SUM_COMBOS_DOUBLE(X)

// any, all and count_nonzero sum x != 0 in int64: every input dtype's (in, bool, int64) is a
// sum's already but uint8's (summed as it is there, TREDUCE_SUM_COMBOS_INT64).
#define TREDUCE_COUNT_COMBOS(X) X(UInt8, Bool, Int64)

constexpr bool is_instantiated(SumTypes t) {
#define TREDUCE_MATCH(IN, MID, ACC)                                          \
  if (t.in == DType::IN && t.mid == DType::MID && t.acc == DType::ACC)       \
    return true;
  TREDUCE_SUM_COMBOS(TREDUCE_MATCH)
#undef TREDUCE_MATCH
  return false;
}

constexpr bool every_pair_is_instantiated() {
  for (int i = 0; i < kNumDTypes; ++i)
    for (int o = 0; o < kNumDTypes; ++o)
      if (!is_instantiated(plan_sum_types(DType(i), DType(o)))) return false;
  return true;
}
static_assert(every_pair_is_instantiated(),
              "plan_sum_types produced a combination missing from TREDUCE_SUM_COMBOS");

// amax and amin return the input's dtype and compare half and bfloat16 in float (exact both
// ways); every other dtype is compared as it is.
constexpr DType minmax_acc_dtype(DType in) {
  return in == DType::Half || in == DType::BFloat16 ? DType::Float : in;
}
#define TREDUCE_MINMAX_COMBOS(X)                                             \
  X(Bool, Bool) X(UInt8, UInt8) X(Int8, Int8) X(Int16, Int16) X(Int32, Int32) \
  X(Int64, Int64) X(Half, Float) X(BFloat16, Float) X(Float, Float) X(Double, Double)

// The statistics (var, std and their _mean forms) take floating inputs and return their dtype;
// on CUDA they accumulate in float, and float64 in double, as torch's CUDA kernels do.
#define TREDUCE_FLOAT_COMBOS(X) X(Half, Float) X(BFloat16, Float) X(Float, Float) X(Double, Double)
#define TREDUCE_VAR_COMBOS(X) TREDUCE_FLOAT_COMBOS(X)
// nansum, nanmean, logsumexp and vector_norm run TREDUCE_FLOAT_COMBOS too (other dtypes are
// converted first). prod reads integers as they are, in int64, and floating types as the rest;
// a dtype= of another kind converts the input first.
#define TREDUCE_PROD_COMBOS(X)                                                        \
  X(Bool, Int64) X(UInt8, Int64) X(Int8, Int64) X(Int16, Int64) X(Int32, Int64)      \
  X(Int64, Int64) TREDUCE_FLOAT_COMBOS(X)
// vector_norm: X(order, in, acc) (NormOrd in reduce_ops.h). Pow reads |x|^p, raised in the
// accumulator's dtype.
#define TREDUCE_NORM_FLOAT(X, K) X(K, Half, Float) X(K, BFloat16, Float) X(K, Float, Float) X(K, Double, Double)
#define TREDUCE_NORM_COMBOS_SUMS(X) TREDUCE_NORM_FLOAT(X, Two) TREDUCE_NORM_FLOAT(X, One) TREDUCE_NORM_FLOAT(X, Zero)
#define TREDUCE_NORM_COMBOS_OTHER(X) \
  TREDUCE_NORM_FLOAT(X, Inf) TREDUCE_NORM_FLOAT(X, NegInf) X(Pow, Float, Float) X(Pow, Double, Double)
#define TREDUCE_NORM_COMBOS(X) TREDUCE_NORM_COMBOS_SUMS(X) TREDUCE_NORM_COMBOS_OTHER(X)

inline const char* dtype_name(DType t) {
  constexpr const char* kNames[kNumDTypes] = {
      "bool", "uint8", "int8", "int16", "int32", "int64",
      "float16", "bfloat16", "float32", "float64"};
  return kNames[static_cast<int>(t)];
}

}  // namespace treduce
