// variant="exact" on CUDA (kernels/exact.cuh): the four floating dtypes, and _exact_round.
#include "kernels/exact.cuh"

namespace treduce::cuda {

cudaError_t launch_exact(const ReduceArgs& a, int64_t* state, size_t* workspace_bytes) {
  switch (a.types.in) {
    case DType::Half: return run_exact<__half>(a, state, workspace_bytes);
    case DType::BFloat16: return run_exact<__nv_bfloat16>(a, state, workspace_bytes);
    case DType::Float: return run_exact<float>(a, state, workspace_bytes);
    case DType::Double: return run_exact<double>(a, state, workspace_bytes);
    default: return cudaErrorInvalidValue;
  }
}

template <class T>
cudaError_t round_as(const int64_t* state, int64_t n, void* out, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const unsigned blocks = unsigned(std::min<int64_t>((n + 127) / 128, 4096));
  exact_round_kernel<T><<<blocks, 128, 0, stream>>>(state, n, static_cast<T*>(out));
  return last_launch_error();
}

cudaError_t launch_exact_round(const int64_t* state, int64_t n, void* out, DType dtype, cudaStream_t stream) {
  switch (dtype) {
    case DType::Half: return round_as<__half>(state, n, out, stream);
    case DType::BFloat16: return round_as<__nv_bfloat16>(state, n, out, stream);
    case DType::Float: return round_as<float>(state, n, out, stream);
    case DType::Double: return round_as<double>(state, n, out, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace treduce::cuda
