// Calls treduce::sum through the dispatcher, as a LibTorch program would, on
// CPU tensors and, where a GPU is present, on CUDA tensors. Every variant,
// a few dtypes and sizes, against a plain loop over the same data; and the launch arithmetic
// of cuda/plan.h against its definition.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/Context.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../core/cuda/plan_reduce.h"
#include "../core/cpu/normalize.h"
#include "../core/normalize.h"
#include "treduce.h"

namespace {

int passed = 0, failed = 0;

void expect(bool ok, const std::string& what) {
  (ok ? passed : failed) += 1;
  if (!ok) std::printf("FAILED: %s\n", what.c_str());
}

std::vector<std::string> variant_names(const std::string& device) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("treduce::variants", "")
                             .typed<std::vector<std::string>(c10::string_view)>();
  std::vector<std::string> names;
  for (const std::string& row : op.call(device)) names.push_back(row.substr(0, row.find('\t')));
  return names;
}

// The exact sum of x (small integers in any dtype), by a loop on the host.
int64_t host_sum(const at::Tensor& x) {
  const at::Tensor values = x.to(at::kCPU).to(at::kLong).contiguous();
  const int64_t* p = values.const_data_ptr<int64_t>();
  int64_t total = 0;
  for (int64_t i = 0; i < values.numel(); ++i) total += p[i];
  return total;
}

void check_device(const at::Device device) {
  const std::string dev = device.is_cuda() ? "cuda" : "cpu";
  const std::vector<at::ScalarType> dtypes = {at::kByte, at::kInt, at::kFloat, at::kBFloat16};
  for (const std::string& variant : variant_names(dev)) {
    for (const int64_t n : {int64_t(0), int64_t(1), int64_t(257), int64_t(1000003)}) {
      for (const at::ScalarType dtype : dtypes) {
        const at::Tensor x = at::randint(-3, 4, {n}, at::TensorOptions(device).dtype(at::kLong))
                                 .abs()  // uint8 needs non-negative values
                                 .to(dtype);
        const at::Tensor out = treduce::sum(x, variant);
        const at::ScalarType want_dtype = at::isIntegralType(dtype, true) ? at::kLong : dtype;
        const std::string what = dev + " " + variant + " " + c10::toString(dtype) + " n=" + std::to_string(n);
        expect(out.scalar_type() == want_dtype && out.device() == device && out.dim() == 0,
               what + ": result dtype, device or shape");
        // Exact in the accumulator; the result dtype then rounds it once (bfloat16 here).
        const double want = at::scalar_tensor(double(host_sum(x)), at::kDouble).to(want_dtype).item<double>();
        expect(out.to(at::kCPU).to(at::kDouble).item<double>() == want, what + ": value");
      }
    }
  }
  bool threw = false;
  try {
    treduce::sum(at::ones({4}, at::TensorOptions(device)), "no_such_variant");
  } catch (const c10::Error& e) {
    threw = std::string(e.what()).find("unknown variant 'no_such_variant'") != std::string::npos;
  }
  expect(threw, dev + ": an unknown variant is refused by name");
  const at::Tensor as_double =
      treduce::sum(at::ones({10}, at::TensorOptions(device).dtype(at::kInt)), "auto", std::nullopt, false, at::kDouble);
  expect(as_double.scalar_type() == at::kDouble && as_double.item<double>() == 10.0, dev + ": dtype=");

  // Dims: rows of 0, 1, ..., 4 (as float) over a (5, 3) tensor.
  const at::Tensor rows = at::arange(5, at::TensorOptions(device).dtype(at::kFloat)).unsqueeze(1).expand({5, 3});
  const at::Tensor by_row = treduce::sum(rows, "auto", std::vector<int64_t>{1}).cpu();
  expect(by_row.sizes() == at::IntArrayRef{5} && by_row[4].item<float>() == 12.f, dev + ": sum over dim 1");
  const at::Tensor col_mean = treduce::mean(rows, std::vector<int64_t>{0}, true).cpu();
  expect(col_mean.sizes() == at::IntArrayRef({1, 3}) && col_mean[0][2].item<float>() == 2.f, dev + ": mean over dim 0");
  expect(treduce::amax(rows).item<float>() == 4.f && treduce::amin(rows).item<float>() == 0.f, dev + ": amax, amin");
  // Statistics: each column is 0, 1, ..., 4 (variance 2.5 with correction 1, 2 with 0).
  const auto [col_var, col_mean2] = treduce::var_mean(rows, std::vector<int64_t>{0});
  expect(col_var.cpu()[1].item<float>() == 2.5f && col_mean2.cpu()[1].item<float>() == 2.f, dev + ": var_mean");
  expect(treduce::std(rows, std::vector<int64_t>{0}, at::Scalar(0), true).sizes() == at::IntArrayRef({1, 3}) &&
             std::abs(treduce::std(rows, std::vector<int64_t>{0}, at::Scalar(0)).cpu()[0].item<float>() - std::sqrt(2.f)) < 1e-6f,
         dev + ": std, correction 0");
  // Rows 1..5 of (5, 3): products over dim 0 are 5! = 120; norms of a column of 0..4: sqrt(30), 10, 4.
  const at::Tensor ones_up = rows + 1;
  expect(treduce::prod(ones_up, 0).cpu()[2].item<float>() == 120.f && treduce::prod(ones_up).item<float>() == 1728000.f,
         dev + ": prod");
  expect(std::abs(treduce::vector_norm(rows, 2, std::vector<int64_t>{0}).cpu()[0].item<float>() - std::sqrt(30.f)) < 1e-5f &&
             treduce::vector_norm(rows, 1, std::vector<int64_t>{0}).cpu()[1].item<float>() == 10.f &&
             treduce::vector_norm(rows, INFINITY).item<float>() == 4.f,
         dev + ": vector_norm");
  // The extrema with positions, truth values and counts: rows holds 0..4 down each column.
  const auto [col_max, col_argmax] = treduce::max(rows, 0);
  expect(col_max.cpu()[1].item<float>() == 4.f && col_argmax.cpu()[1].item<int64_t>() == 4 &&
             treduce::argmin(rows).item<int64_t>() == 0 && treduce::argmax(rows).item<int64_t>() == 12,
         dev + ": max over a dim, argmin, argmax");
  const auto [lo, hi] = treduce::aminmax(rows);
  expect(lo.item<float>() == 0.f && hi.item<float>() == 4.f && treduce::count_nonzero(rows).item<int64_t>() == 12 &&
             treduce::any(rows).item<bool>() && !treduce::all(rows).item<bool>() &&
             treduce::all(ones_up, std::vector<int64_t>{1}).cpu().all().item<bool>(),
         dev + ": aminmax, count_nonzero, any, all");
}

// segments_per_row against its definition, every count tried: the fewest segments whose fill
// of the device's waves is within 0.05 of the best fill of any count up to `most`.
void check_segments_per_row() {
  const auto fill = [](int64_t outer, int64_t s, int64_t wave) {
    return double(outer * s) / double((outer * s + wave - 1) / wave * wave);
  };
  int wrong = 0;
  for (const int64_t wave : {1, 7, 132, 528, 2112})
    for (int64_t outer = 1; outer <= 3000; outer += outer < 600 ? 1 : 37)
      for (const int64_t most : {1, 2, 3, 5, 16, 100, 2112}) {
        double best = 0;
        for (int64_t s = 1; s <= most; ++s) best = std::max(best, fill(outer, s, wave));
        int64_t want = 1;
        while (fill(outer, want, wave) < best - 0.05) ++want;
        const int64_t got = treduce::cuda::segments_per_row(outer, most, wave);
        if (got != want && ++wrong <= 5)
          std::printf("segments_per_row(%lld, %lld, %lld) = %lld, want %lld\n", (long long)outer,
                      (long long)most, (long long)wave, (long long)got, (long long)want);
      }
  expect(wrong == 0, "segments_per_row matches its definition");
  // (128, 65536): 4 segments, 512 blocks of a 528-block wave, not 5 (640: 1.2 waves).
  expect(treduce::cuda::segments_per_row(128, 17, 528) == 4, "segments_per_row(128 rows)");
}


// The planner (cuda/plan_reduce.h) on layouts whose plans follow from its rules by hand, for an
// H100-sized device (132 multiprocessors, sm_90) and float32 sums: what a layout gets is a value
// a test can read, on any machine.
treduce::cuda::PlanInput plan_input(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                                    const std::vector<int>& reduced_dims) {
  using treduce::DimInfo;
  const int64_t n = int64_t(sizes.size());
  std::vector<bool> reduced(sizes.size(), false);
  for (const int d : reduced_dims) reduced[d] = true;
  std::vector<DimInfo> dims(sizes.size());
  int64_t out_stride = 1;  // the result is contiguous over the kept dims
  for (int64_t i = n - 1; i >= 0; --i) {
    dims[i] = {sizes[i], strides[i], reduced[i] ? 0 : out_stride, bool(reduced[i])};
    if (!reduced[i]) out_stride *= sizes[i];
  }
  treduce::cuda::PlanInput in;
  const bool folded = treduce::fold_layout(dims.data(), n, &in.layout, true, &in.indexed);
  expect(folded, "the test's layout folds");
  in.address = 1 << 20;  // aligned
  return in;
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t s = 1;
  for (int64_t i = int64_t(sizes.size()) - 1; i >= 0; --i) strides[i] = s, s *= sizes[i];
  return strides;
}

void check_plans() {
  using namespace treduce::cuda;
  const Device h100{132, 9};
  OpTraits f32_sum;  // float32 in and accumulator, a plain sum: whole rows' and quarter blocks' kernels
  f32_sum.whole_rows = true, f32_sum.quarter = true;
  const auto kernels = [](const Plan& p) {
    std::string names;
    for (int k = 0; k < p.steps; ++k) names += std::string(k ? " + " : "") + kernel_name(p.step[k].kernel);
    return names;
  };
  const auto plan_of = [&](const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                           const std::vector<int>& reduced, bool ticket = false) {
    PlanInput in = plan_input(sizes, strides, reduced);
    in.ticket = ticket;
    return plan_reduce(h100, f32_sum, in);
  };
  // Whole tensors of up to 32 vectors (and a head and tail): one warp; past them, a block.
  Plan p = plan_of({129}, {1}, {0});
  expect(kernels(p) == "small_warp_kernel" && p.step[0].block[0] == 32 && p.step[0].split.vectors == 32 &&
             p.step[0].split.tail == 1,
         "plan: a full sum of 129 float32 is one warp: " + plan_json(p));
  p = plan_of({132}, {1}, {0});
  expect(kernels(p) == "small_sum_kernel" && p.step[0].block[0] == kVecBlock, "plan: ... of 132, a block: " + plan_json(p));
  // A few elements: the small kernel, one launch, no workspace.
  p = plan_of({4, 3}, {3, 1}, {1});
  expect(kernels(p) == "small_kernel" && p.workspace == 0 && p.step[0].loads == 4,
         "plan: (4, 3) over dim 1 is one small_kernel, its instance for groups of 4");
  // Rows that whole_rows_kernel takes are its own past Tuning::small_rows_elements (2^14), not
  // the small kernel's: (1024, 64) over dim 1; (256, 64) stays small, and so does (1024, 64)
  // under a bound of 2^16.
  p = plan_of({1024, 64}, {64, 1}, {1});
  expect(kernels(p) == "whole_rows_kernel", "plan: 1024 rows of 64 are whole rows: " + plan_json(p));
  p = plan_of({256, 64}, {64, 1}, {1});
  expect(kernels(p) == "small_kernel", "plan: 256 rows of 64 are the small kernel's: " + plan_json(p));
  Tuning small_rows;
  small_rows.small_rows_elements = int64_t(1) << 16;
  p = plan_reduce(h100, f32_sum, plan_input({1024, 64}, {64, 1}, {1}), small_rows);
  expect(kernels(p) == "small_kernel", "plan: ... and 1024 under a bound of 2^16: " + plan_json(p));
  // Teams grown while the grid is short (Tuning::small_least_blocks_percent; off in the table):
  // 256 rows of 4096 bfloat16, 64 lanes of 8 vectors (64 blocks); at 100 percent, 256 lanes of 2
  // (256 blocks), never fewer than one load a lane.
  OpTraits bf16_rows;
  bf16_rows.in_bytes = 2, bf16_rows.acc_bytes = 4;
  p = plan_reduce(h100, bf16_rows, plan_input({4096, 256}, {1, 4096}, {0}));
  expect(kernels(p) == "small_kernel" && p.step[0].team == 6 && p.step[0].grid[0] == 64 && p.step[0].loads == 8,
         "plan: 256 rows of 4096 bfloat16, teams of 64: " + plan_json(p));
  Tuning grown;
  grown.small_least_blocks_percent = 100;
  p = plan_reduce(h100, bf16_rows, plan_input({4096, 256}, {1, 4096}, {0}), grown);
  expect(kernels(p) == "small_kernel" && p.step[0].team == 8 && p.step[0].grid[0] == 256 && p.step[0].loads == 2,
         "plan: ... of 256 where the grid is short: " + plan_json(p));
  p = plan_reduce(h100, bf16_rows, plan_input({3, 8}, {8, 1}, {1}), grown);
  expect(kernels(p) == "small_kernel" && p.step[0].team == 0, "plan: ... one vector a row, one lane: " + plan_json(p));
  // One block for a full reduction up to Tuning::single_block_elements (2^16): 2^16 int8 are
  // small_sum_kernel's, 2^17 (8192 vectors, the bound in vectors) a grid and its combine.
  OpTraits i8_max;
  i8_max.in_bytes = 1, i8_max.acc_bytes = 1;
  p = plan_reduce(h100, i8_max, plan_input({int64_t(1) << 16}, {1}, {0}));
  expect(kernels(p) == "small_sum_kernel", "plan: 2^16 int8 are one block: " + plan_json(p));
  p = plan_reduce(h100, i8_max, plan_input({int64_t(1) << 17}, {1}, {0}));
  expect(kernels(p) == "vector_partials_kernel + combine_partials_kernel" && p.step[0].grid[0] == 4,
         "plan: 2^17 int8 are four blocks and a combine: " + plan_json(p));
  // A reduced dim of one element is a map: amax over the size-1 dim of (1, 256, 32008)[..., :32000]
  // bfloat16 reads words of 8 elements (every row starts on 16 bytes); rows 32001 apart do not.
  OpTraits bf16_max;
  bf16_max.in_bytes = 2, bf16_max.acc_bytes = 4;
  p = plan_reduce(h100, bf16_max, plan_input({1, 256, 32000}, {256 * 32008, 32008, 1}, {0}));
  expect(kernels(p) == "map_kernel" && p.step[0].flag && p.step[0].grid[0] == 16 && p.step[0].grid[1] == 256,
         "plan: a size-1 dim over aligned rows is a map of words: " + plan_json(p));
  p = plan_reduce(h100, bf16_max, plan_input({1, 256, 32000}, {256 * 32001, 32001, 1}, {0}));
  expect(kernels(p) == "map_kernel" && !p.step[0].flag, "plan: ... of elements where rows are not: " + plan_json(p));
  // max with positions over the same aligned rows keeps the element loop (map_kernel: words of
  // positions took 100-108 registers against 56; 3x slower for (1, 8192, 4096) float32).
  OpTraits bf16_max_at = bf16_max;
  bf16_max_at.indexed = true;
  p = plan_reduce(h100, bf16_max_at, plan_input({1, 256, 32000}, {256 * 32008, 32008, 1}, {0}));
  expect(kernels(p) == "map_kernel" && !p.step[0].flag, "plan: positions over aligned rows are elements: " + plan_json(p));
  // Narrow columns of many results: the small kernel's one pass (small_beats_passes), but not
  // for Welford's and logsumexp's groups (logsumexp over dim 2 of (1024, 128, 17,
  // 14) laid out as permute(2, 1, 0, 3) of a contiguous tensor, bfloat16).
  OpTraits lse, f16_max;
  lse.in_bytes = 2, lse.acc_bytes = 8, lse.group_rows = true;
  f16_max.in_bytes = 2, f16_max.acc_bytes = 2;
  const PlanInput narrow = plan_input({1024, 128, 17, 14}, {14, 14336, 1835008, 1}, {2});
  p = plan_reduce(h100, f16_max, narrow);
  expect(kernels(p) == "small_kernel", "plan: narrow columns of 2^17 results are one small pass: " + plan_json(p));
  p = plan_reduce(h100, lse, narrow);
  expect(kernels(p) == "columns_kernel", "plan: ... not for logsumexp's groups: " + plan_json(p));
  // Columns of 96 to 128 results of 2-byte sums and norms leave the small kernel from 65 results
  // (Tuning::small_columns_outputs_narrow); 4-byte ones and 2-byte positions keep it to 128.
  OpTraits bf16_sum;
  bf16_sum.in_bytes = 2, bf16_sum.acc_bytes = 4;
  p = plan_reduce(h100, bf16_sum, plan_input({1024, 128}, {128, 1}, {0}));
  expect(kernels(p) != "small_kernel", "plan: 128 columns of 1024 bfloat16 leave the small kernel: " + plan_json(p));
  p = plan_reduce(h100, bf16_sum, plan_input({1024, 64}, {64, 1}, {0}));
  expect(kernels(p) == "small_kernel", "plan: ... 64 keep it: " + plan_json(p));
  p = plan_of({1024, 128}, {128, 1}, {0});
  expect(kernels(p) == "small_kernel", "plan: ... and 128 of float32: " + plan_json(p));
  p = plan_reduce(h100, bf16_max_at, plan_input({1024, 128}, {128, 1}, {0}));
  expect(kernels(p) == "small_kernel", "plan: ... and positions over 128 of bfloat16: " + plan_json(p));
  // ... up to Tuning::small_columns_elements (2^19): under 2^16, (1024, 128) float32 leaves it,
  // (512, 128) (2^16 elements, small_elements' own bound) stays.
  Tuning columns_bound;
  columns_bound.small_columns_elements = int64_t(1) << 16;
  p = plan_reduce(h100, f32_sum, plan_input({1024, 128}, {128, 1}, {0}), columns_bound);
  expect(kernels(p) != "small_kernel", "plan: 128 columns of 1024 float32 past a bound of 2^16: " + plan_json(p));
  p = plan_reduce(h100, f32_sum, plan_input({512, 128}, {128, 1}, {0}), columns_bound);
  expect(kernels(p) == "small_kernel", "plan: ... and of 512 under it: " + plan_json(p));
  // Rows of 4096 float32, 4096 of them: a block a row, two 16-byte vectors a thread.
  p = plan_of({4096, 4096}, {4096, 1}, {1});
  expect(kernels(p) == "two_vector_rows_kernel" && p.step[0].grid[0] == 4096 && p.step[0].block[0] == 512 &&
             !p.step[0].dependent,
         "plan: (4096, 4096) over dim 1 is a block a row: " + kernels(p));
  // 2^24 contiguous float32: 2^22 vectors, 2048 tiles, as many blocks as fit at once (4 of 512
  // threads a multiprocessor), then their combine; eager calls with a ticket finish in the grid.
  p = plan_of({int64_t(1) << 24}, {1}, {0});
  expect(kernels(p) == "vector_partials_kernel + combine_partials_kernel" && p.step[0].grid[0] == 528 &&
             p.step[1].count == 528 && p.workspace == 528 * 4 && p.step[0].to == -1 && p.step[0].from == 0,
         "plan: a full sum of 2^24 is 528 blocks and a combine: " + kernels(p));
  p = plan_of({int64_t(1) << 24}, {1}, {0}, true);
  expect(kernels(p) == "vector_partials_kernel" && p.step[0].flag, "plan: with a ticket, one kernel");
  // Batch-norm statistics, (0, 2, 3) of NCHW (64, 256, 56, 56): rows of 3136 for each (n, c),
  // teams of 32 lanes (784 loads a row, 8 a lane), their partials at [n][c] in the workspace,
  // then 64 partials a channel combined.
  p = plan_of({64, 256, 56, 56}, contiguous_strides({64, 256, 56, 56}), {0, 2, 3});
  expect(kernels(p) == "rows_kernel + column_partials_kernel" && p.step[0].team == 32 && p.step[0].to == 0 &&
             p.step[1].from == 0 && p.step[1].count == 64 && p.step[1].to == -1 && p.workspace == 64 * 256 * 4,
         "plan: NCHW statistics are rows, then the combine: " + kernels(p));
  // Sum over the dim of 2 of (8, 2, 1024, 2048).permute(0, 3, 2, 1): results transposed against
  // the input, 2048 contiguous inputs along inner: tiles of 32 x 32 through shared memory.
  p = plan_of({8, 2048, 1024, 2}, {4096 * 1024, 1, 2048, 2048 * 1024}, {3});
  expect(kernels(p) == "transpose_tile_kernel" && p.step[0].grid[0] == 64 * 256 && p.step[0].inner_tiles == 64,
         "plan: a transposed short reduction is transpose tiles: " + kernels(p));
  // ... but under a block a multiprocessor, tile_kernel (each output's loads at once): amax over
  // dim 0 of (8, 197, 1) expanded to 64 on dim 2, bool, 4 transpose tiles.
  OpTraits bool_amax;
  bool_amax.in_bytes = 1, bool_amax.acc_bytes = 1;
  p = plan_reduce(h100, bool_amax, plan_input({8, 197, 64}, {197, 1, 0}, {0}));
  // Its 1600 outputs fill 25 blocks of 256 threads of two outputs each: an output a thread
  // (the instance for 16 elements) in blocks of 64, 200 of them.
  expect(kernels(p) == "tile_kernel" && p.step[0].a_is_outer && p.step[0].loads == 16 && p.step[0].block[0] == 64 &&
             p.step[0].grid[0] * p.step[0].grid[1] == 200,
         "plan: a transposed reduction of 4 tiles is tile_kernel, in small blocks: " + plan_json(p));
  // Transposed tiles of single elements (V = 1: four rows' loads at once) from 20% of a block
  // a multiprocessor (Tuning::transpose_least_blocks_percent): nansum-like float32 sum over dim
  // 1 of (256, 16, 512).transpose(2, 0), 128 tiles; not under a bound of 100%, nor with vectors
  // of 1-byte inputs (V = 4: the same layout of bool, 32 tiles).
  const PlanInput few_tiles = plan_input({512, 16, 256}, {1, 512, 8192}, {1});
  p = plan_reduce(h100, f32_sum, few_tiles);
  expect(kernels(p) == "transpose_tile_kernel" && p.step[0].grid[0] == 128 && p.step[0].V == 1,
         "plan: 128 transposed tiles of single elements: " + plan_json(p));
  Tuning whole_multiprocessors;
  whole_multiprocessors.transpose_least_blocks_percent = 100;
  p = plan_reduce(h100, f32_sum, few_tiles, whole_multiprocessors);
  expect(kernels(p) == "tile_kernel", "plan: ... not under a block a multiprocessor: " + kernels(p));
  p = plan_reduce(h100, bool_amax, few_tiles);
  expect(kernels(p) == "tile_kernel", "plan: ... nor with vectors of 4: " + kernels(p));
  Tuning whole_blocks;
  whole_blocks.tile_least_threads = 256;
  p = plan_reduce(h100, bool_amax, plan_input({8, 197, 64}, {197, 1, 0}, {0}), whole_blocks);
  expect(kernels(p) == "tile_kernel" && p.step[0].loads == 16 && p.step[0].block[0] == 256 &&
             p.step[0].grid[0] * p.step[0].grid[1] == 50,
         "plan: ... blocks of 256 under Tuning::tile_least_threads 256: " + plan_json(p));
  // Columns of single elements (rows of 1025 float32, not whole vectors): four times the blocks
  // of vectors' columns, 33 x 32 (amax over dim 1 of (50257, 1025).transpose(0, 1)).
  p = plan_of({50257, 1025}, {1025, 1}, {0});
  expect(kernels(p) == "columns_kernel + column_partials_kernel" && p.step[0].V == 1 && p.step[0].grid[0] == 33 &&
             p.step[0].grid[1] == 32 && p.step[1].count == 32,
         "plan: columns of single elements fill the device: " + kernels(p));
  // Columns (4096, 4096) over dim 0: 32 blocks of 32 x 8 threads across the 4096 outputs, 4
  // each, the rows split 9 ways to fill 264 blocks' worth, then the splits combined.
  p = plan_of({4096, 4096}, {4096, 1}, {0});
  expect(kernels(p) == "columns_kernel + column_partials_kernel" && p.step[0].grid[0] == 32 &&
             p.step[0].grid[1] == 9 && p.step[0].block[0] == 32 && p.step[0].block[1] == 8 && p.step[0].V == 4 &&
             p.step[0].per == 456 && p.step[1].count == 9 && p.workspace == 9 * 4096 * 4,
         "plan: (4096, 4096) over dim 0 is split columns and their combine: " + kernels(p));
  // Short reductions of a strided reduced dim whose result's run (12) is short and whose inner run
  // is contiguous: tile_kernel's lanes along the inner run (whole sectors), not along the result
  // (Tuning::tiles_short_result_run). max over dim 0 of (7, 12, 151936).transpose(2, 1) bfloat16.
  p = plan_reduce(h100, bf16_max, plan_input({7, 151936, 12}, {12 * 151936, 1, 151936}, {0}));
  expect(kernels(p) == "tile_kernel" && !p.step[0].a_is_outer && p.step[0].a_bits == 5,
         "plan: short result runs, lanes along the contiguous inner run: " + plan_json(p));
  Tuning along_result;
  along_result.tiles_short_result_run = 1, along_result.tiles_far_outer_bytes = int64_t(1) << 40;
  p = plan_reduce(h100, bf16_max, plan_input({7, 151936, 12}, {12 * 151936, 1, 151936}, {0}), along_result);
  expect(kernels(p) == "tile_kernel" && p.step[0].a_is_outer, "plan: ... along the result without: " + plan_json(p));
  // ... and where neighbouring outer indexes are a sector apart or more in the input
  // (Tuning::tiles_far_outer_bytes), however long the result's run: amax over dim 0 of (7, 4,
  // 256, 224).transpose(3, 1) float16, the result's run 1024 long, its indexes 57344 elements
  // apart.
  const PlanInput far_outer = plan_input({7, 224, 256, 4}, {229376, 1, 224, 57344}, {0});
  p = plan_reduce(h100, bf16_max, far_outer);
  expect(kernels(p) == "tile_kernel" && !p.step[0].a_is_outer && p.step[0].a_bits == 5,
         "plan: outer indexes far apart, lanes along the contiguous inner run: " + plan_json(p));
  p = plan_reduce(h100, bf16_max, far_outer, along_result);
  expect(kernels(p) == "tile_kernel" && p.step[0].a_is_outer, "plan: ... along the result without: " + plan_json(p));
  OpTraits i8_min;
  // argmax over every dim of a transposed (3, 96, 16) int8: the runs in logical order (there
  // positions count), which the small kernel alone reads; runs that step as one merge: (4, 3,
  // 4)[::2] is (2, 24) then (12, 1).
  i8_min.in_bytes = 1, i8_min.acc_bytes = 16, i8_min.indexed = true;
  const int64_t t_sizes[] = {96, 3, 16}, t_strides[] = {16, 1536, 1};
  PlanInput logical = plan_input({96, 3, 16}, {16, 1536, 1}, {0, 1, 2});
  expect(treduce::logical_runs(t_sizes, t_strides, 3, &logical.indexed) && logical.indexed.reduced.runs == 3 &&
             logical.indexed.reduced.in[0] == 16 && logical.indexed.in_logical_order,
         "logical_runs: a transposed (3, 96, 16) is three runs in its logical order");
  p = plan_reduce(h100, i8_min, logical);
  expect(kernels(p) == "small_kernel" && p.step[0].small.reduced_runs == 3 && p.step[0].small.count == 4608 &&
             p.step[0].grid[0] == 1,
         "plan: runs in logical order are the small kernel's: " + plan_json(p));
  const int64_t s_sizes[] = {2, 3, 4}, s_strides[] = {24, 4, 1};
  treduce::IndexedLayout merged;
  expect(treduce::logical_runs(s_sizes, s_strides, 3, &merged) && merged.reduced.runs == 2 &&
             merged.reduced.size[1] == 12 && merged.reduced.in[0] == 24 && merged.count == 24,
         "logical_runs: (4, 3, 4)[::2] is two runs");
  const int64_t far[] = {int64_t(1) << 31, 1};
  expect(!treduce::logical_runs(s_sizes + 1, far, 2, &merged), "logical_runs: offsets past 2^31 are not taken");
  logical.indexed.usable = false;
  expect(plan_reduce(h100, i8_min, logical).invalid, "plan: logical runs the small kernel cannot index are invalid");
  // argmax over a dim of one element: every position 0, zero_positions_kernel (two a thread).
  PlanInput one = plan_input({1, 80}, {80, 1}, {0});
  one.positions_only = true;
  p = plan_reduce(h100, i8_min, one);
  expect(kernels(p) == "zero_positions_kernel" && p.step[0].grid[0] == 1 && p.step[0].block[0] == kFillBlock &&
             p.step[0].bytes == 80 * 8 && p.step[0].dependent,
         "plan: positions over one element are zeros: " + plan_json(p));
  // Rows of 3 packed along a kept run whose results are apart, the result's run elsewhere:
  // mean over the dim of 3 of (3072, 4096, 3).transpose(2, 0) float16 is transposed rows, the
  // packed run (4096, in stride 3) as inner: transpose tiles of 32 x 128, element loads.
  OpTraits f16_mean;
  f16_mean.in_bytes = 2, f16_mean.acc_bytes = 4;
  p = plan_reduce(h100, f16_mean, plan_input({3, 4096, 3072}, {1, 3, 12288}, {0}));
  expect(kernels(p) == "transpose_tile_kernel" && p.step[0].layout.inner == 4096 && p.step[0].layout.in_inner == 3 &&
             p.step[0].layout.out_inner == 3072 && p.step[0].layout.outer == 3072 && p.step[0].inner_tiles == 32 &&
             !p.step[0].flag,
         "plan: transposed rows packed along a run are transpose tiles along it: " + plan_json(p));
  // Columns of 16 float16 whose inner run continues in memory through the outer run of 2048
  // (in stride 16) that holds the result's contiguous run: mean over dim 3 of (40, 80, 2048,
  // 16).transpose(1, 3) reads one inner run of 32768 in memory order, 8 outputs a thread, and
  // output i goes to (i % 16) * 2048 + i / 16 of its outer index.
  p = plan_reduce(h100, f16_mean, plan_input({40, 16, 2048, 80}, {2621440, 1, 16, 32768}, {3}));
  const treduce::Layout3& m = p.step[0].layout;
  expect(kernels(p) == "columns_kernel" && m.inner == 32768 && m.in_inner == 1 && m.outer == 40 &&
             m.out_outer == 32768 && m.inner_runs.runs == 2 && m.inner_out(1) == 2048 && m.inner_out(16) == 1 &&
             m.inner_out(16 * 5 + 3) == 3 * 2048 + 5 && p.step[0].V == 8,
         "plan: narrow columns continued by an outer run read one merged inner run: " + plan_json(p));
  // Columns of 14 float16 (28 bytes) continued by the result-contiguous run of 1025 (in stride
  // 14): amax over dim 0 of (128, 64, 1025, 14).transpose(3, 2) reads the merged run of 14350
  // (Tuning::merged_least_inner_bytes, 16), not the run of 1025 as inner, 14 elements apart.
  const PlanInput wide_merge = plan_input({128, 64, 14, 1025}, {917504, 14336, 1, 14}, {0});
  p = plan_reduce(h100, f16_mean, wide_merge);
  expect(kernels(p).rfind("columns_kernel", 0) == 0 && p.step[0].layout.inner_runs.runs == 2 &&
             p.step[0].layout.outer == 64 && p.step[0].V == 8,
         "plan: columns of 28 bytes read their merged run: " + plan_json(p));
  Tuning merge_late;
  merge_late.merged_least_inner_bytes = 64;
  p = plan_reduce(h100, f16_mean, wide_merge, merge_late);
  expect(kernels(p) == "columns_kernel" && p.step[0].layout.inner == 1025 && p.step[0].layout.in_inner == 14,
         "plan: ... the result's run as inner under a bound past them: " + plan_json(p));
  // ... also with the merged runs' out strides against their memory order, the partials of
  // splits combined through them: mean over dim -2 of (256, 4096, 16, 2).permute(2, 0, 1, 3)
  // float32, inner runs (16, out 512) and (2, out 1).
  p = plan_reduce(h100, f32_sum, plan_input({16, 256, 4096, 2}, {2, 131072, 32, 1}, {2}));
  expect(kernels(p) == "columns_kernel + column_partials_kernel" && p.step[0].layout.inner == 32 &&
             p.step[1].layout.inner_runs.runs == 2 && p.step[1].layout.inner_out(3) == 512 + 1 &&
             p.step[1].layout.outer == 256 && p.step[1].layout.out_outer == 2,
         "plan: ... and their splits' combine stores through them: " + plan_json(p));
  // Not where the inner run is a line or more: (1024 float32 of a run, results in another order).
  p = plan_reduce(h100, f32_sum, plan_input({4, 8, 1024, 64}, {1024, 4096 * 8 * 64, 1, 4096 * 8}, {3}));
  expect(p.step[0].layout.inner_runs.runs <= 1, "plan: ... not for inner runs of a line or more: " + plan_json(p));
  // Short columns whose threads down would hold a row each at most: tile_kernel, not
  // columns_kernel's combine down Y. min over dim 0 of (7, 132096) int8 (its values and positions,
  // 16-byte accumulators): 8-byte vectors of 8 outputs, Y = 8 for 7 rows; the instance for 8
  // elements, two outputs a thread: 512 a block.
  // (Short columns of whole pieces left out: they take these first, below.)
  PlanInput short_columns = plan_input({7, 132096}, {132096, 1}, {0});
  Tuning no_short_columns;
  no_short_columns.short_columns_inner_bytes = 1;
  p = plan_reduce(h100, i8_min, short_columns, no_short_columns);
  expect(kernels(p) == "tile_kernel" && p.step[0].grid[0] == 258 && p.step[0].a_bits == 8 && p.step[0].loads == 8,
         "plan: (7, 132096) int8 min over dim 0 is tiles: " + kernels(p));
  // amax over rows of 3 bool (a thread a row, A along the rows, where short_rows_kernel is not
  // taken: Tuning::short_rows_least_bytes): the instance unrolled for 4 elements, not 16.
  OpTraits bool_max;
  bool_max.in_bytes = 1, bool_max.acc_bytes = 1;
  Tuning no_short_rows;
  no_short_rows.short_rows_least_bytes = int64_t(1) << 40;
  p = plan_reduce(h100, bool_max, plan_input({262144, 3}, {3, 1}, {1}), no_short_rows);
  expect(kernels(p) == "tile_kernel" && p.step[0].a_is_outer && p.step[0].loads == 4,
         "plan: rows of 3 are tiles of the 4-element instance: " + kernels(p));
  // ... and not where each thread keeps several rows: 12 rows past L2 (50 MB), float32 sums
  // (short columns in rounds); in L2 (6 MB) a columns block's 3072 elements (Y = 4) are tiles
  // (Tuning::tiles_least_block_elements).
  p = plan_of({12, 1048576}, {1048576, 1}, {0});
  expect(kernels(p) == "short_columns_kernel", "plan: (12, 2^20) over dim 0 is short columns: " + kernels(p));
  p = plan_of({12, 128256}, {128256, 1}, {0});
  expect(kernels(p) == "tile_kernel", "plan: (12, 128256) over dim 0 is tiles: " + kernels(p));
  // Transposed short reductions over inner runs of 16 (sum over the dim of 3 of (64, 3, 768,
  // 16).transpose(2, 3)): transpose tiles of 16 lanes along inner, 64 outer indexes tall (49152
  // in 768 tiles); tile_kernel below Tuning::transpose_least_inner.
  const PlanInput half_tile = plan_input({64, 3, 16, 768}, {36864, 12288, 1, 16}, {1});
  p = plan_reduce(h100, f32_sum, half_tile);
  expect(kernels(p) == "transpose_tile_kernel" && p.step[0].grid[0] == 768 && p.step[0].inner_tiles == 1 &&
             p.step[0].team == 4 && p.step[0].U == 1,
         "plan: a transposed reduction of inner runs of 16 is transpose tiles 16 lanes wide: " + plan_json(p));
  // Under a block a multiprocessor, elements one at a time (float32) load four reduced rows at
  // once (sum over dim -2 of (256, 16, 512).transpose(2, 0): 128 blocks); 768 blocks above, one
  // (Tuning::transpose_rows_at_once_most_percent).
  p = plan_reduce(h100, f32_sum, plan_input({512, 16, 256}, {1, 512, 8192}, {1}));
  expect(kernels(p) == "transpose_tile_kernel" && p.step[0].grid[0] == 128 && p.step[0].U == 4,
         "plan: a short grid of transpose tiles loads four rows at once: " + plan_json(p));
  // ... and so do larger grids over 4 rows or more, but for positions (their instance's
  // registers): the dim of 8 of (64, 8, 768, 16).transpose(2, 3), 768 blocks.
  const PlanInput eight_rows = plan_input({64, 8, 16, 768}, {98304, 12288, 1, 16}, {1});
  p = plan_reduce(h100, f32_sum, eight_rows);
  expect(kernels(p) == "transpose_tile_kernel" && p.step[0].grid[0] == 768 && p.step[0].U == 4,
         "plan: transpose tiles over 8 rows load four at once: " + plan_json(p));
  OpTraits f32_argmax;
  f32_argmax.acc_bytes = 16, f32_argmax.indexed = true;
  p = plan_reduce(h100, f32_argmax, eight_rows);
  expect(kernels(p) == "transpose_tile_kernel" && p.step[0].grid[0] == 768 && p.step[0].U == 1,
         "plan: ... positions a row at a time: " + plan_json(p));
  // Words of four 1-byte elements, from rows of an odd length too (two aligned loads a word), a
  // row at a time (four at once lost: dims.cuh): amin over dim 0 of (14, 49, 50257).transpose(1,
  // 2) int8.
  OpTraits i8_amin;
  i8_amin.in_bytes = 1, i8_amin.acc_bytes = 1, i8_amin.whole_rows = true;
  p = plan_reduce(h100, i8_amin, plan_input({14, 50257, 49}, {49 * 50257, 1, 50257}, {0}));
  expect(kernels(p) == "transpose_tile_kernel" && p.step[0].V == 4 && p.step[0].U == 1 && !p.step[0].flag,
         "plan: transpose tiles of 1-byte words over rows of an odd length: " + plan_json(p));
  // Narrow columns through a step, longer than tiles take (argmax over dim -2 of (32064, 56,
  // 7)[:, :, ::2]): a strided row a result, teams of 8 lanes over 56 elements, 32 rows a block
  // (layout.h's inner_as_rows); the columns kernel where Tuning::columns_as_rows_most_bytes is 1.
  const PlanInput strided_narrow = plan_input({32064, 56, 4}, {392, 7, 2}, {1});
  p = plan_reduce(h100, f32_sum, strided_narrow);
  expect(kernels(p) == "rows_kernel" && p.step[0].team == 8 && p.step[0].grid[0] == 4008 &&
             p.step[0].layout.outer == 32064 * 4 && p.step[0].layout.in_reduced == 7,
         "plan: narrow strided columns are strided rows: " + plan_json(p));
  // Not where a team would be 32 lanes, a row a warp (rows of 512: the dim of 512 of (12, 1024,
  // 512, 16).transpose(3, 0) float16, 32 bytes a row).
  OpTraits half_sum;
  half_sum.in_bytes = 2;
  p = plan_reduce(h100, half_sum, plan_input({16, 1024, 512, 12}, {1, 8192, 16, 8388608}, {2}));
  expect(kernels(p) == "columns_kernel", "plan: narrow columns of 512 rows stay columns: " + kernels(p));
  Tuning no_rows;
  no_rows.columns_as_rows_most_bytes = 1;
  p = plan_reduce(h100, f32_sum, strided_narrow, no_rows);
  expect(kernels(p) == "columns_kernel", "plan: ... columns without: " + kernels(p));
  Tuning from32;
  from32.transpose_least_inner = 32;
  p = plan_reduce(h100, f32_sum, half_tile, from32);
  expect(kernels(p) == "tile_kernel" && p.step[0].a_is_outer, "plan: ... tiles under the least inner run: " + kernels(p));
  // Dense rows of 7 float32 (96000 of them, 2.7 MB): short_rows_kernel, 7 vectors of 4 rows a
  // thread, 24000 threads in blocks of 64 (375 blocks; blocks of 128 would give fewer than two a
  // multiprocessor); without it (Tuning::short_rows_least_bytes) slabs, or tiles under
  // Tuning::slabs_least_bytes.
  const PlanInput rows7 = plan_input({96000, 7}, {7, 1}, {1});
  p = plan_reduce(h100, f32_sum, rows7);
  expect(kernels(p) == "short_rows_kernel" && p.step[0].loads == 7 && p.step[0].block[0] == 64 &&
             p.step[0].grid[0] == 375,
         "plan: dense rows of 7 are short rows: " + plan_json(p));
  p = plan_reduce(h100, f32_sum, plan_input({96000, 7}, {8, 1}, {1}));
  expect(kernels(p) != "short_rows_kernel", "plan: ... not where the rows are not one run: " + kernels(p));
  p = plan_reduce(h100, f32_sum, plan_input({20000, 7}, {7, 1}, {1}));
  expect(kernels(p) != "short_rows_kernel", "plan: ... nor under 1 MiB (few threads): " + kernels(p));
  p = plan_reduce(h100, f32_sum, rows7, no_short_rows);
  expect(kernels(p) == "slab_kernel", "plan: rows of 7 are slabs without short rows: " + kernels(p));
  Tuning slabs_from_4mb = no_short_rows;
  slabs_from_4mb.slabs_least_bytes = 4 << 20;
  p = plan_reduce(h100, f32_sum, rows7, slabs_from_4mb);
  expect(kernels(p) == "tile_kernel" && p.step[0].a_is_outer, "plan: ... tiles under 4 MB of input: " + kernels(p));
  // Long narrow columns of several outer indexes, float16 mean over dim 1 of (40, 50257, 28): the
  // reduced dim split (27 splits of 1862 rows) and combined, not one pass of 1570 rows a thread
  // (Tuning::columns_one_pass_rows); rows of 56 bytes, 8-byte aligned but not 16: the narrow
  // instance's 8-byte vectors, 4 outputs a thread, blocks of 8 x 16.
  OpTraits f16_sum;
  f16_sum.in_bytes = 2;
  const PlanInput narrow_columns = plan_input({40, 50257, 28}, {1407196, 28, 1}, {1});
  p = plan_reduce(h100, f16_sum, narrow_columns);
  expect(kernels(p) == "columns_kernel + column_partials_kernel" && p.step[0].grid[1] == 27 && p.step[0].per == 1862 &&
             p.step[0].V == 4 && p.step[0].U == 8 && p.step[0].block[0] * p.step[0].block[1] == kNarrowBlock,
         "plan: long narrow columns are split: " + plan_json(p));
  // Short columns of whole pieces, float16 over dim 1 of (49152, 2, 16): short_columns_kernel,
  // two pieces of 4 results a thread over the 49152 x 4 pieces flattened (384 blocks of 256: 4
  // pieces a thread would leave fewer than two a multiprocessor); rows not whole pieces, or
  // under a Tuning::short_columns_inner_bytes of 128 bytes 128 wide, other kernels. The same
  // (7, 132096) int8 min as above: a piece a thread, 7 rows (129 blocks).
  p = plan_reduce(h100, f16_sum, plan_input({49152, 2, 16}, {32, 16, 1}, {1}));
  expect(kernels(p) == "short_columns_kernel" && p.step[0].grid[0] == 384 && p.step[0].count == 196608 &&
             p.step[0].per == 4 && p.step[0].loads == 2 && p.step[0].block[0] == kShortColumnsBlock,
         "plan: short columns of whole pieces: " + plan_json(p));
  p = plan_reduce(h100, f16_sum, plan_input({49152, 2, 14}, {28, 14, 1}, {1}));
  expect(kernels(p) != "short_columns_kernel", "plan: ... not where rows are not whole pieces: " + kernels(p));
  p = plan_reduce(h100, i8_min, short_columns);
  expect(kernels(p) == "short_columns_kernel" && p.step[0].grid[0] == 129 && p.step[0].loads == 1,
         "plan: ... int8 min: " + plan_json(p));
  // More rows than a round of loads (8), prod over dim 1 of (32064, 28, 56) float32: a piece
  // a thread, its rows in rounds (448896 pieces, 1754 blocks); none with
  // Tuning::short_columns_most_rows at 8, nor with fewer pieces than
  // short_columns_long_threads_per_sm a multiprocessor (2000 x 14: columns).
  const PlanInput rounds = plan_input({32064, 28, 56}, {1568, 56, 1}, {1});
  p = plan_reduce(h100, f32_sum, rounds);
  expect(kernels(p) == "short_columns_kernel" && p.step[0].grid[0] == 1754 && p.step[0].count == 448896 &&
             p.step[0].per == 14 && p.step[0].loads == 1,
         "plan: short columns of 28 rows in rounds: " + plan_json(p));
  Tuning one_round;
  one_round.short_columns_most_rows = kShortColumnsRows;
  p = plan_reduce(h100, f32_sum, rounds, one_round);
  expect(kernels(p) != "short_columns_kernel", "plan: ... none past one round under that bound: " + kernels(p));
  p = plan_reduce(h100, f32_sum, plan_input({2000, 28, 56}, {1568, 56, 1}, {1}));
  expect(kernels(p) != "short_columns_kernel", "plan: ... nor with few pieces: " + kernels(p));
  Tuning narrow_short;
  narrow_short.short_columns_inner_bytes = 128;
  p = plan_reduce(h100, f16_sum, plan_input({8192, 2, 64}, {128, 64, 1}, {1}), narrow_short);
  expect(kernels(p) != "short_columns_kernel", "plan: ... nor 128 bytes wide under that bound: " + kernels(p));
  // Dense rows of 12 float16 whose results go in another order, mean over dim 3 of (256, 197, 64,
  // 12).transpose(0, 1): the outer runs are one run of memory, read as linear slabs (340 a block,
  // 16-byte vectors), the results stored through the runs.
  p = plan_reduce(h100, f16_sum, plan_input({197, 256, 64, 12}, {768, 151296, 12, 1}, {3}));
  expect(kernels(p) == "slab_kernel" && p.step[0].slabs.run_linear && !p.step[0].slabs.linear &&
             p.step[0].slabs.vectors && p.step[0].slabs.slabs == 340,
         "plan: dense transposed rows are slabs read as one run: " + plan_json(p));
  // Wide ones: 4 pieces a thread of 2 rows where that leaves two blocks a multiprocessor (mean
  // over dim 2 of (1024, 2, 32064).transpose(1, 2), 8016 blocks), 2 of 3 rows, 1 of 5.
  p = plan_reduce(h100, f16_sum, plan_input({1024, 32064, 2}, {64128, 1, 32064}, {2}));
  expect(kernels(p) == "short_columns_kernel" && p.step[0].loads == 4 && p.step[0].grid[0] == 8016,
         "plan: wide short columns, 4 vectors a thread: " + plan_json(p));
  p = plan_reduce(h100, f16_sum, plan_input({1024, 3, 32064}, {96192, 32064, 1}, {1}));
  expect(kernels(p) == "short_columns_kernel" && p.step[0].loads == 2, "plan: ... 3 rows, 2: " + plan_json(p));
  p = plan_reduce(h100, f16_sum, plan_input({1024, 5, 32064}, {160320, 32064, 1}, {1}));
  expect(kernels(p) == "short_columns_kernel" && p.step[0].loads == 1, "plan: ... 5 rows, 1: " + plan_json(p));
  // Columns whose outer indexes are under a sector apart (count_nonzero over dim 0 of a
  // channels_last (40, 7, 3, 151936) bfloat16: outer the 7 channels, 1 element apart): the grid
  // steps through the outer indexes first (the step's flag); (64, 1024, 4096) float32 over dim 1
  // (outer indexes 16 MB apart) keeps the column blocks first.
  OpTraits bf16_count_nonzero;
  bf16_count_nonzero.in_bytes = 2, bf16_count_nonzero.acc_bytes = 8;
  p = plan_reduce(h100, bf16_count_nonzero, plan_input({40, 7, 3, 151936}, {3190656, 1, 1063552, 7}, {0}));
  expect(kernels(p) == "columns_kernel" && p.step[0].flag && p.step[0].layout.outer == 7,
         "plan: packed narrow columns step through their outer indexes first: " + plan_json(p));
  Tuning column_blocks_first;
  column_blocks_first.columns_outer_first_bytes = 1;
  p = plan_reduce(h100, bf16_count_nonzero, plan_input({40, 7, 3, 151936}, {3190656, 1, 1063552, 7}, {0}),
                  column_blocks_first);
  expect(kernels(p) == "columns_kernel" && !p.step[0].flag, "plan: ... not with the knob at 1: " + plan_json(p));
  p = plan_of({64, 1024, 4096}, {4194304, 4096, 1}, {1});
  expect(kernels(p) == "columns_kernel" && !p.step[0].flag, "plan: ... not outer indexes far apart: " + plan_json(p));
  // Transposed rows of 8 float32 (32 bytes, two words), sum over dim 2 of (50257, 16,
  // 8).transpose(1, 0): tiles along the result's run, a thread a row of two 16-byte words; rows
  // of 4 (one word) too; rows of 2 (8 bytes, under Tuning::tile_words_least_bytes) keep
  // transpose tiles.
  p = plan_reduce(h100, f32_sum, plan_input({16, 50257, 8}, {8, 128, 1}, {2}));
  expect(kernels(p) == "tile_kernel" && p.step[0].word == 32 && !p.step[0].a_is_outer && p.step[0].loads == 8,
         "plan: transposed rows of two words are tiles along the result: " + plan_json(p));
  p = plan_reduce(h100, f32_sum, plan_input({16, 50257, 4}, {4, 64, 1}, {2}));
  expect(kernels(p) == "tile_kernel" && p.step[0].word == 16 && !p.step[0].a_is_outer,
         "plan: ... rows of one word too: " + plan_json(p));
  p = plan_reduce(h100, f32_sum, plan_input({16, 50257, 2}, {2, 32, 1}, {2}));
  expect(kernels(p) == "transpose_tile_kernel", "plan: ... rows of half a word transpose tiles: " + kernels(p));
  // Rows of 12 bfloat16 through three outer runs (count_nonzero over dim 3 of (28, 7, 768,
  // 12).transpose(1, 2)): tile_kernel loads each row as three 8-byte units; off an 8-byte
  // boundary, elements; rows of 16 (32 bytes) off a 16-byte boundary, elements too (the kernel
  // reads any multiple of 16 bytes as 16-byte words, so 8-byte units would not do).
  OpTraits bf16_count;
  bf16_count.in_bytes = 2, bf16_count.acc_bytes = 8;
  PlanInput rows12 = plan_input({28, 768, 7, 12}, {64512, 12, 9216, 1}, {3});
  p = plan_reduce(h100, bf16_count, rows12);
  expect(kernels(p) == "tile_kernel" && p.step[0].word == 24, "plan: rows of 12 bfloat16 as 8-byte units: " + plan_json(p));
  rows12.address += 4;
  p = plan_reduce(h100, bf16_count, rows12);
  expect(kernels(p) == "tile_kernel" && p.step[0].word == 0, "plan: ... off 8 bytes, elements: " + plan_json(p));
  rows12 = plan_input({28, 768, 7, 12}, {64512, 12, 9216, 1}, {3});
  rows12.address += 8;
  p = plan_reduce(h100, bf16_count, rows12);
  expect(p.step[0].word == 24, "plan: ... on 8 bytes but not 16, units: " + plan_json(p));
  PlanInput rows16 = plan_input({28, 768, 7, 16}, {86016, 16, 12288, 1}, {3});
  rows16.address += 8;
  p = plan_reduce(h100, bf16_count, rows16);
  expect(kernels(p) != "tile_kernel" || p.step[0].word == 0, "plan: rows of 32 bytes off 16, elements: " + plan_json(p));
  // A float32 row of 3 (12 bytes): units no wider than an element, elements.
  p = plan_reduce(h100, f32_sum, plan_input({28, 768, 7, 3}, {16128, 3, 2304, 1}, {3}));
  expect(kernels(p) != "tile_kernel" || p.step[0].word == 0, "plan: float32 rows of 3, elements: " + plan_json(p));
  // Rows of 27 (54 bytes, element loads): one pass under a Tuning::columns_one_pass_rows without
  // the bound.
  const PlanInput odd_columns = plan_input({40, 50257, 27}, {1356939, 27, 1}, {1});
  p = plan_reduce(h100, f16_sum, odd_columns);
  expect(kernels(p) == "columns_kernel + column_partials_kernel" && p.step[0].V == 1,
         "plan: ... rows of 54 bytes, element loads: " + plan_json(p));
  Tuning one_pass;
  one_pass.columns_one_pass_rows = 1 << 20;
  p = plan_reduce(h100, f16_sum, odd_columns, one_pass);
  expect(kernels(p) == "columns_kernel" && p.step[0].per == 50257, "plan: ... one pass without the bound: " + plan_json(p));
  // Transposed short reductions of 1-byte inputs over inner runs of 32 (amin over the dim of 2 of
  // (2, 32064, 13, 32).transpose(0, 3)): transpose tiles of 8 lanes of 4-byte words (32 wide),
  // 128 outer indexes tall; inner runs of 64, 16 lanes.
  OpTraits u8_min;
  u8_min.in_bytes = 1, u8_min.acc_bytes = 1;
  p = plan_reduce(h100, u8_min, plan_input({32, 32064, 13, 2}, {1, 416, 32, 13338624}, {3}));
  expect(kernels(p) == "transpose_tile_kernel" && p.step[0].team == 3 && p.step[0].V == 4 && p.step[0].flag &&
             p.step[0].grid[0] == ceil_div(int64_t(32064) * 13, int64_t(128)),
         "plan: 1-byte transposed, inner 32: transpose tiles 8 lanes wide: " + plan_json(p));
  p = plan_reduce(h100, u8_min, plan_input({64, 4096, 13, 2}, {1, 832, 64, 3407872}, {3}));
  expect(kernels(p) == "transpose_tile_kernel" && p.step[0].team == 4, "plan: ... inner 64: 16 lanes: " + plan_json(p));
  // Transposed maps (a reduced dim of one) of accumulators of 8 bytes or more
  // (Tuning::transpose_map_least_acc_bytes): the input's elements through shared memory, tiles
  // of 4096 of them, 64 along inner for inner runs of 64 or more and the fewest of 8 to 64 that
  // cover shorter ones (all over the size-1 dim of (1, 80, 11008, 64).permute(3, 2, 1, 0)
  // bfloat16, an int64 count: 880640 outer indexes in tiles of 64; a uint8 sum into int64 over
  // inner runs of 8 of (704, 1, 97, 8).transpose(2, 3), tiles 512 tall); under a block a
  // multiprocessor (Tuning::transpose_map_least_blocks_percent) or for narrower accumulators
  // (float32 amin of (1, 64, 32064).permute(2, 0, 1)), the transpose tiles.
  OpTraits bf16_all, u8_sum, f32_amin;
  bf16_all.in_bytes = 2, bf16_all.acc_bytes = 8;
  u8_sum.in_bytes = 1, u8_sum.acc_bytes = 8;
  f32_amin.in_bytes = 4, f32_amin.acc_bytes = 4;
  p = plan_reduce(h100, bf16_all, plan_input({64, 11008, 80, 1}, {1, 64, 704512, 704512}, {3}));
  expect(kernels(p) == "transpose_map_kernel" && p.step[0].team == 6 && p.step[0].inner_tiles == 1 &&
             p.step[0].grid[0] == 880640 / 64 && p.step[0].layout.outer == 880640,
         "plan: a transposed map is transpose_map_kernel, tiles 64 wide: " + plan_json(p));
  p = plan_reduce(h100, u8_sum, plan_input({704, 1, 8, 97}, {776, 776, 1, 8}, {1}));
  expect(kernels(p) == "transpose_map_kernel" && p.step[0].team == 3 && p.step[0].grid[0] == ceil_div(int64_t(704) * 97, int64_t(512)),
         "plan: ... inner runs of 8: tiles 8 wide, 512 tall: " + plan_json(p));
  p = plan_reduce(h100, u8_sum, plan_input({400, 1, 8, 100}, {800, 800, 1, 8}, {1}));
  expect(kernels(p) == "transpose_tile_kernel", "plan: ... 79 tiles: transpose tiles: " + plan_json(p));
  p = plan_reduce(h100, f32_amin, plan_input({32064, 1, 64}, {1, 2052096, 32064}, {1}));
  expect(kernels(p) == "transpose_tile_kernel", "plan: ... 4-byte accumulators: transpose tiles: " + plan_json(p));
  // Several reduced runs whose contiguous one is not the longest: that one first, as rows, then
  // each result's partials (Tuning::combine_rows_least_bytes, combine_rows_most). A full sum of
  // (16, 128, 1000)[:, ::2]: 1024 rows of 1000, then 1024 partials (columns of 1000 split 32
  // ways and two combines before). One output's 1024 partials: a block's combine
  // (Tuning::block_partials_outputs), not 32 threads'.
  p = plan_of({16, 64, 1000}, {128000, 2000, 1}, {0, 1, 2});
  expect(kernels(p) == "rows_kernel + block_partials_kernel" && p.step[1].count == 1024 &&
             p.step[1].grid[0] == 1 && p.step[1].block[0] == kBlockPartials && p.step[0].layout.reduced == 1000,
         "plan: a sliced full sum is rows, then their partials: " + plan_json(p));
  Tuning longest_first;
  longest_first.combine_rows_least_bytes = int64_t(1) << 40;
  p = plan_reduce(h100, f32_sum, plan_input({16, 64, 1000}, {128000, 2000, 1}, {0, 1, 2}), longest_first);
  expect(kernels(p) == "columns_kernel + column_partials_kernel + block_partials_kernel",
         "plan: ... the longest run first without it: " + kernels(p));
  // ... not where each result would have more than combine_rows_most partials: (4096, 77, 256)
  // over dims 0 and 2 keeps 4096 rows down each column, 256 partials a result.
  p = plan_of({4096, 77, 256}, {19712, 256, 1}, {0, 2});
  expect(p.step[0].kernel == Kernel::Columns && p.step[p.steps - 1].count == 256,
         "plan: rows first only up to combine_rows_most partials: " + plan_json(p));
  // ... nor for many results: var_mean over dims 0, 1 and 3 of (12, 128, 128, 80), 128 results
  // (Tuning::combine_rows_outputs), keeps columns over 1536 rows, 80 partials a result.
  OpTraits f32_welford;
  f32_welford.acc_bytes = 12, f32_welford.group_rows = true;
  p = plan_reduce(h100, f32_welford, plan_input({12, 128, 128, 80}, contiguous_strides({12, 128, 128, 80}), {0, 1, 3}));
  expect(p.step[0].kernel == Kernel::Columns && p.step[p.steps - 1].count == 80,
         "plan: rows first only for few results: " + plan_json(p));
  Tuning no_block_partials;
  no_block_partials.block_partials_outputs = 0;
  no_block_partials.block_partials_least = int64_t(1) << 40;
  p = plan_reduce(h100, f32_sum, plan_input({16, 64, 1000}, {128000, 2000, 1}, {0, 1, 2}), no_block_partials);
  expect(kernels(p) == "rows_kernel + column_partials_kernel", "plan: ... 32 threads an output without: " + kernels(p));
  // Small columns: threads down until each has at most 8 rows (56 rows: 8 down, 7 rows each).
  p = plan_of({56, 1792}, {1792, 1}, {0});
  expect(kernels(p) == "columns_kernel" && p.step[0].block[1] == 8 && p.step[0].block[0] == 32 &&
             p.step[0].grid[0] == 56 && p.step[0].grid[1] == 1,
         "plan: (56, 1792) over dim 0 is small columns, 8 threads down: " + plan_json(p));
  // The tuning table's trial line (TREDUCE_TUNING): names and positive integers, else nothing
  // applied.
  Tuning t;
  expect(apply_tuning("small_elements=7,columns_blocks_per_sm=3", &t) && t.small_elements == 7 &&
             t.columns_blocks_per_sm == 3 && t.small_count == Tuning{}.small_count,
         "tuning: a line of two entries sets those two fields");
  for (const char* bad : {"small_elements=0", "no_such_field=4", "small_elements", "small_elements=-3",
                          "small_elements=4x", "rows_team_loads=1,small_elements=", "small_elements=99999999999999999999"}) {
    Tuning u;
    u.small_count = 5;
    expect(!apply_tuning(bad, &u) && u.small_count == 5 && u.small_elements == Tuning{}.small_elements,
           std::string("tuning: a bad line is refused whole: ") + bad);
  }
  expect(sizeof(kTuningFields) / sizeof(kTuningFields[0]) * sizeof(int64_t) == sizeof(Tuning),
         "tuning: every field of the table has its name");
  // Columns of 2 elements whose results are transposed, 96 rows apart in memory (any over dim 3
  // of (2, 96, 32064, 2).transpose(3, 1) int16): the result-contiguous run (32064, 2 elements
  // apart) as inner, the old inner an outer digit.
  OpTraits i16_any;
  i16_any.in_bytes = 2, i16_any.acc_bytes = 1;
  p = plan_reduce(h100, i16_any, plan_input({2, 2, 32064, 96}, {6156288, 1, 2, 64128}, {3}));
  expect(p.steps >= 1 && kernel_name(p.step[0].kernel) == std::string("columns_kernel") &&
             p.step[0].layout.inner == 32064 && p.step[0].layout.in_inner == 2 && p.step[0].layout.out_inner == 1 &&
             p.step[0].layout.outer == 4,
         "plan: transposed columns of 2 go along the result's run: " + plan_json(p));
  // Whole rows of a count of 16-byte vectors that is not a power of two: whole_rows_kernel's
  // instance of the fewest slots that hold them (float32 rows of 56, 14 vectors: 8 lanes of 2
  // loads; rows of 12, 3 vectors: 2 lanes of 2), its last slots idle.
  p = plan_of({32064, 56}, {56, 1}, {1});
  expect(kernels(p) == "whole_rows_kernel" && p.step[0].loads == 14 && p.step[0].team == 8 &&
             p.step[0].grid[0] == ceil_div(int64_t(32064), int64_t(kRowsBlock / 8)),
         "plan: float32 rows of 56 are whole rows, 8 lanes: " + plan_json(p));
  p = plan_of({65536, 12}, {12, 1}, {1});
  expect(kernels(p) == "whole_rows_kernel" && p.step[0].loads == 3 && p.step[0].team == 2,
         "plan: float32 rows of 12 are whole rows, 2 lanes: " + plan_json(p));
  // Columns of single elements: 8 loads in flight a thread, 4 for Welford's groups
  // (columns_element_loads). Mean over dim 0 of (128, 768) float16 (a small column);
  // var over dim 0 of (97, 3072) float32.
  p = plan_reduce(h100, f16_mean, plan_input({128, 768}, {768, 1}, {0}));
  expect(kernels(p) == "columns_kernel" && p.step[0].V == 1 && p.step[0].U == 8,
         "plan: small columns of elements, 8 loads a thread: " + plan_json(p));
  OpTraits f32_var;
  f32_var.acc_bytes = 16, f32_var.group_rows = true;
  p = plan_reduce(h100, f32_var, plan_input({97, 3072}, {3072, 1}, {0}));
  expect(kernels(p) == "columns_kernel" && p.step[0].V == 1 && p.step[0].U == 4,
         "plan: ... of Welford's groups, 4: " + plan_json(p));
  // 80 columns of 11008 float32 rows (var_mean): split, then 263 partials an output combined by
  // a block each (Tuning::block_partials_outputs: 128).
  p = plan_reduce(h100, f32_var, plan_input({11008, 80}, {80, 1}, {0}));
  expect(kernels(p) == "columns_kernel + block_partials_kernel" && p.step[1].grid[0] == 80,
         "plan: 80 split columns combine a block an output: " + plan_json(p));
  // Rows of 3 packed along a run whose results are 14 apart, the result's run (14) elsewhere:
  // logsumexp over dim 0 of (14, 151936, 3).transpose(2, 0) bfloat16. Under
  // Tuning::transpose_least_outer (32) outer indexes, tile_kernel; with 8, transpose tiles.
  OpTraits bf16_lse;
  bf16_lse.in_bytes = 2, bf16_lse.acc_bytes = 8, bf16_lse.group_rows = true;
  const PlanInput lse_in = plan_input({3, 151936, 14}, {1, 3, 455808}, {0});
  p = plan_reduce(h100, bf16_lse, lse_in);
  expect(kernels(p) == "tile_kernel", "plan: a result's run of 14 is tiles: " + plan_json(p));
  Tuning short_outer;
  short_outer.transpose_least_outer = 8;
  p = plan_reduce(h100, bf16_lse, lse_in, short_outer);
  expect(kernels(p) == "transpose_tile_kernel" && p.step[0].layout.outer == 14 && p.step[0].layout.inner == 151936,
         "plan: ... transpose tiles from 8: " + plan_json(p));
  // The same layout planned twice: the same plan (no timing, no state).
  const Plan once = plan_of({4096, 4096}, {4096, 1}, {0}), again = plan_of({4096, 4096}, {4096, 1}, {0});
  expect(plan_json(again) == plan_json(once), "plan: the same layout gets the same plan");
  // Many outer indexes, few outputs a row, prod over dim -2 of (5120, 64, 32) float32: 8 threads
  // across its 8 vectors, and 8 down (8 rows each, Tuning::columns_least_rows), a block of 64;
  // without the bound 32 down, 2 rows each. Positions likewise.
  OpTraits f32_prod;
  const PlanInput few_rows = plan_input({5120, 64, 32}, {2048, 32, 1}, {1});
  p = plan_reduce(h100, f32_prod, few_rows);
  expect(kernels(p) == "columns_kernel" && p.step[0].block[0] == 8 && p.step[0].block[1] == 8,
         "plan: columns of 64 rows under many outer indexes, 8 rows a thread: " + plan_json(p));
  Tuning any_rows;
  any_rows.columns_least_rows = 1;
  p = plan_reduce(h100, f32_prod, few_rows, any_rows);
  expect(kernels(p) == "columns_kernel" && p.step[0].block[0] == 8 && p.step[0].block[1] == 32,
         "plan: ... 32 down without the bound: " + plan_json(p));
  p = plan_reduce(h100, f32_argmax, plan_input({4096, 64, 32}, {2048, 32, 1}, {1}));
  expect(kernels(p) == "columns_kernel" && p.step[0].block[1] == 8, "plan: ... positions too: " + plan_json(p));
  // A reduced dim of size 1 past Tuning::small_single_most results: the map kernel, amax over
  // dim 1 of (8192, 1, 64) float32 (2^19 results); (128256, 1) stays the small kernel's.
  p = plan_reduce(h100, f32_prod, plan_input({8192, 1, 64}, {64, 64, 1}, {1}));
  expect(kernels(p) == "map_kernel", "plan: 2^19 results of one element each, the map: " + plan_json(p));
  p = plan_reduce(h100, f32_prod, plan_input({128256, 1}, {1, 1}, {1}));
  expect(kernels(p) == "small_kernel", "plan: ... 128256 of them, the small kernel: " + plan_json(p));
}

// Repeated results (plan_repeat): the words' offsets in the distinct results against the
// result's own index arithmetic, every element, for each way a result is folded.
void check_repeat_plans() {
  using namespace treduce::cuda;
  struct Case {
    std::vector<int64_t> size, stride;
    int bytes;
    uintptr_t src, out;
    int per;
    bool splat;
    int runs;
    const char* what;
  };
  const Case cases[] = {
      {{32, 64, 56}, {56, 0, 1}, 2, 0, 0, 8, false, 3, "runs of 56 float16 between repeats: words of them"},
      {{100, 64}, {1, 0}, 4, 0, 0, 4, true, 2, "the innermost run repeats: words of copies"},
      {{10, 3, 7}, {7, 0, 1}, 2, 0, 0, 1, false, 3, "runs of 7: elements"},
      {{10, 3, 8}, {8, 0, 1}, 2, 2, 0, 1, false, 3, "distinct results off a word: elements"},
      {{10, 3, 8}, {8, 0, 1}, 2, 0, 8, 1, false, 3, "the result off a word: elements"},
      {{5, 6, 7, 8}, {0, 0, 8, 1}, 8, 0, 0, 2, false, 2, "repeats and runs merged"},
      {{3, 1, 4, 16}, {64, 7, 16, 1}, 1, 0, 0, 16, false, 1, "dims of one skipped, all merged"},
      {{6, 2, 32}, {2, 1, 0}, 1, 0, 0, 16, true, 2, "bytes repeated 32 times"},
  };
  for (const Case& c : cases) {
    RepeatPlan p;
    const bool ok = plan_repeat(c.size.data(), c.stride.data(), int(c.size.size()), c.bytes, c.src, c.out, &p);
    expect(ok && p.per == c.per && p.splat == c.splat && p.index.runs == c.runs,
           std::string("repeat plan: ") + c.what + " (per " + std::to_string(p.per) + ", runs " +
               std::to_string(p.index.runs) + ")");
    if (!ok) continue;
    int64_t n = 1;
    for (int64_t s : c.size) n *= s;
    bool same = p.words * p.per == n;
    for (int64_t e = 0; e < n && same; ++e) {
      int64_t want = 0, rest = e;
      for (int k = int(c.size.size()) - 1; k >= 0; --k) want += (rest % c.size[k]) * c.stride[k], rest /= c.size[k];
      const int64_t got = p.index.in_offset(e / p.per) + (p.splat ? 0 : e % p.per);
      same = got == want;
    }
    expect(same, std::string("repeat plan: every element's offset, ") + c.what);
  }
  // Five runs: more than an index takes.
  const std::vector<int64_t> size{2, 3, 2, 3, 2}, stride{6, 0, 2, 0, 1};
  RepeatPlan p;
  expect(!plan_repeat(size.data(), stride.data(), 5, 4, 0, 0, &p), "repeat plan: five runs are not folded");
}
// Every plan's blocks within its kernel's launch bound, over random layouts: ranks 1-4, sizes
// from model-like pools, a random permutation of the memory order, sometimes a slice, every
// subset of dims reduced, 1- to 8-byte inputs, plain, positions and Welford's groups.
void check_launch_bounds() {
  using namespace treduce::cuda;
  const Device h100{132, 9};
  const auto bound = [](Kernel k) {
    switch (k) {
      case Kernel::Columns: return kColumnsBlock;
      case Kernel::Small: return kSmallBlock;
      case Kernel::Map: return kMapBlock;
      case Kernel::Rows: case Kernel::WholeRows: case Kernel::RowPartials: return kRowsBlock;
      case Kernel::Tiles: case Kernel::TransposeTiles: return kTileBlock;
      case Kernel::Slabs: return kSlabBlock;
      case Kernel::ShortRows: return kShortRowsBlock;
      case Kernel::ShortColumns: return kShortColumnsBlock;
      default: return 1024;
    }
  };
  std::mt19937_64 gen(20261205);
  const int64_t pool[] = {1, 2, 3, 5, 7, 8, 12, 16, 28, 32, 49, 64, 77, 96, 128, 197, 256, 512, 1000, 1024, 4096, 5120, 32000};
  OpTraits traits[5];
  traits[0].in_bytes = 1, traits[0].acc_bytes = 8;               // integer sums
  traits[1].in_bytes = 2, traits[1].acc_bytes = 4;               // bfloat16 sums
  traits[2].in_bytes = 4, traits[2].acc_bytes = 16, traits[2].indexed = true;  // positions
  traits[3].in_bytes = 2, traits[3].acc_bytes = 12, traits[3].group_rows = true;  // Welford's
  traits[4].in_bytes = 8, traits[4].acc_bytes = 8;
  int checked = 0, bad = 0;
  std::string first;
  for (int c = 0; c < 16000; ++c) {
    const int rank = 1 + int(gen() % 4);
    std::vector<int64_t> sizes(rank);
    int64_t n = 1;
    for (auto& s : sizes) s = pool[gen() % (sizeof(pool) / sizeof(pool[0]))], n *= s;
    if (n > (int64_t(1) << 31)) continue;
    std::vector<int> order(rank);  // memory order, outermost first
    for (int i = 0; i < rank; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), gen);
    std::vector<int64_t> strides(rank);
    int64_t s = 1 + int64_t(gen() % 4 == 0);  // every second element at times
    for (int i = rank - 1; i >= 0; --i) strides[order[i]] = s, s *= sizes[order[i]];
    const int mask = 1 + int(gen() % ((1 << rank) - 1));
    std::vector<int> reduced;
    for (int d = 0; d < rank; ++d)
      if (mask >> d & 1) reduced.push_back(d);
    const OpTraits& t = traits[gen() % 5];
    const Plan p = plan_reduce(h100, t, plan_input(sizes, strides, reduced));
    if (p.invalid) continue;
    for (int k = 0; k < p.steps; ++k) {
      const Step& st = p.step[k];
      const int64_t threads = int64_t(st.block[0]) * st.block[1];
      const bool ok = threads >= 1 && threads <= bound(st.kernel) && st.grid[1] <= 65535 &&
                      (st.kernel != Kernel::Columns || (threads >= 32 && threads % 32 == 0));
      ++checked;
      if (!ok && bad++ == 0) first = plan_json(p);
    }
  }
  expect(bad == 0 && checked > 15000,
         "plan: every step's block within its kernel's launch bound (" + std::to_string(checked) + " steps, " +
             std::to_string(bad) + " outside; first " + first + ")");
}
// override()'s choice for aten's softmax family on CUDA (core/normalize.h): ours where it
// measured at or past torch's kernel, torch's elsewhere.
void check_normalize_routes() {
  using treduce::SoftmaxOp;
  using treduce::normalize_cuda_wins;
  using treduce::normalize_on_chip_blocks;
  expect(normalize_cuda_wins(SoftmaxOp::Softmax, 2, 1024, 1, true, false), "softmax route: bfloat16 rows of 1024 packs");
  expect(!normalize_cuda_wins(SoftmaxOp::Softmax, 4, 197, 1, false, false), "softmax route: not rows of 197 elements");
  expect(normalize_cuda_wins(SoftmaxOp::Softmax, 2, 128256, 1, true, true), "softmax route: 2-byte rows on chip");
  expect(!normalize_cuda_wins(SoftmaxOp::Softmax, 2, 300000, 1, true, false), "softmax route: not 2-byte rows past the chip");
  expect(normalize_cuda_wins(SoftmaxOp::LogSoftmax, 4, 300000, 1, true, false), "softmax route: float32 rows past the chip");
  expect(normalize_cuda_wins(SoftmaxOp::Softmax, 4, 1000, 4096, false, false), "softmax route: columns");
  expect(normalize_cuda_wins(SoftmaxOp::SoftmaxBackward, 2, 300000, 1, true, false), "softmax route: softmax's backward");
  expect(normalize_cuda_wins(SoftmaxOp::LogSoftmaxBackward, 4, 32000, 1, true, true),
         "softmax route: log_softmax's backward on chip");
  expect(normalize_cuda_wins(SoftmaxOp::LogSoftmaxBackward, 4, 128256, 1, true, false),
         "softmax route: float32 log_softmax's backward past the chip");
  expect(!normalize_cuda_wins(SoftmaxOp::LogSoftmaxBackward, 2, 300000, 1, true, false),
         "softmax route: not 2-byte log_softmax's backward past the chip");
  // Rows on chip: 64 KiB a block forward (32 KiB a backward's input, and float64's), up to 8
  // blocks from sm_90, whole packs only; the suite's rows.
  expect(normalize_on_chip_blocks(SoftmaxOp::Softmax, 4, 32000, true, 9) == 2, "on chip: float32 rows of 32000, 2 blocks");
  expect(normalize_on_chip_blocks(SoftmaxOp::Softmax, 2, 128256, true, 9) == 4, "on chip: bfloat16 rows of 128256, 4 blocks");
  expect(normalize_on_chip_blocks(SoftmaxOp::Softmax, 4, 131072, true, 9) == 8, "on chip: 512 KiB, 8 blocks");
  expect(normalize_on_chip_blocks(SoftmaxOp::Softmax, 4, 131076, true, 9) == 0, "on chip: not past 512 KiB");
  expect(normalize_on_chip_blocks(SoftmaxOp::Softmax, 8, 16384, true, 9) == 4, "on chip: float64 32 KiB a block");
  expect(normalize_on_chip_blocks(SoftmaxOp::SoftmaxBackward, 4, 32000, true, 9) == 4, "on chip: a backward, 4 blocks");
  expect(normalize_on_chip_blocks(SoftmaxOp::LogSoftmaxBackward, 4, 128256, true, 9) == 0, "on chip: not a backward of 501 KiB");
  expect(normalize_on_chip_blocks(SoftmaxOp::Softmax, 4, 32000, true, 8) == 0, "on chip: one block before sm_90");
  expect(normalize_on_chip_blocks(SoftmaxOp::Softmax, 4, 16000, true, 8) == 1, "on chip: 64 KB before sm_90");
  expect(normalize_on_chip_blocks(SoftmaxOp::Softmax, 4, 32000, false, 9) == 0, "on chip: whole packs only");
}
}  // namespace

// The CPU softmax's exp (core/cpu/normalize.h's exp_nonpositive) against the double exp: within
// 1 ulp over [-87.3, 0] (every 97th float), 0 below float's normal range and for -inf, NaN kept.
void check_cpu_exp() {
  double worst = 0;
  int64_t checked = 0;
  for (uint32_t b = 0x80000000u;; b += 97) {
    float v;
    std::memcpy(&v, &b, 4);
    if (v < -87.3f) break;
    const double want = std::exp(double(v));
    const double ulp = std::ldexp(1.0, std::ilogb(want) - 23);
    worst = std::max(worst, std::fabs(double(treduce::cpu::exp_nonpositive(v)) - want) / ulp);
    ++checked;
  }
  expect(checked > 10000000 && worst <= 1.0, "cpu exp: within 1 ulp over [-87.3, 0] (worst " + std::to_string(worst) + ")");
  expect(treduce::cpu::exp_nonpositive(-88.0f) == 0.0f && treduce::cpu::exp_nonpositive(-INFINITY) == 0.0f,
         "cpu exp: 0 below the normal range and at -inf");
  expect(std::isnan(treduce::cpu::exp_nonpositive(NAN)) && treduce::cpu::exp_nonpositive(0.0f) == 1.0f,
         "cpu exp: NaN kept, exp(0) = 1");
}

int main() {
  check_cpu_exp();
  check_segments_per_row();
  check_plans();
  check_launch_bounds();
  check_normalize_routes();
  check_repeat_plans();
  at::manual_seed(0x5eed);
  check_device(at::Device(at::kCPU));
  if (at::hasCUDA()) check_device(at::Device(at::kCUDA, 0));
  else std::printf("no CUDA device: CUDA cases not run\n");
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
