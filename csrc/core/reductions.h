// Which operator each ReduceOp runs, on which dtypes: the one dtype switch of the CPU's and
// CUDA's kernels (the generated CUDA units, csrc/core/cuda/units.txt, instantiate the same dtype.h
// lists). Torch-free.
#pragma once

#include "dtype.h"
#include "layout.h"
#include "reduce_ops.h"

namespace treduce {

// One instantiation: In elements, each read through Mid into Op's value type, reduced by Op.
template <class In_, class Mid_, class Op_>
struct ReductionTypes {
  using In = In_;
  using Mid = Mid_;
  using Op = Op_;
};

#define TREDUCE_T(D) ctype_with<DType::D, typename Side::Half, typename Side::BFloat16>
#define TREDUCE_VISIT(IN, MID, ...)                                  \
  {                                                                  \
    f(ReductionTypes<TREDUCE_T(IN), TREDUCE_T(MID), __VA_ARGS__>{}); \
    return true;                                                     \
  }

// A device's side of the switch, `Side`, names its 16-bit float types (Half, BFloat16), its sum
// operator (template Sum<A>: CUDA's adds an atomic combine) and var's accumulator (template
// VarAcc<A>, A being dtype.h's: CUDA keeps it, as torch's CUDA kernel; the CPU takes double for
// every input, as torch's CPU kernel). f is instantiated for every case, whatever the call.

// The sums alone (sum and mean, every variant): f(ReductionTypes<In, Mid, Side::Sum<Acc>>{}) for
// the (in, mid, acc) that plan_sum_types gave.
template <class Side, class F>
bool visit_sum(const SumTypes& t, F&& f) {
#define TREDUCE_SUM(IN, MID, ACC) \
  if (t.in == DType::IN && t.mid == DType::MID && t.acc == DType::ACC) TREDUCE_VISIT(IN, MID, typename Side::template Sum<TREDUCE_T(ACC)>)
  TREDUCE_SUM_COMBOS(TREDUCE_SUM)
#undef TREDUCE_SUM
  return false;
}

// visit_reduction calls f(ReductionTypes<In, Mid, Op>{}) for the call's op and dtypes (`ord`:
// vector_norm's order) and says whether one matched (false: a caller's bug, no instantiation).
// Sum and mean are the same sum (the mean divides when it stores); var, std and their _mean
// forms one operator, as are max and argmax over a dim (values and positions) and any, all and
// count_nonzero (the int64 sum of x != 0); the projection (reduce_ops.h) says what is stored.
template <class Side, class F>
bool visit_reduction(ReduceOp op, const SumTypes& t, NormOrd ord, F&& f) {
#define TREDUCE_ONE(IN, ACC) \
  if (t.in == DType::IN) TREDUCE_VISIT(IN, IN, TREDUCE_OPERATOR<TREDUCE_T(ACC)>)
#define TREDUCE_VAR(IN, ACC) \
  if (t.in == DType::IN) TREDUCE_VISIT(IN, IN, VarOp<typename Side::template VarAcc<TREDUCE_T(ACC)>>)
#define TREDUCE_COUNT(D) \
  if (t.in == DType::D) TREDUCE_VISIT(D, Bool, typename Side::template Sum<int64_t>)
#define TREDUCE_NORM(K, IN, ACC) \
  if (ord == NormOrd::K && t.in == DType::IN) TREDUCE_VISIT(IN, IN, NormOp<TREDUCE_T(ACC), NormOrd::K>)
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Mean:
      return visit_sum<Side>(t, f);
    case ReduceOp::Max:
#define TREDUCE_OPERATOR MaxOp
      TREDUCE_MINMAX_COMBOS(TREDUCE_ONE)
#undef TREDUCE_OPERATOR
      break;
    case ReduceOp::Min:
#define TREDUCE_OPERATOR MinOp
      TREDUCE_MINMAX_COMBOS(TREDUCE_ONE)
#undef TREDUCE_OPERATOR
      break;
    case ReduceOp::Var:
    case ReduceOp::Std:
    case ReduceOp::VarMean:
    case ReduceOp::StdMean:
      TREDUCE_VAR_COMBOS(TREDUCE_VAR)
      break;
    case ReduceOp::NanSum:
#define TREDUCE_OPERATOR NanSumOp
      TREDUCE_FLOAT_COMBOS(TREDUCE_ONE)
#undef TREDUCE_OPERATOR
      break;
    case ReduceOp::NanMean:
#define TREDUCE_OPERATOR NanMeanOp
      TREDUCE_FLOAT_COMBOS(TREDUCE_ONE)
#undef TREDUCE_OPERATOR
      break;
    case ReduceOp::LogSumExp:
#define TREDUCE_OPERATOR LogSumExpOp
      TREDUCE_FLOAT_COMBOS(TREDUCE_ONE)
#undef TREDUCE_OPERATOR
      break;
    case ReduceOp::Prod:
#define TREDUCE_OPERATOR ProdOp
      TREDUCE_PROD_COMBOS(TREDUCE_ONE)
#undef TREDUCE_OPERATOR
      break;
    case ReduceOp::Norm:
      TREDUCE_NORM_COMBOS(TREDUCE_NORM)
      break;
    case ReduceOp::Any:
    case ReduceOp::All:
    case ReduceOp::CountNonzero:
      TREDUCE_DTYPES(TREDUCE_COUNT)
      break;
    case ReduceOp::AMinMax:
#define TREDUCE_OPERATOR MinMaxOp
      TREDUCE_MINMAX_COMBOS(TREDUCE_ONE)
#undef TREDUCE_OPERATOR
      break;
    case ReduceOp::MaxDim:
    case ReduceOp::ArgMax:
#define TREDUCE_OPERATOR ArgMaxOp
      TREDUCE_MINMAX_COMBOS(TREDUCE_ONE)
#undef TREDUCE_OPERATOR
      break;
    case ReduceOp::MinDim:
    case ReduceOp::ArgMin:
#define TREDUCE_OPERATOR ArgMinOp
      TREDUCE_MINMAX_COMBOS(TREDUCE_ONE)
#undef TREDUCE_OPERATOR
      break;
  }
#undef TREDUCE_NORM
#undef TREDUCE_COUNT
#undef TREDUCE_VAR
#undef TREDUCE_ONE
  return false;
}
#undef TREDUCE_VISIT
#undef TREDUCE_T

}  // namespace treduce
