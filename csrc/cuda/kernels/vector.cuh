// auto: the full reduction torch_reduce ships as its default. It keeps what the ladder
// taught (many loads in flight per thread, a fixed grid of resident blocks, register
// accumulation, shuffles) and adds what reaches the memory limit on Hopper:
//  - 16-byte loads for every dtype. A storage offset only peels a head of fewer than 16
//    bytes (and the tail) into scalar loads, done off the critical path; the body stays
//    vectorised.
//  - kVecUnroll independent 16-byte loads issued before any of them is used.
//  - Accumulation in registers in the narrowest exact type: 1-byte inputs are counted four
//    at a time by __dp4a and int16 two at a time by __dp2a into 32-bit counters, widened
//    into the 64-bit sum before they could overflow; nothing is widened in memory.
//  - One block for small inputs (one launch). Otherwise as many blocks of 512 threads as
//    fit on the device at once (4 per multiprocessor at up to 32 registers a thread, 3 for
//    the 8-byte accumulators) each write a partial, and a second kernel adds the partials in
//    block order.
//  - Every kernel is launched with programmatic dependence: its launch overlaps the kernel
//    before it on the stream, and it waits for that kernel before reading anything. A chain
//    of calls (or a call after any kernel that allows it) saves most of a launch: float32
//    2^14 in a graph of calls, 2.23 -> 1.64 us.
// The data each thread and block reads is fixed by n, the alignment and the device, so
// the result is the same bits on every call and every graph replay.
// Still costs: the second kernel on mid sizes (benchmarks/NOTES.md says why a single kernel
// with a completion counter was not taken); blocks owning one tile fewer than others idle at
// the end on sizes just past a multiple of the grid.
#pragma once

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

#include "common.cuh"

namespace treduce::cuda {

inline constexpr int kVecBlock = 512;
inline constexpr int kVecUnroll = 4;
inline constexpr int64_t kVecTile = int64_t(kVecBlock) * kVecUnroll;
// Up to this many 16-byte vectors one block does it all, saving the second launch.
inline constexpr int64_t kSingleBlockVectors = 8192;  // 128 KiB
inline constexpr int kCombineBlock = 256;

// How a thread adds one 16-byte vector of In into a counter. In general: convert each
// element to the accumulator, add the vector's elements pairwise, add that to the counter.
// (Adding them one by one into the counter made float32 errors at 2^26 about four times
// larger: the counter's chain of additions is four times longer.) kFlushEvery: loop
// iterations after which the counters are added into the accumulator and reset (0: they are
// the accumulator).
// t[0] = sum of t[0..N), adding halves: t[j] += t[j + N/2], then quarters, ... (N a power
// of two). Recursion on N rather than a loop over the stride: every loop then has a constant
// trip count, is unrolled, and the array stays in registers.
template <int N, class Op, class A>
__device__ __forceinline__ void pairwise_in_place(A* t) {
  static_assert((N & (N - 1)) == 0, "a power of two");
  if constexpr (N > 1) {
#pragma unroll
    for (int j = 0; j < N / 2; ++j) t[j] = Op::combine(t[j], t[j + N / 2]);
    pairwise_in_place<N / 2, Op>(t);
  }
}

template <class In>
__device__ __forceinline__ void unpack(const uint4& v, In (&e)[16 / sizeof(In)]) {
  if constexpr (sizeof(In) == 1) {  // shifts: a byte-wise memcpy would go through local memory
    const unsigned words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const auto byte = static_cast<uint8_t>(words[j / 4] >> (8 * (j % 4)));
      memcpy(&e[j], &byte, 1);
    }
  } else {
    memcpy(e, &v, 16);
  }
}

// The elements of one vector in the accumulator type. bfloat16 to float is exact, a shift of
// the bits, so it is done on whole 32-bit words: one instruction per element, where
// extracting each half and then converting it took two.
template <class In, class Mid, class Acc>
__device__ __forceinline__ void convert_vector(const uint4& v, Acc (&t)[16 / sizeof(In)]) {
  if constexpr (std::is_same_v<In, __nv_bfloat16> && std::is_same_v<Mid, In> &&
                (std::is_same_v<Acc, float> || std::is_same_v<Acc, double>)) {
    const unsigned words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      t[2 * w] = Acc(__uint_as_float(words[w] << 16));  // the low half is element 2w
      t[2 * w + 1] = Acc(__uint_as_float(words[w] & 0xffff0000u));
    }
  } else {
    In e[16 / sizeof(In)];
    unpack(v, e);
#pragma unroll
    for (int j = 0; j < int(16 / sizeof(In)); ++j) t[j] = Load<In, Mid, Acc>::apply(e[j]);
  }
}

template <class In, class Mid, class Op>
struct VecAdd {
  using Acc = typename Op::acc_t;
  using Counter = Acc;
  static constexpr int kFlushEvery = 0;
  __device__ __forceinline__ static Counter init() { return Op::identity(); }
  // The vector's elements combined, pairwise.
  __device__ __forceinline__ static Counter reduce(const uint4& v) {
    Acc t[16 / sizeof(In)];
    convert_vector<In, Mid>(v, t);
    pairwise_in_place<16 / sizeof(In), Op>(t);
    return t[0];
  }
  __device__ __forceinline__ static void add(Counter& c, const uint4& v) { c = Op::combine(c, reduce(v)); }
};

// Packed-integer counting for 1- and 2-byte lanes: each 32-bit word of the vector goes
// through one dot-product instruction against ones, so a vector costs four instructions.
// __dp4a adds four bytes (signed or unsigned, as its operand types are), __dp2a_lo the two
// 16-bit halves. A counter takes one vector per iteration and is flushed every kFlushEvery.
template <class Lane, class C>
struct PackedAdd {
  using Counter = C;
  static constexpr int kFlushEvery = 64;
  static_assert(uint64_t(kFlushEvery + 1) * (16 / sizeof(Lane)) *
                        (uint64_t(std::numeric_limits<Lane>::max()) + (std::is_signed_v<Lane> ? 1 : 0)) <=
                    uint64_t(std::numeric_limits<C>::max()),
                "the counter cannot overflow between flushes");
  __device__ __forceinline__ static C init() { return 0; }
  __device__ __forceinline__ static C dot(unsigned word, C c) {
    if constexpr (sizeof(Lane) == 2) return __dp2a_lo(int(word), 0x0101, c);
    else return __dp4a(C(word), C(0x01010101), c);
  }
  __device__ __forceinline__ static void add(C& c, const uint4& v) {
    c = dot(v.x, c);
    c = dot(v.y, c);
    c = dot(v.z, c);
    c = dot(v.w, c);
  }
  __device__ __forceinline__ static C reduce(const uint4& v) {
    C c = 0;
    add(c, v);
    return c;
  }
};

template <> struct VecAdd<bool, bool, Sum<int64_t>> : PackedAdd<uint8_t, uint32_t> {};
template <> struct VecAdd<uint8_t, uint8_t, Sum<int64_t>> : PackedAdd<uint8_t, uint32_t> {};
template <> struct VecAdd<int8_t, int8_t, Sum<int64_t>> : PackedAdd<int8_t, int32_t> {};
template <> struct VecAdd<int16_t, int16_t, Sum<int64_t>> : PackedAdd<int16_t, int32_t> {};

// Where the 16-byte vectors are: `head` elements up to the first 16-byte boundary, then
// `vectors` whole vectors, then `tail` elements (head and tail under 16 bytes each).
struct VecSplit {
  int64_t head, vectors, tail;
};

template <class In>
__host__ __device__ __forceinline__ VecSplit split_at_vectors(const void* p, int64_t n) {
  constexpr int64_t per_vector = 16 / sizeof(In);
  const auto misalign = int64_t(reinterpret_cast<uintptr_t>(p) % 16);
  const int64_t head = misalign ? min64(n, (16 - misalign) / int64_t(sizeof(In))) : 0;
  const int64_t vectors = (n - head) / per_vector;
  return {head, vectors, n - head - vectors * per_vector};
}

// *p if `load`, else zero bits; issued where it is written. The single block constructs Ends
// before its loop: with a plain load the compiler moved it to its use after the loop, where
// it cost a round trip of its own (float32 2^14 one element off: +7%).
template <class T>
__device__ __forceinline__ T load_here(const T* p, bool load) {
  static_assert(sizeof(T) <= 8 && (sizeof(T) & (sizeof(T) - 1)) == 0, "1, 2, 4 or 8 bytes");
  using Bits = std::conditional_t<sizeof(T) == 8, unsigned long long, unsigned>;
  Bits bits = 0;
  if constexpr (sizeof(T) == 8) {
    asm volatile("{ .reg .pred q; setp.ne.b32 q, %2, 0; @q ld.global.nc.b64 %0, [%1]; }"
                 : "+l"(bits) : "l"(p), "r"(int(load)));
  } else if constexpr (sizeof(T) == 4) {
    asm volatile("{ .reg .pred q; setp.ne.b32 q, %2, 0; @q ld.global.nc.b32 %0, [%1]; }"
                 : "+r"(bits) : "l"(p), "r"(int(load)));
  } else if constexpr (sizeof(T) == 2) {
    asm volatile("{ .reg .pred q; setp.ne.b32 q, %2, 0; @q ld.global.nc.u16 %0, [%1]; }"
                 : "+r"(bits) : "l"(p), "r"(int(load)));
  } else {
    asm volatile("{ .reg .pred q; setp.ne.b32 q, %2, 0; @q ld.global.nc.u8 %0, [%1]; }"
                 : "+r"(bits) : "l"(p), "r"(int(load)));
  }
  T v;
  memcpy(&v, &bits, sizeof(T));  // the low bytes (little-endian)
  return v;
}

// The head and tail, fewer than one vector each: thread t takes head element t and tail
// element t where they exist. Loaded when constructed, added by sum().
template <class R>
struct Ends {
  using In = typename R::In;
  bool has_head, has_tail;
  In head, tail;
  __device__ __forceinline__ Ends(const In* x, VecSplit s, int64_t t)
      : has_head(t < s.head), has_tail(t < s.tail) {
    head = load_here(x + (has_head ? t : 0), has_head);
    tail = load_here(x + (has_tail ? s.head + s.vectors * (16 / int64_t(sizeof(In))) + t : 0), has_tail);
  }
  __device__ __forceinline__ typename R::Acc sum() const {
    auto v = R::Op::identity();
    if (has_head) v = R::Op::combine(v, R::convert(head));
    if (has_tail) v = R::Op::combine(v, R::convert(tail));
    return v;
  }
};

// The vectors come in tiles of kVecTile (32 KiB). Block b reads tiles b, b + gridDim,
// b + 2 gridDim, ...; inside a tile thread t reads vectors t, t + 512, t + 1024 and t + 1536,
// so each load instruction of the block covers 8 KiB in one piece and each block streams
// through memory in order.
// kSingle: the grid is one block (a constant tile stride, no modulo for the last tile).
template <class R, bool kSingle>
__device__ __forceinline__ typename R::Acc tile_sum(const typename R::In* x, VecSplit s) {
  using In = typename R::In;
  using Acc = typename R::Acc;
  using Op = typename R::Op;
  using Add = VecAdd<In, typename R::Mid, Op>;
  Acc acc = Op::identity();
  const uint4* v = reinterpret_cast<const uint4*>(x + s.head) + threadIdx.x;
  typename Add::Counter c[kVecUnroll];
#pragma unroll
  for (int u = 0; u < kVecUnroll; ++u) c[u] = Add::init();
  const int64_t full_tiles = s.vectors / kVecTile;
  int since_flush = 0;
  const int64_t first_tile = kSingle ? 0 : blockIdx.x, tile_stride = kSingle ? 1 : gridDim.x;
  for (int64_t tile = first_tile; tile < full_tiles; tile += tile_stride) {
    uint4 r[kVecUnroll];
#pragma unroll
    for (int u = 0; u < kVecUnroll; ++u) r[u] = __ldg(v + tile * kVecTile + u * kVecBlock);
#pragma unroll
    for (int u = 0; u < kVecUnroll; ++u) Add::add(c[u], r[u]);
    if constexpr (Add::kFlushEvery > 0) {
      if (++since_flush == Add::kFlushEvery) {
#pragma unroll
        for (int u = 0; u < kVecUnroll; ++u) {
          acc = Op::combine(acc, Acc(c[u]));
          c[u] = Add::init();
        }
        since_flush = 0;
      }
    }
  }
  if (kSingle || blockIdx.x == full_tiles % gridDim.x) {  // the last, partial tile
    // All loads first, then the adds: a load inside `if (in range) add(load)` waited for the
    // previous add, four round trips in a row (ncu, uint8 2^20 one element off: +1 us).
    const int64_t first = full_tiles * kVecTile + threadIdx.x;
    uint4 r[kVecUnroll];
    bool in_range[kVecUnroll];
#pragma unroll
    for (int u = 0; u < kVecUnroll; ++u) {
      in_range[u] = first + u * kVecBlock < s.vectors;
      r[u] = in_range[u] ? __ldg(v + full_tiles * kVecTile + u * kVecBlock) : uint4{};
    }
#pragma unroll
    for (int u = 0; u < kVecUnroll; ++u)
      if (in_range[u]) Add::add(c[u], r[u]);
  }
  Acc total[kVecUnroll];  // the counters, widened, added pairwise
#pragma unroll
  for (int u = 0; u < kVecUnroll; ++u) total[u] = Acc(c[u]);
  pairwise_in_place<kVecUnroll, Op>(total);
  return Op::combine(acc, total[0]);
}

// The result of one block or of the combine kernel. Out: its C type when the call's result
// is the accumulator type and no division is asked for (most calls), stored as it is; void:
// through the Sink (any dtype, mean's division). These kernels are one block and short, so
// the store's dtype switch and divisor test were a visible part of a call (0.1 us at 2^10).
template <class Out, class A>
__device__ __forceinline__ void store_result(const Sink& out, A v) {
  if constexpr (std::is_void_v<Out>) store(out, 0, v);
  else *static_cast<Out*>(out.ptr) = v;
}

// Small inputs: the whole call is this one block. Launched with programmatic dependence
// (launch_dependent): its launch overlaps the kernel before it on the stream, which may still
// be writing x, so it waits for that first; it lets the kernel after it launch at once (that
// one waits for this in turn), so a chain of calls overlaps their launches. The head and tail
// are loaded before the tiles (the compiler had moved plain loads to their use after the
// loop: a round trip of its own, uint8 2^20 one element off +19%); aligned inputs skip that
// code (its predicated-off loads and adds cost ~0.2 us at 2^14).
template <class R, class Out>
__global__ void __launch_bounds__(kVecBlock)
small_sum_kernel(const typename R::In* x, VecSplit s, Sink out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaTriggerProgrammaticLaunchCompletion();
  cudaGridDependencySynchronize();
#endif
  const bool ends = (s.head | s.tail) != 0;
  const Ends<R> head_tail(x, ends ? s : VecSplit{}, threadIdx.x);
  auto v = tile_sum<R, true>(x, s);
  if (ends) v = R::Op::combine(v, head_tail.sum());
  v = block_reduce<typename R::Op, kVecBlock>(v);
  if (threadIdx.x == 0) store_result<Out>(out, v);
}

// Larger inputs: each block's partial, combined by combine_partials_kernel. It lets that
// kernel launch only after its own wait, since the combine reads the head and tail of x
// before waiting, and so that a chain of calls never has more than one grid launched ahead
// (a grid that triggered first let chains of waiting grids crowd the device).
template <class R>
__global__ void __launch_bounds__(kVecBlock)
vector_sum_kernel(const typename R::In* x, VecSplit s, typename R::Acc* partials) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
  cudaTriggerProgrammaticLaunchCompletion();
#endif
  auto v = tile_sum<R, false>(x, s);
  v = block_reduce<typename R::Op, kVecBlock>(v);
  if (threadIdx.x == 0) partials[blockIdx.x] = v;
}

// Adds the block partials in block order (each thread a fixed stride of them, then a fixed
// tree), so the result does not depend on which block finished first; and the head and tail,
// loaded before waiting for the first kernel (x was complete before that kernel let this one
// launch).
template <class R, class Out>
__global__ void __launch_bounds__(kCombineBlock)
combine_partials_kernel(const typename R::Acc* partials, int n, const typename R::In* x,
                        VecSplit s, Sink out) {
  const bool ends = (s.head | s.tail) != 0;
  const Ends<R> head_tail(x, ends ? s : VecSplit{}, threadIdx.x);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaTriggerProgrammaticLaunchCompletion();  // the next call's kernel may launch; it waits for this one
  cudaGridDependencySynchronize();  // the first kernel has finished and its writes are visible
#endif
  auto v = R::Op::identity();
  for (int i = threadIdx.x; i < n; i += kCombineBlock) v = R::Op::combine(v, partials[i]);
  if (ends) v = R::Op::combine(v, head_tail.sum());
  v = block_reduce<typename R::Op, kCombineBlock>(v);
  if (threadIdx.x == 0) store_result<Out>(out, v);
}

template <class R>
cudaError_t run_vector(const ReduceArgs& a, size_t* workspace_bytes) {
  using In = typename R::In;
  using Acc = typename R::Acc;
  const VecSplit s = split_at_vectors<In>(a.in, a.n);
  const int64_t blocks =
      s.vectors <= kSingleBlockVectors
          ? 1
          : std::min<int64_t>(ceil_div(s.vectors, kVecTile),
                              int64_t(a.sm_count) * resident_blocks_per_sm<vector_sum_kernel<R>>(kVecBlock));
  if (workspace_bytes) {
    *workspace_bytes = blocks > 1 ? size_t(blocks) * sizeof(Acc) : 0;
    return cudaSuccess;
  }
  const auto* x = static_cast<const In*>(a.in);
  const Sink result{a.out, a.types.out, a.divisor};
  const bool plain = a.types.out == dtype_of<Acc>() && a.divisor == 0;  // see store_result
  if (blocks == 1) {
    return plain ? launch_dependent(small_sum_kernel<R, Acc>, dim3(1), dim3(kVecBlock), a, x, s, result)
                 : launch_dependent(small_sum_kernel<R, void>, dim3(1), dim3(kVecBlock), a, x, s, result);
  }
  auto* partials = static_cast<Acc*>(a.workspace);
  if (cudaError_t e = launch_dependent(vector_sum_kernel<R>, dim3(unsigned(blocks)), dim3(kVecBlock), a, x, s, partials);
      e != cudaSuccess)
    return e;
  const auto* done = static_cast<const Acc*>(partials);
  return plain ? launch_dependent(combine_partials_kernel<R, Acc>, dim3(1), dim3(kCombineBlock), a, done,
                                  int(blocks), x, s, result)
               : launch_dependent(combine_partials_kernel<R, void>, dim3(1), dim3(kCombineBlock), a, done,
                                  int(blocks), x, s, result);
}

}  // namespace treduce::cuda
