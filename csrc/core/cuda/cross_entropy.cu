// launch_cross_entropy: the fused cross_entropy of kernels/cross_entropy.cuh for every floating
// logits dtype.
#include "kernels/cross_entropy.cuh"

namespace treduce::cuda {

cudaError_t launch_cross_entropy(const CrossEntropyArgs& a, bool backward, cudaStream_t stream) {
  return norm::visit_floating(a.dtype, [&](auto zero) { return xent::launch<decltype(zero)>(a, backward, stream); });
}

}  // namespace treduce::cuda
