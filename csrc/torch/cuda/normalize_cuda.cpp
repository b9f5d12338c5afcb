// softmax, log_softmax and their backwards, cross_entropy, layer_norm and rms_norm on CUDA
// tensors: the device guard, the current stream, then the torch-free launchers
// (core/cuda/normalize.cu, cross_entropy.cu, layer_norm.cu). Never synchronises.
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>

#include "../../core/cuda/launch.h"
#include "../reduce_common.h"
#include "../row_norm_entries.h"

namespace treduce::cuda {
namespace {

at::Tensor finish(PreparedSoftmax& p) {
  const cudaDeviceProp* props = at::cuda::getCurrentDeviceProperties();
  p.args.sm_count = props->multiProcessorCount;
  p.args.cc_major = props->major;
  C10_CUDA_CHECK(launch_normalize(p.args, at::cuda::getCurrentCUDAStream()));
  return p.convert_to ? p.out.to(*p.convert_to) : p.out;
}

template <SoftmaxOp kOp>
at::Tensor softmax_cuda(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype) {
  const c10::cuda::CUDAGuard guard(self.device());
  PreparedSoftmax p = prepare_softmax(kOp, self, dim, dtype);
  return finish(p);
}

template <SoftmaxOp kOp>
at::Tensor softmax_backward_cuda(const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                                 at::ScalarType input_dtype) {
  const c10::cuda::CUDAGuard guard(output.device());
  PreparedSoftmax p = prepare_softmax_backward(kOp, grad, output, dim, input_dtype);
  return finish(p);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> cross_entropy_forward_cuda(const at::Tensor& self,
                                                                          const at::Tensor& target,
                                                                          const std::optional<at::Tensor>& weight,
                                                                          int64_t reduction, int64_t ignore_index,
                                                                          double label_smoothing) {
  const c10::cuda::CUDAGuard guard(self.device());
  PreparedCrossEntropy p = prepare_cross_entropy(self, target, weight, reduction, ignore_index, label_smoothing, false);
  p.args.sm_count = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  C10_CUDA_CHECK(launch_cross_entropy(p.args, false, at::cuda::getCurrentCUDAStream()));
  return {p.loss, p.lse, p.total_weight};
}

at::Tensor cross_entropy_cuda(const at::Tensor& self, const at::Tensor& target, const std::optional<at::Tensor>& weight,
                              int64_t reduction, int64_t ignore_index, double label_smoothing) {
  return std::get<0>(cross_entropy_forward_cuda(self, target, weight, reduction, ignore_index, label_smoothing));
}

at::Tensor cross_entropy_backward_cuda(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                                       const std::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                                       double label_smoothing, const at::Tensor& lse, const at::Tensor& total_weight) {
  const c10::cuda::CUDAGuard guard(self.device());
  PreparedCrossEntropy p = prepare_cross_entropy_backward(grad, self, target, weight, reduction, ignore_index,
                                                          label_smoothing, lse, total_weight);
  p.args.sm_count = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  C10_CUDA_CHECK(launch_cross_entropy(p.args, true, at::cuda::getCurrentCUDAStream()));
  return p.grad_x;
}

// Both norms on this device, for RowNormEntries (row_norm_entries.h).
struct Norms {
  template <NormKind kKind>
  static std::tuple<at::Tensor, at::Tensor, at::Tensor> forward(const at::Tensor& input, at::IntArrayRef shape,
                                                                const std::optional<at::Tensor>& weight,
                                                                const std::optional<at::Tensor>& bias,
                                                                std::optional<double> eps) {
    const c10::cuda::CUDAGuard guard(input.device());
    PreparedLayerNorm p = prepare_layer_norm(kKind, input, shape, weight, bias, eps);
    if (!p.empty) {
      p.args.sm_count = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
      C10_CUDA_CHECK(launch_layer_norm(p.args, false, at::cuda::getCurrentCUDAStream()));
    }
    return {p.y, p.mean, p.rstd};
  }

  template <NormKind kKind>
  static std::tuple<at::Tensor, at::Tensor, at::Tensor> backward(const at::Tensor& grad, const at::Tensor& input,
                                                               at::IntArrayRef shape, const at::Tensor& mean,
                                                               const at::Tensor& rstd,
                                                               const std::optional<at::Tensor>& weight,
                                                               const std::optional<at::Tensor>& bias,
                                                               std::array<bool, 3> mask) {
    const c10::cuda::CUDAGuard guard(input.device());
    PreparedLayerNorm p = prepare_layer_norm_backward(kKind, grad, input, shape, mean, rstd, weight, bias, mask);
    if (!p.empty) {
      p.args.sm_count = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
      at::Tensor partials;
      if (const size_t bytes = layer_norm_workspace(p.args)) {
        partials = at::empty({int64_t(bytes)}, p.x.options().dtype(at::kByte));
        p.args.partials = partials.mutable_data_ptr();
      }
      C10_CUDA_CHECK(launch_layer_norm(p.args, true, at::cuda::getCurrentCUDAStream()));
    }
    return {p.grad_x, p.grad_weight, p.grad_bias};
  }
};

}  // namespace

void set_normalizing_kernels(DeviceKernels& k) {
  RowNormEntries<Norms>::set(k);
  k.cross_entropy = &cross_entropy_cuda;
  k.cross_entropy_forward = &cross_entropy_forward_cuda;
  k.cross_entropy_backward = &cross_entropy_backward_cuda;
  k.softmax = &softmax_cuda<SoftmaxOp::Softmax>;
  k.log_softmax = &softmax_cuda<SoftmaxOp::LogSoftmax>;
  k.softmax_backward = &softmax_backward_cuda<SoftmaxOp::SoftmaxBackward>;
  k.log_softmax_backward = &softmax_backward_cuda<SoftmaxOp::LogSoftmaxBackward>;
}

}  // namespace treduce::cuda
