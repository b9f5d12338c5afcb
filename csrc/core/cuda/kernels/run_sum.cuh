// run_sum<In, Mid, Acc>: one dtype combination, every variant. Explicitly
// instantiated by the generated sum_* units, a few combinations each (and the cub variant by the
// cub_* units; csrc/core/cuda/units.txt), so that the build spreads over cores.
#pragma once

#include "grid_stride.cuh"
#include "shared_tree.cuh"

namespace treduce::cuda {

// Defined in cub.cuh (CUB's headers are slow to compile: only the cub_* units include them).
template <class In, class Mid, class Acc>
cudaError_t run_cub(const ReduceArgs& a, size_t* workspace_bytes);

// Defined in dims.cuh, instantiated by the generated reduce_* units (auto, for every op).
template <class R>
cudaError_t run_reduce(const ReduceArgs& a, size_t* workspace_bytes, Plan* plan);

template <class In, class Mid, class Acc>
cudaError_t run_sum(Variant v, const ReduceArgs& a, size_t* workspace_bytes) {
  using R = Reduction<In, Mid, Sum<Acc>>;
  switch (v) {
    case Variant::Auto: {
      ReduceArgs full = a;  // a contiguous run of n elements
      full.layout = Layout3{};
      full.layout.reduced = a.n;
      full.layout.in_reduced = 1;
      return run_reduce<R>(full, workspace_bytes, nullptr);
    }
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
                               ctype_t<DType::ACC>>(Variant, const ReduceArgs&, size_t*);

}  // namespace treduce::cuda
