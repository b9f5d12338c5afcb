// softmax, log_softmax and their backwards, torch-free: what each computes along one dim of a
// contiguous tensor seen as (outer, size, inner), for the CPU loops (cpu/normalize.h) and the
// CUDA kernels (cuda/kernels/normalize.cuh) alike.
//   softmax      y = exp(x - m) / s          m = max(x), s = sum(exp(x - m))
//   log_softmax  y = x - m - log(s)
//   backwards    softmax: dx = y (g - sum(g y));  log_softmax: dx = g - exp(y) sum(g)
// A row of -inf only, or holding +inf or NaN, is NaN throughout, as torch's (exp(inf - inf) is
// NaN and reaches the sum).
#pragma once

#include <math.h>

#include <cstdint>
#include <type_traits>

#include "convert.h"
#include "dtype.h"

namespace treduce {

// The accumulator of the normalizing ops (softmax's family, cross_entropy, layer_norm, rms_norm):
// float64 for float64 inputs, else float32.
template <class T>
using NormAcc = std::conditional_t<std::is_same_v<T, double>, double, float>;

enum class SoftmaxOp : int8_t { Softmax, LogSoftmax, SoftmaxBackward, LogSoftmaxBackward };

constexpr bool is_backward(SoftmaxOp op) { return op == SoftmaxOp::SoftmaxBackward || op == SoftmaxOp::LogSoftmaxBackward; }
constexpr bool is_log(SoftmaxOp op) { return op == SoftmaxOp::LogSoftmax || op == SoftmaxOp::LogSoftmaxBackward; }

// One call, on contiguous tensors. Forward: x the input (dtype `in`), y unused, out the result
// (`out`: `in`, or float32 for a 16-bit float input, torch's half_to_float). Backward: x the
// incoming gradient and y the forward's result (both `in`), out the gradient of the forward's
// input (`out`: `in`, or a 16-bit float where the forward widened it).
struct NormalizeArgs {
  SoftmaxOp op = SoftmaxOp::Softmax;
  DType in = DType::Float, out = DType::Float;
  const void* x = nullptr;
  const void* y = nullptr;
  void* out_data = nullptr;
  int64_t outer = 1, size = 1, inner = 1;
  int sm_count = 132;  // the GPU's multiprocessors (grid sizes)
  int cc_major = 0;    // its compute capability (clusters from 9)
};

// Whether (in, out) is a pair the kernels take (other dtype= requests convert the input first).
constexpr bool normalize_pair(SoftmaxOp op, DType in, DType out) {
  const bool lowp = in == DType::Half || in == DType::BFloat16;
  if (in == out) return lowp || in == DType::Float || in == DType::Double;
  if (is_backward(op)) return in == DType::Float && (out == DType::Half || out == DType::BFloat16);
  return lowp && out == DType::Float;
}

TREDUCE_HOST_DEVICE float norm_exp(float v) { return expf(v); }
TREDUCE_HOST_DEVICE double norm_exp(double v) { return exp(v); }
TREDUCE_HOST_DEVICE float norm_log(float v) { return logf(v); }
TREDUCE_HOST_DEVICE double norm_log(double v) { return log(v); }

// Rows the CUDA kernels hold on chip (cuda/kernels/normalize.cuh's on_chip_rows_kernel) and
// read once: blocks of kNormalizeOnChipThreads threads of normalize_on_chip_packs 16-byte packs
// a thread of x (and of y for a backward), a row over a cluster of up to 8 blocks from sm_90
// (1 before).
inline constexpr int kNormalizeOnChipThreads = 512;
inline constexpr int kNormalizeOnChipClusterMost = 8;  // the portable cluster size
inline constexpr int64_t kNormalizeOnChipMostBytes = int64_t(512) << 10;  // Tuning's default (cuda/tuning.h)

// 4 for a backward (two inputs) and for a float64 forward (8 spilled: its exp's registers).
constexpr int normalize_on_chip_packs(SoftmaxOp op, int bytes) { return is_backward(op) || bytes == 8 ? 4 : 8; }

// The blocks a row of `size` elements of `bytes` each takes on chip, or 0 where it is not held
// there (not whole aligned packs, past most_bytes, or more blocks than a cluster has).
constexpr int normalize_on_chip_blocks(SoftmaxOp op, int bytes, int64_t size, bool packs, int cc_major,
                                       int64_t most_bytes = kNormalizeOnChipMostBytes) {
  const int64_t block_bytes = int64_t(kNormalizeOnChipThreads) * normalize_on_chip_packs(op, bytes) * 16;
  const int64_t row_bytes = size * bytes;
  if (!packs || row_bytes > most_bytes) return 0;
  const int64_t blocks = (row_bytes + block_bytes - 1) / block_bytes;
  return blocks <= (cc_major >= 9 ? kNormalizeOnChipClusterMost : 1) ? int(blocks) : 0;
}

// Whether the CUDA kernels (cuda/kernels/normalize.cuh) measured at or past torch's own for a
// call: `size` elements along the dim, `inner` after it, `bytes` a read element, `packs` whether
// rows are whole aligned 16-byte packs, `on_chip` whether rows past the warps' are held on chip
// (normalize_on_chip_blocks). override() routes aten's softmax family to ours only there. H100,
// hot, us (benchmarks/results/h100/normalizing_softmax.md, 2026-12-07): rows of whole packs up
// to 1024 elements (a warp a row; bfloat16 (16384, 1024) 24.6 against torch's 35.3), rows on
// chip, forward and backward (softmax over (2048, 128256) bfloat16 474 against 713; log_softmax's
// backward over (4096, 32000) float32 515 against 714), float32 and float64 rows past them (a
// block a row, read twice; log_softmax's backward's first read takes g alone: (4096, 128256)
// float32 2515 against 2805), columns (dim 0 of (1000, 4096) 20 against 726) and softmax's
// backward win; not 2-byte rows past the chip, nor rows that are not whole packs (softmax over
// rows of 197 float32 52 against 43).
constexpr bool normalize_cuda_wins(SoftmaxOp op, int bytes, int64_t size, int64_t inner, bool packs, bool on_chip) {
  if (inner > 1 || size <= 1) return true;
  if (op == SoftmaxOp::SoftmaxBackward) return true;
  if (size <= 1024) return packs || is_backward(op);
  return on_chip || bytes >= 4;
}

// The maximum that keeps a NaN once seen (as torch's).
template <class Acc>
TREDUCE_HOST_DEVICE Acc norm_max(Acc m, Acc v) {
  return (v > m || v != v) ? v : m;
}

// The running maximum and sum of exp(x - max) of a row's elements in any order (one read), as
// a block of the CUDA kernels keeps it. A new maximum rescales the sum; exp(x - x) keeps
// torch's NaN for an infinite maximum.
template <class Acc>
struct ExpSum {
  Acc max, sum;
  TREDUCE_HOST_DEVICE static ExpSum identity() { return {-INFINITY, Acc(0)}; }
  TREDUCE_HOST_DEVICE void add(Acc x) {
    if (x > max) {
      sum = sum * norm_exp(max - x) + norm_exp(x - x);
      max = x;
    } else if (!(x == max && x == -INFINITY)) {
      sum += norm_exp(x - max);  // NaN (x or max) makes the sum NaN
    }  // (-inf while the maximum is -inf adds 0, as it will to any finite maximum found later)
  }
  TREDUCE_HOST_DEVICE static ExpSum combine(ExpSum a, ExpSum b) {
    if (b.max > a.max) {
      const ExpSum t = a;
      a = b, b = t;
    }
    // a.max >= b.max, or one is NaN; two rows of -inf only keep sum 0.
    if (b.sum == Acc(0)) return a;
    return {a.max, a.sum + b.sum * norm_exp(b.max - a.max)};
  }
};

// A row's (or column's) value for its forward results, once: 1 / sum (softmax) or log(sum)
// (log_softmax), so an element costs a multiply or a subtraction, not a division or a log.
// (log_softmax keeps (x - max) - log(sum), torch's order: x - (max + log(sum)) would round the
// sum of the two, off by up to half an ulp of max where the result is near 0.)
template <SoftmaxOp kOp, class Acc>
TREDUCE_HOST_DEVICE Acc forward_scale(Acc sum) {
  return kOp == SoftmaxOp::Softmax ? Acc(1) / sum : norm_log(sum);
}

// The result of element x (forward) or of gradient g and result y (backward) of a row, given
// the row's values: (max, forward_scale(sum)) forward, (sum(g y) or sum(g), unused)
// backward.
template <SoftmaxOp kOp, class Acc>
TREDUCE_HOST_DEVICE Acc normalize_one(Acc x, Acc y, Acc a, Acc b) {
  if constexpr (kOp == SoftmaxOp::Softmax) return norm_exp(x - a) * b;
  else if constexpr (kOp == SoftmaxOp::LogSoftmax) return x - a - b;
  else if constexpr (kOp == SoftmaxOp::SoftmaxBackward) return y * (x - a);
  else return x - norm_exp(y) * a;
}

// What normalize_one takes as b: the forward's scale of the sum b, or the backward's (unused) b.
template <SoftmaxOp kOp, class Acc>
TREDUCE_HOST_DEVICE Acc row_value(Acc b) {
  if constexpr (is_backward(kOp)) return b;
  else return forward_scale<kOp>(b);
}

// What a backward row sums: g y (softmax) or g (log_softmax).
template <SoftmaxOp kOp, class Acc>
TREDUCE_HOST_DEVICE Acc backward_term(Acc g, Acc y) {
  if constexpr (kOp == SoftmaxOp::SoftmaxBackward) return g * y;
  else return g;
}

}  // namespace treduce
