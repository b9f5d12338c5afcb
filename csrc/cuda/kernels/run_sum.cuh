// run_sum<In, Mid, Acc>: one dtype combination, every variant. Explicitly
// instantiated by the sum_*.cu files, a few combinations each, so that the
// build spreads over cores.
#pragma once

#include "grid_stride.cuh"
#include "shared_tree.cuh"

namespace treduce::cuda {

// What `auto` runs: the fastest deterministic rung for the size. complete_unroll's one partial
// per 2048-element tile wins on small inputs; from 2^22 elements two_pass's fixed grid of
// resident blocks reads faster (H200: 4.4 against 4.1 TB/s at 2^28 float32).
inline Variant auto_variant(int64_t n) {
  return n < (int64_t(1) << 22) ? Variant::CompleteUnroll : Variant::TwoPass;
}

template <class In, class Mid, class Acc>
cudaError_t run_sum(Variant v, const SumArgs& a) {
  using R = Reduction<In, Mid, Sum<Acc>>;
  if (v == Variant::Auto) v = auto_variant(a.n);
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
