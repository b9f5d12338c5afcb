// plan_reduce(): which kernels reduce a layout, with what grid, block and workspace (plan.h).
// The shapes of work and why each is taken where it is: the top of kernels/dims.cuh, and the
// comments below, with the measurements behind them. No CUDA and no torch here.
#pragma once

#include "plan.h"
#include "tuning.h"

namespace treduce::cuda {
namespace planning {

class Planner {
 public:
  Planner(const Device& d, const OpTraits& t, const Tuning& k, const PlanInput& in, Plan& p)
      : d_(d), t_(t), k_(k), in_(in), p_(p) {}

  void reduce() {
    const Layout3& l = in_.layout;
    SmallIndex small;
    const IndexedLayout& x = in_.indexed;
    // Positions in the input's logical order (treduce.cpp: full reductions of indexed operators
    // over non-contiguous inputs of a few elements): the small kernel alone reads them so.
    if (x.in_logical_order) {
      if (x.usable && small_index(x, &small)) plan_small(small);
      else p_.invalid = true;
      return;
    }
    // argmax and argmin (positions only) over one element: every position is 0, and the result
    // is a fresh contiguous tensor of the outputs (argmax over dim 0 of (1025, 4096, 1,
    // 1).transpose(2, 0) float32 read every element: 62 us, torch's fill 8; the memset 9.1, H200).
    if (t_.indexed && in_.positions_only && l.reduced == 1 && l.combine == 1) {
      Step& s = p_.add(Kernel::Fill);
      s.bytes = l.outer * l.inner * int64_t(sizeof(int64_t));
      s.block[0] = kFillBlock, s.grid[0] = ceil_div(l.outer * l.inner, 2 * int64_t(kFillBlock)), s.dependent = true;
      if (s.grid[0] > kMaxGridX) p_.invalid = true;
      return;
    }
    // Small reductions in one kernel (whole contiguous ones but of indexed operators have the
    // vector kernels').
    if (x.usable && (small_reaches(x, whole_rows_loads(l) > 0) || small_beats_passes(x, l)) &&
        (t_.indexed || !l.is_full_contiguous()) && small_index(x, &small)) {
      plan_small(small);
      return;
    }
    Layout3 folded;
    Layout3 rows;
    if (l.combine > 1) p_.workspace = combined(rows_first(l, &rows) ? rows : l);
    else if (fold_interleaved(l, &folded)) p_.workspace = combined(folded);
    else p_.workspace = size_t(layout(l, kResult, 0));
  }

 private:
  static constexpr int64_t kResult = -1;  // a step's `to`: the result, not partials

  // ---- small_kernel ------------------------------------------------------------------------

  // Whether small_kernel takes a reduction: up to Tuning::small_elements elements, any layout;
  // past that, where its one kernel still beats the shapes below, measured in CUDA graphs on the
  // H200 over random layouts of 2^12 to 2^20 elements (float32 and bfloat16 sums, float32 var
  // and argmax):
  //  - a few rows (the innermost reduced run contiguous, each team's loads one run of memory),
  //    up to 2^20 elements for up to 256 results of 1- to 4-byte elements, else 2^19: float32
  //    (64, 5120) over dim 1 2.82 -> 1.77 us, (112, 1000) 2.20 -> 1.51, var of (224, 512) 2.48 ->
  //    1.90, (4, 8, 3, 3072) over dims 0 and 3 (two passes before) 3.95 -> 2.61. Past 1024
  //    results or those sizes the teams of the rows kernel were faster (1024 rows of 1024
  //    float32: 2.12 against 2.04; (196, 4096) int64 3.14 against a block a row's 2.83);
  //  - columns whose adjacent results are adjacent in memory, of up to 32 rows, or of up to 128
  //    results and 2048 rows (one round of loads a lane), up to 2^19 elements: bfloat16 (32,
  //    5120) over dim 0 2.57 -> 1.63 us, (12, 512, 77) 2.26 -> 1.66, float32 argmax of (2048,
  //    64) 6.69 -> 5.53. Where adjacent results are far apart in memory, every team's loads are,
  //    too: (196, 77, 32) float32 laid out as permute(1, 2, 0), over dim 2, took 7.06 us against
  //    the columns kernel's 2.97; and columns of more rows were slower: (3072, 97) 8.38 against
  //    3.69.
  // `whole_rows`: rows that whole_rows_kernel takes (1 to 64 whole aligned vectors), faster
  // than the small kernel (832 float32 rows of 128: 1.03 us against 1.36).
  bool small_reaches(const IndexedLayout& x, bool whole_rows) const {
    const int64_t n = x.outputs * x.count;
    const bool rows = x.reduced.innermost_contiguous();
    if (n <= k_.small_elements) {
      const bool whole = rows && x.reduced.runs == 1 && x.outputs > 1 && whole_rows;
      return x.count <= k_.small_count && (n <= k_.small_rows_elements || !whole);
    }
    if (rows && whole_rows) return false;
    if (rows)
      return x.outputs <= k_.small_rows_outputs && x.count <= k_.small_rows_count &&
             n <= (x.outputs <= 256 && t_.in_bytes <= 4 ? 2 * k_.small_most : k_.small_most);
    const bool adjacent = x.kept.innermost_contiguous();
    if (x.count == 1 && x.outputs > k_.small_single_most) return false;  // the map kernel's
    const bool narrow = t_.in_bytes == 2 && !t_.group_rows && !t_.indexed;
    const int64_t outputs = narrow ? k_.small_columns_outputs_narrow : k_.small_columns_outputs;
    return adjacent &&
           (x.count <= k_.small_columns_rows || (x.outputs <= outputs && x.count <= int64_t(kSmallBlock) * kSmallLoads)) &&
           n <= k_.small_columns_elements;
  }

  // Also, from 2048 results of up to 16384 elements, layouts where small_kernel's one pass over
  // any layout beat the passes of combined() and layout() (in CUDA graphs, H200, us):
  //  - several reduced runs, the innermost contiguous (Layout3::combine: partials, then their
  //    combine): nansum over dims 1 and 3 of (64, 56, 1024, 32) float16 158 -> 58 (torch.compile
  //    96); mean over dims 0 and 3 of (7, 96, 96, 8).transpose(1, 2) float32 6.1 -> 2.2 (1.9).
  //    sum over dims 0 and 2 of (64, 4096, 128) float32 35.0 -> 31.5. Not where the innermost
  //    reduced run is strided (mean over dims 0 and 2 of (12, 151936, 12)[..., ::2] bfloat16
  //    took 32.6 against 20.6), nor for Welford's and logsumexp's groups (var over dims 1 and 3
  //    of (32, 16, 1024, 64) bfloat16 35.2 against 27.0);
  //  - columns narrower than 128 bytes that are not dense slabs, of up to 128 rows, adjacent
  //    results adjacent in memory: argmax over dim 3 of (28, 128, 77, 16).permute(2, 1, 3, 0)
  //    float32 53.8 -> 9.6 (16.6); any over dim 0 of (64, 1000, 5, 16)[:, :, ::3] int32 9.7 ->
  //    4.1 (torch 3.7). Columns of 4096 rows were six times slower (each team's loads a column
  //    apart), and so were results apart in memory: aminmax over dim -1 of (128, 2048,
  //    40).transpose(0, 2) int16 10.5 -> 55.4, argmax over dim -1 of a channels_last (197, 64,
  //    77, 56) uint8 130 -> 232 (random shapes, seeds 52361 and 31337). Nor for Welford's and
  //    logsumexp's groups there either: logsumexp over dim -2 of (17, 128, 1024,
  //    14).permute(2, 1, 0, 3) bfloat16 155 -> 40.5 out of the small kernel (seed 29201).
  bool small_beats_passes(const IndexedLayout& x, const Layout3& l) const {
    if (x.outputs < k_.small_passes_outputs || x.count > k_.small_passes_count || t_.group_rows) return false;
    if (l.combine > 1) return x.reduced.innermost_contiguous();
    const bool adjacent = x.kept.innermost_contiguous();
    SlabShape slabs;
    return adjacent && x.count <= k_.small_passes_rows && l.inner > 1 && l.inner * t_.in_bytes < 128 &&
           !slab_shape(l, &slabs);
  }

  // small_kernel's indexes, or false when an offset reaches 2^31.
  static bool small_index(const IndexedLayout& l, SmallIndex* out) {
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

  // 16-byte vectors where every result's elements are runs of whole aligned vectors; the team
  // that gives each thread about kSmallLoads elements or kSmallVectorLoads vectors (up to a
  // block); blocks of up to kSmallBlock threads.
  void plan_small(const SmallIndex& l) {
    const int64_t per = 16 / t_.in_bytes;
    // The innermost reduced run contiguous, a multiple of `per` long, and every other run's
    // stride a multiple of it: then each vector's elements are consecutive in memory and in
    // position.
    const SmallRun& inner = l.reduced[std::max(l.reduced_runs - 1, 0)];
    bool vectors = l.reduced_runs >= 1 && inner.in == 1 && inner.size % per == 0 && in_.address % 16 == 0;
    for (int r = 0; r + 1 < l.reduced_runs; ++r) vectors = vectors && l.reduced[r].in % per == 0;
    for (int r = 0; r < l.kept_runs; ++r) vectors = vectors && l.kept[r].in % per == 0;
    const int64_t loads = vectors ? l.count / per : l.count;
    // Teams past a warp combine through shared memory and a barrier: those only for kSmallLoads
    // loads a thread (bfloat16 rows of 1024, 8 rows: 1.69 -> 1.84 us with 64 lanes of 2 vectors),
    // Tuning::small_wide_loads_indexed for argmax and argmin, whose every element is a
    // comparison and a select on the lane's critical path.
    const int64_t wide = t_.indexed ? k_.small_wide_loads_indexed : kSmallLoads;
    const auto more_lanes = [&](int bits) {
      return ((bits >= 5 ? wide : vectors ? kSmallVectorLoads : kSmallLoads) << bits) < loads;
    };
    int team_bits = 0;
    while ((int64_t(1) << team_bits) < kSmallBlock && more_lanes(team_bits)) ++team_bits;
    // Tuning::small_least_blocks_percent (off in the table): teams grown while the grid is short.
    const auto few_blocks = [&](int bits) {  // (1: off; as a percent it held every 1-block grid short)
      return k_.small_least_blocks_percent > 1 &&
             ceil_div(int64_t(l.outputs) << bits, int64_t(kSmallBlock)) * 100 < k_.small_least_blocks_percent * d_.sm_count;
    };
    while ((int64_t(1) << team_bits) < kSmallBlock && (int64_t(2) << team_bits) <= loads && few_blocks(team_bits))
      ++team_bits;
    const int64_t threads = int64_t(l.outputs) << team_bits;
    const int block = int(std::min<int64_t>(kSmallBlock, ceil_div(threads, 32) * 32));
    Step& s = p_.add(Kernel::Small);
    s.grid[0] = ceil_div(threads, block), s.block[0] = block, s.dependent = true;
    s.team = team_bits, s.flag = vectors, s.small = l;
    s.loads = small_loads(ceil_div(loads, int64_t(1) << team_bits));
  }

  // ---- full reductions of one run (kernels/vector.cuh) ---------------------------------------

  // Up to kSingleBlockVectors one block; past it as many blocks as the tiles or as fit on the
  // GPU at once (the fewer blocks a multiprocessor of both grid kernels: eager calls and graphs
  // must cut the input into the same blocks to give the same bits), their partials combined by
  // the last block in eager calls (ticket), else by a second kernel. Sums of few tiles take
  // quarter blocks while those fit one a multiprocessor: the same loads, spread over four times
  // the multiprocessors (graph replays, H100: bfloat16 2^18 2.58 -> 2.10 us, float32 2^17 2.61
  // -> 2.11; with two a multiprocessor cold calls lost 0.2-0.3 us, with four both lost).
  int64_t vector(int64_t n, int64_t to, int64_t ws) {
    const VecSplit split = split_full(in_.address, n, t_.in_bytes);
    int64_t blocks = 1;
    int threads = kVecBlock;
    const int64_t tiles = ceil_div(split.vectors, kVecTile);
    if (split.vectors <= kSingleBlockVectors && n <= k_.single_block_elements) {
      blocks = 1;
    } else if (t_.quarter && 4 * tiles <= k_.quarter_tiles_per_sm * d_.sm_count) {
      blocks = std::min<int64_t>(ceil_div(split.vectors, int64_t(kQuarterBlock) * kVecUnroll),
                                 int64_t(d_.sm_count) * t_.quarter_resident);
      threads = kQuarterBlock;
    } else {
      blocks = std::min<int64_t>(tiles, int64_t(d_.sm_count) * t_.vector_resident);
    }
    if (blocks == 1) {  // up to a warp's worth of vectors (the head and tail are the first warp's) one warp
      const bool warp = split.vectors <= 32;
      Step& s = p_.add(warp ? Kernel::VectorWarp : Kernel::VectorBlock);
      s.block[0] = warp ? 32 : kVecBlock, s.dependent = true, s.split = split, s.to = to;
      return 0;
    }
    Step& g = p_.add(Kernel::VectorGrid);
    g.grid[0] = blocks, g.block[0] = threads, g.dependent = true, g.split = split;
    g.count = blocks, g.from = ws, g.to = to, g.flag = in_.ticket;  // with a ticket, one kernel
    if (!in_.ticket) {
      Step& c = p_.add(Kernel::VectorCombine);
      c.block[0] = 32, c.dependent = true, c.from = ws, c.count = blocks, c.to = to;
    }
    return blocks * t_.acc_bytes;
  }

  // ---- rows (inner == 1) ---------------------------------------------------------------------

  // The 16-byte loads of each row where whole_rows_kernel takes a layout: rows (inner == 1, one
  // reduced run) of 1 to 64 whole aligned vectors, contiguous; else 0. rows() plans it and reduce() keeps such
  // rows from the small kernel, by this one test.
  int64_t whole_rows_loads(const Layout3& l) const {
    if (!t_.whole_rows) return 0;
    const int64_t per = 16 / t_.in_bytes;
    const int64_t loads = l.reduced / per;
    const bool whole = l.combine == 1 && l.inner == 1 && l.in_reduced == 1 && l.reduced % per == 0 &&
                       in_.address % 16 == 0 && l.outer_strides_multiple_of(per);
    return whole && loads >= 1 && loads <= 64 ? loads : 0;
  }

  // A block a row, in one kernel: rows of exactly two whole vectors a thread through
  // two_vector_rows_kernel, others through row_segments_kernel.
  void block_a_row(const Layout3& l, bool whole, int64_t loads, int64_t per_segment, int64_t to) {
    if (l.outer > kMaxGridX) p_.invalid = true;
    const bool two = block_rows_kernel() && whole && loads == 2 * kSegmentBlock;
    Step& s = p_.add(two ? Kernel::TwoVectorRows : Kernel::RowSegments);
    s.grid[0] = l.outer, s.block[0] = kSegmentBlock, s.layout = l, s.to = to;
    s.per = per_segment, s.count = 1, s.flag = whole;
  }

  // A block a row for these sizes (plan.h's block_rows_kernel).
  bool block_rows_kernel() const { return cuda::block_rows_kernel(t_.in_bytes, t_.acc_bytes, t_.group_rows); }

  // rows_kernel's lanes a row of `loads` loads (the comment in rows()).
  int rows_team(int64_t loads) const {
    const bool heavy = t_.group_rows || t_.indexed;
    const int64_t per_lane = loads > 32 || (loads == 32 && heavy) ? 8 : 4;
    int team = 1;
    while (team < 32 && team * per_lane < loads) team *= 2;
    return team;
  }

  int64_t rows(const Layout3& l, int64_t to, int64_t ws) {
    const int64_t per_load = l.in_reduced == 1 ? 16 / t_.in_bytes : 1;
    const int64_t loads = ceil_div(l.reduced, per_load);  // per row
    // About four loads per lane; eight from rows of 64 loads up, which puts more rows in each
    // warp and fewer blocks in the grid. On the H100, hot / cold us: (65536, 128) float32, 32
    // loads a row, 8 lanes 5.95 / 14.8 against 4 lanes' 6.6 / 15.1; (32768, 256) float32, 64
    // loads, 8 lanes 6.1 against 16 lanes' 7.1; (65536, 128) bfloat16, 16 loads, 4 lanes 4.0
    // against 2 lanes' 5.6. Rows of 32 loads of operators with many instructions an element
    // (Welford's and logsumexp's groups, positions) take 4 lanes of eight where they are not
    // whole rows: hot / cold us, (65536, 128) float32, 8 lanes against 4: var 8.76 / 15.19 ->
    // 7.37 / 15.2-15.6 (torch.compile 7.11 / 15.78), std_mean 9.1 / 15.5 -> 7.5 / 15.6,
    // logsumexp 9.36 / 15.36 -> 7.85 / 15.65, argmax 10.16 / 15.6 -> 8.48 / 15.97; bfloat16 rows
    // of 256, var 5.48 / 10.29 -> 4.43 / 10.52. The others keep 8 lanes, which were 0.4-0.5 us
    // faster cold (nansum 6.69 / 14.82 -> 6.57 / 15.36 with 4, int32 sum 6.82 / 14.79 -> 6.40 /
    // 15.20).
    const int team = rows_team(loads);
    // Every row whole aligned 16-byte vectors, contiguous.
    const bool whole = per_load > 1 && in_.address % 16 == 0 && l.outer_strides_multiple_of(per_load) &&
                       l.reduced % per_load == 0;
    // Teams when rows are short, or when there are rows enough for a quarter of the device's
    // threads (four loads in flight each keep the memory busy); otherwise blocks on segments
    // of rows (below). Rows of up to 8 loads a lane of a warp take teams too: the segments'
    // blocks of 512 threads left most of theirs without a load, and combined 16 warps through
    // shared memory (var_mean of (1024, 1024) float32 over dim 1, 1024 blocks: 7.8 us hot
    // against torch.compile's 2.3). Rows of up to 20 loads a lane of a warp, and rows not whole
    // vectors of up to 40 from three rows a multiprocessor, also take teams: a block a row left
    // most of its 512 threads with one or two loads, and the combine of 16 warps (in CUDA
    // graphs, H200: 2048 float32 rows of 2048, 8.67 -> 3.44 us; 2048 bfloat16 rows of 4097 9.92
    // -> 3.89; 1024 float32 rows of 4097 5.90 -> 3.98). From 64 loads a lane, a block a row was
    // faster (196 int64 rows of 4096: 4.53 against 2.83).
    const bool ragged_teams =
        !whole && loads <= k_.rows_ragged_loads && l.outer >= k_.rows_ragged_per_sm * int64_t(d_.sm_count);
    const bool teams = loads <= k_.rows_team_loads || l.outer * team >= int64_t(d_.sm_count) * 512 || ragged_teams;
    // Many rows of at least two vectors a thread of a kSegmentBlock block (float32 rows of 4096
    // and longer): a block a row, as torch.compile's kernel does. A warp a row left (4096, 4096)
    // float32 with one warp of 56 registers a row, 46% of the warp slots and 76% of DRAM's peak
    // against 91% and 81% (ncu); the block's 31 registers fill them. Rows of one vector a
    // thread, or with a position's accumulator, lost with it: not those; nor 8-byte inputs, not
    // measured. Welford's takes it where rows are whole vectors, or where teams would leave rows
    // to segments: float32 var over (4096, 4096) 24.5 / 26.5 -> 23.2 / 25.1 us hot / cold
    // (torch.compile 23.6 / 25.5), (1024, 4096) 8.75 / 11.9 -> 4.9 / 9.7, bfloat16 (2048, 8192)
    // 18.3 / 21.8 -> 9.5 / 15.4; rows not whole that teams take lost with it ((4096, 4097)
    // float32 25.8 -> 32.5 hot).
    if (block_rows_kernel() && per_load > 1 && loads >= 2 * kSegmentBlock &&
        (t_.acc_bytes <= 8 || whole || !teams) && !ragged_teams &&
        l.outer >= int64_t(d_.sm_count) * t_.segments_resident) {
      block_a_row(l, whole, loads, l.reduced, to);
      return 0;
    }
    // Short rows (up to kTileReduced elements) whose neighbours in memory are results apart:
    // packed along one run, transpose tiles along it (layout.h's packed_rows_transposed); else
    // tiles along the result's order (rows_in_result_order), a thread a row.
    Layout3 by_result;
    // Rows of whole 16-byte words from Tuning::tile_words_least_bytes: tiles along the result's
    // run, a thread a row, its words loaded at once (each word a sector's half or whole; the
    // rest of a sector the next load's, from L1), the stores whole runs. Transpose tiles took
    // sum over rows of 8 of (50257, 16, 8).transpose(1, 0) float32 through shared memory,
    // issue-bound: 26.9 us in CUDA graphs, torch.compile 7.1 (H200).
    if (l.reduced <= kTileReduced && l.reduced * t_.in_bytes >= k_.tile_words_least_bytes &&
        rows_in_result_order(l, &by_result) && tile_word(by_result) >= 16)
      return tiles(by_result, to);
    if (l.reduced <= kTileReduced && packed_rows_transposed(l, &by_result) &&
        transposable(by_result, k_.transpose_least_inner, k_.transpose_least_outer))
      return tiles(by_result, to);
    if (l.reduced <= kTileReduced && rows_in_result_order(l, &by_result)) return tiles(by_result, to);
    // Other short rows that are not whole vectors: a thread a row, its elements loaded at once
    // (tile_kernel), not the head, vectors and tail of a general row; or the dense slabs'
    // blocks, where their loads are one run of memory; else tiles, a word a row where rows are
    // aligned words (H200, us: amax over rows of 8 uint8 of (2^20, 8) slabs 6.7, tiles of words
    // 12.7; through two outer runs, (14336, 77, 8), slabs 19.1, tiles of words 14.9).
    const int64_t whole_loads = whole_rows_loads(l);
    if (short_rows(l, to)) return 0;
    if (l.reduced <= kTileReduced && whole_loads == 0) {
      SlabShape slabs;
      if (slab_shape(l, &slabs) && (slabs.linear || tile_word(l) == 0)) return slabs_or_tiles(l, slabs, to);
      return tiles(l, to);
    }
    // Whole rows of 1 to 64 vectors of floats: a thread a row up to 2 vectors, two loads a lane
    // up to 16 vectors a row, four from 32 (float32 rows of 128: 8 lanes x 4 loads 5.41 / 14.55
    // us, 16 x 2 5.8 / 14.5; rows of 64 vectors: 16 x 4 5.45 / 14.55, 8 x 8 5.7 / 14.7).
    if (whole_loads > 0) {
      const int lanes = whole_rows_lanes(whole_rows_slots(loads));
      const int64_t blocks = ceil_div(l.outer, int64_t(kRowsBlock / lanes));
      if (blocks <= kMaxGridX) {
        Step& s = p_.add(Kernel::WholeRows);
        s.grid[0] = blocks, s.block[0] = kRowsBlock, s.dependent = true, s.layout = l, s.to = to;
        s.team = lanes, s.loads = int(loads);
        return 0;
      }
    }
    if (teams) {
      const int64_t blocks = std::min(ceil_div(l.outer, kRowsBlock / team), kMaxGridX);
      // Teams of 16 and 32 lanes with programmatic dependence too where the grid is up to two
      // blocks a multiprocessor (the launch then is a larger part of the call): 100 to 2048
      // float32 rows of 1024, 2.01-2.76 -> 1.75-2.50 us in CUDA graphs.
      Step& s = p_.add(Kernel::Rows);
      s.grid[0] = blocks, s.block[0] = kRowsBlock, s.layout = l, s.to = to, s.team = team;
      s.dependent = team <= kDependentTeam || blocks <= 2 * int64_t(d_.sm_count);
      return 0;
    }
    return row_segments(l, loads, whole, to, ws);
  }

  // Short columns (2 to kShortColumnsRows rows) of whole aligned pieces (short_columns_piece:
  // 4 elements, 2 of 8-byte ones), results consecutive along inner: short_columns_kernel, 1, 2
  // or 4 pieces of results a thread (up to Tuning::short_columns_loads loads, fewer while that
  // leaves under two blocks a multiprocessor), their rows loaded at once; blocks of
  // kShortColumnsBlock threads over the pieces, (outer, inner) flattened.
  bool short_columns(const Layout3& l, int64_t to) {
    const int64_t per = short_columns_piece(t_.in_bytes);
    if (l.reduced < 2 || l.reduced > std::max<int64_t>(k_.short_columns_most_rows, kShortColumnsRows) ||
        l.combine != 1 || l.in_inner != 1 || l.out_inner != 1 || l.inner % per != 0 || l.in_reduced % per != 0 ||
        !l.outer_strides_multiple_of(per) || in_.address % (per * t_.in_bytes) != 0)
      return false;
    const int64_t row_pieces = l.inner / per, pieces = l.outer * row_pieces;
    const bool rounds = l.reduced > kShortColumnsRows;
    if (rounds && pieces < k_.short_columns_long_threads_per_sm * d_.sm_count) return false;
    const int64_t rows = l.reduced <= 2 ? 2 : l.reduced <= 4 ? 4 : 8;  // the instance's rows a piece
    int64_t K = std::clamp<int64_t>(k_.short_columns_loads / rows, 1, kShortColumnsRows / rows);
    while (K > 1 && ceil_div(pieces, kShortColumnsBlock * K) < k_.short_columns_blocks_per_sm * d_.sm_count) K /= 2;
    const int64_t blocks = ceil_div(pieces, kShortColumnsBlock * K);
    if (blocks * kShortColumnsBlock * K >= INT32_MAX || blocks > kMaxGridX) return false;
    RunIndex div;
    div.add(row_pieces, 0, 0);
    Step& s = p_.add(Kernel::ShortColumns);
    s.grid[0] = blocks, s.block[0] = kShortColumnsBlock, s.dependent = true, s.layout = l, s.to = to;
    s.count = pieces, s.per = row_pieces, s.magic = div.magic[0], s.shift = div.shift[0], s.loads = int(K);
    return true;
  }

  // Dense rows of 3, 5, 6 or 7 elements, and of 2, 4 or 8 under a vector (row o at o * reduced,
  // its result at o, the input 16-byte aligned): short_rows_kernel, a thread the rows of
  // `reduced` 16-byte vectors (16 / in_bytes rows), all loaded at once, reduced in registers,
  // their results stored as one run.
  // slab_kernel staged a block's rows in shared memory, then reduced an output a thread with its
  // index arithmetic and store. In CUDA graphs, H200, us, slabs -> this (torch.compile): mean over
  // rows of 3 of (128, 128, 128, 3) bfloat16 12.92 -> 5.98 (3.62); std over rows of 3 of (1024,
  // 128, 128, 3) float32 120.2 -> 62.8 (63.0); aminmax over rows of 3 of (96, 97, 112, 3) int32
  // 7.92 -> 3.69 (3.25); all over rows of 7 of (3, 32000, 7) bfloat16 2.44 -> 1.46 (1.37).
  // Predicted ~2x from the instructions (a vector's worth of rows from registers against an
  // output a thread from shared memory): got 1.7-2.2x.
  // Also rows of 2, 4 and 8 whole vectors of the ops whole_rows_kernel does not take (positions:
  // max over rows of 8 of (4096, 2048, 8) float32 went to slab_kernel, 113 us in CUDA graphs
  // against torch.compile's 85; H200), up to Tuning::short_rows_vector_rows elements.
  bool short_rows(const Layout3& l, int64_t to) {
    const bool vector_rows = !t_.whole_rows && l.reduced <= k_.short_rows_vector_rows &&
                             (l.reduced == 2 || l.reduced == 4 || l.reduced == 8);
    if (!(short_rows_length(l.reduced, t_.in_bytes) || vector_rows) || l.in_reduced != 1 || l.inner != 1 || l.combine != 1 ||
        l.outer_runs.runs > 1 || l.outer < 2 || l.in_outer != l.reduced || l.out_outer != 1 || in_.address % 16 != 0 ||
        l.outer * l.reduced * t_.in_bytes < k_.short_rows_least_bytes)
      return false;
    // Blocks of 256 threads, fewer (down to 64) while that leaves blocks fewer than two a
    // multiprocessor, as tile_kernel's.
    const int64_t threads = ceil_div(l.outer, int64_t(16 / t_.in_bytes));
    int block = kShortRowsBlock;
    while (block > 64 && ceil_div(threads, int64_t(block)) < 2 * int64_t(d_.sm_count)) block /= 2;
    const int64_t blocks = ceil_div(threads, int64_t(block));
    if (blocks > kMaxGridX) return false;
    Step& s = p_.add(Kernel::ShortRows);
    s.grid[0] = blocks, s.block[0] = block, s.dependent = true, s.layout = l, s.to = to;
    s.loads = int(l.reduced);
    return true;
  }

  // Few long rows: as many segments per row as make the blocks fill whole waves of the device,
  // up to Tuning::rows_segment_waves waves and at least one load per thread (segments_per_row).
  // ((128, 65536) float32 had 5 segments, 640 blocks: 1.2 waves of 528; now 4.) From half as
  // many rows as multiprocessors, a block a row in one kernel: the segments' second kernel cost
  // more than the waves it evened out (in CUDA graphs, H200: 196 float32 rows of 16384 7.69 ->
  // 3.64 us, of 65536 13.99 -> 10.35; 224 bfloat16 rows of 49152 8.26 -> 4.62; 64 float32 rows
  // of 65536 level; 16 rows of 65536 3.55 against 3.99, kept in segments). Up to 64 loads a
  // thread: 128 rows of 2^19 float32 (one 2 MB row expanded, all of it in L2) took 20.6 us a
  // block a row against 14.5 in segments, a block a multiprocessor too few to keep L2 busy.
  int64_t row_segments(const Layout3& l, int64_t loads, bool whole, int64_t to, int64_t ws) {
    const int64_t wave = int64_t(d_.sm_count) * t_.segments_resident;
    const int64_t most = std::max<int64_t>(
        1, std::min(ceil_div(k_.rows_segment_waves * wave, l.outer), ceil_div(loads, kSegmentBlock)));
    const bool block_rows = 2 * l.outer >= d_.sm_count && loads <= k_.rows_block_loads;
    int64_t segments = block_rows ? 1 : segments_per_row(l.outer, most, wave);
    const int64_t per_segment = ceil_div(ceil_div(l.reduced, segments), 16) * 16;
    segments = ceil_div(l.reduced, per_segment);
    if (segments == 1) {
      block_a_row(l, whole, loads, per_segment, to);
      return 0;
    }
    if (l.outer * segments > kMaxGridX) p_.invalid = true;
    // Eager calls with a ticket word for every row: one kernel, as full sums (vector.cuh). This
    // path has at most ~4 waves of blocks in all, so rows fit kTicketWords on any device made
    // yet; past it, two kernels. The same segments either way, so the same bits.
    if (in_.ticket && l.outer <= kTicketWords) {
      Step& s = p_.add(Kernel::RowSegmentsTicket);
      s.grid[0] = l.outer * segments, s.block[0] = kSegmentBlock, s.layout = l;
      s.per = per_segment, s.count = segments, s.from = ws, s.to = to;
    } else {
      Step& s = p_.add(Kernel::RowSegments);
      s.grid[0] = l.outer * segments, s.block[0] = kSegmentBlock, s.dependent = true, s.layout = l;
      s.per = per_segment, s.count = segments, s.flag = false, s.to = ws;
      Step& c = p_.add(Kernel::RowPartials);
      c.grid[0] = ceil_div(l.outer, kRowsBlock / 32), c.block[0] = kRowsBlock, c.dependent = true, c.layout = l;
      c.from = ws, c.count = segments, c.to = to;
    }
    return l.outer * segments * t_.acc_bytes;
  }

  // ---- short reductions: tiles and slabs -----------------------------------------------------

  // The bytes of an output's reduced run that tile_kernel loads as words: 4, 8 or 16 where every
  // such run is contiguous, one word that long and aligned to it; a multiple of 16 where it is
  // whole aligned 16-byte words; else 0.
  int tile_word(const Layout3& l) const {
    const int64_t bytes = l.reduced * t_.in_bytes;
    const bool words = bytes == 4 || bytes == 8 || bytes % 16 == 0;
    if (l.in_reduced != 1 || !words) return 0;
    const int64_t word = std::min<int64_t>(bytes, 16), elements = word / t_.in_bytes;
    if (in_.address % uintptr_t(word) != 0 || !l.outer_strides_multiple_of(elements) ||
        (l.inner > 1 && l.in_inner % elements != 0))
      return 0;
    return int(bytes);
  }

  // How tile_kernel loads an output's reduced run (its `word`): whole words where tile_word
  // finds them, else the run's bytes as units of 8 or 4 bytes, each wider than an element,
  // where the run is contiguous and every output's starts on its unit. Rows of 12 bfloat16 as
  // three 8-byte loads, not twelve 2-byte ones: count_nonzero over dim 3 of (28, 7, 768,
  // 12).transpose(1, 2) bfloat16 9.75 -> 3.78 us in CUDA graphs (torch.compile 2.37; H200).
  int tile_units(const Layout3& l) const {
    if (const int word = tile_word(l)) return word;
    const int64_t bytes = l.reduced * t_.in_bytes;
    // A multiple of 16 bytes is read as 16-byte words (the kernel's rule): without their
    // alignment, elements.
    const int64_t unit = bytes % 16 == 0 ? 0 : bytes % 8 == 0 ? 8 : bytes % 4 == 0 ? 4 : 0;
    if (l.in_reduced != 1 || unit <= t_.in_bytes) return 0;
    const int64_t elements = unit / t_.in_bytes;
    if (in_.address % uintptr_t(unit) != 0 || !l.outer_strides_multiple_of(elements) ||
        (l.inner > 1 && l.in_inner % elements != 0))
      return 0;
    return int(bytes);
  }

  // tile_kernel: A the inner dim unless the result is transposed (or rows: outer), as many tiles
  // as the outputs need (B looped past 65535 tiles). Transposed results of a contiguous inner
  // run, a tile of each at least: transpose_tile_kernel, whole words of V elements where every
  // row's start is aligned to them.
  int64_t tiles(const Layout3& l, int64_t to) {
    const bool transposed = transposable(l, k_.transpose_least_inner, k_.transpose_least_outer);
    // Transposed maps: the input's elements through shared memory, each made its result at the
    // store (transpose_map_kernel), from Tuning::transpose_map_least_blocks_percent of a block a
    // multiprocessor, for accumulators of Tuning::transpose_map_least_acc_bytes or more.
    if (transposed && l.reduced == 1 && l.in_inner == 1 && l.inner_runs.runs <= 1 &&
        t_.acc_bytes >= k_.transpose_map_least_acc_bytes) {
      int ti_bits = kTransposeMapLeastInnerBits;
      while (ti_bits < kTransposeMapMostInnerBits && (int64_t(1) << ti_bits) < l.inner) ++ti_bits;
      const int64_t inner_tiles = ceil_div(l.inner, int64_t(1) << ti_bits);
      const int64_t blocks = inner_tiles * ceil_div(l.outer, int64_t(kTransposeMapTile) >> ti_bits);
      if (blocks <= kMaxGridX && blocks * 100 >= d_.sm_count * k_.transpose_map_least_blocks_percent) {
        Step& s = p_.add(Kernel::TransposeMap);
        s.grid[0] = blocks, s.block[0] = kTileBlock, s.dependent = true, s.layout = l, s.to = to;
        s.inner_tiles = inner_tiles, s.team = ti_bits;
        return 0;
      }
    }
    if (transposed) {
      const int64_t V = transpose_vector(t_.in_bytes, t_.acc_bytes);
      int lane_bits = kTransposeLeastLaneBits;
      while (lane_bits < kTransposeMostLaneBits && (V << lane_bits) < l.inner) ++lane_bits;
      const int64_t inner_tiles = ceil_div(l.inner, V << lane_bits);
      const int64_t blocks = inner_tiles * ceil_div(l.outer, (int64_t(kTileBlock) >> lane_bits) * kTransposeRows);
      // Under a block a multiprocessor its rows' loads, one row after another, are the time: the
      // tiles below issue all of an output's at once (amax over dim 0 of (8, 197, 1) expanded
      // to 64 on dim 2, bool, 4 blocks: 7.99 us in CUDA graphs, torch 2.15; H200).
      const int64_t least_percent = V == 1 ? k_.transpose_least_blocks_percent : k_.transpose_vector_least_blocks_percent;
      if (blocks <= kMaxGridX && blocks * 100 >= d_.sm_count * least_percent) {
        Step& s = p_.add(Kernel::TransposeTiles);
        s.grid[0] = blocks, s.block[0] = kTileBlock, s.dependent = true, s.layout = l, s.to = to;
        s.V = int(V), s.inner_tiles = inner_tiles, s.team = lane_bits;
        // Four rows at once (V = 1: one element a lane) under a block a multiprocessor, and over
        // 4 rows or more but for positions (the instance of positions holds 86-101 registers).
        const bool few_blocks = blocks * 100 < d_.sm_count * k_.transpose_rows_at_once_most_percent;
        s.U = V == 1 && l.reduced > 1 && (few_blocks || (l.reduced >= 4 && !t_.indexed)) ? 4 : 1;
        s.flag = V > 1 && l.in_inner == 1 && in_.address % uintptr_t(V * t_.in_bytes) == 0 &&
                 l.outer_strides_multiple_of(V) &&
                 (l.reduced == 1 || l.in_reduced % V == 0);
        return 0;
      }
    }
    // Lanes along the result's run, unless that run is shorter than
    // Tuning::tiles_short_result_run and the inner run is contiguous while the reduced one is not:
    // then lanes along inner read whole sectors, and the stores, a result's run apart, meet in L2
    // (lanes along a result run of 12 read a sector for 4 bytes: max over dim 0 of (7, 12,
    // 151936).transpose(2, 1) bfloat16 29.5 -> 16.2 us in CUDA graphs, torch.compile 16.1; H100).
    // So also where neighbouring outer indexes are Tuning::tiles_far_outer_bytes apart in the
    // input or more: lanes along them read a sector an element.
    const bool along_inner = l.in_inner == 1 && l.in_reduced != 1 && l.inner >= 32;
    const bool far_outer = l.outer > 1 && std::abs(l.outer_in(1) - l.outer_in(0)) * t_.in_bytes >= k_.tiles_far_outer_bytes;
    const bool short_run = along_inner && (l.outer < k_.tiles_short_result_run || far_outer);
    const bool a_is_outer = l.inner == 1 || (tiles_transposed(l) && !short_run);
    const int64_t nA = a_is_outer ? l.outer : l.inner, nB = a_is_outer ? l.inner : l.outer;
    // The instance unrolled for the fewest of 4, 8, 16 elements an output, with 4, 2 or 1
    // outputs a thread along A (plan.h). Hot, H200, us, one output a thread unrolled for 16 ->
    // this (torch.compile): amax over rows of 3 of (4096, 64, 3) bool 4.67 -> 1.95 (1.23); sum
    // over dim -2 of (1024, 7, 5, 112)[:, :, ::3] int16 15.4 -> 4.60 (2.64); min over dim 0 of
    // (7, 11008, 12) int8 3.46 -> 2.07 (1.69); var_mean over dim 0 of (8, 12, 56, 128)
    // bfloat16 2.74 -> 2.50 (3.4); max over rows of 12 of (13, 512, 12) int32 1.64 -> 1.42
    // (1.35); aminmax over rows of 16 through 3 outer runs uint8 70.2 -> 72.6 (38.5).
    int unroll = tile_unroll(l.reduced), threads_bits = kTileBlockBits, a_bits = 0;
    int64_t tiles_a = 0, tiles_b = 0;
    // 32 x 8 tiles of a block of 2^threads_bits threads; fewer than 8 outputs along B (rows:
    // one) give A the rest of the block.
    const auto shape = [&]() {
      int b_bits = 0;
      while (b_bits < 3 && (int64_t(1) << b_bits) < nB) ++b_bits;
      a_bits = 0;
      while (a_bits < threads_bits - b_bits && (int64_t(1) << a_bits) < nA) ++a_bits;
      tiles_a = ceil_div(nA, int64_t(tile_outputs(unroll)) << a_bits);
      tiles_b = std::min<int64_t>(ceil_div(nB, int64_t(1) << (threads_bits - a_bits)), 65535);
    };
    shape();
    // Few outputs: blocks of 256 threads of several outputs each left most multiprocessors
    // idle, each warp's outputs one after another. Then an output a thread (the instance for
    // kTileReduced elements), and blocks down to Tuning::tile_least_threads threads until the
    // grid covers the multiprocessors. H200, CUDA graphs, us (torch.compile): argmin over dim 0
    // of (8, 224, 40).permute(0, 2, 1) int64, 20 blocks -> 140 of 64 threads, 2.66 -> 1.31
    // (1.32); prod over dim -2 of (11008, 12).transpose(1, 0) float32 1.29 -> 1.15 (1.14).
    if (tiles_a * tiles_b < d_.sm_count && unroll != kTileReduced) unroll = kTileReduced, shape();
    while (tiles_a * tiles_b < d_.sm_count && (int64_t(1) << threads_bits) > k_.tile_least_threads) --threads_bits, shape();
    if (tiles_a > kMaxGridX) p_.invalid = true;
    // Launched with programmatic dependence, the indexes worked out before the wait (a copy of
    // the kernel in CUDA graphs, H200, bfloat16 sums, us a call, plain -> dependent: (128, 3,
    // 256) over dim 1 1.97 -> 1.29, rows of 14 1.92 -> 1.29, (11008, 3, 16) over dim 1 3.59 ->
    // 2.88, rows of 7 2.23 -> 1.51).
    Step& s = p_.add(Kernel::Tiles);
    s.grid[0] = tiles_a, s.grid[1] = tiles_b, s.block[0] = 1 << threads_bits, s.dependent = true, s.layout = l;
    s.to = to, s.a_bits = a_bits, s.a_is_outer = a_is_outer, s.word = tile_units(l);
    s.loads = unroll;
    return 0;
  }

  bool slab_shape(const Layout3& l, SlabShape* shape) const {
    const int64_t size = t_.in_bytes;
    const bool dense =
        (l.inner == 1 && l.in_reduced == 1) || (l.in_inner == 1 && (l.in_reduced == l.inner || l.reduced == 1));
    const int64_t S = l.reduced * l.inner;
    if (!dense || l.combine != 1 || S * size > kSlabBytes || l.outer >= INT32_MAX) return false;
    // Results transposed against the input: the slabs' stores would be a result apart, where
    // tile_kernel's lanes go along outer and store whole runs. Not for up to 4 results a slab,
    // whose stores are then up to 4 runs a warp, while tile_kernel's lanes each read a slab of
    // their own (sum over dim -1 of (151936, 80, 3).permute(2, 0, 1) int32: the columns kernel,
    // 151936 blocks of 3 x 80 elements at 70% of the SMs' issue, 374 us; slabs 50.5,
    // torch.compile 55; H200, hot).
    if (l.inner > 4 && tiles_transposed(l)) return false;
    SlabShape s{};
    s.slab = S;
    s.linear = l.outer_runs.runs <= 1 && (l.outer == 1 || l.in_outer == S);
    // The runs in memory order (layout.h), each the next one's extent: one run of memory. Each
    // slab's place through the runs, its elements loaded one by one, took mean over rows of 12
    // of (256, 197, 64, 12).transpose(0, 1) float16 89.9 us in CUDA graphs; read as one run,
    // 41.3 (torch.compile 21, torch 214; H200).
    const int runs = l.outer_runs.runs;
    if (runs > 1) {
      bool one_run = l.outer_runs.in[runs - 1] == S;
      for (int k = 0; k + 1 < runs; ++k)
        one_run = one_run && l.outer_runs.in[k] == l.outer_runs.size[k + 1] * l.outer_runs.in[k + 1];
      s.run_linear = one_run;
    }
    const bool linear = s.linear || s.run_linear;
    int64_t G = kSlabBytes / (S * size);
    if (!linear) G = std::min<int64_t>(G, kSlabBlock);
    G = std::min<int64_t>(G, l.outer);
    // 16-byte vectors: every block's run starts aligned (G * S * size a multiple of 16).
    const int64_t bytes = S * size;
    int64_t m = 16;
    for (int64_t b = bytes; m > 1 && b % 2 == 0; b /= 2) m /= 2;  // 16 / gcd(bytes, 16)
    if (linear && in_.address % 16 == 0 && (G >= m || G == l.outer)) {
      if (G < l.outer) G = G / m * m;
      s.vectors = true;
    }
    s.slabs = int(G);
    // Fewer blocks than multiprocessors: the other kernels spread such layouts wider (std over
    // dim 1 of (128, 3, 256) bfloat16, 26 blocks of 5 slabs: 4.41 us against tiles' 3.11).
    if (ceil_div(l.outer, G) < d_.sm_count) return false;
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

  // Whether the input is large enough for slabs (Tuning::slabs_least_bytes).
  bool slabs_pay(const Layout3& l) const { return l.outer * l.reduced * l.inner * t_.in_bytes >= k_.slabs_least_bytes; }

  // Dense slabs where they pay, else tiles.
  int64_t slabs_or_tiles(const Layout3& l, const SlabShape& slabs, int64_t to) {
    return slabs_pay(l) ? slabs_step(l, slabs, to) : tiles(l, to);
  }

  int64_t slabs_step(const Layout3& l, const SlabShape& slabs, int64_t to) {
    const int64_t blocks = ceil_div(l.outer, slabs.slabs);
    if (blocks > kMaxGridX) p_.invalid = true;
    Step& s = p_.add(Kernel::Slabs);
    s.grid[0] = blocks, s.block[0] = kSlabBlock, s.dependent = true, s.layout = l, s.to = to, s.slabs = slabs;
    return 0;
  }

  // ---- columns (inner > 1) -------------------------------------------------------------------

  // About Tuning::columns_blocks_per_sm blocks a multiprocessor keep the memory busy. Threads go
  // down the reduced dim (Y) only when the outputs alone give fewer blocks than that; past Y =
  // 8, only if that saves splitting the reduced dim across blocks, which costs a second kernel,
  // or, for 1- and 2-byte inputs (8 or 16 outputs a thread) whose reduced dim is split anyway,
  // to 16: half the splits, so half the partials to write and combine. Hot / cold us over dim 0,
  // H100: (4096, 4096) uint8 12.6 / 18.8 -> 9.6 / 16.5, bfloat16 9.3 / 18.1 -> 9.2 / 17.6, var of
  // bfloat16 22.1 / 26.6 -> 18.2 / 22.7; float32 was mixed. (128, 65536) and (4096, 4096) over
  // dim 0 with Y = 32 and splits were slower than with Y = 8 and more splits. Not for indexed
  // operators (`deeper` false): argmax measured slower, as float32. Short of that, 32 threads
  // down and no split when that still gives a block a multiprocessor (and each thread four
  // rows): the second kernel cost more than the blocks missing ((512, 16384) bfloat16 over dim
  // 0, 256 blocks instead of 320 and a combine: 6.32 / 12.54 -> 4.39 / 10.43 us hot / cold,
  // H100).
  ColumnsShape columns_shape(const Layout3& l, int64_t V, int threads, bool deeper, int64_t scale = 1) const {
    const int64_t wanted = int64_t(d_.sm_count) * k_.columns_blocks_per_sm * scale;
    const auto blocks_for = [&](int y) { return l.outer * ceil_div(l.inner, int64_t(threads / y) * V); };
    int Y = 1;
    bool one_pass = false, split_deeper = false;
    while (Y < 8 && blocks_for(Y) < wanted) Y *= 2;
    if (blocks_for(Y) < wanted) {
      if (blocks_for(16) >= wanted) {
        Y = 16;
      } else if (blocks_for(kColumnsMaxY) >= wanted) {
        Y = kColumnsMaxY;
      } else if ((blocks_for(kColumnsMaxY) >= d_.sm_count && l.reduced >= 4 * kColumnsMaxY &&
                  l.reduced <= k_.columns_one_pass_rows * kColumnsMaxY) ||
                 l.reduced <= 8 * kColumnsMaxY) {
        // (Up to 8 rows a thread: two rounds of loads cost less than a second kernel. sum(x, 0)
        // of (128, 6144) bfloat16 was split in two, 3.7 us in CUDA graphs against
        // torch.compile's one kernel, 1.7.)
        Y = kColumnsMaxY;
        one_pass = true;
      } else {
        split_deeper = deeper && V >= 8;  // 1- and 2-byte inputs (4-byte ones measured mixed)
      }
    }
    // No thread across without an output: while half the threads across cover a row's outputs,
    // twice the threads go down (the blocks stay as many), down to one thread across. ((65536,
    // 128) bfloat16 over dim 0 had 16 vectors of outputs and 32 threads across: half of every
    // block idle; uint8 (2^20, 16), one vector, 23.4 / 30.1 -> 10.5 / 16.7 us; H100.)
    while (Y < threads && int64_t(threads / Y / 2) * V >= l.inner) Y *= 2;
    // X is fixed here, from the outputs; Y may change below, so the block is X * Y threads, at
    // most `threads` (the kernel's launch bound) and at least a warp.
    int X = threads / Y;
    // Many outer indexes, few outputs a row: the loop above sent threads down only to fill the
    // block, and they may hold a row or two each; fewer down (Tuning::columns_least_rows), a
    // smaller block, the same blocks.
    if (!one_pass && !split_deeper && blocks_for(Y) >= wanted)
      while (Y > 1 && X * Y > 32 && l.reduced < int64_t(Y) * k_.columns_least_rows) Y /= 2;
    ColumnsShape c{};
    c.deep = Y >= 16;
    if (split_deeper && Y < 16) {
      // Y raised after X was set: X shrinks with it, the block stays within `threads`.
      X = std::max(1, X * Y / 16);
      Y = 16;
    }
    c.Y = Y;
    c.X = X;
    c.whole = l.inner / V * V;
    c.column_blocks = std::max<int64_t>(1, ceil_div(c.whole, int64_t(c.X) * V));
    const int64_t xblocks = l.outer * c.column_blocks;
    c.splits = one_pass ? 1
                        : std::clamp<int64_t>(ceil_div(wanted, xblocks), 1, std::max<int64_t>(1, l.reduced / (4 * Y)));
    if (!one_pass && V == 1) {
      // Single elements a load (rows that are not whole aligned vectors) move a quarter of a
      // vector's bytes or less: up to proportionally more splits (a multiprocessor's 2048
      // threads) keep as many bytes in flight, while each thread keeps 32 rows a split. amax
      // over dim 1 of (50257, 1025).transpose(0, 1) float32, 8 -> 32 splits: 104 -> 55 us in CUDA
      // graphs (torch 58; H200). 4 rows a thread made their partials and combine cost more than
      // they gained: prod over dim 0 of (4096, 8, 2, 77)[:, ::2] int16, 14 -> 53 splits, 5.7 -> 7.1 us.
      const int64_t scale = std::clamp<int64_t>(16 / t_.in_bytes, 1, 4);
      c.splits = std::max(c.splits, std::min(ceil_div(wanted * scale, xblocks), l.reduced / (32 * Y)));
    }
    c.splits = std::min<int64_t>(c.splits, 65535);
    c.per_split = ceil_div(l.reduced, c.splits);
    c.splits = ceil_div(l.reduced, c.per_split);
    return c;
  }

  // Small columns: an output a thread, Y threads down (4 to 32) until each has at most
  // Tuning::small_columns_per_thread rows, one pass. In CUDA graphs the input is in L2 and
  // each round of loads a thread waits for is a round trip: 8 to 16 rows a thread made 2 to 4
  // (sum over dim 0 of (56, 28, 64) float16, 4 threads down 14 rows: 2.04 us; 16 down, 3.5
  // rows, 1.68; torch.compile 1.63; H200). Two rounds of four loads (8 rows) cost less than the
  // combine down twice as many threads (plan.h); 8 rows are now one round
  // (columns_element_loads).
  ColumnsShape small_columns_shape(const Layout3& l) const {
    ColumnsShape c{};
    c.Y = 4;
    while (c.Y < kColumnsMaxY && k_.small_columns_per_thread * c.Y < l.reduced) c.Y *= 2;
    c.X = kColumnsBlock / c.Y;
    c.whole = l.inner;
    c.column_blocks = ceil_div(l.inner, int64_t(c.X));
    c.splits = 1;
    c.per_split = l.reduced;
    c.deep = c.Y >= 16;
    return c;
  }

  // Whole V-vectors of outputs; then (V > 1 only) the last outputs of each row, fewer than V, in
  // another launch, a block or two per outer index and split; with splits, their combine. With
  // splits, or few blocks, each kernel waits for the one before it (programmatic dependence).
  int64_t columns(const Layout3& l, const ColumnsShape& c, int V, int U, int64_t to, int64_t ws) {
    const int64_t xblocks = l.outer * c.column_blocks;
    if (xblocks > kMaxGridX) p_.invalid = true;
    const int64_t sink = c.splits == 1 ? to : ws;
    const auto launch = [&](int v, int u, int64_t grid_x, int64_t column_blocks, int64_t first, int64_t end) {
      Step& s = p_.add(Kernel::Columns);
      s.grid[0] = grid_x, s.grid[1] = c.splits, s.block[0] = c.X, s.block[1] = c.Y, s.layout = l, s.to = sink;
      s.dependent = c.splits > 1 || grid_x <= 2 * int64_t(d_.sm_count);
      s.V = v, s.U = u, s.column_blocks = column_blocks, s.first = first, s.end = end, s.per = c.per_split;
      // Outer indexes nearer than Tuning::columns_outer_first_bytes (packed narrow outputs, one
      // outer run): the grid steps through them first, so that the blocks that share a sector
      // run together rather than an outer index's whole pass apart.
      s.flag = l.outer > 1 && column_blocks > 1 && l.outer_runs.runs <= 1 &&
               l.in_outer * t_.in_bytes < k_.columns_outer_first_bytes;
    };
    if (c.whole > 0) launch(V, U, xblocks, c.column_blocks, 0, c.whole);
    if (c.whole < l.inner) {
      // Up to V - 1 outputs, which may be more than X threads (1-byte inputs: 15, X down to 8).
      const int64_t tail_blocks = ceil_div(l.inner - c.whole, c.X);
      if (l.outer * tail_blocks > kMaxGridX) p_.invalid = true;
      launch(1, columns_element_loads(t_.group_rows), l.outer * tail_blocks, tail_blocks, c.whole, l.inner);
    }
    if (c.splits == 1) return 0;
    partials_step(l, c.splits, ws, to);
    return c.splits * l.outer * l.inner * t_.acc_bytes;
  }

  // column_partials_kernel: each output's `count` partials at [partial][output] combined in order
  // (block_partials_kernel for a few outputs of many partials: Tuning::block_partials_outputs).
  void partials_step(const Layout3& l, int64_t count, int64_t from, int64_t to) {
    if (l.outer * l.inner <= k_.block_partials_outputs && count >= k_.block_partials_least) {
      Step& s = p_.add(Kernel::BlockPartials);
      s.grid[0] = l.outer * l.inner, s.block[0] = kBlockPartials;
      s.dependent = true, s.layout = l, s.from = from, s.count = count, s.to = to;
      return;
    }
    int partial_y = 1;
    while (partial_y < 32 && partial_y < count) partial_y *= 2;
    Step& s = p_.add(Kernel::ColumnPartials);
    s.grid[0] = ceil_div(l.outer * l.inner, kPartialsX), s.block[0] = kPartialsX, s.block[1] = partial_y;
    s.dependent = true, s.layout = l, s.from = from, s.count = count, s.to = to;
  }

  // ---- one pass over one reduced run (combine == 1) ------------------------------------------

  int64_t layout(const Layout3& l, int64_t to, int64_t ws) {
    // Indexed operators reduce a whole tensor as one row (segments across blocks): the vector
    // kernels' packed and grouped paths know no positions.
    if (!t_.indexed && l.is_full_contiguous()) return vector(l.reduced, to, ws);
    if (l.inner == 1) return rows(l, to, ws);
    // Short reductions whose results are transposed against the input, the result-contiguous
    // run not the last outer digit: that run last (layout.h), so that tiles go along the result.
    Layout3 ordered;
    if (l.reduced <= kTileReduced && outer_in_result_order(l, &ordered)) return layout(ordered, to, ws);
    // Columns narrower than a line whose inner run continues in memory through outer runs that
    // hold results in another order: those runs merged into one inner run (layout.h's
    // inner_merged), which only the columns kernels below take. First where the inner run is
    // half a sector or more: the result-contiguous run as inner (below) read 14 float16 28
    // bytes apart in amax over dim 0 of (128, 64, 1025, 14).transpose(3, 2), 334 us in CUDA
    // graphs against torch's 292 and torch.compile's 109; merged, 59.3 (the read probe's time
    // for its bytes 53.3; H200, seed 13579).
    const auto merges = [&] {
      return l.reduced > kTileReduced && l.inner * t_.in_bytes < 128 && inner_merged(l, &ordered);
    };
    const bool merge_first = l.inner * t_.in_bytes >= k_.merged_least_inner_bytes;
    if (merge_first && merges()) return layout(ordered, to, ws);
    // Longer columns of a few elements, transposed likewise: their result-contiguous outer run
    // as inner (layout.h), read across rows in memory order.
    if (l.reduced > kTileReduced && columns_in_result_order(l, t_.in_bytes, &ordered)) return layout(ordered, to, ws);
    if (!merge_first && merges()) return layout(ordered, to, ws);
    return in_order(l, to, ws);
  }

  // layout()'s columns (inner > 1) in the order it settled on: a map, short columns, slabs,
  // tiles, rows of strided elements or the columns kernels.
  int64_t in_order(const Layout3& l, int64_t to, int64_t ws) {
    Layout3 ordered;
    const bool merged = l.inner_runs.runs > 1;
    // A map along inner, from a block's elements a row.
    const int64_t map_blocks = ceil_div(l.inner, int64_t(kMapBlock * kMapLoads));
    if (l.reduced == 1 && l.combine == 1 && l.in_inner == 1 && l.out_inner == 1 && !merged && l.inner >= kMapBlock * kMapLoads &&
        map_blocks <= kMaxGridX) {
      Step& s = p_.add(Kernel::Map);
      s.grid[0] = map_blocks, s.grid[1] = std::min<int64_t>(l.outer, 65535), s.block[0] = kMapBlock;
      s.dependent = true, s.layout = l, s.to = to;
      // Words of 16 bytes (8 of 1-byte elements) where every row starts on one; not for argmax's
      // and argmin's positions (map_kernel).
      const int64_t word = std::min<int64_t>(16, int64_t(kMapLoads) * t_.in_bytes);
      s.flag = !t_.indexed && in_.address % uintptr_t(word) == 0 && l.outer_strides_multiple_of(word / t_.in_bytes);
      return 0;
    }
    const int kV = columns_vector(t_.in_bytes, t_.indexed);
    // Whether every row of inner elements is whole aligned loads of `bytes` (16: vectors; 8: the
    // narrow instance's words).
    const auto loads_of = [&](int64_t bytes) {
      return l.in_inner == 1 && in_.address % bytes == 0 && l.outer_strides_multiple_of(bytes / t_.in_bytes) &&
             (l.reduced == 1 || (l.in_reduced * t_.in_bytes) % bytes == 0);
    };
    const bool vectors = loads_of(16);
    const bool deeper = !t_.indexed;
    const int64_t least_block = l.outer * l.reduced * l.inner * t_.in_bytes <= k_.tiles_small_bytes
                                    ? k_.tiles_least_block_elements
                                    : int64_t(4) * kColumnsBlock;
    // A short reduced dim: tiles where the columns' threads down it, or across a row's outputs,
    // would be mostly idle, or where the result is transposed against the input (tile_kernel).
    // Also where a columns block would have fewer than least_block elements (Tuning: 16 a thread
    // in L2, else 4): each block's fixed cost (the combine down Y through shared memory) then
    // outweighs its loads (2-norm over dim 2 of (1024, 64, 7, 28) float16, 65536 blocks of 28 x 7
    // elements: 129 us, torch.compile 5.9);
    // and where its threads down would hold a row each at most, the combine then being most of
    // the work (min over dim 0 of (7, 11008, 12) int8, 8 threads down 7 rows: 7.5 us,
    // torch.compile 1.7; H200).
    const auto short_tiles = [&](const ColumnsShape& c, int64_t V) {
      return !merged && l.reduced <= kTileReduced &&
             (c.Y >= l.reduced || int64_t(c.X) * V > 2 * l.inner || tiles_transposed(l) ||
              int64_t(c.X) * V * l.reduced < least_block);
    };
    // Short columns of whole pieces (narrower than Tuning::short_columns_inner_bytes: any): 1 to 4
    // pieces of results a thread over (outer, inner) flattened (short_columns_kernel).
    if (!merged && l.inner * t_.in_bytes < k_.short_columns_inner_bytes && short_columns(l, to)) return 0;
    // Dense slabs: where tiles would be taken, and for columns narrower than 128 bytes, whose
    // rows the columns kernel's threads across mostly do not reach.
    SlabShape slabs;
    const bool dense = !merged && slab_shape(l, &slabs);
    if (dense && l.inner * t_.in_bytes < 128)
      return l.reduced > kTileReduced ? slabs_step(l, slabs, to) : slabs_or_tiles(l, slabs, to);
    // Short reductions of results transposed against the input, a tile of them at least each
    // way: transpose_tile_kernel, dense or not. Slabs store such results one by one, far apart
    // (var over the dim of 3 of a channels_last (112, 32, 197, 3) float32: 16.7 us in slabs,
    // torch.compile 3.1).
    if (!merged && transposable(l, k_.transpose_least_inner, k_.transpose_least_outer)) return tiles(l, to);
    // Also short columns whose V outputs a thread hold 64 bytes of accumulators or more
    // (positions' 16 bytes, min-max pairs of 2-byte inputs): the columns kernel parks them in
    // shared memory and ran at an eighth of DRAM's peak (in CUDA graphs, H200, us: argmax over
    // dim 1 of (49152, 7, 128, 2) int16 450 -> 107 in slabs, torch 186; aminmax over dim 1 of
    // (2048, 3, 512) float16 10.5 -> 5.9).
    if (dense && l.reduced <= kTileReduced && t_.acc_bytes * kV >= 64) return slabs_or_tiles(l, slabs, to);
    // Small columns of 32 to 256 rows: an output a thread, so as many blocks as outputs allow,
    // and a round of loads a thread down (small_columns_shape), no split. The shapes below gave
    // 2-byte inputs 8 outputs a thread and 32 threads down a column, a few dozen blocks each
    // combining 32 rows of each output (in CUDA graphs, H200, us: logsumexp over dim 0 of (128,
    // 3584) bfloat16 3.53 -> 2.28, std of (64, 3072) float16 3.04 -> 2.09, amax of (96, 4608)
    // bfloat16 2.66 -> 1.94, argmax of (256, 512) float32 3.24 -> 2.43).
    if (l.reduced >= 32 && l.reduced <= 8 * kColumnsMaxY && l.outer * l.inner * l.reduced <= k_.small_columns_most)
      return columns(l, small_columns_shape(l), 1, columns_element_loads(t_.group_rows), to, ws);
    // Narrow columns that are not dense slabs, longer than tiles take, on at least an outer
    // index a multiprocessor: a strided row a result (layout.h's inner_as_rows), not a columns
    // block of a few columns an outer index; where a team is 8 lanes or fewer (4 rows or more a
    // warp, whose loads share sectors). Teams of 32 (a row a warp, a sector a lane for 2 of its
    // bytes) lost 2.4x: std over dim -2 of (12, 1024, 512, 16).transpose(3, 0) float16, 77 -> 188
    // us in CUDA graphs (torch.compile 60; H200).
    if (!merged && l.reduced > kTileReduced && l.inner * t_.in_bytes <= k_.columns_as_rows_most_bytes &&
        l.outer >= d_.sm_count && rows_team(l.reduced) <= 8 && inner_as_rows(l, &ordered))
      return rows(ordered, to, ws);
    if (!vectors) {
      const ColumnsShape one = columns_shape(l, 1, kColumnsBlock, deeper);
      if (short_tiles(one, 1)) return dense ? slabs_or_tiles(l, slabs, to) : tiles(l, to);
      // 2-byte inputs whose rows are 8-byte aligned but not 16: the narrow instance's 8-byte
      // vectors, in blocks enough for 8 of kNarrowBlock threads a multiprocessor (64 KB of loads
      // in flight). Element loads moved 2 bytes each: mean over dim -2 of (40, 50257, 28)
      // float16 (rows of 56 bytes), 27 splits of 40 blocks, 16 KB in flight a multiprocessor,
      // 180 us in CUDA graphs against torch.compile's 39 (H200).
      if (t_.in_bytes == 2 && loads_of(8) && l.inner >= kV / 2)
        return columns(l, columns_shape(l, kV / 2, kNarrowBlock, deeper, 4), kV / 2, 8, to, ws);
      return columns(l, one, 1, columns_element_loads(t_.group_rows), to, ws);
    }
    const ColumnsShape wide = columns_shape(l, kV, kColumnsBlock, deeper);
    if (short_tiles(wide, kV)) return dense ? slabs_or_tiles(l, slabs, to) : tiles(l, to);
    // Few outputs of a 2-byte type: 16-byte vectors give 8 outputs a thread, so few threads
    // across that 16 go down each column and a 4-level tree combines them. 8-byte vectors,
    // blocks of kNarrowBlock threads and 8 loads in flight fill the device with Y <= 8 instead.
    // (128, 65536) bfloat16 over dim 0: 3.99 us against 4.53 (torch 4.56); 4 loads in flight
    // 4.18, blocks of 256 4.27. float32 gained only on (256, 32768), 5%: not instantiated.
    if (t_.in_bytes == 2 && wide.deep) {
      const ColumnsShape narrow = columns_shape(l, kV / 2, kNarrowBlock, deeper);
      if (narrow.splits == 1) return columns(l, narrow, kV / 2, 8, to, ws);
    }
    return columns(l, wide, kV, 4, to, ws);
  }

  // ---- several reduced runs ------------------------------------------------------------------

  // Layout3::combine > 1: the pass over one of them writes each output's partials,
  // [partial][output] at the front of the workspace, and column_partials_kernel combines them in
  // order into the results (it waits for the pass).
  size_t combined(const Layout3& l) {
    const int64_t outputs = l.outputs();
    const int64_t partial_bytes = ceil_div(l.combine * outputs * t_.acc_bytes, 256) * 256;
    if (l.combine > INT32_MAX) p_.invalid = true;
    Layout3 first = l;
    first.combine = 1;
    const int64_t bytes = layout(first, 0, partial_bytes);
    Layout3 results;  // output k at k: the result is contiguous
    results.outer = outputs;
    results.out_outer = 1;
    partials_step(results, l.combine, 0, kResult);
    return size_t(partial_bytes + bytes);
  }

  // A few results whose elements interleave in one long run (outer == 1, inner < 128 bytes,
  // in_reduced == inner: mean over dims 0 and 1 of (2048, 4096, 7)): the columns kernel's
  // threads across had a 7-output row each, mostly idle. Read as k consecutive rows a row
  // instead, k * inner outputs of partials combined k at a time (combine = k): k the power of
  // two dividing the rows that makes a row of 1024 bytes or more (up to 1024 rows), at least 256
  // rows left. In CUDA graphs, H200, us: mean over dims 0-2 of (77, 4096, 32, 3).transpose(1, 0)
  // bfloat16 69 -> 20.7 (torch 30.8); mean over dims 0-1 of (2048, 4096, 7).transpose(0, 1)
  // float32 123 -> 61.8 (torch 63.6). From 4 MiB: the combine kernel cost more than it saved on
  // nansum over dims 0-1 of (8192, 7, 8) bfloat16 (0.9 MB, 4.50 -> 5.36). Not for positions (a
  // partial's are in its own rows).
  bool fold_interleaved(const Layout3& l, Layout3* out) const {
    const int64_t size = t_.in_bytes;
    if (t_.indexed || l.combine != 1 || l.outer != 1 || l.inner < 2 || l.inner * size >= 128 || l.in_inner != 1 ||
        l.out_inner != 1 || l.in_reduced != l.inner || l.reduced * l.inner * size < k_.interleaved_bytes)
      return false;
    int64_t k = 1;
    while (k < 1024 && k * l.inner * size < k_.interleaved_row_bytes && l.reduced % (2 * k) == 0 &&
           l.reduced / (2 * k) >= k_.interleaved_rows)
      k *= 2;
    if (k * l.inner * size < k_.interleaved_row_bytes) return false;
    Layout3 f = l;
    f.inner = k * l.inner;
    f.reduced = l.reduced / k;
    f.in_reduced = f.inner;
    f.out_inner = 1;
    f.combine = k;
    *out = f;
    return true;
  }

  // Several reduced runs whose innermost is contiguous (Tuning::combine_rows_least_bytes long)
  // but not the one fold_layout made the first pass, for few results: the same reduction with
  // that run first, read as rows, where each result has at most Tuning::combine_rows_most
  // partials (Tuning).
  bool rows_first(const Layout3& l, Layout3* out) const {
    const IndexedLayout& x = in_.indexed;
    if (l.in_reduced == 1 || !x.usable || !x.reduced.innermost_contiguous() || x.outputs > k_.combine_rows_outputs)
      return false;
    const int64_t run = x.reduced.size[x.reduced.runs - 1];
    if (run * t_.in_bytes < k_.combine_rows_least_bytes || x.count / run > k_.combine_rows_most) return false;
    DimInfo dims[2 * kMaxOuterRuns];
    int64_t n = 0;
    for (int q = 0; q < x.kept.runs; ++q) dims[n++] = {x.kept.size[q], x.kept.in[q], x.kept.out[q], false};
    for (int q = 0; q < x.reduced.runs; ++q) dims[n++] = {x.reduced.size[q], x.reduced.in[q], 0, true};
    Layout3 f;
    if (!fold_layout(dims, n, &f, true, nullptr, run) || f.in_reduced != 1) return false;
    *out = f;
    return true;
  }

  const Device& d_;
  const OpTraits& t_;
  const Tuning& k_;
  const PlanInput& in_;
  Plan& p_;
};

}  // namespace planning

// The plan for `in` under a tuning table (tests try other values)...
inline Plan plan_reduce(const Device& d, const OpTraits& t, const PlanInput& in, const Tuning& k) {
  Plan p;
  planning::Planner(d, t, k, in, p).reduce();
  return p;
}

// ... and under the device's: what launch_reduce enqueues (kernels/dims.cuh launches it step by
// step).
inline Plan plan_reduce(const Device& d, const OpTraits& t, const PlanInput& in) {
  return plan_reduce(d, t, in, tuning_for(d.cc_major));
}

}  // namespace treduce::cuda
