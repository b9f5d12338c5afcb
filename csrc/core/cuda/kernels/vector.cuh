// auto: the full reduction torch_reduce ships as its default. It keeps what the ladder
// taught (many loads in flight per thread, a fixed grid of resident blocks, register
// accumulation, shuffles) and adds what reaches the memory limit on Hopper:
//  - 16-byte loads for every dtype. A storage offset only peels a head (to the next
//    128-byte boundary) and a tail, one load a lane of one warp (the head as 4-byte words
//    for 1- and 2-byte types), in the block that also takes the last, partial tile; the
//    body stays vectorised.
//  - kVecUnroll independent 16-byte loads issued before any of them is used.
//  - Accumulation in registers in the narrowest exact type: 1-byte inputs are counted four
//    at a time by __dp4a and int16 two at a time by __dp2a into 32-bit counters, widened
//    into the 64-bit sum before they could overflow; nothing is widened in memory.
//  - One block for small inputs (one launch), every thread issuing all its loads (up to 16
//    vectors) before any add. Otherwise as many blocks of 512 threads as fit on the device
//    at once (4 per multiprocessor at up to 32 registers a thread) each write a partial, and
//    the partials are added in block order: by the last block to finish in eager calls, by a
//    second kernel in CUDA graphs.
//  - Every kernel is launched with programmatic dependence: its launch overlaps the kernel
//    before it on the stream, and it waits for that kernel before reading anything. A chain
//    of calls (or a call after any kernel that allows it) saves most of a launch: float32
//    2^14 in a graph of calls, 2.23 -> 1.64 us.
// The data each thread and block reads is fixed by n, the alignment and the device, so
// the result is the same bits on every call and every graph replay.
// Still costs: blocks owning one tile fewer than others idle at the end on sizes just past a
// multiple of the grid.
#pragma once

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

#include "common.cuh"

namespace treduce::cuda {

// kVecBlock, kVecUnroll, kVecTile, kSingleBlockVectors, kVecAlign: plan.h (the planner sizes grids
// by them).
inline constexpr int kSingleBlockTiles = int(kSingleBlockVectors / kVecTile);
static_assert(kSingleBlockVectors % kVecTile == 0, "whole tiles");
// The combine kernel is one warp: each lane loads up to kCombineLoads partials at once (one
// round trip for up to 1024 blocks), and a warp needs no shared memory or barrier to reduce.
inline constexpr int kCombineLoads = 32;
// The vectors start at a kVecAlign = 128-byte boundary: a warp's 512-byte load is then four
// whole cache lines. From a 16-byte boundary it touched five, and float64/int64 2^28 one element
// off were 5% slower than aligned (from a 32- or 64-byte boundary, uint8 and bfloat16 2^28:
// +0.7%, +2.5%; from 128: +0.2%, +0.3%).
static_assert(kVecAlign == 128, "see above");

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

// The elements of one vector in the operator's value type. bfloat16 to float is exact, a
// shift of the bits, so it is done on whole 32-bit words: one instruction per element, where
// extracting each half and then converting it took two.
template <class In, class Mid, class Value>
__device__ __forceinline__ void convert_vector(const uint4& v, Value (&t)[16 / sizeof(In)]) {
  if constexpr (std::is_same_v<In, __nv_bfloat16> && std::is_same_v<Mid, In> &&
                (std::is_same_v<Value, float> || std::is_same_v<Value, double>)) {
    const unsigned words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      t[2 * w] = Value(__uint_as_float(words[w] << 16));  // the low half is element 2w
      t[2 * w + 1] = Value(__uint_as_float(words[w] & 0xffff0000u));
    }
  } else {
    In e[16 / sizeof(In)];
    unpack(v, e);
#pragma unroll
    for (int j = 0; j < int(16 / sizeof(In)); ++j) t[j] = Load<In, Mid, Value>::apply(e[j]);
  }
}

// N elements' values into one accumulator: the operator's own form, or each entered and the
// N combined pairwise.
template <class Op, int N>
__device__ __forceinline__ typename Op::acc_t reduce_values(const typename Op::value_t (&t)[N]) {
  if constexpr (HasReduceValues<Op>::value) {
    return Op::template reduce_values<N>(t);
  } else {
    typename Op::acc_t a[N];
#pragma unroll
    for (int j = 0; j < N; ++j) a[j] = Op::enter(t[j]);
    pairwise_in_place<N, Op>(a);
    return a[0];
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
    typename Op::value_t t[16 / sizeof(In)];
    convert_vector<In, Mid>(v, t);
    return reduce_values<Op>(t);
  }
  __device__ __forceinline__ static void add(Counter& c, const uint4& v) { c = Op::combine(c, reduce(v)); }
};

// Operators whose accumulator is a struct (Welford's) take each group of loads at once: the
// values of all of them reduced together in registers (reduce_values), then one combine into
// the accumulator, which for Welford's is the only division. Accumulators of one number keep
// a combine per load (and their separate counters), as tuned.
// (Indexed operators take one element at a time, with its position: never grouped.)
template <class R>
inline constexpr bool kGroupLoads = !std::is_arithmetic_v<typename R::Acc> && !is_indexed_v<typename R::Op>;
// Narrower inputs added in double (a float32 or int32 sum with dtype=float64) convert each
// element to two registers. 4-byte inputs: the grid loop groups its loads too, one counter
// instead of four; with four, held to 32 registers, ptxas issued two of a tile's four loads,
// converted them, then issued the other two (two round trips a tile). 1- and 2-byte inputs
// (16 and 8 conversions a load) keep four counters and get more registers, 64 and 40 (two and
// three blocks a multiprocessor): at 32 they spilled, grouped or not, and issued two loads.
template <class R>
inline constexpr bool kWidened = std::is_same_v<typename R::Acc, double> && sizeof(typename R::In) < 8;
template <class R>
inline constexpr bool kGroupWidened = kWidened<R> && sizeof(typename R::In) == 4;
// Welford's in float (var, std and their _mean, every float dtype but float64).
template <class R>
inline constexpr bool kFloatWelford = HasRowPasses<typename R::Op>::value && std::is_same_v<typename R::Value, float>;
// Registers a thread may use: the grid kernels promise ptxas 4 resident blocks; struct
// accumulators get twice the registers (spills otherwise) and half the blocks, but Welford's in
// float three (40 registers, no spill; bfloat16's graph kernel 4 bytes): std_mean of (1024,
// 3072) float32 is 384 tiles, which 264 blocks took in two rounds, 396 in one.
template <class R>
inline constexpr int kResidentBlocks = kFloatWelford<R> ? 3
                                       : kGroupLoads<R> ? 2
                                       : !kWidened<R> || sizeof(typename R::In) == 4 ? 4
                                       : sizeof(typename R::In) == 2 ? 3
                                                                     : 2;

// The values of K loaded vectors, reduced into one accumulator (see kGroupLoads), at most 16
// values at a time (32 held at once went to local memory under the register bound).
template <class R, int K>
__device__ __forceinline__ typename R::Acc reduce_loads(const uint4 (&r)[K]) {
  using In = typename R::In;
  using Value = typename R::Value;
  constexpr int kPer = 16 / sizeof(In);
  if constexpr (K * kPer > 16) {
    static_assert(K % 2 == 0, "halves of the loads");
    uint4 lo[K / 2], hi[K / 2];
#pragma unroll
    for (int k = 0; k < K / 2; ++k) lo[k] = r[k], hi[k] = r[K / 2 + k];
    return R::Op::combine(reduce_loads<R>(lo), reduce_loads<R>(hi));
  } else {
    Value t[K * kPer];
#pragma unroll
    for (int k = 0; k < K; ++k) {
      Value v[kPer];
      convert_vector<In, typename R::Mid>(r[k], v);
#pragma unroll
      for (int j = 0; j < kPer; ++j) t[k * kPer + j] = v[j];
    }
    return reduce_values<typename R::Op>(t);
  }
}

// Packed-integer counting for 1- and 2-byte lanes: each 32-bit word of the vector goes
// through one dot-product instruction against ones, so a vector costs four instructions.
// __dp4a adds four bytes (signed or unsigned, as its operand types are), __dp2a_lo the two
// 16-bit halves. A counter takes one vector per iteration and is flushed every kFlushEvery;
// the bound allows one vector more (the partial tile's, and the head and tail, under one).
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

// Non-zero bytes counted in 32-bit words (any, all and count_nonzero of 1-byte integers, a sum
// with a bool Mid): a byte's high bit is set by its low seven bits plus 0x7f when any is set,
// or by itself; one popcount a word.
struct PackedNonzero {
  using Counter = uint32_t;
  static constexpr int kFlushEvery = 64;  // at most 16 a vector: far from 2^32
  __device__ __forceinline__ static uint32_t init() { return 0; }
  __device__ __forceinline__ static uint32_t count(unsigned w) {
    return __popc((((w & 0x7f7f7f7fu) + 0x7f7f7f7fu) | w) & 0x80808080u);
  }
  // One word into counter c (the ends of a full reduction; bytes not loaded are zero).
  __device__ __forceinline__ static uint32_t dot(unsigned w, uint32_t c) { return c + count(w); }
  __device__ __forceinline__ static void add(uint32_t& c, const uint4& v) {
    c += count(v.x) + count(v.y) + count(v.z) + count(v.w);
  }
  __device__ __forceinline__ static uint32_t reduce(const uint4& v) {
    uint32_t c = 0;
    add(c, v);
    return c;
  }
};

template <> struct VecAdd<bool, bool, Sum<int64_t>> : PackedAdd<uint8_t, uint32_t> {};
template <> struct VecAdd<uint8_t, bool, Sum<int64_t>> : PackedNonzero {};
template <> struct VecAdd<int8_t, bool, Sum<int64_t>> : PackedNonzero {};
template <> struct VecAdd<uint8_t, uint8_t, Sum<int64_t>> : PackedAdd<uint8_t, uint32_t> {};
template <> struct VecAdd<int8_t, int8_t, Sum<int64_t>> : PackedAdd<int8_t, int32_t> {};
template <> struct VecAdd<int16_t, int16_t, Sum<int64_t>> : PackedAdd<int16_t, int32_t> {};

// Where the 16-byte vectors are (VecSplit, plan.h): `head` elements up to the first kAlign-byte
// boundary, then `vectors` whole vectors, then `tail` elements (the head under kAlign bytes, the
// tail under 16).

template <class In, int kAlign = 16>
__host__ __device__ __forceinline__ VecSplit split_at_vectors(const void* p, int64_t n) {
  static_assert(kAlign % 16 == 0 && (kAlign & (kAlign - 1)) == 0, "whole vectors, a power of two");
  constexpr int64_t per_vector = 16 / sizeof(In);
  const auto misalign = int64_t(reinterpret_cast<uintptr_t>(p) % kAlign);
  const int64_t head = misalign ? min64(n, (kAlign - misalign) / int64_t(sizeof(In))) : 0;
  const int64_t vectors = (n - head) / per_vector;
  return {head, vectors, n - head - vectors * per_vector};
}

template <class T>
using LoadBits = std::conditional_t<sizeof(T) == 8, unsigned long long, unsigned>;

// The bits of *p if `load`, else zero, in the low bytes of a register; issued where it is
// written. The single block constructs Ends before its loop: with a plain load the compiler
// moved it to its use after the loop, where it cost a round trip of its own (float32 2^14 one
// element off: +7%). The bits stay as they are until used (from_bits): a 1-byte value taken
// out at once was masked right after the load, and the warp waited for the load there, before
// issuing its own vectors (uint8 2^14 one element off: +0.2 us).
template <class T>
__device__ __forceinline__ LoadBits<T> load_here(const T* p, bool load) {
  static_assert(sizeof(T) <= 8 && (sizeof(T) & (sizeof(T) - 1)) == 0, "1, 2, 4 or 8 bytes");
  LoadBits<T> bits = 0;
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
  return bits;
}

template <class T>
__device__ __forceinline__ T from_bits(LoadBits<T> bits) {
  // Opaque here, so the compiler cannot take the value apart any earlier.
  if constexpr (sizeof(T) == 8) asm volatile("" : "+l"(bits));
  else asm volatile("" : "+r"(bits));
  T v;
  memcpy(&v, &bits, sizeof(T));  // the low bytes (little-endian)
  return v;
}

// A full reduction's input is split by plan.h's split_full: for 1- and 2-byte types Ends loads
// the head as whole 4-byte words, so a head that ends the input stops at a word boundary; the
// elements after it (at most three bytes) are the tail. No word then reaches past the tensor's
// last element.

// The head (under kVecAlign bytes) and the tail (under one vector), loaded by the first warp:
// one load of each a lane at most. Lane t takes tail element t, and head element t; for 1- and
// 2-byte types, the 4-byte word t of the kVecAlign-byte line where the head lies (the head's
// first word starts up to 3 bytes before x, inside the same aligned word; those bytes are
// dropped). Loaded when constructed, added into a thread's first counter by add_into(): for
// a sum, without a test per element (bits not loaded are zero), and for 1-byte types with one
// __dp4a for the head. (Elementwise, with a test and a 64-bit add per element after the
// block's total, uint8 2^10 one element off was 7% slower than aligned; added before the
// tile's vectors, the first counter's adds waited for these loads: uint8 2^17 +10%.) One warp,
// not all: the single block is short enough that every instruction all its 16 warps issue
// shows (this code on every thread: float32 2^14 one element off +0.04 us); and aligned inputs
// (no head, no tail) branch around it.
template <class R>
struct Ends {
  using In = typename R::In;
  using Acc = typename R::Acc;
  using Op = typename R::Op;
  using Add = VecAdd<In, typename R::Mid, Op>;
  static constexpr bool kWords = sizeof(In) < 4;
  static_assert(kVecAlign / sizeof(In) <= 32 || kWords, "one head element a lane");
  static_assert(kVecAlign == 4 * 32, "one head word a lane");
  // A sum adds the zero bits a load not made leaves as zero: it needs no test of which loads
  // were made. Other operators take their identity there.
  static constexpr bool kZeroAddsNothing = std::is_same_v<Op, Sum<Acc>>;
  // Only the loaded bits are held: which loads were made is worked out again from the
  // kernel's parameters when needed (flags held across the grid kernel's last tile took it
  // past 32 registers: 3 blocks a multiprocessor, not 4).
  const In* x;
  VecSplit s;
  int t;
  LoadBits<In> head = 0, tail = 0;
  __device__ __forceinline__ Ends(const In* x_, VecSplit s_, int t_) : x(x_), s(s_), t(t_) {
    if (any()) {
      head = load_here(head_address(), has_head());
      tail = load_here(x + s.head + s.vectors * (16 / int64_t(sizeof(In))) + t, has_tail());
    }
  }
  // c: a counter of VecAdd<In, Mid, Op> (packed counting) or an Acc.
  template <class C>
  __device__ __forceinline__ void add_into(C& c) const {
    if (!any()) return;
    // Packed counting on the bits as loaded (zero-extended: a signed tail element taken out as
    // In would be sign-extended into the other lanes); the bytes before x are shifted out.
    if constexpr (Add::kFlushEvery > 0) {
      c = Add::dot(from_bits<unsigned>(head) >> (8 * skip()), Add::dot(from_bits<unsigned>(tail), c));
    } else {
      Acc v = Op::identity();
      if constexpr (kWords) {
        const unsigned w = from_bits<unsigned>(head), skip = this->skip();
        constexpr int kPer = 4 / int(sizeof(In));
        using Bits = std::conditional_t<sizeof(In) == 1, uint8_t, uint16_t>;
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
          const auto bits = static_cast<Bits>(w >> (8 * sizeof(In) * j));
          In e;
          memcpy(&e, &bits, sizeof(In));
          v = Op::combine(v, kept(unsigned(j) * sizeof(In) >= skip && (kZeroAddsNothing || has_head()), e));
        }
      } else {
        v = kept(kZeroAddsNothing || has_head(), from_bits<In>(head));
      }
      v = Op::combine(v, kept(kZeroAddsNothing || has_tail(), from_bits<In>(tail)));
      c = Op::combine(c, v);
    }
  }

 private:
  __device__ __forceinline__ bool any() const { return (s.head | s.tail) != 0 && t < 32; }
  __device__ __forceinline__ bool has_tail() const { return t < s.tail; }
  __device__ __forceinline__ Acc kept(bool keep, In e) const { return keep ? R::convert(e) : Op::identity(); }
  // Words: word t of the line, if it holds head bytes (the head ends on a word boundary).
  __device__ __forceinline__ uintptr_t word() const {
    return reinterpret_cast<uintptr_t>(x) / kVecAlign * kVecAlign + 4 * unsigned(t);
  }
  __device__ __forceinline__ bool has_head() const {
    if constexpr (kWords) {
      const auto first = reinterpret_cast<uintptr_t>(x);
      return word() + 4 > first && word() + 4 <= first + uintptr_t(s.head) * sizeof(In);
    } else {
      return t < s.head;
    }
  }
  __device__ __forceinline__ auto head_address() const {
    if constexpr (kWords) return reinterpret_cast<const unsigned*>(word());
    else return x + t;
  }
  // Bytes of the head word before x (on the word that holds x; 0 on the others).
  __device__ __forceinline__ unsigned skip() const {
    const auto first = reinterpret_cast<uintptr_t>(x);
    return word() < first ? unsigned(first - word()) : 0;
  }
};

// K tiles from tile `first_tile` on, into a thread's kVecUnroll counters (the last tile may be
// partial), then the head and tail (loaded before): every load issued before any add, so one
// memory round trip. The single block's tiles, and the grid block with the partial tile. (In
// a loop over tiles ptxas put each add right after its load, a round trip per tile; a load
// inside `if (in range) add(load)` waited for the previous add, four round trips in a row:
// uint8 2^20 one element off +1 us.)
template <class R, int K, int kThreads = kVecBlock, class C>
__device__ __forceinline__ void add_tiles(const typename R::In* x, VecSplit s, int64_t first_tile,
                                          const Ends<R>& ends, C (&c)[kVecUnroll]) {
  using Add = VecAdd<typename R::In, typename R::Mid, typename R::Op>;
  constexpr int kLoads = K * kVecUnroll, kLast = kLoads - kVecUnroll;
  constexpr int64_t kTile = int64_t(kThreads) * kVecUnroll;
  const uint4* v = reinterpret_cast<const uint4*>(x + s.head) + first_tile * kTile + threadIdx.x;
  // Vectors from the first tile on, as an int: 64-bit bounds tests took two registers each,
  // held to the adds (the grid kernel went past 32 registers).
  const int left = int(min64(s.vectors - first_tile * kTile, kLoads * kThreads));
  uint4 r[kLoads];
  bool in_range[kVecUnroll];  // the last tile's
#pragma unroll
  for (int i = 0; i < kLast; ++i) r[i] = __ldg(v + i * kThreads);
#pragma unroll
  for (int u = 0; u < kVecUnroll; ++u) {
    in_range[u] = int(threadIdx.x) + (kLast + u) * kThreads < left;
    r[kLast + u] = in_range[u] ? __ldg(v + (kLast + u) * kThreads) : uint4{};
  }
#pragma unroll
  for (int i = 0; i < kLast; ++i) Add::add(c[i % kVecUnroll], r[i]);
#pragma unroll
  for (int u = 0; u < kVecUnroll; ++u)
    if (in_range[u]) Add::add(c[u], r[kLast + u]);
  ends.add_into(c[0]);
}

// acc plus a thread's counters, widened and added pairwise.
template <class R, class C>
__device__ __forceinline__ typename R::Acc widened_total(typename R::Acc acc, const C (&c)[kVecUnroll]) {
  typename R::Acc total[kVecUnroll];  // the counters, widened, added pairwise
#pragma unroll
  for (int u = 0; u < kVecUnroll; ++u) total[u] = typename R::Acc(c[u]);
  pairwise_in_place<kVecUnroll, typename R::Op>(total);
  return R::Op::combine(acc, total[0]);
}

// The vectors come in tiles of kVecUnroll loads a thread (32 KiB for blocks of 512 threads).
// Block b reads tiles b, b + gridDim, b + 2 gridDim, ...; inside a tile thread t reads vectors
// t, t + kThreads, t + 2 kThreads and t + 3 kThreads, so each load instruction of the block
// covers kThreads vectors in one piece and each block streams through memory in order.
template <class R, int kThreads = kVecBlock>
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
  constexpr int64_t kTile = int64_t(kThreads) * kVecUnroll;
  const int64_t full_tiles = s.vectors / kTile;
  int since_flush = 0;
  for (int64_t tile = blockIdx.x; tile < full_tiles; tile += gridDim.x) {
    uint4 r[kVecUnroll];
#pragma unroll
    for (int u = 0; u < kVecUnroll; ++u) r[u] = __ldg(v + tile * kTile + u * kThreads);
    if constexpr (kGroupLoads<R> || kGroupWidened<R>) {
      c[0] = Op::combine(c[0], reduce_loads<R>(r));
    } else {
#pragma unroll
      for (int u = 0; u < kVecUnroll; ++u) Add::add(c[u], r[u]);
    }
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
  // The block whose turn the next tile would be takes the partial tile (possibly empty), and
  // the head and tail with it: in the combine kernel, on every call's critical path, they cost
  // uint8 2^22 one element off 0.15-0.2 us (ncu). Its counters hold fewer than kFlushEvery
  // vectors here, and take one more and the ends (PackedAdd allows kFlushEvery + 1).
  if (blockIdx.x == full_tiles % gridDim.x) add_tiles<R, 1, kThreads>(x, s, full_tiles, Ends<R>(x, s, threadIdx.x), c);
  return widened_total<R>(acc, c);
}

// The single block's K tiles (the last one possibly partial), the same vectors to the same
// threads and counters as tile_sum, in one round trip (add_tiles). K is a template parameter
// so that a call loads only the tiles it has: all four tiles' loads on every call cost
// 2^10-2^12 calls 0.2-0.5 us of predicated-off instructions.
template <class R, int K>
__device__ __forceinline__ typename R::Acc small_tiles(const typename R::In* x, VecSplit s, const Ends<R>& ends) {
  using Op = typename R::Op;
  using Add = VecAdd<typename R::In, typename R::Mid, Op>;
  static_assert(Add::kFlushEvery == 0 || K <= Add::kFlushEvery, "the counters cannot overflow");
  typename Add::Counter c[kVecUnroll];
#pragma unroll
  for (int u = 0; u < kVecUnroll; ++u) c[u] = Add::init();
  add_tiles<R, K>(x, s, 0, ends, c);
  return widened_total<R>(Op::identity(), c);
}

// The result of one block or of the combine kernel. Out: a C type the call's result has when
// no division is asked for (most calls), stored directly (converted as the Sink converts); void:
// through the Sink (any dtype, mean's division). These kernels are one block and short, so the
// store's dtype switch and divisor test were a visible part of a call (0.1 us at 2^10).
template <class Op, class Out, class A>
__device__ __forceinline__ void store_result(const Sink& out, const A& v) {
  if constexpr (std::is_void_v<Out>) store_acc<Op>(out, 0, v);
  else *static_cast<Out*>(out.ptr) = element_cast<Out>(v);
}

// The second direct result type, besides the accumulator's: for 16-bit floats added in float,
// the input's (a bfloat16 sum is bfloat16). Through the Sink, bfloat16 sums of 2^10-2^12 took
// 1.32-1.34 us against float32's 1.14-1.17; one kernel for both types, with a test of the
// result's dtype, cost 0.15 us at 2^17 (the graph path's combine kernel) against two.
template <class R>
using NarrowOut = std::conditional_t<R::Op::kPlain && std::is_same_v<typename R::Acc, float> &&
                                         sizeof(typename R::In) == 2 && !std::is_integral_v<typename R::In>,
                                     typename R::In, void>;

// Small inputs: the whole call is this one block. Launched with programmatic dependence
// (launch_dependent): its launch overlaps the kernel before it on the stream, which may still
// be writing x, so it waits for that first; it lets the kernel after it launch at once (that
// one waits for this in turn), so a chain of calls overlaps their launches. The head and tail
// are loaded before the tiles (the compiler had moved plain loads to their use after the
// loop: a round trip of its own, uint8 2^20 one element off +19%); aligned inputs skip that
// code (its predicated-off loads and adds cost ~0.2 us at 2^14).
// (`1` below: told nothing about occupancy, ptxas keeps few registers by putting each add
// right after its load; one block a launch may use up to 128 a thread.)
// One tile (up to 32 KiB) is a kernel of its own (kOneTile), its code straight from the entry
// to the store: in one kernel for every tile count ptxas put the one-tile code after the others,
// ~4.6 KiB past the entry, whatever the branch hint. CUDA-graph replays of one-tile sums took
// 0.01-0.07 us less; calls with the caches cold, where a jump to code not run yet fetches it from
// memory, took the same time (benchmarks/NOTES.md at 8d99fb0).
template <class R, class Out, bool kOneTile>
__global__ void __launch_bounds__(kVecBlock, 1)
small_sum_kernel(const typename R::In* x, VecSplit s, Sink out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaTriggerProgrammaticLaunchCompletion();
  cudaGridDependencySynchronize();
#endif
  const Ends<R> ends(x, s, threadIdx.x);
  typename R::Acc v;
  if constexpr (kOneTile) {
    v = small_tiles<R, 1>(x, s, ends);
  } else {
    switch ((s.vectors + kVecTile - 1) / kVecTile) {
      case 2: v = small_tiles<R, 2>(x, s, ends); break;
      case 3: v = small_tiles<R, 3>(x, s, ends); break;
      default: v = small_tiles<R, 4>(x, s, ends); break;
    }
  }
  static_assert(kSingleBlockTiles == 4, "a case for each tile count");
  v = block_reduce<typename R::Op, kVecBlock>(v);
  if (threadIdx.x == 0) store_result<typename R::Op, Out>(out, v);
}

// Up to a warp's worth of vectors (plan_reduce.h): one warp, small_sum_kernel's loads (the
// vectors to the same lanes, the head and tail the first warp's there too), where the other
// warps would hold only the identity. Its shuffles run over the lanes that may hold elements
// (live), and one combine with the identity stands for the levels and warps left out, so the
// bits are small_sum_kernel's (a sum's -0.0 + 0 included). small_sum_kernel's block_reduce of
// 16 warps is two rounds of five shuffle levels on the call's critical path: with Welford's
// combine (a division and a dozen dependent operations) var of 3 float32 took 1.57 us, this
// kernel 1.07 (torch.compile 1.12; CUDA graphs, H200). A kernel of its own: the same code as a
// branch at the head of small_sum_kernel made calls of 64-4096 elements 0.05-0.1 us slower.
template <class R>
__device__ __forceinline__ int live_lanes(const VecSplit& s) {
  const int head = s.head == 0 ? 0 : sizeof(typename R::In) < 4 ? 32 : int(s.head);  // words: up to the line's 32
  return max(max(int(s.vectors), int(s.tail)), head);
}

template <class R, class Out>
__global__ void __launch_bounds__(32, 1)
small_warp_kernel(const typename R::In* x, VecSplit s, Sink out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaTriggerProgrammaticLaunchCompletion();
  cudaGridDependencySynchronize();
#endif
  using Op = typename R::Op;
  const Ends<R> ends(x, s, threadIdx.x);
  auto v = small_tiles<R, 1>(x, s, ends);
  const int live = live_lanes<R>(s);
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    if (offset < live) v = Op::combine(v, shfl_down(0xffffffffu, v, offset));
  if (threadIdx.x == 0) store_result<Op, Out>(out, Op::combine(v, Op::identity()));
}

// Adds the block partials in block order (lane l: partials l, l + 32, ..., added pairwise,
// then the lanes by shuffles), so the result does not depend on which block finished first;
// the last block of a one-kernel call (finish_by_block) adds them in the same order, so both
// give the same bits.
template <class R>
__device__ __forceinline__ typename R::Acc combine_partials(const typename R::Acc* partials, int n) {
  using Op = typename R::Op;
  using Acc = typename R::Acc;
  auto v = Op::identity();
  for (int first = threadIdx.x; first < n; first += 32 * kCombineLoads) {
    Acc r[kCombineLoads];
#pragma unroll
    for (int k = 0; k < kCombineLoads; ++k) {
      const int i = first + 32 * k;
      r[k] = i < n ? partials[i] : Op::identity();
    }
    pairwise_in_place<kCombineLoads, Op>(r);
    v = Op::combine(v, r[0]);
  }
  return warp_reduce<Op>(v);
}

// The last block's combine in a one-kernel call: combine_partials' arithmetic, so the same
// bits as the combine kernel, spread over the block's warps. combine_partials' lane l adds
// partials l + 32k (k < kCombineLoads) pairwise, k with k + 16 first; here the warps load the
// pairs (k, k + 16) (one pair a warp in blocks of 16 warps) and add them, and the first warp
// finishes the tree from shared memory. The partials were written by other blocks of the
// running grid: read from L2 (ld.cg), never from a line this multiprocessor's L1 may hold. One
// warp holding all kCombineLoads values took more registers than the grid kernel may have:
// inlined, spills into the grid loop; out of line, a call whose code and frame came from memory
// when the caches were cold (0.5-2.8 us a call against this, H100, benchmarks/NOTES.md at 8d99fb0).
template <class R, class Out, int kThreads>
__device__ __forceinline__ void finish_by_block(const typename R::Acc* partials, int n, const Sink& out) {
  using Op = typename R::Op;
  using Acc = typename R::Acc;
  constexpr int kWarps = kThreads / 32, kPairs = kCombineLoads / 2;
  static_assert(kPairs % kWarps == 0, "the tree's first-level pairs shared evenly by the warps");
  __shared__ Acc level[kPairs][32];
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
  auto v = Op::identity();
  for (int base = 0; base < n; base += 32 * kCombineLoads) {  // once for up to 1024 blocks
#pragma unroll
    for (int k = warp; k < kPairs; k += kWarps) {
      const int i = base + lane + 32 * k, j = i + 32 * kPairs;
      const Acc lo = i < n ? load_cg(partials + i) : Op::identity();
      const Acc hi = j < n ? load_cg(partials + j) : Op::identity();
      level[k][lane] = Op::combine(lo, hi);
    }
    __syncthreads();
    if (warp == 0) {
      Acc r[kPairs / 2];
#pragma unroll
      for (int k = 0; k < kPairs / 2; ++k) r[k] = Op::combine(level[k][lane], level[k + kPairs / 2][lane]);
      pairwise_in_place<kPairs / 2, Op>(r);
      if (base + lane < n) v = Op::combine(v, r[0]);  // combine_partials' lane takes this round only then
    }
    __syncthreads();  // level is written again
  }
  if (warp == 0) {
    v = warp_reduce<Op>(v);
    if (lane == 0) store_result<Op, Out>(out, v);
  }
}

// Larger inputs: each block's partial, then their combine, in one of two ways to the same bits
// (both kernels run tile_sum over the same blocks):
//  - CUDA graphs (a call's memory must be its own): vector_partials_kernel writes the partials
//    and combine_partials_kernel adds them, a second launch.
//  - eager calls: vector_sum_ticket_kernel. Each block writes its partial and takes a number
//    from a ticket word of the stream's own scratch (0 between calls; atom.inc wraps it back to
//    0), and the last block adds the partials. One launch fewer: in eager code the host's cost
//    a launch, not the kernel, sets the pace (benchmarks/NOTES.md at 8d99fb0). Two kernels, so
//    that the ticket's code never moves the graph kernel's (the same ticket in one kernel for
//    both made graph replays ~1% slower).
// Both start with block_partial, which lets the next kernel launch only after its own wait, so
// that a chain of calls never has more than one grid launched ahead (a grid that triggered first
// let chains of waiting grids crowd the device). Four blocks a multiprocessor, so at most 32
// registers: uint8 with dtype=float32 took 38 (the block with the partial tile and the head and
// tail).
template <class R, int kThreads>
__device__ __forceinline__ typename R::Acc block_partial(const typename R::In* x, VecSplit s) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
  cudaTriggerProgrammaticLaunchCompletion();
#endif
  return block_reduce<typename R::Op, kThreads>(tile_sum<R, kThreads>(x, s));
}

template <class R, int kThreads>
__global__ void __launch_bounds__(kThreads, kResidentBlocks<R> * kVecBlock / kThreads)
vector_partials_kernel(const typename R::In* x, VecSplit s, typename R::Acc* partials) {
  const auto v = block_partial<R, kThreads>(x, s);
  if (threadIdx.x == 0) partials[blockIdx.x] = v;
}

template <class R, class Out, int kThreads>
__global__ void __launch_bounds__(kThreads, kResidentBlocks<R> * kVecBlock / kThreads)
vector_sum_ticket_kernel(const typename R::In* x, VecSplit s, typename R::Acc* partials, unsigned* ticket,
                         Sink out) {
  const auto v = block_partial<R, kThreads>(x, s);
  __shared__ bool last;
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = v;
    // Release: the partial is visible before the number is taken; acquire: the last block
    // sees every partial whose number came before its own.
    last = ticket_inc(ticket, gridDim.x - 1) == gridDim.x - 1;
  }
  __syncthreads();  // the first thread's acquire is the block's
  if (last) finish_by_block<R, Out, kThreads>(partials, int(gridDim.x), out);
}

// The partials of vector_partials_kernel into the result, one warp. (256 threads with a block
// reduction, shared memory and a barrier, took longer for the same loads.) The next kernel
// may launch once the grid kernel has finished, not before: launched while the grid ran, the
// next call's grid took 0.2-0.65 us longer at 6-12 MiB (float32 8 MiB 3.59 against 3.00 us),
// most likely from its blocks being placed in the slots the running grid left (one kernel at a
// time, ncu counts 1-2 blocks on every multiprocessor at 256 blocks).
template <class R, class Out>
__global__ void __launch_bounds__(32)
combine_partials_kernel(const typename R::Acc* partials, int n, Sink out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();  // the first kernel has finished and its writes are visible
  cudaTriggerProgrammaticLaunchCompletion();  // the next call's kernel may launch; it waits for this one
#endif
  const auto v = combine_partials<R>(partials, n);
  if (threadIdx.x == 0) store_result<typename R::Op, Out>(out, v);
}

// Sums, means and Welford's in float of few tiles take blocks of kQuarterBlock threads
// (plan_reduce.h): var of (28, 56, 64) bfloat16, 7 tiles, ran 7 blocks.
template <class R>
inline constexpr bool kQuarterBlocks = std::is_same_v<typename R::Op, Sum<typename R::Acc>> || kFloatWelford<R>;

// The grid kernel of a call past one block, eager (ticket) or in a graph.
template <class R, int kThreads, class Out>
cudaError_t launch_grid_of(const ReduceArgs& a, const typename R::In* x, VecSplit s, int64_t blocks,
                           typename R::Acc* partials, const Sink& result) {
  if (a.ticket != nullptr)
    return launch_dependent(vector_sum_ticket_kernel<R, Out, kThreads>, dim3(unsigned(blocks)), dim3(kThreads), a, x,
                            s, partials, a.ticket, result);
  return launch_dependent(vector_partials_kernel<R, kThreads>, dim3(unsigned(blocks)), dim3(kThreads), a, x, s,
                          partials);
}

template <class R, class Out>
cudaError_t launch_grid(const ReduceArgs& a, const typename R::In* x, VecSplit s, int64_t blocks, int threads,
                        typename R::Acc* partials, const Sink& result) {
  if constexpr (kQuarterBlocks<R>)
    if (threads == kQuarterBlock) return launch_grid_of<R, kQuarterBlock, Out>(a, x, s, blocks, partials, result);
  return launch_grid_of<R, kVecBlock, Out>(a, x, s, blocks, partials, result);
}

// A step of a full reduction (VectorWarp, VectorBlock, VectorGrid, VectorCombine; plan_reduce.h). Plain
// operators store the result directly (see store_result), as the accumulator or (NarrowOut) the
// input's type; operators with a projection of their own have only the general kernels.
template <class R>
cudaError_t launch_vector_step(const Step& step, const ReduceArgs& a) {
  using Acc = typename R::Acc;
  const auto* x = static_cast<const typename R::In*>(a.in);
  const Sink result{a.out, a.types.out, a.project, a.out2};
  auto* partials = step.from < 0 ? nullptr : reinterpret_cast<Acc*>(static_cast<char*>(a.workspace) + step.from);
  constexpr bool kPlain = R::Op::kPlain;
  using Narrow = NarrowOut<R>;
  const bool direct = a.project.count == 0 && a.project.repeats == 1;
  bool as_acc = false;
  if constexpr (kPlain) as_acc = direct && a.types.out == dtype_of<Acc>();
  bool as_narrow = false;
  if constexpr (!std::is_void_v<Narrow>) as_narrow = direct && a.types.out == dtype_of<Narrow>();
  const VecSplit s = step.split;
  switch (step.kernel) {
    case Kernel::VectorWarp: {
      auto* kernel = small_warp_kernel<R, void>;
      if constexpr (kPlain) if (as_acc) kernel = small_warp_kernel<R, Acc>;
      if constexpr (!std::is_void_v<Narrow>) if (as_narrow) kernel = small_warp_kernel<R, Narrow>;
      return launch_dependent(kernel, dim3(1), dim3(32), a, x, s, result);
    }
    case Kernel::VectorBlock: {
      const auto pick = [&](auto one_tile) {
        constexpr bool k1 = decltype(one_tile)::value;
        auto* kernel = small_sum_kernel<R, void, k1>;
        if constexpr (kPlain) if (as_acc) kernel = small_sum_kernel<R, Acc, k1>;
        if constexpr (!std::is_void_v<Narrow>) if (as_narrow) kernel = small_sum_kernel<R, Narrow, k1>;
        return kernel;
      };
      auto* kernel = s.vectors <= kVecTile ? pick(std::true_type{}) : pick(std::false_type{});
      return launch_dependent(kernel, dim3(1), dim3(kVecBlock), a, x, s, result);
    }
    case Kernel::VectorGrid: {
      // The plan's ticket and the call's agree: the last block finishes only with a ticket.
      if ((a.ticket != nullptr) != step.flag) return cudaErrorInvalidValue;
      auto* launch = launch_grid<R, void>;
      if constexpr (kPlain) if (as_acc) launch = launch_grid<R, Acc>;
      if constexpr (!std::is_void_v<Narrow>) if (as_narrow) launch = launch_grid<R, Narrow>;
      return launch(a, x, s, step.grid[0], step.block[0], partials, result);
    }
    case Kernel::VectorCombine: {
      auto* combine = combine_partials_kernel<R, void>;
      if constexpr (kPlain) if (as_acc) combine = combine_partials_kernel<R, Acc>;
      if constexpr (!std::is_void_v<Narrow>) if (as_narrow) combine = combine_partials_kernel<R, Narrow>;
      return launch_dependent(combine, dim3(1), dim3(32), a, static_cast<const Acc*>(partials), int(step.count),
                              result);
    }
    default:
      return cudaErrorInvalidValue;
  }
}

// Blocks a multiprocessor of both grid kernels, the fewer (eager calls and graphs must cut the
// input into the same blocks to give the same bits), for blocks of kThreads.
template <class R, int kThreads>
int vector_resident() {
  return std::min(resident_blocks_per_sm<vector_partials_kernel<R, kThreads>>(kThreads),
                  resident_blocks_per_sm<vector_sum_ticket_kernel<R, void, kThreads>>(kThreads));
}

}  // namespace treduce::cuda
