// The treduce ops, each once: TREDUCE_OPS(X) calls X(name, kernel, schema) for every op, `kernel`
// being the C++ type of its device kernels (reduce_common.h) and `schema` torch's schema less the
// name. From it come the schemas (TORCH_LIBRARY, treduce.cpp), the fields of a device's kernel
// table (DeviceKernels) and their registration on each device's dispatch key (register_kernels).
// `variant` is the second argument of sum, mean, amax and amin, as it was when sum took no dims;
// the statistics take what aten's correction overloads take, in the same order (no variant: they
// run `auto`; correction an int or a float, as torch's); any and all are torch's .dims overloads
// (an empty list of dims reduces nothing), count_nonzero its int and list overloads in one; max,
// min, argmax and argmin are the extrema with their positions (the first one; NaN wins), aten's
// max.dim, min.dim, argmax and argmin (max and min of every dim are amax and amin).
#pragma once

#define TREDUCE_OPS(X)                                                                                            \
  X(sum, SumKernel,                                                                                               \
    "(Tensor self, str variant=\"auto\", int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor") \
  X(mean, SumKernel,                                                                                              \
    "(Tensor self, str variant=\"auto\", int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor") \
  X(amax, ExtremumKernel, "(Tensor self, str variant=\"auto\", int[1]? dim=None, bool keepdim=False) -> Tensor")   \
  X(amin, ExtremumKernel, "(Tensor self, str variant=\"auto\", int[1]? dim=None, bool keepdim=False) -> Tensor")   \
  X(var, VarKernel, "(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> Tensor")   \
  X(std, VarKernel, "(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> Tensor")   \
  X(var_mean, VarMeanKernel,                                                                                      \
    "(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> (Tensor, Tensor)")        \
  X(std_mean, VarMeanKernel,                                                                                      \
    "(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> (Tensor, Tensor)")        \
  X(nansum, NanKernel, "(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor") \
  X(nanmean, NanKernel, "(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor") \
  X(logsumexp, LogSumExpKernel, "(Tensor self, int[1] dim, bool keepdim=False) -> Tensor")                        \
  X(prod, ProdKernel, "(Tensor self, int? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor")     \
  X(vector_norm, NormKernel,                                                                                      \
    "(Tensor self, Scalar ord=2, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor")     \
  X(any, LogicKernel, "(Tensor self, int[1]? dim=None, bool keepdim=False) -> Tensor")                            \
  X(all, LogicKernel, "(Tensor self, int[1]? dim=None, bool keepdim=False) -> Tensor")                            \
  X(count_nonzero, CountKernel, "(Tensor self, int[1]? dim=None) -> Tensor")                                      \
  X(aminmax, AMinMaxKernel, "(Tensor self, *, int? dim=None, bool keepdim=False) -> (Tensor min, Tensor max)")     \
  X(max, MaxDimKernel, "(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)")           \
  X(min, MaxDimKernel, "(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)")           \
  X(argmax, ArgKernel, "(Tensor self, int? dim=None, bool keepdim=False) -> Tensor")                              \
  X(argmin, ArgKernel, "(Tensor self, int? dim=None, bool keepdim=False) -> Tensor")
