// cross_entropy on the GPU (core/cross_entropy.h says what it computes):
//  - samples whose classes are adjacent (inner == 1): a block a sample, one read of its logits
//    (16-byte packs where rows start on them) forward, one read and one write backward;
//  - classes inner apart ((N, C, d...)): a thread a sample, adjacent threads adjacent samples;
//  - the reduction: one block sums the per-sample losses and weights in a fixed order.
// Targets out of [0, C) (not ignore_index) give a NaN loss and gradient: checking them on the
// host would synchronise.
#pragma once

#include "../../cross_entropy.h"
#include "common.cuh"
#include "normalize.cuh"

namespace treduce::cuda::xent {

using norm::Pack;
inline constexpr int kReduceThreads = 1024;
inline constexpr int kColumnsThreads = 256;
inline constexpr int kRowLoads = 4;  // rows_forward_kernel's packs in flight a thread

template <class In, class Acc>
__device__ __forceinline__ Acc weight_of(const In* weight, int64_t c) {
  return weight ? element_cast<Acc>(weight[c]) : Acc(1);
}

template <class Acc>
__device__ __forceinline__ XentStats<Acc> warp_stats(XentStats<Acc> s) {
#pragma unroll
  for (int m = 16; m > 0; m /= 2) {
    XentStats<Acc> o;
    o.e.max = __shfl_xor_sync(0xffffffffu, s.e.max, m);
    o.e.sum = __shfl_xor_sync(0xffffffffu, s.e.sum, m);
    o.smooth = __shfl_xor_sync(0xffffffffu, s.smooth, m);
    o.weight = __shfl_xor_sync(0xffffffffu, s.weight, m);
    s = XentStats<Acc>::combine(s, o);
  }
  return s;
}

// The sample's result from its statistics, by the thread that holds them.
template <class In, class Acc>
__device__ __forceinline__ void finish_sample(const CrossEntropyArgs& a, int64_t s, const In* x, int64_t t_at,
                                              XentStats<Acc> st, Acc weight_sum) {
  const int64_t t = a.target[s];
  const In* weight = static_cast<const In*>(a.weight);
  Acc loss = Acc(0), w_t = Acc(0);
  const Acc lse = st.e.max + norm_log(st.e.sum);
  if (t != a.ignore_index) {
    if (t < 0 || t >= a.classes) {
      loss = w_t = NAN;
    } else {
      w_t = weight_of<In, Acc>(weight, t);
      loss = xent_loss<Acc>(lse, st.e.max, element_cast<Acc>(x[t_at + t * a.inner]), w_t, st.smooth, weight_sum,
                            Acc(a.smoothing), a.classes);
    }
  }
  static_cast<Acc*>(a.lse)[s] = lse;
  if (a.reduction == LossReduction::None) {
    static_cast<In*>(a.loss)[s] = element_cast<In>(loss);
  } else {
    static_cast<Acc*>(a.sample_loss)[s] = loss;
    static_cast<Acc*>(a.sample_weight)[s] = w_t;
  }
}

// A block a sample of adjacent classes.
template <class In, class Acc, int kVec>
__global__ void __launch_bounds__(512) rows_forward_kernel(CrossEntropyArgs a) {
  using InPack = Pack<In, kVec>;
  const int64_t s = blockIdx.x;
  const In* x = static_cast<const In*>(a.x);
  const In* weight = static_cast<const In*>(a.weight);
  const In* row = x + s * a.classes;
  const bool smooth = a.smoothing != 0.0;
  XentStats<Acc> st = XentStats<Acc>::identity();
  const int64_t packs = a.classes / kVec;
  const InPack* prow = reinterpret_cast<const InPack*>(row);
  if (!smooth) {
    // kRowLoads packs a thread at once; their maximum first, then their exps against it, combined
    // into the running statistics once a round (not an exp and a branch an element to move it)
    for (int64_t k0 = threadIdx.x; k0 < packs; k0 += int64_t(blockDim.x) * kRowLoads) {
      const auto live = [&](int u) { return k0 + int64_t(u) * blockDim.x < packs; };
      InPack p[kRowLoads];
#pragma unroll
      for (int u = 0; u < kRowLoads; ++u)
        if (live(u)) p[u] = prow[k0 + int64_t(u) * blockDim.x];
      st.e = ExpSum<Acc>::combine(st.e, norm::packs_exp_sum<Acc>(p, live, [] {}));
    }
  } else {
    for (int64_t k = threadIdx.x; k < packs; k += blockDim.x) {
      const InPack p = prow[k];
#pragma unroll
      for (int e = 0; e < kVec; ++e) st.add(element_cast<Acc>(p.v[e]), weight_of<In, Acc>(weight, k * kVec + e));
    }
  }
  __shared__ XentStats<Acc> shared[33];
  st = warp_stats(st);
  st = norm::block_combine(st, [](XentStats<Acc> u, XentStats<Acc> v) { return XentStats<Acc>::combine(u, v); }, shared);
  if (threadIdx.x == 0) finish_sample<In, Acc>(a, s, x, s * a.classes, st, st.weight);
}

// A thread a sample of classes inner apart.
template <class In, class Acc>
__global__ void __launch_bounds__(kColumnsThreads) columns_forward_kernel(CrossEntropyArgs a) {
  const int64_t s = int64_t(blockIdx.x) * kColumnsThreads + threadIdx.x;
  if (s >= a.outer * a.inner) return;
  const In* x = static_cast<const In*>(a.x);
  const In* weight = static_cast<const In*>(a.weight);
  const int64_t base = (s / a.inner) * a.classes * a.inner + s % a.inner;
  const bool smooth = a.smoothing != 0.0;
  XentStats<Acc> st = XentStats<Acc>::identity();
  for (int64_t c = 0; c < a.classes; ++c)
    st.add(element_cast<Acc>(x[base + c * a.inner]), smooth ? weight_of<In, Acc>(weight, c) : Acc(0));
  finish_sample<In, Acc>(a, s, x, base, st, st.weight);
}

// The per-sample losses and weights summed: thread t the samples t, t + T, ... in order, then
// the threads in a fixed tree; the mean divides by the summed weights.
template <class In, class Acc>
__global__ void __launch_bounds__(kReduceThreads) reduce_kernel(CrossEntropyArgs a) {
  const int64_t n = a.outer * a.inner;
  const Acc* losses = static_cast<const Acc*>(a.sample_loss);
  const Acc* weights = static_cast<const Acc*>(a.sample_weight);
  Acc l = Acc(0), w = Acc(0);
  for (int64_t s = threadIdx.x; s < n; s += kReduceThreads) l += losses[s], w += weights[s];
  __shared__ Acc sl[kReduceThreads], sw[kReduceThreads];
  sl[threadIdx.x] = l, sw[threadIdx.x] = w;
  for (int step = kReduceThreads / 2; step > 0; step /= 2) {
    __syncthreads();
    if (int(threadIdx.x) < step) {
      sl[threadIdx.x] = l = l + sl[threadIdx.x + step];
      sw[threadIdx.x] = w = w + sw[threadIdx.x + step];
    }
  }
  if (threadIdx.x == 0) {
    *static_cast<Acc*>(a.total_weight) = w;
    *static_cast<In*>(a.loss) = element_cast<In>(a.reduction == LossReduction::Mean ? l / w : l);
  }
}

// The incoming gradient of sample s.
template <class In, class Acc>
__device__ __forceinline__ Acc grad_of(const CrossEntropyArgs& a, int64_t s) {
  const In* g = static_cast<const In*>(a.grad);
  if (a.reduction == LossReduction::None) return element_cast<Acc>(g[s]);
  const Acc g0 = element_cast<Acc>(g[0]);
  return a.reduction == LossReduction::Mean ? g0 / *static_cast<const Acc*>(a.total_weight) : g0;
}

// Backward, a block a sample of adjacent classes: W (with smoothing and weights) summed first.
template <class In, class Acc, int kVec>
__global__ void __launch_bounds__(512) rows_backward_kernel(CrossEntropyArgs a) {
  using InPack = Pack<In, kVec>;
  const int64_t s = blockIdx.x;
  const In* weight = static_cast<const In*>(a.weight);
  const InPack* row = reinterpret_cast<const InPack*>(static_cast<const In*>(a.x) + s * a.classes);
  InPack* dst = reinterpret_cast<InPack*>(static_cast<In*>(a.grad_x) + s * a.classes);
  const int64_t packs = a.classes / kVec;
  const int64_t t = a.target[s];
  const Acc smoothing = Acc(a.smoothing);
  Acc weight_sum = Acc(a.classes);
  if (smoothing != Acc(0) && weight) {
    __shared__ Acc shared[33];
    Acc w = Acc(0);
    for (int64_t c = threadIdx.x; c < a.classes; c += blockDim.x) w += element_cast<Acc>(weight[c]);
    weight_sum = norm::block_combine(norm::group_sum<32>(w), [](Acc u, Acc v) { return u + v; }, shared);
  }
  const bool ignored = t == a.ignore_index;
  const bool valid = t >= 0 && t < a.classes;
  const Acc g = ignored ? Acc(0) : valid ? grad_of<In, Acc>(a, s) : Acc(NAN);
  const Acc w_t = valid ? weight_of<In, Acc>(weight, t) : Acc(0);
  const Acc lse = static_cast<const Acc*>(a.lse)[s];
  for (int64_t k = threadIdx.x; k < packs; k += blockDim.x) {
    const InPack p = row[k];
    InPack r;
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const int64_t c = k * kVec + e;
      const Acc w_c = smoothing != Acc(0) ? weight_of<In, Acc>(weight, c) : Acc(0);
      r.v[e] = element_cast<In>(
          ignored ? Acc(0) : xent_grad<Acc>(element_cast<Acc>(p.v[e]), lse, c == t, w_t, w_c, weight_sum, g, smoothing, a.classes));
    }
    dst[k] = r;
  }
}

template <class In, class Acc>
__global__ void __launch_bounds__(kColumnsThreads) columns_backward_kernel(CrossEntropyArgs a) {
  const int64_t s = int64_t(blockIdx.x) * kColumnsThreads + threadIdx.x;
  if (s >= a.outer * a.inner) return;
  const In* x = static_cast<const In*>(a.x);
  const In* weight = static_cast<const In*>(a.weight);
  In* dst = static_cast<In*>(a.grad_x);
  const int64_t base = (s / a.inner) * a.classes * a.inner + s % a.inner;
  const int64_t t = a.target[s];
  const Acc smoothing = Acc(a.smoothing);
  Acc weight_sum = Acc(a.classes);
  if (smoothing != Acc(0) && weight) {
    weight_sum = Acc(0);
    for (int64_t c = 0; c < a.classes; ++c) weight_sum += element_cast<Acc>(weight[c]);
  }
  const bool ignored = t == a.ignore_index;
  const bool valid = t >= 0 && t < a.classes;
  const Acc g = ignored ? Acc(0) : valid ? grad_of<In, Acc>(a, s) : Acc(NAN);
  const Acc w_t = valid ? weight_of<In, Acc>(weight, t) : Acc(0);
  const Acc lse = static_cast<const Acc*>(a.lse)[s];
  for (int64_t c = 0; c < a.classes; ++c) {
    const int64_t at = base + c * a.inner;
    const Acc w_c = smoothing != Acc(0) ? weight_of<In, Acc>(weight, c) : Acc(0);
    dst[at] = element_cast<In>(
        ignored ? Acc(0) : xent_grad<Acc>(element_cast<Acc>(x[at]), lse, c == t, w_t, w_c, weight_sum, g, smoothing, a.classes));
  }
}

template <class In>
cudaError_t launch(const CrossEntropyArgs& a, bool backward, cudaStream_t stream) {
  using Acc = NormAcc<In>;
  constexpr int kVec = 16 / sizeof(In);
  const int64_t samples = a.outer * a.inner;
  if (samples == 0) return cudaSuccess;
  if (a.inner > 1) {
    const unsigned blocks = unsigned((samples + kColumnsThreads - 1) / kColumnsThreads);
    if (backward) columns_backward_kernel<In, Acc><<<blocks, kColumnsThreads, 0, stream>>>(a);
    else columns_forward_kernel<In, Acc><<<blocks, kColumnsThreads, 0, stream>>>(a);
  } else {
    if (samples > 0x7fffffff) return cudaErrorInvalidValue;
    const void* out = backward ? a.grad_x : nullptr;
    const bool packs = a.classes % kVec == 0 && reinterpret_cast<uintptr_t>(a.x) % 16 == 0 &&
                       (!backward || reinterpret_cast<uintptr_t>(out) % 16 == 0);
    int threads = 64;  // (about kRowLoads packs a thread)
    while (threads < 512 && int64_t(threads) * kRowLoads * (packs ? kVec : 1) < a.classes) threads *= 2;
    if (backward) {
      if (packs) rows_backward_kernel<In, Acc, kVec><<<unsigned(samples), threads, 0, stream>>>(a);
      else rows_backward_kernel<In, Acc, 1><<<unsigned(samples), threads, 0, stream>>>(a);
    } else {
      if (packs) rows_forward_kernel<In, Acc, kVec><<<unsigned(samples), threads, 0, stream>>>(a);
      else rows_forward_kernel<In, Acc, 1><<<unsigned(samples), threads, 0, stream>>>(a);
    }
  }
  if (!backward && a.reduction != LossReduction::None) reduce_kernel<In, Acc><<<1, kReduceThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace treduce::cuda::xent
