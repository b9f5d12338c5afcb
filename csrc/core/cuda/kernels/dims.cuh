// auto over dims: every operator (reduce_ops.h) on any Layout3 (layout.h), that is
//   out[outer_out(o) + inner_out(i)] = reduce over r of x[outer_in(o) + r * in_reduced + i * in_inner],
// the outer index one run of memory or the digits of several (inner_out(i) = i * out_inner, but
// for the columns kernels' merged inner runs). Shapes of work, picked by
// plan_reduce (cuda/plan_reduce.h, where each choice's measurements are) and launched by
// run_reduce (the end of this file):
//  - small reductions (up to Tuning::small_elements elements, any layout; up to 2^19-2^20 for a few
//    long rows and for columns whose adjacent results are adjacent in memory, small_reaches):
//    one kernel indexing the elements through the IndexedLayout, a team of threads a result
//    (small_kernel); past that, where its one pass beat the others' two or their idle threads
//    (small_beats_passes: several reduced runs the innermost contiguous, narrow columns of up
//    to 128 rows that are not dense slabs, adjacent results adjacent in memory);
//  - full reduction of a contiguous run: the vector kernel (vector.cuh);
//  - maps (one element a result) whose input and result run together along inner: several
//    elements a thread (map_kernel);
//  - short reductions whose results are transposed against the input (the inner run
//    contiguous, Tuning::transpose_least_inner long at least): tiles of 4 to 32 lanes along inner,
//    as many as cover the run, reduced into shared memory and stored with the lanes along outer
//    (transpose_tile_kernel); maps so transposed, of accumulators of 8 bytes or more, the
//    elements themselves through shared memory in tiles of 4096 (transpose_map_kernel);
//  - several reduced runs (Layout3::combine): one pass over the longest run (for few results, the
//    contiguous one where it is long enough: rows) into partials, then a second kernel combines
//    each result's partials, a block each for a few results (Planner::combined); also a few results
//    interleaved in one long run, read as rows of k results each (fold_interleaved);
//  - dense rows of 3, 5, 6 or 7 elements (2, 4, 8 under a vector), one run of memory, 16-byte aligned, from 1 MiB: a
//    thread the rows of that many 16-byte vectors, reduced in registers (short_rows_kernel);
//  - short columns (2 to 8 rows) of whole aligned pieces of 4 elements (2 of 8-byte ones),
//    results consecutive along inner: a thread 1 to 4 pieces of results over (outer, inner)
//    flattened, their rows loaded at once and reduced in registers (short_columns_kernel);
//  - dense slabs (each outer index's [reduced][inner] elements one contiguous block of at most
//    kSlabBytes) of short rows, short columns and columns narrower than 128 bytes (short
//    columns of wide accumulators as well as where tiles would be taken): a block stages
//    whole slabs in shared memory, then teams of lanes reduce each output from there
//    (slab_kernel); outer runs that are one run of memory read as one (transposed results);
//  - short reductions (up to kTileReduced elements) over many outputs where the shapes below
//    would idle, and short rows that are not whole vectors, where slabs do not apply, and
//    transposed rows of 2 to 4 whole 16-byte words: one to four outputs a thread, by their
//    length (tile_kernel);
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
// Columns: blocks of kColumnsBlock threads, X across the outputs times Y down the reduced dim
// (1 to 32; up to the whole block for rows of few outputs).

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

// Rows a block a row (two_vector_rows_kernel; plan.h's block_rows_kernel).
template <class R>
inline constexpr bool kBlockRows =
    block_rows_kernel(int(sizeof(typename R::In)), int(sizeof(typename R::Acc)), kGroupRows<R>);

// Short rows (teams of up to kDependentTeam lanes) are launched with programmatic dependence, as
// the full-reduction kernels: the kernel waits for the one before it (which may still be writing
// x), then lets the next one launch, which waits for this one in turn. Rows of 128 float32, hot:
// 7.0-7.2 -> 6.4-6.6 us (the launch gap between calls was a tenth of the time). Teams of 16 and
// 32 lanes (long rows) launch plainly: (4096, 4096) bfloat16 over dim -1 went 6.33 -> 6.94 us
// with it.

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
  // programmatic dependence only in small grids, see plan_reduce.h; they never let the next kernel
  // launch early.)
  cudaGridDependencySynchronize();
  if constexpr (kTeam <= kDependentTeam) cudaTriggerProgrammaticLaunchCompletion();
#endif
  while (o < l.outer) {
    auto v = row_part<R, kTeam, kGroupRows<R>>(row, 0, l.reduced, l.in_reduced, t);
    v = team_reduce<Op, kTeam>(v);
    if (t == 0) store_acc<Op, typename R::In>(out, l.outer_out(o), v);
    o += int64_t(gridDim.x) * kRowsPerBlock;
    if (o < l.outer) row = x + l.outer_in(o);
  }
}

// Whole short rows: every row m aligned 16-byte vectors, kTeam * kLoads (a power of two) the
// fewest slots that hold them, a team of kTeam lanes a row and a row a team (no loop), each
// lane's kLoads vectors (those below m) loaded at once. The same
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
// One team's row for whole_rows_kernel: m vectors from v (lane t's first), the result to out at
// `at`. kExact: m is the instance's kTeam * kLoads slots, every load made unguarded (the guards,
// zeroed registers and second paths of the inexact form cost 5-10% on short rows of a power of
// two of vectors in CUDA graphs, H200).
// Rows of other counts took rows_kernel's general teams before. Hot us, H200, before -> after
// (torch.compile): mean over rows of 56 of (32064, 56) float32 3.86 -> 2.38 (torch 8.5), var over
// rows of 56 of (151936, 56) bfloat16 8.78 -> 7.25 (5.0), logsumexp over rows of 80 of (151936,
// 80) float32 19.6 -> 15.7, mean over rows of 80 of (128, 17, 64, 80) float32 11.7 -> 8.9, sum
// over rows of 224 of (1024, 7, 224) bfloat16 1.97 -> 1.52. Both forms in one kernel left two
// rows of a power of two slower (the exact form's code unchanged but for the branch): prod over
// rows of 128 of (12, 1023, 128) bfloat16 1.30 -> 1.55, sum over rows of 128 of (5120, 8, 128)
// bfloat16 2.25 -> 2.45; so each form is an instance of its own (kExact).
template <class R, int kTeam, int kLoads, bool kExact>
__device__ __forceinline__ void whole_row(const uint4* v, int m, int t, int64_t at, Sink out) {
  using Op = typename R::Op;
  constexpr int64_t kPer = 16 / int64_t(sizeof(typename R::In));
  // Lane t's load u is vector t + u * kTeam, made where that is below m.
  bool in[kLoads];
  uint4 r[kLoads];
#pragma unroll
  for (int u = 0; u < kLoads; ++u) {
    in[u] = kExact || t + u * kTeam < m;
    if constexpr (kExact) r[u] = __ldg(v + u * kTeam);
    else r[u] = in[u] ? __ldg(v + u * kTeam) : uint4{};
  }
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
        if (!in[u]) continue;
        A w[kPer];
        convert_vector<typename R::In, typename R::Mid>(r[u], w);
#pragma unroll
        for (int j = 0; j < kPer; ++j) f(w[j]);
      }
    };
    const A count = A(m * int(kPer));
    const A pivot = __shfl_sync(team_mask<kTeam>(), R::value(reinterpret_cast<const typename R::In*>(&r[0])[0]), 0, kTeam);
    A s = A(0);
    for_each_value([&](A w) { s += w - pivot; });
    const A mean = Op::row_mean(pivot, team_sum<kTeam>(s), count);
    A d1 = A(0), d2 = A(0);
    for_each_value([&](A w) {
      const A d = w - mean;
      d1 += d;
      d2 += d * d;
    });
    acc = Op::from_deviations(mean, team_sum<kTeam>(d1), team_sum<kTeam>(d2), count);
    if (t == 0) store_acc<Op, typename R::In>(out, at, acc);
    return;
  }
  if constexpr (kGroupRows<R>) {
    if (in[kLoads - 1]) {
      acc = reduce_loads<R>(r);
    } else {  // a lane past the row's end: its loads a group each
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {
        const uint4 one[1] = {r[u]};
        if (in[u]) acc = Op::combine(acc, reduce_loads<R>(one));
      }
    }
  } else {
#pragma unroll
    for (int u = 0; u < kLoads; ++u)
      if (in[u]) vector_into<R>(acc, r[u], int64_t(t + u * kTeam) * kPer);
  }
  acc = team_reduce<Op, kTeam>(acc);
  if (t == 0) store_acc<Op, typename R::In>(out, at, acc);
}

// kExact: every row fills the instance's slots (a power of two of vectors), the launcher's choice.
template <class R, int kTeam, int kLoads, bool kExact>
__global__ void __launch_bounds__(kRowsBlock, 2048 / kRowsBlock)
whole_rows_kernel(const typename R::In* x, Layout3 l, Sink out) {
  constexpr int64_t kPer = 16 / int64_t(sizeof(typename R::In));
  const int t = threadIdx.x % kTeam;
  const int64_t o = int64_t(blockIdx.x) * (kRowsBlock / kTeam) + threadIdx.x / kTeam;
  if (o >= l.outer) return;  // whole teams
  // The row's address and its result's place before the wait, as small_kernel's indexes (CUDA
  // graphs, H200, sums over 1024 bfloat16 rows of 128: 1.05 -> 0.98 us).
  const auto* v = reinterpret_cast<const uint4*>(x + l.outer_in(o)) + t;
  const int64_t at = l.outer_out(o);
  // Rows of m vectors, more than half the instance's slots (plan.h's whole_rows_slots).
  const int m = kExact ? kTeam * kLoads : int(l.reduced / kPer);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();  // as rows_kernel's short rows
  cudaTriggerProgrammaticLaunchCompletion();
#endif
  whole_row<R, kTeam, kLoads, kExact>(v, m, t, at, out);
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
// `whole`: one segment a row, every row whole aligned 16-byte vectors (the planner checked): the
// block issues its loads first, with no division of the block index and no head or tail.
template <class R>
__global__ void __launch_bounds__(kSegmentBlock)
row_segments_kernel(const typename R::In* x, Layout3 l, int64_t per_segment, int segments, bool whole, Sink out) {
  if (whole) {
    auto acc = R::Op::identity();
    vectors_into<R, kSegmentBlock, kGroupLoads<R>>(acc, reinterpret_cast<const uint4*>(x + l.outer_in(blockIdx.x)),
                                                   l.reduced / (16 / int64_t(sizeof(typename R::In))), 0, threadIdx.x);
    acc = block_reduce<typename R::Op, kSegmentBlock>(acc);
    if (threadIdx.x == 0) store_acc<typename R::Op, typename R::In>(out, l.outer_out(blockIdx.x), acc);
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
  if (threadIdx.x == 0) store_acc<typename R::Op, typename R::In>(out, segments == 1 ? l.outer_out(o) : int64_t(blockIdx.x), v);
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
  if (threadIdx.x == 0) store_acc<Op, typename R::In>(out, l.outer_out(blockIdx.x), acc);
}

// The same with the rows' combine in it, for eager calls (see plan_reduce.h): each block writes its
// partial, then takes a number from its row's ticket word (0 between calls; the last block
// sets it back to 0), and the row's last block combines the row's partials into `out` with
// row_partials_kernel's arithmetic, so the same bits. A kernel of its own: with the combine in
// the kernel above, 16 of its 149 instantiations took enough registers more to lose a block a
// multiprocessor (4 to 3, 3 to 2; ptxas, sm_90), which CUDA graphs would have paid too. The
// combine inline (out of line, the call took 40 registers for float32 sums here, against 31).
// With the caches cold it is up to 0.45 us slower than the two kernels (a one-row argmax of
// 2^26, 3.3 us), and an eager loop of calls 2-3 us a call faster (benchmarks/NOTES.md at 8d99fb0).
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
  if (threadIdx.x == 0) store_acc<Op, typename R::In>(out, l.outer_out(o), w);
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
  if (lane == 0) store_acc<Op, typename R::In>(out, l.outer_out(o), v);
}

// Columns: thread (x, y) of block (b, split) owns outputs i0 .. i0 + V - 1 of outer index
// o (b = o * column_blocks + column block, or column block * outer + o where outer_fastest; i0
// counted from `first`) and combines rows
// split * per_split + y, + Y, ... of them, U loads in flight; threads with i0 >= `end` own
// none. V > 1 only when the caller checked that every row of [first, end) is whole aligned
// vectors of V elements (16 or 8 bytes; the last outputs of a row, fewer than V, are another
// launch with V = 1). The Y threads of a column are combined in y order; with one split that
// is the result, else the split's partial, at [split][o][i].
// columns_rows loads a thread's rows, columns_store combines the Y threads of each column and
// stores. Kept lean on purpose: with the partial-vector path inside, 64-bit division for o and
// one store per output, bfloat16 took 62 registers and was 5-10% slower than torch on (128,
// 65536) and (32, 4096, 4096) over dim 0; now 1.00x and 1.07x.
//
// Rows r, r + Y, ... below r_end of a thread's V outputs from i0 of outer index o into acc, U loads
// in flight (columns_kernel).
template <class R, int V, int U>
__device__ __forceinline__ void columns_rows(const typename R::In* x, const Layout3& l, unsigned o, int64_t i0,
                                             int64_t r, int64_t r_end, typename R::Acc (&acc)[V]) {
  using In = typename R::In;
  using Op = typename R::Op;
  constexpr int kBytes = V * int(sizeof(In));
  using Load = std::conditional_t<V == 1, In, std::conditional_t<kBytes == 16, uint4, uint2>>;
  const int Y = blockDim.y;
  // Row `r` of the reduced dim (its position, for indexed operators).
  const auto add = [&](const Load& v, int64_t row) {
    if constexpr (V == 1) {
      element_into<R>(acc[0], v, row);
    } else {
      typename R::Value t[16 / sizeof(In)];
      if constexpr (kBytes == 16) convert_vector<In, typename R::Mid>(v, t);
      else convert_vector<In, typename R::Mid>(uint4{v.x, v.y, 0u, 0u}, t);  // the upper half unused
#pragma unroll
      for (int j = 0; j < V; ++j) {
        if constexpr (is_indexed_v<Op>) acc[j] = Op::reduce_at(acc[j], t[j], row);
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

// The Y threads of each column of columns_kernel combined in y order, then each output's value
// stored at out_at(i) (i from column_output(c), below `end`).
template <class R, int V, class ColumnOutput, class OutAt>
__device__ __forceinline__ void columns_store(typename R::Acc (&acc)[V], const Layout3& l, int64_t i0, int64_t end,
                                              const ColumnOutput& column_output, const OutAt& out_at, Sink out) {
  using Op = typename R::Op;
  using Acc = typename R::Acc;
  const int X = blockDim.x, Y = blockDim.y;
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
        if (i < end) store_acc<Op, typename R::In>(out, out_at(i + j), v);
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
    for (int j = 0; j < V; ++j) store_acc<Op, typename R::In>(out, out_at(i0 + j), acc[j]);
  }
}

template <class R, int V, int U>
__global__ void __launch_bounds__(kColumnsBlock, kMinBlocksOf<R>)
columns_kernel(const typename R::In* x, Layout3 l, unsigned column_blocks, int64_t first, int64_t end,
               int64_t per_split, Sink out, bool outer_fastest) {
  using Op = typename R::Op;
  using Acc = typename R::Acc;
  static_assert(V == 1 || V * sizeof(typename R::In) == 16 || V * sizeof(typename R::In) == 8,
                "elements, or 16- or 8-byte vectors");
  // 32-bit: the grid's x is below 2^31. outer_fastest (plan_reduce.h's columns): the outer
  // indexes of a column block one after another in the grid, so that blocks that run together
  // read the same sectors.
  const unsigned o = outer_fastest ? blockIdx.x % unsigned(l.outer) : blockIdx.x / column_blocks;
  const unsigned column_block = outer_fastest ? blockIdx.x / unsigned(l.outer) : blockIdx.x - o * column_blocks;
  const int X = blockDim.x;
  // The first output of column c of the block, and where output i of outer index o goes: the
  // split's partial at [split][o][i], or the result.
  const auto column_output = [&](int c) { return first + (int64_t(column_block) * X + c) * V; };
  const auto out_at = [&](int64_t i) {
    return gridDim.y > 1 ? (int64_t(blockIdx.y) * l.outer + o) * l.inner + i : l.outer_out(o) + l.inner_out(i);
  };
  const int64_t i0 = column_output(threadIdx.x);
  const int64_t r_end = min64(l.reduced, (blockIdx.y + 1) * per_split);
  Acc acc[V];
#pragma unroll
  for (int j = 0; j < V; ++j) acc[j] = Op::identity();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // With splits a combine kernel follows: wait, then let it launch, as row_segments_kernel
  // ((65536, 128) float32 over dim 0, graph replays: 9.4 -> 8.4 us a call, with the combine's
  // own trigger, chain_next_call). Small grids launch the same way (plan_reduce.h); launched
  // plainly, both calls return at once. The wait comes after the indexes, as small_kernel's
  // (hot, H200: mean over dim 1 of (96, 128, 7) float32 1.90 -> 1.81 us, of (56, 512, 40)
  // bfloat16 2.78 -> 2.67; inf-norm over dim 0 of (224, 3, 768) bfloat16 2.63 -> 2.52).
  cudaGridDependencySynchronize();
  cudaTriggerProgrammaticLaunchCompletion();
#endif
  if (i0 < end) columns_rows<R, V, U>(x, l, o, i0, blockIdx.y * per_split + threadIdx.y, r_end, acc);
  columns_store<R, V>(acc, l, i0, end, column_output, out_at, out);
}

// Small reductions (up to Tuning::small_elements elements in all, small_count a result), any layout, in
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
// The team is sized for kSmallVectorLoads vector loads a thread (single elements: kSmallLoads;
// plan.h). A vector is 2 to 16
// conversions and combines, longer than one more level of shuffles: in CUDA graphs, H200, a copy
// of the kernel, bfloat16 sums over rows of 128 (16 vectors), 14 rows 1.15 -> 1.03 us with teams
// of 8 lanes instead of 2, 512 rows 1.68 -> 1.22. A single element is one combine: teams sized
// for 2 of them were 0.03-0.12 us slower than for 8 (rows of 3, columns of 40).

// The indexes come as SmallIndex (plan.h): IndexedLayout in 32 bits (the planner checks that
// every offset is below 2^31), packed: each
// launch's parameters are new to the constant cache, so each line of them the kernel reads is a
// miss on its critical path, and a small kernel's warp issues its instructions one after another
// (ncu: 301 instructions a warp for mean over (4, 3), torch.compile's kernel 50). A copy of the
// kernel in CUDA graphs, H200, mean over (4, 3) bfloat16: 1.33 us a call with IndexedLayout's
// 64-bit fields (300 bytes) and arithmetic, 1.18 with 32-bit arithmetic.
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

// small_kernel's two passes of Welford's over a result held in its team's registers (team <= 32
// lanes, each lane's elements one group). values(f) calls f(value, first, valid) for each of the
// lane's values in order (first: the lane's first slot, the result's first element on lane 0;
// valid: an element of the result, not a slot past its end). The team's sums are butterflies:
// every lane of the team gets the same bits.
template <class R, class Values>
__device__ __forceinline__ void small_row_passes(const Sink& out, int32_t k, bool live, int32_t lane, int32_t team,
                                                 int32_t count, Values values) {
  using Op = typename R::Op;
  using A = typename R::Value;
  const auto team_total = [&](A v) {
    for (int offset = team / 2; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
  };
  A first = A(0);
  values([&](A w, bool is_first, bool) {
    if (is_first) first = w;
  });
  const A pivot = __shfl_sync(0xffffffffu, first, 0, team);
  const A n = A(count);
  A s = A(0);
  values([&](A w, bool, bool valid) {
    if (valid) s += w - pivot;
  });
  const A mean = Op::row_mean(pivot, team_total(s), n);
  A d1 = A(0), d2 = A(0);
  values([&](A w, bool, bool valid) {
    if (valid) {
      const A d = w - mean;
      d1 += d;
      d2 += d * d;
    }
  });
  const auto acc = Op::from_deviations(mean, team_total(d1), team_total(d2), n);
  if (live && lane == 0) store_acc<Op, typename R::In>(out, k, acc);
}

// small_kernel's result of up to team * kLoads loads (units: vectors or elements) held in its
// team's registers (team <= 32 lanes, a warp's part): Welford's as two passes over them, as
// whole_rows_kernel's rows (VarOp::row_mean, from_deviations; the pivot the result's first
// element), three sums over the team instead of a division an element and a Welford combine at
// each of the team's levels. base, first, step: as small_kernel's.
template <class R, int kLoads>
__device__ __forceinline__ void small_row_in_registers(const Sink& out, const typename R::In* base,
                                                       const typename R::In* first, int32_t step, const SmallIndex& l,
                                                       int32_t k, bool live, int32_t lane, int32_t team, bool vectors) {
  using In = typename R::In;
  constexpr int32_t kPer = 16 / int32_t(sizeof(In));
  const int32_t count = l.count;
  if (vectors) {
    const int32_t units = count / kPer;
    uint4 r[kLoads];
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int32_t v = lane + u * team;
      const In* at = l.reduced_runs <= 1 ? first + u * step : base + small_offset(l.reduced, l.reduced_runs, v * kPer);
      r[u] = live && v < units ? __ldg(reinterpret_cast<const uint4*>(at)) : uint4{};
    }
    small_row_passes<R>(out, k, live, lane, team, count, [&](auto f) {
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {
        typename R::Value w[kPer];
        convert_vector<In, typename R::Mid>(r[u], w);
#pragma unroll
        for (int j = 0; j < kPer; ++j) f(w[j], u == 0 && j == 0, lane + u * team < units);
      }
    });
  } else {
    In e[kLoads];
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int32_t i = lane + u * team;
      const In* at = l.reduced_runs <= 1 ? first + u * step : base + small_offset(l.reduced, l.reduced_runs, i);
      e[u] = live && i < count ? *at : In();
    }
    small_row_passes<R>(out, k, live, lane, team, count, [&](auto f) {
#pragma unroll
      for (int u = 0; u < kLoads; ++u) f(R::value(e[u]), u == 0, lane + u * team < count);
    });
  }
}

// Each thread's result, first element and step between loads (one reduced run) are worked out
// from the parameters before the kernel waits for the one before it (programmatic dependence), so
// that arithmetic overlaps the previous kernel instead of following it (ncu: ~240 instructions a
// warp over rows of 3, one after another). In CUDA graphs, H200, bfloat16 sums through run_reduce:
// rows of 3 1.20 -> 0.88 us, columns of 12 1.37 -> 1.07, 14 rows of 128 1.42 -> 1.10 (and the
// team above), with a pointer and a step instead of an index a load, and the Sink first among the
// parameters (0.03-0.08 of it in a copy of the kernel: its fields, read at the store, then share
// the constant lines read first).
// kLoads (2, 4 or 8; plan.h's small_loads): the loads of a group, at least a thread's loads up to
// 8, so that a thread of few loads issues no predicated slots of a group of 8 (each slot's guard
// and, for struct accumulators and positions, its predicated combine).
template <class R, int kLoads>
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
  if constexpr (HasRowPasses<Op>::value) {
    // Each lane's elements one group: Welford's as two passes over a team's registers.
    const int32_t units = vectors ? count / kPer : count;
    if (team <= 32 && count > 0 && units <= team * kLoads) {
      small_row_in_registers<R, kLoads>(out, base, first, step, l, k, live, lane, team, vectors);
      return;
    }
  }
  auto acc = Op::identity();
  // A group of kLoads elements j, j + team, ... (at(u, i): the group's element u, i = j + u *
  // team), all loaded before any is used; i is also the position indexed operators keep.
  const auto group = [&](int32_t j, auto at) {
    In e[kLoads];
#pragma unroll
    for (int u = 0; u < kLoads; ++u) e[u] = j + u * team < count ? at(u, j + u * team) : In();
    if constexpr (is_indexed_v<Op>) {
      if (j + (kLoads - 1) * team < count) {  // a whole group: its extremum, then one test
        typename R::Value t[kLoads];
#pragma unroll
        for (int u = 0; u < kLoads; ++u) t[u] = R::value(e[u]);
        acc = Op::reduce_run_at(acc, t, j, team);
        return;
      }
    }
    if constexpr (kGroupLoads<R>) {
      if (j + (kLoads - 1) * team < count) {  // a whole group: one combine (see kGroupLoads)
        typename R::Value t[kLoads];
#pragma unroll
        for (int u = 0; u < kLoads; ++u) t[u] = R::value(e[u]);
        acc = Op::combine(acc, reduce_values<Op>(t));
        return;
      }
    }
#pragma unroll
    for (int u = 0; u < kLoads; ++u)
      if (j + u * team < count) element_into<R>(acc, e[u], j + u * team);
  };
  // The same for the vectors v, v + team, ... below n (at(u, w): the address of vector w, the
  // group's u).
  const auto vector_group = [&](int32_t v, int32_t n, auto at) {
    uint4 r[kLoads];
    bool in_range[kLoads];
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      in_range[u] = v + u * team < n;
      r[u] = in_range[u] ? __ldg(at(u, v + u * team)) : uint4{};
    }
    if constexpr (kGroupLoads<R>) {
      if (in_range[kLoads - 1]) {
        acc = Op::combine(acc, reduce_loads<R>(r));
        return;
      }
    }
#pragma unroll
    for (int u = 0; u < kLoads; ++u)
      if (in_range[u]) vector_into<R>(acc, r[u], (v + u * team) * kPer);
  };
  if (!live) {            // nothing to read
  } else if (vectors) {  // whole aligned vectors: the innermost reduced run is a multiple of them
    const int32_t n = count / kPer;
    if (l.reduced_runs <= 1) {
      const In* p = first;
      for (int32_t v = lane; v < n; v += team * kLoads, p += step * kLoads)
        vector_group(v, n, [&](int u, int32_t) { return reinterpret_cast<const uint4*>(p + u * step); });
    } else {  // the other runs through the index: (40, 256)[::2] of int16, all of it, 3.5 us a load at a time
      for (int32_t v = lane; v < n; v += team * kLoads)
        vector_group(v, n, [&](int, int32_t w) {
          return reinterpret_cast<const uint4*>(base + small_offset(l.reduced, l.reduced_runs, w * kPer));
        });
    }
  } else if (l.reduced_runs <= 1) {  // one run: a stride
    const In* p = first;
    for (int32_t j = lane; j < count; j += team * kLoads, p += step * kLoads)
      group(j, [&](int u, int32_t) { return p[u * step]; });
  } else {
    for (int32_t j = lane; j < count; j += team * kLoads)
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
  if (live && lane == 0) store_acc<Op, typename R::In>(out, k, acc);
}

// An output of `reduced` (at most kR) elements e[0, reduced), in registers. Welford's in two
// passes over them (VarOp::row_mean, from_deviations; the pivot the first element), as
// whole_rows_kernel's rows, where the one-element updates divided at every element: an infinity
// among the elements makes the mean and the variance NaN, as torch's (whose Welford's combines of
// its per-thread accumulators do; one element after another, an infinity last left the mean
// infinite). The others element by element, in order. (slab_kernel's and tile_kernel's outputs.)
template <class R, int kR>
__device__ __forceinline__ typename R::Acc short_reduction(const typename R::In (&e)[kR], int reduced) {
  using Op = typename R::Op;
  auto acc = Op::identity();
  if constexpr (HasRowPasses<Op>::value) {
    using A = typename R::Value;
    const A count = A(reduced), pivot = R::value(e[0]);
    A sum = A(0);
#pragma unroll
    for (int r = 0; r < kR; ++r)
      if (r < reduced) sum += R::value(e[r]) - pivot;
    const A mean = Op::row_mean(pivot, sum, count);
    A d1 = A(0), d2 = A(0);
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      if (r < reduced) {
        const A d = R::value(e[r]) - mean;
        d1 += d;
        d2 += d * d;
      }
    }
    acc = Op::from_deviations(mean, d1, d2, count);
  } else {
#pragma unroll
    for (int r = 0; r < kR; ++r)
      if (r < reduced) element_into<R>(acc, e[r], r);
  }
  return acc;
}

// Short reductions over many outputs (Layout3 with reduced <= kTileReduced) where the columns
// kernel's shape would leave most threads idle or the result is transposed against the input,
// and short rows that are not whole vectors: a thread holds whole outputs and issues all of their
// loads at once. A block is a tile of 2^a_bits (times kO) along A times 256 >> a_bits along B: A is
// the dim whose outputs are adjacent in the result (inner, or outer when the result is
// transposed against the input, or rows), so that the stores are whole runs; when A is not the
// input's contiguous dim, the tile's B rows read the rest of each sector, from L1. The columns
// kernel put its threads down the reduced dim and across a row's outputs, which here left most
// of them idle: var of (11008, 3, 16) over dim 1 ran 64 threads down a reduced dim of 3 and 4
// across, 11008 blocks of 256 threads.

// An output's elements as one aligned word of W (its reduced run contiguous, W bytes long).
template <class W, class In, int N>
__device__ __forceinline__ void load_word(const In* p, In (&e)[N]) {
  const W w = __ldg(reinterpret_cast<const W*>(p));
  constexpr int n = int(sizeof(W) / sizeof(In)) < N ? int(sizeof(W) / sizeof(In)) : N;
#pragma unroll
  for (int r = 0; r < n; ++r) memcpy(&e[r], reinterpret_cast<const char*>(&w) + r * sizeof(In), sizeof(In));
}

// An output's elements as `units` aligned units W of 4, 8 or 16 bytes (its reduced run
// contiguous, units * sizeof(W) bytes long, at most N elements).
template <class W, class In, int N>
__device__ __forceinline__ void load_units(const In* p, In (&e)[N], int units) {
  constexpr int kUnits = (N * int(sizeof(In)) + int(sizeof(W)) - 1) / int(sizeof(W));
  W w[kUnits];
#pragma unroll
  for (int q = 0; q < kUnits; ++q) w[q] = q < units ? __ldg(reinterpret_cast<const W*>(p) + q) : W{};
  memcpy(e, w, sizeof(e) < sizeof(w) ? sizeof(e) : sizeof(w));
}

// `word`: the bytes of each output's reduced run where the planner found it contiguous and
// aligned to its unit (plan_reduce.h's tile_units): 16-byte words where the bytes are a multiple
// of 16 (rows of 4, 8 or 16 float32, of 8 or 16 bfloat16), else units of 8 or 4 bytes (rows of
// 12 bfloat16: three of 8; of 2 float32: one of 8), loaded at once; 0, an element a load. kR: the
// elements an output is unrolled for (plan.h's tile_unroll), at least l.reduced; each thread
// takes kO = tile_outputs(kR) outputs along A, 2^a_bits apart (a block: kO << a_bits along A),
// all their loads issued before any is used: the index arithmetic and the wait once for kO
// outputs (one output a thread issued ~150 instructions a warp for outputs of 2 or 3 elements).
// Blocks of 64 to kTileBlock threads, blockDim.x >> a_bits along B (few outputs: small blocks).
template <class R, int kR>
__global__ void __launch_bounds__(kTileBlock)
tile_kernel(const typename R::In* x, Layout3 l, int a_bits, bool a_is_outer, int word, Sink out) {
  using Op = typename R::Op;
  using In = typename R::In;
  constexpr int kO = tile_outputs(kR);
  const int64_t nA = a_is_outer ? l.outer : l.inner, nB = a_is_outer ? l.inner : l.outer;
  const int reduced = int(l.reduced);  // at most kR: 32-bit guards
  const int64_t step = l.in_reduced;
  const int64_t a0 = (int64_t(blockIdx.x) * kO << a_bits) + (threadIdx.x & ((1u << a_bits) - 1));
  int64_t b = int64_t(blockIdx.y) * (blockDim.x >> a_bits) + (threadIdx.x >> a_bits);
  // Output k of the thread's, (a0 + k 2^a_bits, b): its first element and its place in the result.
  const In* p[kO];
  int64_t at[kO];
  const auto first = [&](int k) {
    const int64_t a = a0 + (int64_t(k) << a_bits);
    const int64_t o = a_is_outer ? a : b, i = a_is_outer ? b : a;
    p[k] = x + l.outer_in(o) + i * l.in_inner;
    at[k] = l.outer_out(o) + i * l.out_inner;
  };
  const auto live = [&](int k) { return a0 + (int64_t(k) << a_bits) < nA; };
  // Every output from the first's indexes where A is inner or one outer run (a stride each),
  // else each through the outer runs' digits.
  const auto firsts = [&]() {
    first(0);
    if (!a_is_outer || l.outer_runs.runs <= 1) {
      const int64_t in_a = (a_is_outer ? l.in_outer : l.in_inner) << a_bits;
      const int64_t out_a = (a_is_outer ? l.out_outer : l.out_inner) << a_bits;
#pragma unroll
      for (int k = 1; k < kO; ++k) p[k] = p[0] + k * in_a, at[k] = at[0] + k * out_a;
    } else {
#pragma unroll
      for (int k = 1; k < kO; ++k)
        if (live(k)) first(k);
    }
  };
  // The outputs' indexes before the wait, as small_kernel's.
#pragma unroll
  for (int k = 0; k < kO; ++k) p[k] = x, at[k] = 0;
  if (a0 < nA && b < nB) firsts();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
  cudaTriggerProgrammaticLaunchCompletion();
#endif
  // The thread's outputs at row b (p and at set).
  const auto reduce_outputs = [&]() {
    In e[kO][kR];  // every load issued before any is used
#pragma unroll
    for (int k = 0; k < kO; ++k) {
      if (!live(k)) {
#pragma unroll
        for (int r = 0; r < kR; ++r) e[k][r] = In();
      } else if (word > 0 && word % 16 == 0) {
        load_units<uint4>(p[k], e[k], word / 16);
      } else if (sizeof(In) < 8 && word > 0 && word % 8 == 0) {
        load_units<uint2>(p[k], e[k], word / 8);
      } else if (sizeof(In) < 4 && word > 0) {
        load_units<unsigned>(p[k], e[k], word / 4);
      } else {
#pragma unroll
        for (int r = 0; r < kR; ++r) e[k][r] = r < reduced ? p[k][r * step] : In();
      }
    }
#pragma unroll
    for (int k = 0; k < kO; ++k)
      if (live(k)) store_acc<Op, typename R::In>(out, at[k], short_reduction<R>(e[k], reduced));
  };
  if (a0 >= nA || b >= nB) return;
  reduce_outputs();
  // Past 65535 tiles along B the grid steps over the rest (the loop's constants stay out of the
  // first row's path: hoisted for a loop around it, they were 40 of its instructions).
  const int64_t stride = int64_t(gridDim.y) * (blockDim.x >> a_bits);
  for (b += stride; b < nB; b += stride) {
    firsts();
    reduce_outputs();
  }
}

// Short reductions whose result is transposed against the input, inner contiguous in the input
// (in_inner == 1, or rows packed along it: in_inner == reduced) and outer in the result: a block
// reduces a tile of L * kV inner x (kTileBlock / L) * kTransposeRows outer outputs with its L
// lanes along inner (kV elements a lane, one load where aligned), the accumulators through shared
// memory, and stores them with its lanes along outer (each store a run of the result). L (4, 8,
// 16 or 32) is the fewest lanes whose elements cover the inner run: a tile 32 * kV wide over an
// inner run of 28 bfloat16 left three lanes in four idle, and the tile kernel's lanes along outer
// read a sector a lane (sum over the size-1 dim of (32064, 1, 128, 28).transpose(3, 2) bfloat16:
// 912 us in tile_kernel, torch.compile 115, torch 795; H200, hot). The tile's outer offsets are
// worked out once, into shared memory, and each thread's rows' loads are in flight together: the
// first version of this kernel divided for every row and loaded one row at a time, ran
// issue-bound (SM 86%, DRAM 14%, ncu) and took 218 us for a float32 sum over the dim of 2 of (8,
// 2048, 1024, 2) (transposed from (8, 2, 1024, 2048); 66 us with 32 lanes, torch.compile 49).
// Over one element a result (a transposed map) it is also the kernel: int16 sum over the size-1
// dim of (1, 31, 1024, 3072).permute(3, 2, 0, 1) 1657 -> 280 us (torch.compile 279). (H200, CUDA
// graphs.)
template <class R>
inline constexpr int kTransposeV = transpose_vector(int(sizeof(typename R::In)), int(sizeof(typename R::Acc)));
template <class R>
inline constexpr int kTransposeVBits = kTransposeV<R> == 4 ? 2 : kTransposeV<R> == 2 ? 1 : 0;

template <int kBytes>
using LoadWord = std::conditional_t<kBytes == 16, uint4,
                 std::conditional_t<kBytes == 8, uint2, std::conditional_t<kBytes == 4, unsigned, unsigned short>>>;

// A lane's kV elements of a row as one word (4 or 8 bytes): one load where `words` says every
// row is aligned to it; two aligned loads and a funnel shift where the row is contiguous but not
// aligned (rows of an odd length) and the next word is the row's too (left >= 2 kV); else
// elements (zeros past the row). The aligned words of a row's elements lie in its allocation.
// Elements one at a time took 4 loads a word and their tests: amin over dim 0 of (14, 50257, 49)
// int8 (transposed) 69.5 us against 39.8 for (14, 50256, 49) (H100).
template <class R>
using TransposeWord = std::conditional_t<kTransposeV<R> * sizeof(typename R::In) == 8, unsigned long long, unsigned>;

template <class R>
__device__ __forceinline__ TransposeWord<R> transpose_word(const typename R::In* p, bool row, int64_t left, bool words,
                                                          int64_t in_inner) {
  using In = typename R::In;
  using Word = TransposeWord<R>;
  constexpr int kV = kTransposeV<R>;
  static_assert(sizeof(Word) == kV * sizeof(In), "a word is a lane's elements");
  if (!row || left <= 0) return Word(0);
  if (words && left >= kV) return __ldg(reinterpret_cast<const Word*>(p));
  if (in_inner == 1 && left >= 2 * kV) {
    const uintptr_t at = reinterpret_cast<uintptr_t>(p);
    const unsigned shift = unsigned(at % sizeof(Word)) * 8;
    const Word* q = reinterpret_cast<const Word*>(at - at % sizeof(Word));
    const Word lo = __ldg(q), hi = __ldg(q + 1);
    if constexpr (sizeof(Word) == 4) return __funnelshift_r(lo, hi, shift);
    else return shift ? lo >> shift | hi << (64 - shift) : lo;
  }
  In e[kV];
#pragma unroll
  for (int v = 0; v < kV; ++v) e[v] = v < left ? p[v * in_inner] : In();
  Word w;
  memcpy(&w, e, sizeof(w));
  return w;
}

template <class R, int kU>
__global__ void __launch_bounds__(kTileBlock)
transpose_tile_kernel(const typename R::In* x, Layout3 l, int64_t inner_tiles, bool words, int lane_bits, Sink out) {
  using Op = typename R::Op;
  using In = typename R::In;
  using Acc = typename R::Acc;
  constexpr int kV = kTransposeV<R>;
  static_assert(kU == 1 || kV == 1, "rows at once for elements one at a time only (words: their registers)");
  constexpr int kMostOuter = (kTileBlock >> kTransposeLeastLaneBits) * kTransposeRows;
  // A tile is O x I outputs, I = L * kV, O = (kTileBlock / L) * kTransposeRows, rows I + 1 apart
  // (the stores' lanes, a row apart, fall in different banks): O * (I + 1) <= this.
  constexpr int kTileAccs = kTileBlock * kTransposeRows * kV + kMostOuter;
  __shared__ alignas(16) unsigned char raw[kTileAccs * sizeof(Acc)];
  __shared__ int64_t in_at[kMostOuter], out_at[kMostOuter];
  Acc* tile = reinterpret_cast<Acc*>(raw);
  const int rows = kTileBlock >> lane_bits;  // outer indexes a round of the block's loads
  const int kO = rows * kTransposeRows, kI = kV << lane_bits, pitch = kI + 1;
  const int tx = int(threadIdx.x) & ((1 << lane_bits) - 1), ty = int(threadIdx.x) >> lane_bits;
  const int64_t i0 = int64_t(blockIdx.x % inner_tiles) * kI, o0 = int64_t(blockIdx.x / inner_tiles) * kO;
  if (int(threadIdx.x) < kO) {  // before the wait: the layout only
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
  // kU reduced rows' loads at once (plan_reduce.h's tiles): 4 for elements one at a time (kV ==
  // 1), 16 loads a thread as with words, where the grid is short of a block a multiprocessor or
  // the rows are 4 or more but for positions. The instance holds 75-101 registers against 32-48:
  // 2 blocks a multiprocessor, not 5. Words (kV > 1) a row at a time: 4 rows of words at once
  // took 120-255 registers and lost, amin over dim 0 of (14, 50257, 49) int8 (transposed) 66.0 ->
  // 92.8 us, bfloat16 82.3 -> 194 (H100, CUDA graphs).
  const int reduced = int(l.reduced);  // at most kTileReduced
  const auto row_at = [&](int k, int r) { return x + in_at[ty + k * rows] + r * l.in_reduced + i * l.in_inner; };
  for (int r0 = 0; r0 < reduced; r0 += kU) {
    if constexpr (kV > 1) {
      TransposeWord<R> w[kU][kTransposeRows];
#pragma unroll
      for (int u = 0; u < kU; ++u)
#pragma unroll
        for (int k = 0; k < kTransposeRows; ++k) {
          const bool row = o0 + ty + k * rows < l.outer && r0 + u < reduced;
          w[u][k] = transpose_word<R>(row_at(k, r0 + u), row, left, words, l.in_inner);
        }
#pragma unroll
      for (int u = 0; u < kU; ++u)
#pragma unroll
        for (int k = 0; k < kTransposeRows; ++k) {
          In e[kV];
          memcpy(e, &w[u][k], sizeof(e));
#pragma unroll
          for (int v = 0; v < kV; ++v)
            if (r0 + u < reduced && o0 + ty + k * rows < l.outer && v < left) element_into<R>(acc[k][v], e[v], r0 + u);
        }
    } else {
      In e[kU][kTransposeRows];
#pragma unroll
      for (int u = 0; u < kU; ++u)
#pragma unroll
        for (int k = 0; k < kTransposeRows; ++k) {
          const bool row = o0 + ty + k * rows < l.outer && r0 + u < reduced;
          e[u][k] = row && left > 0 ? *row_at(k, r0 + u) : In();
        }
#pragma unroll
      for (int u = 0; u < kU; ++u)
#pragma unroll
        for (int k = 0; k < kTransposeRows; ++k)
          if (r0 + u < reduced && o0 + ty + k * rows < l.outer && left > 0) element_into<R>(acc[k][0], e[u][k], r0 + u);
    }
  }
#pragma unroll
  for (int k = 0; k < kTransposeRows; ++k)
#pragma unroll
    for (int v = 0; v < kV; ++v) tile[(ty + k * rows) * pitch + tx * kV + v] = acc[k][v];
  // Whether the tile's results are consecutive along outer (the usual case: the result's
  // innermost run): then, for words of kV elements (1- and 2-byte inputs), each lane stores kV of
  // them as one run (store_run: one dtype test and one store of 4 or 8 bytes, not kV of each).
  // aminmax over the dim of 3 of (3, 64, 8, 49152).transpose(3, 0) uint8 issued ~136
  // instructions a result with one store a result (ncu, H200: 248 us, SM 68%, DRAM 9%).
  const bool dense = __syncthreads_and(int(threadIdx.x) >= kO || o0 + int(threadIdx.x) >= l.outer ||
                                       out_at[threadIdx.x] == out_at[0] + int(threadIdx.x));
  if constexpr (kV > 1) {
    if (dense) {
      const int lanes = kO / kV;  // a column's lanes, kV results each
      const int o = (int(threadIdx.x) % lanes) * kV;
      for (int c = int(threadIdx.x) / lanes; c < kI; c += kTileBlock / lanes) {
        const int64_t at = i0 + c;
        if (at >= l.inner || o0 + o >= l.outer) continue;
        Acc v[kV];
#pragma unroll
        for (int j = 0; j < kV; ++j) v[j] = tile[(o + j) * pitch + c];
        const int64_t to = out_at[o] + at * l.out_inner;
        if (o0 + o + kV <= l.outer) {
          store_run<Op>(out, to, v);
        } else {
#pragma unroll
          for (int j = 0; j < kV; ++j)
            if (o0 + o + j < l.outer) store_acc<Op, typename R::In>(out, to + j, v[j]);
        }
      }
      return;
    }
  }
  // Lanes along outer: the tile's O / 32 runs of 32 outer indexes times its I inner ones, 32 * kV
  // (run, inner) pairs in all, kV * 4 a warp.
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5, inner_bits = lane_bits + kTransposeVBits<R>;
#pragma unroll
  for (int q = 0; q < kV * kTransposeRows; ++q) {
    const int pair = warp + q * (kTileBlock / 32), o = ((pair >> inner_bits) << 5) + lane;
    const int64_t at = i0 + (pair & (kI - 1));
    if (o0 + o < l.outer && at < l.inner)
      store_acc<Op, typename R::In>(out, out_at[o] + at * l.out_inner, tile[o * pitch + (pair & (kI - 1))]);
  }
}

// Maps (one element a result) whose results are transposed against the input, the input's inner
// run contiguous: a block moves a tile of TI inner x TO outer elements (TI = 2^ti_bits, 8 to 64,
// the fewest that cover the inner run; TI * TO = kTransposeMapTile) through shared memory in the
// input's type, loaded with lanes along inner and stored with lanes along outer (the result's
// run), kTransposeMapTile / kTileBlock elements a thread each way, all loads issued first. The
// element becomes its result only at the store. transpose_tile_kernel took these as reductions
// of one row: its accumulators (an int64 count for any and all) in registers and shared memory,
// 98 registers and 38.9 KB a block, 25% occupancy: all over the size-1 dim of (1, 80, 11008,
// 64).permute(3, 2, 1, 0) bfloat16 276 us, torch.compile 67.5 (H100, hot; ncu 15% of DRAM).
// Rows of the tile are TI + kPad elements apart, kPad making the pitch an odd number of 4-byte
// words (1- and 2-byte inputs) or of elements: the stores' lanes, a row apart, read different
// banks.
template <class R>
__global__ void __launch_bounds__(kTileBlock)
transpose_map_kernel(const typename R::In* x, Layout3 l, int64_t inner_tiles, int ti_bits, Sink out) {
  using Op = typename R::Op;
  using In = typename R::In;
  constexpr int kPer = kTransposeMapTile / kTileBlock;
  constexpr int kPad = sizeof(In) >= 4 ? 1 : 4 / int(sizeof(In));
  constexpr int kMostRows = kTransposeMapTile >> kTransposeMapLeastInnerBits;
  __shared__ alignas(16) In tile[kTransposeMapTile + kMostRows * kPad];
  __shared__ int64_t in_at[kMostRows], out_at[kMostRows];
  const int to_bits = kTransposeMapTileBits - ti_bits, TO = 1 << to_bits, pitch = (1 << ti_bits) + kPad;
  const int64_t i0 = int64_t(blockIdx.x % inner_tiles) << ti_bits, o0 = int64_t(blockIdx.x / inner_tiles) << to_bits;
  for (int r = int(threadIdx.x); r < TO; r += kTileBlock) {  // before the wait: the layout only
    const int64_t o = o0 + r;
    in_at[r] = o < l.outer ? l.outer_in(o) + i0 : 0;
    out_at[r] = o < l.outer ? l.outer_out(o) : 0;
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
  cudaTriggerProgrammaticLaunchCompletion();
#endif
  __syncthreads();
  In e[kPer];
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int f = int(threadIdx.x) + k * kTileBlock, i = f & ((1 << ti_bits) - 1), r = f >> ti_bits;
    e[k] = o0 + r < l.outer && i0 + i < l.inner ? x[in_at[r] + i] : In();
  }
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int f = int(threadIdx.x) + k * kTileBlock;
    tile[(f >> ti_bits) * pitch + (f & ((1 << ti_bits) - 1))] = e[k];
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int f = int(threadIdx.x) + k * kTileBlock, r = f & (TO - 1), c = f >> to_bits;
    if (o0 + r < l.outer && i0 + c < l.inner) {
      typename R::Acc acc = Op::identity();
      element_into<R>(acc, tile[r * pitch + c], 0);
      store_acc<Op, In>(out, out_at[r] + (i0 + c) * l.out_inner, acc);
    }
  }
}

// Positions of argmax and argmin over one element: zeros, two a thread. A kernel rather than
// cudaMemsetAsync, whose node in a CUDA graph took 1.17 us against torch.compile's fill kernel's
// 0.70 (argmax over dim -2 of (1, 80) uint8, H200). The stores wait for the previous kernel: the
// result's memory may be what it still reads.
template <class R>
__global__ void __launch_bounds__(kFillBlock) zero_positions_kernel(int64_t* positions, int64_t n) {
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * 2;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaTriggerProgrammaticLaunchCompletion();
  cudaGridDependencySynchronize();
#endif
  if (i + 1 < n && reinterpret_cast<uintptr_t>(positions) % 16 == 0) {
    *reinterpret_cast<longlong2*>(positions + i) = longlong2{0, 0};
  } else {
    if (i < n) positions[i] = 0;
    if (i + 1 < n) positions[i + 1] = 0;
  }
}

// Reductions over one element a result (a reduced dim of size 1) whose input and result both
// run along inner: a map. Where every row starts on a whole word (`words`: the planner's test of
// the address and the outer strides), a thread takes kMapLoads elements as words of 16 bytes (8
// for 1-byte elements), kMapBlock words apart, and stores each word's results as a run; else
// kMapLoads elements kMapBlock apart. Either way every load is issued before any is used; the
// outer index steps in y. The columns kernel took such layouts with its threads down a reduced
// dim of one: var over the size-1 dim of (64, 1, 3, 151936).transpose(1, 2) float16 117 us, 80
// registers, 13% of DRAM's peak (ncu, H200); this kernel 94 us, still a third of torch.compile's
// speed (29.5). Element loads of 2 bytes were 64 bytes a warp's load: amax over the size-1 dim
// of (3, 256, 32000)[::3] bfloat16, 16 MB in and out, 13.7 -> 8.3 us in words (torch.compile
// 5.7; H200, hot). A first version took a thread's kMapLoads consecutive elements (two or four
// words of 4- and 8-byte elements, a warp's load 1 KB wide with holes) and argmax's positions
// too: nansum over the size-1 dim of (128256, 1, 16).transpose(2, 1) float32 4.45 -> 9.52 us,
// max with positions over dim 0 of (1, 8192, 4096) float32 136 -> 430 us (100 registers).
template <class R>
__global__ void __launch_bounds__(kMapBlock)
map_kernel(const typename R::In* x, Layout3 l, bool words, Sink out) {
  using Op = typename R::Op;
  using In = typename R::In;
  const int64_t b0 = int64_t(blockIdx.x) * (kMapBlock * kMapLoads);
  // Not for argmax and argmin (positions, 8 bytes a result, stored whole by the element loop):
  // their words took 100-108 registers against 56.
  constexpr bool is_words = !is_indexed_v<Op>;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
  cudaTriggerProgrammaticLaunchCompletion();
#endif
  for (int64_t o = blockIdx.y; o < l.outer; o += gridDim.y) {
    const In* p = x + l.outer_in(o);
    const int64_t at = l.outer_out(o);
    if (is_words && words) {
      // Word k of a thread starts kEW * (k * kMapBlock + thread) elements into the block: each
      // load and store of a warp is one contiguous run (512 bytes of 16-byte words).
      constexpr int kEW = (sizeof(In) == 1 ? 8 : 16) / int(sizeof(In));
      constexpr int kW = kMapLoads / kEW;
      using Word = std::conditional_t<sizeof(In) == 1, uint2, uint4>;
      In w[kW][kEW];
#pragma unroll
      for (int k = 0; k < kW; ++k) {
        const int64_t i = b0 + (int64_t(k) * kMapBlock + threadIdx.x) * kEW;
        if (i + kEW <= l.inner) {
          load_word<Word>(p + i, w[k]);
        } else {
#pragma unroll
          for (int u = 0; u < kEW; ++u) w[k][u] = i + u < l.inner ? p[i + u] : In();
        }
      }
#pragma unroll
      for (int k = 0; k < kW; ++k) {
        const int64_t i = b0 + (int64_t(k) * kMapBlock + threadIdx.x) * kEW;
        typename R::Acc acc[kEW];
#pragma unroll
        for (int u = 0; u < kEW; ++u) {
          acc[u] = Op::identity();
          element_into<R>(acc[u], w[k][u], 0);
        }
        if (i + kEW <= l.inner) {
          store_run<Op>(out, at + i, acc);
        } else {
#pragma unroll
          for (int u = 0; u < kEW; ++u)
            if (i + u < l.inner) store_acc<Op, In>(out, at + i + u, acc[u]);
        }
      }
      continue;
    }
    const int64_t i0 = b0 + threadIdx.x;
    In e[kMapLoads];
#pragma unroll
    for (int u = 0; u < kMapLoads; ++u) e[u] = i0 + u * kMapBlock < l.inner ? p[i0 + u * kMapBlock] : In();
#pragma unroll
    for (int u = 0; u < kMapLoads; ++u) {
      if (i0 + u * kMapBlock < l.inner) {
        auto acc = Op::identity();
        element_into<R>(acc, e[u], 0);
        store_acc<Op, In>(out, at + i0 + u * kMapBlock, acc);
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
// bfloat16 expanded to 4096 on dim 2, 560 -> 112 (56). An output a thread (many outputs a
// block) of up to 8 elements loads them into registers first and reduces them there
// (short_reduction; Welford's in two passes): mean over rows of 3 of (128, 128, 128, 3) bfloat16
// 13.7 -> 12.4 us, amax over dim -1 of (50257, 3, 28).permute(0, 2, 1) float32 7.74 -> 7.20, std
// over rows of 3 float32 115.8 -> 119.3 (H200, hot). Still 2-3.5x torch.compile's kernel (3.6,
// 3.1, 63.4), which keeps a row's elements in one thread's registers without the shared memory
// pass: dense aligned rows of 3, 5, 6 and 7 from 1 MiB now take short_rows_kernel (below; the
// mean 12.9 -> 6.0 us, the std 120.2 -> 62.8).

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
  if (!s.linear && !s.run_linear && t < n) base[t] = l.outer_in(o0 + t);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
  cudaTriggerProgrammaticLaunchCompletion();
#endif
  if (s.linear || s.run_linear) {
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
  if (team == 1 && reduced <= 8) {  // an output a thread, its elements in registers
    const auto outputs_of = [&](auto unroll) {
      for (int32_t q = t; q < outputs; q += kSlabBlock) {
        constexpr int kR = decltype(unroll)::value;
        const int32_t g = int32_t(divide(uint32_t(q), s.inner_magic, s.inner_shift)), i = q - g * inner;
        const In* p = tile + g * S + i;
        In e[kR];  // every load before any is used
#pragma unroll
        for (int r = 0; r < kR; ++r) e[r] = r < reduced ? p[r * inner] : In();
        store_acc<Op, In>(out, l.outer_out(o0 + g) + i * l.out_inner, short_reduction<R>(e, reduced));
      }
    };
    if (reduced <= 4) outputs_of(std::integral_constant<int, 4>{});
    else outputs_of(std::integral_constant<int, 8>{});
    return;
  }
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
    if (live && lane == 0) store_acc<Op, typename R::In>(out, l.outer_out(o0 + g) + i * l.out_inner, acc);
  }
}

// Dense rows of kR elements (3, 5, 6, 7; 2, 4, 8 under a vector): row o at x[o * kR], its result at o (plan_reduce.h's
// short_rows, with the measurements). A thread takes kP = 16 / sizeof(In) consecutive rows, which are kR whole 16-byte
// vectors (the input 16-byte aligned): all kR loaded at once, each row reduced from registers
// (short_reduction, constant indexes), the kP results stored as one run. The last rows, fewer
// than kP, an element a load. Blocks of 64 to kShortRowsBlock threads.
template <class R, int kR>
__global__ void __launch_bounds__(kShortRowsBlock)
short_rows_kernel(const typename R::In* x, int64_t rows, Sink out) {
  using Op = typename R::Op;
  using In = typename R::In;
  constexpr int kP = 16 / int(sizeof(In));
  const int64_t o0 = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * kP;
  const uint4* p = reinterpret_cast<const uint4*>(x) + (o0 / kP) * kR;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
  cudaTriggerProgrammaticLaunchCompletion();
#endif
  if (o0 >= rows) return;
  if (o0 + kP <= rows) {
    uint4 v[kR];
#pragma unroll
    for (int u = 0; u < kR; ++u) v[u] = __ldg(p + u);
    In e[kP * kR];
    memcpy(e, v, sizeof(v));
    typename R::Acc acc[kP];
#pragma unroll
    for (int j = 0; j < kP; ++j) {
      In row[kR];
#pragma unroll
      for (int k = 0; k < kR; ++k) row[k] = e[j * kR + k];
      acc[j] = short_reduction<R>(row, kR);
    }
    store_run<Op>(out, o0, acc);
    return;
  }
  for (int64_t o = o0; o < rows; ++o) {
    In row[kR];
#pragma unroll
    for (int k = 0; k < kR; ++k) row[k] = x[o * kR + k];
    store_acc<Op, In>(out, o, short_reduction<R>(row, kR));
  }
}

// Short columns of whole aligned pieces (Layout3 with 2 or more rows, in_inner == 1, inner a
// multiple of kP = short_columns_piece(sizeof(In)) elements, out_inner == 1): a thread K pieces
// of kP neighbouring results, the pieces' rows all loaded at once (kR rows an instance, 2, 4 or
// 8, at least the layout's; K * kR <= kShortColumnsRows loads; more rows than 8 in rounds of 8,
// K = 1), each result
// reduced from registers (short_reduction), each piece's kP results stored as one run. The
// threads go over (outer index, piece of inner) flattened, piece g at (g / row_pieces, g %
// row_pieces), a block's K * blockDim.x pieces consecutive, so a narrow inner run leaves none
// idle: slab_kernel staged such rows in shared memory and reduced an output a thread from there
// (mean over dim -2 of (49152, 2, 16) float16: 6.04 us in CUDA graphs, torch.compile 1.73; H200).
// Pieces of 4 results (2 of 8-byte inputs), not 16-byte vectors: a vector of 1-byte inputs was 16
// results a thread, 16 int64 accumulators (spilled) and 128 bytes of stores, and few threads
// (count_nonzero over dim 1 of (96, 2, 56, 1024) uint8: 51 us, torch.compile 15; sum over the dim
// of 7 of a transposed (7, 128256) int8, 32 blocks: 4.9 us against 1.6); and one instance of 8
// rows for every count up to 8 issued ~670 instructions a warp for 2 rows of a vector
// (float16 mean above: 4.1 us against 1.7 (ncu: issue-bound, 2.5 IPC; H200)).
template <class R, int kR, int K, bool kRounds = false>
__global__ void __launch_bounds__(kShortColumnsBlock)
short_columns_kernel(const typename R::In* x, Layout3 l, uint32_t pieces, uint32_t row_pieces, uint32_t magic,
                     uint32_t shift, Sink out) {
  using Op = typename R::Op;
  using In = typename R::In;
  constexpr int kP = short_columns_piece(int(sizeof(In)));
  constexpr int kBytes = kP * int(sizeof(In));
  using Piece = std::conditional_t<kBytes == 16, uint4, std::conditional_t<kBytes == 8, uint2, uint32_t>>;
  static_assert(kBytes == int(sizeof(Piece)), "a piece is one aligned load");
  const uint32_t first = blockIdx.x * (blockDim.x * K) + threadIdx.x;  // below 2^31 (the planner's bound)
  // The 2-row instance takes 2 rows only: a count known when compiled, no guards.
  const int reduced = kR == 2 ? 2 : int(l.reduced);
  const In* p[K];
  int64_t at[K];
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const uint32_t g = first + k * blockDim.x, o = divide(g, magic, shift), c = g - o * row_pieces;
    p[k] = x + l.outer_in(o) + int64_t(c) * kP;
    at[k] = l.outer_out(o) + int64_t(c) * kP;
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
  cudaTriggerProgrammaticLaunchCompletion();
#endif
  if constexpr (kRounds) {
    // More rows than kR = 8 in rounds of 8, each round's loads at once, its elements into the
    // accumulators in order (Welford's: a round in two passes, combined). (Its own instance: the
    // accumulators held across rounds took the 8-row one from 32-48 registers to 48-80.)
    static_assert(K == 1 && kR == kShortColumnsRows, "a piece a thread, rounds of 8");
    if (first >= pieces) return;
    typename R::Acc acc[kP];
    for (int r0 = 0; r0 < reduced; r0 += kR) {
      const int rows = std::min(reduced - r0, kR);
      Piece v[kR];
#pragma unroll
      for (int r = 0; r < kR; ++r)
        v[r] = r < rows ? __ldg(reinterpret_cast<const Piece*>(p[0] + (r0 + r) * l.in_reduced)) : Piece{};
      In e[kR][kP];
      memcpy(e, v, sizeof(e));
#pragma unroll
      for (int j = 0; j < kP; ++j) {
        In column[kR];
#pragma unroll
        for (int r = 0; r < kR; ++r) column[r] = e[r][j];
        if (r0 == 0) {
          acc[j] = short_reduction<R>(column, rows);
        } else if constexpr (HasRowPasses<Op>::value) {
          acc[j] = Op::combine(acc[j], short_reduction<R>(column, rows));
        } else {
#pragma unroll
          for (int r = 0; r < kR; ++r)
            if (r < rows) element_into<R>(acc[j], column[r], r0 + r);
        }
      }
    }
    store_run<Op>(out, at[0], acc);
  } else {
    Piece v[K][kR];
#pragma unroll
    for (int k = 0; k < K; ++k)
#pragma unroll
      for (int r = 0; r < kR; ++r)
        v[k][r] = first + k * blockDim.x < pieces && r < reduced
                      ? __ldg(reinterpret_cast<const Piece*>(p[k] + r * l.in_reduced))
                      : Piece{};
#pragma unroll
    for (int k = 0; k < K; ++k) {
      if (first + k * blockDim.x >= pieces) return;
      In e[kR][kP];
      memcpy(e, v[k], sizeof(e));
      typename R::Acc acc[kP];
#pragma unroll
      for (int j = 0; j < kP; ++j) {
        In column[kR];
#pragma unroll
        for (int r = 0; r < kR; ++r) column[r] = e[r][j];
        acc[j] = short_reduction<R>(column, reduced);
      }
      store_run<Op>(out, at[k], acc);
    }
  }
}

// The combine kernels' partials a thread loaded before any is combined: up to 8, fewer for wide
// accumulators (a block of 1024 threads has 64 registers a thread). One at a time, (65536, 128)
// over dim 0 (395 splits, 12 or 13 a thread) took 9.3 us in column_partials_kernel against
// torch.compile's 3.7 for its combine (ncu).
template <class Acc>
inline constexpr int kPartialLoads = sizeof(Acc) <= 8 ? 8 : sizeof(Acc) <= 16 ? 4 : 2;

// Where a combine kernel stores output k (k < outer * inner, in the result's order).
__device__ __forceinline__ int64_t combined_output_at(const Layout3& l, int64_t k) {
  return l.outer_out(k / l.inner) + l.inner_out(k % l.inner);
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
  Acc v = k < outputs ? combine_strided<R, kPartialLoads<Acc>>(partials + k, outputs, int(threadIdx.y),
                                                               int(blockDim.y), splits)
                      : Op::identity();
  __shared__ Acc by_y[32][kPartialsX + 1];
  by_y[threadIdx.y][threadIdx.x] = v;
  __syncthreads();
  if (threadIdx.y > 0 || k >= outputs) return;
  for (int y = 1; y < int(blockDim.y); ++y) v = Op::combine(v, by_y[y][threadIdx.x]);
  store_acc<Op, typename R::In>(out, combined_output_at(l, k), v);
}

// The same combine for a few outputs (plan_reduce.h's partials_step): block b combines output
// b's partials, thread t those at t, t + kBlockPartials, ... in order (all of a round's loads
// issued together), then the block's threads in order (block_reduce). column_partials_kernel
// gave each output 32 threads, a round trip to L2 for every 8 partials of each.
template <class R>
__global__ void __launch_bounds__(kBlockPartials)
block_partials_kernel(const typename R::Acc* partials, int count, Layout3 l, Sink out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
  chain_next_call();
#endif
  using Op = typename R::Op;
  using Acc = typename R::Acc;
  const int64_t outputs = l.outer * l.inner, k = blockIdx.x;
  Acc v = combine_strided<R, kPartialLoads<Acc>>(partials + k, outputs, int(threadIdx.x), kBlockPartials, count);
  v = block_reduce<Op, kBlockPartials>(v);
  if (threadIdx.x == 0) store_acc<Op, typename R::In>(out, combined_output_at(l, k), v);
}

// ---- launch: what plan_reduce (cuda/plan_reduce.h) says, step by step ---------------------

// The planner's view of R: its sizes and kernels, and the occupancy of the kernels whose grids
// are sized by it, queried once per device (one word a device, 0 until asked; a plan costs no
// query after the first).
template <class R>
OpTraits traits_of() {
  using Op = typename R::Op;
  OpTraits t;
  t.in_bytes = int(sizeof(typename R::In));
  t.acc_bytes = int(sizeof(typename R::Acc));
  t.indexed = is_indexed_v<Op>;
  t.group_rows = kGroupRows<R>;
  t.whole_rows = kWholeRows<R>;
  t.quarter = kQuarterBlocks<R>;
  constexpr int kDevices = 64;
  static std::atomic<uint32_t> known[kDevices];
  int device = 0;
  cudaGetDevice(&device);
  uint32_t packed = device >= 0 && device < kDevices ? known[device].load(std::memory_order_relaxed) : 0;
  if (packed == 0) {
    const auto byte = [](int blocks) { return uint32_t(std::clamp(blocks, 1, 255)); };
    uint32_t vector = 1, quarter = 1;
    if constexpr (!is_indexed_v<Op>) vector = byte(vector_resident<R, kVecBlock>());
    if constexpr (kQuarterBlocks<R>) quarter = byte(vector_resident<R, kQuarterBlock>());
    packed = 1u << 24 | byte(resident_blocks_per_sm<row_segments_kernel<R>>(kSegmentBlock)) << 16 | vector << 8 |
             quarter;
    if (device >= 0 && device < kDevices) known[device].store(packed, std::memory_order_relaxed);
  }
  t.segments_resident = int(packed >> 16 & 255);
  t.vector_resident = int(packed >> 8 & 255);
  t.quarter_resident = int(packed & 255);
  return t;
}

// rows_kernel<R, team>, whole_rows_kernel<R, lanes, loads>, columns_kernel<R, V, U>,
// short_columns_kernel<R, rows, K>: the instances a plan may name.
template <class R, class Go>
cudaError_t launch_rows(const Step& s, Go go) {
  switch (s.team) {
    case 1: return go(rows_kernel<R, 1>);
    case 2: return go(rows_kernel<R, 2>);
    case 4: return go(rows_kernel<R, 4>);
    case 8: return go(rows_kernel<R, 8>);
    case 16: return go(rows_kernel<R, 16>);
    case 32: return go(rows_kernel<R, 32>);
    default: return cudaErrorInvalidValue;
  }
}

template <class R, class Go>
cudaError_t launch_whole_rows(const Step& s, Go go) {
  if constexpr (kWholeRows<R>) {
    // The instance of whole_rows_slots(loads) slots, whole_rows_lanes of them lanes (plan.h),
    // exact where the rows fill them (rows of 1 and 2 vectors always do).
    const int slots = whole_rows_slots(s.loads);
    const bool exact = slots == s.loads;
    const auto instance = [&](auto slots) {
      constexpr int kSlots = decltype(slots)::value, kLanes = whole_rows_lanes(kSlots);
      if constexpr (kSlots > 2)
        if (!exact) return go(whole_rows_kernel<R, kLanes, kSlots / kLanes, false>);
      return go(whole_rows_kernel<R, kLanes, kSlots / kLanes, true>);
    };
    switch (slots) {
      case 1: return instance(std::integral_constant<int, 1>{});
      case 2: return instance(std::integral_constant<int, 2>{});
      case 4: return instance(std::integral_constant<int, 4>{});
      case 8: return instance(std::integral_constant<int, 8>{});
      case 16: return instance(std::integral_constant<int, 16>{});
      case 32: return instance(std::integral_constant<int, 32>{});
      case 64: return instance(std::integral_constant<int, 64>{});
      default: break;
    }
  }
  return cudaErrorInvalidValue;
}

template <class R, class Go>
cudaError_t launch_columns(const Step& s, Go go) {
  using In = typename R::In;
  constexpr int kV = columns_vector(int(sizeof(In)), is_indexed_v<typename R::Op>);  // plan.h
  constexpr int kU = columns_element_loads(kGroupRows<R>);
  if (s.V == 1 && s.U == kU) return go(columns_kernel<R, 1, kU>);
  if (s.V == kV && s.U == 4) return go(columns_kernel<R, kV, 4>);
  if constexpr (sizeof(In) == 2)
    if (s.V == kV / 2 && s.U == 8) return go(columns_kernel<R, kV / 2, 8>);
  return cudaErrorInvalidValue;
}

// short_columns_kernel<R, kR, K>: kR the instance's rows (2, 4 or 8, at least `reduced`; more
// in rounds of 8), K pieces a thread (plan_reduce.h's short_columns: K * kR <= kShortColumnsRows).
template <class R, class Go>
cudaError_t launch_short_columns(int64_t reduced, int K, Go go) {
  if (reduced == 2) {
    if (K == 4) return go(short_columns_kernel<R, 2, 4>);
    if (K == 2) return go(short_columns_kernel<R, 2, 2>);
    if (K == 1) return go(short_columns_kernel<R, 2, 1>);
  } else if (reduced == 3 || reduced == 4) {
    if (K == 2) return go(short_columns_kernel<R, 4, 2>);
    if (K == 1) return go(short_columns_kernel<R, 4, 1>);
  } else if (reduced > 4 && reduced <= kShortColumnsRows && K == 1) {
    return go(short_columns_kernel<R, kShortColumnsRows, 1>);
  } else if (reduced > kShortColumnsRows && K == 1) {
    return go(short_columns_kernel<R, kShortColumnsRows, 1, true>);
  }
  return cudaErrorInvalidValue;
}

template <class R>
cudaError_t launch_step(const Step& s, const ReduceArgs& a) {
  using In = typename R::In;
  using Acc = typename R::Acc;
  char* ws = static_cast<char*>(a.workspace);
  const Sink result{a.out, a.types.out, a.project, a.out2};
  const Sink sink = s.to < 0 ? result : Sink::partials(ws + s.to);
  const auto* x = static_cast<const In*>(a.in);
  auto* partials = s.from < 0 ? nullptr : reinterpret_cast<Acc*>(ws + s.from);
  const dim3 grid(unsigned(s.grid[0]), unsigned(s.grid[1])), block(unsigned(s.block[0]), unsigned(s.block[1]));
  const auto launch = [&](auto kernel, auto... args) {
    if (s.dependent) return launch_dependent(kernel, grid, block, a, args...);
    kernel<<<grid, block, 0, a.stream>>>(args...);
    return last_launch_error();
  };
  const Layout3& l = s.layout;
  switch (s.kernel) {
    case Kernel::Fill:
      if constexpr (is_indexed_v<typename R::Op>)
        return launch(zero_positions_kernel<R>, static_cast<int64_t*>(a.out2), s.bytes / int64_t(sizeof(int64_t)));
      return cudaErrorInvalidValue;
    case Kernel::VectorBlock:
    case Kernel::VectorWarp:
    case Kernel::VectorGrid:
    case Kernel::VectorCombine:
      if constexpr (!is_indexed_v<typename R::Op>) return launch_vector_step<R>(s, a);
      return cudaErrorInvalidValue;
    case Kernel::Small:
      switch (s.loads) {
        case 2: return launch(small_kernel<R, 2>, result, x, s.team, s.flag, s.small);
        case 4: return launch(small_kernel<R, 4>, result, x, s.team, s.flag, s.small);
        case kSmallLoads: return launch(small_kernel<R, kSmallLoads>, result, x, s.team, s.flag, s.small);
        default: return cudaErrorInvalidValue;
      }
    case Kernel::Map:
      return launch(map_kernel<R>, x, l, s.flag, sink);
    case Kernel::Rows:
      return launch_rows<R>(s, [&](auto kernel) { return launch(kernel, x, l, sink); });
    case Kernel::WholeRows:
      return launch_whole_rows<R>(s, [&](auto kernel) { return launch(kernel, x, l, sink); });
    case Kernel::TwoVectorRows:
      if constexpr (kBlockRows<R>) return launch(two_vector_rows_kernel<R>, x, l, sink);
      return cudaErrorInvalidValue;
    case Kernel::RowSegments:
      return launch(row_segments_kernel<R>, x, l, s.per, int(s.count), s.flag, sink);
    case Kernel::RowSegmentsTicket:
      if (a.ticket == nullptr) return cudaErrorInvalidValue;
      return launch(row_segments_ticket_kernel<R>, x, l, s.per, int(s.count), partials, a.ticket, sink);
    case Kernel::RowPartials:
      return launch(row_partials_kernel<R>, static_cast<const Acc*>(partials), int(s.count), l, sink);
    case Kernel::Columns:
      return launch_columns<R>(s, [&](auto kernel) {
        return launch(kernel, x, l, unsigned(s.column_blocks), s.first, s.end, s.per, sink, s.flag);
      });
    case Kernel::ColumnPartials:
      return launch(column_partials_kernel<R>, static_cast<const Acc*>(partials), int(s.count), l, sink);
    case Kernel::BlockPartials:
      return launch(block_partials_kernel<R>, static_cast<const Acc*>(partials), int(s.count), l, sink);
    case Kernel::Tiles:
      switch (s.loads) {
        case 4: return launch(tile_kernel<R, 4>, x, l, s.a_bits, s.a_is_outer, s.word, sink);
        case 8: return launch(tile_kernel<R, 8>, x, l, s.a_bits, s.a_is_outer, s.word, sink);
        case kTileReduced: return launch(tile_kernel<R, kTileReduced>, x, l, s.a_bits, s.a_is_outer, s.word, sink);
        default: return cudaErrorInvalidValue;
      }
    case Kernel::TransposeTiles:
      if (s.V != kTransposeV<R>) return cudaErrorInvalidValue;
      if constexpr (kTransposeV<R> == 1) {
        if (s.U == 4) return launch(transpose_tile_kernel<R, 4>, x, l, s.inner_tiles, s.flag, s.team, sink);
      }
      if (s.U != 1) return cudaErrorInvalidValue;
      return launch(transpose_tile_kernel<R, 1>, x, l, s.inner_tiles, s.flag, s.team, sink);
    case Kernel::TransposeMap:
      return launch(transpose_map_kernel<R>, x, l, s.inner_tiles, s.team, sink);
    case Kernel::Slabs:
      return launch(slab_kernel<R>, x, l, s.slabs, sink);
    case Kernel::ShortColumns:
      return launch_short_columns<R>(l.reduced, s.loads, [&](auto kernel) {
        return launch(kernel, x, l, uint32_t(s.count), uint32_t(s.per), s.magic, s.shift, sink);
      });
    case Kernel::ShortRows:
      switch (s.loads) {
        case 3: return launch(short_rows_kernel<R, 3>, x, l.outer, sink);
        case 5: return launch(short_rows_kernel<R, 5>, x, l.outer, sink);
        case 6: return launch(short_rows_kernel<R, 6>, x, l.outer, sink);
        case 7: return launch(short_rows_kernel<R, 7>, x, l.outer, sink);
        default: break;
      }
      // Rows of 2, 4 and 8 where less than a vector (plan.h's short_rows_length), or where
      // whole_rows_kernel does not take the op (plan_reduce.h's short_rows): no instances for
      // the others.
      if constexpr (sizeof(typename R::In) <= 4 || !kWholeRows<R>) {
        if (s.loads == 2) return launch(short_rows_kernel<R, 2>, x, l.outer, sink);
      }
      if constexpr (sizeof(typename R::In) <= 2 || !kWholeRows<R>) {
        if (s.loads == 4) return launch(short_rows_kernel<R, 4>, x, l.outer, sink);
      }
      if constexpr (sizeof(typename R::In) == 1 || !kWholeRows<R>) {
        if (s.loads == 8) return launch(short_rows_kernel<R, 8>, x, l.outer, sink);
      }
      return cudaErrorInvalidValue;
  }
  return cudaErrorInvalidValue;
}

// The plan of a call (launch.h's ReduceArgs) for R.
template <class R>
Plan plan_of(const ReduceArgs& a) {
  PlanInput in;
  in.layout = a.layout;
  in.indexed = a.indexed;
  in.address = reinterpret_cast<uintptr_t>(a.in);
  in.ticket = a.ticket != nullptr;
  in.positions_only = a.out == nullptr && a.out2 != nullptr;
  return plan_call(Device{a.sm_count, a.cc_major}, traits_of<R>(), in);
}

// auto for one (In, Mid, Op) on any layout (launch.h's protocol; with `plan`, the plan instead
// and nothing launched).
template <class R>
cudaError_t run_reduce(const ReduceArgs& a, size_t* workspace_bytes, Plan* plan) {
  const Plan p = plan_of<R>(a);
  if (plan) *plan = p;
  if (workspace_bytes) *workspace_bytes = p.workspace;
  if (plan || workspace_bytes) return cudaSuccess;
  if (p.invalid) return cudaErrorInvalidConfiguration;
  for (int k = 0; k < p.steps; ++k)
    if (cudaError_t e = launch_step<R>(p.step[k], a); e != cudaSuccess) return e;
  return cudaSuccess;
}

// run_reduce of one (In, Mid, operator); the operator may hold commas (NormOp<A, K>).
#define TREDUCE_INSTANTIATE_RUN_REDUCE(IN, MID, ...)                                         \
  template cudaError_t run_reduce<Reduction<ctype_t<DType::IN>, ctype_t<DType::MID>, __VA_ARGS__>>( \
      const ReduceArgs&, size_t*, Plan*);

// What one entry of a dtype.h list instantiates, per operator: the generated units
// (csrc/core/cuda/units.txt) apply one of these to a list. dispatch.cu's launch_reduce calls them.
#define TREDUCE_INSTANTIATE_SUM(IN, MID, ACC) TREDUCE_INSTANTIATE_RUN_REDUCE(IN, MID, Sum<ctype_t<DType::ACC>>)
#define TREDUCE_INSTANTIATE_MAX(IN, ACC) TREDUCE_INSTANTIATE_RUN_REDUCE(IN, IN, MaxOp<ctype_t<DType::ACC>>)
#define TREDUCE_INSTANTIATE_MIN(IN, ACC) TREDUCE_INSTANTIATE_RUN_REDUCE(IN, IN, MinOp<ctype_t<DType::ACC>>)
#define TREDUCE_INSTANTIATE_MINMAX(IN, ACC) TREDUCE_INSTANTIATE_RUN_REDUCE(IN, IN, MinMaxOp<ctype_t<DType::ACC>>)
#define TREDUCE_INSTANTIATE_ARGMAX(IN, ACC) TREDUCE_INSTANTIATE_RUN_REDUCE(IN, IN, ArgMaxOp<ctype_t<DType::ACC>>)
#define TREDUCE_INSTANTIATE_ARGMIN(IN, ACC) TREDUCE_INSTANTIATE_RUN_REDUCE(IN, IN, ArgMinOp<ctype_t<DType::ACC>>)
#define TREDUCE_INSTANTIATE_VAR(IN, ACC) TREDUCE_INSTANTIATE_RUN_REDUCE(IN, IN, VarOp<ctype_t<DType::ACC>>)
#define TREDUCE_INSTANTIATE_NANSUM(IN, ACC) TREDUCE_INSTANTIATE_RUN_REDUCE(IN, IN, NanSumOp<ctype_t<DType::ACC>>)
#define TREDUCE_INSTANTIATE_NANMEAN(IN, ACC) TREDUCE_INSTANTIATE_RUN_REDUCE(IN, IN, NanMeanOp<ctype_t<DType::ACC>>)
#define TREDUCE_INSTANTIATE_LOGSUMEXP(IN, ACC) \
  TREDUCE_INSTANTIATE_RUN_REDUCE(IN, IN, LogSumExpOp<ctype_t<DType::ACC>>)
#define TREDUCE_INSTANTIATE_PROD(IN, ACC) TREDUCE_INSTANTIATE_RUN_REDUCE(IN, IN, ProdOp<ctype_t<DType::ACC>>)
#define TREDUCE_INSTANTIATE_NORM(K, IN, ACC) \
  TREDUCE_INSTANTIATE_RUN_REDUCE(IN, IN, NormOp<ctype_t<DType::ACC>, NormOrd::K>)

}  // namespace treduce::cuda
