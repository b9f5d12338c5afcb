// The treduce ops, each once: TREDUCE_OPS(X) calls X(name, kernel, autograd, schema) for every op,
// `kernel` being the C++ type of its device kernels (reduce_common.h), `autograd` its Autograd
// kernel (autograd.cpp, in namespace treduce) and `schema` torch's schema less the name. From it
// come the schemas (TORCH_LIBRARY, treduce.cpp), the fields of a device's kernel table
// (DeviceKernels), their registration on each device's dispatch key (register_kernels) and the
// Autograd key's (autograd.cpp).
// `variant` is the second argument of sum, mean, amax and amin, as it was when sum took no dims;
// the statistics take what aten's correction overloads take, in the same order (no variant: they
// run `auto`; correction an int or a float, as torch's); any and all are torch's .dims overloads
// (an empty list of dims reduces nothing), count_nonzero its int and list overloads in one; max,
// min, argmax and argmin are the extrema with their positions (the first one; NaN wins), aten's
// max.dim, min.dim, argmax and argmin (max and min of every dim are amax and amin).
#pragma once

#define TREDUCE_OPS(X)                                                                                                \
  X(sum, SumKernel, sum_autograd,                                                                                     \
    "(Tensor self, str variant=\"auto\", int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor") \
  X(mean, SumKernel, mean_autograd,                                                                                   \
    "(Tensor self, str variant=\"auto\", int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor") \
  X(amax, ExtremumKernel, amax_autograd,                                                                              \
    "(Tensor self, str variant=\"auto\", int[1]? dim=None, bool keepdim=False) -> Tensor")                            \
  X(amin, ExtremumKernel, amin_autograd,                                                                              \
    "(Tensor self, str variant=\"auto\", int[1]? dim=None, bool keepdim=False) -> Tensor")                            \
  X(var, VarKernel, var_one<ReduceOp::Var>,                                                                           \
    "(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> Tensor")                      \
  X(std, VarKernel, var_one<ReduceOp::Std>,                                                                           \
    "(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> Tensor")                      \
  X(var_mean, VarMeanKernel, var_two<ReduceOp::VarMean>,                                                              \
    "(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> (Tensor, Tensor)")            \
  X(std_mean, VarMeanKernel, var_two<ReduceOp::StdMean>,                                                              \
    "(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> (Tensor, Tensor)")            \
  X(nansum, NanKernel, nan_autograd<ReduceOp::NanSum>,                                                                \
    "(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor")                       \
  X(nanmean, NanKernel, nan_autograd<ReduceOp::NanMean>,                                                              \
    "(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor")                       \
  X(logsumexp, LogSumExpKernel, logsumexp_autograd,                                                                   \
    "(Tensor self, int[1] dim, bool keepdim=False) -> Tensor")                                                        \
  X(prod, ProdKernel, prod_autograd,                                                                                  \
    "(Tensor self, int? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor")                          \
  X(vector_norm, NormKernel, norm_autograd,                                                                           \
    "(Tensor self, Scalar ord=2, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor")         \
  X(any, LogicKernel, logic_autograd<ReduceOp::Any>,                                                                  \
    "(Tensor self, int[1]? dim=None, bool keepdim=False) -> Tensor")                                                  \
  X(all, LogicKernel, logic_autograd<ReduceOp::All>,                                                                  \
    "(Tensor self, int[1]? dim=None, bool keepdim=False) -> Tensor")                                                  \
  X(count_nonzero, CountKernel, count_nonzero_autograd,                                                               \
    "(Tensor self, int[1]? dim=None) -> Tensor")                                                                      \
  X(aminmax, AMinMaxKernel, aminmax_autograd,                                                                         \
    "(Tensor self, *, int? dim=None, bool keepdim=False) -> (Tensor min, Tensor max)")                                \
  X(max, MaxDimKernel, max_dim_autograd<true>,                                                                        \
    "(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)")                                  \
  X(min, MaxDimKernel, max_dim_autograd<false>,                                                                       \
    "(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)")                                  \
  X(argmax, ArgKernel, arg_autograd<true>,                                                                            \
    "(Tensor self, int? dim=None, bool keepdim=False) -> Tensor")                                                     \
  X(argmin, ArgKernel, arg_autograd<false>,                                                                           \
    "(Tensor self, int? dim=None, bool keepdim=False) -> Tensor")

// softmax, log_softmax and their backwards (core/normalize.h), as aten's _softmax,
// _log_softmax and their _backward_data: a dim, a result dtype (`dtype=` as torch.softmax's: the
// input converted to it first) and, backward, the dtype of the forward's input; cross_entropy
// (core/cross_entropy.h) with class-index targets, as F.cross_entropy, and its forward (the loss,
// each sample's logsumexp and the mean's divisor, as nll_loss_forward's total_weight) and
// backward. They join the table above wherever a step is per op (schemas, device kernels,
// Autograd kernels). layer_norm and rms_norm (core/layer_norm.h) as torch.layer_norm and
// torch.rms_norm over the last dims, with forwards that also return each row's statistics (as
// aten's native_layer_norm and _fused_rms_norm) and backwards that compute what output_mask asks.
#define TREDUCE_NORMALIZING_OPS(X)                                                                                    \
  X(softmax, SoftmaxKernel, softmax_autograd<SoftmaxOp::Softmax>,                                                     \
    "(Tensor self, int dim, ScalarType? dtype=None) -> Tensor")                                                       \
  X(log_softmax, SoftmaxKernel, softmax_autograd<SoftmaxOp::LogSoftmax>,                                              \
    "(Tensor self, int dim, ScalarType? dtype=None) -> Tensor")                                                       \
  X(softmax_backward, SoftmaxBackwardKernel, softmax_backward_autograd<SoftmaxOp::SoftmaxBackward>,                   \
    "(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype) -> Tensor")                                 \
  X(log_softmax_backward, SoftmaxBackwardKernel, softmax_backward_autograd<SoftmaxOp::LogSoftmaxBackward>,            \
    "(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype) -> Tensor")                                 \
  X(cross_entropy, CrossEntropyKernel, cross_entropy_autograd,                                                        \
    "(Tensor self, Tensor target, Tensor? weight=None, int reduction=1, int ignore_index=-100, "                      \
    "float label_smoothing=0.0) -> Tensor")                                                                           \
  X(cross_entropy_forward, CrossEntropyForwardKernel, cross_entropy_forward_autograd,                                 \
    "(Tensor self, Tensor target, Tensor? weight=None, int reduction=1, int ignore_index=-100, "                      \
    "float label_smoothing=0.0) -> (Tensor loss, Tensor lse, Tensor total_weight)")                                   \
  X(cross_entropy_backward, CrossEntropyBackwardKernel, cross_entropy_backward_autograd,                              \
    "(Tensor grad_output, Tensor self, Tensor target, Tensor? weight, int reduction, int ignore_index, "              \
    "float label_smoothing, Tensor lse, Tensor total_weight) -> Tensor")                                            \
  X(layer_norm, LayerNormKernel, layer_norm_autograd,                                                                 \
    "(Tensor input, int[] normalized_shape, Tensor? weight=None, Tensor? bias=None, float eps=1e-05) -> Tensor")      \
  X(layer_norm_forward, LayerNormForwardKernel, layer_norm_forward_autograd,                                          \
    "(Tensor input, int[] normalized_shape, Tensor? weight=None, Tensor? bias=None, float eps=1e-05) -> "             \
    "(Tensor output, Tensor mean, Tensor rstd)")                                                                      \
  X(layer_norm_backward, LayerNormBackwardKernel, layer_norm_backward_autograd,                                       \
    "(Tensor grad_out, Tensor input, int[] normalized_shape, Tensor mean, Tensor rstd, Tensor? weight, "              \
    "Tensor? bias, bool[3] output_mask) -> (Tensor, Tensor, Tensor)")                                                 \
  X(rms_norm, RmsNormKernel, rms_norm_autograd,                                                                       \
    "(Tensor input, int[] normalized_shape, Tensor? weight=None, float? eps=None) -> Tensor")                         \
  X(rms_norm_forward, RmsNormForwardKernel, rms_norm_forward_autograd,                                                \
    "(Tensor input, int[] normalized_shape, Tensor? weight=None, float? eps=None) -> (Tensor output, Tensor rstd)")   \
  X(rms_norm_backward, RmsNormBackwardKernel, rms_norm_backward_autograd,                                             \
    "(Tensor grad_out, Tensor input, int[] normalized_shape, Tensor rstd, Tensor? weight, bool[2] output_mask) -> "   \
    "(Tensor, Tensor)")

#define TREDUCE_ALL_OPS(X) TREDUCE_OPS(X) TREDUCE_NORMALIZING_OPS(X)
