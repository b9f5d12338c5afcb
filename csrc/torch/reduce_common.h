// Torch-side checks and planning shared by the CPU and CUDA implementations of every op, so
// that both reject the same inputs with the same messages and read the input the same way.
#pragma once

#include <string>

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>
#include <c10/core/ScalarType.h>
#include <c10/util/OptionalArrayRef.h>
#include <c10/util/SmallVector.h>
#include <c10/util/string_view.h>
#include <torch/library.h>

#include <array>
#include <optional>
#include <tuple>
#include <vector>

#include "../core/dtype.h"
#include "../core/layout.h"
#include "../core/cross_entropy.h"
#include "../core/layer_norm.h"
#include "../core/normalize.h"
#include "../core/reduce_ops.h"
#include "../core/variant.h"
#include "ops.h"

namespace treduce {

inline constexpr at::ScalarType kScalarTypes[kNumDTypes] = {
    at::kBool, at::kByte, at::kChar, at::kShort, at::kInt,
    at::kLong, at::kHalf, at::kBFloat16, at::kFloat, at::kDouble};

constexpr at::ScalarType to_scalar_type(DType t) { return kScalarTypes[static_cast<int>(t)]; }

// One call of an op, checked and planned.
struct Prepared {
  ReduceOp op;
  SumTypes types;     // amax/amin: in = mid = out, acc as minmax_acc_dtype; var family: in = mid
                      // = out, acc float or double (CUDA's; the CPU accumulates in double)
  int variant = 0;    // index into the device's variant table
  bool is_auto = true;
  at::Tensor out;     // the result, allocated (contiguous)
  bool done = false;  // out is final already: it is empty, or nothing was reduced into it
  at::Tensor input;   // what the kernels read: self, or a copy with the reduced dims last
  Layout3 layout;     // input and out as (outer, reduced, inner); see layout.h
  IndexedLayout indexed;  // the same as plain indexes, for small reductions (layout.h)
  ProjectArgs project;  // what the op's projection reads (reduce_ops.h)
  at::Tensor out2;    // var_mean / std_mean: the mean (same shape and dtype as out)
  // auto from 2^16 results, kept dims expanded in the input (stride 0): the kernels write the
  // results at index 0 of each into these (contiguous, size 1 on those dims), and the device's
  // run copies them along into out and out2 (plan_layout). Undefined otherwise.
  at::Tensor distinct, distinct2;
};

// Checks the arguments exactly as torch does for its own op (dims, dtypes, empty inputs),
// allocates the result and works out the layout. Non-auto variants get a contiguous input
// and a full reduction (they reject dims that leave more than one result).
Prepared prepare_reduce(ReduceOp op, const at::Tensor& self, c10::string_view variant,
                        at::OptionalIntArrayRef dim, bool keepdim,
                        std::optional<at::ScalarType> dtype);

// var, std, var_mean and std_mean: torch's checks and warning, the correction (default 1).
Prepared prepare_var(ReduceOp op, const at::Tensor& self, at::OptionalIntArrayRef dim,
                     const std::optional<at::Scalar>& correction, bool keepdim);

// nansum, nanmean and logsumexp: torch's type rules and errors; inputs of another dtype than
// the result's are converted first. An integer nansum is a sum (p.op says Sum).
Prepared prepare_nan_or_lse(ReduceOp op, const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                            std::optional<at::ScalarType> dtype);

// prod: torch's type rules (as sum's); inputs the kernels do not read as they are converted first.
Prepared prepare_prod(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                      std::optional<at::ScalarType> dtype);

// vector_norm: torch's checks and errors; p.project.scalar is the order. Every reduced dim of
// size 1 is torch's |x| (x != 0 for order 0), done here; an order other than 2, 1, 0 and +-inf
// reads |x|^p, computed here.
Prepared prepare_norm(const at::Tensor& self, const at::Scalar& ord, at::OptionalIntArrayRef dim, bool keepdim,
                      std::optional<at::ScalarType> dtype);

// any, all and count_nonzero: sums of x != 0 in int64 (p.types.mid is bool), stored as truth
// values for any and all (p.project.logic); torch's result dtypes. any and all over an empty
// list of dims are x != 0 (p.done).
Prepared prepare_logic(ReduceOp op, const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim);

// aminmax: torch's errors for empty inputs; the minimum into p.out, the maximum into p.out2.
Prepared prepare_aminmax(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim);

// max, min (over a dim), argmax and argmin: torch's checks and errors; values into p.out, int64
// positions into p.out2. Every dim (argmax's default) reads the tensor in row-major order (a
// copy when it is not contiguous).
Prepared prepare_indexed(ReduceOp op, const at::Tensor& self, std::optional<int64_t> dim, bool keepdim);

// variant="exact" (exact.h): whether it sums exactly (a floating input and result; otherwise
// auto's sum, exact already, is the answer), and the prepared sum of the elements converted to
// the result's dtype first, as torch.sum converts them (p.types.in is that dtype). With
// `widen`, a result dtype that holds every input element exactly (float32 from float16 or
// bfloat16, float64 from any) takes the input as it is (p.types.in the input's dtype, p.types.out
// the result's): the same exact sum, without the converted copy.
bool exact_applies(const at::Tensor& self, std::optional<at::ScalarType> dtype);
Prepared prepare_exact(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                       std::optional<at::ScalarType> dtype, bool widen = false);

// The exact state op (treduce._exact_state): prepare_exact for floating inputs and results,
// torch's kind of error otherwise; and its result, the reduced shape plus one dim of
// kExactStateWords int64 words, zeros (no elements) when p.done.
Prepared prepare_exact_state(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                             std::optional<at::ScalarType> dtype, bool widen = false);
at::Tensor exact_state_tensor(const Prepared& p);

// treduce._exact_round(state, dtype): checks the state and allocates the result (the state's
// shape without its last dim, in the floating `dtype`).
at::Tensor exact_round_result(const at::Tensor& state, at::ScalarType dtype);

// The DType of a scalar type the ops take (an internal error for any other).
DType dtype_of_scalar(at::ScalarType t);

const char* op_name(ReduceOp op);

namespace cuda {
// torch_reduce.explain: the plan `auto` follows on the GPU for a prepared call, as JSON
// (torch/cuda/ops.cpp; CUDA builds only).
std::string explain_cuda(const Prepared& p);
}  // namespace cuda

// One device's kernels of the ops, as TORCH_LIBRARY_IMPL registers them: for callers that
// are already below the dispatcher's autograd and device keys (the aten override).
using SumKernel = at::Tensor (*)(const at::Tensor&, c10::string_view, at::OptionalIntArrayRef, bool,
                                 std::optional<at::ScalarType>);
using ExtremumKernel = at::Tensor (*)(const at::Tensor&, c10::string_view, at::OptionalIntArrayRef, bool);
using VarKernel = at::Tensor (*)(const at::Tensor&, at::OptionalIntArrayRef, const std::optional<at::Scalar>&,
                                 bool);
using VarMeanKernel = std::tuple<at::Tensor, at::Tensor> (*)(const at::Tensor&, at::OptionalIntArrayRef,
                                                             const std::optional<at::Scalar>&, bool);
using NanKernel = at::Tensor (*)(const at::Tensor&, at::OptionalIntArrayRef, bool, std::optional<at::ScalarType>);
using LogSumExpKernel = at::Tensor (*)(const at::Tensor&, at::IntArrayRef, bool);
using ProdKernel = at::Tensor (*)(const at::Tensor&, std::optional<int64_t>, bool, std::optional<at::ScalarType>);
using NormKernel = at::Tensor (*)(const at::Tensor&, const at::Scalar&, at::OptionalIntArrayRef, bool,
                                  std::optional<at::ScalarType>);
using LogicKernel = at::Tensor (*)(const at::Tensor&, at::OptionalIntArrayRef, bool);
using CountKernel = at::Tensor (*)(const at::Tensor&, at::OptionalIntArrayRef);
using AMinMaxKernel = std::tuple<at::Tensor, at::Tensor> (*)(const at::Tensor&, std::optional<int64_t>, bool);
using MaxDimKernel = std::tuple<at::Tensor, at::Tensor> (*)(const at::Tensor&, int64_t, bool);
using ArgKernel = at::Tensor (*)(const at::Tensor&, std::optional<int64_t>, bool);
using SoftmaxKernel = at::Tensor (*)(const at::Tensor&, int64_t, std::optional<at::ScalarType>);
using SoftmaxBackwardKernel = at::Tensor (*)(const at::Tensor&, const at::Tensor&, int64_t, at::ScalarType);
using CrossEntropyKernel = at::Tensor (*)(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                                          int64_t, int64_t, double);
using CrossEntropyForwardKernel = std::tuple<at::Tensor, at::Tensor, at::Tensor> (*)(
    const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&, int64_t, int64_t, double);
using CrossEntropyBackwardKernel = at::Tensor (*)(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                                  const std::optional<at::Tensor>&, int64_t, int64_t, double,
                                                  const at::Tensor&, const at::Tensor&);
using LayerNormKernel = at::Tensor (*)(const at::Tensor&, at::IntArrayRef, const std::optional<at::Tensor>&,
                                       const std::optional<at::Tensor>&, double);
using LayerNormForwardKernel = std::tuple<at::Tensor, at::Tensor, at::Tensor> (*)(
    const at::Tensor&, at::IntArrayRef, const std::optional<at::Tensor>&, const std::optional<at::Tensor>&, double);
using LayerNormBackwardKernel = std::tuple<at::Tensor, at::Tensor, at::Tensor> (*)(
    const at::Tensor&, const at::Tensor&, at::IntArrayRef, const at::Tensor&, const at::Tensor&,
    const std::optional<at::Tensor>&, const std::optional<at::Tensor>&, std::array<bool, 3>);
using RmsNormKernel = at::Tensor (*)(const at::Tensor&, at::IntArrayRef, const std::optional<at::Tensor>&,
                                     std::optional<double>);
using RmsNormForwardKernel = std::tuple<at::Tensor, at::Tensor> (*)(const at::Tensor&, at::IntArrayRef,
                                                                   const std::optional<at::Tensor>&,
                                                                   std::optional<double>);
using RmsNormBackwardKernel = std::tuple<at::Tensor, at::Tensor> (*)(const at::Tensor&, const at::Tensor&,
                                                                    at::IntArrayRef, const at::Tensor&,
                                                                    const std::optional<at::Tensor>&,
                                                                    std::array<bool, 2>);
// The floating dtypes the normalizing ops take (and the override routes to them).
inline bool is_floating(at::ScalarType t) {
  return t == at::kHalf || t == at::kBFloat16 || t == at::kFloat || t == at::kDouble;
}

// One device's kernel of each op (ops.h), by name: a table filled field by field, so that no
// kernel can land in another op's place; register_kernels checks every one is set.
struct DeviceKernels {
#define TREDUCE_FIELD(name, kernel, autograd, schema) kernel name = nullptr;
  TREDUCE_ALL_OPS(TREDUCE_FIELD)
#undef TREDUCE_FIELD
};
// (Built once: the override asks for them on every call it routes.)
const DeviceKernels& cpu_kernels();
const DeviceKernels& cuda_kernels();  // only in a build with CUDA

// cross_entropy's forward and backward: torch's checks (the class dim 1, or 0 for a (C,) input;
// Long targets of the other dims' shape; a (C,) weight of the logits' dtype; label smoothing in
// [0, 1]), contiguous inputs, the results allocated (loss in the logits' dtype, logsumexp and
// total weight in the accumulator's: float32, float64 for float64 logits) and, forward, the
// per-sample workspace. `check_targets`: the CPU's IndexError for a target out of range (CUDA
// cannot look without synchronising).
struct PreparedCrossEntropy {
  CrossEntropyArgs args;
  at::Tensor x, target, weight, loss, lse, total_weight, workspace, grad, grad_x;
};
PreparedCrossEntropy prepare_cross_entropy(const at::Tensor& self, const at::Tensor& target,
                                           const std::optional<at::Tensor>& weight, int64_t reduction,
                                           int64_t ignore_index, double label_smoothing, bool check_targets);
PreparedCrossEntropy prepare_cross_entropy_backward(const at::Tensor& grad, const at::Tensor& self,
                                                    const at::Tensor& target, const std::optional<at::Tensor>& weight,
                                                    int64_t reduction, int64_t ignore_index, double label_smoothing,
                                                    const at::Tensor& lse, const at::Tensor& total_weight);

// layer_norm and rms_norm: torch's checks (normalized_shape at least one dim, the input's last
// dims; weight and bias of that shape), here also of the input's floating dtype (weight and
// bias too: no mixed dtypes), the inputs made contiguous, the results allocated: y like the
// input, mean and rstd in the accumulator's dtype (float32, float64 for float64) of shape
// input.shape[:-k] + [1] * k, as torch's CUDA kernels give them. Backward: grad_x, grad_weight
// and grad_bias where the mask asks (and the op has them). A row of 0 elements: mean 0, rstd
// NaN, as torch's; `empty` then says there is nothing for a kernel to do.
struct PreparedLayerNorm {
  LayerNormArgs args;
  at::Tensor x, weight, bias, y, mean, rstd, grad, grad_x, grad_weight, grad_bias;
  bool empty = false;
};
PreparedLayerNorm prepare_layer_norm(NormKind kind, const at::Tensor& input, at::IntArrayRef normalized_shape,
                                     const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
                                     std::optional<double> eps);
PreparedLayerNorm prepare_layer_norm_backward(NormKind kind, const at::Tensor& grad, const at::Tensor& input,
                                              at::IntArrayRef normalized_shape, const at::Tensor& mean,
                                              const at::Tensor& rstd, const std::optional<at::Tensor>& weight,
                                              const std::optional<at::Tensor>& bias, std::array<bool, 3> mask);

// The normalizing ops' fields of a device's table (torch/cpu/normalize_cpu.cpp,
// torch/cuda/normalize_cuda.cpp).
namespace cpu {
void set_normalizing_kernels(DeviceKernels& k);
}
namespace cuda {
void set_normalizing_kernels(DeviceKernels& k);
}

// Registers one device's kernels as the treduce ops of its dispatch key (in the device's
// TORCH_LIBRARY_IMPL): one list of op names for every device.
void register_kernels(torch::Library& m, const DeviceKernels& k);

// Per-dim flags and sizes of a call: on the stack for the usual few dims (every op plans its
// layout on every call; heap allocations there were a measurable part of a small call).
inline constexpr unsigned kInlineDims = 8;
using DimFlags = c10::SmallVector<bool, kInlineDims>;

// Which of ndim dims `dim` reduces: all of them for None or [], else the listed ones, wrapped
// as torch wraps them; torch's errors for a dim out of range or repeated.
DimFlags reduced_dims(int64_t ndim, at::OptionalIntArrayRef dim);

// softmax and log_softmax (forward: self, dim, dtype) and their backwards (grad_output, output,
// dim, input_dtype): torch's checks, the result allocated (contiguous, as torch's), the inputs
// made contiguous (and converted where dtype= asks for a pair the kernels do not take), the
// dims as (outer, size, inner). `convert_to` is set where the kernels write another dtype than
// the one asked for (a backward into a dtype they do not pair): the caller converts `out` to it.
struct PreparedSoftmax {
  NormalizeArgs args;
  at::Tensor x, y, out;
  std::optional<at::ScalarType> convert_to;
};
PreparedSoftmax prepare_softmax(SoftmaxOp op, const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype);
PreparedSoftmax prepare_softmax_backward(SoftmaxOp op, const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                                         at::ScalarType input_dtype);

}  // namespace treduce
