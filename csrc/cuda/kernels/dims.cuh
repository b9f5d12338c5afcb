// auto over dims: every operator (reduce_ops.h) on any Layout3 (layout.h), that is
//   out[outer_out(o) + i * out_inner] = reduce over r of x[outer_in(o) + r * in_reduced + i * in_inner],
// the outer index one run of memory or the digits of several. Shapes of work, picked by run_reduce:
//  - small reductions (up to kSmallElements elements, any layout; up to 2^19-2^20 for a few
//    long rows and for columns whose adjacent results are adjacent in memory, small_reaches):
//    one kernel indexing the elements through the IndexedLayout, a team of threads a result
//    (small_kernel); past that, where its one pass beat the others' two or their idle threads
//    (small_beats_passes: several reduced runs the innermost contiguous, narrow columns of up
//    to 128 rows that are not dense slabs, adjacent results adjacent in memory);
//  - full reduction of a contiguous run: the vector kernel (vector.cuh);
//  - maps (one element a result) whose input and result run together along inner: several
//    elements a thread (map_kernel);
//  - several reduced runs (Layout3::combine): one pass over the longest run into partials, then
//    a second kernel combines each result's partials (run_combined); also a few results
//    interleaved in one long run, read as rows of k results each (fold_interleaved);
//  - dense slabs (each outer index's [reduced][inner] elements one contiguous block of at most
//    kSlabBytes) of short rows, short columns and columns narrower than 128 bytes (short
//    columns of wide accumulators as well as where tiles would be taken): a block stages
//    whole slabs in shared memory, then teams of lanes reduce each output from there (slab_kernel);
//  - short reductions (up to kTileReduced elements) over many outputs where the shapes below
//    would idle, and short rows that are not whole vectors, where slabs do not apply: a thread
//    an output (tile_kernel);
//  - rows (inner == 1): a team of 1 to 32 lanes per row, sized so each lane has four to eight
//    16-byte loads (sums and extrema of floats over whole rows of 1 to 64 vectors: one to four,
//    in a kernel of few registers; rows of up to 20 loads a lane of a warp, 40 when not whole
//    vectors and many, take teams of 32 too); longer rows a 512-thread block each, from half
//    as many rows as multiprocessors; fewer rows are cut into segments, one block each, as
//    many as fill whole waves of the device, and a second kernel combines each row's segments;
//  - small columns (up to 2^19 elements) of 32 to 256 rows: an output a thread, about 8 rows a
//    thread down, one pass;
//  - columns (inner > 1): threads own adjacent outputs (16 bytes of them when the inner run
//    is contiguous and aligned; 8 bytes for 2-byte types with few outputs) and walk the
//    reduced dim; when the outputs alone do not fill the device, up to 32 threads share a
//    column in a block (up to the whole block when a row has fewer outputs than a block has
//    threads across), then, unless each thread's share is a few rows already, the reduced dim
//    is split across blocks too, and a second kernel combines the splits. Each thread's outputs
//    are stored as one run (16-byte stores where aligned).
// Every output is combined in an order fixed by the shape and the device, never by timing:
// results are the same bits on every call.
#pragma once

#include "vector.cuh"

namespace treduce::cuda {

inline constexpr int kRowsBlock = 256;
// The rows and columns kernels promise ptxas 4 resident blocks (up to 64 registers). Left to
// itself it kept them near 40 registers by using each loaded vector before issuing the next
// load (one or two loads in flight, not four); with room it issues all four first. Measured
// on (4096, 4096) bfloat16 over dim -1: 5.5 us against 6.0 with 5 blocks and 6.6 before.
inline constexpr int kMinBlocks = 4;
// Columns with struct accumulators of 2- and 8-byte inputs (Welford's: four numbers an output,
// eight or two outputs a thread, each group of loads reduced together) get 85 registers, 3
// blocks: 64 spilled, and 2 blocks left the memory idle. 4-byte inputs keep 4 blocks: their four
// outputs fit 64 registers, and at 3 blocks var_mean(x, 0) over (4096, 4096) float32 took 35.8 us
// against 26.8.
template <class R>
inline constexpr int kMinBlocksOf = kGroupLoads<R> && sizeof(typename R::In) != 4 ? 3 : kMinBlocks;
// Rows keep 4 blocks (one combine per load, no grouping); double Welford's needs 2 not to spill,
// the positions of 1-byte inputs (16 values a vector, reduce_run_at) 3.
template <class R>
inline constexpr int kRowsMinBlocks =
    sizeof(typename R::Acc) > 16 ? 2 : is_indexed_v<typename R::Op> && sizeof(typename R::In) == 1 ? 3 : kMinBlocks;
// Short rows (teams of up to 8 lanes) of 4-byte sums and extrema: 6 blocks a multiprocessor (40
// registers, the four loads still issued together; at 8 blocks, 32 registers, ptxas issued each
// load after the adds of the one before). Hot, float32 rows of 64: 6.6 -> 6.0 us, rows of 256
// 6.2 -> 6.1, rows of 128 level; cold level.
template <class R, class Op = typename R::Op, class A = typename R::Acc>
inline constexpr bool kSumOrExtremum =
    std::is_same_v<Op, Sum<A>> || std::is_same_v<Op, MaxOp<A>> || std::is_same_v<Op, MinOp<A>>;
template <class R, int kTeam>
inline constexpr int kTeamMinBlocks =
    kTeam <= 8 && sizeof(typename R::In) == 4 && sizeof(typename R::Acc) == 4 && kSumOrExtremum<R> ? 6
                                                                                                 : kRowsMinBlocks<R>;
inline constexpr int kSegmentBlock = 512;
// Columns: blocks of kColumnsBlock threads, X across the outputs times Y down the reduced dim
// (1 to 32; up to the whole block for rows of few outputs).
inline constexpr int kColumnsBlock = 256;
inline constexpr int kNarrowBlock = 128;  // the 8-byte column kernel (run_reduce)
inline constexpr int kColumnsMaxY = 32;
inline constexpr int kPartialsX = 32;  // outputs per block of the column combine

// One 16-byte vector reduced to the accumulator (packed counting for small integer sums).
template <class R>
__device__ __forceinline__ typename R::Acc vector_value(const uint4& v) {
  return typename R::Acc(VecAdd<typename R::In, typename R::Mid, typename R::Op>::reduce(v));
}

// Element e at position i of the reduced dim into acc: indexed operators keep the position
// (reduce_ops.h), the others ignore it (and the compiler drops its arithmetic).
template <class R>
__device__ __forceinline__ void element_into(typename R::Acc& acc, typename R::In e, int64_t i) {
  if constexpr (is_indexed_v<typename R::Op>) acc = R::Op::reduce_at(acc, R::value(e), i);
  else acc = R::reduce(acc, e);
}

// A 16-byte vector whose first element is at position i.
template <class R>
__device__ __forceinline__ void vector_into(typename R::Acc& acc, const uint4& v, int64_t i) {
  using Op = typename R::Op;
  if constexpr (is_indexed_v<Op>) {
    typename R::Value t[16 / sizeof(typename R::In)];
    convert_vector<typename R::In, typename R::Mid>(v, t);
    acc = Op::reduce_run_at(acc, t, i);
  } else {
    acc = Op::combine(acc, vector_value<R>(v));
  }
}

// Member t of a team of T combines vectors t, t + T, ... of v[0, vectors) into acc (v[0] at
// position `first`), four loads issued before any is used. T is a constant: the four loads are
// then one address plus fixed offsets. (With T a variable each load needed its own 64-bit
// address, and ptxas, keeping the registers down, used each vector before loading the next: one
// or two loads in flight, not four.) kGroup: the four loads reduced together first
// (kGroupLoads), where registers allow it.
template <class R, int T, bool kGroup>
__device__ __forceinline__ void vectors_into(typename R::Acc& acc, const uint4* v, int64_t vectors, int64_t first,
                                             int t) {
  using Op = typename R::Op;
  constexpr int64_t kPer = 16 / int64_t(sizeof(typename R::In));
  int64_t k = t;
#pragma unroll 1  // one group of four loads at a time: unrolling further only adds registers
  for (; k + 3 * T < vectors; k += 4 * T) {
    uint4 r[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) r[u] = __ldg(v + k + u * T);
    if constexpr (kGroup) {
      acc = Op::combine(acc, reduce_loads<R>(r));
    } else {
#pragma unroll
      for (int u = 0; u < 4; ++u) vector_into<R>(acc, r[u], first + (k + u * T) * kPer);
    }
  }
  if (k < vectors) {  // fewer than four left: loaded together too, not one round trip each
    uint4 r[4];
    bool in_range[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      in_range[u] = k + u * T < vectors;
      r[u] = in_range[u] ? __ldg(v + k + u * T) : uint4{};
    }
#pragma unroll
    for (int u = 0; u < 4; ++u)
      if (in_range[u]) vector_into<R>(acc, r[u], first + (k + u * T) * kPer);
  }
}

// Member t of a team of T combines its share of elements [begin, end) of a row. With stride
// 1: the row's whole 16-byte vectors (vectors_into) and the few elements before the first and
// after the last vector. Otherwise elements t, t + T, ..., four loads at a time too.
template <class R, int T, bool kGroup = false>
__device__ __forceinline__ typename R::Acc row_part(const typename R::In* row, int64_t begin,
                                                    int64_t end, int64_t stride, int t) {
  using In = typename R::In;
  using Op = typename R::Op;
  auto acc = Op::identity();
  if (stride == 1) {
    constexpr int64_t kPer = 16 / int64_t(sizeof(In));
    const VecSplit s = split_at_vectors<In>(row + begin, end - begin);
    const In* p = row + begin;
    for (int64_t k = t; k < s.head; k += T) element_into<R>(acc, p[k], begin + k);
    const int64_t first = begin + s.head;  // the position of the first vector
    vectors_into<R, T, kGroup>(acc, reinterpret_cast<const uint4*>(p + s.head), s.vectors, first, t);
    const In* tail = p + s.head + s.vectors * kPer;
    for (int64_t j = t; j < s.tail; j += T) element_into<R>(acc, tail[j], first + s.vectors * kPer + j);
  } else {
    int64_t k = begin + t;
    for (; k + 3 * T < end; k += 4 * T) {
      In e[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) e[u] = row[(k + u * T) * stride];
      if constexpr (kGroup) {
        typename R::Value t[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) t[u] = R::value(e[u]);
        acc = Op::combine(acc, reduce_values<Op>(t));
      } else {
#pragma unroll
        for (int u = 0; u < 4; ++u) element_into<R>(acc, e[u], k + u * T);
      }
    }
    if (k < end) {
      In e[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) e[u] = k + u * T < end ? row[(k + u * T) * stride] : In();
#pragma unroll
      for (int u = 0; u < 4; ++u)
        if (k + u * T < end) element_into<R>(acc, e[u], k + u * T);
    }
  }
  return acc;
}

// Columns of 1-byte inputs whose sum counts bytes (bool and uint8 sums; any, all and
// count_nonzero of 1-byte inputs): each 32-bit word of a load as four byte counts (the byte, or
// 1 where it is non-zero), added two at a time in 16-bit halves of registers and moved to the
// int64 accumulators every 256 rows: 20 instructions a 16-byte load instead of 16 conversions
// and 16 64-bit adds (all(x, 0) over 4096 x 4096 bool: 17.6 us, 0.45x torch.compile's).
template <class R>
inline constexpr bool kPackedColumns =
    std::is_same_v<typename R::Op, Sum<int64_t>> &&
    (std::is_base_of_v<PackedNonzero, VecAdd<typename R::In, typename R::Mid, typename R::Op>> ||
     std::is_base_of_v<PackedAdd<uint8_t, uint32_t>, VecAdd<typename R::In, typename R::Mid, typename R::Op>>);

template <class R>
__device__ __forceinline__ unsigned column_bytes(unsigned w) {
  if constexpr (std::is_base_of_v<PackedNonzero, VecAdd<typename R::In, typename R::Mid, typename R::Op>>)
    return ((((w & 0x7f7f7f7fu) + 0x7f7f7f7fu) | w) >> 7) & 0x01010101u;
  else
    return w;
}

// Rows of teams group their loads (see kGroupLoads) where the operator has a form for a group
// (var, logsumexp): one combine, var's division and logsumexp's rescaling, a group, not a load.
template <class R>
inline constexpr bool kGroupRows = kGroupLoads<R> && HasReduceValues<typename R::Op>::value;

// Short rows (teams of up to kDependentTeam lanes) are launched with programmatic dependence, as
// the full-reduction kernels: the kernel waits for the one before it (which may still be writing
// x), then lets the next one launch, which waits for this one in turn. Rows of 128 float32, hot:
// 7.0-7.2 -> 6.4-6.6 us (the launch gap between calls was a tenth of the time). Teams of 16 and
// 32 lanes (long rows) launch plainly: (4096, 4096) bfloat16 over dim -1 went 6.33 -> 6.94 us
// with it.
inline constexpr int kDependentTeam = 8;

// The lanes of this thread's team (kTeam a power of two up to 32, aligned in the warp) and no
// others: teams of one warp may leave their loop at different rows.
template <int kTeam>
__device__ __forceinline__ unsigned team_mask() {
  return kTeam == 32 ? 0xffffffffu : ((1u << kTeam) - 1) << (threadIdx.x % 32 / kTeam * kTeam);
}

// Reduces a team's kTeam values into its first lane.
template <class Op, int kTeam, class A>
__device__ __forceinline__ A team_reduce(A v) {
  const unsigned mask = team_mask<kTeam>();
#pragma unroll
  for (int offset = kTeam / 2; offset > 0; offset >>= 1) v = Op::combine(v, shfl_down(mask, v, offset, kTeam));
  return v;
}

// The sum of a team's values in every lane of it (butterfly: each lane adds the same pairs,
// so every lane has the same bits).
template <int kTeam, class A>
__device__ __forceinline__ A team_sum(A v) {
  const unsigned mask = team_mask<kTeam>();
#pragma unroll
  for (int offset = kTeam / 2; offset > 0; offset >>= 1) v += __shfl_xor_sync(mask, v, offset, kTeam);
  return v;
}

// Rows, a team of kTeam lanes (a power of two up to 32) per row.
template <class R, int kTeam>
__global__ void __launch_bounds__(kRowsBlock, kTeamMinBlocks<R, kTeam>)
rows_kernel(const typename R::In* x, Layout3 l, Sink out) {
  using Op = typename R::Op;
  const int t = threadIdx.x % kTeam;
  constexpr int64_t kRowsPerBlock = kRowsBlock / kTeam;
  int64_t o = blockIdx.x * kRowsPerBlock + threadIdx.x / kTeam;
  // The first row's address before the wait, as small_kernel's indexes. Mixed in CUDA graphs,
  // H200: rows reached through two outer runs 8-13% faster, others up to 11% slower (var_mean over
  // rows of 512 float32 5.28 -> 5.88 us, sums over (512, 1024) float32 2.20 -> 2.31); kept as the
  // build the tests and results come from, to be limited to several outer runs when measured.
  const typename R::In* row = x + (o < l.outer ? l.outer_in(o) : 0);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // (The wait returns at once where the launch was plain: teams of 16 and 32 are launched with
  // programmatic dependence only in small grids, see run_rows; they never let the next kernel
  // launch early.)
  cudaGridDependencySynchronize();
  if constexpr (kTeam <= kDependentTeam) cudaTriggerProgrammaticLaunchCompletion();
#endif
  while (o < l.outer) {
    auto v = row_part<R, kTeam, kGroupRows<R>>(row, 0, l.reduced, l.in_reduced, t);
    v = team_reduce<Op, kTeam>(v);
    if (t == 0) store_acc<Op>(out, l.outer_out(o), v);
    o += int64_t(gridDim.x) * kRowsPerBlock;
    if (o < l.outer) row = x + l.outer_in(o);
  }
}

// Whole short rows: every row exactly kTeam * kLoads aligned 16-byte vectors, a team of kTeam
// lanes a row and a row a team (no loop), each lane's kLoads vectors loaded at once. The same
// work as rows_kernel's, without its general row (head, tail, groups of four, predicated rest):
// 18-32 registers against 56, so 8 blocks a multiprocessor instead of 4-6, and twice the lanes
// a row with half the loads each. Hot / cold us on the H100 (A/B in one process, against
// rows_kernel's teams of 4 lanes x 4 loads and 8 x 4): bfloat16 rows of 128 3.99 / 9.8 ->
// 3.30 / 9.34 (torch.compile 3.81-4.05 / 9.41-9.50); float32 rows of 128 5.83 / 14.9 -> 5.41 /
// 14.55 (6.64-6.85 / 15.2-15.3); bfloat16 rows of 64 5.32 / 10.43 -> 3.33 / 9.35 (3.73 / 9.3).
// Blocks of 64 threads (torch.compile's shape for these rows) were 2-7x slower. Every operator
// but the indexed ones (a position an element) takes them. Against rows_kernel, hot / cold us:
// float32 rows of 128, nansum 6.73 / 14.90 -> 5.47 / 14.47, prod 6.43 / 14.80 -> 5.39 / 14.46,
// 2-norm 6.35 / 14.74 -> 5.39 / 14.43; bfloat16 rows of 64, prod 5.31 / 10.37 -> 3.33 / 9.28.
// Welford's and logsumexp's reduce a lane's loads together (kGroupRows), then the team
// combines: float32 var over rows of 128 7.28 / 15.44 -> 6.21 / 15.06 (torch.compile 7.07 /
// 15.62), rows of 256 7.24 / 15.25 -> 6.5 / 15.1. With eight lanes of two loads (float32 rows of
// 64, bfloat16 rows of 128) and bfloat16 rows of 256 they are 3-9% slower hot, level to 3%
// faster cold (float32 std_mean over rows of 64 9.0 / 15.7 -> 9.8 / 15.3; bfloat16 var over rows
// of 128 5.30 / 10.30 -> 5.50 / 10.10; logsumexp of bfloat16 rows of 256 2% slower cold):
// rows_kernel's teams of four lanes make fewer combines. Welford's now takes two passes over
// the row in the team's registers where a lane holds up to 16 values (below).
template <class R>
inline constexpr bool kWholeRows = !is_indexed_v<typename R::Op> && sizeof(typename R::Acc) <= 16 &&
                                   (std::is_same_v<typename R::In, float> || Lowp<typename R::In>::value);
// The 16-byte loads of each row where whole_rows_kernel takes a layout: rows (inner == 1, one
// reduced run) of 1, 2, 4, ..., 64 whole aligned vectors, contiguous; else 0. run_rows launches
// it and run_reduce keeps such rows from the small kernel, by this one test.
template <class R>
int64_t whole_rows_loads(const Layout3& l, const void* in) {
  if constexpr (!kWholeRows<R>) {
    return 0;
  } else {
    constexpr int64_t kPer = 16 / int64_t(sizeof(typename R::In));
    const int64_t loads = l.reduced / kPer;
    const bool whole = l.combine == 1 && l.inner == 1 && l.in_reduced == 1 && l.reduced % kPer == 0 &&
                       reinterpret_cast<uintptr_t>(in) % 16 == 0 && l.outer_strides_multiple_of(kPer);
    return whole && loads >= 1 && loads <= 64 && (loads & (loads - 1)) == 0 ? loads : 0;
  }
}

template <class R, int kTeam, int kLoads>
__global__ void __launch_bounds__(kRowsBlock, 2048 / kRowsBlock)
whole_rows_kernel(const typename R::In* x, Layout3 l, Sink out) {
  using Op = typename R::Op;
  constexpr int64_t kPer = 16 / int64_t(sizeof(typename R::In));
  const int t = threadIdx.x % kTeam;
  const int64_t o = int64_t(blockIdx.x) * (kRowsBlock / kTeam) + threadIdx.x / kTeam;
  if (o >= l.outer) return;  // whole teams
  // The row's address and its result's place before the wait, as small_kernel's indexes (CUDA
  // graphs, H200, sums over 1024 bfloat16 rows of 128: 1.05 -> 0.98 us).
  const auto* v = reinterpret_cast<const uint4*>(x + l.outer_in(o)) + t;
  const int64_t at = l.outer_out(o);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();  // as rows_kernel's short rows
  cudaTriggerProgrammaticLaunchCompletion();
#endif
  uint4 r[kLoads];
#pragma unroll
  for (int u = 0; u < kLoads; ++u) r[u] = __ldg(v + u * kTeam);
  auto acc = Op::identity();
  if constexpr (HasRowPasses<Op>::value && kLoads * kPer <= 16 && kTeam >= 8) {
    // The row is in the team's registers: Welford's as two passes over it (VarOp::row_mean,
    // from_deviations), each value converted again in the second; the pivot is the row's first.
    // Hot / cold us against the groups and the team's combines (H100): float32 var over rows of
    // 64 8.82 / 15.2 -> 7.76 / 14.7, of 128 6.32 / 15.05 -> 6.0 / 14.95, of 256 6.5 / 15.2 ->
    // 6.05 / 15.0; bfloat16 var over rows of 128 5.47 / 10.17 -> 5.0 / 9.84 (torch.compile's
    // persistent kernel, the same two passes, 4.32 / 9.70). Teams of four (rows of 8 vectors)
    // keep the groups (float32 rows of 32 8.4 -> 8.85 hot), and so do 32 values a lane
    // (bfloat16 rows of 256 and 512: they spilled).
    using A = typename R::Value;
    // Each of the lane's values, in order, to f.
    const auto for_each_value = [&](auto f) {
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {
        A v[kPer];
        convert_vector<typename R::In, typename R::Mid>(r[u], v);
#pragma unroll
        for (int j = 0; j < kPer; ++j) f(v[j]);
      }
    };
    const A count = A(kTeam * kLoads * kPer);
    const A pivot = __shfl_sync(team_mask<kTeam>(), R::value(reinterpret_cast<const typename R::In*>(&r[0])[0]), 0, kTeam);
    A s = A(0);
    for_each_value([&](A v) { s += v - pivot; });
    const A mean = Op::row_mean(pivot, team_sum<kTeam>(s), count);
    A d1 = A(0), d2 = A(0);
    for_each_value([&](A v) {
      const A d = v - mean;
      d1 += d;
      d2 += d * d;
    });
    acc = Op::from_deviations(mean, team_sum<kTeam>(d1), team_sum<kTeam>(d2), count);
    if (t == 0) store_acc<Op>(out, at, acc);
    return;
  }
  if constexpr (kGroupRows<R>) {
    acc = reduce_loads<R>(r);
  } else {
#pragma unroll
    for (int u = 0; u < kLoads; ++u) vector_into<R>(acc, r[u], int64_t(t + u * kTeam) * kPer);
  }
  acc = team_reduce<Op, kTeam>(acc);
  if (t == 0) store_acc<Op>(out, at, acc);
}

// Combines p[j * stride] for j = first, first + step, ... below `count`, in that order, kLoads
// partials loaded before any is combined (the last few together too): one round trip to L2 for
// kLoads of them, where a load, its combine, then the next load made one each. Same order as
// one at a time, so the same bits. kFromL2: loads past L1 (load_cg).
template <class R, int kLoads, bool kFromL2 = false>
__device__ __forceinline__ typename R::Acc combine_strided(const typename R::Acc* p, int64_t stride, int first,
                                                           int step, int count) {
  using Op = typename R::Op;
  const auto at = [&](int k) {
    if constexpr (kFromL2) return load_cg(p + int64_t(k) * stride);
    else return p[int64_t(k) * stride];
  };
  auto v = Op::identity();
  int j = first;
  for (; j + (kLoads - 1) * step < count; j += kLoads * step) {
    typename R::Acc q[kLoads];
#pragma unroll
    for (int u = 0; u < kLoads; ++u) q[u] = at(j + u * step);
#pragma unroll
    for (int u = 0; u < kLoads; ++u) v = Op::combine(v, q[u]);
  }
  if (j < count) {  // fewer than kLoads left
    typename R::Acc q[kLoads - 1];
#pragma unroll
    for (int u = 0; u < kLoads - 1; ++u) q[u] = j + u * step < count ? at(j + u * step) : Op::identity();
#pragma unroll
    for (int u = 0; u < kLoads - 1; ++u)
      if (j + u * step < count) v = Op::combine(v, q[u]);
  }
  return v;
}

// Block b's share of long rows: segment b % segments of row b / segments, reduced by the block
// (the result in thread 0, as block_reduce leaves it).
template <class R>
__device__ __forceinline__ typename R::Acc segment_part(const typename R::In* x, const Layout3& l, int64_t per_segment,
                                                        int segments) {
  const int64_t o = blockIdx.x / segments;
  const int64_t begin = (blockIdx.x % segments) * per_segment;
  const int64_t end = min64(l.reduced, begin + per_segment);
  auto v = row_part<R, kSegmentBlock, kGroupLoads<R>>(x + l.outer_in(o), begin, end, l.in_reduced, threadIdx.x);
  return block_reduce<typename R::Op, kSegmentBlock>(v);
}

// Long rows: block b reduces segment b % segments of row b / segments. With one segment it
// writes the result, else the block's partial at index b, which row_partials_kernel combines.
// `whole`: one segment a row, every row whole aligned 16-byte vectors (run_rows checked): the
// block issues its loads first, with no division of the block index and no head or tail.
template <class R>
__global__ void __launch_bounds__(kSegmentBlock)
row_segments_kernel(const typename R::In* x, Layout3 l, int64_t per_segment, int segments, bool whole, Sink out) {
  if (whole) {
    auto acc = R::Op::identity();
    vectors_into<R, kSegmentBlock, kGroupLoads<R>>(acc, reinterpret_cast<const uint4*>(x + l.outer_in(blockIdx.x)),
                                                   l.reduced / (16 / int64_t(sizeof(typename R::In))), 0, threadIdx.x);
    acc = block_reduce<typename R::Op, kSegmentBlock>(acc);
    if (threadIdx.x == 0) store_acc<typename R::Op>(out, l.outer_out(blockIdx.x), acc);
    return;
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // With a combine kernel after it, launched with programmatic dependence as the full sums'
  // grid kernel: it waits for the kernel before it, then lets the combine launch (CUDA-graph
  // replays of (128, 65536) float32 over dim -1: 8.0 -> 7.2 us a call). Not with none: the next
  // kernel on the stream (launched normally) started ~0.15 us later after a trigger.
  if (segments > 1) {
    cudaGridDependencySynchronize();
    cudaTriggerProgrammaticLaunchCompletion();
  }
#endif
  const auto v = segment_part<R>(x, l, per_segment, segments);
  const int64_t o = blockIdx.x / segments;
  if (threadIdx.x == 0) store_acc<typename R::Op>(out, segments == 1 ? l.outer_out(o) : int64_t(blockIdx.x), v);
}

// Many rows of exactly two 16-byte vectors a thread of a kSegmentBlock block (float32 rows of
// 4096, 2-byte rows of 8192), whole and aligned: a block a row, both loads issued at once and
// marked evict-first (ld.global.cs: read once, they need not push anything else out of L2), as
// torch.compile's kernel marks its loads. (4096, 4096) float32 over dim -1 on the H100: 22.9 us
// hot, 24.7 cold, against 23.2-23.6 and 24.9-25.1 through row_segments_kernel's `whole` branch,
// and 23.2 / 24.9 with the same loads there (a kernel of its own does better). Combined in the
// branch's order: the same bits. Welford's (16 bytes) reduces a thread's two loads together in
// registers (reduce_loads, as whole_rows_kernel does), then one combine a level of the block.
template <class R>
__global__ void __launch_bounds__(kSegmentBlock)
two_vector_rows_kernel(const typename R::In* x, Layout3 l, Sink out) {
  using Op = typename R::Op;
  constexpr int64_t kPer = 16 / int64_t(sizeof(typename R::In));
  const auto* v = reinterpret_cast<const uint4*>(x + l.outer_in(blockIdx.x)) + threadIdx.x;
  const uint4 r0 = __ldcs(v), r1 = __ldcs(v + kSegmentBlock);
  auto acc = Op::identity();
  if constexpr (kGroupRows<R> && sizeof(typename R::Acc) > 8) {
    const uint4 r[2] = {r0, r1};
    acc = reduce_loads<R>(r);
  } else {
    vector_into<R>(acc, r0, int64_t(threadIdx.x) * kPer);
    vector_into<R>(acc, r1, int64_t(threadIdx.x + kSegmentBlock) * kPer);
  }
  acc = block_reduce<Op, kSegmentBlock>(acc);
  if (threadIdx.x == 0) store_acc<Op>(out, l.outer_out(blockIdx.x), acc);
}

// The same with the rows' combine in it, for eager calls (see run_rows): each block writes its
// partial, then takes a number from its row's ticket word (0 between calls; the last block
// sets it back to 0), and the row's last block combines the row's partials into `out` with
// row_partials_kernel's arithmetic, so the same bits. A kernel of its own: with the combine in
// the kernel above, 16 of its 149 instantiations took enough registers more to lose a block a
// multiprocessor (4 to 3, 3 to 2; ptxas, sm_90), which CUDA graphs would have paid too. The
// combine inline (out of line, the call took 40 registers for float32 sums here, against 31).
// With the caches cold it is up to 0.45 us slower than the two kernels (a one-row argmax of
// 2^26, 3.3 us), and an eager loop of calls 2-3 us a call faster (benchmarks/NOTES.md).
template <class R>
__global__ void __launch_bounds__(kSegmentBlock)
row_segments_ticket_kernel(const typename R::In* x, Layout3 l, int64_t per_segment, int segments,
                           typename R::Acc* partials, unsigned* tickets, Sink out) {
  using Op = typename R::Op;
  const auto v = segment_part<R>(x, l, per_segment, segments);
  const int64_t o = blockIdx.x / segments;
  __shared__ bool last;
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = v;
    last = ticket_inc(tickets + o, unsigned(segments) - 1) == unsigned(segments) - 1;  // wraps to 0
  }
  __syncthreads();  // the first thread's acquire is the block's
  if (!last || threadIdx.x >= 32) return;
  // Past L1 (other blocks wrote them during this grid); eight loads in flight as
  // row_partials_kernel, two for accumulators of other sizes (1, 2 or more than 8 bytes), which
  // took more registers with eight.
  constexpr int kLoads = sizeof(typename R::Acc) % 4 == 0 && sizeof(typename R::Acc) <= 8 ? 8 : 2;
  auto w = combine_strided<R, kLoads, true>(partials + o * segments, 1, int(threadIdx.x), 32, segments);
  w = warp_reduce<Op>(w);
  if (threadIdx.x == 0) store_acc<Op>(out, l.outer_out(o), w);
}

// A combine kernel (after its wait) lets the next call's first kernel launch, which then waits
// for it, only when its grid is a few blocks. Hot, (65536, 128) float32 over dim 0 (4 blocks)
// took 8.5 us a call with the trigger against 9.2 without; (4096, 4096) bfloat16 over dim 0
// (128 blocks of 1024 threads, one on most multiprocessors) 10.0-10.3 against 9.2, the next
// call's blocks most likely placed around the waiting ones.
inline constexpr unsigned kChainBlocks = 16;
__device__ __forceinline__ void chain_next_call() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (gridDim.x <= kChainBlocks) cudaTriggerProgrammaticLaunchCompletion();
#endif
}

// A warp per row combines that row's segment partials, in segment order.
template <class R>
__global__ void __launch_bounds__(kRowsBlock)
row_partials_kernel(const typename R::Acc* partials, int segments, Layout3 l, Sink out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();  // the segments kernel has finished; its writes are visible
  chain_next_call();
#endif
  using Op = typename R::Op;
  const int64_t o = int64_t(blockIdx.x) * (kRowsBlock / 32) + threadIdx.x / 32;
  if (o >= l.outer) return;  // whole warps
  const unsigned lane = threadIdx.x % 32;
  // Eight partials at a time: a whole tensor of an indexed operator is one row of ~500
  // segments, and a load, then its combine, then the next load made 16 round trips to L2 (argmax
  // of 2^26 float32: 101.8 us against the probe's 86.4, with the per-element operator).
  auto v = combine_strided<R, 8>(partials + o * segments, 1, int(lane), 32, segments);
  v = warp_reduce<Op>(v);
  if (lane == 0) store_acc<Op>(out, l.outer_out(o), v);
}

// Columns: thread (x, y) of block (b, split) owns outputs i0 .. i0 + V - 1 of outer index
// o (b = o * column_blocks + column block; i0 counted from `first`) and combines rows
// split * per_split + y, + Y, ... of them, U loads in flight; threads with i0 >= `end` own
// none. V > 1 only when the caller checked that every row of [first, end) is whole aligned
// vectors of V elements (16 or 8 bytes; the last outputs of a row, fewer than V, are another
// launch with V = 1). The Y threads of a column are combined in y order; with one split that
// is the result, else the split's partial, at [split][o][i].
// Kept lean on purpose: with the partial-vector path inside, 64-bit division for o and one
// store per output, bfloat16 took 62 registers and was 5-10% slower than torch on
// (128, 65536) and (32, 4096, 4096) over dim 0; now 1.00x and 1.07x.
template <class R, int V, int U>
__global__ void __launch_bounds__(kColumnsBlock, kMinBlocksOf<R>)
columns_kernel(const typename R::In* x, Layout3 l, unsigned column_blocks, int64_t first, int64_t end,
               int64_t per_split, Sink out) {
  using In = typename R::In;
  using Op = typename R::Op;
  using Acc = typename R::Acc;
  constexpr int kBytes = V * int(sizeof(In));
  static_assert(V == 1 || kBytes == 16 || kBytes == 8, "elements, or 16- or 8-byte vectors");
  using Load = std::conditional_t<V == 1, In, std::conditional_t<kBytes == 16, uint4, uint2>>;
  const unsigned o = blockIdx.x / column_blocks;  // 32-bit: the grid's x is below 2^31
  const int X = blockDim.x, Y = blockDim.y;
  // The first output of column c of the block, and where output i of outer index o goes: the
  // split's partial at [split][o][i], or the result.
  const auto column_output = [&](int c) { return first + (int64_t(blockIdx.x - o * column_blocks) * X + c) * V; };
  const auto out_at = [&](int64_t i) {
    return gridDim.y > 1 ? (int64_t(blockIdx.y) * l.outer + o) * l.inner + i : l.outer_out(o) + i * l.out_inner;
  };
  const int64_t i0 = column_output(threadIdx.x);
  const int64_t r_end = min64(l.reduced, (blockIdx.y + 1) * per_split);
  Acc acc[V];
#pragma unroll
  for (int j = 0; j < V; ++j) acc[j] = Op::identity();
  // Row `r` of the reduced dim (its position, for indexed operators).
  const auto add = [&](const Load& v, int64_t r) {
    if constexpr (V == 1) {
      element_into<R>(acc[0], v, r);
    } else {
      typename R::Value t[16 / sizeof(In)];
      if constexpr (kBytes == 16) convert_vector<In, typename R::Mid>(v, t);
      else convert_vector<In, typename R::Mid>(uint4{v.x, v.y, 0u, 0u}, t);  // the upper half unused
#pragma unroll
      for (int j = 0; j < V; ++j) {
        if constexpr (is_indexed_v<Op>) acc[j] = Op::reduce_at(acc[j], t[j], r);
        else acc[j] = Op::reduce(acc[j], t[j]);
      }
    }
  };
  constexpr bool kPacked = V == 16 && kPackedColumns<R>;
  // kPacked: outputs 4k, 4k + 2 in the halves of lanes[2k], 4k + 1, 4k + 3 in lanes[2k + 1].
  uint32_t lanes[kPacked ? 8 : 1] = {};
  int pending = 0;  // loads in the lanes: at most 257 of 255 fit 16 bits
  const auto add_packed = [&](const Load& v) {
    if constexpr (kPacked) {
      const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const unsigned b = column_bytes<R>(w[k]);
        lanes[2 * k] += b & 0x00ff00ffu;
        lanes[2 * k + 1] += (b >> 8) & 0x00ff00ffu;
      }
    }
  };
  const auto flush = [&] {
    if constexpr (kPacked) {
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        acc[4 * k] += lanes[2 * k] & 0xffffu;
        acc[4 * k + 2] += lanes[2 * k] >> 16;
        acc[4 * k + 1] += lanes[2 * k + 1] & 0xffffu;
        acc[4 * k + 3] += lanes[2 * k + 1] >> 16;
        lanes[2 * k] = lanes[2 * k + 1] = 0;
      }
      pending = 0;
    }
  };
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // With splits a combine kernel follows: wait, then let it launch, as row_segments_kernel
  // ((65536, 128) float32 over dim 0, graph replays: 9.4 -> 8.4 us a call, with the combine's
  // own trigger, chain_next_call). Small grids launch the same way (run_columns); launched
  // plainly, both calls return at once. The wait comes after the indexes, as small_kernel's
  // (hot, H200: mean over dim 1 of (96, 128, 7) float32 1.90 -> 1.81 us, of (56, 512, 40)
  // bfloat16 2.78 -> 2.67; inf-norm over dim 0 of (224, 3, 768) bfloat16 2.63 -> 2.52).
  cudaGridDependencySynchronize();
  cudaTriggerProgrammaticLaunchCompletion();
#endif
  if (i0 < end) {
    int64_t r = blockIdx.y * per_split + threadIdx.y;
    // Rows r, r + Y, ..., r + (U - 1) Y: U loads in flight, each `step` elements on.
    const int64_t step = Y * l.in_reduced;
    const In* p = x + l.outer_in(o) + i0 * l.in_inner + r * l.in_reduced;
    const auto at = [&](int u) {
      if constexpr (V == 1) return p[u * step];
      else return __ldg(reinterpret_cast<const Load*>(p + u * step));
    };
    for (; r + (U - 1) * Y < r_end; r += U * Y, p += U * step) {
      Load v[U];
#pragma unroll
      for (int u = 0; u < U; ++u) v[u] = at(u);
      if constexpr (kGroupLoads<R>) {
        // Each output's U values reduced together, then one combine (see kGroupLoads).
        typename R::Value t[U][V];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          if constexpr (V == 1) {
            t[u][0] = R::value(v[u]);
          } else {
            typename R::Value w[16 / sizeof(In)];
            if constexpr (kBytes == 16) convert_vector<In, typename R::Mid>(v[u], w);
            else convert_vector<In, typename R::Mid>(uint4{v[u].x, v[u].y, 0u, 0u}, w);
#pragma unroll
            for (int j = 0; j < V; ++j) t[u][j] = w[j];
          }
        }
#pragma unroll
        for (int j = 0; j < V; ++j) {
          typename R::Value column[U];
#pragma unroll
          for (int u = 0; u < U; ++u) column[u] = t[u][j];
          acc[j] = Op::combine(acc[j], reduce_values<Op>(column));
        }
      } else if constexpr (kPacked) {
#pragma unroll
        for (int u = 0; u < U; ++u) add_packed(v[u]);
        pending += U;
        if (pending > 256 - U) flush();
      } else {
#pragma unroll
        for (int u = 0; u < U; ++u) add(v[u], r + u * Y);
      }
    }
    if (r < r_end) {  // the last rows, loaded together
      Load v[U];
#pragma unroll
      for (int u = 0; u < U; ++u) v[u] = r + u * Y < r_end ? at(u) : Load{};
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if constexpr (kPacked) add_packed(v[u]);  // (loads not made are zeros: they count nothing)
        else if (r + u * Y < r_end) add(v[u], r + u * Y);
      }
    }
    flush();
  }

  // Output j of thread t is parked at [j][t]: a warp's accesses are consecutive words, free of
  // bank conflicts (at [t][j] they were V-way conflicts).
  __shared__ Acc parked[V][kColumnsBlock];
  const int t = threadIdx.y * X + threadIdx.x;
  if (Y > 1 && X < 32) {
    // A warp holds 32 / X rows of the same X columns: shuffles combine them (lane l with lane
    // l + offset, offsets 16 down to X: fixed pairs, deterministic), then the first X lanes of
    // each warp park the warp's values and the warps are combined in order. One barrier where
    // the tree over y below takes log2(Y). Hot on the H100: bfloat16 (65536, 64) over dim 0
    // 5.63 -> 5.22 us, (65536, 32) 4.54 -> 3.85, (2^20, 16) 9.46 -> 8.92; nothing slower.
    const int lane = t % 32, warp = t / 32;
#pragma unroll
    for (int j = 0; j < V; ++j) acc[j] = warp_reduce<Op>(acc[j], X);
    const int warps = X * Y / 32;
    if (warps > 1) {
      if (lane < X) {
#pragma unroll
        for (int j = 0; j < V; ++j) parked[j][warp * X + lane] = acc[j];
      }
      __syncthreads();
      if (V > 1 && V <= Y) {
        // Each of V * X threads combines one output over the warps, in warp order (the same
        // order, so the same bits, as one thread a column) and stores it: with one thread a
        // column, X threads each made V * (warps - 1) shared-memory loads and V stores while
        // the rest of the block waited. Hot / cold us, H100: (4096, 4096) bool all over dim 0
        // 9.69 / 16.1 -> 8.15 / 14.6, uint8 sum 9.62 / 16.16 -> 8.19 / 14.85, var of bfloat16
        // 18.17 / 22.88 -> 16.05 / 20.93; uint8 (2^20, 16) 10.55 / 17.31 -> 9.95 / 16.84; the
        // rest level (uint8's 16 int64 outputs a thread also spilled 64 bytes before, 8 now).
        if (t >= V * X) return;
        const int j = t / X, c = t % X;
        Acc v = parked[j][c];
        for (int w = 1; w < warps; ++w) v = Op::combine(v, parked[j][w * X + c]);
        const int64_t i = column_output(c);
        if (i < end) store_acc<Op>(out, out_at(i + j), v);
        return;
      }
      if (threadIdx.y > 0) return;
      for (int w = 1; w < warps; ++w) {
#pragma unroll
        for (int j = 0; j < V; ++j) acc[j] = Op::combine(acc[j], parked[j][w * X + threadIdx.x]);
      }
    } else if (threadIdx.y > 0) {
      return;
    }
  } else if (Y > 1) {
    // The Y threads of each column combine as a tree over y (fixed pairs: deterministic):
    // log2(Y) steps for every thread instead of Y - 1 steps for one.
#pragma unroll
    for (int j = 0; j < V; ++j) parked[j][t] = acc[j];
    for (int step = Y / 2; step > 0; step /= 2) {
      __syncthreads();
      if (int(threadIdx.y) < step) {
#pragma unroll
        for (int j = 0; j < V; ++j) parked[j][t] = acc[j] = Op::combine(acc[j], parked[j][t + step * X]);
      }
    }
    if (threadIdx.y > 0) return;
  }
  if (i0 >= end) return;
  if (gridDim.y > 1 || (V > 1 && l.out_inner == 1)) {  // consecutive outputs
    store_run<Op>(out, out_at(i0), acc);
  } else {
#pragma unroll
    for (int j = 0; j < V; ++j) store_acc<Op>(out, out_at(i0 + j), acc[j]);
  }
}

// Small reductions (up to kSmallElements elements in all, kSmallCount a result), any layout, in
// one kernel: a team of 2^team_bits threads a result (a part of a warp, or up to the whole block),
// each thread's loads issued together, kSmallLoads at a time (16-byte vectors where each result's
// elements are runs of whole aligned vectors), the team combined by shuffles, then across its
// warps in order. Indexes through SmallIndex (a multiply and a shift a run), so several reduced
// runs need no second pass and no partials. A small reduction's time is the launch, the reads of
// its parameters, the instructions of one warp issued one after another, and a round trip to L2:
// the rows and columns kernels took up to three round trips more (a column's rows four loads at
// a time) and a second kernel for splits (sum((128, 17), dim=0) of bfloat16: 2.6 us in CUDA
// graphs, torch.compile's one kernel 1.2). The three ways to the elements are separate loops: in
// one, each load sat behind its own branches of the index arithmetic (SASS), one load issued
// every ~60 instructions.
inline constexpr int kSmallBlock = 256;
inline constexpr int kSmallLoads = 8;
inline constexpr int64_t kSmallElements = int64_t(1) << 16;
inline constexpr int64_t kSmallCount = int64_t(kSmallBlock) * kSmallLoads * 4;  // four rounds of loads
// Vector loads a thread the team is sized for (single elements: kSmallLoads). A vector is 2 to 16
// conversions and combines, longer than one more level of shuffles: in CUDA graphs, H200, a copy
// of the kernel, bfloat16 sums over rows of 128 (16 vectors), 14 rows 1.15 -> 1.03 us with teams
// of 8 lanes instead of 2, 512 rows 1.68 -> 1.22. A single element is one combine: teams sized
// for 2 of them were 0.03-0.12 us slower than for 8 (rows of 3, columns of 40).
inline constexpr int kSmallVectorLoads = 2;

// IndexedLayout in 32 bits (the launcher checks that every offset is below 2^31), packed: each
// launch's parameters are new to the constant cache, so each line of them the kernel reads is a
// miss on its critical path, and a small kernel's warp issues its instructions one after another
// (ncu: 301 instructions a warp for mean over (4, 3), torch.compile's kernel 50). A copy of the
// kernel in CUDA graphs, H200, mean over (4, 3) bfloat16: 1.33 us a call with IndexedLayout's
// 64-bit fields (300 bytes) and arithmetic, 1.18 with 32-bit arithmetic.
struct SmallRun {
  int32_t size, in;
  uint32_t magic, shift;
};
struct SmallIndex {
  int32_t outputs, count, kept_runs, reduced_runs;
  SmallRun kept[kMaxOuterRuns], reduced[kMaxOuterRuns];
};

// The offset of index k of runs r[0, runs) (r[0] outermost), as RunIndex::in_offset.
__device__ __forceinline__ int32_t small_offset(const SmallRun* r, int runs, int32_t k) {
  uint32_t n = uint32_t(k);
  int32_t offset = 0;
#pragma unroll
  for (int q = kMaxOuterRuns - 1; q > 0; --q) {
    if (q < runs) {
      const uint32_t d = (__umulhi(n, r[q].magic) + n) >> r[q].shift;
      offset += int32_t(n - d * uint32_t(r[q].size)) * r[q].in;
      n = d;
    }
  }
  return offset + int32_t(n) * r[0].in;
}

// Each thread's result, first element and step between loads (one reduced run) are worked out
// from the parameters before the kernel waits for the one before it (programmatic dependence), so
// that arithmetic overlaps the previous kernel instead of following it (ncu: ~240 instructions a
// warp over rows of 3, one after another). In CUDA graphs, H200, bfloat16 sums through run_reduce:
// rows of 3 1.20 -> 0.88 us, columns of 12 1.37 -> 1.07, 14 rows of 128 1.42 -> 1.10 (and the
// team above), with a pointer and a step instead of an index a load, and the Sink first among the
// parameters (0.03-0.08 of it in a copy of the kernel: its fields, read at the store, then share
// the constant lines read first).
template <class R>
__global__ void __launch_bounds__(kSmallBlock)
small_kernel(Sink out, const typename R::In* x, int team_bits, bool vectors, SmallIndex l) {
  using Op = typename R::Op;
  using In = typename R::In;
  constexpr int32_t kPer = 16 / int32_t(sizeof(In));
  const int32_t k = int32_t((blockIdx.x * blockDim.x + threadIdx.x) >> team_bits);
  const int32_t team = 1 << team_bits, lane = threadIdx.x & (team - 1);
  const int32_t count = l.count;
  // Threads past the last result stay for the shuffles and the barrier.
  const bool live = k < l.outputs;
  const In* base = x + (live ? small_offset(l.kept, l.kept_runs, k) : 0);
  // One reduced run (or none: one element a result): the thread's first element and the step
  // between its loads, in elements.
  const int32_t unit = vectors ? kPer : l.reduced[0].in;
  const In* first = base + lane * unit;
  const int32_t step = team * unit;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // As small_sum_kernel's: the next kernel may launch at once (it waits for this one's end).
  cudaTriggerProgrammaticLaunchCompletion();
  cudaGridDependencySynchronize();
#endif
  auto acc = Op::identity();
  // A group of kSmallLoads elements j, j + team, ... (at(u, i): the group's element u, i = j + u *
  // team), all loaded before any is used; i is also the position indexed operators keep.
  const auto group = [&](int32_t j, auto at) {
    In e[kSmallLoads];
#pragma unroll
    for (int u = 0; u < kSmallLoads; ++u) e[u] = j + u * team < count ? at(u, j + u * team) : In();
    if constexpr (kGroupLoads<R>) {
      if (j + (kSmallLoads - 1) * team < count) {  // a whole group: one combine (see kGroupLoads)
        typename R::Value t[kSmallLoads];
#pragma unroll
        for (int u = 0; u < kSmallLoads; ++u) t[u] = R::value(e[u]);
        acc = Op::combine(acc, reduce_values<Op>(t));
        return;
      }
    }
#pragma unroll
    for (int u = 0; u < kSmallLoads; ++u)
      if (j + u * team < count) element_into<R>(acc, e[u], j + u * team);
  };
  // The same for the vectors v, v + team, ... below n (at(u, w): the address of vector w, the
  // group's u).
  const auto vector_group = [&](int32_t v, int32_t n, auto at) {
    uint4 r[kSmallLoads];
    bool in_range[kSmallLoads];
#pragma unroll
    for (int u = 0; u < kSmallLoads; ++u) {
      in_range[u] = v + u * team < n;
      r[u] = in_range[u] ? __ldg(at(u, v + u * team)) : uint4{};
    }
    if constexpr (kGroupLoads<R>) {
      if (in_range[kSmallLoads - 1]) {
        acc = Op::combine(acc, reduce_loads<R>(r));
        return;
      }
    }
#pragma unroll
    for (int u = 0; u < kSmallLoads; ++u)
      if (in_range[u]) vector_into<R>(acc, r[u], (v + u * team) * kPer);
  };
  if (!live) {            // nothing to read
  } else if (vectors) {  // whole aligned vectors: the innermost reduced run is a multiple of them
    const int32_t n = count / kPer;
    if (l.reduced_runs <= 1) {
      const In* p = first;
      for (int32_t v = lane; v < n; v += team * kSmallLoads, p += step * kSmallLoads)
        vector_group(v, n, [&](int u, int32_t) { return reinterpret_cast<const uint4*>(p + u * step); });
    } else {  // the other runs through the index: (40, 256)[::2] of int16, all of it, 3.5 us a load at a time
      for (int32_t v = lane; v < n; v += team * kSmallLoads)
        vector_group(v, n, [&](int, int32_t w) {
          return reinterpret_cast<const uint4*>(base + small_offset(l.reduced, l.reduced_runs, w * kPer));
        });
    }
  } else if (l.reduced_runs <= 1) {  // one run: a stride
    const In* p = first;
    for (int32_t j = lane; j < count; j += team * kSmallLoads, p += step * kSmallLoads)
      group(j, [&](int u, int32_t) { return p[u * step]; });
  } else {
    for (int32_t j = lane; j < count; j += team * kSmallLoads)
      group(j, [&](int, int32_t i) { return base[small_offset(l.reduced, l.reduced_runs, i)]; });
  }
  const int in_warp = team < 32 ? team : 32;
  for (int offset = in_warp / 2; offset > 0; offset >>= 1)
    acc = Op::combine(acc, shfl_down(0xffffffffu, acc, offset, in_warp));
  if (team > 32) {  // the team's warps, in order
    __shared__ typename R::Acc by_warp[kSmallBlock / 32];
    if (threadIdx.x % 32 == 0) by_warp[threadIdx.x / 32] = acc;
    __syncthreads();
    if (lane == 0) {
      for (int w = 1; w < team / 32; ++w) acc = Op::combine(acc, by_warp[threadIdx.x / 32 + w]);
    }
  }
  if (live && lane == 0) store_acc<Op>(out, k, acc);
}

// Short reductions over many outputs (Layout3 with reduced <= kTileReduced) where the columns
// kernel's shape would leave most threads idle or the result is transposed against the input,
// and short rows that are not whole vectors: a thread an output, each issuing all of its loads
// at once. A block is a tile of 2^a_bits outputs along A times 256 >> a_bits along B, where A is
// the dim whose outputs are adjacent in the result (inner, or outer when the result is
// transposed against the input, or rows), so that the stores are whole runs; when A is not the
// input's contiguous dim, the tile's B rows read the rest of each sector, from L1. The columns
// kernel put its threads down the reduced dim and across a row's outputs, which here left most
// of them idle: var of (11008, 3, 16) over dim 1 ran 64 threads down a reduced dim of 3 and 4
// across, 11008 blocks of 256 threads.
inline constexpr int kTileBlock = 256;
inline constexpr int kTileReduced = 16;

// An output's elements as one aligned word of W (its reduced run contiguous, W bytes long).
template <class W, class In>
__device__ __forceinline__ void load_word(const In* p, In (&e)[kTileReduced]) {
  const W w = __ldg(reinterpret_cast<const W*>(p));
  constexpr int n = int(sizeof(W) / sizeof(In)) < kTileReduced ? int(sizeof(W) / sizeof(In)) : kTileReduced;
#pragma unroll
  for (int r = 0; r < n; ++r) memcpy(&e[r], reinterpret_cast<const char*>(&w) + r * sizeof(In), sizeof(In));
}

// `word`: 4, 8 or 16 where each output's reduced run is one aligned word of that many bytes
// (rows of 8 uint8, of 8 bfloat16, of 4 float32), loaded at once; 0, an element a load.
template <class R>
__global__ void __launch_bounds__(kTileBlock)
tile_kernel(const typename R::In* x, Layout3 l, int a_bits, bool a_is_outer, int word, Sink out) {
  using Op = typename R::Op;
  using In = typename R::In;
  const int64_t nA = a_is_outer ? l.outer : l.inner, nB = a_is_outer ? l.inner : l.outer;
  const int64_t a = int64_t(blockIdx.x) << a_bits | (threadIdx.x & ((1u << a_bits) - 1));
  int64_t b = int64_t(blockIdx.y) * (kTileBlock >> a_bits) + (threadIdx.x >> a_bits);
  // Output (a, b): its first element and its place in the result.
  const auto first = [&](const In*& p, int64_t& at) {
    const int64_t o = a_is_outer ? a : b, i = a_is_outer ? b : a;
    p = x + l.outer_in(o) + i * l.in_inner;
    at = l.outer_out(o) + i * l.out_inner;
  };
  // The first output's indexes before the wait, as small_kernel's.
  const In* p = x;
  int64_t at = 0;
  if (a < nA && b < nB) first(p, at);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
  cudaTriggerProgrammaticLaunchCompletion();
#endif
  if (a >= nA) return;
  for (bool next = false; b < nB; b += int64_t(gridDim.y) * (kTileBlock >> a_bits), next = true) {
    if (next) first(p, at);
    In e[kTileReduced];  // every load issued before any is used
    if (word == 16) {
      load_word<uint4>(p, e);
    } else if (word == 8) {
      load_word<uint2>(p, e);
    } else if (word == 4) {
      load_word<unsigned>(p, e);
    } else {
#pragma unroll
      for (int r = 0; r < kTileReduced; ++r) e[r] = r < l.reduced ? p[r * l.in_reduced] : In();
    }
    auto acc = Op::identity();
#pragma unroll
    for (int r = 0; r < kTileReduced; ++r)
      if (r < l.reduced) element_into<R>(acc, e[r], r);
    store_acc<Op>(out, at, acc);
  }
}

// Whether the result's adjacent outputs are along outer rather than inner (transposed against the
// input): tile_kernel's lanes then go along outer.
inline bool tiles_transposed(const Layout3& l) { return l.out_inner != 1 && l.outer > 1 && l.outer_out(1) == 1; }

// Short reductions whose result is transposed against the input, inner contiguous in the input
// (in_inner == 1) and outer in the result: a block reduces a tile of 32 * kV inner x 32 outer
// outputs with its lanes along inner (kV elements a lane, one load where aligned), the
// accumulators through shared memory, and stores them with its lanes along outer (each store a
// run of the result). The tile's 32 outer offsets are worked out once, into shared memory, and
// each thread's 4 rows' loads are in flight together: the first version of this kernel divided
// for every row and loaded one row at a time, ran issue-bound (SM 86%, DRAM 14%, ncu) and took
// 218 us for a float32 sum over the dim of 2 of (8, 2048, 1024, 2) (transposed from (8, 2, 1024,
// 2048); 66 us now, torch.compile 49). Over one element a result (a transposed map) it is also
// the kernel: int16 sum over the size-1 dim of (1, 31, 1024, 3072).permute(3, 2, 0, 1) 1657 ->
// 280 us (torch.compile 279); the tile kernel's lanes along outer read 32 sectors a load. (H200,
// CUDA graphs.)
inline constexpr int kTransposeTile = 32;
inline constexpr int kTransposeRows = 4;  // rows (outer indexes) a thread: 8 warps x 4 = 32
template <class R>
inline constexpr int kTransposeV = sizeof(typename R::In) <= 2 && sizeof(typename R::Acc) <= 8 ? 4 : 1;

template <int kBytes>
using LoadWord = std::conditional_t<kBytes == 16, uint4,
                 std::conditional_t<kBytes == 8, uint2, std::conditional_t<kBytes == 4, unsigned, unsigned short>>>;

template <class R>
__global__ void __launch_bounds__(kTileBlock)
transpose_tile_kernel(const typename R::In* x, Layout3 l, int64_t inner_tiles, bool words, Sink out) {
  using Op = typename R::Op;
  using In = typename R::In;
  using Acc = typename R::Acc;
  constexpr int kV = kTransposeV<R>, kO = kTransposeTile, kI = kTransposeTile * kV;
  constexpr int kRows = kTileBlock / kTransposeTile;  // 8 warps
  static_assert(kRows * kTransposeRows == kO, "a block's warps times its rows cover the tile's outer");
  __shared__ alignas(16) unsigned char raw[kO * (kI + 1) * sizeof(Acc)];
  __shared__ int64_t in_at[kO], out_at[kO];
  Acc* tile = reinterpret_cast<Acc*>(raw);
  const int tx = int(threadIdx.x) % kTransposeTile, ty = int(threadIdx.x) / kTransposeTile;
  const int64_t i0 = int64_t(blockIdx.x % inner_tiles) * kI, o0 = int64_t(blockIdx.x / inner_tiles) * kO;
  if (threadIdx.x < kO) {  // before the wait: the layout only
    const int64_t o = o0 + threadIdx.x;
    in_at[threadIdx.x] = o < l.outer ? l.outer_in(o) : 0;
    out_at[threadIdx.x] = o < l.outer ? l.outer_out(o) : 0;
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
  cudaTriggerProgrammaticLaunchCompletion();
#endif
  __syncthreads();
  const int64_t i = i0 + tx * kV, left = l.inner - i;  // this lane's elements that exist: min(kV, left)
  Acc acc[kTransposeRows][kV];
#pragma unroll
  for (int k = 0; k < kTransposeRows; ++k)
#pragma unroll
    for (int v = 0; v < kV; ++v) acc[k][v] = Op::identity();
  for (int64_t r = 0; r < l.reduced; ++r) {
    In e[kTransposeRows][kV];
#pragma unroll
    for (int k = 0; k < kTransposeRows; ++k) {
      const bool row = o0 + ty + k * kRows < l.outer;
      const In* p = x + in_at[ty + k * kRows] + r * l.in_reduced + i;
      if (kV > 1 && words && row && left >= kV) {
        const auto w = __ldg(reinterpret_cast<const LoadWord<kV * int(sizeof(In))>*>(p));
        memcpy(&e[k][0], &w, sizeof(w));
      } else {
#pragma unroll
        for (int v = 0; v < kV; ++v) e[k][v] = row && v < left ? p[v] : In();
      }
    }
#pragma unroll
    for (int k = 0; k < kTransposeRows; ++k)
#pragma unroll
      for (int v = 0; v < kV; ++v)
        if (o0 + ty + k * kRows < l.outer && v < left) element_into<R>(acc[k][v], e[k][v], r);
  }
#pragma unroll
  for (int k = 0; k < kTransposeRows; ++k)
#pragma unroll
    for (int v = 0; v < kV; ++v) tile[(ty + k * kRows) * (kI + 1) + tx * kV + v] = acc[k][v];
  __syncthreads();
#pragma unroll
  for (int q = 0; q < kI / kRows; ++q) {  // lanes along outer: warp ty stores inner ty, ty + 8, ...
    const int64_t at = i0 + ty + q * kRows;
    if (o0 + tx < l.outer && at < l.inner)
      store_acc<Op>(out, out_at[tx] + at * l.out_inner, tile[tx * (kI + 1) + ty + q * kRows]);
  }
}

// Reductions over one element a result (a reduced dim of size 1) whose input and result both
// run along inner: a map. Each thread takes kMapLoads elements kMapBlock apart, every load
// issued before any is used; the outer index steps in y. The columns kernel took such layouts
// with its threads down a reduced dim of one: var over the size-1 dim of (64, 1, 3,
// 151936).transpose(1, 2) float16 117 us, 80 registers, 13% of DRAM's peak (ncu, H200); this
// kernel 94 us, still a third of torch.compile's speed (29.5; not profiled yet).
inline constexpr int kMapBlock = 256;
inline constexpr int kMapLoads = 8;
template <class R>
__global__ void __launch_bounds__(kMapBlock)
map_kernel(const typename R::In* x, Layout3 l, Sink out) {
  using Op = typename R::Op;
  using In = typename R::In;
  const int64_t i0 = int64_t(blockIdx.x) * (kMapBlock * kMapLoads) + threadIdx.x;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
  cudaTriggerProgrammaticLaunchCompletion();
#endif
  for (int64_t o = blockIdx.y; o < l.outer; o += gridDim.y) {
    const In* p = x + l.outer_in(o);
    const int64_t at = l.outer_out(o);
    In e[kMapLoads];
#pragma unroll
    for (int u = 0; u < kMapLoads; ++u) e[u] = i0 + u * kMapBlock < l.inner ? p[i0 + u * kMapBlock] : In();
#pragma unroll
    for (int u = 0; u < kMapLoads; ++u) {
      if (i0 + u * kMapBlock < l.inner) {
        auto acc = Op::identity();
        element_into<R>(acc, e[u], 0);
        store_acc<Op>(out, at + i0 + u * kMapBlock, acc);
      }
    }
  }
}

// Dense slabs: each outer index's elements are one contiguous [reduced][inner] block of S =
// reduced * inner elements (rows not whole vectors, short columns, columns narrower than a few
// sectors). A block copies G whole slabs into shared memory with coalesced loads (16-byte ones
// where the slabs follow each other in memory), then teams of 1 to 32 lanes reduce each of the
// G * inner outputs from there, in order. tile_kernel and columns_kernel read such layouts one
// element of a sector per lane and per load and were latency-bound at 7-16% of DRAM's peak
// (ncu). Hot, H200, before -> after (torch.compile): mean over dim 1 of (17, 7, 151936) bfloat16
// transposed to rows of 7, 38 -> 21.6 us (8.4); argmax over rows of 7 of (5120, 64, 8, 7)
// bfloat16 45.7 -> 26.7 (16.6); amax over dim 2 of (1024, 28, 128, 7) int8 57 -> 12.1 (18.5);
// sum over dim 1 of (49152, 3, 128) int64 103 -> 55 (47); argmin over dim 1 of (49, 80, 1, 3)
// bfloat16 expanded to 4096 on dim 2, 560 -> 112 (56). Rows of 7 still trail torch.compile's
// kernel, which keeps a row's elements in one thread's registers without the shared memory pass.
inline constexpr int kSlabBlock = 256;
inline constexpr int kSlabBytes = 8192;

struct SlabShape {
  int64_t slab;     // S, elements
  int slabs;        // G, a block's
  int team_bits;    // lanes an output
  bool linear;      // slab o at o * S: a block's slabs are one run of memory
  bool vectors;     // linear, and each block's run starts and ends 16-byte aligned but the last's end
  uint32_t slab_magic, slab_shift, inner_magic, inner_shift;  // division by S and by inner
};

// Division of n < 2^31 by d from (magic, shift) as RunIndex's.
__device__ __forceinline__ uint32_t divide(uint32_t n, uint32_t magic, uint32_t shift) {
  return (__umulhi(n, magic) + n) >> shift;
}

template <class R>
__global__ void __launch_bounds__(kSlabBlock)
slab_kernel(const typename R::In* x, Layout3 l, SlabShape s, Sink out) {
  using Op = typename R::Op;
  using In = typename R::In;
  __shared__ uint4 tile4[kSlabBytes / 16];
  __shared__ int64_t base[kSlabBlock];
  In* tile = reinterpret_cast<In*>(tile4);
  const int64_t o0 = int64_t(blockIdx.x) * s.slabs;
  const int n = int(std::min<int64_t>(s.slabs, l.outer - o0));
  const int32_t S = int32_t(s.slab), elements = n * S;
  const int t = int(threadIdx.x);
  // The slabs' places before the wait (programmatic dependence, as tile_kernel).
  if (!s.linear && t < n) base[t] = l.outer_in(o0 + t);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
  cudaTriggerProgrammaticLaunchCompletion();
#endif
  if (s.linear) {
    const In* src = x + o0 * s.slab;
    int32_t first_tail = 0;
    if (s.vectors) {
      constexpr int kPer = 16 / int(sizeof(In));
      constexpr int kVectors = kSlabBytes / 16 / kSlabBlock;
      const int32_t vectors = elements / kPer;
      const uint4* src4 = reinterpret_cast<const uint4*>(src);
      uint4 r[kVectors];
#pragma unroll
      for (int u = 0; u < kVectors; ++u) r[u] = t + u * kSlabBlock < vectors ? __ldg(src4 + t + u * kSlabBlock) : uint4{};
#pragma unroll
      for (int u = 0; u < kVectors; ++u)
        if (t + u * kSlabBlock < vectors) tile4[t + u * kSlabBlock] = r[u];
      first_tail = vectors * kPer;
    }
    constexpr int kLoads = 8;
    for (int32_t e = first_tail + t; e < elements; e += kLoads * kSlabBlock) {
      In r[kLoads];
#pragma unroll
      for (int u = 0; u < kLoads; ++u) r[u] = e + u * kSlabBlock < elements ? src[e + u * kSlabBlock] : In();
#pragma unroll
      for (int u = 0; u < kLoads; ++u)
        if (e + u * kSlabBlock < elements) tile[e + u * kSlabBlock] = r[u];
    }
  } else {
    __syncthreads();
    constexpr int kLoads = 8;
    for (int32_t e = t; e < elements; e += kLoads * kSlabBlock) {
      In r[kLoads];
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {
        const int32_t f = e + u * kSlabBlock;
        const uint32_t g = divide(uint32_t(f), s.slab_magic, s.slab_shift);
        r[u] = f < elements ? x[base[g] + (f - int32_t(g) * S)] : In();
      }
#pragma unroll
      for (int u = 0; u < kLoads; ++u)
        if (e + u * kSlabBlock < elements) tile[e + u * kSlabBlock] = r[u];
    }
  }
  __syncthreads();
  const int team = 1 << s.team_bits, lane = t & (team - 1);
  const int32_t inner = int32_t(l.inner), reduced = int32_t(l.reduced), outputs = n * inner;
  for (int32_t q0 = 0; q0 < outputs; q0 += kSlabBlock >> s.team_bits) {
    const int32_t q = q0 + (t >> s.team_bits);
    const bool live = q < outputs;
    const int32_t g = int32_t(divide(uint32_t(q), s.inner_magic, s.inner_shift)), i = q - g * inner;
    auto acc = Op::identity();
    if (live) {
      const In* p = tile + g * S + i;
      for (int32_t r = lane; r < reduced; r += team) element_into<R>(acc, p[r * inner], r);
    }
    for (int offset = team / 2; offset > 0; offset >>= 1) acc = Op::combine(acc, shfl_down(0xffffffffu, acc, offset, team));
    if (live && lane == 0) store_acc<Op>(out, l.outer_out(o0 + g) + i * l.out_inner, acc);
  }
}

// slab_kernel's shape for a layout, or false where it does not apply: the slabs dense, one of
// them within kSlabBytes, and indexes below 2^31.
template <class R>
bool slab_shape(const Layout3& l, const void* in, int sm_count, SlabShape* shape) {
  constexpr int64_t kSize = sizeof(typename R::In);
  const bool dense = (l.inner == 1 && l.in_reduced == 1) || (l.in_inner == 1 && (l.in_reduced == l.inner || l.reduced == 1));
  const int64_t S = l.reduced * l.inner;
  if (!dense || l.combine != 1 || S * kSize > kSlabBytes || l.outer >= INT32_MAX) return false;
  // Results transposed against the input: the slabs' stores would be a result apart, where
  // tile_kernel's lanes go along outer and store whole runs. Not for up to 4 results a slab,
  // whose stores are then up to 4 runs a warp, while tile_kernel's lanes each read a slab of
  // their own (sum over dim -1 of (151936, 80, 3).permute(2, 0, 1) int32: the columns kernel,
  // 151936 blocks of 3 x 80 elements at 70% of the SMs' issue, 374 us; slabs 50.5, torch.compile
  // 55; H200, hot).
  if (l.inner > 4 && tiles_transposed(l)) return false;
  SlabShape s{};
  s.slab = S;
  s.linear = l.outer_runs.runs <= 1 && (l.outer == 1 || l.in_outer == S);
  int64_t G = kSlabBytes / (S * kSize);
  if (!s.linear) G = std::min<int64_t>(G, kSlabBlock);
  G = std::min<int64_t>(G, l.outer);
  // 16-byte vectors: every block's run starts aligned (G * S * size a multiple of 16).
  const int64_t bytes = S * kSize;
  int64_t m = 16;
  for (int64_t b = bytes; m > 1 && b % 2 == 0; b /= 2) m /= 2;  // 16 / gcd(bytes, 16)
  if (s.linear && reinterpret_cast<uintptr_t>(in) % 16 == 0 && (G >= m || G == l.outer)) {
    if (G < l.outer) G = G / m * m;
    s.vectors = true;
  }
  s.slabs = int(G);
  // Fewer blocks than multiprocessors: the other kernels spread such layouts wider (std over dim
  // 1 of (128, 3, 256) bfloat16, 26 blocks of 5 slabs: 4.41 us against tiles' 3.11).
  if (ceil_div(l.outer, G) < sm_count) return false;
  const int64_t outputs = G * l.inner;
  int bits = 0;
  while (bits < 5 && (outputs << (bits + 1)) <= kSlabBlock && (int64_t(1) << bits) < l.reduced) ++bits;
  s.team_bits = bits;
  RunIndex div;
  div.add(S, 0, 0);
  div.add(l.inner, 0, 0);
  s.slab_magic = div.magic[0], s.slab_shift = div.shift[0];
  s.inner_magic = div.magic[1], s.inner_shift = div.shift[1];
  *shape = s;
  return true;
}

template <class R>
cudaError_t run_slabs(const ReduceArgs& a, const Sink& result, const SlabShape& s, size_t* workspace_bytes) {
  if (workspace_bytes) {
    *workspace_bytes = 0;
    return cudaSuccess;
  }
  const int64_t blocks = ceil_div(a.layout.outer, s.slabs);
  if (blocks > kMaxGridX) return cudaErrorInvalidConfiguration;
  return launch_dependent(slab_kernel<R>, dim3(unsigned(blocks)), dim3(kSlabBlock), a,
                          static_cast<const typename R::In*>(a.in), a.layout, s, result);
}

// Combines the splits of the column kernel: thread (x, y) of a block takes output
// blockIdx.x * 32 + x and splits y, y + Y, ...; the Y are then combined in y order.
template <class R>
__global__ void __launch_bounds__(kPartialsX * 32)
column_partials_kernel(const typename R::Acc* partials, int splits, Layout3 l, Sink out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
  chain_next_call();
#endif
  using Op = typename R::Op;
  using Acc = typename R::Acc;
  const int64_t outputs = l.outer * l.inner;
  const int64_t k = int64_t(blockIdx.x) * kPartialsX + threadIdx.x;
  // Up to 8 partials a thread loaded before any is combined (fewer for wide accumulators: a
  // block of 1024 threads has 64 registers a thread). One at a time, (65536, 128) over dim 0 (395
  // splits, 12 or 13 a thread) took 9.3 us here against torch.compile's 3.7 for its combine (ncu).
  constexpr int kLoads = sizeof(Acc) <= 8 ? 8 : sizeof(Acc) <= 16 ? 4 : 2;
  Acc v = k < outputs ? combine_strided<R, kLoads>(partials + k, outputs, int(threadIdx.y), int(blockDim.y), splits)
                      : Op::identity();
  __shared__ Acc by_y[32][kPartialsX + 1];
  by_y[threadIdx.y][threadIdx.x] = v;
  __syncthreads();
  if (threadIdx.y > 0 || k >= outputs) return;
  for (int y = 1; y < int(blockDim.y); ++y) v = Op::combine(v, by_y[y][threadIdx.x]);
  store_acc<Op>(out, l.outer_out(k / l.inner) + (k % l.inner) * l.out_inner, v);
}


// The bytes of an output's reduced run that tile_kernel loads as one word: 4, 8 or 16 where every
// such run is contiguous, that long and aligned to it; else 0.
template <class R>
int tile_word(const Layout3& l, const void* in) {
  const int64_t bytes = l.reduced * int64_t(sizeof(typename R::In));
  if (l.in_reduced != 1 || (bytes != 4 && bytes != 8 && bytes != 16)) return 0;
  if (reinterpret_cast<uintptr_t>(in) % bytes != 0 || !l.outer_strides_multiple_of(l.reduced) ||
      (l.inner > 1 && l.in_inner % l.reduced != 0))
    return 0;
  return int(bytes);
}

// tile_kernel's launch: A the inner dim unless the result is transposed (or rows: outer), as many
// tiles as the outputs need (B looped past 65535 tiles).
template <class R>
cudaError_t run_tiles(const ReduceArgs& a, const Sink& result, size_t* workspace_bytes) {
  if (workspace_bytes) {
    *workspace_bytes = 0;
    return cudaSuccess;
  }
  const Layout3& l = a.layout;
  const bool a_is_outer = l.inner == 1 || tiles_transposed(l);
  // Transposed results of a contiguous inner run, a tile of each at least: through shared memory,
  // whole words of kV elements where every row's start is aligned to them.
  if (tiles_transposed(l) && l.in_inner == 1 && l.inner >= kTransposeTile && l.outer >= kTransposeTile) {
    using In = typename R::In;
    constexpr int64_t kV = kTransposeV<R>;
    const int64_t inner_tiles = ceil_div(l.inner, kTransposeTile * kV);
    const int64_t blocks = inner_tiles * ceil_div(l.outer, int64_t(kTransposeTile));
    const bool words = kV > 1 && reinterpret_cast<uintptr_t>(a.in) % (kV * sizeof(In)) == 0 &&
                       l.outer_strides_multiple_of(kV) && (l.reduced == 1 || l.in_reduced % kV == 0);
    if (blocks <= kMaxGridX)
      return launch_dependent(transpose_tile_kernel<R>, dim3(unsigned(blocks)), dim3(kTileBlock), a,
                              static_cast<const In*>(a.in), l, inner_tiles, words, result);
  }
  const int64_t nA = a_is_outer ? l.outer : l.inner, nB = a_is_outer ? l.inner : l.outer;
  // 32 x 8 tiles; fewer than 8 outputs along B (rows: one) give A the rest of the block.
  int b_bits = 0;
  while (b_bits < 3 && (int64_t(1) << b_bits) < nB) ++b_bits;
  int a_bits = 0;
  while (a_bits < 8 - b_bits && (int64_t(1) << a_bits) < nA) ++a_bits;
  const int64_t tiles_a = ceil_div(nA, int64_t(1) << a_bits);
  const int64_t tiles_b = std::min<int64_t>(ceil_div(nB, int64_t(kTileBlock >> a_bits)), 65535);
  if (tiles_a > kMaxGridX) return cudaErrorInvalidConfiguration;
  // Launched with programmatic dependence, the indexes worked out before the wait (a copy of the
  // kernel in CUDA graphs, H200, bfloat16 sums, us a call, plain -> dependent: (128, 3, 256) over
  // dim 1 1.97 -> 1.29, rows of 14 1.92 -> 1.29, (11008, 3, 16) over dim 1 3.59 -> 2.88, rows of 7
  // 2.23 -> 1.51). Waiting before the indexes it had been slower (mean over dim 2 of (1024, 16, 14)
  // bfloat16, 64 blocks: 2.29 -> 2.78 us).
  return launch_dependent(tile_kernel<R>, dim3(unsigned(tiles_a), unsigned(tiles_b)), dim3(kTileBlock), a,
                          static_cast<const typename R::In*>(a.in), l, a_bits, a_is_outer, tile_word<R>(l, a.in),
                          result);
}

template <class R>
cudaError_t run_rows(const ReduceArgs& a, const Sink& result, size_t* workspace_bytes) {
  using In = typename R::In;
  using Acc = typename R::Acc;
  const Layout3& l = a.layout;
  const auto* x = static_cast<const In*>(a.in);
  const int64_t per_load = l.in_reduced == 1 ? 16 / int64_t(sizeof(In)) : 1;
  const int64_t loads = ceil_div(l.reduced, per_load);  // per row
  // About four loads per lane; eight from rows of 64 loads up, which puts more rows in each
  // warp and fewer blocks in the grid. On the H100, hot / cold us: (65536, 128) float32, 32
  // loads a row, 8 lanes 5.95 / 14.8 against 4 lanes' 6.6 / 15.1 (4 lanes had been 4% faster
  // before short rows ran 6 blocks a multiprocessor); (32768, 256) float32, 64 loads, 8 lanes
  // 6.1 against 16 lanes' 7.1; (65536, 128) bfloat16, 16 loads, 4 lanes 4.0 against 2 lanes' 5.6.
  // Rows of 32 loads of operators with many instructions an element (Welford's and
  // logsumexp's groups, positions) take 4 lanes of eight where they are not whole rows (below):
  // hot / cold us, (65536, 128) float32, 8 lanes against 4: var 8.76 / 15.19 -> 7.37 /
  // 15.2-15.6 (torch.compile 7.11 / 15.78), std_mean 9.1 / 15.5 -> 7.5 / 15.6, logsumexp 9.36 /
  // 15.36 -> 7.85 / 15.65, argmax 10.16 / 15.6 -> 8.48 / 15.97; bfloat16 rows of 256, var 5.48 /
  // 10.29 -> 4.43 / 10.52. The others keep 8 lanes, which were 0.4-0.5 us faster cold: nansum
  // 6.69 / 14.82 -> 6.57 / 15.36 with 4, prod 6.28 / 14.82 -> 6.41 / 15.25, 2-norm 6.37 / 14.80
  // -> 6.38 / 15.23, int32 sum 6.82 / 14.79 -> 6.40 / 15.20.
  constexpr bool kHeavy = kGroupRows<R> || is_indexed_v<typename R::Op>;
  const int64_t per_lane = loads > 32 || (loads == 32 && kHeavy) ? 8 : 4;
  int team = 1;
  while (team < 32 && team * per_lane < loads) team *= 2;
  // Every row whole aligned 16-byte vectors, contiguous.
  const bool whole = per_load > 1 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                     l.outer_strides_multiple_of(per_load) && l.reduced % per_load == 0;
  // Teams when rows are short, or when there are rows enough for a quarter of the device's
  // threads (four loads in flight each keep the memory busy); otherwise blocks on segments
  // of rows (below).
  // Rows of up to 8 loads a lane of a warp take teams too: the segments' blocks of 512 threads
  // left most of theirs without a load, and combined 16 warps through shared memory (var_mean of
  // (1024, 1024) float32 over dim 1, 1024 blocks: 7.8 us hot against torch.compile's 2.3).
  // Rows of up to 20 loads a lane of a warp, and rows not whole vectors of up to 40 from three
  // rows a multiprocessor, also take teams: a block a row left most of its 512 threads with one
  // or two loads, and the combine of 16 warps (in CUDA graphs, H200: 2048 float32 rows of 2048,
  // 8.67 -> 3.44 us; 2048 bfloat16 rows of 4097 9.92 -> 3.89; 1024 float32 rows of 4097 5.90 ->
  // 3.98). From 64 loads a lane, a block a row was faster (196 int64 rows of 4096: 4.53 against
  // 2.83).
  const bool ragged_teams = !whole && loads <= 40 * 32 && l.outer >= 3 * int64_t(a.sm_count);
  const bool teams = loads <= 20 * 32 || l.outer * team >= int64_t(a.sm_count) * 512 || ragged_teams;
  // Many rows of at least two vectors a thread of a kSegmentBlock block (float32 rows of 4096
  // and longer): a block a row, as torch.compile's kernel does. A warp a row left (4096, 4096)
  // float32 with one warp of 56 registers a row, 46% of the warp slots and 76% of DRAM's peak
  // against 91% and 81% (ncu); the block's 31 registers fill them. Rows of one vector a thread,
  // or with a position's accumulator, lost with it (NOTES): not those; nor 8-byte inputs, not
  // measured (their segments kernel takes 34 registers: 3 blocks of 512). Welford's takes it
  // where rows are whole vectors, or where teams would leave rows to segments: float32 var over
  // (4096, 4096) 24.5 / 26.5 -> 23.2 / 25.1 us hot / cold (torch.compile 23.6 / 25.5), (1024,
  // 4096) 8.75 / 11.9 -> 4.9 / 9.7, bfloat16 (2048, 8192) 18.3 / 21.8 -> 9.5 / 15.4 (segments
  // before), float32 (600, 8201) 18.5 / 24.0 -> 7.6 / 14.1 (segments before); rows not whole
  // that teams take lost with it ((4096, 4097) float32 25.8 -> 32.5 hot: each thread's head,
  // tail and groups of four, as the general rows kernel's).
  constexpr bool kBlockRows = sizeof(In) <= 4 && (sizeof(Acc) <= 8 || (kGroupRows<R> && sizeof(Acc) <= 16));
  // A block a row, in one kernel (l.outer blocks, run_rows checked the grid): rows of exactly two
  // whole vectors a thread through two_vector_rows_kernel, others through row_segments_kernel.
  const auto block_a_row = [&](int64_t per_segment) {
    if constexpr (kBlockRows) {
      if (whole && loads == 2 * kSegmentBlock) {
        two_vector_rows_kernel<R><<<unsigned(l.outer), kSegmentBlock, 0, a.stream>>>(x, l, result);
        return last_launch_error();
      }
    }
    row_segments_kernel<R><<<unsigned(l.outer), kSegmentBlock, 0, a.stream>>>(x, l, per_segment, 1, whole, result);
    return last_launch_error();
  };
  if constexpr (kBlockRows) {
    if (per_load > 1 && loads >= 2 * kSegmentBlock && (sizeof(Acc) <= 8 || whole || !teams) && !ragged_teams &&
        l.outer >= int64_t(a.sm_count) * resident_blocks_per_sm<row_segments_kernel<R>>(kSegmentBlock)) {
      if (workspace_bytes) {
        *workspace_bytes = 0;
        return cudaSuccess;
      }
      if (l.outer > kMaxGridX) return cudaErrorInvalidConfiguration;
      return block_a_row(l.reduced);
    }
  }
  // Short rows (up to kTileReduced elements) whose neighbours in memory are results apart: tiles
  // along the result's order (layout.h's rows_in_result_order), a thread a row.
  Layout3 by_result;
  if (l.reduced <= kTileReduced && rows_in_result_order(l, &by_result)) {
    ReduceArgs t = a;
    t.layout = by_result;
    return run_tiles<R>(t, result, workspace_bytes);
  }
  // Other short rows that are not whole vectors: a thread a row, its elements loaded at once
  // (tile_kernel), not the head, vectors and tail of a general row; or the dense slabs' blocks.
  // Dense slabs where their blocks' loads are one run of memory; else tiles, a word a row where
  // rows are aligned words (H200, us: amax over rows of 8 uint8 of (2^20, 8) slabs 6.7, tiles of
  // words 12.7; through two outer runs, (14336, 77, 8), slabs 19.1, tiles of words 14.9).
  const bool whole_rows = whole_rows_loads<R>(l, x) > 0;  // whole_rows_kernel's (below)
  if (l.reduced <= kTileReduced && !whole_rows) {
    SlabShape slabs;
    if (slab_shape<R>(l, x, a.sm_count, &slabs) && (slabs.linear || tile_word<R>(l, x) == 0))
      return run_slabs<R>(a, result, slabs, workspace_bytes);
    return run_tiles<R>(a, result, workspace_bytes);
  }
  // Whole rows of 1 to 64 vectors of floats: a thread a row up to 2 vectors, two loads a lane up
  // to 16 vectors a row, four from 32 (float32 rows of 128: 8 lanes x 4 loads 5.41 / 14.55 us,
  // 16 x 2 5.8 / 14.5; rows of 64 vectors: 16 x 4 5.45 / 14.55, 8 x 8 5.7 / 14.7).
  if constexpr (kWholeRows<R>) {
    if (whole_rows) {
      const int lanes = int(loads <= 2 ? 1 : loads <= 16 ? loads / 2 : loads / 4);
      const int64_t blocks = ceil_div(l.outer, int64_t(kRowsBlock / lanes));
      if (blocks <= kMaxGridX) {
        if (workspace_bytes) {
          *workspace_bytes = 0;
          return cudaSuccess;
        }
        const auto launch = [&](auto kernel) {
          return launch_dependent(kernel, dim3(unsigned(blocks)), dim3(kRowsBlock), a, x, l, result);
        };
        switch (loads) {
          case 1: return launch(whole_rows_kernel<R, 1, 1>);
          case 2: return launch(whole_rows_kernel<R, 1, 2>);
          case 4: return launch(whole_rows_kernel<R, 2, 2>);
          case 8: return launch(whole_rows_kernel<R, 4, 2>);
          case 16: return launch(whole_rows_kernel<R, 8, 2>);
          case 32: return launch(whole_rows_kernel<R, 8, 4>);
          default: return launch(whole_rows_kernel<R, 16, 4>);
        }
      }
    }
  }
  if (teams) {
    if (workspace_bytes) {
      *workspace_bytes = 0;
      return cudaSuccess;
    }
    const int64_t blocks = std::min(ceil_div(l.outer, kRowsBlock / team), kMaxGridX);
    // Teams of 16 and 32 lanes with programmatic dependence too where the grid is up to two
    // blocks a multiprocessor (the launch then is a larger part of the call): 100 to 2048 float32
    // rows of 1024, 2.01-2.76 -> 1.75-2.50 us in CUDA graphs.
    const bool dependent = team <= kDependentTeam || blocks <= 2 * int64_t(a.sm_count);
    const auto launch = [&](auto kernel) {
      if (dependent) return launch_dependent(kernel, dim3(unsigned(blocks)), dim3(kRowsBlock), a, x, l, result);
      kernel<<<unsigned(blocks), kRowsBlock, 0, a.stream>>>(x, l, result);
      return last_launch_error();
    };
    switch (team) {
      case 1: return launch(rows_kernel<R, 1>);
      case 2: return launch(rows_kernel<R, 2>);
      case 4: return launch(rows_kernel<R, 4>);
      case 8: return launch(rows_kernel<R, 8>);
      case 16: return launch(rows_kernel<R, 16>);
      default: return launch(rows_kernel<R, 32>);
    }
  }
  // As many segments per row as make the blocks fill whole waves of the device, up to four
  // waves and at least one load per thread (plan.h). ((128, 65536) float32 had 5 segments, 640
  // blocks: 1.2 waves of 528; now 4.)
  const int64_t wave = int64_t(a.sm_count) * resident_blocks_per_sm<row_segments_kernel<R>>(kSegmentBlock);
  const int64_t most = std::max<int64_t>(1, std::min(ceil_div(4 * wave, l.outer), ceil_div(loads, kSegmentBlock)));
  // From half as many rows as multiprocessors, a block a row in one kernel: the segments'
  // second kernel cost more than the waves it evened out (in CUDA graphs, H200: 196 float32 rows
  // of 16384 7.69 -> 3.64 us, of 65536 13.99 -> 10.35; 224 bfloat16 rows of 49152 8.26 -> 4.62;
  // 64 float32 rows of 65536 level; 16 rows of 65536 3.55 against 3.99, kept in segments).
  // Up to 64 loads a thread: 128 rows of 2^19 float32 (one 2 MB row expanded, all of it in L2)
  // took 20.6 us a block a row against 14.5 in segments, a block a multiprocessor too few to
  // keep L2 busy.
  const bool block_rows = 2 * l.outer >= a.sm_count && loads <= 64 * kSegmentBlock;
  int64_t segments = block_rows ? 1 : segments_per_row(l.outer, most, wave);
  const int64_t per_segment = ceil_div(ceil_div(l.reduced, segments), 16) * 16;
  segments = ceil_div(l.reduced, per_segment);
  if (workspace_bytes) {
    *workspace_bytes = segments > 1 ? size_t(l.outer * segments) * sizeof(Acc) : 0;
    return cudaSuccess;
  }
  if (l.outer * segments > kMaxGridX) return cudaErrorInvalidConfiguration;
  if (segments == 1) return block_a_row(per_segment);
  auto* partials = static_cast<Acc*>(a.workspace);
  const unsigned grid = unsigned(l.outer * segments);
  // Eager calls with a ticket word for every row: one kernel, as full sums (vector.cuh). This
  // path has at most ~4 waves of blocks in all, so rows fit kTicketWords on any device made yet;
  // past it, two kernels. The same segments either way, so the same bits.
  if (a.ticket != nullptr && l.outer <= kTicketWords) {
    row_segments_ticket_kernel<R><<<grid, kSegmentBlock, 0, a.stream>>>(x, l, per_segment, int(segments), partials,
                                                                        a.ticket, result);
    return last_launch_error();
  }
  if (cudaError_t e = launch_dependent(row_segments_kernel<R>, dim3(grid), dim3(kSegmentBlock), a, x, l,
                                      per_segment, int(segments), false, Sink::partials(partials));
      e != cudaSuccess)
    return e;
  return launch_dependent(row_partials_kernel<R>, dim3(unsigned(ceil_div(l.outer, kRowsBlock / 32))),
                          dim3(kRowsBlock), a, static_cast<const Acc*>(partials), int(segments), l, result);
}

// How run_columns lays out the work for V outputs a thread and blocks of `threads`.
struct ColumnsShape {
  int Y, X;                // threads down the reduced dim and across the outputs, per block
  int64_t whole;           // the outputs of one outer index in whole V-vectors (inner rounded down)
  int64_t column_blocks;   // blocks across those, per outer index
  int64_t splits, per_split;
  bool deep;               // Y past 8 to save a split or for few outputs (not for splits alone)
};

// About two blocks per multiprocessor keep the memory busy. Threads go down the reduced dim
// (Y) only when the outputs alone give fewer blocks than that; past Y = 8, only if that saves
// splitting the reduced dim across blocks, which costs a second kernel, or, for 1- and 2-byte
// inputs (8 or 16 outputs a thread) whose reduced dim is split anyway, to 16: half the splits,
// so half the partials to write and combine. Hot / cold us over dim 0, H100: (4096, 4096) uint8
// 12.6 / 18.8 -> 9.6 / 16.5, bfloat16 9.3 / 18.1 -> 9.2 / 17.6, var of bfloat16 22.1 / 26.6 ->
// 18.2 / 22.7, (2048, 8192) bfloat16 9.2 / 18.1 -> 9.1 / 17.5; float32 was mixed ((4096, 4096)
// 25.5 -> 25.2 hot, (8192, 1024) 8.1 -> 9.3, argmax of (4096, 4096) 28.5 -> 29.2). (128, 65536)
// and (4096, 4096) over dim 0 with Y = 32 and splits were slower than with Y = 8 and more
// splits. Not for indexed operators (`deeper` false): argmax measured slower, as float32.
// Two blocks per multiprocessor rather than three: a third fewer splits for the combine; hot on
// the H100, (65536, 128) float32 over dim 0 8.68 -> 8.20 us, var of it 14.50 -> 13.14, uint8
// (2^20, 16) 10.89 -> 9.72; cold within +-0.2 us; four were slower (benchmarks/NOTES.md).
// Short of that, 32 threads down and no split when that still gives a block a multiprocessor
// (and each thread four rows): the second kernel cost more than the blocks missing. (512,
// 16384) bfloat16 over dim 0, 256 blocks instead of 320 and a combine: 6.32 / 12.54 -> 4.39 /
// 10.43 us hot / cold, var of it 15.44 / 21.02 -> 6.18 / 11.65, float32 (512, 8192) 5.52 / 11.90
// -> 4.39 / 10.37 (H100).
inline ColumnsShape columns_shape(const Layout3& l, int64_t V, int threads, int sm_count, bool deeper) {
  const int64_t wanted = int64_t(sm_count) * 2;
  const auto blocks_for = [&](int y) { return l.outer * ceil_div(l.inner, int64_t(threads / y) * V); };
  int Y = 1;
  bool one_pass = false, split_deeper = false;
  while (Y < 8 && blocks_for(Y) < wanted) Y *= 2;
  if (blocks_for(Y) < wanted) {
    if (blocks_for(16) >= wanted) {
      Y = 16;
    } else if (blocks_for(kColumnsMaxY) >= wanted) {
      Y = kColumnsMaxY;
    } else if ((blocks_for(kColumnsMaxY) >= sm_count && l.reduced >= 4 * kColumnsMaxY) ||
               l.reduced <= 8 * kColumnsMaxY) {
      // (Up to 8 rows a thread: two rounds of loads cost less than a second kernel. sum(x, 0)
      // of (128, 6144) bfloat16 was split in two, 3.7 us in CUDA graphs against torch.compile's
      // one kernel, 1.7.)
      Y = kColumnsMaxY;
      one_pass = true;
    } else {
      split_deeper = deeper && V >= 8;  // 1- and 2-byte inputs (4-byte ones measured mixed)
    }
  }
  // No thread across without an output: while half the threads across cover a row's outputs,
  // twice the threads go down (the blocks stay as many), down to one thread across. (65536,
  // 128) bfloat16 over dim 0 had 16 vectors of outputs and 32 threads across: half of every
  // block idle; (2^20, 16) bfloat16, stopped at Y = 32, 8 threads across for 2 vectors (13.9 /
  // 22.1 us hot / cold against 9.3 / 19.2 with 2 across; uint8, one vector, 23.4 / 30.1 -> 10.5 /
  // 16.7; H100).
  while (Y < threads && int64_t(threads / Y / 2) * V >= l.inner) Y *= 2;
  ColumnsShape c{};
  c.deep = Y >= 16;
  if (split_deeper) Y = std::max(Y, 16);
  c.Y = Y;
  c.X = threads / Y;
  c.whole = l.inner / V * V;
  c.column_blocks = std::max<int64_t>(1, ceil_div(c.whole, int64_t(c.X) * V));
  const int64_t xblocks = l.outer * c.column_blocks;
  c.splits = one_pass ? 1 : std::clamp<int64_t>(ceil_div(wanted, xblocks), 1, std::max<int64_t>(1, l.reduced / (4 * Y)));
  c.splits = std::min<int64_t>(c.splits, 65535);
  c.per_split = ceil_div(l.reduced, c.splits);
  c.splits = ceil_div(l.reduced, c.per_split);
  return c;
}

// Small columns (run_layout): an output a thread, about 8 rows a thread down (Y = rows / 8, 4
// to 32), one pass.
inline ColumnsShape small_columns_shape(const Layout3& l) {
  ColumnsShape c{};
  c.Y = 4;
  while (c.Y < kColumnsMaxY && 16 * c.Y <= l.reduced) c.Y *= 2;
  c.X = kColumnsBlock / c.Y;
  c.whole = l.inner;
  c.column_blocks = ceil_div(l.inner, int64_t(c.X));
  c.splits = 1;
  c.per_split = l.reduced;
  c.deep = c.Y >= 16;
  return c;
}

template <class R, int V, int U>
cudaError_t run_columns(const ReduceArgs& a, const Sink& result, const ColumnsShape& c,
                        size_t* workspace_bytes) {
  using In = typename R::In;
  using Acc = typename R::Acc;
  const Layout3& l = a.layout;
  if (workspace_bytes) {
    *workspace_bytes = c.splits > 1 ? size_t(c.splits * l.outer * l.inner) * sizeof(Acc) : 0;
    return cudaSuccess;
  }
  // Whole vectors; then (V > 1 only) the last outputs of each row, fewer than V, are another
  // launch, a block or two per outer index and split.
  const int64_t whole = c.whole;
  const int64_t xblocks = l.outer * c.column_blocks;
  if (xblocks > kMaxGridX) return cudaErrorInvalidConfiguration;
  const auto* x = static_cast<const In*>(a.in);
  const dim3 grid{unsigned(xblocks), unsigned(c.splits)}, block{unsigned(c.X), unsigned(c.Y)};
  const Sink sink = c.splits == 1 ? result : Sink::partials(a.workspace);
  // With splits, the chain of the full sums: each kernel waits for the one before it, then lets
  // the next launch (see columns_kernel).
  const auto launch = [&](auto kernel, dim3 g, unsigned column_blocks, int64_t first, int64_t last) {
    if (c.splits > 1 || int64_t(g.x) <= 2 * int64_t(a.sm_count))
      return launch_dependent(kernel, g, block, a, x, l, column_blocks, first, last, c.per_split, sink);
    kernel<<<g, block, 0, a.stream>>>(x, l, column_blocks, first, last, c.per_split, sink);
    return last_launch_error();
  };
  if (whole > 0) {
    if (cudaError_t e = launch(columns_kernel<R, V, U>, grid, unsigned(c.column_blocks), 0, whole); e != cudaSuccess)
      return e;
  }
  if (whole < l.inner) {
    // Up to V - 1 outputs, which may be more than X threads (1-byte inputs: 15, X down to 8).
    const int64_t tail_blocks = ceil_div(l.inner - whole, c.X);
    if (l.outer * tail_blocks > kMaxGridX) return cudaErrorInvalidConfiguration;
    if (cudaError_t e = launch(columns_kernel<R, 1, 4>, dim3{unsigned(l.outer * tail_blocks), unsigned(c.splits)},
                               unsigned(tail_blocks), whole, l.inner);
        e != cudaSuccess)
      return e;
  }
  if (c.splits == 1) return cudaSuccess;
  const auto* partials = static_cast<const Acc*>(a.workspace);
  unsigned partial_y = 1;
  while (partial_y < 32 && partial_y < c.splits) partial_y *= 2;
  return launch_dependent(column_partials_kernel<R>,
                          dim3(unsigned(ceil_div(l.outer * l.inner, kPartialsX))),
                          dim3(kPartialsX, partial_y), a, partials, int(c.splits), l, result);
}

// Whether small_kernel takes a reduction: up to kSmallElements elements, any layout; past that,
// where its one kernel still beats the shapes below, measured in CUDA graphs on the H200 over
// random layouts of 2^12 to 2^20 elements (float32 and bfloat16 sums, float32 var and argmax):
//  - a few rows (the innermost reduced run contiguous, each team's loads one run of memory),
//    up to 2^20 elements for up to 256 results of 1- to 4-byte elements, else 2^19: float32
//    (64, 5120) over dim 1 2.82 -> 1.77 us, (112, 1000) 2.20 -> 1.51, var of (224, 512) 2.48 ->
//    1.90, (4, 8, 3, 3072) over dims 0 and 3 (two passes before) 3.95 -> 2.61. Past 1024 results
//    or those sizes the teams of the rows kernel were faster (1024 rows of 1024 float32: 2.12
//    against 2.04; (196, 4096) int64 3.14 against a block a row's 2.83);
//  - columns whose adjacent results are adjacent in memory, of up to 32 rows, or of up to 128
//    results and 2048 rows (one round of loads a lane), up to 2^19 elements: bfloat16 (32, 5120)
//    over dim 0 2.57 -> 1.63 us, (12, 512, 77) 2.26 -> 1.66, float32 argmax of (2048, 64) 6.69 ->
//    5.53. Where adjacent results are far apart in memory, every team's loads are, too:
//    (196, 77, 32) float32 laid out as permute(1, 2, 0), over dim 2, took 7.06 us against the
//    columns kernel's 2.97; and columns of more rows were slower: (3072, 97) 8.38 against 3.69.
// `whole_rows`: rows that whole_rows_kernel takes (1 to 64 whole aligned vectors), faster
// than the small kernel (832 float32 rows of 128: 1.03 us against 1.36).
template <class R>
bool small_reaches(const IndexedLayout& l, bool whole_rows) {
  const int64_t n = l.outputs * l.count;
  if (n <= kSmallElements) return l.count <= kSmallCount;
  const bool rows = l.reduced.innermost_contiguous();
  if (rows && whole_rows) return false;
  if (rows)
    return l.outputs <= 1024 && l.count <= 16384 &&
           n <= (l.outputs <= 256 && sizeof(typename R::In) <= 4 ? int64_t(1) << 20 : int64_t(1) << 19);
  const bool adjacent = l.kept.innermost_contiguous();
  return adjacent && (l.count <= 32 || (l.outputs <= 128 && l.count <= int64_t(kSmallBlock) * kSmallLoads)) &&
         n <= (int64_t(1) << 19);
}

// Also, from 2048 results of up to 16384 elements, layouts where small_kernel's one pass over any
// layout beat the passes of run_combined and run_layout (in CUDA graphs, H200, us):
//  - several reduced runs, the innermost contiguous (Layout3::combine: partials, then their
//    combine): nansum over dims 1 and 3 of (64, 56, 1024, 32) float16 158 -> 58 (torch.compile
//    96); mean over dims 0 and 3 of (7, 96, 96, 8).transpose(1, 2) float32 6.1 -> 2.2 (1.9).
//    sum over dims 0 and 2 of (64, 4096, 128) float32 35.0 -> 31.5. Not where the innermost
//    reduced run is strided (mean over dims 0 and 2 of (12, 151936, 12)[..., ::2] bfloat16 took
//    32.6 against 20.6), nor for Welford's and logsumexp's groups (var over dims 1 and 3 of (32,
//    16, 1024, 64) bfloat16 35.2 against 27.0);
//  - columns narrower than 128 bytes that are not dense slabs, of up to 128 rows, adjacent
//    results adjacent in memory: argmax over dim 3 of (28, 128, 77, 16).permute(2, 1, 3, 0)
//    float32 53.8 -> 9.6 (16.6); any over dim 0 of (64, 1000, 5, 16)[:, :, ::3] int32 9.7 -> 4.1
//    (torch 3.7). Columns of 4096 rows were six times slower (each team's loads a column
//    apart), and so were results apart in memory: aminmax over dim -1 of (128, 2048,
//    40).transpose(0, 2) int16 10.5 -> 55.4, argmax over dim -1 of a channels_last (197, 64,
//    77, 56) uint8 130 -> 232 (random shapes, seeds 52361 and 31337).
template <class R>
bool small_beats_passes(const ReduceArgs& a) {
  const IndexedLayout& x = a.indexed;
  const Layout3& l = a.layout;
  if (x.outputs < 2048 || x.count > 16384) return false;
  if (l.combine > 1) return !kGroupRows<R> && x.reduced.innermost_contiguous();
  const bool adjacent = x.kept.innermost_contiguous();
  SlabShape slabs;
  return adjacent && x.count <= 128 && l.inner > 1 && l.inner * int64_t(sizeof(typename R::In)) < 128 &&
         !slab_shape<R>(l, a.in, a.sm_count, &slabs);
}

// small_kernel's indexes, or false when an offset reaches 2^31.
inline bool small_index(const IndexedLayout& l, SmallIndex* out) {
  SmallIndex s = {};
  int64_t span = 0;
  const auto pack = [&](const RunIndex& r, SmallRun* runs) {
    for (int q = 0; q < r.runs; ++q) {
      span += (r.size[q] - 1) * r.in[q];
      runs[q] = {int32_t(r.size[q]), int32_t(r.in[q]), r.magic[q], r.shift[q]};
    }
  };
  pack(l.kept, s.kept);
  pack(l.reduced, s.reduced);
  s.kept_runs = l.kept.runs, s.reduced_runs = l.reduced.runs;
  s.outputs = int32_t(l.outputs), s.count = int32_t(l.count);
  *out = s;
  return span < INT32_MAX;
}

// small_kernel's launch: 16-byte vectors where every result's elements are runs of whole aligned
// vectors; the team that gives each thread about kSmallLoads elements or kSmallVectorLoads
// vectors (up to a block);
// blocks of up to kSmallBlock threads.
template <class R>
cudaError_t run_small(const ReduceArgs& a, const SmallIndex& l, size_t* workspace_bytes) {
  if (workspace_bytes) {
    *workspace_bytes = 0;
    return cudaSuccess;
  }
  constexpr int64_t kPer = 16 / int64_t(sizeof(typename R::In));
  // The innermost reduced run contiguous, a multiple of kPer long, and every other run's stride
  // a multiple of kPer: then each vector's elements are consecutive in memory and in position.
  const SmallRun& inner = l.reduced[std::max(l.reduced_runs - 1, 0)];
  bool vectors = l.reduced_runs >= 1 && inner.in == 1 && inner.size % kPer == 0 &&
                 reinterpret_cast<uintptr_t>(a.in) % 16 == 0;
  for (int r = 0; r + 1 < l.reduced_runs; ++r) vectors = vectors && l.reduced[r].in % kPer == 0;
  for (int r = 0; r < l.kept_runs; ++r) vectors = vectors && l.kept[r].in % kPer == 0;
  const int64_t loads = vectors ? l.count / kPer : l.count;
  // Teams past a warp combine through shared memory and a barrier: those only for kSmallLoads
  // loads a thread (bfloat16 rows of 1024, 8 rows: 1.69 -> 1.84 us with 64 lanes of 2 vectors).
  const auto more_lanes = [&](int bits) {
    return (int64_t(vectors && bits < 5 ? kSmallVectorLoads : kSmallLoads) << bits) < loads;
  };
  int team_bits = 0;
  while ((int64_t(1) << team_bits) < kSmallBlock && more_lanes(team_bits)) ++team_bits;
  const int64_t threads = int64_t(l.outputs) << team_bits;
  const int block = int(std::min<int64_t>(kSmallBlock, ceil_div(threads, 32) * 32));
  return launch_dependent(small_kernel<R>, dim3(unsigned(ceil_div(threads, block))), dim3(block), a,
                          Sink{a.out, a.types.out, a.project, a.out2}, static_cast<const typename R::In*>(a.in),
                          team_bits, vectors, l);
}

// One pass over a layout of one reduced run (combine == 1), its results into `result`.
template <class R>
cudaError_t run_layout(const ReduceArgs& a, const Sink& result, size_t* workspace_bytes) {
  using In = typename R::In;
  const Layout3& l = a.layout;
  // Indexed operators reduce a whole tensor as one row (segments across blocks): the vector
  // kernels' packed and grouped paths know no positions.
  if constexpr (!is_indexed_v<typename R::Op>) {
    if (l.is_full_contiguous()) {
      ReduceArgs full = a;
      full.n = l.reduced;
      return run_vector<R>(full, workspace_bytes);
    }
  }
  if (l.inner == 1) return run_rows<R>(a, result, workspace_bytes);
  // Short reductions whose results are transposed against the input, the result-contiguous run
  // not the last outer digit: that run last (layout.h), so that tiles go along the result.
  Layout3 ordered;
  if (l.reduced <= kTileReduced && outer_in_result_order(l, &ordered)) {
    ReduceArgs t = a;
    t.layout = ordered;
    return run_layout<R>(t, result, workspace_bytes);
  }
  // A map along inner (above), from a block's elements a row.
  const int64_t map_blocks = ceil_div(l.inner, int64_t(kMapBlock * kMapLoads));
  if (l.reduced == 1 && l.combine == 1 && l.in_inner == 1 && l.out_inner == 1 && l.inner >= kMapBlock * kMapLoads &&
      map_blocks <= kMaxGridX) {
    if (workspace_bytes) {
      *workspace_bytes = 0;
      return cudaSuccess;
    }
    return launch_dependent(map_kernel<R>, dim3(unsigned(map_blocks), unsigned(std::min<int64_t>(l.outer, 65535))),
                            dim3(kMapBlock), a, static_cast<const In*>(a.in), l, result);
  }
  // Indexed operators' accumulators are 16 bytes: 16 outputs a thread (1-byte inputs) spilled and
  // overflowed the block's shared memory (parked), so those read 8-byte vectors.
  constexpr int kV = 16 / sizeof(In) / (is_indexed_v<typename R::Op> && sizeof(In) == 1 ? 2 : 1);
  const auto aligned = [](int64_t stride, int64_t extent) {
    return extent == 1 || (stride * int64_t(sizeof(In))) % 16 == 0;
  };
  const bool vectors = l.in_inner == 1 && reinterpret_cast<uintptr_t>(a.in) % 16 == 0 &&
                       l.outer_strides_multiple_of(16 / int64_t(sizeof(In))) && aligned(l.in_reduced, l.reduced);
  constexpr bool kDeeper = !is_indexed_v<typename R::Op>;
  // A short reduced dim: tiles where the columns' threads down it, or across a row's outputs,
  // would be mostly idle, or where the result is transposed against the input (tile_kernel).
  // Also where a columns block would have fewer than 4 elements a thread: each block's fixed
  // cost (the combine down Y through shared memory) then outweighs its loads (2-norm over dim 2
  // of (1024, 64, 7, 28) float16, 65536 blocks of 28 x 7 elements: 129 us, torch.compile 5.9).
  const auto tiles = [&](const ColumnsShape& c, int64_t V) {
    return l.reduced <= kTileReduced && (c.Y > 2 * l.reduced || int64_t(c.X) * V > 2 * l.inner || tiles_transposed(l) ||
                                         int64_t(c.X) * V * l.reduced < 4 * kColumnsBlock);
  };
  // Dense slabs: where tiles would be taken, and for columns narrower than 128 bytes, whose
  // rows the columns kernel's threads across mostly do not reach.
  SlabShape slabs;
  const bool dense = slab_shape<R>(l, a.in, a.sm_count, &slabs);
  const bool narrow = dense && l.inner * int64_t(sizeof(In)) < 128;
  if (narrow) return run_slabs<R>(a, result, slabs, workspace_bytes);
  // Short reductions of results transposed against the input, a tile of them at least each way:
  // transpose_tile_kernel (in run_tiles), dense or not. Slabs store such results one by one,
  // far apart (var over the dim of 3 of a channels_last (112, 32, 197, 3) float32: 16.7 us in
  // slabs, torch.compile 3.1).
  if (l.reduced <= kTileReduced && tiles_transposed(l) && l.in_inner == 1 && l.inner >= kTransposeTile &&
      l.outer >= kTransposeTile)
    return run_tiles<R>(a, result, workspace_bytes);
  // Also short columns whose V outputs a thread hold 64 bytes of accumulators or more (positions'
  // 16 bytes, min-max pairs of 2-byte inputs): the columns kernel parks them in shared memory
  // and ran at an eighth of DRAM's peak (in CUDA graphs, H200, us: argmax over dim 1 of (49152,
  // 7, 128, 2) int16 450 -> 107 in slabs, torch 186; aminmax over dim 1 of (2048, 3, 512)
  // float16 10.5 -> 5.9).
  if (dense && l.reduced <= kTileReduced && sizeof(typename R::Acc) * kV >= 64)
    return run_slabs<R>(a, result, slabs, workspace_bytes);
  // Small columns (up to 2^19 elements) of 32 to 256 rows: an output a thread, so as many
  // blocks as outputs allow, and about 8 rows a thread down (Y = rows / 8 up to 32), no split.
  // The shapes below gave 2-byte inputs 8 outputs a thread and 32 threads down a column, a
  // few dozen blocks each combining 32 rows of each output (in CUDA graphs, H200, us:
  // logsumexp over dim 0 of (128, 3584) bfloat16 3.53 -> 2.28, std of (64, 3072) float16 3.04
  // -> 2.09, amax of (96, 4608) bfloat16 2.66 -> 1.94, argmax of (256, 512) float32 3.24 -> 2.43).
  if (l.reduced >= 32 && l.reduced <= 8 * kColumnsMaxY && l.outer * l.inner * l.reduced <= (int64_t(1) << 19))
    return run_columns<R, 1, 4>(a, result, small_columns_shape(l), workspace_bytes);
  if (!vectors) {
    const ColumnsShape one = columns_shape(l, 1, kColumnsBlock, a.sm_count, kDeeper);
    if (tiles(one, 1)) return dense ? run_slabs<R>(a, result, slabs, workspace_bytes) : run_tiles<R>(a, result, workspace_bytes);
    return run_columns<R, 1, 4>(a, result, one, workspace_bytes);
  }
  const ColumnsShape wide = columns_shape(l, kV, kColumnsBlock, a.sm_count, kDeeper);
  if (tiles(wide, kV)) return dense ? run_slabs<R>(a, result, slabs, workspace_bytes) : run_tiles<R>(a, result, workspace_bytes);
  // Few outputs of a 2-byte type: 16-byte vectors give 8 outputs a thread, so few threads
  // across that 16 go down each column and a 4-level tree combines them. 8-byte vectors,
  // blocks of kNarrowBlock threads and 8 loads in flight fill the device with Y <= 8 instead.
  // (128, 65536) bfloat16 over dim 0: 3.99 us against 4.53 (torch 4.56); 4 loads in flight
  // 4.18, blocks of 256 4.27. float32 gained only on (256, 32768), 5%: not instantiated.
  if constexpr (sizeof(In) == 2) {
    if (wide.deep) {
      const ColumnsShape narrow = columns_shape(l, kV / 2, kNarrowBlock, a.sm_count, kDeeper);
      if (narrow.splits == 1) return run_columns<R, kV / 2, 8>(a, result, narrow, workspace_bytes);
    }
  }
  return run_columns<R, kV, 4>(a, result, wide, workspace_bytes);
}

// Several reduced runs (Layout3::combine): the pass over one of them writes each output's
// partials, [partial][output] at the front of the workspace, and column_partials_kernel combines
// them in order into the results (launched with programmatic dependence: it waits for the pass).
template <class R>
cudaError_t run_combined(const ReduceArgs& a, size_t* workspace_bytes) {
  using Acc = typename R::Acc;
  const Layout3& l = a.layout;
  const int64_t outputs = l.outputs();
  const size_t partial_bytes = ceil_div(int64_t(l.combine * outputs * int64_t(sizeof(Acc))), 256) * 256;
  ReduceArgs first = a;
  first.layout.combine = 1;
  if (workspace_bytes) {
    size_t bytes = 0;
    if (cudaError_t e = run_layout<R>(first, Sink::partials(nullptr), &bytes); e != cudaSuccess) return e;
    *workspace_bytes = partial_bytes + bytes;
    return cudaSuccess;
  }
  if (l.combine > INT32_MAX) return cudaErrorInvalidConfiguration;
  auto* partials = static_cast<Acc*>(a.workspace);
  first.workspace = static_cast<char*>(a.workspace) + partial_bytes;
  if (cudaError_t e = run_layout<R>(first, Sink::partials(partials), nullptr); e != cudaSuccess) return e;
  Layout3 results;  // output k at k: the result is contiguous
  results.outer = outputs;
  results.out_outer = 1;
  unsigned partial_y = 1;
  while (partial_y < 32 && partial_y < l.combine) partial_y *= 2;
  return launch_dependent(column_partials_kernel<R>, dim3(unsigned(ceil_div(outputs, kPartialsX))),
                          dim3(kPartialsX, partial_y), a, static_cast<const Acc*>(partials), int(l.combine), results,
                          Sink{a.out, a.types.out, a.project, a.out2});
}

// A few results whose elements interleave in one long run (outer == 1, inner < 128 bytes,
// in_reduced == inner: mean over dims 0 and 1 of (2048, 4096, 7)): the columns kernel's threads
// across had a 7-output row each, mostly idle. Read as k consecutive rows a row instead, k *
// inner outputs of partials combined k at a time (combine = k, run_combined): k the power of two
// dividing the rows that makes a row of 1024 bytes or more (up to 1024 rows), at least 256 rows
// left. In CUDA graphs, H200, us: mean over dims 0-2 of (77, 4096, 32, 3).transpose(1, 0)
// bfloat16 69 -> 20.7 (torch 30.8); mean over dims 0-1 of (2048, 4096, 7).transpose(0, 1) float32
// 123 -> 61.8 (torch 63.6). From 4 MiB: the combine kernel cost more than it saved on nansum over
// dims 0-1 of (8192, 7, 8) bfloat16 (0.9 MB, 4.50 -> 5.36). Not for positions (a partial's are
// in its own rows).
template <class R>
bool fold_interleaved(const Layout3& l, Layout3* out) {
  if constexpr (is_indexed_v<typename R::Op>) {
    return false;
  } else {
    constexpr int64_t kSize = sizeof(typename R::In);
    if (l.combine != 1 || l.outer != 1 || l.inner < 2 || l.inner * kSize >= 128 || l.in_inner != 1 ||
        l.out_inner != 1 || l.in_reduced != l.inner || l.reduced * l.inner * kSize < (int64_t(4) << 20))
      return false;
    int64_t k = 1;
    while (k < 1024 && k * l.inner * kSize < 1024 && l.reduced % (2 * k) == 0 && l.reduced / (2 * k) >= 256) k *= 2;
    if (k * l.inner * kSize < 1024) return false;
    Layout3 f = l;
    f.inner = k * l.inner;
    f.reduced = l.reduced / k;
    f.in_reduced = f.inner;
    f.out_inner = 1;
    f.combine = k;
    *out = f;
    return true;
  }
}

// auto for one (In, Mid, Op) on any layout; see the top of this file.
template <class R>
cudaError_t run_reduce(const ReduceArgs& a, size_t* workspace_bytes) {
  // argmax and argmin (positions only) over one element: every position is 0, and the result is
  // a fresh contiguous tensor of the outputs (argmax over dim 0 of (1025, 4096, 1, 1).transpose(2,
  // 0) float32 read every element: 62 us, torch's fill 8; the memset 9.1, H200).
  if constexpr (is_indexed_v<typename R::Op>) {
    if (a.out == nullptr && a.out2 != nullptr && a.layout.reduced == 1 && a.layout.combine == 1) {
      if (workspace_bytes) {
        *workspace_bytes = 0;
        return cudaSuccess;
      }
      return cudaMemsetAsync(a.out2, 0, size_t(a.layout.outer * a.layout.inner) * sizeof(int64_t), a.stream);
    }
  }
  // Small reductions in one kernel (whole contiguous ones but of indexed operators have the
  // vector kernels').
  SmallIndex small;
  if (a.indexed.usable &&
      (small_reaches<R>(a.indexed, whole_rows_loads<R>(a.layout, a.in) > 0) || small_beats_passes<R>(a)) &&
      (is_indexed_v<typename R::Op> || !a.layout.is_full_contiguous()) && small_index(a.indexed, &small))
    return run_small<R>(a, small, workspace_bytes);
  if (a.layout.combine > 1) return run_combined<R>(a, workspace_bytes);
  ReduceArgs folded = a;
  if (fold_interleaved<R>(a.layout, &folded.layout)) return run_combined<R>(folded, workspace_bytes);
  return run_layout<R>(a, Sink{a.out, a.types.out, a.project, a.out2}, workspace_bytes);
}

#define TREDUCE_INSTANTIATE_RUN_REDUCE(IN, MID, OP)                                  \
  template cudaError_t run_reduce<Reduction<ctype_t<DType::IN>, ctype_t<DType::MID>, OP>>( \
      const ReduceArgs&, size_t*);

}  // namespace treduce::cuda
