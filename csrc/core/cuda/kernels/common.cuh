// Building blocks every reduction kernel is written against: C++ types for
// the dtype tags (and which of them convert through float), the Sum op
// (identity, combine, atomic combine), the Reduction traits that bundle them,
// and the one place a kernel writes a result.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../../convert.h"
#include "../../reduce_ops.h"
#include "../launch.h"
#include "../plan.h"

namespace treduce::cuda {

template <DType D> using ctype_t = ctype_with<D, __half, __nv_bfloat16>;

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<bool>() { return DType::Bool; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::UInt8; }
template <> constexpr DType dtype_of<int8_t>() { return DType::Int8; }
template <> constexpr DType dtype_of<int16_t>() { return DType::Int16; }
template <> constexpr DType dtype_of<int32_t>() { return DType::Int32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::Int64; }
template <> constexpr DType dtype_of<__half>() { return DType::Half; }
template <> constexpr DType dtype_of<__nv_bfloat16>() { return DType::BFloat16; }
template <> constexpr DType dtype_of<float>() { return DType::Float; }
template <> constexpr DType dtype_of<double>() { return DType::Double; }

}  // namespace treduce::cuda

namespace treduce {
template <>
struct Lowp<__half> : std::true_type {
  __host__ __device__ static float to_float(__half v) { return __half2float(v); }
  __host__ __device__ static __half from_float(float v) { return __float2half_rn(v); }
};
template <>
struct Lowp<__nv_bfloat16> : std::true_type {
  __host__ __device__ static float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
  __host__ __device__ static __nv_bfloat16 from_float(float v) { return __float2bfloat16_rn(v); }
};
}  // namespace treduce

namespace treduce::cuda {

__device__ __forceinline__ void atomic_add(float* p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(double* p, double v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(int64_t* p, int64_t v) {
  // Two's complement: an unsigned 64-bit add wraps to the same bits.
  atomicAdd(reinterpret_cast<unsigned long long*>(p),
            static_cast<unsigned long long>(v));
}

// The reduction operators (reduce_ops.h). The ladder's atomic variants also call
// atomic_combine, which only the sum has.
template <class A>
struct Sum : SumOp<A> {
  __device__ __forceinline__ static void atomic_combine(A* p, A v) { atomic_add(p, v); }
};

// What a kernel reduces: In elements, each converted through Mid into the operator's value
// type, then into its accumulator (reduce_ops.h).
template <class In_, class Mid_, class Op_>
struct Reduction {
  using In = In_;
  using Mid = Mid_;
  using Op = Op_;
  using Acc = typename Op_::acc_t;
  using Value = typename Op_::value_t;
  __device__ __forceinline__ static Value value(In v) { return Load<In, Mid, Value>::apply(v); }
  __device__ __forceinline__ static Acc convert(In v) { return Op::enter(value(v)); }
  __device__ __forceinline__ static Acc reduce(const Acc& a, In v) { return Op::reduce(a, value(v)); }
  __device__ __forceinline__ static Acc load(const In* x, int64_t i) { return convert(x[i]); }
};

// Reduction over a buffer of block partials (already in Acc; the ladder's sums only).
template <class R>
using PartialsOf = Reduction<typename R::Acc, typename R::Acc, typename R::Op>;

// Where a kernel writes its value(s): the caller's result(s) (any dtype, through the operator's
// projection: mean's division, var's divisor, a norm's root), or, when `raw`, block partials
// (accumulators as they are, read back by a combine kernel). The dtype switch runs once per
// stored value. (The ladder's sums also write partials through a Sink of the accumulator's dtype.)
struct Sink {
  void* ptr;
  DType dtype;
  ProjectArgs args = {};
  void* second = nullptr;  // the second result of a two-result op (var_mean's mean), if asked for
  bool raw = false;
  static Sink partials(void* p) { return {p, DType::Bool, {}, nullptr, true}; }
};

// Results of the dtypes a kernel's results mostly have (the projected value's own, and the
// input's where the kernel names it: a bfloat16 sum is bfloat16) are stored after one comparison
// each; the others through the switch, a tree of comparisons and branches. In kernels of many
// short reductions the switch was ~12 of the ~80 instructions a result (SASS of slab_kernel and
// map_kernel).
template <class Likely = void, class T>
__device__ __forceinline__ void store_value(void* p, DType dtype, int64_t i, T v) {
  if (dtype == dtype_of<T>()) {
    static_cast<T*>(p)[i] = element_cast<T>(v);
    return;
  }
  if constexpr (!std::is_void_v<Likely> && !std::is_same_v<Likely, T>) {
    if (dtype == dtype_of<Likely>()) {
      static_cast<Likely*>(p)[i] = element_cast<Likely>(v);
      return;
    }
  }
  switch (dtype) {
#define TREDUCE_STORE_CASE(D)                                    \
  case DType::D:                                                 \
    static_cast<ctype_t<DType::D>*>(p)[i] = element_cast<ctype_t<DType::D>>(v); \
    break;
    TREDUCE_DTYPES(TREDUCE_STORE_CASE)
#undef TREDUCE_STORE_CASE
  }
}

// Stores accumulator v as result (or partial) i of the Sink; In: the input's type, where the
// caller knows it (the likely result dtype of float inputs).
template <class Op, class In = void, class A>
__device__ void store_acc(const Sink& s, int64_t i, const A& v) {
  if (s.raw) {
    static_cast<A*>(s.ptr)[i] = v;
    return;
  }
  // argmax and argmin keep the positions only: no values (ptr null), a quarter to a half of
  // their bytes.
  if (!is_indexed_v<Op> || s.ptr) store_value<In>(s.ptr, s.dtype, i, Op::project(v, s.args));
  if constexpr (Op::kOutputs == 2) {
    if (s.second) store_value<In>(s.second, second_dtype<Op>(s.dtype, DType::Int64), i, Op::project2(v, s.args));
  }
}

// The ladder's store: a sum (its partials go through a Sink of the accumulator's dtype).
template <class A>
__device__ void store(const Sink& s, int64_t i, A v) {
  store_acc<SumOp<A>>(s, i, v);
}

// Writes v[0..V) to elements i .. i + V - 1 of p: 16-, 8- or 4-byte stores where the run's
// size and address allow. (A 2-byte store per value made the L2 the limit of (32, 4096, 4096)
// bfloat16 over dim 0: 16M scattered stores.)
template <class T, int V, class A>
__device__ __forceinline__ void store_run_as(T* p, const A (&v)[V]) {
  T e[V];
#pragma unroll
  for (int j = 0; j < V; ++j) e[j] = element_cast<T>(v[j]);
  constexpr int kBytes = V * int(sizeof(T));
  constexpr int kWord = kBytes % 16 == 0 ? 16 : kBytes % 8 == 0 ? 8 : kBytes % 4 == 0 && V > 1 ? 4 : 0;
  if constexpr (kWord > 0) {
    using Word = std::conditional_t<kWord == 16, uint4, std::conditional_t<kWord == 8, uint2, unsigned>>;
    if (reinterpret_cast<uintptr_t>(p) % kWord == 0) {
#pragma unroll
      for (int k = 0; k < kBytes / kWord; ++k) {
        Word w;
        memcpy(&w, reinterpret_cast<const char*>(e) + k * kWord, kWord);
        reinterpret_cast<Word*>(p)[k] = w;
      }
      return;
    }
  }
#pragma unroll
  for (int j = 0; j < V; ++j) p[j] = e[j];
}

template <int V, class P>
__device__ __forceinline__ void store_values_run(void* p, DType dtype, int64_t i, const P (&v)[V]) {
  switch (dtype) {
#define TREDUCE_STORE_RUN_CASE(D)                                                          \
  case DType::D:                                                                           \
    store_run_as(static_cast<ctype_t<DType::D>*>(p) + i, v);                              \
    break;
    TREDUCE_DTYPES(TREDUCE_STORE_RUN_CASE)
#undef TREDUCE_STORE_RUN_CASE
  }
}

// Accumulators v[0..V) as results (or partials) i .. i + V - 1: one dtype switch for the run.
template <class Op, int V, class A>
__device__ __forceinline__ void store_run(const Sink& s, int64_t i, const A (&v)[V]) {
  if (s.raw) {
    if constexpr (std::is_arithmetic_v<A>) {
      store_run_as(static_cast<A*>(s.ptr) + i, v);
    } else {
#pragma unroll
      for (int j = 0; j < V; ++j) static_cast<A*>(s.ptr)[i + j] = v[j];
    }
    return;
  }
  using P = decltype(Op::project(v[0], s.args));
  P p[V];
#pragma unroll
  for (int j = 0; j < V; ++j) p[j] = Op::project(v[j], s.args);
  if (!is_indexed_v<Op> || s.ptr) store_values_run(s.ptr, s.dtype, i, p);
  if constexpr (Op::kOutputs == 2) {
    if (s.second) {
      using P2 = decltype(Op::project2(v[0], s.args));  // an int64 position, or P
      P2 p2[V];
#pragma unroll
      for (int j = 0; j < V; ++j) p2[j] = Op::project2(v[j], s.args);
      store_values_run(s.second, second_dtype<Op>(s.dtype, DType::Int64), i, p2);
    }
  }
}

// Writes one accumulator value (from scratch) into its Sink: the last step of the variants
// that accumulate in memory.
template <class A>
__global__ void store_value_kernel(const A* value, Sink out) {
  store(out, 0, *value);
}

// __shfl_down_sync for any accumulator: numbers as they are, structs one 32-bit word at a time
// (the last one partly, for structs of 1- and 2-byte numbers: aminmax of bool, int8, int16).
template <class A>
__device__ __forceinline__ A shfl_down(unsigned mask, const A& v, int offset, int width = 32) {
  if constexpr (std::is_arithmetic_v<A>) {
    return __shfl_down_sync(mask, v, offset, width);
  } else {
    constexpr int kWords = int((sizeof(A) + 3) / 4);
    unsigned w[kWords] = {};
    memcpy(w, &v, sizeof(A));
#pragma unroll
    for (int k = 0; k < kWords; ++k) w[k] = __shfl_down_sync(mask, w[k], offset, width);
    A r;
    memcpy(&r, w, sizeof(A));
    return r;
  }
}

// *p read past L1: for values other blocks of the running grid wrote, which a stale L1 line
// must not answer. ld.cg one 32-bit word at a time; accumulators of 1 or 2 bytes (the
// extrema of bool, 8- and 16-bit inputs) by volatile byte loads.
template <class A>
__device__ __forceinline__ A load_cg(const A* p) {
  if constexpr (sizeof(A) % 4 != 0) {
    unsigned char b[sizeof(A)];
#pragma unroll
    for (int k = 0; k < int(sizeof(A)); ++k) b[k] = reinterpret_cast<const volatile unsigned char*>(p)[k];
    A r;
    memcpy(&r, b, sizeof(A));
    return r;
  } else {
    unsigned w[sizeof(A) / 4];
#pragma unroll
    for (int k = 0; k < int(sizeof(A) / 4); ++k) w[k] = __ldcg(reinterpret_cast<const unsigned*>(p) + k);
    A r;
    memcpy(&r, w, sizeof(A));
    return r;
  }
}

// Reduces a warp's 32 values into lane 0 through register shuffles. With `last` > 1 it stops
// at that offset: lanes 0 to last - 1 each hold the combine of the lanes congruent to them
// modulo `last` (a warp of 32 / last rows of `last` columns each).
template <class Op, class A>
__device__ __forceinline__ A warp_reduce(A v, int last = 1) {
#pragma unroll
  for (int offset = 16; offset >= last; offset >>= 1) v = Op::combine(v, shfl_down(0xffffffffu, v, offset));
  return v;
}

// Reduces a block's values into thread 0: shuffles inside each warp, then warp 0 combines the
// warps' results from shared memory.
template <class Op, int BLOCK, class A>
__device__ __forceinline__ A block_reduce(A v) {
  static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "whole warps, at most 32 of them");
  __shared__ A warp_results[BLOCK / 32];
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_reduce<Op>(v);
  if (lane == 0) warp_results[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < BLOCK / 32 ? warp_results[lane] : Op::identity();
    v = warp_reduce<Op>(v);
  }
  return v;
}

// atomicInc at device scope with release and acquire semantics: what this thread wrote before
// is visible to whoever takes a later number, and what those before it wrote is visible to it
// (and, after a barrier, to its block). __threadfence() then atomicInc orders the same through
// a full fence: each block holds its slot through it, and the kernel took 0.1-0.3 us longer
// with the caches cold (H100).
__device__ __forceinline__ unsigned ticket_inc(unsigned* word, unsigned last) {
  unsigned old;
  asm volatile("atom.acq_rel.gpu.global.inc.u32 %0, [%1], %2;" : "=r"(old) : "l"(word), "r"(last) : "memory");
  return old;
}

// How many blocks of `threads` threads of Kernel fit on one multiprocessor of the current
// device: a grid of that many per multiprocessor runs in one wave. (A fixed guess went wrong
// when a kernel needed more registers: one block in four waited for a second wave.) Cached
// per device, since it depends only on the kernel and the device.
template <auto Kernel>
int resident_blocks_per_sm(int threads) {
  constexpr int kDevices = 64;
  static std::atomic<int> cache[kDevices];  // 0: not asked yet
  int device = 0;
  cudaGetDevice(&device);
  int blocks = device < kDevices ? cache[device].load(std::memory_order_relaxed) : 0;
  if (blocks == 0) {
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, Kernel, threads, 0) != cudaSuccess) {
      cudaGetLastError();  // clear it; one block per multiprocessor still works
      blocks = 1;
    }
    blocks = std::max(blocks, 1);
    if (device < kDevices) cache[device].store(blocks, std::memory_order_relaxed);
  }
  return blocks;
}

// std::min is host-only in device code (without --expt-relaxed-constexpr).
__host__ __device__ __forceinline__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }


inline cudaError_t last_launch_error() { return cudaGetLastError(); }

// Launches a kernel that waits for the one before it on the stream with
// cudaGridDependencySynchronize(): on sm_90 and up (programmatic dependent launch) its launch
// and prologue overlap the first kernel's run; elsewhere it is an ordinary launch.
template <class... Params, class... Args>
cudaError_t launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, const ReduceArgs& a,
                             Args... args) {
  cudaLaunchAttribute overlap[1];
  overlap[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  overlap[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.stream = a.stream;
  config.attrs = overlap;
  config.numAttrs = a.cc_major >= 9 ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, args...);
}

}  // namespace treduce::cuda
