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
