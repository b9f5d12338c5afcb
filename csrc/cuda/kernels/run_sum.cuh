// run_sum<In, Mid, Acc>: one dtype combination, every variant. Explicitly
// instantiated by the sum_*.cu files, a few combinations each, so that the
// build spreads over cores.
#pragma once

#include "grid_stride.cuh"
#include "shared_tree.cuh"

namespace treduce::cuda {

// The variant `auto` stands for (see the table in dispatch.cu).
inline constexpr Variant kAutoVariant = Variant::CompleteUnroll;

template <class In, class Mid, class Acc>
cudaError_t run_sum(Variant v, const SumArgs& a) {
  using R = Reduction<In, Mid, Sum<Acc>>;
  if (v == Variant::Auto) v = kAutoVariant;
  switch (v) {
    case Variant::Atomic:
    case Variant::TwoPass:
    case Variant::BlockAtomic:
    case Variant::WarpShuffle:
    case Variant::SingleBlock: return run_grid_stride<R>(v, a);
    default: return run_shared_tree<R>(v, a);
  }
}

#define TREDUCE_INSTANTIATE_RUN_SUM(IN, MID, ACC)                             \
  template cudaError_t run_sum<ctype_t<DType::IN>, ctype_t<DType::MID>,       \
                               ctype_t<DType::ACC>>(Variant, const SumArgs&);

}  // namespace treduce::cuda
