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
// and zeros: 63 binades of float32 data, 34 of float64, all of float16's. Every 2^H elements a
// lane the warp adds its lanes' hi and lo into the block's chunks (shared memory) and starts again.
// An element outside (rare for data of moderate range) is added into the chunks directly; the
// window moves when a thread's window is empty or after a few such misses, so it follows the
// data's scale. The 32 lanes of a warp keep one window and move together (to the warp's largest
// element), so a flush is two warp sums of integers and one lane's adds. float16 needs no
// window: every float16 value is a multiple of 2^-24 below 2^16, so 2^10 of them add exactly in
// a double whatever the data (kPlain: one add an element). Non-finite elements only set flags.
// A result of one block is rounded by that block; past one block, each writes its chunks, as a
// state (exact.h), into a slot of its own and exact_combine_kernel, the next launch, adds them
// and rounds once. Rounding takes exact.h's steps (the CPU's): the same bits on any device and
// grid. The result may be wider than the input (dtype=, float32 to float64 and the like): the
// input is read as it is and only the rounding takes the result's format.
#pragma once

#include <cfloat>

#include "../../exact.h"
#include "../tuning.h"
#include "common.cuh"

namespace treduce::cuda {

inline constexpr int kExactBlock = 256;
inline constexpr int kExactHeadroom = 10;               // H: 2^H elements per window between flushes
inline constexpr int kExactMissesBeforeMove = 4;
inline constexpr int64_t kExactMaxPerBlock = int64_t(1) << 26;  // keeps a block's chunk sums far below 2^63

// What the window needs of an element type: the type it is compared in (the element exactly),
// its precision and smallest normal exponent, and how many binades above the element that
// moved the window it keeps (more for the narrower types, whose windows are wider).
template <class T> struct ExactIn;
template <> struct ExactIn<double> {
  using Cmp = double;
  static constexpr int kPrecision = 53, kMinExponent = -1022, kSlack = 4;
  static constexpr bool kPlain = false;  // true: every element into one double, no window (float16)
  static constexpr ExactFormat kFormat = kExactDouble;
  __device__ static Cmp value(double v) { return v; }
};
template <> struct ExactIn<float> {
  using Cmp = float;
  static constexpr int kPrecision = 24, kMinExponent = -126, kSlack = 8;
  static constexpr bool kPlain = false;
  static constexpr ExactFormat kFormat = kExactFloat;
  __device__ static Cmp value(float v) { return v; }
};
template <> struct ExactIn<__half> : ExactIn<float> {
  static constexpr int kPrecision = 11, kMinExponent = -14;
  static constexpr bool kPlain = true;
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
// v * 2^e (|e| <= 2044) where the product is exact: two multiplications by normal powers of two
// (::ldexp's general case is a long call, and a flush takes two of them).
__device__ __forceinline__ double exact_scale(double v, int e) {
  const int h = e / 2;
  return v * exact_pow2(h) * exact_pow2(e - h);
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

// One lane's window (see the top of this file), kept the same in every lane of its warp: every
// call is made by all 32 lanes together (the loops of exact_partials_kernel pad a warp's last
// elements with -0.0, which adds nothing). The hot path is holds, add and one warp vote per loop
// iteration over all its elements (kUnroll vectors); flushes, misses and moves sit behind that
// one branch. (A test and a slow path per vector made float16's loop, 8 elements a vector, run
// at 55% of auto's speed; non-inlined slow paths, at 50% for every dtype.) Whether every element
// was -0.0 needs no test an element: lo (hi for kPlain) starts each flush at -0.0 and stays -0.0
// exactly while every element added was -0.0 (in round-to-nearest -0 + -0 is the only sum that
// gives -0; a zero x leaves a zero q, and x - q is then x itself).
template <class T>
struct ExactWindow {
  using In = ExactIn<T>;
  using Cmp = typename In::Cmp;
  static constexpr int kWindowAdds = 1 << kExactHeadroom;
  static constexpr unsigned kWarp = 0xffffffffu;

  double hi = In::kPlain ? -0.0 : 0.0, lo = -0.0, sigma = 1;
  double hi2 = -0.0;  // kPlain: a second sum, so that adds alternate between two chains
  int k = 0;          // sigma = 2^k
  Cmp upper = 0, lower = 0;  // the window holds lower <= |x| <= upper, and zeros; at first only zeros
  int adds = 0, misses = 0;
  unsigned flags = 0;
  bool not_neg_zero = false;  // an element other than -0.0 came

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
  __device__ static bool neg_zero(double v) { return v == 0 && signbit(v); }

  // The window's sums into the chunks and emptied, by the whole warp: two warp sums of integers
  // and one lane's adds, instead of 32 lanes contending for the same chunks. hi is a multiple of
  // 2^(k - 53) and lo of 2^(k + H - 106), both below 2^53 of those units, so 32 of them add
  // exactly in int64. kPlain: hi + hi2, finite multiples of 2^-24 below 2^26.
  __device__ void flush(unsigned long long* chunks) {
    const bool lane0 = (threadIdx.x & 31) == 0;
    if constexpr (In::kPlain) {
      not_neg_zero |= !(neg_zero(hi) && neg_zero(hi2));
      const double s = __dadd_rn(hi, hi2);  // exact
      const long long h = warp_sum(__double2ll_rn(exact_scale(s, 24)));
      if (lane0 && h != 0) exact_shared_add_int(chunks, h < 0 ? 0ull - uint64_t(h) : uint64_t(h), h < 0, 1074 - 24);
      hi = hi2 = -0.0;
    } else {
      not_neg_zero |= !neg_zero(lo);
      if (!__any_sync(kWarp, hi != 0 || lo != 0)) {  // an empty window (a first move, zeros)
        hi = 0;
        lo = -0.0;
        adds = 0;
        return;
      }
      const long long h = warp_sum(__double2ll_rn(exact_scale(hi, 53 - k)));
      const long long l = warp_sum(__double2ll_rn(exact_scale(lo, 106 - kExactHeadroom - k)));
      if (lane0) {
        if (h != 0) exact_shared_add_int(chunks, h < 0 ? 0ull - uint64_t(h) : uint64_t(h), h < 0, k - 53 + 1074);
        if (l != 0) {
          exact_shared_add_int(chunks, l < 0 ? 0ull - uint64_t(l) : uint64_t(l), l < 0,
                               k + kExactHeadroom - 106 + 1074);
        }
      }
      hi = 0;
      lo = -0.0;
    }
    adds = 0;
  }
  // A window with x of exponent e (a normal double's) at least kSlack binades below its top,
  // where the clamps allow: sigma's exponent.
  __device__ static int window_for(int e) {
    int w = e + kExactHeadroom + 1 + In::kSlack;
    // Rounded up to a multiple of kSlack, so that small changes of scale keep the window.
    w = (w + 1024 * In::kSlack) / In::kSlack * In::kSlack - 1024 * In::kSlack;
    if (w < e + kExactHeadroom + 1 + In::kSlack) w += In::kSlack;
    w = max(w, -1074 + 106 - kExactHeadroom);  // lo's grid no finer than double's subnormals
    // A float window's top a normal float (exact_pow2f): a top below 2^-126 missed every element.
    if constexpr (std::is_same_v<Cmp, float>) w = max(w, -126 + kExactHeadroom);
    return min(w, 1023);
  }
  __device__ void move_to(int w) {
    k = w;
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
  }
  // An element the window does not hold, after any move: into the chunks, or a flag.
  __device__ void miss(Cmp x, unsigned long long* chunks) {
    not_neg_zero = true;
    if (In::kPlain || !isfinite(x)) {  // (kPlain's misses are the non-finite elements)
      flags |= isnan(x) ? kExactFlagNaN : x > 0 ? kExactFlagPosInf : kExactFlagNegInf;
      return;
    }
    ++misses;
    exact_shared_add(chunks, double(x));
  }
  // V elements of which some lane's are not all held, by the whole warp. Where a lane's window
  // is empty or has missed often, the warp moves to a window for its largest element of these
  // (all lanes', so that no lane's elements fall off the top), then adds what it holds.
  template <int V>
  __device__ void take_slow(const Cmp (&x)[V], unsigned long long* chunks) {
    Cmp largest = 0;
    int missed = 0;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      if (isfinite(x[j])) largest = fmax(largest, fabs(x[j]));
      missed += !holds(x[j]) && isfinite(x[j]);
    }
    const bool empty = hi == 0 && lo == 0;
    if (__any_sync(kWarp, missed > 0 && (empty || misses + missed > kExactMissesBeforeMove))) {
      const int e = largest == Cmp(0) ? -2048 : int((exact_bits(double(largest)) >> 52) & 0x7ff) - 1023;
      const int most = __reduce_max_sync(kWarp, e);
      if (most > -2048) {
        const int w = window_for(most);
        if (w != k || upper == Cmp(0)) {  // (the same in every lane)
          flush(chunks);
          move_to(w);
        }
      }
      misses = 0;
    }
#pragma unroll
    for (int j = 0; j < V; ++j) {
      if (holds(x[j])) add(x[j]);
      else miss(x[j], chunks);
    }
  }
  // V elements of each lane: one vote whether the warp's windows hold them all, then adds
  // without a branch.
  template <int V>
  __device__ __forceinline__ void take(const Cmp (&x)[V], unsigned long long* chunks) {
    if (adds > kWindowAdds - V) flush(chunks);
    adds += V;
    if constexpr (In::kPlain) {
      bool all = true;
#pragma unroll
      for (int j = 0; j < V; ++j) all = all && fabs(x[j]) <= Cmp(65504);  // finite
      if (__all_sync(kWarp, all)) {
#pragma unroll
        for (int j = 0; j < V; ++j) {
          if (j % 2 == 0) hi = __dadd_rn(hi, double(x[j]));
          else hi2 = __dadd_rn(hi2, double(x[j]));
        }
      } else {
#pragma unroll
        for (int j = 0; j < V; ++j) {
          if (fabs(x[j]) <= Cmp(65504)) hi = __dadd_rn(hi, double(x[j]));
          else miss(x[j], chunks);
        }
      }
    } else {
      bool all = true;
#pragma unroll
      for (int j = 0; j < V; ++j) all = all && holds(x[j]);
      if (__all_sync(kWarp, all)) {
#pragma unroll
        for (int j = 0; j < V; ++j) add(x[j]);
      } else {
        take_slow(x, chunks);
      }
    }
  }
};

// Where the results go. With one block a result, the block finishes it. With G blocks, each
// writes its state, carried over its range, into its slot (slots[(j * G + g) * kExactSlotWords
// ...]): the kExactSlotChunks chunks from `base` up, base, and the five counts; a state whose
// range is wider (data over some 300 binades in one block) writes base -1 and its whole state
// into wide[(j * G + g) * kExactStateWords ...]. exact_combine_kernel, the next launch, adds a
// result's slots and finishes it. (Before: every block added its whole state into a zeroed
// accumulator with atomics and the last one, by a ticket, finished: a memset, two fences and
// two round trips to L2 on the way, some 6 us of every call past one block.) Finishing: the
// state into state[offset * kExactStateWords ...] when `state` is set, else the rounded sum into
// out[offset] (offset: the result's place, layout.h).
inline constexpr int kExactSlotChunks = 10;
inline constexpr int kExactSlotWords = 16;  // the chunks, base, the counts
static_assert(kExactSlotChunks + 1 + (kExactStateWords - kExactChunks) == kExactSlotWords);
struct ExactSink {
  int64_t* slots;  // G > 1: a slot a block
  int64_t* wide;
  int64_t* state;
  void* out;
};

__device__ __forceinline__ int64_t exact_out_offset(const Layout3& l, int64_t j) {
  return l.outer_out(j / l.inner) + l.inner_out(j % l.inner);
}

// exact_normalize (exact.h) for one thread over shared memory, the running chunk in a register
// and the next one loaded a step ahead: the carry chain is the only dependence. (Carries moved
// one chunk a pass by a whole warp took one pass per chunk a borrow crossed: a negative sum's
// borrow crosses the ~34 chunks above it, twice, some 10 us.) Chunks [lo, top): the canonical
// state carries all of them; a sum to round, only those from its lowest nonzero one to the one
// above its highest (exact_carry_range), which leaves the same value.
__device__ __forceinline__ void exact_normalize_serial(int64_t* c, int lo = 0, int top = kExactChunks - 1) {
  long long cur = c[lo];
#pragma unroll 4
  for (int k = lo; k < top; ++k) {
    const long long next = c[k + 1];
    const long long carry = cur >> 32;
    c[k] = cur - carry * (1ll << 32);
    cur = next + carry;
  }
  c[top] = cur;
}

// The nonzero chunks of s, chunk 32 j + lane as bit lane of nz[j] (the whole warp).
__device__ __forceinline__ void exact_nonzero(const int64_t* s, unsigned nz[3]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int j = 0; j < 3; ++j) nz[j] = __ballot_sync(0xffffffffu, lane + 32 * j < kExactChunks && s[lane + 32 * j] != 0);
}
__device__ __forceinline__ int exact_highest(const unsigned nz[3]) {
  return nz[2] ? 95 - __clz(nz[2]) : nz[1] ? 63 - __clz(nz[1]) : nz[0] ? 31 - __clz(nz[0]) : -1;
}
__device__ __forceinline__ int exact_lowest(const unsigned nz[3]) {
  return nz[0] ? __ffs(nz[0]) - 1 : nz[1] ? 31 + __ffs(nz[1]) : nz[2] ? 63 + __ffs(nz[2]) : -1;
}

// A sum's chunks carried over the range where it has any (lane 0; the whole warp calls): chunks
// from its lowest nonzero one up to the one above its highest into [0, 2^32), that one signed,
// the rest still 0. A sum of fewer than 2^31 chunk values below 2^63 carries at most 2^31 into
// the one above, so nothing moves past it. Returns the range's top, or -1 for no nonzero chunk.
__device__ __forceinline__ int exact_carry_range(int64_t* s, int* lo) {
  unsigned nz[3];
  exact_nonzero(s, nz);
  const int high = exact_highest(nz);
  *lo = exact_lowest(nz);
  if (high < 0) return -1;
  const int top = min(high + 1, kExactChunks - 1);
  if ((threadIdx.x & 31) == 0) exact_normalize_serial(s, *lo, top);
  __syncwarp();
  return top;
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
// exact_round (exact.h), over the chunks in use only: lane 0 carries, the warp searches.
template <class T>
__device__ void warp_exact_finish(int64_t* s, const ExactSink& sink, int64_t offset) {
  const int lane = threadIdx.x & 31;
  if (sink.state != nullptr) {  // canonical, as the CPU's: normalized chunks, counts as 0 or 1
    if (lane == 0) exact_normalize_serial(s);
    __syncwarp();
    int64_t* out = sink.state + offset * kExactStateWords;
    for (int w = lane; w < kExactStateWords; w += 32) out[w] = w < kExactChunks ? s[w] : s[w] != 0;
    return;
  }
  double result;
  if (!exact_special(s, &result)) {
    int lo;
    const int top = exact_carry_range(s, &lo);
    bool negative = false;
    if (top >= 0) {
      negative = s[top] < 0;  // (the same in every lane)
      if (negative) {  // the magnitude, carried again
        for (int k = lo + lane; k <= top; k += 32) s[k] = -s[k];
        __syncwarp();
        if (lane == 0) exact_normalize_serial(s, lo, top);
        __syncwarp();
      }
    }
    unsigned nz[3];
    exact_nonzero(s, nz);
    const int high = exact_highest(nz);
    if (high < 0) {
      result = exact_zero(s);
    } else {
      result = exact_round_magnitude(s, high, negative, ExactIn<T>::kFormat, [&nz](int k) {
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

// One warp writes its block's state s into the block's slot (see ExactSink).
__device__ void warp_exact_slot(int64_t* s, int64_t* slot, int64_t* wide) {
  const int lane = threadIdx.x & 31;
  int lo;
  const int top = exact_carry_range(s, &lo);
  const int base = top < 0 ? 0 : min(lo, kExactChunks - kExactSlotChunks);
  const bool is_wide = top - base >= kExactSlotChunks;
  if (lane < kExactSlotChunks) slot[lane] = is_wide ? 0 : s[base + lane];
  else if (lane == kExactSlotChunks) slot[lane] = is_wide ? -1 : base;
  else if (lane < kExactSlotWords) slot[lane] = s[kExactChunks + lane - kExactSlotChunks - 1];
  if (is_wide)
    for (int w = lane; w < kExactChunks; w += 32) wide[w] = s[w];
}

// Blocks a multiprocessor the registers allow: 4 (64 registers) for 4- and 8-byte inputs, 3 for
// 2-byte ones (whose loop over 32 elements a lane spilled at 64).
template <class T>
inline constexpr int kExactBlocksPerSm = sizeof(T) == 2 ? 3 : 4;

// grid (G, results up to 65535, looped): block (g, j) sums elements [g * per_block, ...) of
// result j's row. Out: the result's type (T, or a wider one that holds every T exactly: dtype=).
template <class T, class Out>
__global__ void __launch_bounds__(kExactBlock, kExactBlocksPerSm<T>)
exact_partials_kernel(const T* x, Layout3 l, int64_t per_block, ExactSink sink) {
  using W = ExactWindow<T>;
  using In = typename W::In;
  using Cmp = typename W::Cmp;
  constexpr int V = 16 / int(sizeof(T));
  constexpr int kUnroll = 4;
  __shared__ unsigned long long chunks[kExactStateWords];  // the chunks, then the counts
  const int64_t results = l.outer * l.inner;
  const int64_t G = gridDim.x;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();  // (launched with programmatic dependence, as every kernel of ours)
  cudaTriggerProgrammaticLaunchCompletion();
#endif
  for (int64_t j = blockIdx.y; j < results; j += gridDim.y) {
    for (int w = threadIdx.x; w < kExactStateWords; w += blockDim.x) chunks[w] = 0;
    __syncthreads();
    const T* row = x + l.outer_in(j / l.inner) + (j % l.inner) * l.in_inner;
    const int64_t r0 = blockIdx.x * per_block;
    const int64_t n = min64(l.reduced, r0 + per_block) - r0;
    W win;
    // Every loop runs the same iterations in all lanes of a warp (the window's calls are the
    // warp's): a lane past the end takes -0.0, which adds nothing.
    const int lane = threadIdx.x & 31;
    const int64_t first = threadIdx.x - lane;  // the warp's first thread
    const Cmp pad = Cmp(-0.0);
    if (l.in_reduced == 1) {
      const T* p = row + r0;
      const int64_t head = min64(n, int64_t((16 - reinterpret_cast<uintptr_t>(p) % 16) % 16) / int64_t(sizeof(T)));
      if (first < head) {
        const Cmp c[1] = {threadIdx.x < head ? In::value(p[threadIdx.x]) : pad};
        win.take(c, chunks);
      }
      const uint4* v = reinterpret_cast<const uint4*>(p + head);
      const int64_t vectors = (n - head) / V;
      int64_t k = first;  // the warp's vectors k + lane, k + lane + kExactBlock, ...
      for (; k + 31 + (kUnroll - 1) * kExactBlock < vectors; k += kUnroll * kExactBlock) {
        uint4 r[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) r[u] = __ldg(v + k + lane + u * kExactBlock);
        // All kUnroll vectors at once: one flush test, one window vote, one cold call site.
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
        Cmp c[V];
        if (k + lane < vectors) {
          const uint4 r = __ldg(v + k + lane);
          T e[V];
          memcpy(e, &r, 16);
#pragma unroll
          for (int i = 0; i < V; ++i) c[i] = In::value(e[i]);
        } else {
#pragma unroll
          for (int i = 0; i < V; ++i) c[i] = pad;
        }
        win.take(c, chunks);
      }
      for (int64_t i = head + vectors * V + first; i < n; i += kExactBlock) {
        const Cmp c[1] = {i + lane < n ? In::value(p[i + lane]) : pad};
        win.take(c, chunks);
      }
    } else {
      for (int64_t r = first; r < n; r += kExactBlock) {
        const Cmp c[1] = {r + lane < n ? In::value(row[(r0 + r + lane) * l.in_reduced]) : pad};
        win.take(c, chunks);
      }
    }
    win.flush(chunks);
    // Counts, a warp at a time (below 2^32: the low halves of their words).
    const unsigned flags = __reduce_or_sync(0xffffffffu, win.flags);
    const bool not_neg_zero = __any_sync(0xffffffffu, win.not_neg_zero);
    if (lane == 0) {
      if (flags & kExactFlagNaN) atomicAdd(reinterpret_cast<unsigned*>(chunks + kExactNaN), 1u);
      if (flags & kExactFlagPosInf) atomicAdd(reinterpret_cast<unsigned*>(chunks + kExactPosInf), 1u);
      if (flags & kExactFlagNegInf) atomicAdd(reinterpret_cast<unsigned*>(chunks + kExactNegInf), 1u);
      if (not_neg_zero) atomicAdd(reinterpret_cast<unsigned*>(chunks + kExactNotNegZero), 1u);
    }
    __syncthreads();
    if (threadIdx.x < 32) {
      int64_t* s = reinterpret_cast<int64_t*>(chunks);
      if (threadIdx.x == 0) s[kExactAny] = n > 0;
      __syncwarp();
      if (G == 1) warp_exact_finish<Out>(s, sink, exact_out_offset(l, j));
      else warp_exact_slot(s, sink.slots + (j * G + blockIdx.x) * kExactSlotWords, sink.wide + (j * G + blockIdx.x) * kExactStateWords);
    }
    __syncthreads();
  }
}

// The G slots of each result added and finished (see ExactSink): a block a result, each half
// warp adding a slot at a time into registers (the chunks of one base: a block's slots mostly
// share it), into its own row of shared words when the base changes and at the end; then the
// rows added and one warp finishing.
inline constexpr int kExactCombineThreads = 1024;
template <class Out>
__global__ void __launch_bounds__(kExactCombineThreads) exact_combine_kernel(const int64_t* slots, const int64_t* wide,
                                                                          int64_t G, Layout3 l, ExactSink sink) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();  // the partials kernel has finished and its slots are visible
  cudaTriggerProgrammaticLaunchCompletion();
#endif
  constexpr int kRows = kExactCombineThreads / 16;  // a half warp a row
  constexpr int kBatch = 8;
  __shared__ int64_t rows[kRows][kExactStateWords];
  const int half = threadIdx.x >> 4, i = threadIdx.x & 15;
  int64_t* row = rows[half];
  const int64_t results = l.outer * l.inner;
  for (int64_t j = blockIdx.x; j < results; j += gridDim.x) {
    for (int w = i; w < kExactStateWords; w += 16) row[w] = 0;
    __syncwarp();
    const int64_t* mine = slots + j * G * kExactSlotWords;
    int64_t sum = 0;
    int base = -1;  // the base `sum` is at (i < kExactSlotChunks), -1 before any
    // kBatch slots a half warp loaded before any is added: one round trip to L2 for up to
    // kRows * kBatch slots (a loop of one slot at a time, each waiting for its load, took ~6 us
    // at 512 slots).
    for (int64_t g0 = half & ~1; g0 < G; g0 += kRows * kBatch) {  // the same trips for both halves of a warp
      int64_t v[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int64_t g = g0 + (half & 1) + u * kRows;
        v[u] = g < G ? mine[g * kExactSlotWords + i] : 0;
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int64_t g = g0 + (half & 1) + u * kRows;
        const int b = int(__shfl_sync(0xffffffffu, v[u], kExactSlotChunks, 16));
        if (g < G) {
          if (b < 0) {  // a wide state
            const int64_t* w = wide + (j * G + g) * kExactStateWords;
            for (int k = i; k < kExactChunks; k += 16) row[k] += w[k];
            if (i > kExactSlotChunks) sum += v[u];  // its counts
          } else if (i < kExactSlotChunks) {
            if (b != base) {
              if (base >= 0) row[base + i] += sum;
              base = b;
              sum = 0;
            }
            sum += v[u];
          } else if (i > kExactSlotChunks) {
            sum += v[u];
          }
        }
        __syncwarp();  // a lane's words of the row may be another lane's next (another base)
      }
    }
    if (i < kExactSlotChunks) {
      if (base >= 0) row[base + i] += sum;
    } else if (i > kExactSlotChunks) {
      row[kExactChunks + i - kExactSlotChunks - 1] += sum;
    }
    __syncthreads();
    for (int w = threadIdx.x; w < kExactStateWords; w += kExactCombineThreads) {
      int64_t t = 0;
      for (int r = 0; r < kRows; ++r) t += rows[r][w];
      rows[0][w] = t;  // (row 0's word w is read by this thread only)
    }
    __syncthreads();
    if (threadIdx.x < 32) warp_exact_finish<Out>(rows[0], sink, exact_out_offset(l, j));
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

template <class T, class Out>
cudaError_t run_exact(const ReduceArgs& a, int64_t* state, size_t* workspace_bytes) {
  const Layout3& l = a.layout;
  const int64_t results = l.outer * l.inner;
  const int64_t resident = int64_t(a.sm_count) * resident_blocks_per_sm<exact_partials_kernel<T, Out>>(kExactBlock);
  // Enough blocks to fill the device, none with fewer than Tuning::exact_least_per_block
  // elements unless there is one a result, none with more than kExactMaxPerBlock.
  const int64_t least = std::max<int64_t>(64, tuning_for(a.cc_major).exact_least_per_block);
  int64_t G = std::max<int64_t>(1, std::min((resident + results - 1) / results, (l.reduced + least - 1) / least));
  G = std::max(G, (l.reduced + kExactMaxPerBlock - 1) / kExactMaxPerBlock);
  int64_t per_block = (l.reduced + G - 1) / G;
  per_block = (per_block + 63) / 64 * 64;  // whole 16-byte vectors for every block but the first's head
  G = std::max<int64_t>(1, (l.reduced + per_block - 1) / per_block);
  const size_t slot_bytes = G > 1 ? size_t(results * G) * kExactSlotWords * sizeof(int64_t) : 0;
  const size_t wide_bytes = G > 1 ? size_t(results * G) * kExactStateWords * sizeof(int64_t) : 0;
  if (workspace_bytes != nullptr) {
    *workspace_bytes = slot_bytes + wide_bytes;
    return cudaSuccess;
  }
  int64_t* slots = static_cast<int64_t*>(a.workspace);
  const ExactSink sink{slots, G > 1 ? slots + slot_bytes / sizeof(int64_t) : nullptr, state, a.out};
  const dim3 grid(unsigned(G), unsigned(std::min<int64_t>(results, 65535)));
  if (const cudaError_t e = launch_dependent(exact_partials_kernel<T, Out>, grid, dim3(kExactBlock), a,
                                             static_cast<const T*>(a.in), l, per_block, sink);
      e != cudaSuccess || G == 1)
    return e;
  return launch_dependent(exact_combine_kernel<Out>, dim3(unsigned(std::min<int64_t>(results, 65535))),
                          dim3(kExactCombineThreads), a, static_cast<const int64_t*>(slots),
                          static_cast<const int64_t*>(sink.wide), G, l, sink);
}

}  // namespace treduce::cuda
