// variant="exact" on CUDA: the exact sum (exact.h) at close to the speed of a plain sum.
//
// A superaccumulator per element would cost dozens of integer instructions an element. Instead
// each thread keeps a window: two doubles, hi and lo, that take the elements of a range of
// binades without any rounding, and a shared-memory superaccumulator (exact.h's chunks) per
// block takes everything else. With sigma = 2^k and an element x, |x| <= 2^(k - H):
//   q = (sigma + x) - sigma   is x rounded to a multiple of 2^(k - 53), |q| <= 2^(k - H),
//   r = x - q                 is exact, |r| <= 2^(k - 53), a multiple of x's ulp
// (Rump, Ogita and Oishi's ExtractScalar). 2^H such q add into hi exactly (every partial sum
// is a multiple of 2^(k - 53) of magnitude at most 2^k), and the r add into lo exactly as long
// as each x's ulp is at least 2^(k + H - 106) (every partial sum is then a multiple of that of
// magnitude at most 2^(k + H - 53)). So the window holds the elements with
//   2^(k + H - 107 + p) <= |x| <= 2^(k - H)      (p: the element type's precision)
// and zeros: 63 binades of float32 data, 34 of float64, all of float16's. Every 2^H elements
// the thread adds hi and lo into the block's chunks (shared-memory atomics) and starts again.
// An element outside (rare for data of moderate range) is added into the chunks directly; the
// window moves to it when the thread's window is empty or after a few such misses, so it
// follows the data's scale. Non-finite elements only set flags.
// Each block then adds its chunks, as a state (exact.h), into its result's accumulator with
// integer atomics, and the last block rounds once, with exact.h's steps (the CPU's): the same
// bits on any device and grid.
#pragma once

#include <cfloat>

#include "../../exact.h"
#include "common.cuh"

namespace treduce::cuda {

inline constexpr int kExactBlock = 256;
inline constexpr int kExactHeadroom = 10;               // H: 2^H elements per window between flushes
inline constexpr int kExactMissesBeforeMove = 4;
inline constexpr int64_t kExactMinPerBlock = 8192;      // elements, below which fewer blocks share a result
inline constexpr int64_t kExactMaxPerBlock = int64_t(1) << 26;  // keeps a block's chunk sums far below 2^63

// What the window needs of an element type: the type it is compared in (the element exactly),
// its precision and smallest normal exponent, and how many binades above the element that
// moved the window it keeps (more for the narrower types, whose windows are wider).
template <class T> struct ExactIn;
template <> struct ExactIn<double> {
  using Cmp = double;
  using Bits = unsigned long long;
  static constexpr int kPrecision = 53, kMinExponent = -1022, kSlack = 4;
  static constexpr ExactFormat kFormat = kExactDouble;
  __device__ static Cmp value(double v) { return v; }
  __device__ static Bits bits(Cmp v) { return static_cast<Bits>(__double_as_longlong(v)); }
};
template <> struct ExactIn<float> {
  using Cmp = float;
  using Bits = unsigned;
  static constexpr int kPrecision = 24, kMinExponent = -126, kSlack = 8;
  static constexpr ExactFormat kFormat = kExactFloat;
  __device__ static Cmp value(float v) { return v; }
  __device__ static Bits bits(Cmp v) { return __float_as_uint(v); }
};
template <> struct ExactIn<__half> : ExactIn<float> {
  static constexpr int kPrecision = 11, kMinExponent = -14;
  static constexpr ExactFormat kFormat = kExactHalf;
  __device__ static Cmp value(__half v) { return __half2float(v); }
};
template <> struct ExactIn<__nv_bfloat16> : ExactIn<float> {
  static constexpr int kPrecision = 8;
  static constexpr ExactFormat kFormat = kExactBFloat16;
  __device__ static Cmp value(__nv_bfloat16 v) { return __bfloat162float(v); }
};

__device__ __forceinline__ double exact_pow2(int e) {  // e a normal double exponent
  return __longlong_as_double(static_cast<long long>(uint64_t(e + 1023) << 52));
}
__device__ __forceinline__ float exact_pow2f(int e) {  // e a normal float exponent
  return __uint_as_float(unsigned(e + 127) << 23);
}

// Adds v (|v| < 2^32) to a 64-bit word of shared memory with 32-bit atomics: the low half, then
// the carry out of it (from the value it replaced) and v's sign into the high half. Sm_90 has
// no 64-bit shared-memory atomic add: atomicAdd on one is a compare-and-swap loop, and 256
// threads flushing into the same chunks spun in it for some 15 us.
__device__ __forceinline__ void shared_add64(unsigned long long* p, int64_t v) {
  unsigned* half = reinterpret_cast<unsigned*>(p);  // little-endian: low half first
  const unsigned lo = static_cast<unsigned>(v);
  const unsigned old = atomicAdd(half, lo);
  const unsigned high = (v < 0 ? 0xffffffffu : 0u) + (old + lo < old ? 1u : 0u);
  if (high != 0) atomicAdd(half + 1, high);
}

// Adds a finite double into a block's chunks.
__device__ __forceinline__ void exact_shared_add(unsigned long long* chunks, double v) {
  int64_t piece[3];
  const int k = exact_pieces(exact_bits(v), piece);
#pragma unroll
  for (int j = 0; j < 3; ++j)
    if (piece[j] != 0) shared_add64(chunks + k + j, piece[j]);
}

// Adds +-u * 2^(b - 1074) (u < 2^63) into a block's chunks.
__device__ __forceinline__ void exact_shared_add_int(unsigned long long* chunks, uint64_t u, bool negative, int b) {
  int64_t piece[3];
  const int k = exact_int_pieces(u, negative, b, piece);
#pragma unroll
  for (int j = 0; j < 3; ++j)
    if (piece[j] != 0) shared_add64(chunks + k + j, piece[j]);
}

__device__ __forceinline__ long long warp_sum(long long v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

enum : unsigned { kExactFlagNaN = 1, kExactFlagPosInf = 2, kExactFlagNegInf = 4 };

// One thread's window (see the top of this file). The hot path is holds, add and one test per
// loop iteration over all its elements (kUnroll vectors); flushes, misses and moves sit behind
// that one branch. (A test and a slow path per vector made float16's loop, 8 elements a vector,
// run at 55% of auto's speed; non-inlined slow paths, at 50% for every dtype.)
template <class T>
struct ExactWindow {
  using In = ExactIn<T>;
  using Cmp = typename In::Cmp;
  static constexpr int kWindowAdds = 1 << kExactHeadroom;

  double hi = 0, lo = 0, sigma = 1;
  Cmp upper = 0, lower = 0;  // the window holds lower <= |x| <= upper, and zeros; at first only zeros
  int adds = 0, misses = 0;
  unsigned flags = 0;
  typename In::Bits not_neg_zero = 0;  // nonzero once an element other than -0.0 came

  __device__ __forceinline__ bool holds(Cmp x) const {
    const Cmp a = fabs(x);
    return a <= upper && (a >= lower || x == Cmp(0));
  }
  __device__ __forceinline__ void add(Cmp x) {
    const double v = x;  // exact
    const double q = __dsub_rn(__dadd_rn(sigma, v), sigma);
    hi = __dadd_rn(hi, q);
    lo = __dadd_rn(lo, __dsub_rn(v, q));
  }
  __device__ __forceinline__ void note(Cmp x) { not_neg_zero |= In::bits(x) ^ In::bits(Cmp(-0.0)); }

  // hi and lo into the chunks, the window emptied. When the whole warp is here with one window
  // (the usual case: the lanes read data of one scale), as two warp sums of integers: hi is a
  // multiple of 2^(k - 53) and lo of 2^(k + H - 106), both below 2^53 of those units, so 32 of
  // them add exactly in int64, and one lane adds them, instead of 32 lanes contending for the
  // same chunks.
  __device__ void flush(unsigned long long* chunks) {
    const bool whole_warp = __activemask() == 0xffffffffu;
    if (whole_warp && __all_sync(0xffffffffu, sigma == __shfl_sync(0xffffffffu, sigma, 0))) {
      const int k = int((exact_bits(sigma) >> 52) & 0x7ff) - 1023;
      const long long h = warp_sum(__double2ll_rn(::ldexp(hi, 53 - k)));
      const long long l = warp_sum(__double2ll_rn(::ldexp(lo, 106 - kExactHeadroom - k)));
      if ((threadIdx.x & 31) == 0) {
        if (h != 0) exact_shared_add_int(chunks, h < 0 ? 0ull - uint64_t(h) : uint64_t(h), h < 0, k - 53 + 1074);
        if (l != 0) {
          exact_shared_add_int(chunks, l < 0 ? 0ull - uint64_t(l) : uint64_t(l), l < 0,
                               k + kExactHeadroom - 106 + 1074);
        }
      }
    } else {
      if (hi != 0) exact_shared_add(chunks, hi);
      if (lo != 0) exact_shared_add(chunks, lo);
    }
    hi = lo = 0;
    adds = 0;
  }
  // Puts x (finite, nonzero) at least kSlack binades below the window's top, where the clamps
  // allow.
  __device__ void move_to(Cmp x) {
    const int e = int((exact_bits(double(x)) >> 52) & 0x7ff) - 1023;
    int k = e + kExactHeadroom + 1 + In::kSlack;
    // Rounded up to a multiple of kSlack, so that the lanes of a warp, whose first elements
    // differ in size, mostly pick the same window and flush together (see flush).
    k = (k + 1024 * In::kSlack) / In::kSlack * In::kSlack - 1024 * In::kSlack;
    if (k < e + kExactHeadroom + 1 + In::kSlack) k += In::kSlack;
    k = max(k, -1074 + 106 - kExactHeadroom);  // lo's grid no finer than double's subnormals
    k = min(k, 1023);
    sigma = exact_pow2(k);
    const int top = k - kExactHeadroom;
    const int low = k + kExactHeadroom - 107 + In::kPrecision;
    if constexpr (std::is_same_v<Cmp, double>) {
      upper = exact_pow2(top);
      lower = low <= In::kMinExponent ? 0.0 : exact_pow2(low);
    } else {
      upper = top > 127 ? FLT_MAX : exact_pow2f(top);
      lower = low <= In::kMinExponent ? 0.0f : exact_pow2f(low);
    }
    misses = 0;
  }
  // An element the window does not hold.
  __device__ void miss(Cmp x, unsigned long long* chunks) {
    if (!isfinite(x)) {
      flags |= isnan(x) ? kExactFlagNaN : x > 0 ? kExactFlagPosInf : kExactFlagNegInf;
      return;
    }
    if (x == Cmp(0)) return;
    if ((hi == 0 && lo == 0) || ++misses > kExactMissesBeforeMove) {
      flush(chunks);
      move_to(x);
      if (holds(x)) {
        add(x);
        return;
      }
    }
    exact_shared_add(chunks, double(x));
  }

  // One element, from any path.
  __device__ __forceinline__ void take(Cmp x, unsigned long long* chunks);
  // V elements: one test whether all fit, then adds without a branch.
  template <int V>
  __device__ __forceinline__ void take(const Cmp (&x)[V], unsigned long long* chunks);
};

template <class T>
__device__ __forceinline__ void ExactWindow<T>::take(Cmp x, unsigned long long* chunks) {
  if (adds >= kWindowAdds) flush(chunks);
  ++adds;
  note(x);
  if (holds(x)) add(x);
  else miss(x, chunks);
}

template <class T>
template <int V>
__device__ __forceinline__ void ExactWindow<T>::take(const Cmp (&x)[V], unsigned long long* chunks) {
  if (adds > kWindowAdds - V) flush(chunks);
  adds += V;
  bool all = true;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    note(x[j]);
    all = all && holds(x[j]);
  }
  if (all) {
#pragma unroll
    for (int j = 0; j < V; ++j) add(x[j]);
  } else {  // an element outside the window: element by element
#pragma unroll
    for (int j = 0; j < V; ++j) {
      if (holds(x[j])) add(x[j]);
      else miss(x[j], chunks);
    }
  }
}

// Where the results go. With one block a result, the block finishes it; with G blocks, each
// adds its state (normalized: its words below 2^32, so up to 2^31 of them add without overflow)
// into the result's accumulator, accumulators[j * kExactAccWords ...], by integer atomics
// (exact, so their order does not matter), and the last of them (a ticket, the word after the
// state) finishes the result. Finishing: the state into state[offset * kExactStateWords ...]
// when `state` is set, else the rounded sum into out[offset] (offset: the result's place,
// layout.h).
inline constexpr int kExactAccWords = kExactStateWords + 1;
struct ExactSink {
  unsigned long long* accumulators;  // zeroed before the launch
  int64_t* state;
  void* out;
  DType dtype;
};

__device__ __forceinline__ int64_t exact_out_offset(const Layout3& l, int64_t j) {
  return l.outer_out(j / l.inner) + l.inner_out(j % l.inner);
}

// exact_normalize (exact.h) for one thread over shared memory, the running chunk in a register
// and the next one loaded a step ahead: the carry chain is the only dependence. (Carries moved
// one chunk a pass by a whole warp took one pass per chunk a borrow crossed: a negative sum's
// borrow crosses the ~34 chunks above it, twice, some 10 us.)
__device__ __forceinline__ void exact_normalize_serial(int64_t* c) {
  long long cur = c[0];
#pragma unroll 4
  for (int k = 0; k + 1 < kExactChunks; ++k) {
    const long long next = c[k + 1];
    const long long carry = cur >> 32;
    c[k] = cur - carry * (1ll << 32);
    cur = next + carry;
  }
  c[kExactChunks - 1] = cur;
}

// The NaN every device writes (a quiet NaN, sign clear: the CPU's), not each conversion's own.
template <class T>
__device__ __forceinline__ T exact_cast(double v) {
  if (v != v) {
    if constexpr (std::is_same_v<T, __half>) return __ushort_as_half(0x7e00);
    else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __ushort_as_bfloat16(0x7fc0);
    else if constexpr (std::is_same_v<T, float>) return __uint_as_float(0x7fc00000u);
  }
  return element_cast<T>(v);
}

// One warp finishes a summed state s (shared memory, all lanes of the warp calling): its
// canonical form into sink.state, or its rounded sum into sink.out, at `offset`. The steps of
// exact_round (exact.h): lane 0 carries, the warp negates and searches.
template <class T>
__device__ void warp_exact_finish(int64_t* s, const ExactSink& sink, int64_t offset) {
  const int lane = threadIdx.x & 31;
  if (lane == 0) exact_normalize_serial(s);
  __syncwarp();
  if (sink.state != nullptr) {  // canonical, as the CPU's: normalized chunks, counts as 0 or 1
    int64_t* out = sink.state + offset * kExactStateWords;
    for (int w = lane; w < kExactStateWords; w += 32) out[w] = w < kExactChunks ? s[w] : s[w] != 0;
    return;
  }
  double result;
  if (!exact_special(s, &result)) {
    const bool negative = s[kExactChunks - 1] < 0;
    if (negative) {  // the magnitude, normalized again
      for (int k = lane; k < kExactChunks; k += 32) s[k] = -s[k];
      __syncwarp();
      if (lane == 0) exact_normalize_serial(s);
      __syncwarp();
    }
    unsigned nz[3];
#pragma unroll
    for (int j = 0; j < 3; ++j) nz[j] = __ballot_sync(0xffffffffu, lane + 32 * j < kExactChunks && s[lane + 32 * j] != 0);
    const int top = nz[2] ? 95 - __clz(nz[2]) : nz[1] ? 63 - __clz(nz[1]) : nz[0] ? 31 - __clz(nz[0]) : -1;
    if (top < 0) {
      result = exact_zero(s);
    } else {
      result = exact_round_magnitude(s, top, negative, ExactIn<T>::kFormat, [&nz](int k) {
        for (int j = 0; j < 3; ++j) {
          const int below = k - 32 * j;  // chunks of word j below k
          const unsigned mask = below >= 32 ? 0xffffffffu : below <= 0 ? 0u : (1u << below) - 1;
          if (nz[j] & mask) return true;
        }
        return false;
      });
    }
  }
  if (lane == 0) static_cast<T*>(sink.out)[offset] = exact_cast<T>(result);
}

// One warp adds its block's state s into a result's accumulator; the warp of the last block
// to do so finishes the result.
template <class T>
__device__ void warp_exact_publish(int64_t* s, unsigned long long* acc, int64_t G, const ExactSink& sink,
                                   int64_t offset) {
  const int lane = threadIdx.x & 31;
  if (lane == 0) exact_normalize_serial(s);
  __syncwarp();
  for (int w = lane; w < kExactStateWords; w += 32) {
    const int64_t v = w < kExactChunks ? s[w] : s[w] != 0;
    if (v != 0) atomicAdd(acc + w, static_cast<unsigned long long>(v));
  }
  __threadfence();
  __syncwarp();
  unsigned long long ticket = 0;
  if (lane == 0) ticket = atomicAdd(acc + kExactStateWords, 1ull);
  if (__shfl_sync(0xffffffffu, ticket, 0) != static_cast<unsigned long long>(G - 1)) return;
  __threadfence();
  for (int w = lane; w < kExactStateWords; w += 32) s[w] = static_cast<int64_t>(__ldcg(acc + w));
  __syncwarp();
  warp_exact_finish<T>(s, sink, offset);
}

// grid (G, results up to 65535, looped): block (g, j) sums elements [g * per_block, ...) of
// result j's row.
template <class T>
__global__ void __launch_bounds__(kExactBlock) exact_partials_kernel(const T* x, Layout3 l, int64_t per_block,
                                                                     ExactSink sink) {
  using W = ExactWindow<T>;
  using In = typename W::In;
  using Cmp = typename W::Cmp;
  constexpr int V = 16 / int(sizeof(T));
  constexpr int kUnroll = 4;
  __shared__ unsigned long long chunks[kExactStateWords];  // the chunks, then the counts
  const int64_t results = l.outer * l.inner;
  const int64_t G = gridDim.x;
  for (int64_t j = blockIdx.y; j < results; j += gridDim.y) {
    for (int w = threadIdx.x; w < kExactStateWords; w += blockDim.x) chunks[w] = 0;
    __syncthreads();
    const T* row = x + l.outer_in(j / l.inner) + (j % l.inner) * l.in_inner;
    const int64_t r0 = blockIdx.x * per_block;
    const int64_t n = min64(l.reduced, r0 + per_block) - r0;
    W win;
    if (l.in_reduced == 1) {
      const T* p = row + r0;
      const int64_t head = min64(n, int64_t((16 - reinterpret_cast<uintptr_t>(p) % 16) % 16) / int64_t(sizeof(T)));
      if (threadIdx.x < head) win.take(In::value(p[threadIdx.x]), chunks);
      const uint4* v = reinterpret_cast<const uint4*>(p + head);
      const int64_t vectors = (n - head) / V;
      int64_t k = threadIdx.x;
      for (; k + (kUnroll - 1) * kExactBlock < vectors; k += kUnroll * kExactBlock) {
        uint4 r[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) r[u] = __ldg(v + k + u * kExactBlock);
        // All kUnroll vectors at once: one flush test, one window test, one cold call site.
        Cmp c[kUnroll * V];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          T e[V];
          memcpy(e, &r[u], 16);
#pragma unroll
          for (int i = 0; i < V; ++i) c[u * V + i] = In::value(e[i]);
        }
        win.take(c, chunks);
      }
      for (; k < vectors; k += kExactBlock) {
        const uint4 r = __ldg(v + k);
        T e[V];
        memcpy(e, &r, 16);
        Cmp c[V];
#pragma unroll
        for (int i = 0; i < V; ++i) c[i] = In::value(e[i]);
        win.take(c, chunks);
      }
      for (int64_t i = head + vectors * V + threadIdx.x; i < n; i += kExactBlock) win.take(In::value(p[i]), chunks);
    } else {
      for (int64_t r = threadIdx.x; r < n; r += kExactBlock) win.take(In::value(row[(r0 + r) * l.in_reduced]), chunks);
    }
    win.flush(chunks);
    // Counts of threads (below 2^32: the low halves of their words).
    if (win.flags != 0) {
      if (win.flags & kExactFlagNaN) atomicAdd(reinterpret_cast<unsigned*>(chunks + kExactNaN), 1u);
      if (win.flags & kExactFlagPosInf) atomicAdd(reinterpret_cast<unsigned*>(chunks + kExactPosInf), 1u);
      if (win.flags & kExactFlagNegInf) atomicAdd(reinterpret_cast<unsigned*>(chunks + kExactNegInf), 1u);
    }
    if (win.not_neg_zero != 0) atomicAdd(reinterpret_cast<unsigned*>(chunks + kExactNotNegZero), 1u);
    __syncthreads();
    if (threadIdx.x < 32) {
      int64_t* s = reinterpret_cast<int64_t*>(chunks);
      if (threadIdx.x == 0) s[kExactAny] = n > 0;
      __syncwarp();
      if (G == 1) warp_exact_finish<T>(s, sink, exact_out_offset(l, j));
      else warp_exact_publish<T>(s, sink.accumulators + j * kExactAccWords, G, sink, exact_out_offset(l, j));
    }
    __syncthreads();
  }
}

// _exact_round: one thread a result.
template <class T>
__global__ void exact_round_kernel(const int64_t* state, int64_t n, T* out) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < n; j += int64_t(gridDim.x) * blockDim.x) {
    int64_t w[kExactStateWords];
    for (int i = 0; i < kExactStateWords; ++i) w[i] = state[j * kExactStateWords + i];
    out[j] = exact_cast<T>(exact_round(w, ExactIn<T>::kFormat));
  }
}

template <class T>
cudaError_t run_exact(const ReduceArgs& a, int64_t* state, size_t* workspace_bytes) {
  const Layout3& l = a.layout;
  const int64_t results = l.outer * l.inner;
  const int64_t resident = int64_t(a.sm_count) * resident_blocks_per_sm<exact_partials_kernel<T>>(kExactBlock);
  // Enough blocks to fill the device, none with fewer than kExactMinPerBlock elements unless
  // there is one a result, none with more than kExactMaxPerBlock.
  int64_t G = std::max<int64_t>(1, std::min((resident + results - 1) / results,
                                            (l.reduced + kExactMinPerBlock - 1) / kExactMinPerBlock));
  G = std::max(G, (l.reduced + kExactMaxPerBlock - 1) / kExactMaxPerBlock);
  int64_t per_block = (l.reduced + G - 1) / G;
  per_block = (per_block + 63) / 64 * 64;  // whole 16-byte vectors for every block but the first's head
  G = std::max<int64_t>(1, (l.reduced + per_block - 1) / per_block);
  const size_t acc_bytes = G > 1 ? size_t(results) * kExactAccWords * sizeof(int64_t) : 0;
  if (workspace_bytes != nullptr) {
    *workspace_bytes = acc_bytes;
    return cudaSuccess;
  }
  const ExactSink sink{static_cast<unsigned long long*>(a.workspace), state, a.out, a.types.out};
  if (acc_bytes > 0) {
    if (const cudaError_t e = cudaMemsetAsync(a.workspace, 0, acc_bytes, a.stream); e != cudaSuccess) return e;
  }
  const dim3 grid(unsigned(G), unsigned(std::min<int64_t>(results, 65535)));
  exact_partials_kernel<T><<<grid, kExactBlock, 0, a.stream>>>(static_cast<const T*>(a.in), l, per_block, sink);
  return last_launch_error();
}

}  // namespace treduce::cuda
