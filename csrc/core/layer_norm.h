// layer_norm and rms_norm, forward and backward, torch-free: what each computes over the last
// `cols` elements of a contiguous tensor seen as (rows, cols), for the CPU loops
// (cpu/layer_norm.h) and the CUDA kernels (cuda/kernels/layer_norm.cuh) alike. With weight w and
// bias b (1 and 0 where absent), a row x of n elements:
//   layer_norm  mean = sum(x) / n,  rstd = 1 / sqrt(sum((x - mean)^2) / n + eps)
//               xhat = (x - mean) rstd,  y = xhat w + b
//   rms_norm    rstd = 1 / sqrt(sum(x^2) / n + eps),  xhat = x rstd,  y = xhat w
// The variance is summed from the mean in a second pass over the row (held in registers or
// read again), not from sum(x^2) - n mean^2, which cancels. Backward, for incoming gradient g
// (gw = g w):
//   layer_norm  dx = rstd (gw - sum(gw) / n - xhat sum(gw xhat) / n)
//   rms_norm    dx = rstd (gw - xhat sum(gw xhat) / n)
//   dw = sum over rows of g xhat,  db = sum over rows of g   (column reductions)
// Statistics and sums are float32 (float64 for float64 inputs); mean and rstd are kept in that
// type for the backward, as torch's CUDA kernels keep them.
#pragma once

#include <math.h>

#include <cstdint>

#include "convert.h"
#include "dtype.h"
#include "normalize.h"

namespace treduce {

enum class NormKind : int8_t { Layer, Rms };

// One call. x, weight, bias, y, grad and grad_x in `dtype`; grad_weight and grad_bias in
// `dtype` too; mean and rstd `rows` accumulators each (float32, float64 for float64). Backward
// reads x, mean (layer_norm), rstd, weight and grad; writes whichever of grad_x, grad_weight and
// grad_bias are not null; `partials` is the CUDA backward's workspace (launch.h).
struct LayerNormArgs {
  NormKind kind = NormKind::Layer;
  DType dtype = DType::Float;
  const void* x = nullptr;
  const void* weight = nullptr;  // cols elements, or null
  const void* bias = nullptr;    // cols elements, or null (layer_norm only)
  void* y = nullptr;
  void* mean = nullptr;  // layer_norm only
  void* rstd = nullptr;
  int64_t rows = 0, cols = 1;
  double eps = 1e-5;
  const void* grad = nullptr;
  void* grad_x = nullptr;
  void* grad_weight = nullptr;
  void* grad_bias = nullptr;
  void* partials = nullptr;
  int sm_count = 132;
};

TREDUCE_HOST_DEVICE float norm_rsqrt(float v) { return 1.0f / sqrtf(v); }
TREDUCE_HOST_DEVICE double norm_rsqrt(double v) { return 1.0 / sqrt(v); }

// rstd from a row's sum of squares about the mean (layer_norm) or about 0 (rms_norm).
template <class Acc>
TREDUCE_HOST_DEVICE Acc row_rstd(Acc squares, int64_t n, double eps) {
  return norm_rsqrt(squares / Acc(n) + Acc(eps));
}

// y of one element.
template <NormKind kKind, class Acc>
TREDUCE_HOST_DEVICE Acc norm_forward_one(Acc x, Acc mean, Acc rstd, Acc w, Acc b) {
  if constexpr (kKind == NormKind::Layer) return (x - mean) * rstd * w + b;
  else return x * rstd * w;
}

// dx of one element from the row's sums: sum_g = sum(gw) (layer_norm), sum_gx = sum(gw xhat).
template <NormKind kKind, class Acc>
TREDUCE_HOST_DEVICE Acc norm_backward_one(Acc gw, Acc xhat, Acc rstd, Acc sum_g, Acc sum_gx, Acc inv_n) {
  if constexpr (kKind == NormKind::Layer) return rstd * (gw - sum_g * inv_n - xhat * sum_gx * inv_n);
  else return rstd * (gw - xhat * sum_gx * inv_n);
}

// Whether override() takes a CUDA call (aten's native_layer_norm, _fused_rms_norm and their
// backwards) for rows of `cols` elements of `bytes` each, `packs` where every row is whole
// aligned 16-byte packs: where the suite measured ours at or past torch's kernels (H100,
// benchmarks/results/h100/normalizing_norms.md). Forward: rows of 768 to 8192 bfloat16 and 1024
// float32 at 0.50-0.95x torch's time (code of ced1ca2); rows of 16384 2-byte elements since
// they are held in 1024 threads of 2 packs: layer_norm (1024, 16384) bfloat16 37.9 us against
// 51.5, rms_norm 30.8 against 46.4 (code of 61f07d4; 71.6 against 52.5 before, three reads);
// not rows of single elements (not measured). Backward (forward and backward in an eager loop):
// rows of 768 bfloat16 and 1024 float32 at 0.90-1.01x torch's time; not longer rows, where 3 of
// 6 cases were slower. The weight's combine has since dropped from ~30 to 4-6 us a call, but
// backward_kernel itself takes 2-3x its bytes' time ((4096, 2048) bfloat16 42.8 us; H100,
// torch.profiler) and the eager loop's totals swing with the host: the bound stays until the
// kernel is faster.
constexpr bool layer_norm_cuda_wins(bool backward, int bytes, int64_t cols, bool packs) {
  const int64_t forward_most = bytes == 2 ? 16384 : 1024 * int64_t(16 / bytes);
  return packs && cols <= (backward ? int64_t(1024) : forward_most);
}

// xhat of one element.
template <NormKind kKind, class Acc>
TREDUCE_HOST_DEVICE Acc norm_xhat(Acc x, Acc mean, Acc rstd) {
  if constexpr (kKind == NormKind::Layer) return (x - mean) * rstd;
  else return x * rstd;
}

}  // namespace treduce
