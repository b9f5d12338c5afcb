// run_sum<In, Mid, Acc>: one dtype combination, every variant. Explicitly
// instantiated by the sum_*.cu files, a few combinations each (and the cub variant by the
// cub_*.cu files), so that the build spreads over cores.
#pragma once

#include "grid_stride.cuh"
#include "shared_tree.cuh"
#include "vector.cuh"

namespace treduce::cuda {

// Defined in cub.cuh (CUB's headers are slow to compile: only the cub_*.cu files include them).
template <class In, class Mid, class Acc>
cudaError_t run_cub(const SumArgs& a, size_t* workspace_bytes);

template <class In, class Mid, class Acc>
cudaError_t run_sum(Variant v, const SumArgs& a, size_t* workspace_bytes) {
  using R = Reduction<In, Mid, Sum<Acc>>;
  switch (v) {
    case Variant::Auto: return run_vector<R>(a, workspace_bytes);
    case Variant::Cub: return run_cub<In, Mid, Acc>(a, workspace_bytes);
    case Variant::Atomic:
    case Variant::TwoPass:
    case Variant::BlockAtomic:
    case Variant::WarpShuffle:
    case Variant::SingleBlock: return run_grid_stride<R>(v, a, workspace_bytes);
    default: return run_shared_tree<R>(v, a, workspace_bytes);
  }
}

#define TREDUCE_INSTANTIATE_RUN_SUM(IN, MID, ACC)                             \
  template cudaError_t run_sum<ctype_t<DType::IN>, ctype_t<DType::MID>,       \
                               ctype_t<DType::ACC>>(Variant, const SumArgs&, size_t*);

}  // namespace treduce::cuda
