// variant="exact" on CUDA (kernels/exact.cuh): the four floating dtypes, and _exact_round.
#include "kernels/exact.cuh"

namespace treduce::cuda {

// The result's type: the input's, or a wider one that holds each element exactly (dtype=).
template <class T>
cudaError_t exact_into(const ReduceArgs& a, int64_t* state, size_t* workspace_bytes) {
  switch (a.types.out) {
    case DType::Float:
      if constexpr (sizeof(T) <= 4) return run_exact<T, float>(a, state, workspace_bytes);
      break;
    case DType::Double: return run_exact<T, double>(a, state, workspace_bytes);
    default:
      if (a.types.out == a.types.in) return run_exact<T, T>(a, state, workspace_bytes);
  }
  return cudaErrorInvalidValue;
}

cudaError_t launch_exact(const ReduceArgs& a, int64_t* state, size_t* workspace_bytes) {
  switch (a.types.in) {
    case DType::Half: return exact_into<__half>(a, state, workspace_bytes);
    case DType::BFloat16: return exact_into<__nv_bfloat16>(a, state, workspace_bytes);
    case DType::Float: return exact_into<float>(a, state, workspace_bytes);
    case DType::Double: return exact_into<double>(a, state, workspace_bytes);
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
