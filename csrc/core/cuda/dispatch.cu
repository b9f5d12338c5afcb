// The CUDA variant table and the dtype dispatch into run_sum<In, Mid, Acc>.
// Torch-free: torch/cuda/ops.cpp does the torch side.
#include "../reductions.h"
#include "kernels/common.cuh"

namespace treduce::cuda {

// Defined in kernels/run_sum.cuh, instantiated by the generated sum_* units (csrc/core/cuda/units.txt).
template <class In, class Mid, class Acc>
cudaError_t run_sum(Variant v, const ReduceArgs& a, size_t* workspace_bytes);
// Defined in kernels/dims.cuh, instantiated by the generated reduce_* units.
template <class R>
cudaError_t run_reduce(const ReduceArgs& a, size_t* workspace_bytes, Plan* plan);

namespace {

// In enum Variant order.
constexpr VariantDoc kDocs[] = {
    {"neighbored", "neighbored_kernel (kernels/shared_tree.cuh)",
     "shared-memory tree; at stride s, threads whose id is a multiple of 2s add the neighbour s away",
     "000 baseline; 003 reduceNeighbored", "first rung", false},
    {"strided_index", "strided_index_kernel (kernels/shared_tree.cuh)",
     "same pairs, thread t works on index 2*s*t", "000 interleaved addressing; 003 reduceNeighboredLess",
     "active threads packed into the first warps: no divergence, no %", false},
    {"sequential", "sequential_kernel<K=1> (kernels/shared_tree.cuh)",
     "stride halves from blockDim/2, thread t adds t+s", "000 bank conflicts; 003 reduceInterleaved",
     "consecutive lanes read consecutive words: no bank conflicts", false},
    {"first_add", "sequential_kernel<K=2> (kernels/shared_tree.cuh)",
     "each thread adds two elements a block apart while loading", "000 idle threads; 004 reduceUnrolling2",
     "half the blocks; no thread idle in the first step", false},
    {"unroll4", "sequential_kernel<K=4> (kernels/shared_tree.cuh)",
     "each thread adds four elements while loading", "004 reduceUnrolling4",
     "four independent loads in flight per thread", false},
    {"unroll8", "sequential_kernel<K=8> (kernels/shared_tree.cuh)",
     "each thread adds eight elements while loading", "004 reduceUnrolling8",
     "eight independent loads in flight per thread", false},
    {"unroll_last_warp", "unroll_last_warp_kernel (kernels/shared_tree.cuh)",
     "unroll8, with the last six tree steps inside warp 0 (__syncwarp, no __syncthreads)",
     "000 unroll the last warp; 004 reduceUnrollWarp8",
     "five block barriers fewer per block; the seeds' volatile race fixed", false},
    {"complete_unroll", "complete_unroll_kernel<BLOCK> (kernels/shared_tree.cuh)",
     "block size as a template parameter; every tree step written out", "000 complete unroll; 004 reduceCompleteUnrollWarp8",
     "no loop over strides", false},
    {"atomic", "atomic_kernel (kernels/grid_stride.cuh)",
     "one atomicAdd per element into a single accumulator", "001 atomic_red",
     "a different first rung: no tree at all", true},
    {"two_pass", "two_pass_kernel (kernels/grid_stride.cuh)",
     "grid-stride loop into shared memory, shared tree, then the same kernel over the block partials",
     "001 reduce_sum; 002 step 2", "a fixed grid: one partial per resident block, not per tile", false},
    {"block_atomic", "block_atomic_kernel (kernels/grid_stride.cuh)",
     "two_pass's first launch with one atomicAdd per block", "001 reduce_a",
     "one launch instead of two", true},
    {"warp_shuffle", "warp_shuffle_kernel (kernels/grid_stride.cuh)",
     "grid-stride sum in a register, __shfl_down_sync within warps, one atomicAdd per block",
     "001 reduce_ws; 002 steps 3-4", "register accumulation and shuffles instead of shared-memory traffic", true},
    {"single_block", "single_block_kernel (kernels/grid_stride.cuh)",
     "one block; thread t sums every 256th element, thread 0 adds the 256 sums", "002 step 1",
     "the seed's host-side finish moved onto the device", false},
    {"cub", "run_cub (kernels/cub.cuh)",
     "cub::DeviceReduce::TransformReduce with the same conversions and accumulator: the in-run reference",
     "-", "-", false},
    {"auto",
     "small_warp_kernel, small_sum_kernel, vector_partials_kernel, vector_sum_ticket_kernel, combine_partials_kernel "
     "(kernels/vector.cuh); rows_kernel, row_segments_kernel, row_segments_ticket_kernel, columns_kernel "
     "(kernels/dims.cuh)",
     "16-byte loads from the first 128-byte boundary, the head before it and the tail one load a lane "
     "of one warp, 4 in flight per thread; 1-byte and int16 inputs counted by __dp4a / __dp2a in "
     "32-bit registers; one warp for up to 32 vectors, one block for small inputs (up to 128 KiB, every load of a thread issued at "
     "once), else as many blocks as fit at once (of 128 threads for sums of few tiles, 512 otherwise) whose "
     "partials are added in order, by the last block to finish "
     "in eager calls (one launch), by a one-warp kernel in CUDA graphs; "
     "the full-reduction and short-row kernels launched with programmatic dependence (PDL), overlapping the kernel "
     "before it",
     "-", "our fastest: everything above that pays, plus vector loads and packed-integer counting",
     false},
    {"exact", "exact_partials_kernel (kernels/exact.cuh); exact_round_magnitude (exact.h)",
     "floats: each thread adds its elements without rounding into two doubles over a window of binades "
     "that follows the data (error-free extraction), everything else into a shared-memory superaccumulator "
     "per block; the block states added by integer atomics, the last block rounding once with the CPU's steps; "
     "integers: auto, which is exact",
     "-", "correctly rounded: the same bits as the CPU's exact for any order, grid, GPU or layout; any dims",
     false},
};
static_assert(sizeof(kDocs) / sizeof(kDocs[0]) == int(Variant::Exact) + 1,
              "one row per Variant");

}  // namespace

// CUDA's side of the dtype switch (reductions.h).
struct CudaSide {
  using Half = __half;
  using BFloat16 = __nv_bfloat16;
  template <class A>
  using Sum = cuda::Sum<A>;
  template <class A>
  using VarAcc = A;
};

cudaError_t launch_sum(Variant v, const ReduceArgs& a, size_t* workspace_bytes) {
  cudaError_t result = cudaErrorInvalidValue;
  visit_sum<CudaSide>(a.types, [&](auto types) {
    using T = decltype(types);
    result = run_sum<typename T::In, typename T::Mid, typename T::Op::acc_t>(v, a, workspace_bytes);
  });
  return result;
}

cudaError_t launch_reduce(const ReduceArgs& a, size_t* workspace_bytes, Plan* plan) {
  cudaError_t result = cudaErrorInvalidValue;
  visit_reduction<CudaSide>(a.op, a.types, norm_ord(a.project.scalar), [&](auto types) {
    using T = decltype(types);
    result = run_reduce<Reduction<typename T::In, typename T::Mid, typename T::Op>>(a, workspace_bytes, plan);
  });
  return result;
}

}  // namespace treduce::cuda

namespace treduce {
VariantTable cuda_variants() {
  return {cuda::kDocs, int(sizeof(cuda::kDocs) / sizeof(cuda::kDocs[0]))};
}
}  // namespace treduce
