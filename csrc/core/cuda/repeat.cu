// Results that repeat along kept dims expanded in the input, copied from the distinct ones into
// the dense result (plan.h's RepeatPlan says why and how it is folded).
#include "kernels/common.cuh"

namespace treduce::cuda {
namespace {

constexpr int kRepeatBlock = 256;
constexpr int kRepeatUnroll = 4;  // words a thread, all loaded before any is stored

// T: an element's bits (the copy never looks at its dtype); kPer: elements a word (1: an
// element; else 16 bytes of them); kSplat: a word is kPer copies of one element. The distinct
// results are few and read many times (from L2); the stores are the cost.
template <class T, int kPer, bool kSplat>
__global__ void __launch_bounds__(kRepeatBlock) repeat_kernel(const T* src, T* out, int64_t words, RunIndex index) {
  using Word = std::conditional_t<kPer == 1, T, uint4>;
  constexpr int64_t kTile = int64_t(kRepeatBlock) * kRepeatUnroll;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();  // the distinct results are written
  cudaTriggerProgrammaticLaunchCompletion();
#endif
  for (int64_t tile = blockIdx.x; tile * kTile < words; tile += gridDim.x) {
    Word w[kRepeatUnroll];
#pragma unroll
    for (int u = 0; u < kRepeatUnroll; ++u) {
      const int64_t k = tile * kTile + u * kRepeatBlock + threadIdx.x;
      if (k >= words) continue;
      const T* p = src + index.in_offset(k);
      if constexpr (kPer == 1) {
        w[u] = *p;
      } else if constexpr (kSplat) {
        T e[kPer];
#pragma unroll
        for (int j = 0; j < kPer; ++j) e[j] = *p;
        memcpy(&w[u], e, sizeof(Word));
      } else {
        w[u] = *reinterpret_cast<const uint4*>(p);
      }
    }
#pragma unroll
    for (int u = 0; u < kRepeatUnroll; ++u) {
      const int64_t k = tile * kTile + u * kRepeatBlock + threadIdx.x;
      if (k < words) reinterpret_cast<Word*>(out)[k] = w[u];
    }
  }
}

template <class T, int kPer, bool kSplat>
cudaError_t launch_as(const RepeatPlan& p, const void* src, void* out, const ReduceArgs& a) {
  const auto kernel = repeat_kernel<T, kPer, kSplat>;
  const int64_t most = int64_t(a.sm_count) * resident_blocks_per_sm<repeat_kernel<T, kPer, kSplat>>(kRepeatBlock);
  const int64_t blocks = std::clamp<int64_t>(ceil_div(p.words, int64_t(kRepeatBlock) * kRepeatUnroll), 1, most);
  return launch_dependent(kernel, dim3(unsigned(blocks)), dim3(kRepeatBlock), a, static_cast<const T*>(src),
                          static_cast<T*>(out), p.words, p.index);
}

template <class T>
cudaError_t launch_of(const RepeatPlan& p, const void* src, void* out, const ReduceArgs& a) {
  constexpr int kPer = 16 / int(sizeof(T));
  if (p.per == 1) return launch_as<T, 1, false>(p, src, out, a);
  if (p.per != kPer) return cudaErrorInvalidValue;
  return p.splat ? launch_as<T, kPer, true>(p, src, out, a) : launch_as<T, kPer, false>(p, src, out, a);
}

}  // namespace

cudaError_t launch_repeat(const RepeatPlan& p, const void* src, void* out, const ReduceArgs& a) {
  if (p.words == 0) return cudaSuccess;
  switch (p.bytes) {
    case 1: return launch_of<uint8_t>(p, src, out, a);
    case 2: return launch_of<uint16_t>(p, src, out, a);
    case 4: return launch_of<uint32_t>(p, src, out, a);
    case 8: return launch_of<unsigned long long>(p, src, out, a);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace treduce::cuda
