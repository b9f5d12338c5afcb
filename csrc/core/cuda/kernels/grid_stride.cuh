// The grid-stride family (seeds 001 and 002): a fixed number of threads
// walks the whole input, so the grid no longer grows with n, and the block
// results are combined by a second launch or by atomics.
//
// Fixed from the seeds: 64-bit indices and strides, the shared array of warp
// sums sized for any block, the final step on the device (seed 002 left it to
// the host), and an accumulator the op allocates per call instead of a
// global, so concurrent calls cannot mix.
#pragma once

#include <algorithm>

#include "common.cuh"

namespace treduce::cuda {

inline constexpr int kGridBlock = 256;
// Enough 256-thread blocks to fill every multiprocessor (2048 threads each on
// sm_80 to sm_100); the seeds fixed 640, sized for an A100.
inline constexpr int kGridBlocksPerSm = 8;

inline int64_t grid_stride_blocks(int64_t n, int sm_count) {
  return std::clamp<int64_t>(ceil_div(n, kGridBlock), 1,
                             int64_t(sm_count) * kGridBlocksPerSm);
}

template <class R>
__global__ void init_accumulator_kernel(typename R::Acc* acc) {
  *acc = R::Op::identity();
}

// atomic (seed 001 atomic_red). One thread per element, each adding its
// element straight into the single accumulator. Costs: n atomics on one
// address, which the memory system serialises; and for floats the order,
// hence the rounding, changes from run to run.
template <class R>
__global__ void __launch_bounds__(kGridBlock)
atomic_kernel(const typename R::In* x, int64_t n, typename R::Acc* acc) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) R::Op::atomic_combine(acc, R::load(x, i));
}

// The first stage of two_pass and block_atomic (seed 001 reduce_sum /
// reduce_a): each thread accumulates a grid-stride slice into its
// shared-memory slot, then the block folds the slots in half until slot 0
// holds the block's sum. Only thread 0 may read it: it wrote it last.
template <class R>
__device__ __forceinline__ void grid_stride_shared_tree(
    const typename R::In* x, int64_t n, typename R::Acc* smem) {
  using Op = typename R::Op;
  const unsigned tid = threadIdx.x;
  const int64_t stride = int64_t(blockDim.x) * gridDim.x;
  smem[tid] = Op::identity();
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + tid; i < n; i += stride)
    smem[tid] = Op::combine(smem[tid], R::load(x, i));
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    __syncthreads();
    if (tid < s) smem[tid] = Op::combine(smem[tid], smem[tid + s]);
  }
}

// two_pass (seed 001 reduce_sum). Grid-stride loop plus shared tree; each
// block writes its partial, and the same kernel run again as one block
// reduces the partials. Costs: a second launch, and the running sums live in
// shared memory, not registers.
template <class R>
__global__ void __launch_bounds__(kGridBlock)
two_pass_kernel(const typename R::In* x, int64_t n, Sink out) {
  __shared__ typename R::Acc smem[kGridBlock];
  grid_stride_shared_tree<R>(x, n, smem);
  if (threadIdx.x == 0) store(out, blockIdx.x, smem[0]);
}

// block_atomic (seed 001 reduce_a). two_pass's first launch, with each
// block's partial added atomically into the result: one launch fewer, one
// atomic per block. Costs: for floats the block order, hence the rounding,
// changes from run to run.
template <class R>
__global__ void __launch_bounds__(kGridBlock)
block_atomic_kernel(const typename R::In* x, int64_t n, typename R::Acc* acc) {
  __shared__ typename R::Acc smem[kGridBlock];
  grid_stride_shared_tree<R>(x, n, smem);
  if (threadIdx.x == 0) R::Op::atomic_combine(acc, smem[0]);
}

// warp_shuffle (seed 001 reduce_ws, seed 002 step 4). block_atomic with the
// running sum in a register and the tree done by __shfl_down_sync inside
// each warp; shared memory only carries one value per warp to warp 0.
// Costs: scalar loads, one element in flight per thread, and float atomics.
template <class R>
__global__ void __launch_bounds__(kGridBlock)
warp_shuffle_kernel(const typename R::In* x, int64_t n, typename R::Acc* acc) {
  using Op = typename R::Op;
  __shared__ typename R::Acc warp_sums[kGridBlock / 32];
  const unsigned tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int64_t stride = int64_t(blockDim.x) * gridDim.x;
  typename R::Acc v = Op::identity();
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + tid; i < n; i += stride)
    v = Op::combine(v, R::load(x, i));
  v = warp_reduce<Op>(v);
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < blockDim.x / 32 ? warp_sums[lane] : Op::identity();
    v = warp_reduce<Op>(v);
    if (lane == 0) Op::atomic_combine(acc, v);
  }
}

// single_block (seed 002 step 1). One block: thread t sums elements t,
// t + 256, t + 512, ...; thread 0 then adds the 256 sums (the seed copied
// them to the host for that). Costs: one multiprocessor does all the work.
template <class R>
__global__ void __launch_bounds__(kGridBlock)
single_block_kernel(const typename R::In* x, int64_t n, Sink out) {
  using Op = typename R::Op;
  __shared__ typename R::Acc sums[kGridBlock];
  const unsigned tid = threadIdx.x;
  typename R::Acc v = Op::identity();
  for (int64_t i = tid; i < n; i += blockDim.x) v = Op::combine(v, R::load(x, i));
  sums[tid] = v;
  __syncthreads();
  if (tid == 0) {
    typename R::Acc total = Op::identity();
    for (unsigned t = 0; t < blockDim.x; ++t) total = Op::combine(total, sums[t]);
    store(out, 0, total);
  }
}

template <class R>
cudaError_t run_grid_stride(Variant v, const ReduceArgs& a, size_t* workspace_bytes) {
  using In = typename R::In;
  using Acc = typename R::Acc;
  if (workspace_bytes) {  // two_pass: the block partials; atomics: the accumulator
    const int64_t grid = grid_stride_blocks(a.n, a.sm_count);
    if (v == Variant::SingleBlock) *workspace_bytes = 0;
    else if (v == Variant::TwoPass) *workspace_bytes = grid > 1 ? size_t(grid) * sizeof(Acc) : 0;
    else *workspace_bytes = sizeof(Acc);
    return cudaSuccess;
  }
  const auto* x = static_cast<const In*>(a.in);
  const Sink result{a.out, a.types.out};
  auto* acc = static_cast<Acc*>(a.workspace);
  cudaStream_t st = a.stream;

  if (v == Variant::SingleBlock) {
    single_block_kernel<R><<<1, kGridBlock, 0, st>>>(x, a.n, result);
    return last_launch_error();
  }
  if (v == Variant::TwoPass) {
    const int64_t grid = grid_stride_blocks(a.n, a.sm_count);
    if (grid == 1) {
      two_pass_kernel<R><<<1, kGridBlock, 0, st>>>(x, a.n, result);
      return last_launch_error();
    }
    two_pass_kernel<R><<<unsigned(grid), kGridBlock, 0, st>>>(x, a.n, Sink{acc, dtype_of<Acc>()});
    if (cudaError_t e = last_launch_error(); e != cudaSuccess) return e;
    two_pass_kernel<PartialsOf<R>><<<1, kGridBlock, 0, st>>>(acc, grid, result);
    return last_launch_error();
  }

  // The atomic variants: reset the accumulator, add into it, convert it out.
  init_accumulator_kernel<R><<<1, 1, 0, st>>>(acc);
  if (cudaError_t e = last_launch_error(); e != cudaSuccess) return e;
  if (v == Variant::Atomic) {
    const int64_t grid = ceil_div(a.n, kGridBlock);
    if (grid > kMaxGridX) return cudaErrorInvalidConfiguration;
    if (grid > 0) atomic_kernel<R><<<unsigned(grid), kGridBlock, 0, st>>>(x, a.n, acc);
  } else {
    const int64_t grid = grid_stride_blocks(a.n, a.sm_count);
    if (v == Variant::BlockAtomic)
      block_atomic_kernel<R><<<unsigned(grid), kGridBlock, 0, st>>>(x, a.n, acc);
    else
      warp_shuffle_kernel<R><<<unsigned(grid), kGridBlock, 0, st>>>(x, a.n, acc);
  }
  if (cudaError_t e = last_launch_error(); e != cudaSuccess) return e;
  store_value_kernel<Acc><<<1, 1, 0, st>>>(acc, result);
  return last_launch_error();
}

}  // namespace treduce::cuda
