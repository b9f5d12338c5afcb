// The choices between kernels as data (Tuning): one table per architecture, each value with where it
// was measured, and TREDUCE_TUNING's trials of other values. Only the planner (plan_reduce.h,
// compiled once in plan_reduce.cpp), exact's launcher (exact.cu) and the softmax family's
// (normalize.cu) read it: a change here rebuilds no other kernel.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <string>

#include "../normalize.h"
#include "plan.h"

namespace treduce::cuda {

// ---------------------------------------------------------------------------------------------
// Tuning: the choices between kernels, as data. One table per architecture; each value with
// where it was measured (details in the comments at the code that uses it, dims.cuh and below).

struct Tuning {
  // Small reductions in one kernel (small_kernel): any layout up to this many elements and
  // small_count elements a result (four rounds of a block's loads); H100, bfloat16 and float32
  // sums over random layouts of 2^12 to 2^20 elements.
  int64_t small_elements = int64_t(1) << 16;
  int64_t small_count = int64_t(kSmallBlock) * kSmallLoads * 4;
  // ... but rows that whole_rows_kernel takes only up to this many elements: past it that
  // kernel was faster (H200, hot, us, small -> whole rows: mean over rows of 64 of (1024, 64)
  // bfloat16 1.25 -> 1.02, std over rows of 128 of (224, 128) float32 1.49 -> 1.12, var over
  // rows of 8 of (31, 256, 8) float32 1.24 -> 1.06; random shapes seeds 29201 and 83357; then,
  // unseen seeds 27449 and 62639: aminmax over rows of 512 of (80, 512).T bfloat16 1.21 ->
  // 1.05, std over rows of 96 of (3, 128, 96) bfloat16 1.54 -> 1.30). Not other rows: those
  // that rows_kernel took were slower (logsumexp over rows of 1024 of (56, 1024) bfloat16
  // 1.87 -> 2.69), nor columns of those sizes (max over dim 0 of (96, 7, 64) bfloat16 1.82 ->
  // 2.75).
  int64_t small_rows_elements = int64_t(1) << 14;
  // ... a few long rows: up to small_rows_outputs results of small_rows_count elements, 2^20
  // elements in all for up to 256 results of 1- to 4-byte inputs, else 2^19 (H200, float32
  // (64, 5120) over dim 1 2.82 -> 1.77 us; 1024 rows of 1024 the rows kernel's teams won).
  // 4096 results (from 1024): var over dims 2 and 3 of (768, 2, 49, 8)[:, :, ::3] bfloat16,
  // 1536 results of 17 runs of 8, 10.3 -> 3.4 us (columns and their combine before; H200,
  // random shapes seed 51949, tuning_trial).
  int64_t small_rows_outputs = 4096, small_rows_count = 16384;
  // ... columns whose adjacent results are adjacent: up to 32 rows, or up to 128 results of one
  // round of loads a lane, 2^19 elements (bfloat16 (32, 5120) over dim 0 2.57 -> 1.63 us, H200).
  int64_t small_columns_rows = 32, small_columns_outputs = 128;
  // ... 64 results for 2-byte inputs but Welford's, logsumexp's and positions: with 128, mean
  // over dim 0 of (1024, 128) bfloat16 took 5.10 us, out of the small kernel 3.53 (torch.compile
  // 2.98), vector_norm of (2048, 96) 5.03 -> 3.68, sum of (768, 128) 4.16 -> 3.43; 4-byte inputs
  // and Welford's were 3-12% slower out of it (H200, a tuning trial over the committed seeds'
  // losers, small_columns_outputs=64).
  int64_t small_columns_outputs_narrow = 64;
  int64_t small_most = int64_t(1) << 19;
  // ... for those columns (past small_elements) up to this many elements: small_most, as
  // measured. A knob of its own for trials: in committed H100 seeds, float32 sums and var over
  // columns of 56-128 results and 1024-2048 rows ran at 0.57-0.68x the best peer in this kernel,
  // logsumexp's and positions' at 1.3-2x (benchmarks/NOTES.md at 8d99fb0, session 45).
  int64_t small_columns_elements = int64_t(1) << 19;
  // ... and from 2048 results of up to 16384 elements where its one pass beat two (several
  // reduced runs; narrow columns of up to 128 rows that are not dense slabs; H200, random shapes
  // seeds 52361 and 31337).
  int64_t small_passes_outputs = 2048, small_passes_count = 16384, small_passes_rows = 128;
  // Teams of more than a warp for argmax and argmin while a lane has more loads than this
  // (other operators: kSmallLoads).
  int64_t small_wide_loads_indexed = kSmallLoads;
  // Teams grown past that (fewer loads a thread, down to one) while the grid has fewer blocks
  // than this many percent of the multiprocessors; 1: off. A trial's knob, off: at 50 (H100,
  // CUDA graphs, seeds 81173 and 74411) it helped sums, extrema and logsumexp of few results
  // (logsumexp over dim 0 of (14, 128) float16 1.79 -> 1.31 us, over rows of 4096 of (77, 4096)
  // 2.86 -> 2.50, sum over dims 1-2 of (49, 64, 12) float32 1.59 -> 1.35) and slowed float32
  // Welford's and positions (var_mean over dim -3 of (77, 8, 28, 7) 1.58 -> 2.21, var over dim
  // 1 of (256, 8, 3, 7) 1.38 -> 1.74, argmin over dim -2 of (77, 768) int32 1.71 -> 3.00).
  int64_t small_least_blocks_percent = 1;
  // Short columns take tile_kernel where a columns block would hold fewer elements than
  // tiles_least_block_elements, for inputs up to tiles_small_bytes (in L2: the block's combine
  // down Y outweighs its loads), else than 4 * kColumnsBlock (4 a thread; whole 16-byte loads
  // then beat tiles' element loads). H200, hot, us, columns -> tiles: argmax over dim -2 of
  // (224, 12, 196) float32 5.02 -> 1.80, logsumexp over dim -3 of (128, 7, 32, 64) float16 8.31 ->
  // 4.50, mean over dim -2 of (1024, 16, 96) float32 5.68 -> 3.54 (slabs), logsumexp over dim 1 of
  // (512, 14, 112) float32 4.24 -> 2.83; past L2 lost: max over dim 1 of (2048, 2, 1024, 12) int32
  // 128 -> 164, amax over dim 0 of (3, 13, 32, 32000) float32 54 -> 80 (random shapes seeds 17377,
  // 24683, 31907, 51949, 66071).
  int64_t tiles_least_block_elements = 4096, tiles_small_bytes = int64_t(32) << 20;
  // Rows: teams of lanes up to rows_team_loads 16-byte loads a row (20 a lane of a warp); rows
  // that are not whole vectors up to rows_ragged_loads (40 a lane) from rows_ragged_per_sm rows
  // a multiprocessor (H200, 2048 float32 rows of 2048 8.67 -> 3.44 us).
  int64_t rows_team_loads = 20 * 32, rows_ragged_loads = 40 * 32, rows_ragged_per_sm = 3;
  // A block a row in one kernel from half as many rows as multiprocessors (rows_block_rows_sm /
  // 2), up to rows_block_loads loads a row (H200: 196 float32 rows of 16384 7.69 -> 3.64 us;
  // 128 rows of 2^19 kept in segments, 14.5 against 20.6).
  int64_t rows_block_loads = 64 * kSegmentBlock;
  // Rows cut into segments: up to this many waves of blocks (H100, (128, 65536) float32).
  int64_t rows_segment_waves = 4;
  // Columns: about this many blocks a multiprocessor keep the memory busy (H100: two rather
  // than three, (65536, 128) float32 over dim 0 8.68 -> 8.20 us; four were slower).
  int64_t columns_blocks_per_sm = 2;
  // Columns kept to one pass (32 threads down, no split) where that still gives a block a
  // multiprocessor: up to this many rows a thread. Without a bound, mean over dim -2 of (40,
  // 50257, 28) float16 ran 160 blocks, 1570 rows a thread: 180 us in CUDA graphs against
  // torch.compile's 39 (H200).
  int64_t columns_one_pass_rows = 64;
  // Several reduced runs (Layout3::combine) whose innermost is contiguous and at least
  // combine_rows_least_bytes long, but not the longest, for up to combine_rows_outputs results:
  // that run first, as rows, where each result then has at most combine_rows_most partials.
  // fold_layout made the longest run the first pass: columns over the contiguous run, split, then
  // one or two combines. In CUDA graphs, H200, us (torch.compile): full mean of (16, 128,
  // 1000)[:, ::2] float32 7.28 -> 3.53 (3.40); var over dims 0 and 2 of (768, 14, 128) float16
  // 9.64 -> 4.16 (4.41); full std_mean of (17, 128, 28, 16)[:, ::2] bfloat16 10.04 -> 4.39. Not
  // for many results: var_mean over dims 0, 1 and 3 of (12, 128, 128, 80) float32, 128 results of
  // 1536 rows of 80, 22.1 -> 45.7 (1536 partials a result where columns left 80).
  int64_t combine_rows_least_bytes = 256, combine_rows_most = 2048, combine_rows_outputs = 32;
  // Up to block_partials_outputs outputs of at least block_partials_least partials each: a block
  // of kBlockPartials threads an output (block_partials_kernel), a round of loads a thread, not
  // column_partials_kernel's 32 threads an output (2048 partials of one output: 8 rounds). Full
  // amax of (40, 1024, 56, 3)[:, ::3] float32, 6720 partials: 12.24 -> 5.70 us (torch.compile
  // 8.03; H200, CUDA graphs). 128 outputs rather than 16 (the same library both ways, us):
  // min over dim 0 of (32000, 96) float16 12.83 -> 8.48 (torch 31.2), var_mean over dim 0 of
  // (11008, 80) float32 8.75 -> 6.92 (torch.compile 4.62), logsumexp over dim 0 of (32000, 128)
  // bfloat16 11.55 -> 9.51; the 4 others it changed within 0.97-1.0 (random shapes seeds
  // 29201, 83357, 71011, 40127, 17377, tuning trial). From 32 partials rather than 256 (H100,
  // hot, the same library under TREDUCE_TUNING, us): std over dim 1 of (11008, 32).transpose(1,
  // 0) float32 5.79 -> 4.81, var over dim -2 of (32000, 32) float32 7.83 -> 6.64, argmax over dim
  // -2 of (5120, 112) uint8 7.95 -> 5.70, var over dims 0 and 2 of (64, 32, 1024) bfloat16 5.46
  // -> 4.52; all 11 cases it changed in seeds 70607, 92357 and 81173 faster, 3-29%.
  int64_t block_partials_outputs = 128, block_partials_least = 32;
  // Small columns of 32 to 8 * kColumnsMaxY rows and up to 2^19 elements: an output a thread, one
  // pass (H200, logsumexp over dim 0 of (128, 3584) bfloat16 3.53 -> 2.28 us), threads down
  // each column until a thread has at most small_columns_per_thread rows (8: two rounds of four
  // loads). 8 rather than 4 (half the threads down, twice the columns a block, a combine level
  // less): in CUDA graphs, H200, the same library both ways, us: argmin over dim -3 of (4, 64,
  // 2048).permute(1, 2, 0) float32 3.62 -> 2.67, var_mean over dim 0 of (8, 49,
  // 1024).transpose(1, 0) bfloat16 3.43 -> 2.45, argmax over dim -3 of (64, 1023, 8).transpose(2,
  // 1) float32 3.71 -> 2.71, sum over dim -4 of (40, 4, 32, 16).transpose(2, 3) float32 2.07 ->
  // 1.90; the 9 other cases it changed within 0.96-1.03x (random shapes seeds 40127, 17377,
  // 36107, 93911, 66071, 31907, tuning trials).
  int64_t small_columns_most = int64_t(1) << 19, small_columns_per_thread = 8;
  // A few results interleaved in one long run, read as rows of k results (fold_interleaved):
  // from 4 MiB, rows of at least 1024 bytes, at least 256 rows left (H200, mean over dims 0-1
  // of (2048, 4096, 7) float32 123 -> 61.8 us; nansum of (8192, 7, 8) bfloat16, 0.9 MB, lost).
  int64_t interleaved_bytes = int64_t(4) << 20, interleaved_row_bytes = 1024, interleaved_rows = 256;
  // Full sums of few tiles in quarter blocks while 4 * tiles <= multiprocessors (H100, bfloat16
  // 2^18 2.58 -> 2.10 us in graphs; two a multiprocessor lost cold).
  int64_t quarter_tiles_per_sm = 1;
  // Full reductions in one block (small_sum_kernel) up to kSingleBlockVectors 16-byte vectors
  // and this many elements: a block's 512 threads over 128 KiB of 1-byte elements had each
  // element's combine as the time (H200, hot: amax of (8, 32, 512) int8 4.57 us in a block,
  // 3.13 in four and their combine; torch.compile 2.19). 2^15 (bfloat16 too) was slower: var
  // of (50257,) bfloat16 3.37 -> 3.99, sum of (49152,) int16 1.45 -> 2.11.
  int64_t single_block_elements = int64_t(1) << 16;
  // Dense slabs (slab_kernel) from this many bytes of input; smaller short reductions go to
  // tile_kernel, whose threads hold their outputs' elements in registers (no pass through
  // shared memory), where it can take them. 1: slabs always. (H200, hot: from 2 MB, rows of 7
  // bfloat16 took 2.90 -> 1.53 us, rows of 12 float32 2.19 -> 2.38; from 8 MB narrow columns
  // also went to tiles and lost 2x. benchmarks/NOTES.md at 8d99fb0, 2026-11-30.)
  int64_t slabs_least_bytes = 1;
  // Transposed short reductions go to transpose_tile_kernel from inner runs this long, its lanes
  // along inner as few as cover the run (4 to 32). With 32 lanes always, inner runs under 32
  // (64 for 1- and 2-byte inputs, 4 elements a lane) took tile_kernel, whose lanes along outer
  // read a sector each: sum over the size-1 dim of (32064, 1, 128, 28).transpose(3, 2) bfloat16
  // 912 us, torch.compile 115; amin over the dim of 2 of (2, 32064, 13, 32).transpose(0, 3)
  // uint8 (transpose tiles 128 wide, three lanes in four idle) 135 us, torch.compile 9.9 (H200).
  int64_t transpose_least_inner = 8;
  // ... and from this many outer indexes (the result's contiguous run; kTransposeTile, a tile's
  // height at most, by default). Shorter ones take tile_kernel, a thread a row, its rows far apart
  // in memory: logsumexp over the dim of 3 of (14, 151936, 3).transpose(2, 0) bfloat16, a
  // result's run of 14, 35.6 us in CUDA graphs against torch.compile's 10.7 (H200, seed 62639).
  // The kernel takes partial tiles; fewer remain to be measured (a trial, no rebuild).
  int64_t transpose_least_outer = kTransposeTile;
  // ... and from as many blocks as multiprocessors; where a lane takes one element of a row (V =
  // 1: 16 loads a thread, four rows' at once), from this many percent of them. In CUDA graphs,
  // H200, tile_kernel -> transpose tiles (torch.compile): nansum over dim -2 of (256, 16,
  // 512).transpose(2, 0) float32, 128 blocks, 11.55 -> 3.75 us (4.07); amin over dim 2 of (12,
  // 128, 1024).transpose(0, 2) float32 9.00 -> 3.13 (8.4). Not with vectors of 4 (a load a row):
  // amax over dim -1 of (80, 8, 17, 196).transpose(1, 3) uint8 6.26 -> 11.13 (4.02).
  int64_t transpose_least_blocks_percent = 20;
  int64_t transpose_vector_least_blocks_percent = 100;  // ... and for lanes of vectors (V > 1)
  // Transposed maps (one element a result) go to transpose_map_kernel from this many percent of
  // a block a multiprocessor (its tiles of 4096 elements; below, the transpose tiles' smaller
  // ones). First value, a block a multiprocessor: not yet measured below it.
  int64_t transpose_map_least_blocks_percent = 100;
  // ... for accumulators this wide or wider, which the transpose tiles hold in registers and
  // shared memory: H100, hot, us, transpose tiles -> transpose_map_kernel (torch.compile): all
  // over the size-1 dim of (1, 80, 11008, 64).permute(3, 2, 1, 0) bfloat16 (an int64 count) 279
  // -> 156 (68.4); int16 sum into int64 of (1, 31, 1024, 3072).permute(3, 2, 0, 1) 473 -> 382
  // (374); count_nonzero of (1, 512, 8192).permute(2, 0, 1) uint8 19.3 -> 14.1 (10.5); max with
  // positions of (1, 4096, 4096).permute(2, 0, 1) int64 147 -> 143 (136). Not narrower ones:
  // amin of (1, 64, 32064).permute(2, 0, 1) float32 9.5 -> 11.3 (3.5), bfloat16 sum of (32064,
  // 1, 128, 28).transpose(3, 2) 425 -> 476 (152); float32 amax of (3, 1, 2048,
  // 4096).transpose(2, 3) 110 -> 101 (70.7).
  int64_t transpose_map_least_acc_bytes = 8;
  // Narrow columns (inner * in_bytes up to this; 1: none) that are not dense, of more rows than
  // kTileReduced: a strided row a result (plan_reduce.h's layout), not the columns kernel.
  int64_t columns_as_rows_most_bytes = 32;
  // Four rows at once (V = 1) under this many percent of a block a multiprocessor; more blocks
  // take them over 4 rows or more but for positions, else the instance of a row at a time,
  // whose registers (32-48 against 75-101) fit 5 blocks a multiprocessor, not 2. H200, CUDA
  // graphs, us, four rows for every grid -> a row at a time for every grid of 132 blocks or
  // more: argmin over dim 0 of (5, 11008, 32).transpose(2, 1) int32 5.81 -> 3.29; nanmean over
  // dim -3 of (768, 3, 768, 16).transpose(0, 3) float32 96.6 -> 83.8; sum over dim -3 of (80,
  // 50257, 2).transpose(2, 0) int32 35.3 -> 26.0; but logsumexp over dim 0 of (1000, 4096,
  // 14).permute(2, 1, 0) float32 115 -> 332, sum over dim 2 of (49, 64, 8, 96).transpose(0, 3)
  // float32 4.10 -> 5.18.
  int64_t transpose_rows_at_once_most_percent = 100;
  // Transposed short rows of whole 16-byte words from this many bytes a row take tiles along
  // the result, a thread a row (plan_reduce.h's rows). 16 rather than 32 (rows of one word too;
  // H100, CUDA graphs, tuning trials): nanmean over rows of 8 of (4096, 256, 8).transpose(0, 1)
  // bfloat16 24.4 -> 10.1 us (transpose tiles -> tiles; torch.compile 9.3), the only case of
  // random shapes seeds 81173 and 74411 it changed.
  int64_t tile_words_least_bytes = 16;
  // Columns steps take their outer indexes first in the grid (dims.cuh's columns_kernel, the
  // step's flag) where those are under this many bytes apart in the input (1: never). With the
  // column blocks first, count_nonzero over dim 0 of a channels_last (40, 7, 3, 151936)
  // bfloat16 (outer the 7 channels, 1 element apart) read its 243 MB once an outer index:
  // 618 us, DRAM 87% busy, L2 hits 2% (ncu, H100; torch.compile 211).
  int64_t columns_outer_first_bytes = 32;
  // tile_kernel's lanes along the inner run, not the result's, where the result's run is shorter
  // than this, the inner run contiguous and the reduced one not (plan_reduce.h's tiles; 1: never).
  int64_t tiles_short_result_run = 32;
  // ... and where neighbouring outer indexes are this many bytes apart in the input or more (a
  // sector a lane along them). First value, a sector: amax over dim 0 of (7, 4, 256,
  // 224).transpose(3, 1) float16 read 2 bytes a sector, 7.1 us against torch.compile's 2.9 (H100).
  int64_t tiles_far_outer_bytes = 32;
  // Short columns of whole pieces narrower than this take short_columns_kernel (plan_reduce.h's
  // short_columns): any width. In CUDA graphs, H200, us, slabs or columns -> short columns
  // (torch.compile), the same library both ways: mean over dim -2 of (49152, 2, 16) float16 6.00
  // -> 4.04 (1.73), any over dim 1 of (5120, 80, 5, 16).transpose(1, 2) float32 51.0 -> 34.7
  // (33.2); up to 128 bytes wide, then also wider: mean over dim -1 of (1024, 2,
  // 32064).transpose(1, 2) float16 112.1 -> 83.7 (47.3; the columns kernel issue-bound, 72% of
  // issue slots and 27% of DRAM's peak, ncu), prod over dim 0 of (3, 80, 224, 1025) float16 39.7
  // -> 35.1 (35.2), var over dim 1 of (3, 1, 5120, 128).transpose(0, 1) float32 4.86 -> 3.73
  // (2.21); nothing slower (random shapes seeds 71011 and 40127, tuning trials). Pieces of 4
  // results a thread instead of 16-byte vectors, and instances by rows (2, 4, 8) (the same
  // library, short columns off -> on, us; torch.compile): count_nonzero over dim 1 of (96, 2, 56,
  // 1024) uint8 46.6 -> 23.3 (15.2), argmin over dim 2 of (80, 224, 2, 16) int16 2.94 -> 1.90
  // (1.49), amax over dim 1 of (256, 4, 1024) bfloat16 2.51 -> 1.21 (1.32), the float16 mean
  // above 5.93 -> 3.19, the wide one 112.3 -> 85.7 (still issue-bound: 79% of issue slots, ncu);
  // the 9 cases of seeds 83357, 71011 and 40127 all faster, 1.07-2.07x.
  int64_t short_columns_inner_bytes = int64_t(1) << 62;
  // Its threads take pieces until they have this many loads (2 rows: 4 pieces; 3-4 rows: 2),
  // fewer while that leaves under this many blocks a multiprocessor.
  int64_t short_columns_loads = 8;
  int64_t short_columns_blocks_per_sm = 2;
  // Short columns of more than kShortColumnsRows rows, up to this many, in rounds of 8 loads
  // (kShortColumnsRows: none), where they give at least this many threads a multiprocessor.
  int64_t short_columns_most_rows = 64;
  int64_t short_columns_long_threads_per_sm = 1024;
  // Dense rows of 3, 5, 6 or 7 elements, 16-byte aligned, take short_rows_kernel from this many
  // bytes of input: a thread's rows are a vector's worth, so few rows are few threads (nanmean
  // over rows of 5 of 14336 bfloat16 rows, 1792 threads: 4.62 us against tile_kernel's 3.88,
  // a thread a row; H200, CUDA graphs).
  int64_t short_rows_least_bytes = int64_t(1) << 20;
  // Rows of 2, 4 or 8 whole 16-byte vectors whose op whole_rows_kernel does not take (positions)
  // take short_rows_kernel up to this many elements (1: none).
  int64_t short_rows_vector_rows = 8;
  // Transposed columns of a few elements whose inner run continues in memory through outer runs
  // are read as that merged run (inner_merged) before the result's run is made inner
  // (columns_in_result_order) from an inner run of this many bytes (plan_reduce.h).
  int64_t merged_least_inner_bytes = 16;
  // tile_kernel's blocks shrink from 256 threads down to this many while its grid has fewer
  // blocks than multiprocessors (an output a thread first); 256: never.
  int64_t tile_least_threads = 64;
  // Columns whose outputs alone give the blocks wanted (many outer indexes) and whose threads
  // went down only because too few outputs a row filled the threads across: no fewer than this
  // many rows a thread down; the block shrinks instead (X across kept, Y halved, 32 threads at
  // least). prod over dim -2 of (5120, 64, 32) float32 had 8 x 32 threads, 2 rows each, so the
  // combine down Y was most of the work: 8 x 8, 8 rows each, 21.57 -> 9.83 us in CUDA graphs
  // (torch 10.23, torch.compile 17.17); max with positions over dim -2 of (4096, 64, 32) 24.96
  // -> 13.90 (torch 18.62; H200, random shapes seed 57203). 1: no bound.
  int64_t columns_least_rows = 8;
  // A reduced dim of size 1 (a copy, converted) past this many results takes the map kernel, not
  // the small kernel's teams: amax over the size-1 dim of (8192, 1, 64) float32, 2^19 results,
  // 3.20 -> 2.14 us (torch.compile 1.58); (128256, 1) was slower in the map, 1.39 -> 1.56, so
  // the bound lies between (H200, CUDA graphs, seed 57203).
  int64_t small_single_most = int64_t(1) << 18;
  // variant="exact" (kernels/exact.cuh): a block takes at least this many elements of a result
  // unless there is one a result (blocks of fewer add per-block costs that reading does not
  // hide: the window's first move, a flush, the block's state into its slot).
  int64_t exact_least_per_block = 8192;
  // softmax's family (kernels/normalize.cuh): rows of whole packs of at most this many bytes (of
  // x) are held in registers, over a cluster of up to 8 blocks of 64 KiB (32 KiB a backward), and
  // read once; longer rows are read twice. 1: never.
  int64_t normalize_on_chip_most_bytes = kNormalizeOnChipMostBytes;
};

// Measured on the H100 and H200 (sm_90); other architectures take the same until measured.
inline constexpr Tuning kTuningSm90{};

// The table's names, for trials of other values without a rebuild: TREDUCE_TUNING="name=value,
// ..." in the environment, read once per process (tuning_for). Plans stay deterministic: the
// same line gives the same plans.
struct TuningField {
  const char* name;
  int64_t Tuning::*field;
};
inline constexpr TuningField kTuningFields[] = {
    {"small_elements", &Tuning::small_elements},
    {"exact_least_per_block", &Tuning::exact_least_per_block},
    {"small_count", &Tuning::small_count},
    {"small_rows_elements", &Tuning::small_rows_elements},
    {"small_rows_outputs", &Tuning::small_rows_outputs},
    {"small_rows_count", &Tuning::small_rows_count},
    {"small_columns_rows", &Tuning::small_columns_rows},
    {"small_columns_outputs", &Tuning::small_columns_outputs},
    {"small_columns_outputs_narrow", &Tuning::small_columns_outputs_narrow},
    {"small_most", &Tuning::small_most},
    {"small_columns_elements", &Tuning::small_columns_elements},
    {"small_passes_outputs", &Tuning::small_passes_outputs},
    {"small_passes_count", &Tuning::small_passes_count},
    {"small_passes_rows", &Tuning::small_passes_rows},
    {"small_wide_loads_indexed", &Tuning::small_wide_loads_indexed},
    {"small_least_blocks_percent", &Tuning::small_least_blocks_percent},
    {"tiles_least_block_elements", &Tuning::tiles_least_block_elements},
    {"tiles_small_bytes", &Tuning::tiles_small_bytes},
    {"rows_team_loads", &Tuning::rows_team_loads},
    {"rows_ragged_loads", &Tuning::rows_ragged_loads},
    {"rows_ragged_per_sm", &Tuning::rows_ragged_per_sm},
    {"rows_block_loads", &Tuning::rows_block_loads},
    {"rows_segment_waves", &Tuning::rows_segment_waves},
    {"columns_blocks_per_sm", &Tuning::columns_blocks_per_sm},
    {"columns_one_pass_rows", &Tuning::columns_one_pass_rows},
    {"combine_rows_least_bytes", &Tuning::combine_rows_least_bytes},
    {"combine_rows_most", &Tuning::combine_rows_most},
    {"combine_rows_outputs", &Tuning::combine_rows_outputs},
    {"block_partials_outputs", &Tuning::block_partials_outputs},
    {"block_partials_least", &Tuning::block_partials_least},
    {"small_columns_most", &Tuning::small_columns_most},
    {"small_columns_per_thread", &Tuning::small_columns_per_thread},
    {"interleaved_bytes", &Tuning::interleaved_bytes},
    {"interleaved_row_bytes", &Tuning::interleaved_row_bytes},
    {"interleaved_rows", &Tuning::interleaved_rows},
    {"quarter_tiles_per_sm", &Tuning::quarter_tiles_per_sm},
    {"single_block_elements", &Tuning::single_block_elements},
    {"slabs_least_bytes", &Tuning::slabs_least_bytes},
    {"transpose_least_inner", &Tuning::transpose_least_inner},
    {"transpose_least_outer", &Tuning::transpose_least_outer},
    {"transpose_least_blocks_percent", &Tuning::transpose_least_blocks_percent},
    {"transpose_vector_least_blocks_percent", &Tuning::transpose_vector_least_blocks_percent},
    {"transpose_map_least_blocks_percent", &Tuning::transpose_map_least_blocks_percent},
    {"transpose_map_least_acc_bytes", &Tuning::transpose_map_least_acc_bytes},
    {"columns_as_rows_most_bytes", &Tuning::columns_as_rows_most_bytes},
    {"transpose_rows_at_once_most_percent", &Tuning::transpose_rows_at_once_most_percent},
    {"tile_words_least_bytes", &Tuning::tile_words_least_bytes},
    {"columns_outer_first_bytes", &Tuning::columns_outer_first_bytes},
    {"tiles_short_result_run", &Tuning::tiles_short_result_run},
    {"tiles_far_outer_bytes", &Tuning::tiles_far_outer_bytes},
    {"short_columns_inner_bytes", &Tuning::short_columns_inner_bytes},
    {"short_columns_loads", &Tuning::short_columns_loads},
    {"short_columns_blocks_per_sm", &Tuning::short_columns_blocks_per_sm},
    {"short_columns_most_rows", &Tuning::short_columns_most_rows},
    {"short_columns_long_threads_per_sm", &Tuning::short_columns_long_threads_per_sm},
    {"short_rows_least_bytes", &Tuning::short_rows_least_bytes},
    {"short_rows_vector_rows", &Tuning::short_rows_vector_rows},
    {"merged_least_inner_bytes", &Tuning::merged_least_inner_bytes},
    {"tile_least_threads", &Tuning::tile_least_threads},
    {"columns_least_rows", &Tuning::columns_least_rows},
    {"small_single_most", &Tuning::small_single_most},
    {"normalize_on_chip_most_bytes", &Tuning::normalize_on_chip_most_bytes},
};

// Applies "name=value,name=value" to `t`; false (and `t` as it was) on an unknown name, a value
// that is not a positive integer, or a malformed entry.
inline bool apply_tuning(const std::string& line, Tuning* t) {
  Tuning n = *t;
  size_t at = 0;
  while (at < line.size()) {
    const size_t end = std::min(line.find(',', at), line.size());
    const std::string entry = line.substr(at, end - at);
    at = end + 1;
    if (entry.empty()) continue;
    const size_t eq = entry.find('=');
    if (eq == std::string::npos || eq + 1 == entry.size()) return false;
    const std::string name = entry.substr(0, eq), value = entry.substr(eq + 1);
    if (value.find_first_not_of("0123456789") != std::string::npos || value.size() > 18) return false;
    const int64_t v = std::stoll(value);
    if (v <= 0) return false;
    const TuningField* f = std::find_if(std::begin(kTuningFields), std::end(kTuningFields),
                                        [&](const TuningField& k) { return name == k.name; });
    if (f == std::end(kTuningFields)) return false;
    n.*(f->field) = v;
  }
  *t = n;
  return true;
}

// The table of a device (its compute capability's major), with TREDUCE_TUNING applied; a line
// that does not parse is reported once on stderr and ignored.
inline const Tuning& tuning_for(int /*cc_major*/) {
  static const Tuning tuning = [] {
    Tuning t = kTuningSm90;
    const char* line = std::getenv("TREDUCE_TUNING");
    if (line != nullptr && !apply_tuning(line, &t))
      std::fprintf(stderr, "torch_reduce: TREDUCE_TUNING=\"%s\" ignored (name=value,... of tuning.h's Tuning)\n", line);
    return t;
  }();
  return tuning;
}

}  // namespace treduce::cuda
