// launch_normalize: softmax, log_softmax and their backwards (kernels/normalize.cuh) for every
// (op, input dtype, result dtype) pair normalize_pair takes.
#include "kernels/normalize.cuh"

namespace treduce::cuda {

namespace {

template <SoftmaxOp kOp>
cudaError_t launch_op(const NormalizeArgs& a, cudaStream_t stream) {
  using norm::launch;
  const DType in = a.in, out = a.out;
  if (in == out) {
    return norm::visit_floating(in, [&](auto zero) {
      using T = decltype(zero);
      return launch<kOp, T, T>(a, stream);
    });
  }
  if constexpr (is_backward(kOp)) {
    if (in == DType::Float && out == DType::Half) return launch<kOp, float, __half>(a, stream);
    if (in == DType::Float && out == DType::BFloat16) return launch<kOp, float, __nv_bfloat16>(a, stream);
  } else {
    if (in == DType::Half && out == DType::Float) return launch<kOp, __half, float>(a, stream);
    if (in == DType::BFloat16 && out == DType::Float) return launch<kOp, __nv_bfloat16, float>(a, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t launch_normalize(const NormalizeArgs& a, cudaStream_t stream) {
  if (a.outer * a.size * a.inner == 0) return cudaSuccess;
  switch (a.op) {
    case SoftmaxOp::Softmax: return launch_op<SoftmaxOp::Softmax>(a, stream);
    case SoftmaxOp::LogSoftmax: return launch_op<SoftmaxOp::LogSoftmax>(a, stream);
    case SoftmaxOp::SoftmaxBackward: return launch_op<SoftmaxOp::SoftmaxBackward>(a, stream);
    case SoftmaxOp::LogSoftmaxBackward: return launch_op<SoftmaxOp::LogSoftmaxBackward>(a, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace treduce::cuda
