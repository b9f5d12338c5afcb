// softmax, log_softmax and their backwards on the GPU (core/normalize.h says what each computes),
// over a contiguous tensor seen as (outer, size, inner):
//  - rows (inner == 1) that a warp holds in registers: kLanes lanes a row (several rows a warp
//    for short ones), kPacks loads a lane of kVec elements (16 bytes where every row starts on
//    16 bytes, else single elements): one read and one write;
//  - longer rows of whole aligned packs up to Tuning::normalize_on_chip_most_bytes: the row in
//    registers, split over a cluster of blocks where one block does not hold it (sm_90): one
//    read and one write;
//  - longer rows still, and rows not of whole packs: a block a row; forward, the running maximum
//    and sum of exps in one read (ExpSum), then a second read that writes. The first part of the
//    row is kept in shared memory on the way (up to kRowCacheBytes), so the second read takes it
//    from there and the rest from L2 (one block a multiprocessor while it caches: the rows in
//    flight fit L2);
//  - columns (inner > 1): 32 adjacent columns a block (coalesced), Y threads down each, their
//    statistics combined in y order through shared memory, then the same threads write.
#pragma once

#include <cooperative_groups.h>

#include "../../normalize.h"
#include "../tuning.h"
#include "common.cuh"

namespace treduce::cuda::norm {

// f(T{}) with the CUDA type of a floating dtype (the normalizing ops' launchers); else invalid.
template <class F>
cudaError_t visit_floating(DType t, const F& f) {
  switch (t) {
    case DType::Half: return f(__half());
    case DType::BFloat16: return f(__nv_bfloat16());
    case DType::Float: return f(float());
    case DType::Double: return f(double());
    default: return cudaErrorInvalidValue;
  }
}

inline constexpr int kWarpRowsBlock = 128;    // 4 warps
inline constexpr int kBlockRowThreads = 512;
inline constexpr int kRowCacheBytes = 160 << 10;
inline constexpr int kRowCacheLeast = 32 << 10;  // rows with fewer bytes are not cached (L2 holds them)
inline constexpr int kUnroll = 4;             // loads a thread issues before using them

template <class T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

// Shuffle reductions within groups of kLanes lanes (xor masks below kLanes: fixed pairs).
template <int kLanes, class Acc>
__device__ __forceinline__ Acc group_max(Acc v) {
#pragma unroll
  for (int m = kLanes / 2; m > 0; m /= 2) v = norm_max(v, __shfl_xor_sync(0xffffffffu, v, m));
  return v;
}

template <int kLanes, class Acc>
__device__ __forceinline__ Acc group_sum(Acc v) {
#pragma unroll
  for (int m = kLanes / 2; m > 0; m /= 2) v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}

template <class Acc>
__device__ __forceinline__ ExpSum<Acc> warp_exp_sum(ExpSum<Acc> s) {
#pragma unroll
  for (int m = 16; m > 0; m /= 2) {
    const ExpSum<Acc> o{__shfl_xor_sync(0xffffffffu, s.max, m), __shfl_xor_sync(0xffffffffu, s.sum, m)};
    s = ExpSum<Acc>::combine(s, o);
  }
  return s;
}

// The maximum and sum of exps of the packs p[j] with live(j), held in registers: their maximum
// first, then their exps against it (no rescaling an element); between(), between the two
// passes. All -inf, or none: sum 0, as ExpSum::add leaves it.
template <class Acc, class In, int kVec, int kN, class Live, class Between>
__device__ __forceinline__ ExpSum<Acc> packs_exp_sum(const Pack<In, kVec> (&p)[kN], const Live& live,
                                                     const Between& between) {
  Acc m = -INFINITY, sum = Acc(0);
#pragma unroll
  for (int j = 0; j < kN; ++j)
    if (live(j)) {
#pragma unroll
      for (int e = 0; e < kVec; ++e) m = norm_max(m, element_cast<Acc>(p[j].v[e]));
    }
  between();
  if (m != -INFINITY) {
#pragma unroll
    for (int j = 0; j < kN; ++j)
      if (live(j)) {
#pragma unroll
        for (int e = 0; e < kVec; ++e) sum += norm_exp(element_cast<Acc>(p[j].v[e]) - m);
      }
  }
  return {m, sum};
}

// Rows in registers: kLanes lanes a row, 32 / kLanes rows a warp; lane l of a row holds its
// packs l, l + kLanes, ... (kPacks of them, kVec elements each). Rows past the last, and
// elements past a row's end, take part in no sum.
template <SoftmaxOp kOp, class In, class Out, class Acc, int kLanes, int kPacks, int kVec>
__global__ void __launch_bounds__(kWarpRowsBlock)
    warp_rows_kernel(const In* __restrict__ x, const In* __restrict__ y, Out* __restrict__ out, int64_t rows, int size) {
  using InPack = Pack<In, kVec>;
  using OutPack = Pack<Out, kVec>;
  constexpr int kRowsPerWarp = 32 / kLanes;
  const int64_t row = (int64_t(blockIdx.x) * (kWarpRowsBlock / 32) + threadIdx.x / 32) * kRowsPerWarp +
                      (threadIdx.x % 32) / kLanes;
  const int lane = threadIdx.x % kLanes;
  const bool live = row < rows;
  const int64_t start = (live ? row : 0) * size;
  Acc v[kPacks][kVec], w[kPacks][kVec];
#pragma unroll
  for (int j = 0; j < kPacks; ++j) {
    const int first = (lane + kLanes * j) * kVec;
    if (live && first < size) {
      // (with kVec > 1 every row is whole packs: size % kVec == 0)
      const InPack p = *reinterpret_cast<const InPack*>(x + start + first);
#pragma unroll
      for (int e = 0; e < kVec; ++e) v[j][e] = element_cast<Acc>(p.v[e]);
      if constexpr (is_backward(kOp)) {
        const InPack q = *reinterpret_cast<const InPack*>(y + start + first);
#pragma unroll
        for (int e = 0; e < kVec; ++e) w[j][e] = element_cast<Acc>(q.v[e]);
      }
    } else {
#pragma unroll
      for (int e = 0; e < kVec; ++e) v[j][e] = Acc(0), w[j][e] = Acc(0);
    }
  }
  const auto in_row = [&](int j) { return live && (lane + kLanes * j) * kVec < size; };
  Acc a = Acc(0), b = Acc(0);
  if constexpr (!is_backward(kOp)) {
    a = -INFINITY;
#pragma unroll
    for (int j = 0; j < kPacks; ++j)
      if (in_row(j)) {
#pragma unroll
        for (int e = 0; e < kVec; ++e) a = norm_max(a, v[j][e]);
      }
    a = group_max<kLanes>(a);
#pragma unroll
    for (int j = 0; j < kPacks; ++j)
      if (in_row(j)) {
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          const Acc t = norm_exp(v[j][e] - a);
          b += t;
          if constexpr (kOp == SoftmaxOp::Softmax) v[j][e] = t;  // (kept: softmax's result is t / sum)
        }
      }
    b = forward_scale<kOp>(group_sum<kLanes>(b));
  } else {
#pragma unroll
    for (int j = 0; j < kPacks; ++j)
#pragma unroll
      for (int e = 0; e < kVec; ++e) a += backward_term<kOp, Acc>(v[j][e], w[j][e]);  // zeros past the row
    a = group_sum<kLanes>(a);
  }
#pragma unroll
  for (int j = 0; j < kPacks; ++j) {
    if (!in_row(j)) continue;
    OutPack r;
#pragma unroll
    for (int e = 0; e < kVec; ++e)
      r.v[e] = element_cast<Out>(kOp == SoftmaxOp::Softmax ? v[j][e] * b : normalize_one<kOp, Acc>(v[j][e], w[j][e], a, b));
    *reinterpret_cast<OutPack*>(out + start + (lane + kLanes * j) * kVec) = r;
  }
}

// The block's combine of each warp's statistics (every lane of a warp holds its warp's), in
// warp order, the result in every thread.
template <class T, class Combine>
__device__ __forceinline__ T block_combine(T v, const Combine& combine, T* shared) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    T u = shared[0];
    for (int k = 1; k < warps; ++k) u = combine(u, shared[k]);
    shared[32] = u;
  }
  __syncthreads();
  return shared[32];
}

// Whether the first read of a backward row takes y: softmax's sums g y, log_softmax's g alone.
constexpr bool sums_y(SoftmaxOp op) { return op == SoftmaxOp::SoftmaxBackward; }

// A block a row. kVec elements a load (16-byte packs where the row's start in x, y and out
// allows, else single elements: kVec 1), kUnroll loads in flight a thread; the row's first
// `cached` packs of what the first read takes (x, and y where sums_y) kept in dynamic shared
// memory by the first read for the second.
template <SoftmaxOp kOp, class In, class Out, class Acc, int kVec>
__global__ void __launch_bounds__(kBlockRowThreads)
    block_rows_kernel(const In* __restrict__ x, const In* __restrict__ y, Out* __restrict__ out, int64_t size,
                      int64_t cached) {
  using InPack = Pack<In, kVec>;
  using OutPack = Pack<Out, kVec>;
  extern __shared__ __align__(16) unsigned char row_cache[];
  InPack* cache_x = reinterpret_cast<InPack*>(row_cache);
  InPack* cache_y = cache_x + cached;  // (sums_y only)
  const int64_t row = blockIdx.x;
  const InPack* xr = reinterpret_cast<const InPack*>(x + row * size);
  const InPack* yr = is_backward(kOp) ? reinterpret_cast<const InPack*>(y + row * size) : nullptr;
  OutPack* dst = reinterpret_cast<OutPack*>(out + row * size);
  const int64_t packs = size / kVec;  // (kVec divides size where kVec > 1)
  const int t = threadIdx.x, T = blockDim.x;
  Acc a = Acc(0), b = Acc(0);
  ExpSum<Acc> s = ExpSum<Acc>::identity();
  Acc total = Acc(0);
  for (int64_t k0 = t; k0 < packs; k0 += int64_t(T) * kUnroll) {
    InPack p[kUnroll], q[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t k = k0 + int64_t(u) * T;
      if (k < packs) {
        p[u] = xr[k];
        if constexpr (sums_y(kOp)) q[u] = yr[k];
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t k = k0 + int64_t(u) * T;
      if (k >= packs) break;
      if (k < cached) {
        cache_x[k] = p[u];
        if constexpr (sums_y(kOp)) cache_y[k] = q[u];
      }
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        if constexpr (is_backward(kOp))
          total += backward_term<kOp, Acc>(element_cast<Acc>(p[u].v[e]), sums_y(kOp) ? element_cast<Acc>(q[u].v[e]) : Acc(0));
        else
          s.add(element_cast<Acc>(p[u].v[e]));
      }
    }
  }
  if constexpr (!is_backward(kOp)) {
    __shared__ ExpSum<Acc> shared[33];
    s = warp_exp_sum(s);
    s = block_combine(s, [](ExpSum<Acc> u, ExpSum<Acc> v) { return ExpSum<Acc>::combine(u, v); }, shared);
    a = s.max, b = forward_scale<kOp>(s.sum);
  } else {
    __shared__ Acc shared[33];
    total = group_sum<32>(total);
    a = block_combine(total, [](Acc u, Acc v) { return u + v; }, shared);
  }
  // (block_combine's barriers also order the cache's stores before these loads)
  for (int64_t k0 = t; k0 < packs; k0 += int64_t(T) * kUnroll) {
    InPack p[kUnroll], q[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t k = k0 + int64_t(u) * T;
      if (k < packs) {
        p[u] = k < cached ? cache_x[k] : xr[k];
        if constexpr (is_backward(kOp)) q[u] = sums_y(kOp) && k < cached ? cache_y[k] : yr[k];
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t k = k0 + int64_t(u) * T;
      if (k >= packs) break;
      OutPack r;
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const Acc yv = is_backward(kOp) ? element_cast<Acc>(q[u].v[e]) : Acc(0);
        r.v[e] = element_cast<Out>(normalize_one<kOp, Acc>(element_cast<Acc>(p[u].v[e]), yv, a, b));
      }
      dst[k] = r;
    }
  }
}

// Rows on chip: row blockIdx.x / cluster, its packs [rank * span, rank * span + span) in the
// block of rank blockIdx.x % cluster (a 1-d cluster is consecutive blocks), kPacks a thread in
// registers, loaded once. Each block combines its threads' statistics in warp order and stores
// them into slot `rank` of every block of its cluster (distributed shared memory); after the
// cluster's barrier each block combines its slots in rank order, so all hold the same bits and
// no block reads another's memory (none waits for the others to leave).
inline constexpr int kOnChipThreads = kNormalizeOnChipThreads;  // two blocks a multiprocessor (64 registers)
template <SoftmaxOp kOp, class In>
inline constexpr int kOnChipPacks = normalize_on_chip_packs(kOp, int(sizeof(In)));

// The pack's registers as the compiler must assume changed: elements converted in one pass are
// converted again in the next instead of being kept (bfloat16's 64 converted floats a thread
// had spilled).
template <class P>
__device__ __forceinline__ void opaque(P& p) {
  static_assert(sizeof(P) == 16);
  uint4 u;
  memcpy(&u, &p, 16);
  asm volatile("" : "+r"(u.x), "+r"(u.y), "+r"(u.z), "+r"(u.w));
  memcpy(&p, &u, 16);
}

// The cluster's barrier, split: arrive (`release` where this thread's stores into other blocks
// must be seen after the wait; the other threads arrive relaxed, no fence each), then wait.
__device__ __forceinline__ void cluster_arrive(bool release) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (release)
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
  else
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
#endif
}

__device__ __forceinline__ void cluster_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
#endif
}

template <SoftmaxOp kOp, class In, class Out, class Acc>
__global__ void __launch_bounds__(kOnChipThreads, 2)
    on_chip_rows_kernel(const In* __restrict__ x, const In* __restrict__ y, Out* __restrict__ out, int64_t size,
                        int span, int cluster) {
  constexpr int kVec = 16 / sizeof(In);
  constexpr int kP = kOnChipPacks<kOp, In>;
  using InPack = Pack<In, kVec>;
  using OutPack = Pack<Out, kVec>;
  const int64_t row = blockIdx.x / cluster;
  const int rank = blockIdx.x % cluster;
  // (a row on chip has fewer than 2^31 packs: 32-bit offsets, fewer registers)
  const int first = rank * span + int(threadIdx.x);
  const int end = std::min(int(size / kVec), rank * span + span);
  const InPack* xr = reinterpret_cast<const InPack*>(x + row * size);
  const InPack* yr = is_backward(kOp) ? reinterpret_cast<const InPack*>(y + row * size) : nullptr;
  OutPack* dst = reinterpret_cast<OutPack*>(out + row * size);
  const auto at = [&](int j) { return first + j * int(blockDim.x); };
  // (a block may store into another's shared memory only once that block runs: a first barrier
  // phase, arrived at here and waited on just before those stores)
  if (cluster > 1) cluster_arrive(false);
  InPack p[kP], q[kP];
#pragma unroll
  for (int j = 0; j < kP; ++j)
    if (at(j) < end) {
      p[j] = xr[at(j)];
      if constexpr (is_backward(kOp)) q[j] = yr[at(j)];
    }
  const auto forget = [&] {
#pragma unroll
    for (int j = 0; j < kP; ++j) {
      opaque(p[j]);
      if constexpr (is_backward(kOp)) opaque(q[j]);
    }
  };
  __shared__ ExpSum<Acc> shared[33];  // (backward: .max carries the sum)
  __shared__ ExpSum<Acc> slots[kNormalizeOnChipClusterMost];
  const auto combine = [](ExpSum<Acc> u, ExpSum<Acc> v) {
    return is_backward(kOp) ? ExpSum<Acc>{u.max + v.max, Acc(0)} : ExpSum<Acc>::combine(u, v);
  };
  ExpSum<Acc> s;
  if constexpr (!is_backward(kOp)) {
    const ExpSum<Acc> mine = packs_exp_sum<Acc>(p, [&](int j) { return at(j) < end; }, forget);
    s = block_combine(warp_exp_sum(mine), combine, shared);
  } else {
    Acc total = Acc(0);
#pragma unroll
    for (int j = 0; j < kP; ++j)
      if (at(j) < end) {
#pragma unroll
        for (int e = 0; e < kVec; ++e)
          total += backward_term<kOp, Acc>(element_cast<Acc>(p[j].v[e]), element_cast<Acc>(q[j].v[e]));
      }
    s = block_combine(ExpSum<Acc>{group_sum<32>(total), Acc(0)}, combine, shared);
  }
  forget();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (cluster > 1) {
    namespace cg = cooperative_groups;
    const cg::cluster_group blocks = cg::this_cluster();
    cluster_wait();  // every block of the cluster runs
    if (threadIdx.x < unsigned(cluster)) *blocks.map_shared_rank(&slots[rank], threadIdx.x) = s;
    cluster_arrive(threadIdx.x < 32);
    cluster_wait();
    s = slots[0];
    for (int r = 1; r < cluster; ++r) s = combine(s, slots[r]);
  }
#endif
  const Acc b = row_value<kOp>(s.sum);
#pragma unroll
  for (int j = 0; j < kP; ++j)
    if (at(j) < end) {
      OutPack r;
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const Acc yv = is_backward(kOp) ? element_cast<Acc>(q[j].v[e]) : Acc(0);
        r.v[e] = element_cast<Out>(normalize_one<kOp, Acc>(element_cast<Acc>(p[j].v[e]), yv, s.max, b));
      }
      dst[at(j)] = r;
    }
}

// Columns of (outer, size, inner): a block blockDim.x adjacent columns of one outer index (x)
// times blockDim.y threads down (y, a power of two), each thread the rows ty, ty + Y, ...,
// kUnroll loads in flight; the Y statistics of a column combined by a fixed tree in shared
// memory (the same bits every run), then the same threads write. Each pass's loop stays rolled
// (#pragma unroll 1): kUnroll loads a round are its loads in flight. Unrolled by the compiler,
// float32 log_softmax had 16 loads and 12 stores in its PTX against softmax's 8 and 4, and took
// 27.9 us over dim 0 of (1000, 4096) against softmax's 20.4 (H100).
template <SoftmaxOp kOp, class In, class Out, class Acc>
__global__ void __launch_bounds__(1024)
    columns_kernel(const In* __restrict__ x, const In* __restrict__ y, Out* __restrict__ out, int64_t column_blocks,
                   int64_t size, int64_t inner) {
  __shared__ Acc first[1024], second[1024];
  const int X = blockDim.x, Y = blockDim.y, tx = threadIdx.x, ty = threadIdx.y;
  const int64_t o = blockIdx.x / column_blocks;
  const int64_t i = (blockIdx.x % column_blocks) * X + tx;
  const bool live = i < inner;
  const int64_t base = o * size * inner + i;
  const int64_t stride = int64_t(Y) * inner;  // between a thread's rows
  // row d0 + u Y of the column: whether it is in the column, and where it is
  const auto in_column = [&](int64_t d0, int u) { return d0 + int64_t(u) * Y < size; };
  const auto at = [&](int64_t d0, int u) { return base + d0 * inner + u * stride; };
  if constexpr (!is_backward(kOp)) {
    ExpSum<Acc> s = ExpSum<Acc>::identity();
    if (live)
#pragma unroll 1
      for (int64_t d0 = ty; d0 < size; d0 += int64_t(Y) * kUnroll) {
        Pack<In, 1> p[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u)
          if (in_column(d0, u)) p[u].v[0] = x[at(d0, u)];
        // (the maximum of the kUnroll, then their exps: one rescale a round, not an element)
        s = ExpSum<Acc>::combine(s, packs_exp_sum<Acc>(p, [&](int u) { return in_column(d0, u); }, [] {}));
      }
    first[ty * X + tx] = s.max, second[ty * X + tx] = s.sum;
  } else {
    Acc s = Acc(0);
    if (live)
#pragma unroll 1
      for (int64_t d0 = ty; d0 < size; d0 += int64_t(Y) * kUnroll) {
        In g[kUnroll], v[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u)
          if (in_column(d0, u)) g[u] = x[at(d0, u)], v[u] = y[at(d0, u)];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u)
          if (in_column(d0, u)) s += backward_term<kOp, Acc>(element_cast<Acc>(g[u]), element_cast<Acc>(v[u]));
      }
    first[ty * X + tx] = s;
  }
  for (int h = Y / 2; h > 0; h /= 2) {
    __syncthreads();
    if (ty < h) {
      const int k = ty * X + tx, l = (ty + h) * X + tx;
      if constexpr (!is_backward(kOp)) {
        const ExpSum<Acc> c = ExpSum<Acc>::combine({first[k], second[k]}, {first[l], second[l]});
        first[k] = c.max, second[k] = c.sum;
      } else {
        first[k] += first[l];
      }
    }
  }
  __syncthreads();
  if (!live) return;
  const Acc a = first[tx], b = row_value<kOp>(is_backward(kOp) ? Acc(0) : second[tx]);
#pragma unroll 1
  for (int64_t d0 = ty; d0 < size; d0 += int64_t(Y) * kUnroll) {
    In v[kUnroll], w[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (in_column(d0, u)) {
        v[u] = x[at(d0, u)];
        if constexpr (is_backward(kOp)) w[u] = y[at(d0, u)];
      }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (in_column(d0, u)) {
        const Acc yv = is_backward(kOp) ? element_cast<Acc>(w[u]) : Acc(0);
        out[at(d0, u)] = element_cast<Out>(normalize_one<kOp, Acc>(element_cast<Acc>(v[u]), yv, a, b));
      }
  }
}

template <SoftmaxOp kOp, class In, class Out, class Acc, int kLanes, int kPacks, int kVec>
cudaError_t launch_warp_rows(const In* x, const In* y, Out* out, int64_t rows, int size, cudaStream_t stream) {
  constexpr int64_t kRowsPerBlock = kWarpRowsBlock / kLanes;
  const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  warp_rows_kernel<kOp, In, Out, Acc, kLanes, kPacks, kVec><<<unsigned(blocks), kWarpRowsBlock, 0, stream>>>(x, y, out, rows, size);
  return cudaGetLastError();
}

// Rows in registers: the fewest lanes (4 to 32) that hold a row in up to packs_most<In> packs a
// lane (32 elements of 2-byte types, 32 of 4-byte ones, 16 of 8-byte ones), for rows of whole
// aligned packs; else 32 lanes of up to 32 single elements.
template <class In>
inline constexpr int kPacksMost = sizeof(In) == 2 ? 4 : 8;

template <SoftmaxOp kOp, class In, class Out, class Acc>
cudaError_t launch_rows_in_registers(const In* x, const In* y, Out* out, int64_t rows, int size, bool packs,
                                     cudaStream_t stream) {
  constexpr int kVec = 16 / sizeof(In);
  if (packs) {
    const int n = size / kVec;  // packs a row
#define TREDUCE_WARP_ROWS(L, P) \
  if (n <= L * P) return launch_warp_rows<kOp, In, Out, Acc, L, P, kVec>(x, y, out, rows, size, stream);
    TREDUCE_WARP_ROWS(4, 1)
    TREDUCE_WARP_ROWS(8, 1)
    TREDUCE_WARP_ROWS(16, 1)
    TREDUCE_WARP_ROWS(32, 1)
    TREDUCE_WARP_ROWS(32, 2)
    TREDUCE_WARP_ROWS(32, 4)
    if constexpr (kPacksMost<In> == 8) {
      TREDUCE_WARP_ROWS(32, 8)
    }
#undef TREDUCE_WARP_ROWS
    return cudaErrorInvalidValue;
  }
#define TREDUCE_WARP_ROWS(P) \
  if (size <= 32 * P) return launch_warp_rows<kOp, In, Out, Acc, 32, P, 1>(x, y, out, rows, size, stream);
  TREDUCE_WARP_ROWS(1)
  TREDUCE_WARP_ROWS(2)
  TREDUCE_WARP_ROWS(4)
  TREDUCE_WARP_ROWS(8)
  TREDUCE_WARP_ROWS(16)
  TREDUCE_WARP_ROWS(32)
#undef TREDUCE_WARP_ROWS
  return cudaErrorInvalidValue;
}

template <SoftmaxOp kOp, class In, class Out, class Acc, int kVec>
cudaError_t launch_block_rows(const In* x, const In* y, Out* out, int64_t rows, int64_t size, cudaStream_t stream) {
  constexpr int64_t kPackBytes = int64_t(sizeof(In)) * kVec * (sums_y(kOp) ? 2 : 1);  // cached a pack
  const int64_t packs = size / kVec;
  const int64_t cached = packs * kPackBytes >= kRowCacheLeast ? std::min<int64_t>(packs, kRowCacheBytes / kPackBytes) : 0;
  const size_t smem = size_t(cached * kPackBytes);
  const auto kernel = block_rows_kernel<kOp, In, Out, Acc, kVec>;
  if (smem > 0) {  // (a host call, per device: set on every launch that caches)
    const cudaError_t set = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kRowCacheBytes));
    if (set != cudaSuccess) return set;
  }
  // Short rows: fewer threads, about kUnroll loads each.
  int threads = 128;
  while (threads < kBlockRowThreads && int64_t(threads) * kUnroll * 2 <= packs) threads *= 2;
  if (rows > 0x7fffffff) return cudaErrorInvalidValue;
  kernel<<<unsigned(rows), threads, smem, stream>>>(x, y, out, size, cached);
  return cudaGetLastError();
}

template <SoftmaxOp kOp, class In, class Out, class Acc>
cudaError_t launch_on_chip_rows(const In* x, const In* y, Out* out, int64_t rows, int64_t size, int cluster,
                                cudaStream_t stream) {
  constexpr int kVec = 16 / sizeof(In);
  const int span = int((size / kVec + cluster - 1) / cluster);  // packs a block
  // Threads for the span at kOnChipPacks packs each, whole warps (short rows: small blocks, more a
  // multiprocessor).
  const int64_t threads = std::max<int64_t>(32, ((span + kOnChipPacks<kOp, In> - 1) / kOnChipPacks<kOp, In> + 31) / 32 * 32);
  if (rows * cluster > 0x7fffffff || threads > kOnChipThreads) return cudaErrorInvalidValue;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = unsigned(cluster);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(unsigned(rows * cluster));
  config.blockDim = dim3(unsigned(threads));
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = cluster > 1 ? 1 : 0;
  return cudaLaunchKernelEx(&config, on_chip_rows_kernel<kOp, In, Out, Acc>, x, y, out, size, span, cluster);
}

template <SoftmaxOp kOp, class In, class Out>
cudaError_t launch(const NormalizeArgs& a, cudaStream_t stream) {
  using Acc = NormAcc<In>;
  constexpr int kVec = 16 / sizeof(In);
  const In* x = static_cast<const In*>(a.x);
  const In* y = static_cast<const In*>(a.y);
  Out* out = static_cast<Out*>(a.out_data);
  if (a.inner > 1) {
    const int64_t fill = int64_t(a.sm_count) * 2048;  // threads that fill the multiprocessors
    const auto blocks_of = [&](int X) { return a.outer * ((a.inner + X - 1) / X); };
    // X columns a block: 32, fewer where fewer columns, or too few blocks of 1024 threads to fill
    // the GPU (dim 1 of (32, 1000, 49): 224 blocks of 8 columns, not 64 of 32); a row's segment
    // at least a 32-byte sector.
    const int least = std::max<int>(8, 32 / int(sizeof(In)));
    int X = 32;
    while (X > least && (X / 2 >= a.inner || blocks_of(X) * 1024 < fill)) X /= 2;
    // Y threads down: enough to fill the multiprocessors, at least 4 rows each.
    int Y = 1;
    while (X * Y < 1024 && blocks_of(X) * X * Y < fill && int64_t(Y) * 8 <= a.size) Y *= 2;
    const int64_t column_blocks = (a.inner + X - 1) / X;
    if (blocks_of(X) > 0x7fffffff) return cudaErrorInvalidValue;
    columns_kernel<kOp, In, Out, Acc><<<unsigned(blocks_of(X)), dim3(X, Y), 0, stream>>>(x, y, out, column_blocks, a.size,
                                                                                         a.inner);
    return cudaGetLastError();
  }
  // Whole aligned packs: every row starts on 16 bytes in x and y, and on a pack of Out in out.
  const bool packs = a.size % kVec == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                     (!is_backward(kOp) || reinterpret_cast<uintptr_t>(y) % 16 == 0) &&
                     reinterpret_cast<uintptr_t>(out) % (sizeof(Out) * kVec) == 0;
  const int64_t most = packs ? int64_t(32) * kPacksMost<In> * kVec : 1024;
  if (a.size <= most) return launch_rows_in_registers<kOp, In, Out, Acc>(x, y, out, a.outer, int(a.size), packs, stream);
  if (const int cluster = normalize_on_chip_blocks(kOp, int(sizeof(In)), a.size, packs, a.cc_major,
                                                   tuning_for(a.cc_major).normalize_on_chip_most_bytes);
      cluster > 0)
    return launch_on_chip_rows<kOp, In, Out, Acc>(x, y, out, a.outer, a.size, cluster, stream);
  if (packs) return launch_block_rows<kOp, In, Out, Acc, kVec>(x, y, out, a.outer, a.size, stream);
  return launch_block_rows<kOp, In, Out, Acc, 1>(x, y, out, a.outer, a.size, stream);
}

}  // namespace treduce::cuda::norm
