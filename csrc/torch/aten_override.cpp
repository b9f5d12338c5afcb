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
#include <c10/util/Exception.h>
#include <torch/library.h>

#ifdef TREDUCE_WITH_CUDA
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
enum class Outcome { Routed, OutArg, InputDtype, DtypeArg, NamedTensor, kCount };
constexpr const char* kOutcomeNames[] = {"routed", "out=", "input dtype", "dtype=", "named tensor"};
constexpr int kOps = kNumReduceOps;
constexpr int kOutcomes = static_cast<int>(Outcome::kCount);

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
bool take(ReduceOp op, const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  Outcome o = Outcome::Routed;
  if (!supported(self.scalar_type())) o = Outcome::InputDtype;
  else if (dtype && !supported(*dtype)) o = Outcome::DtypeArg;
  else if (has_names(self)) o = Outcome::NamedTensor;  // torch's kernels carry names to the result
  g_counts[static_cast<int>(op)][static_cast<int>(o)].fetch_add(1, std::memory_order_relaxed);
  return o == Outcome::Routed;
}

void count_out_arg(ReduceOp op) {
  g_counts[static_cast<int>(op)][static_cast<int>(Outcome::OutArg)].fetch_add(1, std::memory_order_relaxed);
}

// torch's own kernels of one device, called directly: the fallback of every call we leave.
using Dims = at::OptionalIntArrayRef;
using DtypeArg = std::optional<at::ScalarType>;
using Correction = std::optional<at::Scalar>;
struct TorchKernels {
  at::Tensor (*sum)(const at::Tensor&, Dims, bool, DtypeArg);
  at::Tensor (*mean)(const at::Tensor&, Dims, bool, DtypeArg);
  at::Tensor (*amax)(const at::Tensor&, at::IntArrayRef, bool);
  at::Tensor (*amin)(const at::Tensor&, at::IntArrayRef, bool);
  at::Tensor& (*sum_out)(at::Tensor&, const at::Tensor&, Dims, bool, DtypeArg);
  at::Tensor& (*mean_out)(at::Tensor&, const at::Tensor&, Dims, bool, DtypeArg);
  at::Tensor& (*amax_out)(at::Tensor&, const at::Tensor&, at::IntArrayRef, bool);
  at::Tensor& (*amin_out)(at::Tensor&, const at::Tensor&, at::IntArrayRef, bool);
  at::Tensor (*var)(const at::Tensor&, Dims, const Correction&, bool);
  at::Tensor (*std)(const at::Tensor&, Dims, const Correction&, bool);
  std::tuple<at::Tensor, at::Tensor> (*var_mean)(const at::Tensor&, Dims, const Correction&, bool);
  std::tuple<at::Tensor, at::Tensor> (*std_mean)(const at::Tensor&, Dims, const Correction&, bool);
  at::Tensor& (*var_out)(at::Tensor&, const at::Tensor&, Dims, const Correction&, bool);
  at::Tensor& (*std_out)(at::Tensor&, const at::Tensor&, Dims, const Correction&, bool);
  at::Tensor (*nansum)(const at::Tensor&, Dims, bool, DtypeArg);
  at::Tensor& (*nansum_out)(at::Tensor&, const at::Tensor&, Dims, bool, DtypeArg);
  at::Tensor (*logsumexp)(const at::Tensor&, at::IntArrayRef, bool);  // torch's composite, any device
  at::Tensor (*prod)(const at::Tensor&, DtypeArg);
  at::Tensor (*prod_dim)(const at::Tensor&, int64_t, bool, DtypeArg);
  at::Tensor& (*prod_out)(at::Tensor&, const at::Tensor&, int64_t, bool, DtypeArg);
  at::Tensor (*vector_norm)(const at::Tensor&, const at::Scalar&, Dims, bool, DtypeArg);
  at::Tensor& (*vector_norm_out)(at::Tensor&, const at::Tensor&, const at::Scalar&, Dims, bool, DtypeArg);
  // any and all: every dim, one dim, a list of dims; and their out= forms.
  at::Tensor (*any)(const at::Tensor&);
  at::Tensor (*any_dim)(const at::Tensor&, int64_t, bool);
  at::Tensor (*any_dims)(const at::Tensor&, Dims, bool);
  at::Tensor (*all)(const at::Tensor&);
  at::Tensor (*all_dim)(const at::Tensor&, int64_t, bool);
  at::Tensor (*all_dims)(const at::Tensor&, Dims, bool);
  at::Tensor& (*any_out)(at::Tensor&, const at::Tensor&);
  at::Tensor& (*any_dim_out)(at::Tensor&, const at::Tensor&, int64_t, bool);
  at::Tensor& (*any_dims_out)(at::Tensor&, const at::Tensor&, Dims, bool);
  at::Tensor& (*all_out)(at::Tensor&, const at::Tensor&);
  at::Tensor& (*all_dim_out)(at::Tensor&, const at::Tensor&, int64_t, bool);
  at::Tensor& (*all_dims_out)(at::Tensor&, const at::Tensor&, Dims, bool);
  at::Tensor (*count_nonzero)(const at::Tensor&, at::IntArrayRef);
  std::tuple<at::Tensor, at::Tensor> (*aminmax)(const at::Tensor&, std::optional<int64_t>, bool);
  std::tuple<at::Tensor&, at::Tensor&> (*aminmax_out)(at::Tensor&, at::Tensor&, const at::Tensor&,
                                                       std::optional<int64_t>, bool);
  // max and min of every dim and over a dim (values, indices), argmax, argmin; out= forms.
  at::Tensor (*max_all)(const at::Tensor&);
  at::Tensor (*min_all)(const at::Tensor&);
  std::tuple<at::Tensor, at::Tensor> (*max_dim)(const at::Tensor&, int64_t, bool);
  std::tuple<at::Tensor, at::Tensor> (*min_dim)(const at::Tensor&, int64_t, bool);
  std::tuple<at::Tensor&, at::Tensor&> (*max_dim_out)(at::Tensor&, at::Tensor&, const at::Tensor&, int64_t, bool);
  std::tuple<at::Tensor&, at::Tensor&> (*min_dim_out)(at::Tensor&, at::Tensor&, const at::Tensor&, int64_t, bool);
  at::Tensor (*argmax)(const at::Tensor&, std::optional<int64_t>, bool);
  at::Tensor (*argmin)(const at::Tensor&, std::optional<int64_t>, bool);
  at::Tensor& (*argmax_out)(at::Tensor&, const at::Tensor&, std::optional<int64_t>, bool);
  at::Tensor& (*argmin_out)(at::Tensor&, const at::Tensor&, std::optional<int64_t>, bool);
};
// One device's table, from its namespace of direct calls (at::cpu, at::cuda).
#define TREDUCE_TORCH_KERNELS(NS)                                                                    \
  TorchKernels {                                                                                     \
    &NS::sum, &NS::mean, &NS::amax, &NS::amin, &NS::sum_out, &NS::mean_out, &NS::amax_out,          \
        &NS::amin_out, &NS::var, &NS::std, &NS::var_mean, &NS::std_mean, &NS::var_out, &NS::std_out,  \
        &NS::nansum, &NS::nansum_out, &at::compositeexplicitautograd::logsumexp, &NS::prod, &NS::prod,  \
        &NS::prod_out, &NS::linalg_vector_norm, &NS::linalg_vector_norm_out, &NS::any, &NS::any,      \
        &NS::any, &NS::all, &NS::all, &NS::all, &NS::any_out, &NS::any_out, &NS::any_out, &NS::all_out, \
        &NS::all_out, &NS::all_out, &NS::count_nonzero, &NS::aminmax, &NS::aminmax_out, &NS::max,       \
        &NS::min, &NS::max, &NS::min, &NS::max_out, &NS::min_out, &NS::argmax, &NS::argmin,             \
        &NS::argmax_out, &NS::argmin_out                                                                \
  }

struct Cpu {
  static constexpr c10::DispatchKey kKey = c10::DispatchKey::CPU;
  static DeviceKernels ours() { return cpu_kernels(); }
  static const TorchKernels& torch() {
    static const TorchKernels k = TREDUCE_TORCH_KERNELS(at::cpu);
    return k;
  }
};

#ifdef TREDUCE_WITH_CUDA
struct Cuda {
  static constexpr c10::DispatchKey kKey = c10::DispatchKey::CUDA;
  static DeviceKernels ours() { return cuda_kernels(); }
  static const TorchKernels& torch() {
    static const TorchKernels k = TREDUCE_TORCH_KERNELS(at::cuda);
    return k;
  }
};
#endif

// The aten overloads, one kernel each per device. aten::sum and aten::mean without dims are
// torch's composites over the dim overloads (IntArrayRef{}: every dim).
template <class T>
struct AtenKernels {
  static at::Tensor sum(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
    if (take(ReduceOp::Sum, self, dtype)) return T::ours().sum(self, "auto", std::nullopt, false, dtype);
    return T::torch().sum(self, at::IntArrayRef{}, false, dtype);
  }
  static at::Tensor sum_dim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                            std::optional<at::ScalarType> dtype) {
    if (take(ReduceOp::Sum, self, dtype)) return T::ours().sum(self, "auto", dim, keepdim, dtype);
    return T::torch().sum(self, dim, keepdim, dtype);
  }
  static at::Tensor mean(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
    if (take(ReduceOp::Mean, self, dtype)) return T::ours().mean(self, "auto", std::nullopt, false, dtype);
    return T::torch().mean(self, at::IntArrayRef{}, false, dtype);
  }
  static at::Tensor mean_dim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                             std::optional<at::ScalarType> dtype) {
    if (take(ReduceOp::Mean, self, dtype)) return T::ours().mean(self, "auto", dim, keepdim, dtype);
    return T::torch().mean(self, dim, keepdim, dtype);
  }
  static at::Tensor amax(const at::Tensor& self, at::IntArrayRef dim, bool keepdim) {
    if (take(ReduceOp::Max, self, std::nullopt)) return T::ours().amax(self, "auto", dim, keepdim);
    return T::torch().amax(self, dim, keepdim);
  }
  static at::Tensor amin(const at::Tensor& self, at::IntArrayRef dim, bool keepdim) {
    if (take(ReduceOp::Min, self, std::nullopt)) return T::ours().amin(self, "auto", dim, keepdim);
    return T::torch().amin(self, dim, keepdim);
  }
  // The statistics: aten's correction overloads (var(x, unbiased) and var.dim are torch's
  // composites over them).
  static at::Tensor var(const at::Tensor& self, Dims dim, const Correction& correction, bool keepdim) {
    if (take(ReduceOp::Var, self, std::nullopt)) return T::ours().var(self, dim, correction, keepdim);
    return T::torch().var(self, dim, correction, keepdim);
  }
  static at::Tensor std(const at::Tensor& self, Dims dim, const Correction& correction, bool keepdim) {
    if (take(ReduceOp::Std, self, std::nullopt)) return T::ours().std(self, dim, correction, keepdim);
    return T::torch().std(self, dim, correction, keepdim);
  }
  static std::tuple<at::Tensor, at::Tensor> var_mean(const at::Tensor& self, Dims dim, const Correction& correction,
                                                     bool keepdim) {
    if (take(ReduceOp::VarMean, self, std::nullopt)) return T::ours().var_mean(self, dim, correction, keepdim);
    return T::torch().var_mean(self, dim, correction, keepdim);
  }
  static std::tuple<at::Tensor, at::Tensor> std_mean(const at::Tensor& self, Dims dim, const Correction& correction,
                                                     bool keepdim) {
    if (take(ReduceOp::StdMean, self, std::nullopt)) return T::ours().std_mean(self, dim, correction, keepdim);
    return T::torch().std_mean(self, dim, correction, keepdim);
  }
  static at::Tensor& var_out(const at::Tensor& self, Dims dim, const Correction& correction, bool keepdim,
                             at::Tensor& out) {
    count_out_arg(ReduceOp::Var);
    return T::torch().var_out(out, self, dim, correction, keepdim);
  }
  static at::Tensor& std_out(const at::Tensor& self, Dims dim, const Correction& correction, bool keepdim,
                             at::Tensor& out) {
    count_out_arg(ReduceOp::Std);
    return T::torch().std_out(out, self, dim, correction, keepdim);
  }
  static at::Tensor nansum(const at::Tensor& self, Dims dim, bool keepdim, DtypeArg dtype) {
    if (take(ReduceOp::NanSum, self, dtype)) return T::ours().nansum(self, dim, keepdim, dtype);
    return T::torch().nansum(self, dim, keepdim, dtype);
  }
  static at::Tensor logsumexp(const at::Tensor& self, at::IntArrayRef dim, bool keepdim) {
    if (take(ReduceOp::LogSumExp, self, std::nullopt)) return T::ours().logsumexp(self, dim, keepdim);
    return T::torch().logsumexp(self, dim, keepdim);
  }
  static at::Tensor& nansum_out(const at::Tensor& self, Dims dim, bool keepdim, DtypeArg dtype, at::Tensor& out) {
    count_out_arg(ReduceOp::NanSum);
    return T::torch().nansum_out(out, self, dim, keepdim, dtype);
  }
  static at::Tensor prod(const at::Tensor& self, DtypeArg dtype) {
    if (take(ReduceOp::Prod, self, dtype)) return T::ours().prod(self, std::nullopt, false, dtype);
    return T::torch().prod(self, dtype);
  }
  static at::Tensor prod_dim(const at::Tensor& self, int64_t dim, bool keepdim, DtypeArg dtype) {
    if (take(ReduceOp::Prod, self, dtype)) return T::ours().prod(self, dim, keepdim, dtype);
    return T::torch().prod_dim(self, dim, keepdim, dtype);
  }
  static at::Tensor& prod_out(const at::Tensor& self, int64_t dim, bool keepdim, DtypeArg dtype, at::Tensor& out) {
    count_out_arg(ReduceOp::Prod);
    return T::torch().prod_out(out, self, dim, keepdim, dtype);
  }
  static at::Tensor vector_norm(const at::Tensor& self, const at::Scalar& ord, Dims dim, bool keepdim,
                                DtypeArg dtype) {
    if (take(ReduceOp::Norm, self, dtype)) return T::ours().vector_norm(self, ord, dim, keepdim, dtype);
    return T::torch().vector_norm(self, ord, dim, keepdim, dtype);
  }
  static at::Tensor& vector_norm_out(const at::Tensor& self, const at::Scalar& ord, Dims dim, bool keepdim,
                                     DtypeArg dtype, at::Tensor& out) {
    count_out_arg(ReduceOp::Norm);
    return T::torch().vector_norm_out(out, self, ord, dim, keepdim, dtype);
  }
  // any and all: aten's three overloads (every dim, one dim, a list) into our one.
  static at::Tensor any(const at::Tensor& self) {
    if (take(ReduceOp::Any, self, std::nullopt)) return T::ours().any(self, std::nullopt, false);
    return T::torch().any(self);
  }
  static at::Tensor any_dim(const at::Tensor& self, int64_t dim, bool keepdim) {
    if (take(ReduceOp::Any, self, std::nullopt)) return T::ours().any(self, at::IntArrayRef(dim), keepdim);
    return T::torch().any_dim(self, dim, keepdim);
  }
  static at::Tensor any_dims(const at::Tensor& self, Dims dim, bool keepdim) {
    if (take(ReduceOp::Any, self, std::nullopt)) return T::ours().any(self, dim, keepdim);
    return T::torch().any_dims(self, dim, keepdim);
  }
  static at::Tensor all(const at::Tensor& self) {
    if (take(ReduceOp::All, self, std::nullopt)) return T::ours().all(self, std::nullopt, false);
    return T::torch().all(self);
  }
  static at::Tensor all_dim(const at::Tensor& self, int64_t dim, bool keepdim) {
    if (take(ReduceOp::All, self, std::nullopt)) return T::ours().all(self, at::IntArrayRef(dim), keepdim);
    return T::torch().all_dim(self, dim, keepdim);
  }
  static at::Tensor all_dims(const at::Tensor& self, Dims dim, bool keepdim) {
    if (take(ReduceOp::All, self, std::nullopt)) return T::ours().all(self, dim, keepdim);
    return T::torch().all_dims(self, dim, keepdim);
  }
  static at::Tensor& any_out(const at::Tensor& self, at::Tensor& out) {
    count_out_arg(ReduceOp::Any);
    return T::torch().any_out(out, self);
  }
  static at::Tensor& any_dim_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& out) {
    count_out_arg(ReduceOp::Any);
    return T::torch().any_dim_out(out, self, dim, keepdim);
  }
  static at::Tensor& any_dims_out(const at::Tensor& self, Dims dim, bool keepdim, at::Tensor& out) {
    count_out_arg(ReduceOp::Any);
    return T::torch().any_dims_out(out, self, dim, keepdim);
  }
  static at::Tensor& all_out(const at::Tensor& self, at::Tensor& out) {
    count_out_arg(ReduceOp::All);
    return T::torch().all_out(out, self);
  }
  static at::Tensor& all_dim_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& out) {
    count_out_arg(ReduceOp::All);
    return T::torch().all_dim_out(out, self, dim, keepdim);
  }
  static at::Tensor& all_dims_out(const at::Tensor& self, Dims dim, bool keepdim, at::Tensor& out) {
    count_out_arg(ReduceOp::All);
    return T::torch().all_dims_out(out, self, dim, keepdim);
  }
  // count_nonzero(x, dim=None) is torch's composite over this one.
  static at::Tensor count_nonzero(const at::Tensor& self, at::IntArrayRef dim) {
    if (take(ReduceOp::CountNonzero, self, std::nullopt)) return T::ours().count_nonzero(self, dim);
    return T::torch().count_nonzero(self, dim);
  }
  static std::tuple<at::Tensor, at::Tensor> aminmax(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
    if (take(ReduceOp::AMinMax, self, std::nullopt)) return T::ours().aminmax(self, dim, keepdim);
    return T::torch().aminmax(self, dim, keepdim);
  }
  static std::tuple<at::Tensor&, at::Tensor&> aminmax_out(const at::Tensor& self, std::optional<int64_t> dim,
                                                          bool keepdim, at::Tensor& min, at::Tensor& max) {
    count_out_arg(ReduceOp::AMinMax);
    return T::torch().aminmax_out(min, max, self, dim, keepdim);
  }
  // max and min of every dim are amax and amin (with torch's error for no elements); over a dim,
  // values and indices.
  static at::Tensor max_all(const at::Tensor& self) {
    if (!take(ReduceOp::MaxDim, self, std::nullopt)) return T::torch().max_all(self);
    TORCH_CHECK(self.numel() > 0, "max(): Expected reduction dim to be specified for input.numel() == 0. Specify "
                "the reduction dim with the 'dim' argument.");
    return T::ours().amax(self, "auto", std::nullopt, false);
  }
  static at::Tensor min_all(const at::Tensor& self) {
    if (!take(ReduceOp::MinDim, self, std::nullopt)) return T::torch().min_all(self);
    TORCH_CHECK(self.numel() > 0, "min(): Expected reduction dim to be specified for input.numel() == 0. Specify "
                "the reduction dim with the 'dim' argument.");
    return T::ours().amin(self, "auto", std::nullopt, false);
  }
  static std::tuple<at::Tensor, at::Tensor> max_dim(const at::Tensor& self, int64_t dim, bool keepdim) {
    if (take(ReduceOp::MaxDim, self, std::nullopt)) return T::ours().max(self, dim, keepdim);
    return T::torch().max_dim(self, dim, keepdim);
  }
  static std::tuple<at::Tensor, at::Tensor> min_dim(const at::Tensor& self, int64_t dim, bool keepdim) {
    if (take(ReduceOp::MinDim, self, std::nullopt)) return T::ours().min(self, dim, keepdim);
    return T::torch().min_dim(self, dim, keepdim);
  }
  static std::tuple<at::Tensor&, at::Tensor&> max_dim_out(const at::Tensor& self, int64_t dim, bool keepdim,
                                                          at::Tensor& values, at::Tensor& indices) {
    count_out_arg(ReduceOp::MaxDim);
    return T::torch().max_dim_out(values, indices, self, dim, keepdim);
  }
  static std::tuple<at::Tensor&, at::Tensor&> min_dim_out(const at::Tensor& self, int64_t dim, bool keepdim,
                                                          at::Tensor& values, at::Tensor& indices) {
    count_out_arg(ReduceOp::MinDim);
    return T::torch().min_dim_out(values, indices, self, dim, keepdim);
  }
  static at::Tensor argmax(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
    if (take(ReduceOp::ArgMax, self, std::nullopt)) return T::ours().argmax(self, dim, keepdim);
    return T::torch().argmax(self, dim, keepdim);
  }
  static at::Tensor argmin(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
    if (take(ReduceOp::ArgMin, self, std::nullopt)) return T::ours().argmin(self, dim, keepdim);
    return T::torch().argmin(self, dim, keepdim);
  }
  static at::Tensor& argmax_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim, at::Tensor& out) {
    count_out_arg(ReduceOp::ArgMax);
    return T::torch().argmax_out(out, self, dim, keepdim);
  }
  static at::Tensor& argmin_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim, at::Tensor& out) {
    count_out_arg(ReduceOp::ArgMin);
    return T::torch().argmin_out(out, self, dim, keepdim);
  }
  // out=: torch's kernel, counted (writing into a caller's tensor, with its resizing and dtype
  // rules, is not what the ops do).
  static at::Tensor& sum_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                             std::optional<at::ScalarType> dtype, at::Tensor& out) {
    count_out_arg(ReduceOp::Sum);
    return T::torch().sum_out(out, self, dim, keepdim, dtype);
  }
  static at::Tensor& mean_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                              std::optional<at::ScalarType> dtype, at::Tensor& out) {
    count_out_arg(ReduceOp::Mean);
    return T::torch().mean_out(out, self, dim, keepdim, dtype);
  }
  static at::Tensor& amax_out(const at::Tensor& self, at::IntArrayRef dim, bool keepdim, at::Tensor& out) {
    count_out_arg(ReduceOp::Max);
    return T::torch().amax_out(out, self, dim, keepdim);
  }
  static at::Tensor& amin_out(const at::Tensor& self, at::IntArrayRef dim, bool keepdim, at::Tensor& out) {
    count_out_arg(ReduceOp::Min);
    return T::torch().amin_out(out, self, dim, keepdim);
  }

  static std::unique_ptr<torch::Library> registered() {
    auto m = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", T::kKey, __FILE__, __LINE__);
    m->impl("sum", &sum);
    m->impl("sum.dim_IntList", &sum_dim);
    m->impl("sum.IntList_out", &sum_out);
    m->impl("mean", &mean);
    m->impl("mean.dim", &mean_dim);
    m->impl("mean.out", &mean_out);
    m->impl("amax", &amax);
    m->impl("amax.out", &amax_out);
    m->impl("amin", &amin);
    m->impl("amin.out", &amin_out);
    m->impl("var.correction", &var);
    m->impl("var.correction_out", &var_out);
    m->impl("std.correction", &std);
    m->impl("std.correction_out", &std_out);
    m->impl("var_mean.correction", &var_mean);
    m->impl("std_mean.correction", &std_mean);
    m->impl("nansum", &nansum);
    m->impl("nansum.out", &nansum_out);
    m->impl("logsumexp", &logsumexp);
    m->impl("prod", &prod);
    m->impl("prod.dim_int", &prod_dim);
    m->impl("prod.int_out", &prod_out);
    m->impl("linalg_vector_norm", &vector_norm);
    m->impl("linalg_vector_norm.out", &vector_norm_out);
    m->impl("any", &any);
    m->impl("any.dim", &any_dim);
    m->impl("any.dims", &any_dims);
    m->impl("any.all_out", &any_out);
    m->impl("any.out", &any_dim_out);
    m->impl("any.dims_out", &any_dims_out);
    m->impl("all", &all);
    m->impl("all.dim", &all_dim);
    m->impl("all.dims", &all_dims);
    m->impl("all.all_out", &all_out);
    m->impl("all.out", &all_dim_out);
    m->impl("all.dims_out", &all_dims_out);
    m->impl("count_nonzero.dim_IntList", &count_nonzero);
    m->impl("aminmax", &aminmax);
    m->impl("aminmax.out", &aminmax_out);
    m->impl("max", &max_all);
    m->impl("max.dim", &max_dim);
    m->impl("max.dim_max", &max_dim_out);
    m->impl("min", &min_all);
    m->impl("min.dim", &min_dim);
    m->impl("min.dim_min", &min_dim_out);
    m->impl("argmax", &argmax);
    m->impl("argmax.out", &argmax_out);
    m->impl("argmin", &argmin);
    m->impl("argmin.out", &argmin_out);
    return m;
  }
};

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
    g_registrations.push_back(AtenKernels<Cpu>::registered());
#ifdef TREDUCE_WITH_CUDA
    g_registrations.push_back(AtenKernels<Cuda>::registered());
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
      rows.push_back(std::string(op_name(static_cast<ReduceOp>(op))) + '\t' + kOutcomeNames[o] + '\t' +
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
