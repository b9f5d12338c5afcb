// launch_cross_entropy: the fused cross_entropy of kernels/cross_entropy.cuh for every floating
// logits dtype.
#include "kernels/cross_entropy.cuh"

namespace treduce::cuda {

cudaError_t launch_cross_entropy(const CrossEntropyArgs& a, bool backward, cudaStream_t stream) {
  switch (a.dtype) {
    case DType::Half: return xent::launch<__half>(a, backward, stream);
    case DType::BFloat16: return xent::launch<__nv_bfloat16>(a, backward, stream);
    case DType::Float: return xent::launch<float>(a, backward, stream);
    case DType::Double: return xent::launch<double>(a, backward, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace treduce::cuda
