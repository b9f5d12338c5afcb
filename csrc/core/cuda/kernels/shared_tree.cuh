// The shared-memory ladder (seeds 000, 003, 004): each block reduces a tile of
// the input to one partial in shared memory; the partials are reduced again
// by the same kernel until one value is left, so every step runs on the
// device. The rungs differ only in how a block loads its tile and walks its
// shared-memory tree.
//
// Fixed from the seeds: they reduce in place in global memory (overwriting
// the caller's input), return before __syncthreads() for threads past n,
// leave shared slots unset past n, drop the tail when n is not a multiple of
// the tile, sum int in int, and run the last warp through a `volatile`
// pointer with no __syncwarp() (a race since Volta). Here the input is
// read-only, every thread reaches every barrier, slots past n hold the
// identity, indices are 64-bit and the last warp is fenced.
#pragma once

#include <algorithm>

#include "common.cuh"

namespace treduce::cuda {

inline constexpr int kTreeBlock = 256;

// Combines the K elements this thread owns in its block's tile of BLOCK * K:
// element j sits j * BLOCK after the first, so each of the K loads is
// coalesced across the warp and the K loads are independent.
template <class R, int BLOCK, int K>
__device__ __forceinline__ typename R::Acc load_tile(const typename R::In* x,
                                                     int64_t n) {
  using Op = typename R::Op;
  const int64_t first = int64_t(blockIdx.x) * (BLOCK * K) + threadIdx.x;
  typename R::Acc v = Op::identity();
#pragma unroll
  for (int j = 0; j < K; ++j) {
    const int64_t i = first + int64_t(j) * BLOCK;
    if (i < n) v = Op::combine(v, R::load(x, i));
  }
  return v;
}

// neighbored (seed 000 baseline, seed 003 reduceNeighbored). One element per
// thread; at stride s the threads whose id is a multiple of 2s add their
// neighbour s away. Costs: `%` on every step, and active threads scattered
// over every warp, so all warps stay busy while most of their lanes idle.
template <class R, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
neighbored_kernel(const typename R::In* x, int64_t n, Sink out) {
  __shared__ typename R::Acc smem[BLOCK];
  const unsigned tid = threadIdx.x;
  smem[tid] = load_tile<R, BLOCK, 1>(x, n);
  __syncthreads();
  for (unsigned s = 1; s < blockDim.x; s *= 2) {
    if (tid % (2 * s) == 0) smem[tid] = R::Op::combine(smem[tid], smem[tid + s]);
    __syncthreads();
  }
  if (tid == 0) store(out, blockIdx.x, smem[0]);
}

// strided_index (seed 000 interleaved addressing, seed 003
// reduceNeighboredLess). The same pairs, but thread t handles the pair at
// 2*s*t, so the active threads are the first ones and whole warps retire.
// Still costs: the 2*s*t shared-memory stride makes lanes collide on banks.
template <class R, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
strided_index_kernel(const typename R::In* x, int64_t n, Sink out) {
  __shared__ typename R::Acc smem[BLOCK];
  const unsigned tid = threadIdx.x;
  smem[tid] = load_tile<R, BLOCK, 1>(x, n);
  __syncthreads();
  for (unsigned s = 1; s < blockDim.x; s *= 2) {
    const unsigned index = 2 * s * tid;
    if (index < blockDim.x)
      smem[index] = R::Op::combine(smem[index], smem[index + s]);
    __syncthreads();
  }
  if (tid == 0) store(out, blockIdx.x, smem[0]);
}

// sequential (seed 000 bank-conflict fix, seed 003 reduceInterleaved), and
// with K > 1 first_add (K = 2, seed 000 "idle threads", seed 004
// reduceUnrolling2), unroll4 and unroll8 (seed 004). The stride halves from
// BLOCK/2 and thread t adds t + s: consecutive lanes touch consecutive words,
// so no bank conflicts. With K elements per thread added during the load,
// the first tree step no longer idles half the block and there are K times
// fewer blocks. Still costs: one __syncthreads() per step, even when only
// one warp is left working.
template <class R, int BLOCK, int K>
__global__ void __launch_bounds__(BLOCK)
sequential_kernel(const typename R::In* x, int64_t n, Sink out) {
  __shared__ typename R::Acc smem[BLOCK];
  const unsigned tid = threadIdx.x;
  smem[tid] = load_tile<R, BLOCK, K>(x, n);
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (tid < s) smem[tid] = R::Op::combine(smem[tid], smem[tid + s]);
    __syncthreads();
  }
  if (tid == 0) store(out, blockIdx.x, smem[0]);
}

// The last 64 values of a block's tree, reduced by warp 0 alone, with no
// block barrier. The seeds did this through a `volatile` pointer, relying on
// the warp running in lockstep; since Volta it need not, so each step's
// reads are separated from its writes by __syncwarp().
template <class Op, class A>
__device__ __forceinline__ void last_warp(A* smem, unsigned tid) {
  A v = smem[tid];
#pragma unroll
  for (unsigned offset = 32; offset > 0; offset >>= 1) {
    v = Op::combine(v, smem[tid + offset]);
    __syncwarp();
    smem[tid] = v;
    __syncwarp();
  }
}

// unroll_last_warp (seed 000 "unroll the last warp", seed 004
// reduceUnrollWarp8). unroll8, but the tree stops using __syncthreads() once
// 32 threads are left: the last six steps run inside warp 0.
template <class R, int BLOCK, int K>
__global__ void __launch_bounds__(BLOCK)
unroll_last_warp_kernel(const typename R::In* x, int64_t n, Sink out) {
  static_assert(BLOCK >= 64, "last_warp reads smem[tid + 32]");
  __shared__ typename R::Acc smem[BLOCK];
  const unsigned tid = threadIdx.x;
  smem[tid] = load_tile<R, BLOCK, K>(x, n);
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 32; s >>= 1) {
    if (tid < s) smem[tid] = R::Op::combine(smem[tid], smem[tid + s]);
    __syncthreads();
  }
  if (tid < 32) last_warp<typename R::Op>(smem, tid);
  if (tid == 0) store(out, blockIdx.x, smem[0]);
}

// complete_unroll (seed 000 "complete unroll", seed 004
// reduceCompleteUnrollWarp8 and its template form). The block size is a
// template parameter, so the loop over strides disappears: each step is
// written out and the compiler drops the ones larger than the block.
template <class R, int BLOCK, int K>
__global__ void __launch_bounds__(BLOCK)
complete_unroll_kernel(const typename R::In* x, int64_t n, Sink out) {
  static_assert(BLOCK >= 64 && BLOCK <= 1024 && (BLOCK & (BLOCK - 1)) == 0,
                "a power of two from 64 to 1024");
  using Op = typename R::Op;
  __shared__ typename R::Acc smem[BLOCK];
  const unsigned tid = threadIdx.x;
  smem[tid] = load_tile<R, BLOCK, K>(x, n);
  __syncthreads();
  if constexpr (BLOCK >= 1024) {
    if (tid < 512) smem[tid] = Op::combine(smem[tid], smem[tid + 512]);
    __syncthreads();
  }
  if constexpr (BLOCK >= 512) {
    if (tid < 256) smem[tid] = Op::combine(smem[tid], smem[tid + 256]);
    __syncthreads();
  }
  if constexpr (BLOCK >= 256) {
    if (tid < 128) smem[tid] = Op::combine(smem[tid], smem[tid + 128]);
    __syncthreads();
  }
  if constexpr (BLOCK >= 128) {
    if (tid < 64) smem[tid] = Op::combine(smem[tid], smem[tid + 64]);
    __syncthreads();
  }
  if (tid < 32) last_warp<Op>(smem, tid);
  if (tid == 0) store(out, blockIdx.x, smem[0]);
}

// Elements per thread of each shared-tree rung.
constexpr int tree_items_per_thread(Variant v) {
  switch (v) {
    case Variant::FirstAdd: return 2;
    case Variant::Unroll4: return 4;
    case Variant::Unroll8:
    case Variant::UnrollLastWarp:
    case Variant::CompleteUnroll: return 8;
    default: return 1;
  }
}

constexpr int64_t tree_tile(Variant v) {
  return int64_t(kTreeBlock) * tree_items_per_thread(v);
}

template <class R>
void launch_tree_level(Variant v, int64_t grid, const typename R::In* x,
                       int64_t n, Sink out, cudaStream_t stream) {
  constexpr int B = kTreeBlock;
  const dim3 g(static_cast<unsigned>(grid));
  switch (v) {
    case Variant::Neighbored:
      neighbored_kernel<R, B><<<g, B, 0, stream>>>(x, n, out); break;
    case Variant::StridedIndex:
      strided_index_kernel<R, B><<<g, B, 0, stream>>>(x, n, out); break;
    case Variant::Sequential:
      sequential_kernel<R, B, 1><<<g, B, 0, stream>>>(x, n, out); break;
    case Variant::FirstAdd:
      sequential_kernel<R, B, 2><<<g, B, 0, stream>>>(x, n, out); break;
    case Variant::Unroll4:
      sequential_kernel<R, B, 4><<<g, B, 0, stream>>>(x, n, out); break;
    case Variant::Unroll8:
      sequential_kernel<R, B, 8><<<g, B, 0, stream>>>(x, n, out); break;
    case Variant::UnrollLastWarp:
      unroll_last_warp_kernel<R, B, 8><<<g, B, 0, stream>>>(x, n, out); break;
    case Variant::CompleteUnroll:
      complete_unroll_kernel<R, B, 8><<<g, B, 0, stream>>>(x, n, out); break;
    default: break;
  }
}

// Level 0 reduces the input to one partial per tile; each further level
// reduces the partials the same way, until a single block writes the result.
template <class R>
cudaError_t run_shared_tree(Variant v, const ReduceArgs& a, size_t* workspace_bytes) {
  using Acc = typename R::Acc;
  using P = PartialsOf<R>;
  const int64_t tile = tree_tile(v);
  const int64_t grid = std::max<int64_t>(1, ceil_div(a.n, tile));
  if (grid > kMaxGridX) return cudaErrorInvalidConfiguration;
  if (workspace_bytes) {  // partials of the first level, then of the second (ping-pong)
    *workspace_bytes = grid > 1 ? size_t(grid + ceil_div(grid, tile)) * sizeof(Acc) : 0;
    return cudaSuccess;
  }
  const Sink result{a.out, a.types.out};
  Acc* buf[2] = {static_cast<Acc*>(a.workspace),
                 static_cast<Acc*>(a.workspace) + grid};
  constexpr DType acc = dtype_of<Acc>();

  launch_tree_level<R>(v, grid, static_cast<const typename R::In*>(a.in), a.n,
                       grid == 1 ? result : Sink{buf[0], acc}, a.stream);
  if (cudaError_t e = last_launch_error(); e != cudaSuccess) return e;
  int cur = 0;
  for (int64_t m = grid; m > 1;) {
    const int64_t g = ceil_div(m, tile);
    launch_tree_level<P>(v, g, buf[cur], m,
                         g == 1 ? result : Sink{buf[cur ^ 1], acc}, a.stream);
    if (cudaError_t e = last_launch_error(); e != cudaSuccess) return e;
    m = g;
    cur ^= 1;
  }
  return cudaSuccess;
}

}  // namespace treduce::cuda
