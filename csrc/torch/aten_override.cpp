// torch_reduce.override()'s default mode: while a block is open, torch_reduce's kernels are the
// CPU and CUDA kernels of aten's reductions. Every caller of aten::sum and the rest reaches them
// (torch.sum from Python, the sums autograd makes in C++ to undo a broadcast, other
// extensions' at::sum), with no Python on the way, and below the keys that carry torch's own
// rules (autograd, autocast, torch.func, tensor subclasses), which therefore work as without
// the override. A call the ops do not take goes straight to torch's own backend kernel
// (at::cpu::sum, at::cuda::sum, ...), not back through the dispatcher.
//
// Registrations are process-wide: the first block to open registers the kernels, the last to
// close removes them (a count of open blocks, under a mutex); the outcome of every call is
// counted here, by op and reason, and read by the Python blocks.
#include <ATen/core/Tensor.h>
#include <ATen/ops/amax_cpu_dispatch.h>
#include <ATen/ops/amin_cpu_dispatch.h>
#include <ATen/ops/mean_cpu_dispatch.h>
#include <ATen/ops/sum_cpu_dispatch.h>
#include <ATen/ops/std_cpu_dispatch.h>
#include <ATen/ops/std_mean_cpu_dispatch.h>
#include <ATen/ops/var_cpu_dispatch.h>
#include <ATen/ops/var_mean_cpu_dispatch.h>
#include <ATen/ops/nansum_cpu_dispatch.h>
#include <ATen/ops/logsumexp_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/prod_cpu_dispatch.h>
#include <ATen/ops/linalg_vector_norm_cpu_dispatch.h>
#include <ATen/ops/any_cpu_dispatch.h>
#include <ATen/ops/all_cpu_dispatch.h>
#include <ATen/ops/count_nonzero_cpu_dispatch.h>
#include <ATen/ops/aminmax_cpu_dispatch.h>
#include <ATen/ops/max_cpu_dispatch.h>
#include <ATen/ops/min_cpu_dispatch.h>
#include <ATen/ops/argmax_cpu_dispatch.h>
#include <ATen/ops/argmin_cpu_dispatch.h>
#include <ATen/ops/_softmax_cpu_dispatch.h>
#include <ATen/ops/_log_softmax_cpu_dispatch.h>
#include <ATen/ops/_softmax_backward_data_cpu_dispatch.h>
#include <ATen/ops/_log_softmax_backward_data_cpu_dispatch.h>
#include <ATen/ops/cross_entropy_loss_compositeimplicitautograd_dispatch.h>
#include <c10/core/WrapDimMinimal.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#ifdef TREDUCE_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/amax_cuda_dispatch.h>
#include <ATen/ops/amin_cuda_dispatch.h>
#include <ATen/ops/mean_cuda_dispatch.h>
#include <ATen/ops/sum_cuda_dispatch.h>
#include <ATen/ops/std_cuda_dispatch.h>
#include <ATen/ops/std_mean_cuda_dispatch.h>
#include <ATen/ops/var_cuda_dispatch.h>
#include <ATen/ops/var_mean_cuda_dispatch.h>
#include <ATen/ops/nansum_cuda_dispatch.h>
#include <ATen/ops/prod_cuda_dispatch.h>
#include <ATen/ops/linalg_vector_norm_cuda_dispatch.h>
#include <ATen/ops/any_cuda_dispatch.h>
#include <ATen/ops/all_cuda_dispatch.h>
#include <ATen/ops/count_nonzero_cuda_dispatch.h>
#include <ATen/ops/aminmax_cuda_dispatch.h>
#include <ATen/ops/max_cuda_dispatch.h>
#include <ATen/ops/min_cuda_dispatch.h>
#include <ATen/ops/argmax_cuda_dispatch.h>
#include <ATen/ops/argmin_cuda_dispatch.h>
#include <ATen/ops/_softmax_cuda_dispatch.h>
#include <ATen/ops/_log_softmax_cuda_dispatch.h>
#include <ATen/ops/_softmax_backward_data_cuda_dispatch.h>
#include <ATen/ops/_log_softmax_backward_data_cuda_dispatch.h>
#include <ATen/ops/native_layer_norm_cuda_dispatch.h>
#include <ATen/ops/native_layer_norm_backward_cuda_dispatch.h>
#include <ATen/ops/_fused_rms_norm_cuda_dispatch.h>
#include <ATen/ops/_fused_rms_norm_backward_cuda_dispatch.h>
#endif

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "reduce_common.h"

namespace treduce {
namespace {

// What happened to a call: routed to torch_reduce, or left to torch, and why.
enum class Outcome { Routed, OutArg, InputDtype, DtypeArg, NamedTensor, Probabilities, Traced, SlowerHere, kCount };
constexpr const char* kOutcomeNames[] = {"routed",       "out=",    "input dtype", "dtype=", "named tensor",
                                         "class probabilities", "traced or subclass", "slower here"};
// A counter a reduction (ReduceOp), then one a normalizing op (SoftmaxOp), then cross_entropy's,
// then layer_norm's and rms_norm's (forward and backward each).
constexpr int kNormalizingOps = 9;
constexpr int kOps = kNumReduceOps + kNormalizingOps;
constexpr int kOutcomes = static_cast<int>(Outcome::kCount);
struct CrossEntropyCounter {};
constexpr int counter_of(ReduceOp op) { return static_cast<int>(op); }
constexpr int counter_of(SoftmaxOp op) { return kNumReduceOps + static_cast<int>(op); }
constexpr int counter_of(CrossEntropyCounter) { return kNumReduceOps + 4; }
enum class RowNormCounter { LayerNorm = 5, LayerNormBackward, RmsNorm, RmsNormBackward };
constexpr int counter_of(RowNormCounter c) { return kNumReduceOps + static_cast<int>(c); }
constexpr const char* kNormalizingNames[kNormalizingOps] = {
    "softmax", "log_softmax", "softmax_backward", "log_softmax_backward", "cross_entropy",
    "layer_norm", "layer_norm_backward", "rms_norm", "rms_norm_backward"};
const char* counter_name(int op) {
  return op < kNumReduceOps ? op_name(static_cast<ReduceOp>(op)) : kNormalizingNames[op - kNumReduceOps];
}

std::atomic<int64_t> g_counts[kOps][kOutcomes];

bool supported(at::ScalarType t) {
  for (const at::ScalarType s : kScalarTypes)
    if (s == t) return true;
  return false;
}

// Whether a tensor has dim names: torch 2.15 removed named tensors, and Tensor::has_names with them.
template <class T, class = void>
struct HasNames : std::false_type {};
template <class T>
struct HasNames<T, std::void_t<decltype(std::declval<const T&>().has_names())>> : std::true_type {};
template <class T>
bool has_names(const T& t) {
  if constexpr (HasNames<T>::value) return t.has_names();
  else return false;
}

// Counts the call, and says whether torch_reduce takes it.
template <class Op>
bool take(Op op, const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  Outcome o = Outcome::Routed;
  if (!supported(self.scalar_type())) o = Outcome::InputDtype;
  else if (dtype && !supported(*dtype)) o = Outcome::DtypeArg;
  else if (has_names(self)) o = Outcome::NamedTensor;  // torch's kernels carry names to the result
  g_counts[counter_of(op)][static_cast<int>(o)].fetch_add(1, std::memory_order_relaxed);
  return o == Outcome::Routed;
}

template <class Op>
void count_out_arg(Op op) {
  g_counts[counter_of(op)][static_cast<int>(Outcome::OutArg)].fetch_add(1, std::memory_order_relaxed);
}

// torch's own kernels of one device, called directly: the fallback of every call we leave. One
// row a kernel, X(field, function, type), NS being the device's namespace of direct calls
// (at::cpu, at::cuda): the table's fields and each device's filling come from it, by name.
// at::cpu::sum and the rest are overloaded; the field's type picks the overload.
using Dims = at::OptionalIntArrayRef;
using DtypeArg = std::optional<at::ScalarType>;
using Correction = std::optional<at::Scalar>;
using OptDim = std::optional<int64_t>;
using Pair = std::tuple<at::Tensor, at::Tensor>;
using OutPair = std::tuple<at::Tensor&, at::Tensor&>;
#define TREDUCE_TORCH_FNS(X, NS)                                                                             \
  X(sum, NS::sum, at::Tensor(const at::Tensor&, Dims, bool, DtypeArg))                                       \
  X(sum_out, NS::sum_out, at::Tensor&(at::Tensor&, const at::Tensor&, Dims, bool, DtypeArg))                 \
  X(mean, NS::mean, at::Tensor(const at::Tensor&, Dims, bool, DtypeArg))                                     \
  X(mean_out, NS::mean_out, at::Tensor&(at::Tensor&, const at::Tensor&, Dims, bool, DtypeArg))               \
  X(amax, NS::amax, at::Tensor(const at::Tensor&, at::IntArrayRef, bool))                                    \
  X(amax_out, NS::amax_out, at::Tensor&(at::Tensor&, const at::Tensor&, at::IntArrayRef, bool))              \
  X(amin, NS::amin, at::Tensor(const at::Tensor&, at::IntArrayRef, bool))                                    \
  X(amin_out, NS::amin_out, at::Tensor&(at::Tensor&, const at::Tensor&, at::IntArrayRef, bool))              \
  X(var, NS::var, at::Tensor(const at::Tensor&, Dims, const Correction&, bool))                              \
  X(var_out, NS::var_out, at::Tensor&(at::Tensor&, const at::Tensor&, Dims, const Correction&, bool))        \
  X(std, NS::std, at::Tensor(const at::Tensor&, Dims, const Correction&, bool))                              \
  X(std_out, NS::std_out, at::Tensor&(at::Tensor&, const at::Tensor&, Dims, const Correction&, bool))        \
  X(var_mean, NS::var_mean, Pair(const at::Tensor&, Dims, const Correction&, bool))                          \
  X(std_mean, NS::std_mean, Pair(const at::Tensor&, Dims, const Correction&, bool))                          \
  X(nansum, NS::nansum, at::Tensor(const at::Tensor&, Dims, bool, DtypeArg))                                 \
  X(nansum_out, NS::nansum_out, at::Tensor&(at::Tensor&, const at::Tensor&, Dims, bool, DtypeArg))           \
  /* logsumexp: torch's composite, on every device */                                                        \
  X(logsumexp, at::compositeexplicitautograd::logsumexp,                                                     \
    at::Tensor(const at::Tensor&, at::IntArrayRef, bool))                                                    \
  X(prod, NS::prod, at::Tensor(const at::Tensor&, DtypeArg))                                                 \
  X(prod_dim, NS::prod, at::Tensor(const at::Tensor&, int64_t, bool, DtypeArg))                              \
  X(prod_out, NS::prod_out, at::Tensor&(at::Tensor&, const at::Tensor&, int64_t, bool, DtypeArg))            \
  X(vector_norm, NS::linalg_vector_norm,                                                                     \
    at::Tensor(const at::Tensor&, const at::Scalar&, Dims, bool, DtypeArg))                                  \
  X(vector_norm_out, NS::linalg_vector_norm_out,                                                             \
    at::Tensor&(at::Tensor&, const at::Tensor&, const at::Scalar&, Dims, bool, DtypeArg))                    \
  /* any and all: every dim, one dim, a list of dims; and their out= forms */                                \
  X(any, NS::any, at::Tensor(const at::Tensor&))                                                             \
  X(any_dim, NS::any, at::Tensor(const at::Tensor&, int64_t, bool))                                          \
  X(any_dims, NS::any, at::Tensor(const at::Tensor&, Dims, bool))                                            \
  X(any_out, NS::any_out, at::Tensor&(at::Tensor&, const at::Tensor&))                                       \
  X(any_dim_out, NS::any_out, at::Tensor&(at::Tensor&, const at::Tensor&, int64_t, bool))                    \
  X(any_dims_out, NS::any_out, at::Tensor&(at::Tensor&, const at::Tensor&, Dims, bool))                      \
  X(all, NS::all, at::Tensor(const at::Tensor&))                                                             \
  X(all_dim, NS::all, at::Tensor(const at::Tensor&, int64_t, bool))                                          \
  X(all_dims, NS::all, at::Tensor(const at::Tensor&, Dims, bool))                                            \
  X(all_out, NS::all_out, at::Tensor&(at::Tensor&, const at::Tensor&))                                       \
  X(all_dim_out, NS::all_out, at::Tensor&(at::Tensor&, const at::Tensor&, int64_t, bool))                    \
  X(all_dims_out, NS::all_out, at::Tensor&(at::Tensor&, const at::Tensor&, Dims, bool))                      \
  X(count_nonzero, NS::count_nonzero, at::Tensor(const at::Tensor&, at::IntArrayRef))                        \
  X(aminmax, NS::aminmax, Pair(const at::Tensor&, OptDim, bool))                                             \
  X(aminmax_out, NS::aminmax_out, OutPair(at::Tensor&, at::Tensor&, const at::Tensor&, OptDim, bool))        \
  /* max and min of every dim and over a dim (values, indices), argmax, argmin; out= forms */                \
  X(max_all, NS::max, at::Tensor(const at::Tensor&))                                                         \
  X(min_all, NS::min, at::Tensor(const at::Tensor&))                                                         \
  X(max_dim, NS::max, Pair(const at::Tensor&, int64_t, bool))                                                \
  X(min_dim, NS::min, Pair(const at::Tensor&, int64_t, bool))                                                \
  X(max_dim_out, NS::max_out, OutPair(at::Tensor&, at::Tensor&, const at::Tensor&, int64_t, bool))           \
  X(min_dim_out, NS::min_out, OutPair(at::Tensor&, at::Tensor&, const at::Tensor&, int64_t, bool))           \
  X(argmax, NS::argmax, at::Tensor(const at::Tensor&, OptDim, bool))                                         \
  X(argmin, NS::argmin, at::Tensor(const at::Tensor&, OptDim, bool))                                         \
  X(argmax_out, NS::argmax_out, at::Tensor&(at::Tensor&, const at::Tensor&, OptDim, bool))                   \
  X(argmin_out, NS::argmin_out, at::Tensor&(at::Tensor&, const at::Tensor&, OptDim, bool))               \
  /* softmax's family, and their out= forms */                                                               \
  X(softmax, NS::_softmax, at::Tensor(const at::Tensor&, int64_t, bool))                                     \
  X(softmax_out, NS::_softmax_out, at::Tensor&(at::Tensor&, const at::Tensor&, int64_t, bool))               \
  X(log_softmax, NS::_log_softmax, at::Tensor(const at::Tensor&, int64_t, bool))                             \
  X(log_softmax_out, NS::_log_softmax_out, at::Tensor&(at::Tensor&, const at::Tensor&, int64_t, bool))       \
  X(softmax_backward, NS::_softmax_backward_data,                                                            \
    at::Tensor(const at::Tensor&, const at::Tensor&, int64_t, at::ScalarType))                               \
  X(softmax_backward_out, NS::_softmax_backward_data_out,                                                    \
    at::Tensor&(at::Tensor&, const at::Tensor&, const at::Tensor&, int64_t, at::ScalarType))                 \
  X(log_softmax_backward, NS::_log_softmax_backward_data,                                                    \
    at::Tensor(const at::Tensor&, const at::Tensor&, int64_t, at::ScalarType))                               \
  X(log_softmax_backward_out, NS::_log_softmax_backward_data_out,                                            \
    at::Tensor&(at::Tensor&, const at::Tensor&, const at::Tensor&, int64_t, at::ScalarType))

struct TorchKernels {
#define TREDUCE_TORCH_FIELD(field, fn, type) std::add_pointer_t<type> field = nullptr;
  TREDUCE_TORCH_FNS(TREDUCE_TORCH_FIELD, NS)  // (a field needs no namespace)
#undef TREDUCE_TORCH_FIELD
};
// One device's table, filled field by field from its namespace of direct calls.
#define TREDUCE_TORCH_SET(field, fn, type) k.field = &fn;
#define TREDUCE_TORCH_KERNELS(NS) [] { TorchKernels k; TREDUCE_TORCH_FNS(TREDUCE_TORCH_SET, NS) return k; }()

struct Cpu {
  static constexpr c10::DispatchKey kKey = c10::DispatchKey::CPU;
  static const DeviceKernels& ours() { return cpu_kernels(); }
  static const TorchKernels& torch() {
    static const TorchKernels k = TREDUCE_TORCH_KERNELS(at::cpu);
    return k;
  }
};

#ifdef TREDUCE_WITH_CUDA
struct Cuda {
  static constexpr c10::DispatchKey kKey = c10::DispatchKey::CUDA;
  static const DeviceKernels& ours() { return cuda_kernels(); }
  static const TorchKernels& torch() {
    static const TorchKernels k = TREDUCE_TORCH_KERNELS(at::cuda);
    return k;
  }
};
#endif

// out=: torch's kernel, counted (writing into a caller's tensor, with its resizing and dtype
// rules, is not what the ops do). torch_out<T, op, &TorchKernels::x_out> is that kernel on device
// T: torch's x_out takes the outs (one or two) first, aten's schema last, so its parameters are
// x_out's with the outs moved to the end.
template <class F>
using TorchField = F* TorchKernels::*;
template <class T, auto op, auto field, class = decltype(field)>
struct TorchOut;
template <class T, auto op, auto field, class... A>
struct TorchOut<T, op, field, TorchField<at::Tensor&(at::Tensor&, const at::Tensor&, A...)>> {
  static at::Tensor& kernel(const at::Tensor& self, A... a, at::Tensor& out) {
    count_out_arg(op);
    return (T::torch().*field)(out, self, a...);
  }
};
template <class T, auto op, auto field, class... A>
struct TorchOut<T, op, field, TorchField<OutPair(at::Tensor&, at::Tensor&, const at::Tensor&, A...)>> {
  static OutPair kernel(const at::Tensor& self, A... a, at::Tensor& out1, at::Tensor& out2) {
    count_out_arg(op);
    return (T::torch().*field)(out1, out2, self, a...);
  }
};
// (Backwards: grad_output and output, then the rest, then out.)
template <class T, auto op, auto field, class... A>
struct TorchOut<T, op, field, TorchField<at::Tensor&(at::Tensor&, const at::Tensor&, const at::Tensor&, A...)>> {
  static at::Tensor& kernel(const at::Tensor& grad, const at::Tensor& output, A... a, at::Tensor& out) {
    count_out_arg(op);
    return (T::torch().*field)(out, grad, output, a...);
  }
};
template <class T, auto op, auto field>
constexpr auto torch_out = &TorchOut<T, op, field>::kernel;

// The aten overloads of device T, one row each: the schema's name and its kernel, whose
// parameters are exactly the schema's. take() counts the call under its op and says whether
// torch_reduce takes it: then our kernel (T::ours()), else torch's (T::torch()). A new overload
// is a row here (and a row of TREDUCE_TORCH_FNS if its fallback is a torch kernel not yet there).

// The sums and the statistics. aten::sum and aten::mean without dims are torch's composites over
// the dim overloads (IntArrayRef{}: every dim); the statistics are aten's correction overloads
// (var(x, unbiased) and var.dim are torch's composites over them).
template <class T>
void impl_sums(torch::Library& m) {
  m.impl("sum", +[](const at::Tensor& self, DtypeArg dtype) {
    return take(ReduceOp::Sum, self, dtype) ? T::ours().sum(self, "auto", std::nullopt, false, dtype)
                                            : T::torch().sum(self, at::IntArrayRef{}, false, dtype);
  });
  m.impl("sum.dim_IntList", +[](const at::Tensor& self, Dims dim, bool keepdim, DtypeArg dtype) {
    return take(ReduceOp::Sum, self, dtype) ? T::ours().sum(self, "auto", dim, keepdim, dtype)
                                            : T::torch().sum(self, dim, keepdim, dtype);
  });
  m.impl("sum.IntList_out", torch_out<T, ReduceOp::Sum, &TorchKernels::sum_out>);
  m.impl("mean", +[](const at::Tensor& self, DtypeArg dtype) {
    return take(ReduceOp::Mean, self, dtype) ? T::ours().mean(self, "auto", std::nullopt, false, dtype)
                                             : T::torch().mean(self, at::IntArrayRef{}, false, dtype);
  });
  m.impl("mean.dim", +[](const at::Tensor& self, Dims dim, bool keepdim, DtypeArg dtype) {
    return take(ReduceOp::Mean, self, dtype) ? T::ours().mean(self, "auto", dim, keepdim, dtype)
                                             : T::torch().mean(self, dim, keepdim, dtype);
  });
  m.impl("mean.out", torch_out<T, ReduceOp::Mean, &TorchKernels::mean_out>);
  m.impl("var.correction", +[](const at::Tensor& self, Dims dim, const Correction& correction, bool keepdim) {
    return take(ReduceOp::Var, self, std::nullopt) ? T::ours().var(self, dim, correction, keepdim)
                                                   : T::torch().var(self, dim, correction, keepdim);
  });
  m.impl("var.correction_out", torch_out<T, ReduceOp::Var, &TorchKernels::var_out>);
  m.impl("std.correction", +[](const at::Tensor& self, Dims dim, const Correction& correction, bool keepdim) {
    return take(ReduceOp::Std, self, std::nullopt) ? T::ours().std(self, dim, correction, keepdim)
                                                   : T::torch().std(self, dim, correction, keepdim);
  });
  m.impl("std.correction_out", torch_out<T, ReduceOp::Std, &TorchKernels::std_out>);
  m.impl("var_mean.correction", +[](const at::Tensor& self, Dims dim, const Correction& correction, bool keepdim) {
    return take(ReduceOp::VarMean, self, std::nullopt) ? T::ours().var_mean(self, dim, correction, keepdim)
                                                       : T::torch().var_mean(self, dim, correction, keepdim);
  });
  m.impl("std_mean.correction", +[](const at::Tensor& self, Dims dim, const Correction& correction, bool keepdim) {
    return take(ReduceOp::StdMean, self, std::nullopt) ? T::ours().std_mean(self, dim, correction, keepdim)
                                                       : T::torch().std_mean(self, dim, correction, keepdim);
  });
  m.impl("nansum", +[](const at::Tensor& self, Dims dim, bool keepdim, DtypeArg dtype) {
    return take(ReduceOp::NanSum, self, dtype) ? T::ours().nansum(self, dim, keepdim, dtype)
                                               : T::torch().nansum(self, dim, keepdim, dtype);
  });
  m.impl("nansum.out", torch_out<T, ReduceOp::NanSum, &TorchKernels::nansum_out>);
  m.impl("logsumexp", +[](const at::Tensor& self, at::IntArrayRef dim, bool keepdim) {
    return take(ReduceOp::LogSumExp, self, std::nullopt) ? T::ours().logsumexp(self, dim, keepdim)
                                                         : T::torch().logsumexp(self, dim, keepdim);
  });
  m.impl("prod", +[](const at::Tensor& self, DtypeArg dtype) {
    return take(ReduceOp::Prod, self, dtype) ? T::ours().prod(self, std::nullopt, false, dtype)
                                             : T::torch().prod(self, dtype);
  });
  m.impl("prod.dim_int", +[](const at::Tensor& self, int64_t dim, bool keepdim, DtypeArg dtype) {
    return take(ReduceOp::Prod, self, dtype) ? T::ours().prod(self, dim, keepdim, dtype)
                                             : T::torch().prod_dim(self, dim, keepdim, dtype);
  });
  m.impl("prod.int_out", torch_out<T, ReduceOp::Prod, &TorchKernels::prod_out>);
  m.impl("linalg_vector_norm", +[](const at::Tensor& self, const at::Scalar& ord, Dims dim, bool keepdim,
                                   DtypeArg dtype) {
    return take(ReduceOp::Norm, self, dtype) ? T::ours().vector_norm(self, ord, dim, keepdim, dtype)
                                             : T::torch().vector_norm(self, ord, dim, keepdim, dtype);
  });
  m.impl("linalg_vector_norm.out", torch_out<T, ReduceOp::Norm, &TorchKernels::vector_norm_out>);
}

// any and all: aten's three overloads (every dim, one dim, a list) into our one. count_nonzero(x,
// dim=None) is torch's composite over count_nonzero.dim_IntList.
template <class T>
void impl_logic(torch::Library& m) {
  m.impl("any", +[](const at::Tensor& self) {
    return take(ReduceOp::Any, self, std::nullopt) ? T::ours().any(self, std::nullopt, false) : T::torch().any(self);
  });
  m.impl("any.dim", +[](const at::Tensor& self, int64_t dim, bool keepdim) {
    return take(ReduceOp::Any, self, std::nullopt) ? T::ours().any(self, at::IntArrayRef(dim), keepdim)
                                                   : T::torch().any_dim(self, dim, keepdim);
  });
  m.impl("any.dims", +[](const at::Tensor& self, Dims dim, bool keepdim) {
    return take(ReduceOp::Any, self, std::nullopt) ? T::ours().any(self, dim, keepdim)
                                                   : T::torch().any_dims(self, dim, keepdim);
  });
  m.impl("any.all_out", torch_out<T, ReduceOp::Any, &TorchKernels::any_out>);
  m.impl("any.out", torch_out<T, ReduceOp::Any, &TorchKernels::any_dim_out>);
  m.impl("any.dims_out", torch_out<T, ReduceOp::Any, &TorchKernels::any_dims_out>);
  m.impl("all", +[](const at::Tensor& self) {
    return take(ReduceOp::All, self, std::nullopt) ? T::ours().all(self, std::nullopt, false) : T::torch().all(self);
  });
  m.impl("all.dim", +[](const at::Tensor& self, int64_t dim, bool keepdim) {
    return take(ReduceOp::All, self, std::nullopt) ? T::ours().all(self, at::IntArrayRef(dim), keepdim)
                                                   : T::torch().all_dim(self, dim, keepdim);
  });
  m.impl("all.dims", +[](const at::Tensor& self, Dims dim, bool keepdim) {
    return take(ReduceOp::All, self, std::nullopt) ? T::ours().all(self, dim, keepdim)
                                                   : T::torch().all_dims(self, dim, keepdim);
  });
  m.impl("all.all_out", torch_out<T, ReduceOp::All, &TorchKernels::all_out>);
  m.impl("all.out", torch_out<T, ReduceOp::All, &TorchKernels::all_dim_out>);
  m.impl("all.dims_out", torch_out<T, ReduceOp::All, &TorchKernels::all_dims_out>);
  m.impl("count_nonzero.dim_IntList", +[](const at::Tensor& self, at::IntArrayRef dim) {
    return take(ReduceOp::CountNonzero, self, std::nullopt) ? T::ours().count_nonzero(self, dim)
                                                            : T::torch().count_nonzero(self, dim);
  });
}

// The extrema. max and min of every dim are amax and amin (with torch's error for no elements);
// over a dim, values and indices.
template <class T>
void impl_extrema(torch::Library& m) {
  m.impl("amax", +[](const at::Tensor& self, at::IntArrayRef dim, bool keepdim) {
    return take(ReduceOp::Max, self, std::nullopt) ? T::ours().amax(self, "auto", dim, keepdim)
                                                   : T::torch().amax(self, dim, keepdim);
  });
  m.impl("amax.out", torch_out<T, ReduceOp::Max, &TorchKernels::amax_out>);
  m.impl("amin", +[](const at::Tensor& self, at::IntArrayRef dim, bool keepdim) {
    return take(ReduceOp::Min, self, std::nullopt) ? T::ours().amin(self, "auto", dim, keepdim)
                                                   : T::torch().amin(self, dim, keepdim);
  });
  m.impl("amin.out", torch_out<T, ReduceOp::Min, &TorchKernels::amin_out>);
  m.impl("aminmax", +[](const at::Tensor& self, OptDim dim, bool keepdim) {
    return take(ReduceOp::AMinMax, self, std::nullopt) ? T::ours().aminmax(self, dim, keepdim)
                                                       : T::torch().aminmax(self, dim, keepdim);
  });
  m.impl("aminmax.out", torch_out<T, ReduceOp::AMinMax, &TorchKernels::aminmax_out>);
  m.impl("max", +[](const at::Tensor& self) {
    if (!take(ReduceOp::MaxDim, self, std::nullopt)) return T::torch().max_all(self);
    TORCH_CHECK(self.numel() > 0, "max(): Expected reduction dim to be specified for input.numel() == 0. Specify "
                "the reduction dim with the 'dim' argument.");
    return T::ours().amax(self, "auto", std::nullopt, false);
  });
  m.impl("max.dim", +[](const at::Tensor& self, int64_t dim, bool keepdim) {
    return take(ReduceOp::MaxDim, self, std::nullopt) ? T::ours().max(self, dim, keepdim)
                                                      : T::torch().max_dim(self, dim, keepdim);
  });
  m.impl("max.dim_max", torch_out<T, ReduceOp::MaxDim, &TorchKernels::max_dim_out>);
  m.impl("min", +[](const at::Tensor& self) {
    if (!take(ReduceOp::MinDim, self, std::nullopt)) return T::torch().min_all(self);
    TORCH_CHECK(self.numel() > 0, "min(): Expected reduction dim to be specified for input.numel() == 0. Specify "
                "the reduction dim with the 'dim' argument.");
    return T::ours().amin(self, "auto", std::nullopt, false);
  });
  m.impl("min.dim", +[](const at::Tensor& self, int64_t dim, bool keepdim) {
    return take(ReduceOp::MinDim, self, std::nullopt) ? T::ours().min(self, dim, keepdim)
                                                      : T::torch().min_dim(self, dim, keepdim);
  });
  m.impl("min.dim_min", torch_out<T, ReduceOp::MinDim, &TorchKernels::min_dim_out>);
  m.impl("argmax", +[](const at::Tensor& self, OptDim dim, bool keepdim) {
    return take(ReduceOp::ArgMax, self, std::nullopt) ? T::ours().argmax(self, dim, keepdim)
                                                      : T::torch().argmax(self, dim, keepdim);
  });
  m.impl("argmax.out", torch_out<T, ReduceOp::ArgMax, &TorchKernels::argmax_out>);
  m.impl("argmin", +[](const at::Tensor& self, OptDim dim, bool keepdim) {
    return take(ReduceOp::ArgMin, self, std::nullopt) ? T::ours().argmin(self, dim, keepdim)
                                                      : T::torch().argmin(self, dim, keepdim);
  });
  m.impl("argmin.out", torch_out<T, ReduceOp::ArgMin, &TorchKernels::argmin_out>);
}

// softmax's family: aten's _softmax and _log_softmax (half_to_float: a float32 result, as our
// dtype=; on the CPU torch's own, whose rule for it differs by release) and their backwards.
// On the CPU they stay torch's ("slower here"): our CPU rows take their exp in SSE vectors,
// 2-5x torch's time in its wider ones (2 threads, float32 softmax over (256, 32000): 17.7 ms
// against 4.7-6.0), and a drop-in must not slow a model down. On CUDA likewise where ours
// measured slower (normalize_cuda_wins).
// On CUDA, where normalize_cuda_wins (core/normalize.h) says ours measured at or past torch's.
bool cuda_softmax_wins(SoftmaxOp op, const at::Tensor& t, int64_t dim) {
  if (t.dim() == 0 || t.numel() == 0) return true;
  dim = c10::maybe_wrap_dim(dim, t.dim());
  int64_t inner = 1;
  for (int64_t d = dim + 1; d < t.dim(); ++d) inner *= t.size(d);
  const int64_t size = t.size(dim), bytes = int64_t(t.element_size());
  // (a non-contiguous input is copied first: the copy is aligned)
  const bool aligned = !t.is_contiguous() || reinterpret_cast<uintptr_t>(t.const_data_ptr()) % 16 == 0;
  const bool packs = aligned && size % (16 / bytes) == 0;
#ifdef TREDUCE_WITH_CUDA
  const int cc_major = at::cuda::getDeviceProperties(t.get_device())->major;
#else
  const int cc_major = 0;
#endif
  return normalize_cuda_wins(op, int(bytes), size, inner, packs,
                             normalize_on_chip_blocks(op, int(bytes), size, packs, cc_major) > 0);
}

template <class T>
bool take_softmax(SoftmaxOp op, const at::Tensor& self, bool half_to_float, int64_t dim) {
  Outcome o = Outcome::Routed;
  if (!is_floating(self.scalar_type())) o = Outcome::InputDtype;
  else if (T::kKey == c10::DispatchKey::CPU || !cuda_softmax_wins(op, self, dim)) o = Outcome::SlowerHere;
  if (o == Outcome::Routed) return take(op, self, std::nullopt);
  g_counts[counter_of(op)][static_cast<int>(o)].fetch_add(1, std::memory_order_relaxed);
  return false;
}

template <class T>
void impl_normalizing(torch::Library& m) {
  m.impl("_softmax", +[](const at::Tensor& self, int64_t dim, bool half_to_float) {
    return take_softmax<T>(SoftmaxOp::Softmax, self, half_to_float, dim)
               ? T::ours().softmax(self, dim, half_to_float ? DtypeArg(at::kFloat) : std::nullopt)
               : T::torch().softmax(self, dim, half_to_float);
  });
  m.impl("_softmax.out", torch_out<T, SoftmaxOp::Softmax, &TorchKernels::softmax_out>);
  m.impl("_log_softmax", +[](const at::Tensor& self, int64_t dim, bool half_to_float) {
    return take_softmax<T>(SoftmaxOp::LogSoftmax, self, half_to_float, dim)
               ? T::ours().log_softmax(self, dim, half_to_float ? DtypeArg(at::kFloat) : std::nullopt)
               : T::torch().log_softmax(self, dim, half_to_float);
  });
  m.impl("_log_softmax.out", torch_out<T, SoftmaxOp::LogSoftmax, &TorchKernels::log_softmax_out>);
  m.impl("_softmax_backward_data", +[](const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                                       at::ScalarType input_dtype) {
    return take_softmax<T>(SoftmaxOp::SoftmaxBackward, output, false, dim) && grad.scalar_type() == output.scalar_type()
               ? T::ours().softmax_backward(grad, output, dim, input_dtype)
               : T::torch().softmax_backward(grad, output, dim, input_dtype);
  });
  m.impl("_softmax_backward_data.out",
         torch_out<T, SoftmaxOp::SoftmaxBackward, &TorchKernels::softmax_backward_out>);
  m.impl("_log_softmax_backward_data", +[](const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                                           at::ScalarType input_dtype) {
    return take_softmax<T>(SoftmaxOp::LogSoftmaxBackward, output, false, dim) && grad.scalar_type() == output.scalar_type()
               ? T::ours().log_softmax_backward(grad, output, dim, input_dtype)
               : T::torch().log_softmax_backward(grad, output, dim, input_dtype);
  });
  m.impl("_log_softmax_backward_data.out",
         torch_out<T, SoftmaxOp::LogSoftmaxBackward, &TorchKernels::log_softmax_backward_out>);
}

// cross_entropy_loss, torch's composite (log_softmax, then nll_loss): on the AutogradCUDA key, so
// that the loss and its gradient are ours, fused (treduce::cross_entropy, through the dispatcher:
// its own Autograd kernel records the graph). Class-index targets of plain tensors only: class
// probabilities, and tensors that a Python mode or subclass traces (torch.compile's fake
// tensors), take torch's composite, as does a symbolic ignore_index.
at::Tensor cross_entropy_loss_route(const at::Tensor& self, const at::Tensor& target,
                                    const std::optional<at::Tensor>& weight, int64_t reduction,
                                    c10::SymInt ignore_index, double label_smoothing) {
  static const auto ours = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("treduce::cross_entropy", "")
                               .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                                                 int64_t, int64_t, double)>();
  Outcome o = Outcome::Routed;
  const auto traced = [](const at::Tensor& t) { return t.defined() && t.key_set().has(c10::DispatchKey::Python); };
  if (traced(self) || traced(target) || (weight && traced(*weight)) || ignore_index.is_symbolic()) o = Outcome::Traced;
  else if (!is_floating(self.scalar_type()) || (weight && weight->defined() && weight->scalar_type() != self.scalar_type()))
    o = Outcome::InputDtype;
  else if (target.scalar_type() != at::kLong || target.dim() + 1 != std::max<int64_t>(self.dim(), 1) || self.dim() == 0)
    o = Outcome::Probabilities;
  else if (has_names(self)) o = Outcome::NamedTensor;
  g_counts[counter_of(CrossEntropyCounter{})][static_cast<int>(o)].fetch_add(1, std::memory_order_relaxed);
  if (o != Outcome::Routed)
    return at::compositeimplicitautograd::cross_entropy_loss_symint(self, target, weight, reduction, ignore_index,
                                                                     label_smoothing);
  return ours.call(self, target, weight, reduction, ignore_index.expect_int(), label_smoothing);
}

#ifdef TREDUCE_WITH_CUDA
// layer_norm and rms_norm on CUDA: aten's native_layer_norm and _fused_rms_norm (the kernels
// torch.layer_norm and torch.rms_norm reach there) and their backwards. Left to torch's kernels:
// symbolic shapes, inputs that are not floating, and weight or bias of another dtype than the
// input (torch's mixed-precision kernels). On the CPU they stay torch's, uncounted (no CPU
// kernel of ours was measured against torch's vectorised ones).
// Where layer_norm_cuda_wins (core/layer_norm.h) says ours measured at or past torch's.
bool cuda_row_norm_wins(bool backward, const at::Tensor& input, int64_t cols, const std::optional<at::Tensor>& weight,
                        const std::optional<at::Tensor>& bias) {
  const int64_t bytes = int64_t(input.element_size());
  // (a non-contiguous input is copied first: the copy is aligned)
  const auto aligned = [](const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.const_data_ptr()) % 16 == 0; };
  const auto fits = [&](const std::optional<at::Tensor>& t) { return !t || !t->defined() || aligned(*t); };
  const bool packs = cols % (16 / bytes) == 0 && (!input.is_contiguous() || aligned(input)) && fits(weight) && fits(bias);
  return layer_norm_cuda_wins(backward, int(bytes), cols, packs);
}

bool take_row_norm(RowNormCounter c, const at::Tensor& input, int64_t cols, const std::optional<at::Tensor>& weight,
                   const std::optional<at::Tensor>& bias, bool symbolic, const at::Tensor& grad = at::Tensor()) {
  const auto other = [&](const std::optional<at::Tensor>& t) {
    return t && t->defined() && t->scalar_type() != input.scalar_type();
  };
  const bool backward = c == RowNormCounter::LayerNormBackward || c == RowNormCounter::RmsNormBackward;
  Outcome o = Outcome::Routed;
  if (symbolic) o = Outcome::Traced;
  else if (!is_floating(input.scalar_type()) || other(weight) || other(bias) ||
           (grad.defined() && grad.scalar_type() != input.scalar_type()))
    o = Outcome::InputDtype;
  else if (has_names(input)) o = Outcome::NamedTensor;
  else if (input.numel() > 0 && !cuda_row_norm_wins(backward, input, cols, weight, bias)) o = Outcome::SlowerHere;
  g_counts[counter_of(c)][static_cast<int>(o)].fetch_add(1, std::memory_order_relaxed);
  return o == Outcome::Routed;
}

bool is_symbolic(c10::SymIntArrayRef shape) {
  for (const c10::SymInt& s : shape)
    if (s.is_symbolic()) return true;
  return false;
}

// The elements a row (1 where the shape is symbolic: that call is not taken).
int64_t row_elements(c10::SymIntArrayRef shape) {
  int64_t n = 1;
  for (const c10::SymInt& s : shape) n *= s.is_symbolic() ? 1 : s.as_int_unchecked();
  return n;
}

void impl_row_norms(torch::Library& m) {
  m.impl("native_layer_norm", +[](const at::Tensor& input, c10::SymIntArrayRef shape,
                                  const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
                                  double eps) {
    if (take_row_norm(RowNormCounter::LayerNorm, input, row_elements(shape), weight, bias, is_symbolic(shape)))
      return Cuda::ours().layer_norm_forward(input, C10_AS_INTARRAYREF_SLOW(shape), weight, bias, eps);
    return at::cuda::native_layer_norm_symint(input, shape, weight, bias, eps);
  });
  m.impl("native_layer_norm_backward",
         +[](const at::Tensor& grad, const at::Tensor& input, c10::SymIntArrayRef shape, const at::Tensor& mean,
             const at::Tensor& rstd, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
             std::array<bool, 3> mask) {
           if (take_row_norm(RowNormCounter::LayerNormBackward, input, row_elements(shape), weight, bias,
                             is_symbolic(shape), grad))
             return Cuda::ours().layer_norm_backward(grad, input, C10_AS_INTARRAYREF_SLOW(shape), mean, rstd, weight,
                                                     bias, mask);
           return at::cuda::native_layer_norm_backward_symint(grad, input, shape, mean, rstd, weight, bias, mask);
         });
  m.impl("_fused_rms_norm", +[](const at::Tensor& input, at::IntArrayRef shape, const std::optional<at::Tensor>& weight,
                                std::optional<double> eps) {
    if (take_row_norm(RowNormCounter::RmsNorm, input, c10::multiply_integers(shape), weight, std::nullopt, false))
      return Cuda::ours().rms_norm_forward(input, shape, weight, eps);
    return at::cuda::_fused_rms_norm(input, shape, weight, eps);
  });
  m.impl("_fused_rms_norm_backward",
         +[](const at::Tensor& grad, const at::Tensor& input, at::IntArrayRef shape, const at::Tensor& rstd,
             const std::optional<at::Tensor>& weight, std::array<bool, 2> mask) {
           if (take_row_norm(RowNormCounter::RmsNormBackward, input, c10::multiply_integers(shape), weight,
                             std::nullopt, false, grad))
             return Cuda::ours().rms_norm_backward(grad, input, shape, rstd, weight, mask);
           return at::cuda::_fused_rms_norm_backward(grad, input, shape, rstd, weight, mask);
         });
}
#endif

std::unique_ptr<torch::Library> registered_autograd(c10::DispatchKey key) {
  auto m = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", key, __FILE__, __LINE__);
  m->impl("cross_entropy_loss", &cross_entropy_loss_route);
  return m;
}

template <class T>
std::unique_ptr<torch::Library> registered() {
  auto m = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", T::kKey, __FILE__, __LINE__);
  impl_sums<T>(*m);
  impl_logic<T>(*m);
  impl_extrema<T>(*m);
  impl_normalizing<T>(*m);
#ifdef TREDUCE_WITH_CUDA
  if constexpr (T::kKey == c10::DispatchKey::CUDA) impl_row_norms(*m);
#endif
  return m;
}

std::mutex g_mutex;
int64_t g_open = 0;  // open blocks, in every thread
std::vector<std::unique_ptr<torch::Library>> g_registrations;

// Replacing a kernel of aten's makes the dispatcher warn (once a process); here that is the
// point, so that warning is dropped and any other passes on.
class DropOverrideWarnings : public c10::WarningHandler {
 public:
  explicit DropOverrideWarnings(c10::WarningHandler* next) : next_(next) {}
  void process(const c10::Warning& w) override {
    if (w.msg().find("Overriding a previously registered kernel") == std::string::npos) next_->process(w);
  }

 private:
  c10::WarningHandler* next_;
};

int64_t override_enter() {
  const std::lock_guard<std::mutex> lock(g_mutex);
  if (g_open == 0) {
    DropOverrideWarnings quiet(c10::WarningUtils::get_warning_handler());
    const c10::WarningUtils::WarningHandlerGuard guard(&quiet);
    g_registrations.push_back(registered<Cpu>());
    // (cross_entropy_loss on the CPU stays torch's composite, uncounted: its log_softmax is
    // counted, "slower here".)
#ifdef TREDUCE_WITH_CUDA
    g_registrations.push_back(registered<Cuda>());
    g_registrations.push_back(registered_autograd(c10::DispatchKey::AutogradCUDA));
#endif
  }
  return ++g_open;
}

int64_t override_exit() {
  const std::lock_guard<std::mutex> lock(g_mutex);
  TORCH_CHECK(g_open > 0, "treduce._override_exit: no override block is open");
  if (--g_open == 0) g_registrations.clear();  // the Library's destructor removes its kernels
  return g_open;
}

// One row a counter, "op<TAB>outcome<TAB>count", every op and outcome (zeros included).
std::vector<std::string> override_counts() {
  std::vector<std::string> rows;
  for (int op = 0; op < kOps; ++op)
    for (int o = 0; o < kOutcomes; ++o)
      rows.push_back(std::string(counter_name(op)) + '\t' + kOutcomeNames[o] + '\t' +
                     std::to_string(g_counts[op][o].load(std::memory_order_relaxed)));
  return rows;
}

}  // namespace
}  // namespace treduce

TORCH_LIBRARY_FRAGMENT(treduce, m) {
  // The override's switch and counters (torch_reduce/override.py). Enter returns the number of
  // open blocks after it, exit the number left.
  m.def("_override_enter() -> int", &treduce::override_enter);
  m.def("_override_exit() -> int", &treduce::override_exit);
  m.def("_override_counts() -> str[]", &treduce::override_counts);
}
