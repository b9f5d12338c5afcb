// How `auto` reduces a layout on a CUDA device, as a plain value: the kernels to launch, one
// after another, each with its grid, block, parameters and the workspace it reads or writes
// (Plan). plan_reduce() (plan_reduce.h) works it out from the device (Device), the operator and
// dtypes (OpTraits), the tuning table of the architecture (Tuning, tuning.h) and the folded
// layout (layout.h); kernels/dims.cuh launches what it says, planned through plan_call (below).
// No CUDA and no torch here: the C++ test program and torch_reduce.explain() ask for plans on
// any machine. Nothing is timed while planning, so a
// layout gets the same plan, and its results the same bits, on every call.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <string>
#include <utility>

#include "../layout.h"

namespace treduce::cuda {

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// ---------------------------------------------------------------------------------------------
// Kernel shapes: compiled into the kernels (block sizes, registers held per thread), so constants.

inline constexpr int64_t kMaxGridX = 2147483647;  // the largest grid.x a launch accepts
inline constexpr int64_t kTicketWords = 4096;     // words of a stream's ticket scratch (launch.h)

// Full reductions of one contiguous run (kernels/vector.cuh).
inline constexpr int kVecBlock = 512;
inline constexpr int kVecUnroll = 4;
inline constexpr int64_t kVecTile = int64_t(kVecBlock) * kVecUnroll;
// Up to this many 16-byte vectors one block does it all, saving the second launch.
inline constexpr int64_t kSingleBlockVectors = 8192;  // 128 KiB
// The head of a full reduction is loaded up to a boundary of kVecAlign bytes.
inline constexpr int kVecAlign = 128;
// Sums and means of few tiles: blocks of a quarter (see Tuning::quarter_tiles_per_sm).
inline constexpr int kQuarterBlock = kVecBlock / 4;

// Over dims (kernels/dims.cuh).
inline constexpr int kRowsBlock = 256;     // rows_kernel, whole_rows_kernel, row_partials_kernel
inline constexpr int kSegmentBlock = 512;  // row_segments_kernel, two_vector_rows_kernel: a block a row
inline constexpr int kColumnsBlock = 256;  // columns_kernel: X across the outputs times Y down
inline constexpr int kNarrowBlock = 128;   // columns_kernel of 8-byte vectors (2-byte inputs)
inline constexpr int kColumnsMaxY = 32;
inline constexpr int kPartialsX = 32;  // outputs per block of the column combine
inline constexpr int kBlockPartials = 256;  // block_partials_kernel: a block an output
inline constexpr int kSmallBlock = 256;
inline constexpr int kFillBlock = 256;  // zero_positions_kernel
inline constexpr int kSmallLoads = 8;
// Vector loads a thread the small kernel's team is sized for (single elements: kSmallLoads).
inline constexpr int kSmallVectorLoads = 2;
// The small kernel's instance for a thread's loads: groups of 2, 4 or kSmallLoads.
constexpr int small_loads(int64_t per_thread) { return per_thread <= 2 ? 2 : per_thread <= 4 ? 4 : kSmallLoads; }
inline constexpr int kTileBlockBits = 8;
inline constexpr int kTileBlock = 1 << kTileBlockBits;  // the most; fewer for few outputs (plan_reduce.h)
inline constexpr int kTileReduced = 16;  // the most elements an output tile_kernel holds
inline constexpr int kTransposeTile = 32;  // the fewest outer indexes transpose tiles take
inline constexpr int kTransposeRows = 4;  // rows (outer indexes) a thread
// transpose_tile_kernel's lanes along inner: 4 to 32 (2^2 to 2^5), the fewest whose kV elements
// each cover the inner run; its tiles are 256 / L * kTransposeRows outer indexes tall.
inline constexpr int kTransposeLeastLaneBits = 2, kTransposeMostLaneBits = 5;
// transpose_map_kernel: tiles of 2^12 elements, 8 to 64 (2^3 to 2^6) of them along inner.
inline constexpr int kTransposeMapTileBits = 12, kTransposeMapTile = 1 << kTransposeMapTileBits;
inline constexpr int kTransposeMapLeastInnerBits = 3, kTransposeMapMostInnerBits = 6;
inline constexpr int kMapBlock = 256;
inline constexpr int kMapLoads = 8;
inline constexpr int kSlabBlock = 256;
inline constexpr int kSlabBytes = 8192;  // a block's shared memory of slabs
inline constexpr int kShortRowsBlock = 256;
inline constexpr int kShortColumnsBlock = 256;
inline constexpr int kShortColumnsRows = 8;  // short_columns_kernel's rows a round of loads
// short_columns_kernel's results a thread's piece: 4 (one load of 4, 8 or 16 bytes), 2 of 8-byte
// inputs (16 bytes).
constexpr int short_columns_piece(int in_bytes) { return in_bytes == 8 ? 2 : 4; }
// Dense rows of these lengths go to short_rows_kernel (its instances): 3, 5, 6 and 7, and 2, 4
// and 8 where a row is less than a 16-byte vector (whole vectors go to whole_rows_kernel).
constexpr bool short_rows_length(int64_t reduced, int in_bytes) {
  return reduced == 3 || reduced == 5 || reduced == 6 || reduced == 7 ||
         ((reduced == 2 || reduced == 4 || reduced == 8) && reduced * in_bytes < 16);
}
// Short rows (teams of up to kDependentTeam lanes) are launched with programmatic dependence.
inline constexpr int kDependentTeam = 8;

// Which instance of a kernel an op's sizes get: one definition for the planner (runtime sizes)
// and the launcher (the compiled instance), so the two cannot drift apart.
// Outputs a thread of columns_kernel's wide vectors: 16 bytes of inputs; positions' accumulators
// are 16 bytes, and 16 outputs a thread of 1-byte inputs spilled and overflowed the block's shared
// memory (parked), so those read 8-byte vectors.
constexpr int columns_vector(int in_bytes, bool indexed) { return 16 / in_bytes / (indexed && in_bytes == 1 ? 2 : 1); }
// whole_rows_kernel's instance for rows of `loads` 16-byte vectors (1 to 64): the fewest slots,
// a power of two, that hold them, as lanes x loads a lane: a lane up to 2 vectors, two loads a
// lane up to 16, four from 32. Lanes whose slot is past the row's end load nothing.
constexpr int whole_rows_slots(int64_t loads) {
  int p = 1;
  while (p < loads) p *= 2;
  return p;
}
constexpr int whole_rows_lanes(int slots) { return slots <= 2 ? 1 : slots <= 16 ? slots / 2 : slots / 4; }
// columns_kernel's loads in flight a thread of single elements (V = 1): 8, a small column's 8
// rows a thread (Tuning::small_columns_per_thread) in one round trip, not two of four; 4 for
// operators that reduce a group of loads at once (Welford's, logsumexp's: twice the values in
// registers: logsumexp over dim 0 of (97, 3072) float32 2.64 -> 2.86 us, var_mean over dim 0 of
// (40, 11008) float32 3.07 -> 3.27). In CUDA graphs, H200, the same plans but U, us: mean over
// dim 0 of (128, 768) float16 2.11 -> 1.91 (torch.compile 1.55), count_nonzero over dim 1 of
// (2048, 64, 2, 77) bool 13.5 -> 9.8, amax over dim 0 of (96, 1024) bfloat16 1.99 -> 1.77; 17
// of the 25 such cases of random shapes seeds 29201, 83357, 71011, 40127 and 17377 faster than
// 0.95x, one slower: max over dim 0 of (64, 14, 7, 256) channels_last bfloat16, 16 rows a
// thread, 6.21 -> 7.19 (not understood; torch.compile 5.23).
constexpr int columns_element_loads(bool group) { return group ? 4 : 8; }
// Elements a lane of transpose_tile_kernel: words of 4 for 1- and 2-byte inputs whose
// accumulators fit 8 bytes (the tile in shared memory stays under 48 KB).
constexpr int transpose_vector(int in_bytes, int acc_bytes) { return in_bytes <= 2 && acc_bytes <= 8 ? 4 : 1; }
// A block a row (row_segments_kernel, two_vector_rows_kernel) is compiled for inputs of up to 4
// bytes with accumulators of up to 8 (16 for Welford's and logsumexp's groups).
constexpr bool block_rows_kernel(int in_bytes, int acc_bytes, bool group_rows) {
  return in_bytes <= 4 && (acc_bytes <= 8 || (group_rows && acc_bytes <= 16));
}
// The elements an output tile_kernel's instance is unrolled for: 4, 8 or 16, the fewest that hold
// `reduced`. Every unrolled element costs its guard, address and combine whether it exists or
// not (predicated, not branched): one instance for 16 issued ~430 instructions a warp for an
// output of 2 or 3 elements (ncu, H200: a bool amax over rows of 3, an int16 sum over 2 rows).
constexpr int tile_unroll(int64_t reduced) { return reduced <= 4 ? 4 : reduced <= 8 ? 8 : kTileReduced; }
// Outputs a thread of that instance: kTileReduced elements in all.
constexpr int tile_outputs(int unroll) { return kTileReduced / unroll; }

// ---------------------------------------------------------------------------------------------
// The inputs of a plan.

struct Device {
  int sm_count = 132;
  int cc_major = 9;  // 9 and up launch with programmatic dependence
};

// What the planner needs to know of a reduction's operator and dtypes (kernels/dims.cuh's
// traits_of<R>() for the compiled ones), and how many blocks of the kernels whose occupancy
// sizes a grid fit on a multiprocessor (cudaOccupancyMaxActiveBlocksPerMultiprocessor).
struct OpTraits {
  int in_bytes = 4, acc_bytes = 4;
  bool indexed = false;     // values and positions (argmax, max.dim, ...)
  bool group_rows = false;  // Welford's and logsumexp's groups of loads (kGroupRows)
  bool whole_rows = false;  // whole_rows_kernel is compiled for it (kWholeRows)
  bool quarter = false;     // sums, Welford.s in float: the full reduction.s quarter blocks (kQuarterBlocks)
  int segments_resident = 4;  // row_segments_kernel, kSegmentBlock threads
  int vector_resident = 4;    // the full reduction's grid kernels, kVecBlock threads
  int quarter_resident = 4;   // the same, kQuarterBlock threads
};

struct PlanInput {
  Layout3 layout;
  IndexedLayout indexed;
  uintptr_t address = 0;        // of the input's first element: alignments
  bool ticket = false;          // an eager call with the stream's ticket words (launch.h)
  bool positions_only = false;  // argmax / argmin: no values stored
};

// ---------------------------------------------------------------------------------------------
// The plan.

enum class Kernel : uint8_t {
  Fill,            // zero_positions_kernel: positions of argmax / argmin over one element
  VectorBlock,     // small_sum_kernel: a full reduction in one block
  VectorGrid,      // vector_partials_kernel (or vector_sum_ticket_kernel with a ticket)
  VectorCombine,   // combine_partials_kernel
  Small,           // small_kernel: any layout, a team of lanes a result
  Map,             // map_kernel: an element a result
  Rows,            // rows_kernel<team>
  WholeRows,       // whole_rows_kernel<lanes, loads>
  TwoVectorRows,   // two_vector_rows_kernel: a block a row of two vectors a thread
  RowSegments,     // row_segments_kernel: a block a segment of a row
  RowSegmentsTicket,
  RowPartials,     // row_partials_kernel: the segments of each row combined
  Columns,         // columns_kernel<V, U>
  ColumnPartials,  // column_partials_kernel: the splits (or partials) of each output combined
  Tiles,           // tile_kernel: a thread an output
  TransposeTiles,  // transpose_tile_kernel
  Slabs,           // slab_kernel
  VectorWarp,      // small_warp_kernel: a full reduction of up to a warp's worth of vectors
  ShortRows,       // short_rows_kernel<reduced>: dense short rows, a vector's worth of rows a thread
  BlockPartials,   // block_partials_kernel: the partials of each of a few outputs, a block each
  ShortColumns,    // short_columns_kernel: short columns of whole vectors, 1, 2 or 4 vectors of results a thread
  TransposeMap,    // transpose_map_kernel: a map whose results are transposed against the input
};

inline const char* kernel_name(Kernel k) {
  static const char* const names[] = {
      "zero_positions_kernel", "small_sum_kernel",   "vector_partials_kernel", "combine_partials_kernel",
      "small_kernel",  "map_kernel",         "rows_kernel",            "whole_rows_kernel",
      "two_vector_rows_kernel", "row_segments_kernel", "row_segments_ticket_kernel",
      "row_partials_kernel", "columns_kernel", "column_partials_kernel", "tile_kernel",
      "transpose_tile_kernel", "slab_kernel", "small_warp_kernel", "short_rows_kernel",
      "block_partials_kernel", "short_columns_kernel", "transpose_map_kernel"};
  return names[int(k)];
}

// small_kernel's IndexedLayout in 32 bits (every offset below 2^31), packed (see dims.cuh).
struct SmallRun {
  int32_t size, in;
  uint32_t magic, shift;
};
struct SmallIndex {
  int32_t outputs, count, kept_runs, reduced_runs;
  SmallRun kept[kMaxOuterRuns], reduced[kMaxOuterRuns];
};

// Dense slabs: each outer index's [reduced][inner] elements one contiguous block (slab_kernel).
struct SlabShape {
  int64_t slab;     // S, elements
  int slabs;        // G, a block's
  int team_bits;    // lanes an output
  bool linear;      // slab o at o * S: a block's slabs are one run of memory
  // Not linear, but the outer runs are one run of memory (slab o at o * S still) whose results
  // go through the runs in another order (transposed rows): read as linear, stored through them.
  bool run_linear;
  bool vectors;     // (run_)linear, and each block's run starts and ends 16-byte aligned but the last's end
  uint32_t slab_magic, slab_shift, inner_magic, inner_shift;  // division by S and by inner
};

// A full reduction's split of its run: elements before the first kVecAlign boundary, 16-byte
// vectors, elements after the last.
struct VecSplit {
  int64_t head, vectors, tail;
};

// How a columns step lays out the work for V outputs a thread and blocks of `threads`.
struct ColumnsShape {
  int Y, X;                // threads down the reduced dim and across the outputs, per block
  int64_t whole;           // the outputs of one outer index in whole V-vectors (inner rounded down)
  int64_t column_blocks;   // blocks across those, per outer index
  int64_t splits, per_split;
  bool deep;               // Y past 8 to save a split or for few outputs (not for splits alone)
};

// One launch. `from` and `to`: byte offsets in the workspace of the partials the step reads
// (kernels that read the input: -1) and writes (-1: the result).
struct Step {
  Kernel kernel = Kernel::Fill;
  int64_t grid[2] = {1, 1};
  int block[2] = {1, 1};
  bool dependent = false;  // programmatic dependent launch (sm_90 and up)
  int64_t from = -1, to = -1;
  Layout3 layout;  // the layout the step reads
  // The kernel's own parameters (0 where it takes none):
  int team = 0, loads = 0;          // Rows: team; WholeRows: lanes, loads a row; Tiles, Small: the instance;
                                    // ShortColumns: pieces a thread;
                                    // TransposeTiles: log2 of the lanes along inner;
                                    // TransposeMap: log2 of the tile's width along inner
  int V = 0, U = 0;                 // Columns: outputs a thread, loads in flight; TransposeTiles: elements
                                    // a lane, reduced rows loaded at once
  int64_t count = 0;                // segments, splits or partials an output (and blocks, VectorCombine)
  int64_t per = 0;                  // elements a segment or a split
  int64_t column_blocks = 0, first = 0, end = 0;  // Columns: the outputs [first, end) of a row
  int a_bits = 0, word = 0;         // Tiles
  bool a_is_outer = false;
  bool flag = false;                // RowSegments: whole vectors; TransposeTiles: words; Small: vectors;
                                    // Columns: outer indexes first in the grid
  int64_t inner_tiles = 0;          // TransposeTiles, TransposeMap
  SlabShape slabs{};
  SmallIndex small{};
  VecSplit split{};                 // VectorBlock, VectorWarp, VectorGrid
  int64_t bytes = 0;                // Fill
  uint32_t magic = 0, shift = 0;    // ShortColumns: division by `per`, the pieces of a row
};

inline constexpr int kMostSteps = 4;

struct Plan {
  Step step[kMostSteps];
  int steps = 0;
  size_t workspace = 0;  // bytes
  bool invalid = false;  // a grid past the device's limits: cudaErrorInvalidConfiguration

  Step& add(Kernel k) {
    if (steps == kMostSteps) invalid = true;  // not reached: no plan has more steps
    Step& s = step[steps < kMostSteps ? steps++ : kMostSteps - 1];
    s = Step{};
    s.kernel = k;
    return s;
  }
};

// The plan of a call under its device's tuning table (plan_reduce.h's plan_reduce), compiled once,
// in plan_reduce.cpp, rather than into each kernel unit: a change to the planner or to its table
// (tuning.h) rebuilds that one C++ file, not the kernels.
Plan plan_call(const Device& d, const OpTraits& t, const PlanInput& in);

// ---------------------------------------------------------------------------------------------
// Launch arithmetic.

// How many segments (blocks) each of `outer` rows is cut into, from 1 to `most`, when `wave`
// blocks run on the device at once: the fewest whose blocks fill their waves within 5% of the
// best fill any count up to `most` reaches. (A wave's worth of blocks plus a few leaves the
// device nearly idle while the few run.)
//
// The fill of s segments is outer * s / (waves * wave), waves = ceil(outer * s / wave). Within
// one number of waves it rises with s, so the best is at the last s of some number of waves,
// and the fewest good s is the first good one in the first number of waves that has one: a
// handful of wave counts to look at instead of every s (`most` reaches thousands for one long
// strided row).
inline int64_t segments_per_row(int64_t outer, int64_t most, int64_t wave) {
  if (most <= 1 || outer <= 0 || wave <= 0) return 1;
  const auto fill = [&](int64_t s) {
    return double(outer * s) / double(ceil_div(outer * s, wave) * wave);
  };
  const int64_t waves = ceil_div(outer * most, wave);
  const auto last_of = [&](int64_t w) { return std::min(most, w * wave / outer); };
  const auto first_of = [&](int64_t w) { return std::max<int64_t>(1, (w - 1) * wave / outer + 1); };
  double best = 0;
  for (int64_t w = 1; w <= waves; ++w)
    if (first_of(w) <= last_of(w)) best = std::max(best, fill(last_of(w)));
  const double good = best - 0.05;
  for (int64_t w = 1; w <= waves; ++w) {
    int64_t lo = first_of(w), hi = last_of(w);
    if (lo > hi || fill(hi) < good) continue;
    while (lo < hi) {  // the first s in [lo, hi] with fill(s) >= good; fill rises over the range
      const int64_t mid = lo + (hi - lo) / 2;
      if (fill(mid) >= good) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  }
  return 1;  // not reached: the best count is good
}

// Whether the result's adjacent outputs are along outer rather than inner (transposed against the
// input): tile_kernel's lanes then go along outer.
inline bool tiles_transposed(const Layout3& l) { return l.out_inner != 1 && l.outer > 1 && l.outer_out(1) == 1; }

// Short reductions of results transposed against the input, least_outer of them at least along
// outer and least_inner along inner (Tuning::transpose_least_outer, transpose_least_inner), the inner run
// contiguous, or rows packed along it (layout.h's packed_rows_transposed): transpose_tile_kernel.
inline bool transposable(const Layout3& l, int64_t least_inner, int64_t least_outer) {
  const bool packed_rows = l.in_reduced == 1 && l.in_inner == l.reduced;
  return l.reduced <= kTileReduced && tiles_transposed(l) && (l.in_inner == 1 || packed_rows) &&
         l.inner >= least_inner && l.outer >= least_outer;
}

// The split of a full reduction of n elements of `size` bytes at `address` (kernels/vector.cuh
// loads it so). For 1- and 2-byte types the head is loaded as whole 4-byte words, so a head
// that ends the input stops at a word boundary; the elements after it are the tail.
inline VecSplit split_full(uintptr_t address, int64_t n, int size) {
  const int64_t per_vector = 16 / size;
  const auto misalign = int64_t(address % kVecAlign);
  const int64_t head = misalign ? std::min<int64_t>(n, (kVecAlign - misalign) / size) : 0;
  const int64_t vectors = (n - head) / per_vector;
  VecSplit s{head, vectors, n - head - vectors * per_vector};
  if (size < 4 && s.vectors == 0 && s.tail == 0) {
    const auto end_bytes = int64_t((address + uint64_t(n) * uint64_t(size)) % 4);
    s.tail = std::min<int64_t>(n, end_bytes / size);
    s.head = n - s.tail;
  }
  return s;
}

// The plan as JSON (torch_reduce.explain): each step's kernel, grid, block, the workspace it
// reads and writes, and the parameters its kernel takes (those that are not 0).
inline std::string plan_json(const Plan& p) {
  const auto num = [](int64_t v) { return std::to_string(v); };
  const auto field = [&](const char* name, int64_t v) { return std::string(", \"") + name + "\": " + num(v); };
  const auto flag = [](bool v) { return std::string(v ? "true" : "false"); };
  const auto place = [&](int64_t at, const char* none) {
    return at < 0 ? std::string("\"") + none + "\"" : "\"workspace+" + num(at) + "\"";
  };
  std::string steps;
  for (int k = 0; k < p.steps; ++k) {
    const Step& s = p.step[k];
    // (A full reduction's grid with a ticket is the kernel that also finishes it.)
    const bool ticket = s.kernel == Kernel::VectorGrid && s.flag;
    const std::string name = ticket ? "vector_sum_ticket_kernel" : kernel_name(s.kernel);
    std::string j = "{\"kernel\": \"" + name + "\", \"grid\": [" + num(s.grid[0]) +
                    ", " + num(s.grid[1]) + "], \"block\": [" + num(s.block[0]) + ", " + num(s.block[1]) +
                    "], \"dependent\": " + flag(s.dependent) + ", \"reads\": " + place(s.from, "input") +
                    ", \"writes\": " + place(s.to, "result");
    const std::pair<const char*, int64_t> params[] = {
        {"team", s.team}, {"loads", s.loads}, {"V", s.V}, {"U", s.U}, {"count", s.count}, {"per", s.per},
        {"column_blocks", s.column_blocks}, {"first", s.first}, {"end", s.end}, {"a_bits", s.a_bits},
        {"a_is_outer", s.a_is_outer}, {"word", s.word}, {"flag", s.flag}, {"inner_tiles", s.inner_tiles},
        {"bytes", s.bytes}};
    for (const auto& [name, v] : params)
      if (v != 0) j += field(name, v);
    if (s.kernel == Kernel::Slabs)
      j += ", \"slabs\": {\"slab\": " + num(s.slabs.slab) + field("slabs", s.slabs.slabs) +
           field("team_bits", s.slabs.team_bits) + field("linear", s.slabs.linear) +
           field("run_linear", s.slabs.run_linear) + field("vectors", s.slabs.vectors) + "}";
    if (s.kernel == Kernel::VectorBlock || s.kernel == Kernel::VectorWarp || s.kernel == Kernel::VectorGrid)
      j += ", \"split\": [" + num(s.split.head) + ", " + num(s.split.vectors) + ", " + num(s.split.tail) + "]";
    steps += (k ? ", " : "") + j + "}";
  }
  return "{\"workspace\": " + num(int64_t(p.workspace)) + ", \"invalid\": " + flag(p.invalid) + ", \"steps\": [" +
         steps + "]}";
}

// ---------------------------------------------------------------------------------------------
// Results that repeat: kept dims expanded with stride 0 in the input leave every result along
// them the same, so the kernels reduce the distinct ones (torch/treduce.cpp) and repeat_kernel
// (repeat.cu) copies them into the dense result. Dim k of the result (outermost first) has
// size[k] elements and steps src_stride[k] elements in the dense distinct results (0 along the
// repeats). Folded into at most kMaxOuterRuns runs, the result is copied a 16-byte word a
// thread where its innermost run allows: a run of distinct results (a word of them) or a run of
// one repeated result (a word of its copies); else an element a thread. torch's copy of the
// expanded results (TensorIterator: an element a thread, an offset a dim) wrote 230 MB of
// float16, (32064, 64, 56), at 1 TB/s: 228 us in all where torch.compile took 70 (H200).
struct RepeatPlan {
  RunIndex index;       // over words: each run's size in words, its stride in src in elements
  int64_t words = 0;    // words of the result
  int per = 1;          // elements a word: 1, or 16 / bytes
  bool splat = false;   // the innermost run repeats one element: a word of its copies
  int bytes = 0;        // of an element: 1, 2, 4 or 8
};

// False where the result is not folded into kMaxOuterRuns runs or has 2^31 words or more
// (RunIndex's 32-bit division): the caller copies some other way.
inline bool plan_repeat(const int64_t* size, const int64_t* src_stride, int dims, int bytes, uintptr_t src,
                        uintptr_t out, RepeatPlan* plan) {
  if (bytes != 1 && bytes != 2 && bytes != 4 && bytes != 8) return false;
  // Runs from the innermost: a dim joins the run inside it where its stride continues that
  // run's (both 0 along repeats).
  int64_t run_size[kMaxOuterRuns], run_stride[kMaxOuterRuns];
  int runs = 0;
  int64_t n = 1;
  for (int k = dims - 1; k >= 0; --k) {
    n *= size[k];
    if (size[k] == 1) continue;
    if (runs > 0 && src_stride[k] == run_stride[runs - 1] * run_size[runs - 1]) {
      run_size[runs - 1] *= size[k];
      continue;
    }
    if (runs == kMaxOuterRuns) return false;
    run_size[runs] = size[k], run_stride[runs] = src_stride[k], ++runs;
  }
  if (runs == 0) run_size[0] = 1, run_stride[0] = 1, runs = 1;  // one element
  RepeatPlan p;
  p.bytes = bytes;
  const int per = 16 / bytes;
  bool strides_whole = true;  // every distinct run starts on a word
  for (int r = 1; r < runs; ++r) strides_whole = strides_whole && run_stride[r] % per == 0;
  if (run_size[0] % per == 0 && out % 16 == 0) {
    if (run_stride[0] == 1 && strides_whole && src % 16 == 0) p.per = per;
    if (run_stride[0] == 0) p.per = per, p.splat = true;
  }
  if (n / p.per >= (int64_t(1) << 31)) return false;
  p.words = n / p.per;
  for (int r = runs - 1; r >= 0; --r)  // outermost first
    p.index.add(r == 0 ? run_size[0] / p.per : run_size[r], r == 0 && !p.splat ? run_stride[0] * p.per : run_stride[r], 0);
  *plan = p;
  return true;
}

}  // namespace treduce::cuda
