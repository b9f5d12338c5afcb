// layer_norm's and rms_norm's entries of a device's kernel table (ops.h), from the device's two
// kernels for both norms: Device::forward<kind> -> (y, mean, rstd) and Device::backward<kind>
// -> (dx, dw, db) with layer_norm's signature. The adapters to each op's signature are the same
// on every device (torch/cpu/normalize_cpu.cpp, torch/cuda/normalize_cuda.cpp).
#pragma once

#include "reduce_common.h"

namespace treduce {

template <class Device>
struct RowNormEntries {
  static std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_forward(const at::Tensor& input,
                                                                           at::IntArrayRef shape,
                                                                           const std::optional<at::Tensor>& weight,
                                                                           const std::optional<at::Tensor>& bias,
                                                                           double eps) {
    return Device::template forward<NormKind::Layer>(input, shape, weight, bias, eps);
  }

  static at::Tensor layer_norm(const at::Tensor& input, at::IntArrayRef shape, const std::optional<at::Tensor>& weight,
                               const std::optional<at::Tensor>& bias, double eps) {
    return std::get<0>(layer_norm_forward(input, shape, weight, bias, eps));
  }

  static std::tuple<at::Tensor, at::Tensor> rms_norm_forward(const at::Tensor& input, at::IntArrayRef shape,
                                                             const std::optional<at::Tensor>& weight,
                                                             std::optional<double> eps) {
    auto [y, mean, rstd] = Device::template forward<NormKind::Rms>(input, shape, weight, std::nullopt, eps);
    return {y, rstd};
  }

  static at::Tensor rms_norm(const at::Tensor& input, at::IntArrayRef shape, const std::optional<at::Tensor>& weight,
                             std::optional<double> eps) {
    return std::get<0>(rms_norm_forward(input, shape, weight, eps));
  }

  static std::tuple<at::Tensor, at::Tensor> rms_norm_backward(const at::Tensor& grad, const at::Tensor& input,
                                                              at::IntArrayRef shape, const at::Tensor& rstd,
                                                              const std::optional<at::Tensor>& weight,
                                                              std::array<bool, 2> mask) {
    auto [dx, dw, db] = Device::template backward<NormKind::Rms>(grad, input, shape, at::Tensor(), rstd, weight,
                                                                 std::nullopt, {mask[0], mask[1], false});
    return {dx, dw};
  }

  static void set(DeviceKernels& k) {
    k.layer_norm = &layer_norm;
    k.layer_norm_forward = &layer_norm_forward;
    k.layer_norm_backward = &Device::template backward<NormKind::Layer>;
    k.rms_norm = &rms_norm;
    k.rms_norm_forward = &rms_norm_forward;
    k.rms_norm_backward = &rms_norm_backward;
  }
};

}  // namespace treduce
